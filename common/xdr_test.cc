#include "common/xdr.h"

#include <gtest/gtest.h>

namespace tidepool::xdr {
namespace {

xdr::Buffer bytes(std::initializer_list<int> values) {
  xdr::Buffer out;
  for (int v : values) out.push_back(static_cast<std::uint8_t>(v));
  return out;
}

TEST(Xdr, RoundTripsScalarsStringsAndOpaques) {
  xdr::Buffer buf;
  Encoder enc(buf);
  enc.u32(0xdeadbeef);
  enc.i64(-2);
  enc.boolean(true);
  enc.string("abcde");
  enc.opaque(bytes({1, 2, 3}));
  EXPECT_EQ(buf.size() % 4, 0u);

  Decoder dec(buf);
  EXPECT_EQ(dec.u32(), 0xdeadbeefu);
  EXPECT_EQ(dec.i64(), -2);
  EXPECT_TRUE(dec.boolean());
  EXPECT_EQ(dec.string(16), "abcde");
  auto o = dec.opaque(16);
  EXPECT_EQ(xdr::Buffer(o.begin(), o.end()), bytes({1, 2, 3}));
  EXPECT_TRUE(dec.ok());
  EXPECT_EQ(dec.remaining(), 0u);
}

TEST(Xdr, StringsArePaddedWithZeros) {
  xdr::Buffer buf;
  Encoder(buf).string("ab");
  EXPECT_EQ(buf, bytes({0, 0, 0, 2, 'a', 'b', 0, 0}));
}

TEST(Xdr, DecoderNeverReadsPastTheBuffer) {
  auto buf = bytes({0, 0, 0});
  Decoder dec(buf);
  EXPECT_EQ(dec.u32(), 0u);
  EXPECT_FALSE(dec.ok());
  EXPECT_EQ(dec.u32(), 0u);  // failure is sticky
}

TEST(Xdr, LyingLengthIsRejected) {
  auto buf = bytes({0, 0, 0, 100, 'a', 'b', 'c', 'd'});
  Decoder dec(buf);
  EXPECT_TRUE(dec.opaque(1000).empty());
  EXPECT_FALSE(dec.ok());
}

TEST(Xdr, LengthAboveTheCallersMaximumIsRejected) {
  auto buf = bytes({0, 0, 0, 4, 'a', 'b', 'c', 'd'});
  Decoder dec(buf);
  dec.string(3);
  EXPECT_FALSE(dec.ok());
}

TEST(Xdr, MissingPaddingIsRejected) {
  auto buf = bytes({0, 0, 0, 3, 'a', 'b', 'c'});
  Decoder dec(buf);
  dec.string(8);
  EXPECT_FALSE(dec.ok());
}

TEST(Xdr, BooleanOtherThanZeroOrOneIsMalformed) {
  auto buf = bytes({0, 0, 0, 2});
  Decoder dec(buf);
  dec.boolean();
  EXPECT_FALSE(dec.ok());
}

TEST(Xdr, ArrayCountIsBoundedByWhatIsLeft) {
  auto buf = bytes({0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 1});
  Decoder dec(buf);
  EXPECT_EQ(dec.array_count(1u << 31, 4), 0u);
  EXPECT_FALSE(dec.ok());
}

TEST(Xdr, ReservedOpaqueIsTrimmedToWhatWasFilled) {
  xdr::Buffer buf;
  Encoder enc(buf);
  auto room = enc.begin_opaque(10);
  room[0] = 'x';
  room[1] = 'y';
  enc.finish_opaque(2);
  EXPECT_EQ(buf, bytes({0, 0, 0, 2, 'x', 'y', 0, 0}));
}

}  // namespace
}  // namespace tidepool::xdr
