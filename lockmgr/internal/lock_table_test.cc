#include "lockmgr/internal/lock_table.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace tidepool::lockmgr::internal {
namespace {

constexpr ResourceName kFile{ResourceKind::data, 7};
constexpr LockValue kSize42 = {42};

// Lock `n` of node `node`; the tests name locks a1, b1, c2... by node letter and number.
LockId lock_of(cluster::NodeId node, std::uint64_t n) { return {node, n}; }
const LockId a1 = lock_of(1, 1), a2 = lock_of(1, 2), b1 = lock_of(2, 1), b2 = lock_of(2, 2),
             c1 = lock_of(3, 1), c2 = lock_of(3, 2), d1 = lock_of(4, 1);

std::string name_of(LockId id) {
  return std::string(1, static_cast<char>('a' + id.node - 1)) + std::to_string(id.sequence);
}

std::string describe(const Notice& notice) {
  struct Describe {
    std::string operator()(const Granted& g) const {
      std::string text = "granted " + name_of(g.id) + " " + std::string(mode_name(g.mode));
      if (g.range != kWholeResource) {
        text += " [" + std::to_string(g.range.start) + "," + std::to_string(g.range.end) + ")";
      }
      return text;
    }
    std::string operator()(const Queued& q) const {
      return "queued " + name_of(q.id) + " @" + std::to_string(q.position);
    }
    std::string operator()(const Refused& r) const {
      constexpr const char* kReasons[] = {"would_block", "deadlock", "timed_out", "cancelled"};
      std::string text = "refused " + name_of(r.id) + " " + kReasons[static_cast<int>(r.reason)];
      if (r.in_the_way) text += " behind " + std::string(mode_name(r.in_the_way->mode));
      return text;
    }
    std::string operator()(const Blocking& b) const {
      return "blocking " + name_of(b.holder) + " for " + std::string(mode_name(b.wanted));
    }
  };
  return std::visit(Describe{}, notice);
}

class LockTableTest : public ::testing::Test {
 protected:
  Status request(LockId id, Mode mode, Range range = kWholeResource) {
    return table_.request({id, kFile, mode, range}, notices_);
  }
  Status try_request(LockId id, Mode mode) {
    return table_.request({id, kFile, mode, kWholeResource, true}, notices_);
  }
  Status convert(LockId id, Mode mode, std::optional<LockValue> value = std::nullopt) {
    return table_.convert(id, mode, false, 0, value, notices_);
  }
  Status release(LockId id, std::optional<LockValue> value = std::nullopt) {
    return table_.release(id, value, notices_);
  }
  // What the table said since the last call, one notice after the other.
  std::string said() {
    std::string text;
    for (const Notice& notice : notices_) text += (text.empty() ? "" : "; ") + describe(notice);
    notices_.clear();
    return text;
  }

