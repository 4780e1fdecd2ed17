// What a node's coherent cache (cache/coherent_store.h) is told to do, and what it counts.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "common/block_cache.h"
#include "common/clock.h"

namespace tidepool::cache {

// How SmartRead prefetches (cache/internal/prefetcher.h).
struct PrefetchOptions {
  std::uint64_t unit = 128 * 1024;  // the stripe unit: what one fetch brings
  std::uint64_t first_window = 256 * 1024;
  std::uint64_t concurrency_limit = 4 * 1024 * 1024;
  std::uint64_t streaming_limit = 32 * 1024 * 1024;
  // Bytes all of a node's prefetches may have in flight at once (at most a quarter of L1):
  // readers on many streams would otherwise queue more at the owners than they serve within
  // a call's deadline. What SmartRead advises beyond it is left to the readers' next READs.
  std::uint64_t node_limit = 64 * 1024 * 1024;
  // How far from a stream's next offset a read may land and still continue it, at most: READs
  // of one reader arrive a little out of order when several are in flight.
  std::uint64_t slack = 1024 * 1024;
  std::size_t max_streams = 4096;
  std::size_t max_streams_per_reader = 16;  // of one client on one file
  std::chrono::milliseconds idle_expiry{30'000};
  std::size_t shards = 8;
};

struct PrefetchStatistics {
  std::uint64_t reads = 0;
  std::uint64_t sequential = 0;  // reads that continued a stream
  std::uint64_t streams_started = 0;
  std::uint64_t streams_evicted = 0;  // for the table's bound, or idle
  std::uint64_t advised_bytes = 0;
  std::uint64_t wasted_bytes = 0;  // as the cache reported them
  std::uint64_t streams = 0;       // in the table now
};

struct FetchStatistics {
  std::uint64_t hits = 0;     // answered from the cache
  std::uint64_t started = 0;  // fetches started
  std::uint64_t merged = 0;   // asks that waited for a fetch already under way
  std::uint64_t failed = 0;   // fetches that ended in an error
};

struct CacheOptions {
  std::size_t l1_bytes = std::size_t{1} << 30;
  std::uint32_t block_bytes = 128 * 1024;  // the stripe unit
  PrefetchOptions prefetch;                // its unit is block_bytes
  // A file read from L1 is reported to its home, which moves its atime, at most this often:
  // the home never sees those reads otherwise, and the file would look cold to the tiering
  // policies however often it is read.
  std::chrono::milliseconds read_report_interval{1000};
  // A file's attributes' lock that a change took from the node is not asked for again for this
  // long: a client polling the attributes of a file written through another node would
  // otherwise have every write wait for the lock to come back.
  std::chrono::milliseconds attributes_lock_pause{1000};
  // What the pauses, the reports' interval, the atime grace and the streams' expiry count on;
  // null: the real clock.
  Clock* clock = nullptr;
};

struct CacheStatistics {
  // READ bytes of files whose data is on other nodes, asked while L1 could serve them.
  std::uint64_t l1_bytes_accessed = 0;
  std::uint64_t l1_bytes_hit = 0;         // of those, in L1 when the READ came
  std::uint64_t l1_bytes_fetched = 0;     // fetched into L1 for READs that missed
  std::uint64_t l1_bytes_prefetched = 0;  // fetched into L1 ahead of the readers
  std::uint64_t l1_prefetch_used = 0;     // prefetched bytes read afterwards
  std::uint64_t l1_prefetch_wasted = 0;   // prefetched bytes evicted or dropped unread
  std::uint64_t l1_prefetch_deferred = 0;  // advised, not fetched: the node's limit was reached
  std::uint64_t l1_prefetch_in_flight = 0;  // bytes being prefetched now
  std::uint64_t l1_bypassed_bytes = 0;    // READ bytes served around L1 (no lock, random)
  // Attribute look-ups of those READs (each checks the reader's rights and the file's size),
  // and of them those the attributes cached in L1 answered.
  std::uint64_t l1_metadata_reads = 0;
  std::uint64_t l1_metadata_hits = 0;
  // Files whose L1 blocks and attributes were dropped for another node's write.
  std::uint64_t coherence_invalidations = 0;
  // READ bytes of files whose data is on this node, served from its own copy.
  std::uint64_t l2_bytes_read = 0;
  BlockCacheStatistics blocks;
  PrefetchStatistics prefetch;
  FetchStatistics fetches;
};

}  // namespace tidepool::cache
