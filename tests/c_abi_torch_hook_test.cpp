// PyTorch's hooks over the default allocator, as PyTorch calls them: from C++. PyTorch does not
// check malloc's result for NULL, so every failure must throw (and never crash or return NULL).
#include <cstdlib>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include <uma/c/uma.h>

namespace {

std::string what_of(ptrdiff_t size) {
  try {
    void* p = uma_torch_malloc(size, 0, nullptr);
    uma_torch_free(p, size, 0, nullptr);
    return "returned";
  } catch (const std::runtime_error& e) {
    return e.what();
  }
}

TEST(torch_hooks, FailuresThrowNamingTheReasonAndSuccessesAreCounted) {
  // A bad environment: the default allocator cannot be made.
  ::setenv("UMA_POLICY", "bogus", 1);
  const auto bad_env = what_of(64);
  EXPECT_NE(bad_env.find("uma_torch_malloc: out of memory or refused"), std::string::npos)
      << bad_env;
  EXPECT_NE(bad_env.find("UMA_POLICY"), std::string::npos) << bad_env;

  ::setenv("UMA_POLICY", "pool", 1);
  ::setenv("UMA_BACKEND", "host", 1);
  ::setenv("UMA_QUOTA_BYTES", "67108864", 1);
  void* p = uma_torch_malloc(1 << 20, 0, nullptr);
  ASSERT_NE(p, nullptr);
  uma_allocator* a = nullptr;
  ASSERT_EQ(uma_default_allocator(nullptr, &a), UMA_OK);
  uma_stats s{};
  s.struct_size = sizeof s;
  ASSERT_EQ(uma_get_stats(a, &s), UMA_OK);
  EXPECT_EQ(s.cache_blocks_in_use, 1u);

  const auto negative = what_of(-1);
  EXPECT_NE(negative.find("negative size"), std::string::npos) << negative;
  // Past the quota: refused, nothing handed out, the one block still counted.
  const auto over_quota = what_of(ptrdiff_t{1} << 30);
  EXPECT_NE(over_quota.find("out of memory or refused"), std::string::npos) << over_quota;
  ASSERT_EQ(uma_get_stats(a, &s), UMA_OK);
  EXPECT_EQ(s.cache_blocks_in_use, 1u);

  uma_torch_free(p, 1 << 20, 0, nullptr);
  ASSERT_EQ(uma_get_stats(a, &s), UMA_OK);
  EXPECT_EQ(s.cache_blocks_in_use, 0u);
  EXPECT_EQ(uma_destroy(a), UMA_OK);
}

}  // namespace
