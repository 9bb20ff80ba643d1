#pragma once

// The old path of <uma/actors/remote/wire/wire_server.hpp>, kept for one release (issue 38,
// CHANGELOG.md "Deprecated"); nothing in uma includes it.
#pragma message("deprecated header: include <uma/actors/remote/wire/wire_server.hpp>")

#include <uma/actors/remote/wire/wire_server.hpp>
