// CoherentStore::Impl: SmartRead's fetches ahead of each reader, and the count of prefetched
// blocks read (used) or evicted unread (wasted) that narrows its windows.
#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/this_coro.hpp>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "cache/internal/coherent_store_impl.h"

namespace tidepool::cache {
namespace {

namespace asio = boost::asio;

// Prefetched blocks nobody read yet are checked for eviction (waste) each time this many more
// were prefetched.
constexpr std::size_t kWasteSweepEvery = 256;

std::uint64_t monotonic_ms(const Clock& clock) {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                        clock.steady_now().time_since_epoch())
                                        .count());
}

}  // namespace

awaitable<void> CoherentStore::Impl::prefetch_ahead(InodeId inode, std::uint64_t client,
                                                    std::uint64_t offset, std::uint64_t length,
                                                    std::uint64_t size,
                                                    std::shared_ptr<HeldLock> lock) {
  if (offset + length >= size) co_return;
  auto executor = co_await asio::this_coro::executor;
  const std::optional<AccessPattern> pattern = known_pattern(inode);
  if (!pattern) {
    asio::co_spawn(executor,
                   learn_pattern_then_prefetch(shared_from_this(), inode, client, offset, length,
                                               size, std::move(lock)),
                   asio::detached);
    co_return;
  }
  const PrefetchAdvice advice =
      prefetcher_.on_read(inode, client, offset, length, size, *pattern, monotonic_ms(clock_));
  if (advice.empty()) co_return;
  const std::uint64_t first = advice.start / block_bytes_;
  const std::uint64_t last = (advice.end - 1) / block_bytes_;
  std::vector<std::size_t> missing;
  for (std::uint64_t block = first; block <= last; ++block) {
    if (!blocks_.contains({inode, block})) missing.push_back(block - first);
  }
  if (missing.empty()) co_return;
  const std::size_t reserved = reserve_prefetch(missing.size());
  counters_.l1_prefetch_deferred += (missing.size() - reserved) * block_bytes_;
  if (reserved == 0) co_return;
  missing.resize(reserved);  // the blocks nearest the reader
  asio::co_spawn(executor,
                 prefetch(shared_from_this(), inode, first, last - first + 1, std::move(missing),
                          std::move(lock)),
                 asio::detached);
}

awaitable<void> CoherentStore::Impl::learn_pattern_then_prefetch(
    std::shared_ptr<Impl> self, InodeId inode, std::uint64_t client, std::uint64_t offset,
    std::uint64_t length, std::uint64_t size, std::shared_ptr<HeldLock> lock) {
  auto asking = self->inner_.layout(inode);
  Result<store::Layout> layout = co_await std::move(asking);
  if (!layout.ok()) co_return;
  {
    FileStripe& stripe = self->stripe_of(inode);
    std::lock_guard guard(stripe.mutex);
    if (auto it = stripe.files.find(inode); it != stripe.files.end()) {
      it->second.pattern = pattern_named(layout->access_pattern);
      it->second.layout = *layout;
    }
  }
  if (!self->known_pattern(inode)) co_return;  // the file changed meanwhile
  auto prefetching = self->prefetch_ahead(inode, client, offset, length, size, std::move(lock));
  co_await std::move(prefetching);
}

awaitable<void> CoherentStore::Impl::prefetch(
    std::shared_ptr<Impl> self, InodeId inode, std::uint64_t first, std::size_t count,
    std::vector<std::size_t> missing,
    // Held until the fetches end: what they keep stays valid.
    [[maybe_unused]] std::shared_ptr<HeldLock> lock) {
  const std::uint64_t reserved = missing.size() * self->block_bytes_;
  auto fetching = self->fetch(inode, first, std::move(missing), count, true);
  (void)co_await std::move(fetching);
  self->prefetch_in_flight_ -= reserved;
}

std::size_t CoherentStore::Impl::reserve_prefetch(std::size_t blocks) {
  std::uint64_t in_flight = prefetch_in_flight_.load();
  for (;;) {
    if (in_flight > 0 && in_flight + block_bytes_ > prefetch_limit_) return 0;
    const std::uint64_t room = prefetch_limit_ > in_flight ? prefetch_limit_ - in_flight : 0;
    const std::size_t taken =
        std::min<std::size_t>(blocks, std::max<std::uint64_t>(room / block_bytes_, 1));
    if (prefetch_in_flight_.compare_exchange_weak(in_flight, in_flight + taken * block_bytes_)) {
      return taken;
    }
  }
}

void CoherentStore::Impl::note_prefetched(const BlockKey& key) {
  std::lock_guard guard(prefetched_mutex_);
  prefetched_.insert(key);
  if (++prefetched_since_sweep_ < kWasteSweepEvery) return;
  prefetched_since_sweep_ = 0;
  for (auto it = prefetched_.begin(); it != prefetched_.end();) {
    if (blocks_.contains(*it)) {
      ++it;
      continue;
    }
    counters_.l1_prefetch_wasted += block_bytes_;
    prefetcher_.on_waste(it->inode, block_bytes_);
    it = prefetched_.erase(it);
  }
}

void CoherentStore::Impl::note_read(const BlockKey& key) {
  std::lock_guard guard(prefetched_mutex_);
  if (prefetched_.erase(key) > 0) counters_.l1_prefetch_used += block_bytes_;
}

}  // namespace tidepool::cache
