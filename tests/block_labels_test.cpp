// detail::block_labels: the labels of labelled blocks out, and the lookup by address that the
// residency core makes for every plan on a slab's extent and every report row.

#include <gtest/gtest.h>

#include <uma/memory/control_block.hpp>
#include <uma/memory/detail/block_labels.hpp>

#include <cstddef>
#include <deque>
#include <string>
#include <thread>
#include <vector>

namespace uma::detail {
namespace {

class block_labels_test : public ::testing::Test {
 protected:
  /// A record for a slot of `bytes` at `offset` into the arena, as the block allocator keeps.
  const region* slot(std::uint64_t id, std::size_t offset, std::size_t bytes) {
    return &records_.emplace_back(nullptr, id, arena_.data(), arena_.data() + offset, bytes, bytes);
  }
  const std::byte* at(std::size_t offset) const { return arena_.data() + offset; }

  std::vector<std::byte> arena_ = std::vector<std::byte>(1 << 22);
  std::deque<region> records_;  // stable addresses
  block_labels labels_;
};

TEST_F(block_labels_test, FindsTheSlotHoldingARangeWholeAndNothingElse) {
  labels_.add(slot(1, 4096, 4096), 4000, "first");
  labels_.add(slot(2, 12288, 4096), 4096, "second");
  labels_.add(slot(3, 20000, 1000), 1000, "third");

  const auto inside = labels_.holding(at(12288 + 100), 200);
  ASSERT_TRUE(inside);
  EXPECT_EQ(inside->id, 2u);
  EXPECT_EQ(inside->label, "second");
  EXPECT_EQ(inside->bytes, 4096u);
  ASSERT_TRUE(labels_.holding(at(12288), 4096)) << "the whole slot";
  EXPECT_EQ(labels_.holding(at(20000 + 999), 1)->label, "third") << "its last byte";

  EXPECT_FALSE(labels_.holding(at(12288 + 4000), 200)) << "running past the slot's end";
  EXPECT_FALSE(labels_.holding(at(12288), 4097)) << "longer than the slot";
  EXPECT_FALSE(labels_.holding(at(8192 + 10), 16)) << "between two slots";
  EXPECT_FALSE(labels_.holding(at(0), 16)) << "before every slot";
  EXPECT_FALSE(labels_.holding(at(21000), 1)) << "after every slot";
}

TEST_F(block_labels_test, AReturnedBlockIsNoLongerFoundAndItsSlotMayComeBackUnderAnotherLabel) {
  const auto* rec = slot(7, 65536, 8192);
  labels_.add(rec, 8192, "before");
  labels_.add(slot(8, 65536 + 8192, 8192), 8192, "neighbour");
  labels_.remove(7);
  EXPECT_FALSE(labels_.holding(at(65536 + 16), 16));
  EXPECT_EQ(labels_.holding(at(65536 + 8192 + 16), 16)->label, "neighbour")
      << "the neighbour is not taken with it";
  labels_.remove(7);  // a second remove: nothing

  labels_.add(slot(9, 65536, 8192), 100, "after");
  const auto again = labels_.holding(at(65536 + 16), 16);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->id, 9u);
  EXPECT_EQ(again->label, "after");
  EXPECT_EQ(labels_.list().size(), 2u);
}

TEST_F(block_labels_test, ManyBlocksEachFoundByEveryOneOfItsBytes) {
  constexpr std::size_t n = 2000, size = 512, gap = 1536;
  for (std::size_t i = 0; i < n; ++i)
    labels_.add(slot(100 + i, i * (size + gap), size), size, std::to_string(i));
  for (std::size_t i = 0; i < n; i += 97) {
    for (std::size_t byte : {std::size_t{0}, size / 2, size - 1}) {
      const auto b = labels_.holding(at(i * (size + gap) + byte), 1);
      ASSERT_TRUE(b) << i;
      EXPECT_EQ(b->id, 100 + i);
    }
    EXPECT_FALSE(labels_.holding(at(i * (size + gap) + size), 1)) << "the gap after " << i;
  }
}

TEST_F(block_labels_test, NeighboursInDifferentShardsAreToldApart) {
  // Ids 16 and 17 fall in two shards, 16 and 32 in one: the lookup asks every shard and takes
  // the slot starting last at or before the range.
  labels_.add(slot(16, 0, 4096), 4096, "a");
  labels_.add(slot(17, 4096, 4096), 4096, "b");
  labels_.add(slot(32, 8192, 4096), 4096, "c");
  EXPECT_EQ(labels_.holding(at(4095), 1)->label, "a");
  EXPECT_EQ(labels_.holding(at(4096), 1)->label, "b");
  EXPECT_EQ(labels_.holding(at(8192), 4096)->label, "c");
  EXPECT_FALSE(labels_.holding(at(4000), 200)) << "from a's slot into b's";
  EXPECT_FALSE(labels_.holding(at(8000), 400)) << "from b's slot into c's";
  labels_.remove(17);
  EXPECT_FALSE(labels_.holding(at(4096), 1)) << "b's slot, b returned: a's ends before it";
  EXPECT_EQ(labels_.list().size(), 2u);
}

TEST_F(block_labels_test, ThreadsAddingAndRemovingAtOnceEachFindTheirOwn) {
  constexpr std::size_t threads = 8, rounds = 400, size = 512;
  // The records first (the deque is not shared); slot i is thread i % threads's, so every
  // slot's neighbours are other threads', added and removed while it looks its own up.
  for (std::size_t i = 0; i < threads * rounds; ++i)
    (void)slot(1 + i, i * size, size);
  std::vector<std::size_t> wrong(threads, 0);
  std::vector<std::thread> pool;
  for (std::size_t t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (std::size_t r = 0; r < rounds; ++r) {
        const auto i = r * threads + t;
        labels_.add(&records_[i], size, std::to_string(t));
        const auto mine = labels_.holding(at(i * size + 1), 8);
        wrong[t] += !mine || mine->id != i + 1 || mine->label != std::to_string(t);
        if (r % 2 == 0)  // half of them stay out
          labels_.remove(i + 1);
      }
    });
  for (auto& th : pool)
    th.join();
  EXPECT_EQ(wrong, std::vector<std::size_t>(threads, 0));
  EXPECT_EQ(labels_.list().size(), threads * rounds / 2);
}

}  // namespace
}  // namespace uma::detail
