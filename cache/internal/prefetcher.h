// SmartRead: how far ahead of each reader to fetch. NFSv3 has no OPEN, so a reader is a stream
// of READs that continue one another, keyed on (file, client) and found by where the next read
// lands: several interleaved streams on one file (many processes of one client reading one
// shard) are told apart by their offsets. The table of streams is bounded; the least recently
// used stream goes first, and an idle one expires.
//
// A new stream at the start of a file is taken for sequential and given the first window at
// once; one elsewhere earns it once two reads have continued it. A read continues a stream when
// it lands near the stream's next offset — within eight reads of its size, as READs in flight
// arrive a little out of order — and a reader keeps a few streams per file at most, so random
// reads seldom pass for sequential ones. Each read that continues its stream widens
// the window (x4 the first time, then x2) up to the limit of the file's access pattern:
// `random` never prefetches, `concurrency` (the default) fetches moderately ahead,
// `streaming` many megabytes ahead. A read that continues no stream of its client (random
// access) halves that client's windows on the file, and prefetched bytes evicted unread
// (waste) halve every window on the file, so random readers soon prefetch nothing.
//
// The advice is a byte range, stripe-unit aligned, never fetched before by that stream: the
// caller fetches it (from every owner in parallel) into the owners' L2 and its own L1.
//
// Thread-safe: sharded by file.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "cache/cache_options.h"

namespace tidepool::cache {

enum class AccessPattern : std::uint8_t { random, concurrency, streaming };

// Bytes [start, end) to fetch ahead; empty when start == end.
struct PrefetchAdvice {
  std::uint64_t start = 0;
  std::uint64_t end = 0;
  bool empty() const { return start >= end; }
  std::uint64_t size() const { return empty() ? 0 : end - start; }
};

class Prefetcher {
 public:
  explicit Prefetcher(PrefetchOptions options = {});
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // A READ of `length` bytes at `offset` of `inode` (`file_size` bytes now) by `client`, with
  // the file's access pattern, at `now_ms` on a monotonic clock: what to fetch ahead.
  PrefetchAdvice on_read(std::uint64_t inode, std::uint64_t client, std::uint64_t offset,
                         std::uint64_t length, std::uint64_t file_size, AccessPattern pattern,
                         std::uint64_t now_ms);
  // Prefetched bytes of the file were evicted before anybody read them.
  void on_waste(std::uint64_t inode, std::uint64_t bytes);

  PrefetchStatistics statistics() const;

 private:
  struct Shard;
  Shard& shard_of(std::uint64_t inode);

  const PrefetchOptions options_;
  std::vector<std::unique_ptr<Shard>> shards_;
};

}  // namespace tidepool::cache
