// libFuzzer target for the allocator's request sequences (docs/reliability.md, "Fuzzing"): the
// CAF-free resource layer (memory/resource_stack.hpp) driven in-process, thousands of inputs a
// second where uma_fuzz drives a whole actor system per input. The first bytes pick the stack
// (its quota; three bytes before it are ignored), the rest is a sequence of allocate,
// deallocate, set_limit and injected backend faults; the invariants checked
// after every step are in tests/support/stack_fuzz.cpp, which tests/stack_fuzz_replay_test.cpp
// also runs in the normal build trees. A crash, a sanitizer report or a broken invariant is a
// finding.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "tests/support/stack_fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // One backend for the whole run: its counters are compared before and after each input, and
  // its quarantine catches a free of a region already freed by an earlier step.
  static const auto host = std::make_shared<uma::host_backend>();
  try {
    uma::test::run_stack_fuzz({data, size}, host);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "uma_stack_fuzz: %s\n", e.what());
    std::abort();
  }
  return 0;
}
