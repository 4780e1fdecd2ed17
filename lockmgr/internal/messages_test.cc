#include "lockmgr/internal/messages.h"

#include <gtest/gtest.h>

namespace tidepool::lockmgr::internal {
namespace {

constexpr LockId kLock{3, 77};
constexpr ResourceName kFile{ResourceKind::data, (std::uint64_t{5} << 48) | 12};
constexpr Range kRange{4096, 8192};
constexpr LockValue kValue = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16,
                              17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};

// One message of every kind, each field away from its default.
std::vector<LockMessage> every_kind() {
  LockRecord held{kLock,           kFile, kRange, LockState::converting, Mode::protected_read,
                  Mode::exclusive, 12,    500};
  LockRecord waiting{{4, 1},
                     {ResourceKind::advisory, 9},
                     kWholeResource,
                     LockState::waiting,
                     Mode::null,
                     Mode::concurrent_write,
                     13,
                     0};
  return {
      {7, LockCall{{kLock, kFile, Mode::protected_write, kRange, true, true, 250}}},
      {7, ConvertCall{kLock, Mode::concurrent_read, true, 100, kValue}},
      {7, ConvertCall{kLock, Mode::exclusive, false, 0, std::nullopt}},
      {8, ReleaseCall{kLock, kValue}},
      {8, ReleaseCall{kLock, std::nullopt}},
      {9, CancelCall{kLock}},
      {9, Granted{kLock, Mode::exclusive, kRange, kValue}},
      {9, Queued{kLock, 41}},
      {9, Refused{kLock, Refusal::timed_out}},
      {9, Blocking{kLock, Mode::protected_read, kRange}},
      {9, Released{kLock}},
      {10, Report{{held, waiting}, true}},
      {10, Report{{}, false}},
  };
}

bool same(const LockRecord& a, const LockRecord& b) {
  return a.id == b.id && a.resource == b.resource && a.range == b.range && a.state == b.state &&
         a.granted == b.granted && a.requested == b.requested && a.position == b.position &&
         a.deadline_ms == b.deadline_ms;
}

bool same(const LockMessage& a, const LockMessage& b) {
  if (a.epoch != b.epoch || a.body.index() != b.body.index()) return false;
  // Equal encodings of equal kinds: every field round-tripped.
  return encode_lock_message(a) == encode_lock_message(b);
}

TEST(LockMessages, EveryKindRoundTrips) {
  for (const LockMessage& message : every_kind()) {
    xdr::Buffer bytes = encode_lock_message(message);
    auto decoded = decode_lock_message(bytes);
    ASSERT_TRUE(decoded.has_value()) << "kind " << message.body.index() + 1;
    EXPECT_TRUE(same(*decoded, message)) << "kind " << message.body.index() + 1;
  }
  auto report = decode_lock_message(encode_lock_message(every_kind()[11]));
  const auto& records = std::get<Report>(report->body).records;
  ASSERT_EQ(records.size(), 2u);
  EXPECT_TRUE(same(records[0], std::get<Report>(every_kind()[11].body).records[0]));
  EXPECT_TRUE(same(records[1], std::get<Report>(every_kind()[11].body).records[1]));
}

TEST(LockMessages, EveryTruncationAndAnyTrailingByteIsRefused) {
  for (const LockMessage& message : every_kind()) {
    xdr::Buffer bytes = encode_lock_message(message);
    for (std::size_t cut = 0; cut < bytes.size(); ++cut) {
      EXPECT_FALSE(decode_lock_message(std::span(bytes).first(cut)).has_value())
          << "kind " << message.body.index() + 1 << " cut at " << cut;
    }
    bytes.insert(bytes.end(), {0, 0, 0, 0});
    EXPECT_FALSE(decode_lock_message(bytes).has_value());
  }
}

// The byte at `offset` of a lock call's encoding set to `value` (the low byte of a word).
std::optional<LockMessage> lock_call_with(std::size_t offset, std::uint8_t value) {
  xdr::Buffer bytes = encode_lock_message(every_kind()[0]);
  bytes.at(offset) = value;
  return decode_lock_message(bytes);
}

TEST(LockMessages, ValuesOutsideTheirTypesAreRefused) {
  // epoch 0-7, kind 8-11, id 12-27, resource kind 28-31, resource id 32-39, mode 40-43,
  // range 44-59, try_only 60-63, expandable 64-67.
  EXPECT_TRUE(lock_call_with(43, 5).has_value());
  EXPECT_FALSE(lock_call_with(11, 0).has_value());     // kind 0
  EXPECT_FALSE(lock_call_with(11, 11).has_value());    // kind past the last
  EXPECT_FALSE(lock_call_with(19, 0).has_value());     // lock of node 0
  EXPECT_FALSE(lock_call_with(31, 0).has_value());     // resource kind 0
  EXPECT_FALSE(lock_call_with(31, 5).has_value());     // resource kind past share
  EXPECT_FALSE(lock_call_with(43, 6).has_value());     // mode past EX
  EXPECT_FALSE(lock_call_with(50, 0x30).has_value());  // range start past its end
  EXPECT_FALSE(lock_call_with(63, 2).has_value());     // a boolean of 2
}

TEST(LockMessages, AReportThatLiesAboutItsLengthIsRefusedWithoutAllocating) {
  xdr::Buffer bytes = encode_lock_message({1, Report{{}, true}});
  // The record count sits after epoch and kind; claim the most a report may hold, then more.
  for (std::uint32_t count : {std::uint32_t{kMaxReportRecords}, std::uint32_t{0xFFFFFFFF}}) {
    bytes[12] = static_cast<std::uint8_t>(count >> 24);
    bytes[13] = static_cast<std::uint8_t>(count >> 16);
    bytes[14] = static_cast<std::uint8_t>(count >> 8);
    bytes[15] = static_cast<std::uint8_t>(count);
    EXPECT_FALSE(decode_lock_message(bytes).has_value()) << count;
  }
}

}  // namespace
}  // namespace tidepool::lockmgr::internal
