// CoherentStore::Impl: attributes and rights as L1 keeps them (GETATTR, ACCESS), the
// attributes' lock taken in the background, a file's attributes and layout learnt together,
// and the atime policy with the reports of reads served from L1.
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
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
using namespace boost::asio::experimental::awaitable_operators;

// Files remembered as reported to their home, per stripe; past this, the expired are forgotten.
constexpr std::size_t kMaxReportedFiles = 4096;
// Attributes' locks asked for in the background at once: past this, GETATTRs ask for none.
constexpr std::size_t kMaxAttributeLocksTaken = 256;
// Files whose attributes' lock is paused, at most; past this, the pauses over are forgotten.
constexpr std::size_t kMaxAttributeLocksPaused = 4096;

}  // namespace

void CoherentStore::Impl::set_atime_policy(bool enabled, std::chrono::seconds grace_period) {
  atime_grace_ns_.store(std::chrono::nanoseconds(grace_period).count());
  atime_enabled_.store(enabled);
  inner_.set_atime_policy(enabled, grace_period);
}

awaitable<Result<store::AccessResult>> CoherentStore::Impl::check_access(InodeId inode,
                                                                         store::Caller caller,
                                                                         std::uint32_t requested) {
  auto asking = getattr(inode);
  Result<store::Attributes> attributes = co_await std::move(asking);
  if (!attributes.ok()) co_return attributes.status();
  co_return store::AccessResult{store::access_granted(*attributes, caller, requested), *attributes};
}

awaitable<Result<store::Attributes>> CoherentStore::Impl::getattr(InodeId inode) {
  if (const std::optional<HeldLock> held = held_already(inode)) {
    auto asking = attributes_under_lock(inode);
    co_return co_await std::move(asking);
  }
  auto asking = inner_.getattr(inode);
  Result<store::Attributes> attributes = co_await std::move(asking);
  if (attributes.ok()) take_attributes_lock(*attributes);
  co_return attributes;
}

void CoherentStore::Impl::take_attributes_lock(const store::Attributes& attributes) {
  std::shared_ptr<FileLocks> locks = locks_.load();
  const InodeId inode = attributes.inode;
  if (!locks || data_is_local_(inode) || attributes.type != store::FileType::regular) return;
  {
    std::lock_guard guard(attribute_locks_mutex_);
    if (auto paused = attribute_locks_paused_.find(inode);
        paused != attribute_locks_paused_.end()) {
      if (clock_.steady_now() < paused->second) return;
      attribute_locks_paused_.erase(paused);
    }
    if (attribute_locks_taken_.size() >= kMaxAttributeLocksTaken ||
        !attribute_locks_taken_.insert(inode).second) {
      return;
    }
  }
  locks->acquire(attributes_lock(inode), Mode::protected_read, lockmgr::kWholeResource,
                 [weak = weak_from_this(), locks, inode](Result<lockmgr::CachedLock> lock) {
                   if (lock.ok()) locks->release(lock->id);
                   if (auto self = weak.lock()) {
                     std::lock_guard guard(self->attribute_locks_mutex_);
                     self->attribute_locks_taken_.erase(inode);
                   }
                 });
}

void CoherentStore::Impl::pause_attributes_lock(InodeId inode) {
  const auto now = clock_.steady_now();
  std::lock_guard guard(attribute_locks_mutex_);
  if (attribute_locks_paused_.size() >= kMaxAttributeLocksPaused) {
    std::erase_if(attribute_locks_paused_, [&](const auto& entry) { return entry.second <= now; });
    if (attribute_locks_paused_.size() >= kMaxAttributeLocksPaused) {
      attribute_locks_paused_.clear();
    }
  }
  attribute_locks_paused_[inode] = now + attributes_lock_pause_;
}

std::optional<HeldLock> CoherentStore::Impl::held_already(InodeId inode) {
  std::shared_ptr<FileLocks> locks = locks_.load();
  if (data_is_local_(inode) || !locks) return std::nullopt;
  for (const lockmgr::ResourceName& resource : {data_lock(inode), attributes_lock(inode)}) {
    if (locks->try_acquire(resource, Mode::protected_read)) {
      return std::optional<HeldLock>{std::in_place, locks, resource};
    }
  }
  return std::nullopt;
}

awaitable<Result<store::Attributes>> CoherentStore::Impl::attributes_under_lock(InodeId inode) {
  counters_.l1_metadata_reads++;
  if (std::optional<store::Attributes> known = known_attributes(inode)) {
    counters_.l1_metadata_hits++;
    co_return *known;
  }
  const std::uint64_t generation = generation_of(inode);
  auto asking = inner_.getattr(inode);
  Result<store::Attributes> attributes = co_await std::move(asking);
  if (attributes.ok() && attributes->type == store::FileType::regular) {
    remember(inode, generation, *attributes);
  }
  co_return attributes;
}

awaitable<std::optional<store::Attributes>> CoherentStore::Impl::learn_file(InodeId inode) {
  const std::uint64_t generation = generation_of(inode);
  auto attributes_asked = inner_.getattr(inode);
  auto layout_asked = inner_.layout(inode);
  auto [attributes, layout] = co_await (std::move(attributes_asked) && std::move(layout_asked));
  if (!attributes.ok() || attributes->type != store::FileType::regular) co_return std::nullopt;
  FileStripe& stripe = stripe_of(inode);
  std::lock_guard guard(stripe.mutex);
  auto it = stripe.files.find(inode);
  if (it == stripe.files.end() || it->second.generation != generation) co_return std::nullopt;
  it->second.attributes = *attributes;
  if (layout.ok()) {
    it->second.pattern = pattern_named(layout->access_pattern);
    it->second.layout = std::move(*layout);
  }
  co_return it->second.attributes;
}

bool CoherentStore::Impl::atime_due(const store::Attributes& cached) const {
  if (!atime_enabled_.load(std::memory_order_relaxed)) return false;
  const std::int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               clock_.now().time_since_epoch())
                               .count();
  return now - cached.atime_ns >= atime_grace_ns_.load(std::memory_order_relaxed);
}

void CoherentStore::Impl::report_read(InodeId inode, const asio::any_io_executor& executor) {
  const auto now = clock_.steady_now();
  {
    // Striped by file: READs of different files on different threads do not meet here.
    ReportedStripe& stripe = reported_[inode % kFileStripes];
    std::lock_guard guard(stripe.mutex);
    auto [at, added] = stripe.files.try_emplace(inode, now);
    if (!added) {
      if (now - at->second < read_report_interval_) return;
      at->second = now;
    }
    if (stripe.files.size() > kMaxReportedFiles) {
      std::erase_if(stripe.files,
                    [&](const auto& entry) { return now - entry.second >= read_report_interval_; });
      if (stripe.files.size() > kMaxReportedFiles) stripe.files.clear();
    }
  }
  {
    std::lock_guard guard(reads_mutex_);
    unreported_.push_back(inode);
    if (reporting_) return;
    reporting_ = true;
  }
  asio::co_spawn(executor, send_read_reports(shared_from_this()), asio::detached);
}

awaitable<void> CoherentStore::Impl::send_read_reports(std::shared_ptr<Impl> self) {
  for (;;) {
    std::vector<InodeId> batch;
    {
      std::lock_guard guard(self->reads_mutex_);
      batch.swap(self->unreported_);
      if (batch.empty()) {
        self->reporting_ = false;
        co_return;
      }
    }
    auto sending = self->inner_.record_reads(std::move(batch));
    // A report lost (the home away) is made again by the next read after the interval.
    (void)co_await std::move(sending);
  }
}

}  // namespace tidepool::cache
