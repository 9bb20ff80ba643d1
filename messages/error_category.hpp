#pragma once

#include <string>

#include <caf/error.hpp>
#include <caf/make_message.hpp>

#include <uma/sys/error.hpp>

CAF_ERROR_CODE_ENUM(uma::errc, "uma")

namespace uma {

/// The CAF error category atom of uma's errors.
inline constexpr caf::atom_value error_category = caf::atom("uma");

/// A `caf::error` of the `uma` category carrying `message`.
[[nodiscard]] caf::error make_caf_error(errc code, std::string message);
/// The same for a caught `uma::error`.
[[nodiscard]] caf::error make_caf_error(const error& e);

/// Back from the actor boundary: a uma error as it was; CAF's own errors mapped onto uma codes
/// (a receiver that went down or a broken promise means the allocator stopped).
[[nodiscard]] error to_uma_error(const caf::error& e);

/// "uma::out_of_memory: allocate: 1099511627776 bytes ..." (used by the registered renderer).
[[nodiscard]] std::string render(const caf::error& e);

}  // namespace uma
