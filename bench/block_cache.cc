// tp-cache-bench: the block cache's own costs, before any network: lookups that hit, per second
// and per lookup, from one thread and from two (the machine's cores), and inserts that evict.
// The scale to beat is OneFS's published L1 hit latency, about 10 us, for a whole READ.
//
// Usage: tp-cache-bench [SECONDS]    (default 2 per figure)
#include "common/block_cache.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

using namespace tidepool;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::size_t kBlock = 128 * 1024;  // a stripe unit
constexpr std::uint64_t kFiles = 64;
constexpr std::uint64_t kBlocksPerFile = 64;

// Operations per second over `threads` threads, each running `operation(thread, i)`.
template <typename Operation>
double rate(int threads, double seconds, Operation operation) {
  std::atomic<std::uint64_t> total{0};
  std::vector<std::thread> workers;
  const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(seconds));
  const auto start = Clock::now();
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::uint64_t done = 0;
      while (Clock::now() < end) {
        for (int i = 0; i < 1024; ++i) operation(t, done++);
      }
      total += done;
    });
  }
  for (auto& worker : workers) worker.join();
  return static_cast<double>(total) / std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 2;
  if (seconds <= 0) {
    std::fprintf(stderr, "usage: tp-cache-bench [SECONDS]\n");
    return 2;
  }
  const std::vector<std::byte> unit(kBlock, std::byte{0x5a});
  // Room for every block: lookups hit.
  BlockCache warm(2 * kFiles * kBlocksPerFile * (kBlock + 256));
  for (std::uint64_t f = 0; f < kFiles; ++f) {
    for (std::uint64_t b = 0; b < kBlocksPerFile; ++b) warm.insert({f, b}, unit);
  }
  auto hit = [&](int thread, std::uint64_t i) {
    const std::uint64_t n = i * 2654435761u + static_cast<std::uint64_t>(thread);
    BlockCache::Handle handle = warm.lookup({n % kFiles, (n / kFiles) % kBlocksPerFile});
    if (!handle) std::abort();
  };
  std::printf("block cache, %zu KiB blocks, %llu cached\n", kBlock / 1024,
              static_cast<unsigned long long>(kFiles * kBlocksPerFile));
  for (int threads : {1, 2}) {
    const double per_second = rate(threads, seconds, hit);
    std::printf("  lookup hit, %d thread%s   %12.0f /s   %6.0f ns each\n", threads,
                threads == 1 ? " " : "s", per_second, 1e9 * threads / per_second);
  }
  // A quarter of the room: every insert evicts the oldest block.
  BlockCache small(kFiles * kBlocksPerFile * (kBlock + 256) / 4);
  auto insert = [&](int thread, std::uint64_t i) {
    small.insert({static_cast<std::uint64_t>(thread), i}, unit);
  };
  const double inserts = rate(1, seconds, insert);
  std::printf("  insert 128 KiB + evict     %12.0f /s   %6.0f ns each (%.1f GiB/s copied)\n",
              inserts, 1e9 / inserts, inserts * kBlock / (1u << 30));
  return 0;
}
