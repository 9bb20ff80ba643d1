#pragma once

// Checks the remote gateway runs on what a peer sent, before anything changes. Every value
// arrives from the network: CAF's deserializer fills an enum with whatever byte was on the wire,
// so an out-of-range attach flag, completion, advice or location kind is refused here, and so are
// labels the serving node would otherwise store, copy into every region report and print.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <uma/messages/remote_types.hpp>

namespace uma::detail {

/// Why a request was refused: the code and the message naming what was wrong.
struct refusal {
  errc code = errc::invalid_argument;
  std::string message{};
};

/// The attach flag, label (length up to `max_label_bytes`, UTF-8 without control, format or
/// separator characters) of an allocate request.
[[nodiscard]] std::optional<refusal> check_allocate(const remote_allocate_request& r,
                                                    std::size_t max_label_bytes);
/// Every location's kind is one `location::kind` names.
[[nodiscard]] std::optional<refusal> check_locations(std::string_view op,
                                                     const std::vector<location>& locations);
/// `when` is one of `completion`'s values.
[[nodiscard]] std::optional<refusal> check_completion(std::string_view op, completion when);
/// The advice value and its location.
[[nodiscard]] std::optional<refusal> check_advise(const remote_advise_request& r);

/// What a client checks of a snapshot a server sent before rendering it: every region's policy,
/// attach flag and last prefetch location kind, and every event's kind, in range. The error
/// names the region or event and the value.
[[nodiscard]] std::optional<refusal> check_snapshot(const remote_snapshot& s);

/// Why `export_ipc` of `h` is refused: managed memory cannot be exported over CUDA IPC.
[[nodiscard]] std::string ipc_refusal_message(const region_handle& h);

/// `a + b`, or an overflow refusal naming `what` and both operands.
[[nodiscard]] std::optional<std::uint64_t> checked_add(std::uint64_t a, std::uint64_t b);
[[nodiscard]] refusal overflow_refusal(std::string_view what, std::uint64_t a, std::uint64_t b);

/// `text` with control characters (and backslashes) written as `\n`, `\t`, `\xNN`, Unicode
/// controls, format and separator characters as `\u{202e}`, and bytes that are no UTF-8 as
/// `\xNN`: safe to print on one line of a terminal, with nothing reordered or hidden.
[[nodiscard]] std::string escape_control(std::string_view text);

}  // namespace uma::detail
