#pragma once

// The arbiter's report and the operator's settings over the node's socket
// (`uma budgets --connect`, docs/cli.md): a client that is not a member.

#include <chrono>
#include <memory>
#include <string>

#include <uma/actors/remote/arbiter/arbiter_types.hpp>
#include <uma/actors/remote/remote_client.hpp>

namespace uma {

/// Blocking; thread-safe.
class arbiter_client {
 public:
  /// Connects to the node at `target` (backend_error naming it when it cannot be reached).
  explicit arbiter_client(std::string target, remote_client_options options = {});
  arbiter_client(const arbiter_client&) = delete;
  arbiter_client& operator=(const arbiter_client&) = delete;
  ~arbiter_client();

  /// Every device's totals, with this identity's members (the operator's connection: all
  /// members) and their decisions. not_supported when the node has no arbiter.
  [[nodiscard]] arbiter_report report() const;
  /// The operator's: `tenant`'s policy on `device` (members capped to it at once). A tenant's
  /// connection gets invalid_argument ("... is the operator's").
  arbiter_report set_policy(const std::string& tenant, int device, const arbiter_policy& policy);
  /// The operator's: the bytes `device` shares (quota_exceeded below the members' minimums).
  arbiter_report set_total(int device, std::uint64_t bytes);

 private:
  struct impl;
  std::string target_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<impl> impl_;
};

}  // namespace uma
