// The resource-stack fuzz harness (tests/support/stack_fuzz.hpp) in the normal build trees:
// every seed of tests/fuzz/stack-corpus once, then pseudo-random inputs from a fixed seed, so
// that CI checks the harness's invariants without clang or libFuzzer.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <vector>

#include "support/stack_fuzz.hpp"

namespace uma {
namespace {

const std::filesystem::path corpus_dir = UMA_STACK_CORPUS_DIR;

std::vector<std::uint8_t> read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(stack_fuzz_replay, EverySeedOfTheCorpusKeepsTheInvariants) {
  const auto host = std::make_shared<host_backend>();
  std::size_t seeds = 0;
  for (const auto& entry : std::filesystem::directory_iterator(corpus_dir)) {
    const auto input = read_all(entry.path());
    try {
      test::run_stack_fuzz(input, host);
    } catch (const std::exception& e) {
      ADD_FAILURE() << entry.path() << ": " << e.what();
    }
    ++seeds;
  }
  EXPECT_GE(seeds, 4u) << corpus_dir;
  const auto c = host->counters();
  EXPECT_GT(c.allocations, 0u);  // the seeds reach the backend
  EXPECT_EQ(c.allocations, c.frees);
  EXPECT_EQ(c.bad_frees, 0u);
}

TEST(stack_fuzz_replay, PseudoRandomInputsKeepTheInvariants) {
  const auto host = std::make_shared<host_backend>();
  std::mt19937 rng(20261123);
  std::uniform_int_distribution<int> byte(0, 255), length(4, 320);
  for (int i = 0; i < 400; ++i) {
    std::vector<std::uint8_t> input(static_cast<std::size_t>(length(rng)));
    for (auto& b : input)
      b = static_cast<std::uint8_t>(byte(rng));
    try {
      test::run_stack_fuzz(input, host);
    } catch (const std::exception& e) {
      FAIL() << "input " << i << ": " << e.what();
    }
  }
  EXPECT_EQ(host->counters().allocations, host->counters().frees);
  EXPECT_EQ(host->counters().bad_frees, 0u);
}

TEST(stack_fuzz_replay, AnEmptyInputBuildsAStackAndTakesNoMemory) {
  const auto host = std::make_shared<host_backend>();
  EXPECT_NO_THROW(test::run_stack_fuzz({}, host));
  EXPECT_EQ(host->counters().allocations, 0u);
}

}  // namespace
}  // namespace uma
