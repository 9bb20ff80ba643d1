#pragma once

// The old path of <uma/actors/metrics/prometheus_text.hpp>, kept for one release (issue 38,
// CHANGELOG.md "Deprecated"); nothing in uma includes it.
#pragma message("deprecated header: include <uma/actors/metrics/prometheus_text.hpp>")

#include <uma/actors/metrics/prometheus_text.hpp>
