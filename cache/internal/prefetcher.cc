#include "cache/internal/prefetcher.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <list>
#include <map>
#include <mutex>
#include <utility>

namespace tidepool::cache {
namespace {

// Up to a multiple of `unit`, or the largest value when there is none above.
std::uint64_t align_up(std::uint64_t value, std::uint64_t unit) {
  const std::uint64_t rest = value % unit;
  if (rest == 0) return value;
  const std::uint64_t step = unit - rest;
  return value > std::numeric_limits<std::uint64_t>::max() - step
             ? std::numeric_limits<std::uint64_t>::max()
             : value + step;
}

}  // namespace

struct Prefetcher::Shard {
  struct Stream {
    std::uint64_t inode = 0;
    std::uint64_t client = 0;
    std::uint64_t next = 0;        // where the stream's next read is expected
    std::uint64_t fetched_to = 0;  // advised up to here
    std::uint64_t window = 0;
    std::uint64_t continued = 0;  // reads that continued the stream
    bool grown = false;           // the first, fourfold widening is behind it
    std::uint64_t used_ms = 0;
  };
  using Streams = std::list<Stream>;
  using Reader = std::pair<std::uint64_t, std::uint64_t>;  // (inode, client)

  explicit Shard(std::size_t capacity) : capacity(capacity) {}

  void forget(Streams::iterator stream) {
    auto [it, end] = by_reader.equal_range(Reader{stream->inode, stream->client});
    for (; it != end; ++it) {
      if (it->second == stream) {
        by_reader.erase(it);
        break;
      }
    }
    streams.erase(stream);
    counters.streams_evicted++;
  }

  std::mutex mutex;
  const std::size_t capacity;
  Streams streams;  // least recently used first
  std::multimap<Reader, Streams::iterator> by_reader;
  PrefetchStatistics counters;
};

Prefetcher::Prefetcher(PrefetchOptions options) : options_(options) {
  const std::size_t count = std::bit_ceil(std::max<std::size_t>(options_.shards, 1));
  for (std::size_t i = 0; i < count; ++i) {
    shards_.push_back(
        std::make_unique<Shard>(std::max<std::size_t>(1, options_.max_streams / count)));
  }
}

Prefetcher::~Prefetcher() = default;

Prefetcher::Shard& Prefetcher::shard_of(std::uint64_t inode) {
  std::uint64_t h = inode * 0x9E3779B97F4A7C15ULL;
  h ^= h >> 32;
  return *shards_[h & (shards_.size() - 1)];
}

PrefetchAdvice Prefetcher::on_read(std::uint64_t inode, std::uint64_t client, std::uint64_t offset,
                                   std::uint64_t length, std::uint64_t file_size,
                                   AccessPattern pattern, std::uint64_t now_ms) {
  const std::uint64_t limit = pattern == AccessPattern::random      ? 0
                              : pattern == AccessPattern::streaming ? options_.streaming_limit
                                                                    : options_.concurrency_limit;
  // Offsets come from clients: a read that would run past the largest offset ends there.
  length = std::min(length, std::numeric_limits<std::uint64_t>::max() - offset);
  const std::uint64_t read_end = offset + length;
  const std::uint64_t slack = std::min(options_.slack, 8 * std::max<std::uint64_t>(length, 1));
  Shard& shard = shard_of(inode);
  std::lock_guard guard(shard.mutex);
  shard.counters.reads++;
  while (!shard.streams.empty() && now_ms - std::min(now_ms, shard.streams.front().used_ms) >
                                       static_cast<std::uint64_t>(options_.idle_expiry.count())) {
    shard.forget(shard.streams.begin());
  }

  // The stream this read continues: the one of its reader expecting the nearest offset.
  const auto [first, last] = shard.by_reader.equal_range(Shard::Reader{inode, client});
  Shard::Streams::iterator stream = shard.streams.end();
  std::uint64_t nearest = slack + 1;
  for (auto it = first; it != last; ++it) {
    const std::uint64_t next = it->second->next;
    const std::uint64_t distance = offset > next ? offset - next : next - offset;
    if (distance < nearest) {
      nearest = distance;
      stream = it->second;
    }
  }

  if (stream != shard.streams.end()) {
    shard.counters.sequential++;
    stream->next = std::max(stream->next, read_end);
    stream->continued++;
    if (stream->window == 0) {
      if (stream->continued >= 2) stream->window = options_.first_window;
    } else {
      stream->window *= stream->grown ? 2 : 4;
      stream->grown = true;
    }
    stream->window = std::min(stream->window, limit);
    stream->used_ms = now_ms;
    shard.streams.splice(shard.streams.end(), shard.streams, stream);
  } else {
    if (offset != 0) {
      // Not where any stream of this reader was going: random access, so far.
      for (auto it = first; it != last; ++it) {
        Shard::Stream& other = *it->second;
        other.window /= 2;
        if (other.window < options_.unit) other.window = 0;
      }
    }
    // A reader's oldest stream on the file gives way past the per-reader bound.
    std::size_t mine = 0;
    auto oldest = last;
    for (auto it = first; it != last; ++it, ++mine) {
      if (oldest == last || it->second->used_ms < oldest->second->used_ms) oldest = it;
    }
    if (oldest != last && mine >= std::max<std::size_t>(1, options_.max_streams_per_reader)) {
      shard.forget(oldest->second);
    }
    Shard::Stream fresh;
    fresh.inode = inode;
    fresh.client = client;
    fresh.next = read_end;
    fresh.fetched_to = read_end;
    fresh.window = offset == 0 ? std::min(options_.first_window, limit) : 0;
    fresh.used_ms = now_ms;
    stream = shard.streams.insert(shard.streams.end(), fresh);
    shard.by_reader.emplace(Shard::Reader{inode, client}, stream);
    shard.counters.streams_started++;
    if (shard.streams.size() > shard.capacity) shard.forget(shard.streams.begin());
  }

  if (stream->window == 0 || read_end >= file_size) return {};
  PrefetchAdvice advice;
  advice.start = align_up(std::max(stream->fetched_to, read_end), options_.unit);
  const std::uint64_t reach = read_end + std::min(stream->window, file_size - read_end);
  advice.end = std::min(align_up(reach, options_.unit), file_size);
  if (advice.empty()) return {};
  stream->fetched_to = advice.end;
  shard.counters.advised_bytes += advice.size();
  return advice;
}

void Prefetcher::on_waste(std::uint64_t inode, std::uint64_t bytes) {
  Shard& shard = shard_of(inode);
  std::lock_guard guard(shard.mutex);
  shard.counters.wasted_bytes += bytes;
  for (auto it = shard.by_reader.lower_bound(Shard::Reader{inode, 0});
       it != shard.by_reader.end() && it->first.first == inode; ++it) {
    Shard::Stream& stream = *it->second;
    stream.window /= 2;
    stream.grown = true;
    if (stream.window < options_.unit) stream.window = 0;
  }
}

PrefetchStatistics Prefetcher::statistics() const {
  PrefetchStatistics total;
  for (const auto& shard : shards_) {
    std::lock_guard guard(shard->mutex);
    total.reads += shard->counters.reads;
    total.sequential += shard->counters.sequential;
    total.streams_started += shard->counters.streams_started;
    total.streams_evicted += shard->counters.streams_evicted;
    total.advised_bytes += shard->counters.advised_bytes;
    total.wasted_bytes += shard->counters.wasted_bytes;
    total.streams += shard->streams.size();
  }
  return total;
}

}  // namespace tidepool::cache
