// CoherentStore::Impl: construction, the lock manager attached and the locks taken through it,
// the state kept of each file and what drops it, flush and statistics.
#include "cache/internal/coherent_store_impl.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>

#include "common/callback_awaitable.h"
#include "common/fail_points.h"

namespace tidepool::cache {
namespace {

constexpr int kAcquireAttempts = 16;

// Whether a file's lock weakened to `kept` still lets the node cache what it covers.
bool still_readable(lockmgr::Mode kept) {
  return kept == lockmgr::Mode::protected_read || kept == lockmgr::Mode::protected_write ||
         kept == lockmgr::Mode::exclusive;
}

}  // namespace

CoherentStore::Impl::Impl(store::Store& inner, DataIsLocal data_is_local, CacheOptions options,
                          std::shared_ptr<store::UnitClient> units)
    : inner_(inner),
      data_is_local_(std::move(data_is_local)),
      units_(std::move(units)),
      block_bytes_(options.block_bytes),
      blocks_(options.l1_bytes),
      fetches_(blocks_),
      prefetcher_([&] {
        PrefetchOptions prefetch = options.prefetch;
        prefetch.unit = options.block_bytes;
        return prefetch;
      }()),
      prefetch_limit_(std::min<std::uint64_t>(options.prefetch.node_limit, options.l1_bytes / 4)),
      read_report_interval_(options.read_report_interval),
      attributes_lock_pause_(options.attributes_lock_pause),
      clock_(clock_or_real(options.clock)) {}

AccessPattern CoherentStore::Impl::pattern_named(const std::string& name) {
  if (name == "random") return AccessPattern::random;
  if (name == "streaming") return AccessPattern::streaming;
  return AccessPattern::concurrency;
}

void CoherentStore::Impl::attach(cluster::EventLoop* loop, lockmgr::LockManager* manager) {
  std::shared_ptr<FileLocks> next;
  if (loop != nullptr && manager != nullptr) {
    lockmgr::LockCacheOptions lock_options;
    lock_options.holder = "node cache";
    next = FileLocks::make(
        *loop, *manager, lock_options,
        [weak = weak_from_this()](const lockmgr::ResourceName& resource, lockmgr::Range, Mode kept,
                                  std::function<void()> done) {
          // The data lock going drops all the node keeps of the file; the attributes' lock
          // (given up alone when idle too long) its attributes only. A change revokes both.
          if (auto self = weak.lock();
              self && !still_readable(kept) &&
              !fail_points::switched_on(fail_points::kKeepWhatCallbacksDrop)) {
            const bool attributes = resource.kind == lockmgr::ResourceKind::attributes;
            if (attributes) self->pause_attributes_lock(resource.id);
            const bool dropped =
                attributes ? self->forget_attributes(resource.id) : self->invalidate(resource.id);
            if (dropped) self->counters_.coherence_invalidations++;
          }
          done();
        });
  }
  drop_everything();
  if (std::shared_ptr<FileLocks> previous = locks_.exchange(std::move(next))) previous->close();
  drop_everything();
}

void CoherentStore::Impl::flush() {
  drop_everything();
  std::lock_guard guard(prefetched_mutex_);
  prefetched_.clear();
}

CacheStatistics CoherentStore::Impl::statistics() const {
  CacheStatistics s;
  s.l1_bytes_accessed = counters_.l1_bytes_accessed.load();
  s.l1_bytes_hit = counters_.l1_bytes_hit.load();
  s.l1_bytes_fetched = counters_.l1_bytes_fetched.load();
  s.l1_bytes_prefetched = counters_.l1_bytes_prefetched.load();
  s.l1_prefetch_used = counters_.l1_prefetch_used.load();
  s.l1_prefetch_wasted = counters_.l1_prefetch_wasted.load();
  s.l1_prefetch_deferred = counters_.l1_prefetch_deferred.load();
  s.l1_prefetch_in_flight = prefetch_in_flight_.load();
  s.l1_bypassed_bytes = counters_.l1_bypassed_bytes.load();
  s.l1_metadata_reads = counters_.l1_metadata_reads.load();
  s.l1_metadata_hits = counters_.l1_metadata_hits.load();
  s.coherence_invalidations = counters_.coherence_invalidations.load();
  s.l2_bytes_read = counters_.l2_bytes_read.load();
  s.blocks = blocks_.statistics();
  s.prefetch = prefetcher_.statistics();
  s.fetches = fetches_.statistics();
  return s;
}

awaitable<Result<std::optional<HeldLock>>> CoherentStore::Impl::acquire(
    lockmgr::ResourceName resource, Mode mode) {
  std::shared_ptr<FileLocks> locks = locks_.load();
  if (!locks) co_return std::optional<HeldLock>{};
  if (locks->try_acquire(resource, mode)) {
    co_return std::optional<HeldLock>{HeldLock(std::move(locks), resource)};
  }
  // Two nodes converting the same lock up at once: one of them is refused, to try again.
  Status refused;
  for (int attempt = 0; attempt < kAcquireAttempts; ++attempt) {
    auto acquiring =
        await_callback<Result<lockmgr::CachedLock>>([locks, resource, mode](auto done) {
          locks->acquire(resource, mode, lockmgr::kWholeResource, std::move(done));
        });
    Result<lockmgr::CachedLock> lock = co_await std::move(acquiring);
    if (lock.ok()) co_return std::optional<HeldLock>{HeldLock(std::move(locks), lock->id)};
    refused = lock.status();
    if (refused.code() != Errc::unavailable) break;
  }
  co_return refused;
}

std::uint64_t CoherentStore::Impl::lock_fences() const {
  std::shared_ptr<FileLocks> locks = locks_.load();
  return locks ? locks->fences() : 0;
}

Status CoherentStore::Impl::still_locked_since(std::uint64_t fences) const {
  if (lock_fences() == fences) return {};
  return error(Errc::fenced,
               "this node lost its locks (it was fenced) while a change waited under them");
}

std::optional<AccessPattern> CoherentStore::Impl::known_pattern(InodeId inode) {
  FileStripe& stripe = stripe_of(inode);
  std::lock_guard guard(stripe.mutex);
  auto it = stripe.files.find(inode);
  return it == stripe.files.end() ? std::nullopt : it->second.pattern;
}

std::optional<store::Attributes> CoherentStore::Impl::known_attributes(InodeId inode) {
  FileStripe& stripe = stripe_of(inode);
  std::lock_guard guard(stripe.mutex);
  auto it = stripe.files.find(inode);
  return it == stripe.files.end() ? std::nullopt : it->second.attributes;
}

std::optional<store::Attributes> CoherentStore::Impl::known_attributes_and_layout(InodeId inode) {
  FileStripe& stripe = stripe_of(inode);
  std::lock_guard guard(stripe.mutex);
  auto it = stripe.files.find(inode);
  if (it == stripe.files.end() || !it->second.layout) return std::nullopt;
  return it->second.attributes;
}

std::optional<store::Layout> CoherentStore::Impl::known_layout(InodeId inode) {
  FileStripe& stripe = stripe_of(inode);
  std::lock_guard guard(stripe.mutex);
  auto it = stripe.files.find(inode);
  return it == stripe.files.end() ? std::nullopt : it->second.layout;
}

std::uint64_t CoherentStore::Impl::generation_of(InodeId inode) {
  FileStripe& stripe = stripe_of(inode);
  std::lock_guard guard(stripe.mutex);
  auto [it, made] = stripe.files.try_emplace(inode);
  if (made) it->second.generation = next_generation_++;
  return it->second.generation;
}

void CoherentStore::Impl::remember(InodeId inode, std::uint64_t generation,
                                   const store::Attributes& attributes) {
  FileStripe& stripe = stripe_of(inode);
  std::lock_guard guard(stripe.mutex);
  auto it = stripe.files.find(inode);
  if (it != stripe.files.end() && it->second.generation == generation) {
    it->second.attributes = attributes;
  }
}

bool CoherentStore::Impl::invalidate(InodeId inode) {
  FileStripe& stripe = stripe_of(inode);
  std::lock_guard guard(stripe.mutex);
  const bool cached = stripe.files.erase(inode) > 0;
  blocks_.erase_file(inode);
  return cached;
}

bool CoherentStore::Impl::forget_attributes(InodeId inode) {
  FileStripe& stripe = stripe_of(inode);
  std::lock_guard guard(stripe.mutex);
  auto it = stripe.files.find(inode);
  if (it == stripe.files.end() || !it->second.attributes) return false;
  it->second.attributes.reset();
  return true;
}

void CoherentStore::Impl::forget_layout(InodeId inode) {
  FileStripe& stripe = stripe_of(inode);
  std::lock_guard guard(stripe.mutex);
  if (auto it = stripe.files.find(inode); it != stripe.files.end()) it->second.layout.reset();
}

void CoherentStore::Impl::forget_after_write(InodeId inode) {
  FileStripe& stripe = stripe_of(inode);
  std::lock_guard guard(stripe.mutex);
  if (auto it = stripe.files.find(inode); it != stripe.files.end()) {
    it->second.attributes.reset();
    it->second.generation = next_generation_++;
  }
  blocks_.erase_file(inode);
}

void CoherentStore::Impl::drop_everything() {
  for (FileStripe& stripe : stripes_) {
    std::lock_guard guard(stripe.mutex);
    for (auto& [inode, state] : stripe.files) blocks_.erase_file(inode);
    stripe.files.clear();
  }
  blocks_.clear();
}

}  // namespace tidepool::cache
