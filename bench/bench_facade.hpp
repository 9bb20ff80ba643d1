#pragma once

#include <uma/sys/backend.hpp>

namespace uma::bench {

/// `uma_native_bench --facade`: each blocking facade call that is a message (issue 23), 1 and 8
/// threads, median and p99 beside the event-based typed request and the backend's own call of
/// the same run, then the 8-event-based-clients p99; on CAF's default scheduler, or with
/// `tuned` on uma::tune_scheduler's. Returns the exit status.
int run_facade_bench(backend_choice choice, int samples, bool tuned = false);

}  // namespace uma::bench
