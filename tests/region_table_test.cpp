// The allocator's region table (memory/detail/region_table.hpp): finding the region that holds
// an address range, also when a region whose release is still queued started at the same
// address as a newer one (the backend handed the memory out again).

#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include <uma/memory/control_block.hpp>
#include <uma/memory/detail/region_table.hpp>

namespace {

using uma::attach_flag;
using uma::detail::region;
using uma::detail::region_table;

struct RegionTable : ::testing::Test {
  std::shared_ptr<uma::detail::control_block> control =
      std::make_shared<uma::detail::control_block>(1, nullptr);
  alignas(64) std::array<std::byte, 4096> memory{};

  std::unique_ptr<region> make(std::uint64_t id, std::size_t offset, std::size_t bytes) {
    return std::make_unique<region>(control, id, memory.data() + offset, memory.data() + offset,
                                    bytes, bytes);
  }
  std::uintptr_t at(std::size_t offset) const {
    return reinterpret_cast<std::uintptr_t>(memory.data() + offset);
  }
};

TEST_F(RegionTable, ARangeIsFoundInTheRegionHoldingItWholeAndNowhereElse) {
  region_table table;
  auto a = make(1, 0, 1024);
  auto b = make(2, 2048, 1024);
  table.insert(a.get(), attach_flag::global);
  table.insert(b.get(), attach_flag::global);
  std::uint64_t id = 0;
  ASSERT_NE(table.containing(at(2048 + 100), 200, id), nullptr);
  EXPECT_EQ(id, 2u);
  EXPECT_EQ(table.containing(at(1000), 100, id), nullptr) << "past the end of region 1";
  EXPECT_EQ(table.containing(at(1500), 10, id), nullptr) << "between the regions";
  table.erase(2);
  EXPECT_EQ(table.containing(at(2048), 10, id), nullptr) << "an erased region holds nothing";
}

TEST_F(RegionTable, ANewerRegionAtAnOlderOnesAddressIsFoundAndOutlivesTheOldersErase) {
  // The old region's release is still queued when a new one starts at its address: with the
  // address kept for the old region, the new one was not found, and the old one's erase then
  // dropped the address altogether (a plan on the new memory was refused as "not inside a live
  // region", seen on the H200 under uma_torch.offload).
  region_table table;
  auto older = make(1, 0, 512);
  auto newer = make(7, 0, 2048);
  table.insert(older.get(), attach_flag::global);
  table.insert(newer.get(), attach_flag::global);
  std::uint64_t id = 0;
  ASSERT_NE(table.containing(at(1024), 1024, id), nullptr) << "the newer region is found";
  EXPECT_EQ(id, 7u);
  table.erase(1);
  ASSERT_NE(table.containing(at(0), 2048, id), nullptr) << "the older one's erase keeps it";
  EXPECT_EQ(id, 7u);
  EXPECT_EQ(table.size(), 1u);
  table.erase(7);
  EXPECT_EQ(table.containing(at(0), 1, id), nullptr);
}

}  // namespace
