#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

namespace uma {

/// How much a library message matters. Messages below the level set with `set_log_level` are
/// dropped before anything is formatted.
enum class log_level : std::uint8_t {
  debug = 0,
  info = 1,
  warning = 2,  ///< something was lost or skipped, uma carries on (a failed free, a leak)
  error = 3,    ///< an operation failed and nobody else will hear of it
};

/// "debug", "info", "warning" or "error".
[[nodiscard]] std::string_view to_string(log_level level) noexcept;

/// Receives every message uma's library code reports (it never prints by itself). Called on
/// whatever thread reported (an actor, a worker lane, a CUDA callback thread), possibly from
/// several at once: a sink must be thread-safe. An exception it throws is swallowed.
using log_sink = std::function<void(log_level level, std::string_view message)>;

/// Replaces the sink; an empty function restores the default, which writes
/// `uma: <level>: <message>` lines to stderr. Returns the sink it replaced (empty for the
/// default). Thread-safe; a message being reported meanwhile goes to either sink.
log_sink set_log_sink(log_sink sink);

/// Drops messages below `level` from now on (the default is `info`).
void set_log_level(log_level level) noexcept;

/// The level below which messages are dropped.
[[nodiscard]] log_level current_log_level() noexcept;

/// True when a message of `level` would reach the sink: test it before formatting an expensive
/// message.
[[nodiscard]] bool log_enabled(log_level level) noexcept;

/// Reports `message` to the sink if `level` is enabled. Never throws.
void log(log_level level, std::string_view message) noexcept;

}  // namespace uma
