#pragma once

// The core of the resource-stack fuzz target (tests/fuzz/uma_stack_fuzz.cpp), a plain function
// so that tests/stack_fuzz_replay_test.cpp replays the seed corpus and pseudo-random inputs in
// every normal build tree too. CAF-free: it drives memory/resource_stack.hpp directly.

#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>

#include <uma/sys/host_backend.hpp>

namespace uma::test {

/// An invariant of the resource stack did not hold; the message says which and where.
class stack_fuzz_violation : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

/// Decodes `input` into a stack configuration (a quota; three bytes before it are read and ignored)
/// and a sequence of operations (allocate, deallocate, set_limit, a fault on the next backend
/// call; the codes that were try_allocate and trim allocate and do nothing), runs them on a fresh
/// stack over a fault-injecting wrapper of `host`, and checks the stack's invariants after every
/// step and at the end (everything given back, every backend allocation freed once). Throws
/// `stack_fuzz_violation` when one does not hold; any other exception escaping is a violation too
/// (only `uma::error` with a valid code is allowed, and it is caught here). Deterministic; no
/// threads.
void run_stack_fuzz(std::span<const std::uint8_t> input, const std::shared_ptr<host_backend>& host);

}  // namespace uma::test
