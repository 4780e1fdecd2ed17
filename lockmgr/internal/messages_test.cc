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
  LockRecord held{
      kLock, kFile,  kRange, LockState::converting, Mode::protected_read, Mode::exclusive, 12,
      500,   kValue, 6,      {0x1234, 0x5678}};
  LockRecord waiting{{4, 1},
                     {ResourceKind::advisory, 9},
                     kWholeResource,
                     LockState::waiting,
                     Mode::null,
                     Mode::concurrent_write,
                     13,
                     0,
                     {}};
  return {
      {7, 1, LockCall{{kLock, kFile, Mode::protected_write, kRange, true, true, 250, {9, 10}}}},
      {7, 2, ConvertCall{kLock, Mode::concurrent_read, true, 100, kValue}},
      {7, 2, ConvertCall{kLock, Mode::exclusive, false, 0, std::nullopt}},
      {8, 3, ReleaseCall{kLock, kValue}},
      {8, 3, ReleaseCall{kLock, std::nullopt}},
      {9, 4, CancelCall{kLock}},
      {9, 5, Granted{kLock, Mode::exclusive, kRange, kValue}},
      {9, 6, Queued{kLock, 41}},
      {9, 7, Refused{kLock, Refusal::timed_out}},
      {9, 0, Blocking{kLock, Mode::protected_read, kRange}},
      {9, 3, Released{kLock}},
      {10, 0, Report{{held, waiting}, 2, 3}},
      {10, 0, Report{{}, 0, 1}},
      {10, 0, ReportAck{}},
      {10, 0, BlockingAck{kLock}},
      {9, 7, Refused{kLock, Refusal::would_block, Conflict{kRange, Mode::exclusive, {3, 4}}}},
  };
}

bool same(const LockRecord& a, const LockRecord& b) {
  return a.id == b.id && a.resource == b.resource && a.range == b.range && a.state == b.state &&
         a.granted == b.granted && a.requested == b.requested && a.position == b.position &&
         a.deadline_ms == b.deadline_ms && a.value == b.value && a.op == b.op && a.owner == b.owner;
}

bool same(const LockMessage& a, const LockMessage& b) {
  if (a.epoch != b.epoch || a.op != b.op || a.body.index() != b.body.index()) return false;
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

TEST(LockMessages, AReportPartPastItsPartsIsRefused) {
  EXPECT_FALSE(decode_lock_message(encode_lock_message({1, 0, Report{{}, 1, 1}})).has_value());
  EXPECT_FALSE(decode_lock_message(encode_lock_message({1, 0, Report{{}, 0, 0}})).has_value());
  EXPECT_FALSE(decode_lock_message(encode_lock_message({1, 0, Report{{}, 0, kMaxReportParts + 1}}))
                   .has_value());
}

TEST(LockMessages, CallsReportsAndCallbackAcksGoToTheCoordinatorAndNameTheirLock) {
  for (const LockMessage& message : every_kind()) {
    const std::size_t kind = message.body.index() + 1;
    const bool report = std::holds_alternative<Report>(message.body);
    const bool ack = std::holds_alternative<BlockingAck>(message.body);
    EXPECT_EQ(to_coordinator(message), kind <= 4 || report || ack) << "kind " << kind;
    if (report || std::holds_alternative<ReportAck>(message.body)) {
      EXPECT_FALSE(lock_of(message).has_value()) << "kind " << kind;
    } else {
      EXPECT_EQ(lock_of(message), kLock) << "kind " << kind;
    }
  }
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
  // epoch 0-7, op 8-15, kind 16-19, id 20-35, resource kind 36-39, resource id 40-47,
  // mode 48-51, range 52-67, try_only 68-71, expandable 72-75.
  EXPECT_TRUE(lock_call_with(51, 5).has_value());
  EXPECT_FALSE(lock_call_with(19, 0).has_value());     // kind 0
  EXPECT_FALSE(lock_call_with(19, 12).has_value());    // kind past the last
  EXPECT_FALSE(lock_call_with(27, 0).has_value());     // lock of node 0
  EXPECT_FALSE(lock_call_with(39, 0).has_value());     // resource kind 0
  EXPECT_TRUE(lock_call_with(39, 5).has_value());      // directory, the last resource kind
  EXPECT_FALSE(lock_call_with(39, 6).has_value());     // resource kind past directory
  EXPECT_FALSE(lock_call_with(51, 6).has_value());     // mode past EX
  EXPECT_FALSE(lock_call_with(58, 0x30).has_value());  // range start past its end
  EXPECT_FALSE(lock_call_with(71, 2).has_value());     // a boolean of 2
}

TEST(LockMessages, AReportThatLiesAboutItsLengthIsRefusedWithoutAllocating) {
  xdr::Buffer bytes = encode_lock_message({1, 0, Report{{}, 0, 1}});
  // The record count sits after epoch, op and kind; claim the most a report may hold, then more.
  for (std::uint32_t count : {std::uint32_t{kMaxReportRecords}, std::uint32_t{0xFFFFFFFF}}) {
    bytes[20] = static_cast<std::uint8_t>(count >> 24);
    bytes[21] = static_cast<std::uint8_t>(count >> 16);
    bytes[22] = static_cast<std::uint8_t>(count >> 8);
    bytes[23] = static_cast<std::uint8_t>(count);
    EXPECT_FALSE(decode_lock_message(bytes).has_value()) << count;
  }
}

}  // namespace
}  // namespace tidepool::lockmgr::internal
