#include "common/latency_histogram.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace tidepool {
namespace {

TEST(LatencyHistogramTest, AnEmptyHistogramSaysZero) {
  const LatencyHistogram empty;
  EXPECT_EQ(empty.count(), 0u);
  EXPECT_EQ(empty.mean_micros(), 0.0);
  EXPECT_EQ(empty.quantile_micros(0.99), 0u);
}

TEST(LatencyHistogramTest, SmallValuesAreExact) {
  LatencyHistogram histogram;
  for (std::uint64_t v = 0; v < 8; ++v) histogram.record(v);
  EXPECT_EQ(histogram.quantile_micros(0.0), 0u);
  EXPECT_EQ(histogram.quantile_micros(0.5), 3u);
  EXPECT_EQ(histogram.quantile_micros(1.0), 7u);
  EXPECT_DOUBLE_EQ(histogram.mean_micros(), 3.5);
}

TEST(LatencyHistogramTest, QuantilesAreWithinABucketOfTheTruth) {
  LatencyHistogram histogram;
  // 1..10000 µs: the true p50 is 5000, p99 9900.
  for (std::uint64_t v = 1; v <= 10'000; ++v) histogram.record(v);
  EXPECT_EQ(histogram.count(), 10'000u);
  EXPECT_DOUBLE_EQ(histogram.mean_micros(), 5000.5);
  for (const auto& [quantile, truth] : {std::pair{0.5, 5000.0}, std::pair{0.99, 9900.0}}) {
    const auto estimate = static_cast<double>(histogram.quantile_micros(quantile));
    EXPECT_GE(estimate, truth) << quantile;
    EXPECT_LE(estimate, truth * 1.125) << quantile;
  }
}

TEST(LatencyHistogramTest, OneOutlierMovesOnlyTheTopQuantile) {
  LatencyHistogram histogram;
  for (int i = 0; i < 99; ++i) histogram.record(100);
  histogram.record(1'000'000);
  EXPECT_EQ(histogram.count(), 100u);
  EXPECT_LE(histogram.quantile_micros(0.99), 112u);
  EXPECT_GE(histogram.quantile_micros(1.0), 1'000'000u);
}

TEST(LatencyHistogramTest, TheLargestValuesHaveABucket) {
  LatencyHistogram histogram;
  histogram.record(std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(histogram.quantile_micros(1.0), std::numeric_limits<std::uint64_t>::max());
}

}  // namespace
}  // namespace tidepool
