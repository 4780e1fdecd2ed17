// CoherentStore::Impl: READs, answered from L1 under the file's data lock, or around it.
#include <algorithm>
#include <boost/asio/this_coro.hpp>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "cache/internal/coherent_store_impl.h"

namespace tidepool::cache {
namespace {

namespace asio = boost::asio;

// Replies being written may pin at most 1/kShareForReplies of L1's budget; beyond it they copy.
constexpr std::size_t kShareForReplies = 4;

// Copies a read's pieces, in order, to `to`.
void copy_pieces(const std::vector<std::span<const std::uint8_t>>& pieces, std::uint8_t* to) {
  for (std::span<const std::uint8_t> piece : pieces) {
    std::memcpy(to, piece.data(), piece.size());
    to += piece.size();
  }
}

}  // namespace

// Blocks a READ's reply is sent from, and the cache they belong to: a reply may outlive
// the CoherentStore. `cache` is declared first so that it goes after the handles.
struct CoherentStore::Impl::PinnedBlocks {
  PinnedBlocks(std::shared_ptr<Impl> owner, Blocks held, std::uint64_t pinned)
      : cache(std::move(owner)), blocks(std::move(held)), bytes(pinned) {
    cache->pinned_by_replies_ += bytes;
  }
  PinnedBlocks(const PinnedBlocks&) = delete;
  PinnedBlocks& operator=(const PinnedBlocks&) = delete;
  ~PinnedBlocks() { cache->pinned_by_replies_ -= bytes; }

