// CoherentStore::Impl: blocks fetched into L1, one fetch a block at a time (FetchTable), from
// the owners of their units directly when the file's layout lets it, else from the home.
#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/this_coro.hpp>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "cache/internal/coherent_store_impl.h"
#include "common/callback_awaitable.h"

namespace tidepool::cache {
namespace {

namespace asio = boost::asio;

// Blocks are fetched with the rights of the node itself: the reader's own rights are checked
// here, against the attributes the fetch brought, for every read the block serves.
const store::Caller kNodeItself{0, 0, {}};

}  // namespace

awaitable<Result<CoherentStore::Impl::Blocks>> CoherentStore::Impl::fetch(
    InodeId inode, std::uint64_t first, std::vector<std::size_t> wanted, std::size_t count,
    bool prefetch) {
  struct Join {
    std::mutex mutex;
    Blocks blocks;          // guarded by mutex
    Status failure;         // guarded by mutex
    std::size_t remaining;  // guarded by mutex
    std::function<void(Result<Blocks>)> done;
  };
  if (wanted.empty()) co_return Blocks(count);
  const std::uint64_t generation = generation_of(inode);
  auto executor = co_await asio::this_coro::executor;
  auto fetching = await_callback<Result<Blocks>>([&](auto done) {
    auto join = std::make_shared<Join>();
    join->blocks.resize(count);
    join->remaining = wanted.size();
    join->done = std::move(done);
    for (std::size_t i : wanted) {
      const BlockKey key{inode, first + i};
      fetches_.fetch(
          key,
          [self = shared_from_this(), key, generation, prefetch,
           executor](FetchTable::Fetched fetched) {
            asio::co_spawn(executor,
                           fetch_block(self, key, generation, prefetch, std::move(fetched)),
                           asio::detached);
          },
          [join, i](Result<BlockCache::Handle> block) {
            std::unique_lock guard(join->mutex);
            if (block.ok()) {
              join->blocks[i] = std::move(*block);
            } else if (join->failure.ok()) {
              join->failure = block.status();
            }
            if (--join->remaining > 0) return;
            Result<Blocks> all = join->failure.ok() ? Result<Blocks>(std::move(join->blocks))
                                                    : Result<Blocks>(join->failure);
            guard.unlock();
            join->done(std::move(all));
          });
    }
  });
  co_return co_await std::move(fetching);
}

awaitable<void> CoherentStore::Impl::fetch_block(std::shared_ptr<Impl> self, BlockKey key,
                                                 std::uint64_t generation, bool prefetch,
                                                 FetchTable::Fetched fetched) {
  const std::size_t room = self->room_for(key);
  Result<store::ReadPieces> read = error(Errc::unavailable, "not read");
  if (auto direct = self->direct_read(key, room)) {
    read = co_await std::move(*direct);
  }
  if (!read.ok()) {
    auto reading = self->inner_.read_pieces(key.inode, key.block * self->block_bytes_,
                                            static_cast<std::uint32_t>(room), kNodeItself);
    read = co_await std::move(reading);
  }
  if (!read.ok()) {
    fetched(read.status());
    co_return;
  }
  const std::uint32_t count = read->result.count;
  Result<BlockCache::Handle> kept = self->keep(key, generation, std::move(*read), room);
  if (kept.ok()) {
    (prefetch ? self->counters_.l1_bytes_prefetched : self->counters_.l1_bytes_fetched) += count;
    // Before any reader waiting for it has it: its read then counts the prefetch as used.
    if (prefetch && kept->cached()) self->note_prefetched(key);
  }
  fetched(std::move(kept));
}

std::optional<awaitable<Result<store::ReadPieces>>> CoherentStore::Impl::direct_read(
    const BlockKey& key, std::size_t room) {
  if (!units_ || room == 0) return std::nullopt;
  std::optional<store::Layout> layout;
  std::optional<store::Attributes> attributes;
  {
    FileStripe& stripe = stripe_of(key.inode);
    std::lock_guard guard(stripe.mutex);
    auto it = stripe.files.find(key.inode);
    if (it == stripe.files.end()) return std::nullopt;
    layout = it->second.layout;
    attributes = it->second.attributes;
  }
  const std::uint64_t start = key.block * block_bytes_;
  if (!layout || !attributes || !store::UnitClient::serves(*layout) ||
      layout->stripe_unit != block_bytes_ || attributes->size <= start) {
    return std::nullopt;
  }
  return read_from_owners(units_, std::move(*layout), std::move(*attributes), key.inode, start,
                          static_cast<std::uint32_t>(room));
}

awaitable<Result<store::ReadPieces>> CoherentStore::Impl::read_from_owners(
    std::shared_ptr<store::UnitClient> units, store::Layout layout, store::Attributes attributes,
    InodeId inode, std::uint64_t start, std::uint32_t count) {
  auto reading = units->read(layout, inode, start, count);
  Result<xdr::Buffer> bytes = co_await std::move(reading);
  if (!bytes.ok()) co_return bytes.status();
  auto message = std::make_shared<const xdr::Buffer>(std::move(*bytes));
  store::ReadPieces read{
      {count, start + count >= attributes.size, std::move(attributes)}, {}, message};
  read.pieces.emplace_back(message->data(), message->size());
  co_return read;
}

Result<BlockCache::Handle> CoherentStore::Impl::keep(const BlockKey& key, std::uint64_t generation,
                                                     store::ReadPieces read, std::size_t room) {
  FileStripe& stripe = stripe_of(key.inode);
  std::lock_guard guard(stripe.mutex);
  auto it = stripe.files.find(key.inode);
  if (it == stripe.files.end() || it->second.generation != generation) {
    return error(Errc::unavailable, "the file changed while its block was fetched");
  }
  it->second.attributes = read.result.attributes;
  // Pages lent for a reply are copied out: L1 keeps its blocks in memory of its own.
  TP_RETURN_IF_ERROR(store::take_out_of_pipe(read));
  std::span<const std::uint8_t> bytes;
  if (!read.pieces.empty()) bytes = read.pieces.front();
  if (read.pieces.size() > 1 || bytes.size() != read.result.count) {
    return error(Errc::io_error, "a fetched block's bytes are not one piece of its count");
  }
  // Adopting another cache's pinned block would charge both budgets for as long as L1
  // keeps it.
  if (read.pins_a_cache) return blocks_.insert(key, std::as_bytes(bytes));
  return blocks_.insert(key, std::move(read.keep), std::as_bytes(bytes), room);
}

std::size_t CoherentStore::Impl::room_for(const BlockKey& key) {
  const std::uint64_t start = key.block * block_bytes_;
  const std::optional<store::Attributes> attributes = known_attributes(key.inode);
  if (!attributes || attributes->size <= start) return block_bytes_;
  return static_cast<std::size_t>(std::min<std::uint64_t>(block_bytes_, attributes->size - start));
}

}  // namespace tidepool::cache
