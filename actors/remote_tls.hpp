#pragma once

// The old path of <uma/actors/remote/remote_tls.hpp>, kept for one release (issue 38,
// CHANGELOG.md "Deprecated"); nothing in uma includes it.
#pragma message("deprecated header: include <uma/actors/remote/remote_tls.hpp>")

#include <uma/actors/remote/remote_tls.hpp>
