#pragma once

// The old path of <uma/actors/metrics/metrics_endpoint.hpp>, kept for one release (issue 38,
// CHANGELOG.md "Deprecated"); nothing in uma includes it.
#pragma message("deprecated header: include <uma/actors/metrics/metrics_endpoint.hpp>")

#include <uma/actors/metrics/metrics_endpoint.hpp>
