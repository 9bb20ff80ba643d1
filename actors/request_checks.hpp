#pragma once

// Transitional: the checks are internal and live in actors/detail/request_checks.hpp, namespace
// uma::detail. This shim keeps the old spelling (`uma::check_refs`, ...) for
// actors/managed_allocator.cpp until its rewrite includes the detail header; delete it then.
// It is not installed (CMakeLists.txt excludes it).

#include <uma/actors/detail/request_checks.hpp>

namespace uma {

using detail::check_refs;
using detail::check_stream;
using detail::ranges_of;
using detail::summarize;

}  // namespace uma
