#pragma once

// Pretty-printing of Boost.JSON values, for the tool's and the bench's JSON outputs: Boost.JSON
// builds and escapes, this only lays the result out for people who read it.

#include <cstddef>
#include <limits>
#include <string>

#include <boost/json/value.hpp>

namespace uma::cli {

/// `v` with two-space indentation and `"key": value` pairs, ending with a newline. Arrays and
/// objects nested `inline_depth` levels deep or more are written on one line
/// (`{"id": 1, "bytes": 4096}`), and with `inline_flat` so is every nested one that holds no
/// array or object. Strings are Boost.JSON's serialization (its escaping), doubles their
/// shortest round-trip form.
[[nodiscard]] std::string pretty_json(
    const boost::json::value& v, std::size_t inline_depth = std::numeric_limits<std::size_t>::max(),
    bool inline_flat = false);

}  // namespace uma::cli