  const std::shared_ptr<Impl> cache;
  const Blocks blocks;
  const std::uint64_t bytes;
};

awaitable<Result<store::ReadResult>> CoherentStore::Impl::read(InodeId inode, std::uint64_t offset,
                                                               std::span<std::uint8_t> into,
                                                               store::Caller caller) {
  const bool local = data_is_local_(inode);
  if (!local) {
    const auto count = static_cast<std::uint32_t>(
        std::min<std::size_t>(into.size(), std::numeric_limits<std::uint32_t>::max()));
    auto trying = read_from_l1(inode, offset, count, caller, false);
    std::optional<Result<store::ReadPieces>> l1 = co_await std::move(trying);
    if (l1) {
      if (!l1->ok()) co_return l1->status();
      copy_pieces((*l1)->pieces, into.data());
      co_return (*l1)->result;
    }
  }
  auto reading = inner_.read(inode, offset, into, std::move(caller));
  Result<store::ReadResult> read = co_await std::move(reading);
  if (read.ok()) count_around_l1(local, read->count);
  co_return read;
}

awaitable<Result<store::ReadPieces>> CoherentStore::Impl::read_pieces(InodeId inode,
                                                                      std::uint64_t offset,
                                                                      std::uint32_t count,
                                                                      store::Caller caller) {
  const bool local = data_is_local_(inode);
  if (!local) {
    auto trying = read_from_l1(inode, offset, count, caller, true);
    std::optional<Result<store::ReadPieces>> l1 = co_await std::move(trying);
    if (l1) co_return std::move(*l1);
  }
  auto reading = inner_.read_pieces(inode, offset, count, std::move(caller));
  Result<store::ReadPieces> read = co_await std::move(reading);
  if (read.ok()) count_around_l1(local, read->result.count);
  co_return read;
}

awaitable<std::optional<Result<store::ReadPieces>>> CoherentStore::Impl::read_from_l1(
    InodeId inode, std::uint64_t offset, std::uint32_t count, const store::Caller& caller,
    bool for_reply) {
  const bool small_random_read =
      count < block_bytes_ && known_pattern(inode) == AccessPattern::random;
  if (count == 0 || small_random_read) co_return std::nullopt;
  auto acquiring = acquire(data_lock(inode), Mode::protected_read);
  Result<std::optional<HeldLock>> held = co_await std::move(acquiring);
  if (!held.ok() || !held->has_value()) co_return std::nullopt;
  auto lock = std::make_shared<HeldLock>(std::move(**held));
  auto reading = read_through_l1(inode, offset, count, caller, lock, for_reply);
  Result<store::ReadPieces> read = co_await std::move(reading);
  const Errc code = read.code();
  if (code == Errc::unavailable || code == Errc::io_error || code == Errc::corrupt) {
    co_return std::nullopt;
  }
  co_return read;
}

void CoherentStore::Impl::count_around_l1(bool local, std::uint32_t bytes) {
  (local ? counters_.l2_bytes_read : counters_.l1_bypassed_bytes) += bytes;
}

awaitable<Result<store::ReadPieces>> CoherentStore::Impl::read_through_l1(
    InodeId inode, std::uint64_t offset, std::uint32_t length, const store::Caller& caller,
    std::shared_ptr<HeldLock> lock, bool for_reply) {
  const std::uint64_t first = offset / block_bytes_;
  // A node that reads at the owners needs the layout too: attributes a LOOKUP or GETATTR
  // brought come without it, and blocks fetched without it would go the home's way (the whole
  // of a first READ and SmartRead's first window).
  std::optional<store::Attributes> attributes =
      units_ ? known_attributes_and_layout(inode) : known_attributes(inode);
  counters_.l1_metadata_reads++;
  if (attributes) counters_.l1_metadata_hits++;
  if (!attributes && units_) {
    // Both learnt, so that even the first blocks come from their owners.
    auto learning = learn_file(inode);
    attributes = co_await std::move(learning);
  }
  // SmartRead fetches ahead from the moment the READ arrives: the reader's next READs,
  // already on their way, would otherwise start those fetches themselves.
  const bool advised = attributes.has_value();
  if (attributes) {
    auto prefetching = prefetch_ahead(inode, caller.client, offset, length, attributes->size, lock);
    co_await std::move(prefetching);
  }
  BlockCache::Handle first_block;  // fetched for the attributes
  if (!attributes) {
    // The first block brings them.
    auto fetching = fetch(inode, first, {0}, 1, false);
    Result<Blocks> fetched = co_await std::move(fetching);
    if (!fetched.ok()) co_return fetched.status();
    first_block = std::move(fetched->front());
    attributes = known_attributes(inode);
    if (!attributes) co_return error(Errc::unavailable, "the file changed while it was read");
  }
  TP_CO_RETURN_IF_ERROR(store::check_read_access(*attributes, caller));
  const std::uint64_t size = attributes->size;
  const std::uint64_t end = std::min<std::uint64_t>(offset + length, size);
  if (offset >= end) co_return store::ReadPieces{{0, true, *attributes}, {}, nullptr};

  const std::uint64_t last = (end - 1) / block_bytes_;
  const std::size_t count = last - first + 1;
  Blocks blocks(count);
  std::vector<std::size_t> missing;
  std::uint64_t hit_bytes = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const BlockKey key{inode, first + i};
    if (i == 0 && first_block) {
      blocks[i] = std::move(first_block);
      continue;
    }
    blocks[i] = blocks_.lookup(key);
    if (!blocks[i]) {
      missing.push_back(i);
      continue;
    }
    hit_bytes += overlap(key.block, offset, end);
    note_read(key);
  }
  if (!missing.empty()) {
    auto fetching = fetch(inode, first, missing, count, false);
    Result<Blocks> fetched = co_await std::move(fetching);
    if (!fetched.ok()) co_return fetched.status();
    for (std::size_t i : missing) {
      blocks[i] = std::move((*fetched)[i]);
      // Still on its way from a prefetch when the READ came: the prefetch was of use.
      note_read({inode, first + i});
    }
  }
  const bool streaming = known_pattern(inode) == AccessPattern::streaming;
  store::ReadPieces read;
  read.pieces.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint64_t block_start = (first + i) * block_bytes_;
    const std::uint64_t from = std::max(offset, block_start);
    const std::uint64_t to = std::min(end, block_start + block_bytes_);
    std::span<const std::byte> bytes = blocks[i].bytes();
    // A block shorter than the size says: the file changed while it was read.
    if (bytes.size() < to - block_start) {
      co_return error(Errc::unavailable, "a cached block is shorter than the file");
    }
    const auto* start = reinterpret_cast<const std::uint8_t*>(bytes.data());
    read.pieces.emplace_back(start + (from - block_start), to - from);
    // A streaming reader is done with a block it read to its end: it goes first, and the
    // stream does not push the rest of L1 out.
    if (streaming && to == block_start + bytes.size()) blocks[i].drop_behind();
  }
  const auto served = static_cast<std::uint32_t>(end - offset);
  auto executor = co_await asio::this_coro::executor;
  if (atime_due(*attributes)) report_read(inode, executor);
  counters_.l1_bytes_accessed += served;
  counters_.l1_bytes_hit += hit_bytes;
  if (!advised) {
    auto prefetching = prefetch_ahead(inode, caller.client, offset, served, size, lock);
    co_await std::move(prefetching);
  }
  read.result = {served, end >= size, *attributes};
  if (!for_reply) {
    read.keep = std::make_shared<const Blocks>(std::move(blocks));
    co_return read;
  }
  // A client slow to take its replies keeps their blocks pinned, which nothing can evict:
  // past a share of L1, replies take a copy instead, and stalled clients cannot take the
  // cache from the others.
  std::uint64_t pinned = 0;
  for (const BlockCache::Handle& block : blocks) pinned += block.bytes().size();
  if (pinned_by_replies_.load() + pinned > blocks_.capacity() / kShareForReplies) {
    std::shared_ptr<std::uint8_t[]> copy = std::make_shared_for_overwrite<std::uint8_t[]>(served);
    copy_pieces(read.pieces, copy.get());
    read.pieces.assign(1, {copy.get(), served});
    read.keep = std::move(copy);
  } else {
    read.keep = std::make_shared<const PinnedBlocks>(shared_from_this(), std::move(blocks), pinned);
  }
  co_return read;
}

std::uint64_t CoherentStore::Impl::overlap(std::uint64_t block, std::uint64_t offset,
                                           std::uint64_t end) const {
  const std::uint64_t start = block * block_bytes_;
  return std::min(end, start + block_bytes_) - std::max(offset, start);
}

}  // namespace tidepool::cache
