#pragma once

// The node arbiter's options (docs/distributed.md "One GPU, many processes"): `uma serve
// --arbiter-total/--arbiter-policy/--arbiter-deadline` and `uma budgets --set-total/--set-policy`.
// Their CLI11 declarations check the form of each value; what only the backend or the arbiter
// can judge (a device the backend has, its memory, a policy's tenant and weight) is checked when
// serve starts, still a usage error.

#include <functional>
#include <memory>
#include <string>

#include <uma/actors/remote/arbiter/arbiter.hpp>
#include <uma/sys/backend.hpp>
#include "tools/cli_options.hpp"

namespace CLI {
class App;
}

namespace uma::cli {

/// The highest device number an arbiter option takes (the backend's own count is checked when
/// serve starts).
inline constexpr int max_arbiter_device = 1023;

/// Declares `--arbiter-total` (repeatable, a device once), `--arbiter-policy` (repeatable) and
/// `--arbiter-deadline` on `serve`, writing into `o`.
void add_arbiter_options(CLI::App& serve, options& o);

/// Declares `--set-total` and `--set-policy` on `budgets`, writing into `o`.
void add_budget_settings(CLI::App& budgets, options& o);

/// What no single option shows: --arbiter-policy and --arbiter-deadline without --arbiter-total.
/// Empty when accepted.
[[nodiscard]] std::string check_arbiter_combination(const options& o);

/// --arbiter-total against the backend serve runs on: a device it has, at most that device's
/// memory. Returns the complaint naming the option and its value, empty when accepted.
[[nodiscard]] std::string arbiter_totals_complaint(const options& o, const backend& b);

/// The node's arbiter of `o` (null without --arbiter-total), each decision to `log`. Throws
/// `error(invalid_argument)` naming the --arbiter-policy the arbiter refuses and why.
[[nodiscard]] std::shared_ptr<arbiter> make_node_arbiter(
    const options& o, std::function<void(const std::string&)> log);

/// "TENANT:DEVICE:MIN_BYTES:PRIORITY:WEIGHT" of `p`, as the options spell it.
[[nodiscard]] std::string to_string(const tenant_policy& p);

}  // namespace uma::cli
