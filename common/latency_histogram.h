// Latencies kept as counts in logarithmic buckets: eight per power of two, so a percentile read
// from it is within about 12% of the true one, in constant memory however many are recorded.
#pragma once

#include <array>
#include <cstdint>

namespace tidepool {

class LatencyHistogram {
 public:
  void record(std::uint64_t micros);

  std::uint64_t count() const { return count_; }
  // 0 when empty.
  double mean_micros() const;
  // The latency below which a fraction `quantile` (0 to 1) of samples lie, rounded up to its
  // bucket's upper bound; 0 when empty.
  std::uint64_t quantile_micros(double quantile) const;

 private:
  static constexpr unsigned kSubBuckets = 8;
  static constexpr unsigned kBuckets = kSubBuckets + (64 - 3) * kSubBuckets;
  static unsigned bucket_of(std::uint64_t micros);
  static std::uint64_t upper_bound_of(unsigned bucket);

  std::array<std::uint64_t, kBuckets> buckets_{};
  std::uint64_t count_ = 0;
  std::uint64_t total_micros_ = 0;
};

}  // namespace tidepool