  LockTable table_;
  std::vector<Notice> notices_;
};

TEST_F(LockTableTest, CompatibleRequestsAreGrantedTogether) {
  ASSERT_TRUE(request(a1, Mode::protected_read).ok());
  ASSERT_TRUE(request(b1, Mode::protected_read).ok());
  ASSERT_TRUE(request(c1, Mode::concurrent_read).ok());
  EXPECT_EQ(said(), "granted a1 PR; granted b1 PR; granted c1 CR");
  EXPECT_EQ(table_.size(), 3u);
}

TEST_F(LockTableTest, AConflictingRequestQueuesAndWarnsTheHolder) {
  ASSERT_TRUE(request(a1, Mode::exclusive).ok());
  said();
  ASSERT_TRUE(request(b1, Mode::protected_read).ok());
  EXPECT_EQ(said(), "queued b1 @1; blocking a1 for PR");
  EXPECT_EQ(table_.find(b1)->state, LockState::waiting);
}

TEST_F(LockTableTest, ReleaseGrantsTheWaitersInTheOrderTheyCame) {
  ASSERT_TRUE(request(a1, Mode::exclusive).ok());
  ASSERT_TRUE(request(b1, Mode::exclusive).ok());
  ASSERT_TRUE(request(c1, Mode::protected_read).ok());
  ASSERT_TRUE(request(d1, Mode::protected_read).ok());
  said();
  ASSERT_TRUE(release(a1).ok());
  EXPECT_EQ(said(), "granted b1 EX; blocking b1 for PR");
  ASSERT_TRUE(release(b1).ok());
  EXPECT_EQ(said(), "granted c1 PR; granted d1 PR");
}

TEST_F(LockTableTest, AReaderNeverOvertakesAWaitingWriter) {
  ASSERT_TRUE(request(a1, Mode::protected_read).ok());
  ASSERT_TRUE(request(b1, Mode::exclusive).ok());
  said();
  ASSERT_TRUE(request(c1, Mode::protected_read).ok());
  EXPECT_EQ(said(), "queued c1 @2");
  ASSERT_TRUE(release(a1).ok());
  EXPECT_EQ(said(), "granted b1 EX; blocking b1 for PR");
}

TEST_F(LockTableTest, LocksConflictOnlyWhereTheirRangesOverlap) {
  ASSERT_TRUE(request(a1, Mode::exclusive, {0, 100}).ok());
  ASSERT_TRUE(request(b1, Mode::exclusive, {100, 200}).ok());
  EXPECT_EQ(said(), "granted a1 EX [0,100); granted b1 EX [100,200)");
  ASSERT_TRUE(request(c1, Mode::protected_read, {50, 150}).ok());
  EXPECT_EQ(said(), "queued c1 @1; blocking a1 for PR; blocking b1 for PR");
  // A request beside the waiting one is not held back by it.
  ASSERT_TRUE(request(d1, Mode::exclusive, {200, 300}).ok());
  EXPECT_EQ(said(), "granted d1 EX [200,300)");
  ASSERT_TRUE(release(a1).ok());
  EXPECT_EQ(said(), "");
  ASSERT_TRUE(release(b1).ok());
  EXPECT_EQ(said(), "granted c1 PR [50,150)");
}

TEST_F(LockTableTest, OwnedLocksFollowPosixSemantics) {
  constexpr LockOwner kProcessA{1, 1}, kProcessB{1, 2};
  auto owned = [&](LockId id, Mode mode, Range range, LockOwner owner) {
    LockRequest request{id, kFile, mode, range};
    request.owner = owner;
    return table_.request(request, notices_);
  };
  ASSERT_TRUE(owned(a1, Mode::exclusive, {0, 100}, kProcessA).ok());
  // The owner's own locks never stand in its way.
  ASSERT_TRUE(owned(a2, Mode::exclusive, {50, 150}, kProcessA).ok());
  EXPECT_EQ(said(), "granted a1 EX [0,100); granted a2 EX [50,150)");
  // Another owner waits, and the holder is not called back: its client lets go, nobody else.
  ASSERT_TRUE(owned(b1, Mode::exclusive, {0, 10}, kProcessB).ok());
  EXPECT_EQ(said(), "queued b1 @1");
  // No fairness, as POSIX: what is compatible with the granted locks goes past the waiter.
  ASSERT_TRUE(owned(c1, Mode::protected_read, {200, 300}, kProcessB).ok());
  ASSERT_TRUE(owned(c2, Mode::protected_read, {0, 10}, kProcessA).ok());
  EXPECT_EQ(said(), "granted c1 PR [200,300); granted c2 PR [0,10)");
  ASSERT_TRUE(release(a1).ok());
  ASSERT_TRUE(release(a2).ok());
  EXPECT_EQ(said(), "");
  ASSERT_TRUE(release(c2).ok());
  EXPECT_EQ(said(), "granted b1 EX [0,10)");
}

TEST_F(LockTableTest, AnEmptyRangeOrAReusedIdIsRefused) {
  EXPECT_EQ(request(a1, Mode::exclusive, {10, 10}).code(), Errc::invalid_argument);
  ASSERT_TRUE(request(a1, Mode::exclusive).ok());
  EXPECT_EQ(request(a1, Mode::null).code(), Errc::invalid_argument);
  EXPECT_EQ(table_.size(), 1u);
}

TEST_F(LockTableTest, AConversionDownIsGrantedAtOnceAndLetsWaitersIn) {
  ASSERT_TRUE(request(a1, Mode::exclusive).ok());
  ASSERT_TRUE(request(b1, Mode::protected_read).ok());
  said();
  ASSERT_TRUE(convert(a1, Mode::protected_read).ok());
  EXPECT_EQ(said(), "granted a1 PR; granted b1 PR");
}

TEST_F(LockTableTest, ConversionsGoAheadOfNewRequests) {
  ASSERT_TRUE(request(a1, Mode::protected_read).ok());
  ASSERT_TRUE(request(b1, Mode::protected_read).ok());
  ASSERT_TRUE(request(c1, Mode::exclusive).ok());
  said();
  ASSERT_TRUE(convert(a1, Mode::protected_write).ok());
  // b1 was warned already, by c1's request.
  EXPECT_EQ(said(), "queued a1 @2");
  EXPECT_EQ(table_.find(a1)->granted, Mode::protected_read);
  ASSERT_TRUE(release(b1).ok());
  EXPECT_EQ(said(), "granted a1 PW; blocking a1 for EX");
}

TEST_F(LockTableTest, TwoReadersBothConvertingToExclusiveIsADeadlockRefusedToTheSecond) {
  ASSERT_TRUE(request(a1, Mode::protected_read).ok());
  ASSERT_TRUE(request(b1, Mode::protected_read).ok());
  ASSERT_TRUE(convert(a1, Mode::exclusive).ok());
  said();
  ASSERT_TRUE(convert(b1, Mode::exclusive).ok());
  EXPECT_EQ(said(), "refused b1 deadlock");
  EXPECT_EQ(table_.find(b1)->state, LockState::granted);
  EXPECT_EQ(table_.find(b1)->granted, Mode::protected_read);
  ASSERT_TRUE(release(b1).ok());
  EXPECT_EQ(said(), "granted a1 EX");
}

TEST_F(LockTableTest, OnlyAGrantedLockConverts) {
  EXPECT_EQ(convert(a1, Mode::exclusive).code(), Errc::not_found);
  ASSERT_TRUE(request(a1, Mode::exclusive).ok());
  ASSERT_TRUE(request(b1, Mode::exclusive).ok());
  EXPECT_EQ(convert(b1, Mode::null).code(), Errc::precondition_failed);
}

TEST_F(LockTableTest, ATryOnlyRequestIsRefusedAtOnceAndStillWarnsTheHolder) {
  ASSERT_TRUE(request(a1, Mode::protected_write).ok());
  said();
  ASSERT_TRUE(try_request(b1, Mode::exclusive).ok());
  // The refusal names the granted lock in the way.
  EXPECT_EQ(said(), "refused b1 would_block behind PW; blocking a1 for EX");
  EXPECT_FALSE(table_.find(b1).has_value());
  ASSERT_TRUE(try_request(c1, Mode::concurrent_read).ok());
  EXPECT_EQ(said(), "granted c1 CR");
  ASSERT_TRUE(table_.convert(c1, Mode::exclusive, true, 0, std::nullopt, notices_).ok());
  EXPECT_EQ(said(), "refused c1 would_block");  // a1 was warned for the mode it holds
  EXPECT_EQ(table_.find(c1)->granted, Mode::concurrent_read);
}

TEST_F(LockTableTest, ATryOnlyRequestBehindAQueuedOneHasNoLockInTheWay) {
  ASSERT_TRUE(request(a1, Mode::protected_read).ok());
  ASSERT_TRUE(request(b1, Mode::exclusive).ok());
  said();
  // Compatible with every granted lock, but not to overtake the writer queued first.
  ASSERT_TRUE(try_request(c1, Mode::protected_read).ok());
  EXPECT_EQ(said(), "refused c1 would_block");
}

TEST_F(LockTableTest, ACancelledRequestNoLongerHoldsBackThoseBehindIt) {
  ASSERT_TRUE(request(a1, Mode::protected_read).ok());
  ASSERT_TRUE(request(b1, Mode::exclusive).ok());
  ASSERT_TRUE(request(c1, Mode::protected_read).ok());
  said();
  ASSERT_TRUE(table_.cancel(b1, notices_).ok());
  EXPECT_EQ(said(), "refused b1 cancelled; granted c1 PR");
  EXPECT_EQ(table_.cancel(c1, notices_).code(), Errc::precondition_failed);
  EXPECT_EQ(table_.cancel(b1, notices_).code(), Errc::not_found);
}

TEST_F(LockTableTest, ACancelledConversionKeepsTheOldMode) {
  ASSERT_TRUE(request(a1, Mode::protected_read).ok());
  ASSERT_TRUE(request(b1, Mode::protected_read).ok());
  ASSERT_TRUE(convert(a1, Mode::exclusive).ok());
  said();
  ASSERT_TRUE(table_.cancel(a1, notices_).ok());
  EXPECT_EQ(said(), "refused a1 cancelled");
  EXPECT_EQ(table_.find(a1)->state, LockState::granted);
  EXPECT_EQ(table_.find(a1)->granted, Mode::protected_read);
}

TEST_F(LockTableTest, RequestsPastTheirDeadlineAreRefusedAsTimedOut) {
  ASSERT_TRUE(request(a1, Mode::exclusive).ok());
  ASSERT_TRUE(
      table_.request({b1, kFile, Mode::exclusive, kWholeResource, false, false, 100}, notices_)
          .ok());
  ASSERT_TRUE(
      table_.request({c1, kFile, Mode::exclusive, kWholeResource, false, false, 200}, notices_)
          .ok());
  said();
  table_.expire(99, notices_);
  EXPECT_EQ(said(), "");
  table_.expire(150, notices_);
  EXPECT_EQ(said(), "refused b1 timed_out");
  ASSERT_TRUE(release(a1).ok());
  EXPECT_EQ(said(), "granted c1 EX");
  table_.expire(1000, notices_);
  EXPECT_EQ(said(), "");
}

TEST_F(LockTableTest, ExpiryReturnsTheNextDeadlineAndKeepsAGrantThatOneExpiryFreed) {
  ASSERT_TRUE(
      table_.request({a1, kFile, Mode::exclusive, {0, 10}, false, false, 0}, notices_).ok());
  // b1 waits behind a1 on [0,10); c1, due as well, waits behind b1 on [5,20).
  ASSERT_TRUE(
      table_.request({b1, kFile, Mode::exclusive, {0, 10}, false, false, 100}, notices_).ok());
  ASSERT_TRUE(
      table_.request({c1, kFile, Mode::exclusive, {5, 20}, false, false, 100}, notices_).ok());
  ASSERT_TRUE(
      table_.request({d1, kFile, Mode::exclusive, {0, 20}, false, false, 300}, notices_).ok());
  said();
  release(a1).ok();
  EXPECT_EQ(said(), "granted b1 EX [0,10); blocking b1 for EX");
  // b1 is granted now; c1, due, is refused; d1's deadline is the next one.
  EXPECT_EQ(table_.expire(100, notices_), 300u);
  EXPECT_EQ(said(), "refused c1 timed_out");
  EXPECT_EQ(table_.find(b1)->state, LockState::granted);
}

TEST_F(LockTableTest, AdoptedConversionsWaitingForEachOtherAreUntangled) {
  LockRecord a{a1,  kFile, kWholeResource, LockState::converting, Mode::null, Mode::exclusive,
               112, 0};
  LockRecord b{b1,  kFile, {150, 151}, LockState::converting, Mode::protected_read, Mode::exclusive,
               114, 0};
  ASSERT_TRUE(table_.adopt(a).ok());
  ASSERT_TRUE(table_.adopt(b).ok());
  table_.settle(notices_);
  EXPECT_EQ(said(), "refused b1 deadlock; blocking b1 for EX");
  EXPECT_EQ(table_.find(b1)->granted, Mode::protected_read);
}

TEST_F(LockTableTest, AnUncontendedExpandableRequestGetsTheWholeResource) {
  ASSERT_TRUE(
      table_.request({a1, kFile, Mode::protected_read, {0, 4096}, false, true}, notices_).ok());
  EXPECT_EQ(said(), "granted a1 PR");
  ASSERT_TRUE(
      table_.request({b1, kFile, Mode::protected_read, {0, 4096}, false, true}, notices_).ok());
  EXPECT_EQ(said(), "granted b1 PR [0,4096)");
}

TEST_F(LockTableTest, TheValueBlockIsSetByAWriterAndCarriedByLaterGrants) {
  ASSERT_TRUE(request(a1, Mode::exclusive).ok());
  ASSERT_TRUE(request(b1, Mode::protected_read).ok());
  notices_.clear();
  EXPECT_EQ(release(b1, kSize42).code(), Errc::invalid_argument);
  ASSERT_TRUE(convert(a1, Mode::protected_read, kSize42).ok());
  ASSERT_EQ(notices_.size(), 2u);
  EXPECT_EQ(std::get<Granted>(notices_[1]).id, b1);
  EXPECT_EQ(std::get<Granted>(notices_[1]).value, kSize42);
  EXPECT_EQ(convert(b1, Mode::null, kSize42).code(), Errc::invalid_argument);
}

TEST_F(LockTableTest, AHolderIsWarnedOncePerModeItHolds) {
  ASSERT_TRUE(request(a1, Mode::exclusive).ok());
  ASSERT_TRUE(request(b1, Mode::exclusive).ok());
  EXPECT_EQ(said(), "granted a1 EX; queued b1 @1; blocking a1 for EX");
  ASSERT_TRUE(request(c1, Mode::exclusive).ok());
  EXPECT_EQ(said(), "queued c1 @2");
  ASSERT_TRUE(convert(a1, Mode::concurrent_read).ok());
  EXPECT_EQ(said(), "granted a1 CR; blocking a1 for EX");
}

TEST_F(LockTableTest, ANodeThatLeftLosesItsLocksAndItsWaitersMoveUp) {
  ASSERT_TRUE(request(a1, Mode::exclusive).ok());
  ASSERT_TRUE(table_.request({a2, {ResourceKind::attributes, 7}, Mode::exclusive}, notices_).ok());
  ASSERT_TRUE(request(b1, Mode::exclusive).ok());
  ASSERT_TRUE(request(c1, Mode::protected_read).ok());
  said();
  table_.drop_node(1, notices_);
  EXPECT_EQ(said(), "granted b1 EX; blocking b1 for PR");
  EXPECT_EQ(table_.size(), 2u);
}

TEST_F(LockTableTest, AdoptedLocksAreQueuedInTheirOldOrder) {
  LockRecord held{
      a1, kFile, kWholeResource, LockState::granted, Mode::protected_read, Mode::protected_read};
  LockRecord first{b1, kFile, kWholeResource, LockState::waiting, Mode::null, Mode::exclusive, 4};
  LockRecord second{c1, kFile, kWholeResource, LockState::waiting, Mode::null, Mode::protected_read,
                    9};
  ASSERT_TRUE(table_.adopt(second).ok());
  ASSERT_TRUE(table_.adopt(held).ok());
  ASSERT_TRUE(table_.adopt(first).ok());
  table_.settle(notices_);
  EXPECT_EQ(said(), "blocking a1 for EX");
  ASSERT_TRUE(request(d1, Mode::concurrent_read).ok());
  EXPECT_EQ(said(), "queued d1 @10");
  LockRecord conflicting{
      b2, kFile, kWholeResource, LockState::granted, Mode::exclusive, Mode::exclusive};
  EXPECT_EQ(table_.adopt(conflicting).code(), Errc::internal);
  // A waiter whose node never learned its place goes to the end of the queue.
  LockRecord unplaced{b2, kFile, kWholeResource, LockState::waiting, Mode::null, Mode::exclusive};
  ASSERT_TRUE(table_.adopt(unplaced).ok());
  EXPECT_EQ(table_.find(b2)->position, 11u);
  LockRecord converting_granted{c2,         kFile,          kWholeResource, LockState::granted,
                                Mode::null, Mode::exclusive};
  EXPECT_EQ(table_.adopt(converting_granted).code(), Errc::invalid_argument);
}

TEST_F(LockTableTest, AdoptionTakesTheValueBlockFromAWriterFirst) {
  LockValue read{1}, written{2};
  LockRecord reader{a1,
                    kFile,
                    kWholeResource,
                    LockState::granted,
                    Mode::concurrent_read,
                    Mode::concurrent_read,
                    0,
                    0,
                    read};
  LockRecord writer{
      b1, kFile, kWholeResource, LockState::granted, Mode::protected_write, Mode::protected_write,
      0,  0,     written};
  LockRecord waiter{c1, kFile, kWholeResource, LockState::waiting, Mode::null, Mode::exclusive,
                    3,  0,     LockValue{9}};
  ASSERT_TRUE(table_.adopt(reader).ok());
  ASSERT_TRUE(table_.adopt(waiter).ok());
  ASSERT_TRUE(table_.adopt(writer).ok());
  EXPECT_EQ(table_.find(a1)->value, written);
}

// Random requests, conversions, releases, cancellations and expiries on a few overlapping
// ranges, with and without owners. After every step: no two locks of different owners held in
// incompatible modes on overlapping ranges, and
// nothing queued that could be granted (no lost wake-up).
TEST(LockTableRandom, NeverGrantsConflictsAndNeverLeavesAGrantableRequestWaiting) {
  constexpr Range kRanges[] = {{0, 100}, {50, 150}, {100, 200}, kWholeResource, {150, 151}};
  constexpr LockOwner kOwners[] = {{}, {1, 1}, {1, 2}};
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 random(seed);
    auto pick = [&](std::uint64_t n) { return random() % n; };
    LockTable table;
    std::vector<Notice> notices;
    std::vector<LockId> ids;
    std::uint64_t now = 0;
    for (int step = 0; step < 300; ++step) {
      now += pick(20);
      LockId id = ids.empty() || pick(3) == 0
                      ? LockId{1 + pick(4), static_cast<std::uint64_t>(step + 1)}
                      : ids[pick(ids.size())];
      Mode mode = static_cast<Mode>(pick(kModeCount));
      switch (pick(6)) {
        case 0:
        case 1:
          if (table
                  .request({id,
                            {ResourceKind::data, pick(2)},
                            mode,
                            kRanges[pick(5)],
                            pick(4) == 0,
                            pick(4) == 0,
                            pick(2) ? now + pick(100) : 0,
                            kOwners[pick(3)]},
                           notices)
                  .ok()) {
            ids.push_back(id);
          }
          break;
        case 2:
          (void)table.convert(id, mode, pick(4) == 0, pick(2) ? now + pick(100) : 0, std::nullopt,
                              notices);
          break;
        case 3:
          (void)table.release(id, std::nullopt, notices);
          break;
        case 4:
          (void)table.cancel(id, notices);
          break;
        default:
          table.expire(now, notices);
          break;
      }
      std::vector<LockRecord> all = table.records();
      for (std::size_t i = 0; i < all.size(); ++i) {
        for (std::size_t j = i + 1; j < all.size(); ++j) {
          const LockRecord& x = all[i];
          const LockRecord& y = all[j];
          bool both_hold = x.state != LockState::waiting && y.state != LockState::waiting;
          bool same_owner = !x.owner.none() && x.owner == y.owner;
          if (both_hold && !same_owner && x.resource == y.resource && x.range.overlaps(y.range)) {
            ASSERT_TRUE(compatible(x.granted, y.granted)) << "step " << step;
          }
        }
      }
      notices.clear();
      table.settle(notices);
      for (const Notice& notice : notices) {
        ASSERT_FALSE(std::holds_alternative<Granted>(notice))
            << "step " << step << ": " << describe(notice);
      }
      notices.clear();
    }
  }
}

}  // namespace
}  // namespace tidepool::lockmgr::internal
