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

TEST(Xdr, WhatWasEncodedSurvivesTheBuffersGrowth) {
  xdr::Buffer buf;
  Encoder enc(buf);
  int growths = 0;
  for (std::uint32_t i = 0; i < 10000; ++i) {
    const std::size_t capacity = buf.capacity();
    if (i % 3 == 0) enc.u64(i);
    if (i % 3 == 1) enc.u32(i);
    if (i % 3 == 2) enc.string("entry" + std::to_string(i));
    if (buf.capacity() != capacity) {
      ++growths;
      EXPECT_GE(buf.capacity(), 2 * capacity) << "growth by doubling, or encoding is quadratic";
    }
  }
  EXPECT_LT(growths, 20);
  Decoder dec(buf);
  for (std::uint32_t i = 0; i < 10000; ++i) {
    if (i % 3 == 0) {
      EXPECT_EQ(dec.u64(), i);
    } else if (i % 3 == 1) {
      EXPECT_EQ(dec.u32(), i);
    } else {
      EXPECT_EQ(dec.string(32), "entry" + std::to_string(i));
    }
  }
  EXPECT_TRUE(dec.ok());
  EXPECT_EQ(dec.remaining(), 0u);
}

}  // namespace
}  // namespace tidepool::xdr
