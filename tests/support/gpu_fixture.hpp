#pragma once

// The GPU suites' fixture: a CUDA backend and a client over it, or the test skipped with the
// reason when no CUDA device is usable (CI has none).

#include <memory>

#include <gtest/gtest.h>

#include <uma/sys/cuda_backend.hpp>

#include "actor_fixture.hpp"

namespace uma::test {

class gpu_fixture : public actor_fixture {
 protected:
  void SetUp() override {
    const auto probe = probe_cuda();
    if (!probe.usable)
      GTEST_SKIP() << "no usable CUDA device: " << probe.reason;
    cuda_ = make_backend(backend_choice::cuda);
    gpu_ = make_client({.backend = {.instance = cuda_}, .memory = {.quota_bytes = 8ull << 30}});
  }
  void TearDown() override { gpu_.reset(); }

  std::shared_ptr<backend> cuda_;
  std::unique_ptr<client> gpu_;
};

}  // namespace uma::test
