#include <uma/actors/remote/wire/detail/unfinished_ledger.hpp>

#include <algorithm>

namespace uma::detail {

std::string_view to_string(guard_reason r) noexcept {
  switch (r) {
    case guard_reason::none:
      return "none";
    case guard_reason::not_http2:
      return "not_http2";
    case guard_reason::pings:
      return "pings";
    case guard_reason::settings:
      return "settings";
    case guard_reason::resets:
      return "resets";
    case guard_reason::empty_frames:
      return "empty_frames";
    case guard_reason::header_block:
      return "header_block";
    case guard_reason::streams:
      return "streams";
    case guard_reason::unfinished:
      return "unfinished";
    case guard_reason::identity_share:
      return "identity_share";
  }
  return "?";
}

guard_reason unfinished_ledger::add(const std::string& identity, std::uint64_t held,
                                    std::uint64_t bytes) {
  if (bytes == 0)
    return guard_reason::none;
  std::lock_guard lock(mutex_);
  const auto [it, added] = by_identity_.try_emplace(identity);
  auto& h = it->second;
  const auto connections = h.connections + (held == 0 ? 1u : 0u);
  const auto mine = h.bytes + bytes;
  const bool refused = (mine > limits_.unfinished_per_identity &&
                        held + bytes > limits_.unfinished_per_identity / connections) ||
                       (total_ + bytes > limits_.unfinished_total &&
                        mine > limits_.unfinished_total / by_identity_.size());
  if (refused) {
    if (added)
      by_identity_.erase(it);
    return guard_reason::identity_share;
  }
  h.bytes = mine;
  h.connections = connections;
  total_ += bytes;
  return guard_reason::none;
}

void unfinished_ledger::remove(const std::string& identity, std::uint64_t held,
                               std::uint64_t bytes) noexcept {
  if (bytes == 0)
    return;
  std::lock_guard lock(mutex_);
  const auto it = by_identity_.find(identity);
  if (it == by_identity_.end())
    return;
  auto& h = it->second;
  const auto taken = std::min(bytes, h.bytes);
  total_ -= taken;
  h.bytes -= taken;
  if (bytes >= held && h.connections > 0)
    --h.connections;
  if (h.bytes == 0)
    by_identity_.erase(it);
}

std::uint64_t unfinished_ledger::total() const {
  std::lock_guard lock(mutex_);
  return total_;
}

std::uint64_t unfinished_ledger::of(const std::string& identity) const {
  std::lock_guard lock(mutex_);
  const auto it = by_identity_.find(identity);
  return it == by_identity_.end() ? 0 : it->second.bytes;
}

}  // namespace uma::detail
