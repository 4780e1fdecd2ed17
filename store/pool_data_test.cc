#include "store/pool_data.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstdio>
#include <thread>

#include "store/internal/test_util.h"

namespace tidepool::store {
namespace {

constexpr std::uint32_t kUnit = 128 * 1024;
const Placement kHot{"f800", 2, kUnit, {1, 2, 3}};
const Placement kCold{"h500", 2, kUnit, {4}};

class PoolDataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = internal::fresh_test_directory("tidepool-pool-data-test");
    nodes_ = std::make_shared<internal::InProcessPools>(dir_, 3);
    data_ = std::make_unique<PoolData>(nodes_, integrity_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::vector<std::uint8_t> read(const Placement& where, InodeId inode, std::uint64_t offset,
                                 std::size_t n, Status* status = nullptr) {
    std::vector<std::uint8_t> bytes(n);
    const Status s = data_->read(where, inode, offset, bytes);
    if (status) *status = s;
    EXPECT_TRUE(status || s.ok()) << s.to_string();
    return bytes;
  }

  std::filesystem::path dir_;
  std::shared_ptr<internal::InProcessPools> nodes_;
  std::shared_ptr<IntegrityCounters> integrity_ = std::make_shared<IntegrityCounters>();
  std::unique_ptr<PoolData> data_;
};

TEST_F(PoolDataTest, EveryUnitHasItsCopiesOnDifferentNodesOfThePool) {
  std::set<cluster::NodeId> used;
  for (std::uint64_t unit = 0; unit < 64; ++unit) {
    auto owners = data_->owners(kHot, 77, unit);
    ASSERT_TRUE(owners.ok());
    ASSERT_EQ(owners->size(), 2u);
    EXPECT_NE((*owners)[0], (*owners)[1]);
    for (cluster::NodeId node : *owners) {
      EXPECT_GE(node, 1u);
      EXPECT_LE(node, 3u);
      used.insert(node);
    }
    EXPECT_EQ(*owners, *data_->owners(kHot, 77, unit)) << "the same answer every time";
  }
  EXPECT_EQ(used.size(), 3u) << "units spread over the whole pool";
  EXPECT_EQ(data_->owners(kCold, 77, 0)->size(), 1u) << "a pool of one node keeps one copy";
  EXPECT_EQ(data_->owners({"x100", 2, kUnit, {}}, 77, 0).status().code(), Errc::unavailable);
}

TEST_F(PoolDataTest, DataWrittenAcrossUnitsReadsBackFromAnyCopy) {
  const auto bytes = internal::random_bytes(5 * kUnit + 1234, 1);
  ASSERT_TRUE(data_->write(kHot, 9, 777, bytes, true).ok());
  EXPECT_EQ(read(kHot, 9, 777, bytes.size()), bytes);
  // Any one node down: every unit still has a copy up.
  for (cluster::NodeId down = 1; down <= 3; ++down) {
    nodes_->set_down({down});
    EXPECT_EQ(read(kHot, 9, 777, bytes.size()), bytes) << "node " << down << " down";
  }
  const std::vector<cluster::NodeId> owners = *data_->owners(kHot, 9, 2);
  nodes_->set_down({owners.begin(), owners.end()});
  Status status;
  read(kHot, 9, 2 * kUnit, 100, &status);
  EXPECT_EQ(status.code(), Errc::unavailable) << "both copies of unit 2 are down";
}

// A range's units and their copies are asked together, one round trip rather than one each;
// a bounded number at a time.
TEST_F(PoolDataTest, ARangesUnitsAndTheirCopiesAreAskedTogether) {
  const auto bytes = internal::random_bytes(8 * kUnit, 3);
  ASSERT_TRUE(data_->write(kHot, 12, 0, bytes, false).ok());
  EXPECT_EQ(nodes_->rounds.load(), 1u) << "eight units, two copies each, in one round";
  EXPECT_EQ(nodes_->largest_round.load(), 16u);
  EXPECT_EQ(read(kHot, 12, 0, bytes.size()), bytes);
  EXPECT_EQ(nodes_->rounds.load(), 2u) << "each unit's first owner, in one round";
  ASSERT_TRUE(data_->sync(kHot, 12).ok());
  EXPECT_EQ(nodes_->rounds.load(), 3u) << "the pool's three nodes in one round";
  const auto more = internal::random_bytes(24 * kUnit, 4);
  ASSERT_TRUE(data_->write(kHot, 12, 0, more, false).ok());
  EXPECT_EQ(nodes_->rounds.load(), 6u) << "48 calls, 16 at a time";
  EXPECT_EQ(nodes_->largest_round.load(), 16u);
  EXPECT_EQ(read(kHot, 12, 0, more.size()), more);
}

TEST_F(PoolDataTest, UnitsNeverWrittenReadAsAHoleAndAnOwnerWithoutTheFileIsPassedOver) {
  EXPECT_EQ(read(kHot, 31, 0, 100), std::vector<std::uint8_t>(100, 0)) << "no node holds any";
  const auto bytes = internal::random_bytes(kUnit, 8);
  ASSERT_TRUE(data_->write(kHot, 31, 0, bytes, true).ok());
  // The first owner lost its disk: it holds nothing of the file, and the other copy answers.
  const std::vector<cluster::NodeId> owners = *data_->owners(kHot, 31, 0);
  std::filesystem::remove_all(nodes_->units_of(owners[0], "f800"));
  nodes_->restart(owners[0]);
  EXPECT_EQ(read(kHot, 31, 0, kUnit), bytes);
}

TEST_F(PoolDataTest, ANodeSeenToHaveRestartedIsCounted) {
  const auto bytes = internal::random_bytes(kUnit, 9);
  ASSERT_TRUE(data_->write(kHot, 32, 0, bytes, false).ok());
  ASSERT_TRUE(data_->sync(kHot, 32).ok());
  EXPECT_EQ(data_->restarts(), 0u);
  nodes_->restart(2);
  ASSERT_TRUE(data_->sync(kHot, 32).ok());
  EXPECT_EQ(data_->restarts(), 1u) << "its unsynced data may be gone: clients must resend";
  ASSERT_TRUE(data_->sync(kHot, 32).ok());
  EXPECT_EQ(data_->restarts(), 1u);
}

TEST_F(PoolDataTest, AWriteThatMayNotFallBehindNeedsEveryOwnerOfTheUnitsItTouches) {
  const auto bytes = internal::random_bytes(kUnit, 2);
  auto owners = *data_->owners(kHot, 5, 0);
  nodes_->set_down({owners[1]});
  EXPECT_EQ(data_->write(kHot, 5, 0, bytes, false).code(), Errc::unavailable);
  EXPECT_EQ(data_->sync(kHot, 5).code(), Errc::unavailable);
  nodes_->set_down({});
  ASSERT_TRUE(data_->write(kHot, 5, 0, bytes, false).ok());
  ASSERT_TRUE(data_->sync(kHot, 5).ok());
  EXPECT_EQ(read(kHot, 5, 0, kUnit), bytes);
}

TEST_F(PoolDataTest, WhileAnOwnerIsDownAWriteGoesOnAndNamesTheCopiesItMissed) {
  const auto old_bytes = internal::random_bytes(2 * kUnit, 3);
  ASSERT_TRUE(data_->write(kHot, 6, 0, old_bytes, true).ok());
  const cluster::NodeId down = data_->owners(kHot, 6, 1)->back();
  nodes_->set_down({down});
  const auto new_bytes = internal::random_bytes(2 * kUnit, 4);
  std::vector<MissedCopy> missed;
  const Status written = data_->write_past_down(kHot, 6, 0, new_bytes, true, nullptr, missed);
  ASSERT_TRUE(written.ok()) << written.to_string();
  std::vector<MissedCopy> expected;
  for (std::uint64_t unit : {0, 1}) {
    const auto owners = *data_->owners(kHot, 6, unit);
    if (std::find(owners.begin(), owners.end(), down) != owners.end()) {
      expected.push_back({down, unit});
    }
  }
  EXPECT_EQ(missed, expected);
  EXPECT_EQ(data_->copies_down(kHot, 6, 0, 2 * kUnit).value(), expected);
  auto missed_sync = data_->sync_past_down(kHot, 6);
  ASSERT_TRUE(missed_sync.ok());
  EXPECT_EQ(*missed_sync, std::vector<cluster::NodeId>{down});
  EXPECT_TRUE(data_->every_unit_kept(kHot, 6, 2 * kUnit, {down}, nullptr));

  // Back up, its copies are stale: a read that passes them over gets the new bytes, and a
  // unit copied back onto the node reads right from it alone.
  nodes_->set_down({});
  const CopyBehind behind = [&](cluster::NodeId node, std::uint64_t) { return node == down; };
  std::vector<std::uint8_t> got(2 * kUnit);
  ASSERT_TRUE(data_->read(kHot, 6, 0, got, behind).ok());
  EXPECT_EQ(got, new_bytes);
  EXPECT_FALSE(data_->every_unit_kept(kHot, 6, 2 * kUnit, {},
                                      [](cluster::NodeId, std::uint64_t) { return true; }));
  for (const MissedCopy& copy : missed) {
    ASSERT_TRUE(data_->copy_unit_to(kHot, 6, copy.unit, down, behind).ok());
    std::vector<std::uint8_t> unit(kUnit);
    const CopyBehind only_down = [&](cluster::NodeId node, std::uint64_t) { return node != down; };
    ASSERT_TRUE(data_->read(kHot, 6, copy.unit * kUnit, unit, only_down).ok());
    EXPECT_TRUE(std::equal(unit.begin(), unit.end(), new_bytes.begin() + copy.unit * kUnit));
  }
  EXPECT_EQ(data_->units_held_by(kHot, 6, down, 2 * kUnit).size(), expected.size());
}

TEST_F(PoolDataTest, AWriteThatNoUpToDateCopyOfAUnitWouldTakeFailsAndMissesNothing) {
  const auto bytes = internal::random_bytes(kUnit, 5);
  const auto owners = *data_->owners(kHot, 7, 0);
  std::vector<MissedCopy> missed;
  nodes_->set_down({owners.begin(), owners.end()});
  EXPECT_EQ(data_->write_past_down(kHot, 7, 0, bytes, true, nullptr, missed).code(),
            Errc::unavailable);
  // The one owner up is behind: a write it alone took would be lost to reads.
  nodes_->set_down({owners[0]});
  const CopyBehind second_behind = [&](cluster::NodeId node, std::uint64_t) {
    return node == owners[1];
  };
  EXPECT_EQ(data_->write_past_down(kHot, 7, 0, bytes, true, second_behind, missed).code(),
            Errc::unavailable);
  EXPECT_TRUE(missed.empty());
  // Nor are the copies down worth noting behind for it: the first owner's copy, down now, is
  // the last that is not behind (the partition tests found a file with every copy noted so).
  EXPECT_EQ(data_->copies_down(kHot, 7, 0, kUnit, second_behind).code(), Errc::unavailable);
  nodes_->set_down({1, 2, 3, 4});
  EXPECT_EQ(data_->sync_past_down(kHot, 7).code(), Errc::unavailable);
}

TEST_F(PoolDataTest, ABadCopyIsPutBackFromAGoodOneAndCounted) {
  const auto bytes = internal::random_bytes(2 * kUnit, 3);
  ASSERT_TRUE(data_->write(kHot, 11, 0, bytes, true).ok());
  const cluster::NodeId first = (*data_->owners(kHot, 11, 1))[0];
  internal::flip_data_byte(nodes_->units_of(first, "f800"), 11, kUnit + 5000);
  EXPECT_EQ(read(kHot, 11, kUnit + 4096, 8192),
            std::vector<std::uint8_t>(bytes.begin() + kUnit + 4096, bytes.begin() + kUnit + 12288));
  EXPECT_EQ(integrity_->checksum_failures.load(), 1u);
  EXPECT_EQ(integrity_->checksum_repairs.load(), 2u) << "the two 4 KiB blocks read";
  // The bad copy is good again: with the other copy gone it answers alone.
  const cluster::NodeId second = (*data_->owners(kHot, 11, 1))[1];
  nodes_->set_down({second});
  EXPECT_EQ(read(kHot, 11, kUnit, kUnit),
            std::vector<std::uint8_t>(bytes.begin() + kUnit, bytes.end()));
  EXPECT_EQ(integrity_->checksum_failures.load(), 1u);
}

TEST_F(PoolDataTest, WhenEveryCopyIsBadTheReadFailsRatherThanAnswerWrongData) {
  const auto bytes = internal::random_bytes(kUnit, 4);
  ASSERT_TRUE(data_->write(kHot, 12, 0, bytes, true).ok());
  const std::vector<cluster::NodeId> owners = *data_->owners(kHot, 12, 0);
  for (cluster::NodeId node : owners) {
    internal::flip_data_byte(nodes_->units_of(node, "f800"), 12, 100);
  }
  Status status;
  read(kHot, 12, 0, 4096, &status);
  EXPECT_EQ(status.code(), Errc::corrupt);
}

TEST_F(PoolDataTest, TruncateAndRemoveReachEveryNodeOfThePool) {
  const auto bytes = internal::random_bytes(3 * kUnit, 5);
  ASSERT_TRUE(data_->write(kHot, 13, 0, bytes, true).ok());
  ASSERT_TRUE(data_->truncate(kHot, 13, kUnit + 10).ok());
  auto after = read(kHot, 13, kUnit, kUnit);
  EXPECT_TRUE(std::equal(after.begin(), after.begin() + 10, bytes.begin() + kUnit));
  EXPECT_TRUE(std::all_of(after.begin() + 10, after.end(), [](std::uint8_t b) { return b == 0; }));
  data_->remove(kHot, 13);
  auto gone = read(kHot, 13, 0, kUnit);
  EXPECT_TRUE(std::all_of(gone.begin(), gone.end(), [](std::uint8_t b) { return b == 0; }));
}


TEST(UnitRequests, AnOwnerKeepsUnitsReadTwiceInItsL2UntilTheyChange) {
  const auto dir = internal::fresh_test_directory("tidepool-unit-l2-test");
  const auto l2 = L2::make(16u << 20);
  UnitStore store(dir.string(), l2);
  auto call = [&](UnitMethod method, const UnitRequest& request) {
    return store.serve(static_cast<std::uint32_t>(method), encode_unit_request(request));
  };
  constexpr std::uint64_t kUnit = 128u << 10;
  std::vector<std::uint8_t> bytes(2 * kUnit, 1);
  ASSERT_TRUE(call(UnitMethod::write, {"f800", 9, 0, 1, bytes}).ok());
  for (int i = 0; i < 3; ++i) {
    auto read = call(UnitMethod::read, {"f800", 9, 0, 2 * kUnit, {}});
    ASSERT_TRUE(read.ok());
    EXPECT_EQ(*read, xdr::Buffer(bytes.begin(), bytes.end()));
  }
  EXPECT_EQ(l2->statistics().blocks, 2u);
  EXPECT_GE(l2->statistics().hits, 2u);
  EXPECT_EQ(l2->reads().data_bytes_read.load(), 3 * 2 * kUnit);
  EXPECT_EQ(l2->reads().data_bytes_hit.load(), 2 * kUnit);  // the third read
  std::fill(bytes.begin() + kUnit, bytes.end(), 2);
  ASSERT_TRUE(
      call(UnitMethod::write, {"f800", 9, kUnit, 1, {bytes.begin() + kUnit, bytes.end()}}).ok());
  auto read = call(UnitMethod::read, {"f800", 9, 0, 2 * kUnit, {}});
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(*read, xdr::Buffer(bytes.begin(), bytes.end()));
  ASSERT_TRUE(call(UnitMethod::truncate, {"f800", 9, 0, 10, {}}).ok());
  read = call(UnitMethod::read, {"f800", 9, 0, 2 * kUnit, {}});
  ASSERT_TRUE(read.ok());
  std::vector<std::uint8_t> cut(2 * kUnit, 0);
  std::fill(cut.begin(), cut.begin() + 10, 1);
  EXPECT_EQ(*read, xdr::Buffer(cut.begin(), cut.end()));
  l2->clear();
  EXPECT_EQ(l2->statistics().blocks, 0u);
  std::filesystem::remove_all(dir);
}

TEST(UnitRequests, BadMessagesAreRefusedAndNeverReachTheDisk) {
  const auto dir = internal::fresh_test_directory("tidepool-unit-request-test");
  UnitStore store(dir.string());
  const std::vector<std::uint8_t> bytes(10, 7);
  auto serve = [&](UnitMethod method, const UnitRequest& request) {
    return store.serve(static_cast<std::uint32_t>(method), encode_unit_request(request)).status();
  };
  EXPECT_EQ(serve(UnitMethod::write, {"../etc", 1, 0, 0, bytes}).code(), Errc::invalid_argument);
  EXPECT_EQ(serve(UnitMethod::write, {"", 1, 0, 0, bytes}).code(), Errc::invalid_argument);
  EXPECT_EQ(serve(UnitMethod::write, {"f800", 1, kMaxFileSize, 0, bytes}).code(),
            Errc::invalid_argument);
  EXPECT_EQ(serve(UnitMethod::read, {"f800", 1, 0, kMaxUnitMessageBytes + 1, {}}).code(),
            Errc::invalid_argument);
  EXPECT_EQ(store.serve(99, encode_unit_request({"f800", 1, 0, 0, {}})).status().code(),
            Errc::not_supported);
  EXPECT_EQ(serve(UnitMethod::drop, {"f800", 1, 100, 4096, {}}).code(), Errc::invalid_argument);
  EXPECT_EQ(serve(UnitMethod::drop, {"f800", 1, 4096, kMaxFileSize, {}}).code(),
            Errc::invalid_argument);
  ASSERT_TRUE(serve(UnitMethod::write, {"f800", 1, 0, 0, bytes}).ok());
  EXPECT_TRUE(serve(UnitMethod::sync, {"f800", 1, 0, 1, {}}).ok());  // releasing the page cache
  EXPECT_EQ(serve(UnitMethod::sync, {"f800", 1, 0, 2, {}}).code(), Errc::invalid_argument);
  xdr::Buffer truncated = encode_unit_request({"f800", 1, 0, 0, bytes});
  truncated.resize(truncated.size() - 3);
  EXPECT_EQ(store.serve(1, truncated).status().code(), Errc::invalid_argument);
  EXPECT_FALSE(std::filesystem::exists(dir / "etc"));
  // Ever new pool names do not open ever more directories.
  UnitStore fresh((dir / "fresh").string());
  auto write_to = [&](const std::string& pool) {
    return fresh
        .serve(static_cast<std::uint32_t>(UnitMethod::write),
               encode_unit_request({pool, 1, 0, 0, bytes}))
        .status();
  };
  for (std::size_t i = 0; i < kMaxUnitPools; ++i) {
    EXPECT_TRUE(write_to("p" + std::to_string(i)).ok()) << i;
  }
  EXPECT_EQ(write_to("p-more").code(), Errc::not_supported);
  EXPECT_TRUE(write_to("p0").ok());
  const xdr::Buffer encoded = encode_unit_request({"h500", 3, 4, 5, bytes});
  auto decoded = decode_unit_request(encoded);  // its bytes view `encoded`
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->pool, "h500");
  EXPECT_EQ(decoded->value, 5u);
  EXPECT_EQ(std::vector<std::uint8_t>(decoded->bytes.begin(), decoded->bytes.end()), bytes);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tidepool::store
