#include "common/latency_histogram.h"

#include <bit>
#include <cmath>
#include <limits>

namespace tidepool {

unsigned LatencyHistogram::bucket_of(std::uint64_t micros) {
  if (micros < kSubBuckets) return static_cast<unsigned>(micros);
  const unsigned exponent = static_cast<unsigned>(std::bit_width(micros)) - 1;  // 3 and up
  const unsigned sub = static_cast<unsigned>(micros >> (exponent - 3)) & (kSubBuckets - 1);
  return kSubBuckets + (exponent - 3) * kSubBuckets + sub;
}

std::uint64_t LatencyHistogram::upper_bound_of(unsigned bucket) {
  if (bucket < kSubBuckets) return bucket;
  const unsigned exponent = (bucket - kSubBuckets) / kSubBuckets + 3;
  const std::uint64_t sub = (bucket - kSubBuckets) % kSubBuckets;
  const std::uint64_t first = (kSubBuckets + sub) << (exponent - 3);
  const std::uint64_t width = std::uint64_t{1} << (exponent - 3);
  return first > std::numeric_limits<std::uint64_t>::max() - width
             ? std::numeric_limits<std::uint64_t>::max()
             : first + width - 1;
}

void LatencyHistogram::record(std::uint64_t micros) {
  buckets_[bucket_of(micros)]++;
  count_++;
  total_micros_ += micros;
}

double LatencyHistogram::mean_micros() const {
  return count_ == 0 ? 0.0 : static_cast<double>(total_micros_) / static_cast<double>(count_);
}

std::uint64_t LatencyHistogram::quantile_micros(double quantile) const {
  if (count_ == 0) return 0;
  const double clamped = quantile < 0.0 ? 0.0 : (quantile > 1.0 ? 1.0 : quantile);
  const auto rank =
      std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::ceil(clamped * count_)));
  std::uint64_t seen = 0;
  for (unsigned i = 0; i < kBuckets; ++i) {
    seen += buckets_[i];
    if (seen >= rank) return upper_bound_of(i);
  }
  return upper_bound_of(kBuckets - 1);
}

}  // namespace tidepool
