#pragma once

// The help texts of the `uma` tool's commands: what each command's help says beyond the option
// lists CLI11 generates (tools/cli_options.cpp).

#include <span>
#include <string_view>

#include "tools/cli_options.hpp"

namespace uma::cli {

/// What the help of a command says beyond its options.
struct command_text {
  command which;
  std::string_view summary;   ///< one line: the overview's command list
  std::string_view synopsis;  ///< after "usage: "
  std::string_view details;   ///< after the options
};

/// The note on --caf.KEY=VALUE options that ends the help of the commands running an actor
/// system.
extern const std::string_view caf_note;

/// Every command's text, the overview (`command::help`) first.
[[nodiscard]] std::span<const command_text> command_texts() noexcept;

/// The text of `c` (the overview's for an unknown one).
[[nodiscard]] const command_text& text_of(command c) noexcept;

}  // namespace uma::cli
