#include "cache/coherent_store.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/this_coro.hpp>
#include <chrono>
#include <cstring>
#include <limits>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "cache/internal/fetch_table.h"
#include "cache/internal/file_locks.h"
#include "cache/internal/prefetcher.h"
#include "common/callback_awaitable.h"

namespace tidepool::cache {
namespace {

namespace asio = boost::asio;
using namespace boost::asio::experimental::awaitable_operators;
using lockmgr::Mode;
using store::InodeId;

constexpr std::size_t kFileStripes = 16;
constexpr int kAcquireAttempts = 16;
// Prefetched blocks nobody read yet are checked for eviction (waste) each time this many more
// were prefetched.
constexpr std::size_t kWasteSweepEvery = 256;
// Replies being written may pin at most 1/kShareForReplies of L1's budget; beyond it they copy.
constexpr std::size_t kShareForReplies = 4;
// Files remembered as reported to their home, per stripe; past this, the expired are forgotten.
constexpr std::size_t kMaxReportedFiles = 4096;
// Attributes' locks asked for in the background at once: past this, GETATTRs ask for none.
constexpr std::size_t kMaxAttributeLocksTaken = 256;
// Files whose attributes' lock is paused, at most; past this, the pauses over are forgotten.
constexpr std::size_t kMaxAttributeLocksPaused = 4096;
// Blocks are fetched with the rights of the node itself: the reader's own rights are checked
// here, against the attributes the fetch brought, for every read the block serves.
const store::Caller kNodeItself{0, 0, {}};

AccessPattern pattern_named(const std::string& name) {
  if (name == "random") return AccessPattern::random;
  if (name == "streaming") return AccessPattern::streaming;
  return AccessPattern::concurrency;
}

// Whether a file's lock weakened to `kept` still lets the node cache what it covers.
bool still_readable(Mode kept) {
  return kept == Mode::protected_read || kept == Mode::protected_write || kept == Mode::exclusive;
}

std::uint64_t monotonic_ms() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

struct BlockKeyHash {
  std::size_t operator()(const BlockKey& key) const {
    return std::hash<std::uint64_t>{}(key.inode * 0x9e3779b97f4a7c15ull ^ key.block);
  }
};

// One acquisition of a file's lock, given back when it goes: through the lock cache, or,
// for a lock the node held already, directly.
class HeldLock {
 public:
  HeldLock(std::shared_ptr<FileLocks> locks, lockmgr::LockId id)
      : locks_(std::move(locks)), id_(id) {}
  HeldLock(std::shared_ptr<FileLocks> locks, const lockmgr::ResourceName& direct)
      : locks_(std::move(locks)), direct_(direct) {}
  HeldLock(HeldLock&& other) noexcept
      : locks_(std::move(other.locks_)), id_(other.id_), direct_(other.direct_) {}
  HeldLock& operator=(HeldLock&&) = delete;
  HeldLock(const HeldLock&) = delete;
  ~HeldLock() {
    if (!locks_) return;
    if (direct_) {
      locks_->release_direct(*direct_);
    } else {
      locks_->release(id_);
    }
  }

 private:
  std::shared_ptr<FileLocks> locks_;
  lockmgr::LockId id_;
  std::optional<lockmgr::ResourceName> direct_;
};

struct Counters {
  std::atomic<std::uint64_t> l1_bytes_accessed{0};
  std::atomic<std::uint64_t> l1_bytes_hit{0};
  std::atomic<std::uint64_t> l1_bytes_fetched{0};
  std::atomic<std::uint64_t> l1_bytes_prefetched{0};
  std::atomic<std::uint64_t> l1_prefetch_used{0};
  std::atomic<std::uint64_t> l1_prefetch_wasted{0};
  std::atomic<std::uint64_t> l1_bypassed_bytes{0};
  std::atomic<std::uint64_t> l1_metadata_reads{0};
  std::atomic<std::uint64_t> l1_metadata_hits{0};
  std::atomic<std::uint64_t> coherence_invalidations{0};
  std::atomic<std::uint64_t> l2_bytes_read{0};
};

// Copies a read's pieces, in order, to `to`.
void copy_pieces(const std::vector<std::span<const std::uint8_t>>& pieces, std::uint8_t* to) {
  for (std::span<const std::uint8_t> piece : pieces) {
    std::memcpy(to, piece.data(), piece.size());
    to += piece.size();
  }
}

}  // namespace

class CoherentStore::Impl : public std::enable_shared_from_this<CoherentStore::Impl> {
 public:
  using Blocks = std::vector<BlockCache::Handle>;

  Impl(store::Store& inner, DataIsLocal data_is_local, CacheOptions options,
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
        read_report_interval_(options.read_report_interval),
        attributes_lock_pause_(options.attributes_lock_pause) {}

  store::Store& inner() { return inner_; }

  // A verifier of the home's, changed whenever an owner this node wrote to directly restarted
  // (the constant differs from the home's own fold, so that the two never cancel out).
  std::uint64_t verifier_of(std::uint64_t home) const {
    const std::uint64_t restarts = units_ ? units_->restarts() : 0;
    return home ^ (restarts * 0xc2b2ae3d27d4eb4full);
  }

  void set_atime_policy(bool enabled, std::chrono::seconds grace_period) {
    atime_grace_ns_.store(std::chrono::nanoseconds(grace_period).count());
    atime_enabled_.store(enabled);
    inner_.set_atime_policy(enabled, grace_period);
  }

  void attach(cluster::EventLoop* loop, lockmgr::LockManager* manager) {
    std::shared_ptr<FileLocks> next;
    if (loop != nullptr && manager != nullptr) {
      lockmgr::LockCacheOptions lock_options;
      lock_options.holder = "node cache";
      next = FileLocks::make(
          *loop, *manager, lock_options,
          [weak = weak_from_this()](const lockmgr::ResourceName& resource, lockmgr::Range,
                                    Mode kept, std::function<void()> done) {
            // The data lock going drops all the node keeps of the file; the attributes' lock
            // (given up alone when idle too long) its attributes only. A change revokes both.
            if (auto self = weak.lock(); self && !still_readable(kept)) {
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

  // Prefetched blocks flushed unread are no waste of SmartRead's: they are forgotten.
  void flush() {
    drop_everything();
    std::lock_guard guard(prefetched_mutex_);
    prefetched_.clear();
  }
  std::size_t l1_budget() const { return blocks_.capacity(); }

  CacheStatistics statistics() const {
    CacheStatistics s;
    s.l1_bytes_accessed = counters_.l1_bytes_accessed.load();
    s.l1_bytes_hit = counters_.l1_bytes_hit.load();
    s.l1_bytes_fetched = counters_.l1_bytes_fetched.load();
    s.l1_bytes_prefetched = counters_.l1_bytes_prefetched.load();
    s.l1_prefetch_used = counters_.l1_prefetch_used.load();
    s.l1_prefetch_wasted = counters_.l1_prefetch_wasted.load();
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

  // A held acquisition of a file's lock in `mode`; none when the node has no locks to take
  // (it is no member of a cluster); an error when the lock manager refused or stopped.
  awaitable<Result<std::optional<HeldLock>>> acquire(lockmgr::ResourceName resource, Mode mode) {
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

  awaitable<Result<store::ReadResult>> read(InodeId inode, std::uint64_t offset,
                                            std::span<std::uint8_t> into, store::Caller caller) {
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

  awaitable<Result<store::ReadPieces>> read_pieces(InodeId inode, std::uint64_t offset,
                                                   std::uint32_t count, store::Caller caller) {
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

  // A READ of a file whose data is on other nodes, answered from L1; none when it goes around
  // L1: with no lock to cache under, for a small random read, and when the file changed under
  // a fetch, its home is away, or a unit fetched whole has a bad block elsewhere than the
  // bytes asked for. `for_reply`: the pieces go out in a reply, not copied at once.
  awaitable<std::optional<Result<store::ReadPieces>>> read_from_l1(InodeId inode,
                                                                   std::uint64_t offset,
                                                                   std::uint32_t count,
                                                                   const store::Caller& caller,
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

  // READ bytes served from this node's own copy (L2), or around L1.
  void count_around_l1(bool local, std::uint32_t bytes) {
    (local ? counters_.l2_bytes_read : counters_.l1_bypassed_bytes) += bytes;
  }

  // Runs `change` under the data and attributes locks of `files` in PW, taken in inode order (two
  // changes of the same files never wait for each other crosswise), then drops what this node
  // cached of them (its own readers may have fetched them meanwhile: they shared the locks).
  // `data_only`: the change writes the files' data and nothing else, so what they are laid out
  // as, and who may write them, stays known.
  template <typename T, typename Change>
  awaitable<Result<T>> change_files(std::vector<InodeId> files, Change change,
                                    bool data_only = false) {
    std::sort(files.begin(), files.end());
    files.erase(std::unique(files.begin(), files.end()), files.end());
    std::vector<HeldLock> held;
    // Every node takes them in this order: by file, then the data lock before the attributes'.
    for (InodeId inode : files) {
      for (const lockmgr::ResourceName& resource : {data_lock(inode), attributes_lock(inode)}) {
        auto acquiring = acquire(resource, Mode::protected_write);
        Result<std::optional<HeldLock>> lock = co_await std::move(acquiring);
        if (!lock.ok()) co_return lock.status();
        if (lock->has_value()) held.push_back(std::move(**lock));
      }
    }
    auto changing = change();
    Result<T> changed = co_await std::move(changing);
    for (InodeId inode : files) {
      if (data_only) {
        forget_after_write(inode);
      } else {
        invalidate(inode);
      }
    }
    co_return changed;
  }

  // Under the file's data lock in PW: its bytes go to the owners of its units directly when its
  // layout lets them (store/unit_client.h), the home recording the size and times, else the
  // home's way (which also takes over when the direct way fails, writing the bytes again).
  awaitable<Result<store::WriteResult>> write_under_lock(InodeId inode, std::uint64_t offset,
                                                         std::span<const std::uint8_t> data,
                                                         store::Stability stability,
                                                         store::Caller caller) {
    if (units_ && locks_.load() && !data_is_local_(inode) && !data.empty()) {
      auto learning = layout_and_rights(inode);
      Result<std::pair<store::Layout, store::Attributes>> known = co_await std::move(learning);
      if (known.ok() && store::UnitClient::serves(known->first) &&
          store::check_write_access(known->second, caller).ok()) {
        auto writing = units_->write(known->first, inode, offset, data,
                                     stability != store::Stability::unstable);
        const Status written = co_await std::move(writing);
        if (written.ok()) {
          auto recording =
              inner_.record_write(inode, offset, static_cast<std::uint32_t>(data.size()),
                                  stability, caller, known->first);
          Result<store::WriteResult> recorded = co_await std::move(recording);
          if (recorded.code() != Errc::unavailable) co_return recorded;
        }
        forget_layout(inode);
      }
    }
    auto writing = inner_.write(inode, offset, data, stability, std::move(caller));
    Result<store::WriteResult> written = co_await std::move(writing);
    // A reader here may have learnt the layout while the home's write went on, before it noted
    // the copies the write missed: it is learnt again.
    forget_layout(inode);
    co_return written;
  }

  // Makes durable what this node wrote to the owners of the file's units directly, seeing any
  // of them that restarted meanwhile (verifier_of), then has the home commit the file. A sync
  // that fails here is the home's to settle: it notes the copies that missed it.
  awaitable<Result<store::Wcc>> commit(InodeId inode) {
    if (units_ && locks_.load() && !data_is_local_(inode)) {
      std::optional<store::Layout> layout = known_layout(inode);
      if (!layout) {
        auto asking = inner_.layout(inode);
        Result<store::Layout> asked = co_await std::move(asking);
        if (asked.ok()) layout = std::move(*asked);
      }
      if (layout && layout->pool != store::kWithShard && !layout->nodes.empty()) {
        auto syncing = units_->sync(*layout, inode);
        (void)co_await std::move(syncing);
      }
    }
    auto committing = inner_.commit(inode);
    co_return co_await std::move(committing);
  }

  // The regular file `name` names in `directory` now, if any: a change of the name changes
  // the file too (its link count, its ctime).
  awaitable<std::vector<InodeId>> file_named(InodeId directory, std::string name,
                                             store::Caller caller) {
    if (!locks_.load()) co_return std::vector<InodeId>{};
    auto looking = inner_.lookup(directory, std::move(name), std::move(caller));
    Result<store::LookupResult> found = co_await std::move(looking);
    if (!found.ok() || found->object.type != store::FileType::regular) {
      co_return std::vector<InodeId>{};
    }
    co_return std::vector<InodeId>{found->object.inode};
  }

  // The file's rights for `caller`, worked out here from the file's attributes (see getattr),
  // as the home's check_access would from its own.
  awaitable<Result<store::AccessResult>> check_access(InodeId inode, store::Caller caller,
                                                      std::uint32_t requested) {
    auto asking = getattr(inode);
    Result<store::Attributes> attributes = co_await std::move(asking);
    if (!attributes.ok()) co_return attributes.status();
    co_return store::AccessResult{store::access_granted(*attributes, caller, requested),
                                  *attributes};
  }

  // A file's attributes: under the file's data lock or its attributes' lock, when the node
  // holds one in PR already, those L1 keeps, or the home's, kept if they are a regular file's (a
  // directory's change with the entries made in it, under no lock). Else the home's; for a
  // regular file the node then takes the attributes' lock in the background, for the next
  // GETATTR. A GETATTR never waits for the lock manager.
  awaitable<Result<store::Attributes>> getattr(InodeId inode) {
    if (const std::optional<HeldLock> held = held_already(inode)) {
      auto asking = attributes_under_lock(inode);
      co_return co_await std::move(asking);
    }
    auto asking = inner_.getattr(inode);
    Result<store::Attributes> attributes = co_await std::move(asking);
    if (attributes.ok()) take_attributes_lock(*attributes);
    co_return attributes;
  }

 private:
  static lockmgr::ResourceName data_lock(InodeId inode) {
    return {lockmgr::ResourceKind::data, inode};
  }
  static lockmgr::ResourceName attributes_lock(InodeId inode) {
    return {lockmgr::ResourceKind::attributes, inode};
  }

  // Has the node hold a regular file's attributes' lock in PR, cached, once the lock manager
  // grants it; at most kMaxAttributeLocksTaken at once, one per file. Nothing when L1 answers
  // for no file here: the node is no member of a cluster, or it is the home of the file's shard
  // (which answers from its own attribute cache).
  void take_attributes_lock(const store::Attributes& attributes) {
    std::shared_ptr<FileLocks> locks = locks_.load();
    const InodeId inode = attributes.inode;
    if (!locks || data_is_local_(inode) || attributes.type != store::FileType::regular) return;
    {
      std::lock_guard guard(attribute_locks_mutex_);
      if (auto paused = attribute_locks_paused_.find(inode);
          paused != attribute_locks_paused_.end()) {
        if (std::chrono::steady_clock::now() < paused->second) return;
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

  // A hold in PR of the file's data lock, or else of its attributes' lock, when the node has
  // that lock already and L1 may answer for the file; never asks the lock manager.
  std::optional<HeldLock> held_already(InodeId inode) {
    std::shared_ptr<FileLocks> locks = locks_.load();
    if (data_is_local_(inode) || !locks) return std::nullopt;
    for (const lockmgr::ResourceName& resource : {data_lock(inode), attributes_lock(inode)}) {
      if (locks->try_acquire(resource, Mode::protected_read)) {
        return std::optional<HeldLock>{std::in_place, locks, resource};
      }
    }
    return std::nullopt;
  }

  // Under a hold of the file's data lock or its attributes' lock: the attributes L1 keeps, or
  // the home's, kept if they are a regular file's.
  awaitable<Result<store::Attributes>> attributes_under_lock(InodeId inode) {
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

  struct FileState {
    std::uint64_t generation = 0;  // new each time the state is made: fetches check it
    std::optional<store::Attributes> attributes;
    std::optional<AccessPattern> pattern;
    // Where its data is, and its owner, group and mode for the checks of writes at the owners:
    // neither changes with this node's own writes, so both outlive them (forget_after_write).
    std::optional<store::Layout> layout;
    std::optional<store::Attributes> rights;
  };
  struct FileStripe {
    std::mutex mutex;
    std::unordered_map<InodeId, FileState> files;  // guarded by mutex
  };

  FileStripe& stripe_of(InodeId inode) { return stripes_[inode % kFileStripes]; }

  std::optional<AccessPattern> known_pattern(InodeId inode) {
    FileStripe& stripe = stripe_of(inode);
    std::lock_guard guard(stripe.mutex);
    auto it = stripe.files.find(inode);
    return it == stripe.files.end() ? std::nullopt : it->second.pattern;
  }

  std::optional<store::Attributes> known_attributes(InodeId inode) {
    FileStripe& stripe = stripe_of(inode);
    std::lock_guard guard(stripe.mutex);
    auto it = stripe.files.find(inode);
    return it == stripe.files.end() ? std::nullopt : it->second.attributes;
  }

  // The generation of the file's cached state, made now if there is none.
  std::uint64_t generation_of(InodeId inode) {
    FileStripe& stripe = stripe_of(inode);
    std::lock_guard guard(stripe.mutex);
    auto [it, made] = stripe.files.try_emplace(inode);
    if (made) it->second.generation = next_generation_++;
    return it->second.generation;
  }

  // Under the file's data lock: its attributes and layout, asked of the home together, kept
  // unless the file changed meanwhile. The attributes, if they are known now.
  awaitable<std::optional<store::Attributes>> learn_file(InodeId inode) {
    const std::uint64_t generation = generation_of(inode);
    auto attributes_asked = inner_.getattr(inode);
    auto layout_asked = inner_.layout(inode);
    auto [attributes, layout] =
        co_await (std::move(attributes_asked) && std::move(layout_asked));
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

  std::optional<store::Layout> known_layout(InodeId inode) {
    FileStripe& stripe = stripe_of(inode);
    std::lock_guard guard(stripe.mutex);
    auto it = stripe.files.find(inode);
    return it == stripe.files.end() ? std::nullopt : it->second.layout;
  }

  // The home said the layout the node wrote under is not the file's any more.
  void forget_layout(InodeId inode) {
    FileStripe& stripe = stripe_of(inode);
    std::lock_guard guard(stripe.mutex);
    if (auto it = stripe.files.find(inode); it != stripe.files.end()) it->second.layout.reset();
  }

  // After this node's own write of the file's data: its blocks and attributes go, and fetches
  // under way keep nothing; its layout and rights stay.
  void forget_after_write(InodeId inode) {
    FileStripe& stripe = stripe_of(inode);
    std::lock_guard guard(stripe.mutex);
    if (auto it = stripe.files.find(inode); it != stripe.files.end()) {
      it->second.attributes.reset();
      it->second.generation = next_generation_++;
    }
    blocks_.erase_file(inode);
  }

  // Under the file's data lock: its layout and the attributes its writers' rights are checked
  // against, as the node keeps them, or the home's, kept.
  awaitable<Result<std::pair<store::Layout, store::Attributes>>> layout_and_rights(InodeId inode) {
    const std::uint64_t generation = generation_of(inode);
    std::optional<store::Layout> layout;
    std::optional<store::Attributes> rights;
    {
      FileStripe& stripe = stripe_of(inode);
      std::lock_guard guard(stripe.mutex);
      if (auto it = stripe.files.find(inode); it != stripe.files.end()) {
        layout = it->second.layout;
        rights = it->second.rights ? it->second.rights : it->second.attributes;
      }
    }
    if (!layout) {
      auto asking = inner_.layout(inode);
      Result<store::Layout> asked = co_await std::move(asking);
      if (!asked.ok()) co_return asked.status();
      layout = std::move(*asked);
    }
    if (!rights) {
      auto asking = inner_.getattr(inode);
      Result<store::Attributes> asked = co_await std::move(asking);
      if (!asked.ok()) co_return asked.status();
      rights = std::move(*asked);
    }
    FileStripe& stripe = stripe_of(inode);
    std::lock_guard guard(stripe.mutex);
    if (auto it = stripe.files.find(inode);
        it != stripe.files.end() && it->second.generation == generation) {
      it->second.layout = layout;
      it->second.rights = rights;
    }
    co_return std::pair{std::move(*layout), std::move(*rights)};
  }

  // A read of the block from the owners of its unit, when the node knows the file's layout,
  // which lets it, and its size, which the block lies within; none otherwise. Under an
  // acquisition of the file's data lock, as every fetch.
  std::optional<awaitable<Result<store::ReadPieces>>> direct_read(const BlockKey& key,
                                                                  std::size_t room) {
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

  static awaitable<Result<store::ReadPieces>> read_from_owners(
      std::shared_ptr<store::UnitClient> units, store::Layout layout, store::Attributes attributes,
      InodeId inode, std::uint64_t start, std::uint32_t count) {
    auto reading = units->read(layout, inode, start, count);
    Result<xdr::Buffer> bytes = co_await std::move(reading);
    if (!bytes.ok()) co_return bytes.status();
    auto message = std::make_shared<const xdr::Buffer>(std::move(*bytes));
    store::ReadPieces read{{count, start + count >= attributes.size, std::move(attributes)},
                           {},
                           message};
    read.pieces.emplace_back(message->data(), message->size());
    co_return read;
  }

  // Drops what the node cached of the file: its blocks, attributes and pattern. Fetches under
  // way then keep nothing. Whether it had cached anything.
  bool invalidate(InodeId inode) {
    FileStripe& stripe = stripe_of(inode);
    std::lock_guard guard(stripe.mutex);
    const bool cached = stripe.files.erase(inode) > 0;
    blocks_.erase_file(inode);
    return cached;
  }

  // The file's attributes' lock went: it is not asked for again before the pause is over.
  void pause_attributes_lock(InodeId inode) {
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard guard(attribute_locks_mutex_);
    if (attribute_locks_paused_.size() >= kMaxAttributeLocksPaused) {
      std::erase_if(attribute_locks_paused_,
                    [&](const auto& entry) { return entry.second <= now; });
      if (attribute_locks_paused_.size() >= kMaxAttributeLocksPaused) {
        attribute_locks_paused_.clear();
      }
    }
    attribute_locks_paused_[inode] = now + attributes_lock_pause_;
  }

  // Drops the file's cached attributes; whether there were any. Attributes a fetch under the
  // data lock brings meanwhile are kept: that lock covers them.
  bool forget_attributes(InodeId inode) {
    FileStripe& stripe = stripe_of(inode);
    std::lock_guard guard(stripe.mutex);
    auto it = stripe.files.find(inode);
    if (it == stripe.files.end() || !it->second.attributes) return false;
    it->second.attributes.reset();
    return true;
  }

  void drop_everything() {
    for (FileStripe& stripe : stripes_) {
      std::lock_guard guard(stripe.mutex);
      for (auto& [inode, state] : stripe.files) blocks_.erase_file(inode);
      stripe.files.clear();
    }
    blocks_.clear();
  }

  // Keeps attributes read under `generation`, unless the file changed meanwhile.
  void remember(InodeId inode, std::uint64_t generation, const store::Attributes& attributes) {
    FileStripe& stripe = stripe_of(inode);
    std::lock_guard guard(stripe.mutex);
    auto it = stripe.files.find(inode);
    if (it != stripe.files.end() && it->second.generation == generation) {
      it->second.attributes = attributes;
    }
  }

  // Keeps the block `read` fetched under `generation`, with the attributes it returned, unless
  // the file changed meanwhile. Its bytes stay where the read left them (the home's reply
  // message, or the buffer a local read filled): the stores under L1 leave one piece at most.
  Result<BlockCache::Handle> keep(const BlockKey& key, std::uint64_t generation,
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

  // The bytes the block can hold: a whole unit, or what the file has left when its size is
  // known (a small file's block charges the budget what it holds).
  std::size_t room_for(const BlockKey& key) {
    const std::uint64_t start = key.block * block_bytes_;
    const std::optional<store::Attributes> attributes = known_attributes(key.inode);
    if (!attributes || attributes->size <= start) return block_bytes_;
    return static_cast<std::size_t>(
        std::min<std::uint64_t>(block_bytes_, attributes->size - start));
  }

  // The block, from the owners of its unit directly when the file's layout and size are known
  // and let it, else (and when that fails) from the home, which brings the attributes too.
  static awaitable<void> fetch_block(std::shared_ptr<Impl> self, BlockKey key,
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

  // The blocks first + i for every i in `wanted`, fetched (or found) together; the first
  // error when one cannot be had. Under an acquisition of the file's data lock.
  awaitable<Result<Blocks>> fetch(InodeId inode, std::uint64_t first,
                                  std::vector<std::size_t> wanted, std::size_t count,
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

  // Blocks a READ's reply is sent from, and the cache they belong to: a reply may outlive
  // the CoherentStore. `cache` is declared first so that it goes after the handles.
  struct PinnedBlocks {
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

  // Under `lock`, an acquisition of the file's data lock in PR, which the prefetch this read
  // starts shares. The bytes stay in their blocks, held by the result; for a reply
  // (`for_reply`) the blocks count against the share of L1 that replies may pin.
  awaitable<Result<store::ReadPieces>> read_through_l1(InodeId inode, std::uint64_t offset,
                                                       std::uint32_t length,
                                                       const store::Caller& caller,
                                                       std::shared_ptr<HeldLock> lock,
                                                       bool for_reply) {
    const std::uint64_t first = offset / block_bytes_;
    std::optional<store::Attributes> attributes = known_attributes(inode);
    counters_.l1_metadata_reads++;
    // SmartRead fetches ahead from the moment the READ arrives: the reader's next READs,
    // already on their way, would otherwise start those fetches themselves.
    const bool advised = attributes.has_value();
    if (attributes) {
      counters_.l1_metadata_hits++;
      auto prefetching =
          prefetch_ahead(inode, caller.client, offset, length, attributes->size, lock);
      co_await std::move(prefetching);
    }
    if (!attributes && units_) {
      // Learnt with the layout, so that even the first block comes from its owners.
      auto learning = learn_file(inode);
      attributes = co_await std::move(learning);
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
      read.keep =
          std::make_shared<const PinnedBlocks>(shared_from_this(), std::move(blocks), pinned);
    }
    co_return read;
  }

  // Whether a read of a file with these cached attributes would move its atime at the home.
  // The home's atime is never older than the one cached here: every attribute change takes
  // PW and drops the cached attributes, and only reads move it on after that. So a cached
  // atime within the grace period means the home would pass the report over.
  bool atime_due(const store::Attributes& cached) const {
    if (!atime_enabled_.load(std::memory_order_relaxed)) return false;
    const std::int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
    return now - cached.atime_ns >= atime_grace_ns_.load(std::memory_order_relaxed);
  }

  // Queues `inode` for its home's atime, unless it was reported within the interval; a sender
  // on `executor` takes everything queued while it was sending, so reports come in batches.
  void report_read(InodeId inode, const asio::any_io_executor& executor) {
    const auto now = std::chrono::steady_clock::now();
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
        std::erase_if(stripe.files, [&](const auto& entry) {
          return now - entry.second >= read_report_interval_;
        });
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

  static awaitable<void> send_read_reports(std::shared_ptr<Impl> self) {
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

  // The bytes of [offset, end) in block `block`.
  std::uint64_t overlap(std::uint64_t block, std::uint64_t offset, std::uint64_t end) const {
    const std::uint64_t start = block * block_bytes_;
    return std::min(end, start + block_bytes_) - std::max(offset, start);
  }

  // Tells SmartRead of a READ of `length` bytes at `offset` of a file of `size` bytes, and
  // starts fetching, in the background and under `lock`, what it advises and L1 lacks. Nothing
  // for a read that reaches the end of the file: a small file read whole costs no look-up of
  // its pattern. Only a first read of the file, or a fetch, leaves the READ's own coroutine.
  awaitable<void> prefetch_ahead(InodeId inode, std::uint64_t client, std::uint64_t offset,
                                 std::uint64_t length, std::uint64_t size,
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
        prefetcher_.on_read(inode, client, offset, length, size, *pattern, monotonic_ms());
    if (advice.empty()) co_return;
    const std::uint64_t first = advice.start / block_bytes_;
    const std::uint64_t last = (advice.end - 1) / block_bytes_;
    std::vector<std::size_t> missing;
    for (std::uint64_t block = first; block <= last; ++block) {
      if (!blocks_.contains({inode, block})) missing.push_back(block - first);
    }
    if (missing.empty()) co_return;
    asio::co_spawn(executor,
                   prefetch(shared_from_this(), inode, first, last - first + 1, std::move(missing),
                            std::move(lock)),
                   asio::detached);
  }

  static awaitable<void> learn_pattern_then_prefetch(std::shared_ptr<Impl> self, InodeId inode,
                                                     std::uint64_t client, std::uint64_t offset,
                                                     std::uint64_t length, std::uint64_t size,
                                                     std::shared_ptr<HeldLock> lock) {
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

  // Fetches the blocks first + i, i in `missing`, of the `count` from `first`.
  static awaitable<void> prefetch(std::shared_ptr<Impl> self, InodeId inode, std::uint64_t first,
                                  std::size_t count, std::vector<std::size_t> missing,
                                  // Held until the fetches end: what they keep stays valid.
                                  [[maybe_unused]] std::shared_ptr<HeldLock> lock) {
    auto fetching = self->fetch(inode, first, std::move(missing), count, true);
    (void)co_await std::move(fetching);
  }

  void note_prefetched(const BlockKey& key) {
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

  void note_read(const BlockKey& key) {
    std::lock_guard guard(prefetched_mutex_);
    if (prefetched_.erase(key) > 0) counters_.l1_prefetch_used += block_bytes_;
  }

  store::Store& inner_;
  const DataIsLocal data_is_local_;
  const std::shared_ptr<store::UnitClient> units_;  // null: every file goes the home's way
  const std::uint32_t block_bytes_;
  BlockCache blocks_;
  FetchTable fetches_;
  Prefetcher prefetcher_;
  Counters counters_;
  std::atomic<std::shared_ptr<FileLocks>> locks_;
  std::array<FileStripe, kFileStripes> stripes_;
  std::atomic<std::uint64_t> next_generation_{1};
  std::atomic<std::uint64_t> pinned_by_replies_{0};  // bytes of blocks replies hold
  const std::chrono::milliseconds read_report_interval_;
  // The home's sysctls efs.bam.atime_enabled and efs.bam.atime_grace_period, as this node
  // last heard them (store/store.h's defaults until then).
  std::atomic<bool> atime_enabled_ = true;
  std::atomic<std::int64_t> atime_grace_ns_ = std::int64_t{24} * 3600 * 1'000'000'000;
  // When each file read from L1 was last queued for its home.
  struct ReportedStripe {
    std::mutex mutex;
    std::unordered_map<InodeId, std::chrono::steady_clock::time_point> files;  // guarded
  };
  std::array<ReportedStripe, kFileStripes> reported_;
  std::mutex reads_mutex_;
  // What is queued, and whether a sender runs. Guarded by reads_mutex_.
  std::vector<InodeId> unreported_;
  bool reporting_ = false;
  std::mutex prefetched_mutex_;
  // Blocks prefetched and still unread: read, they count as used; evicted, as wasted.
  std::unordered_set<BlockKey, BlockKeyHash> prefetched_;  // guarded by prefetched_mutex_
  std::size_t prefetched_since_sweep_ = 0;                 // guarded by prefetched_mutex_
  std::mutex attribute_locks_mutex_;
  // Files whose attributes' lock is being taken in the background.
  std::unordered_set<InodeId> attribute_locks_taken_;  // guarded by attribute_locks_mutex_
  // Files whose attributes' lock is not to be taken before the time given.
  std::unordered_map<InodeId, std::chrono::steady_clock::time_point>
      attribute_locks_paused_;  // guarded by attribute_locks_mutex_
  const std::chrono::milliseconds attributes_lock_pause_;
};

CoherentStore::CoherentStore(store::Store& inner, DataIsLocal data_is_local, CacheOptions options,
                             std::shared_ptr<store::UnitClient> units)
    : impl_(std::make_shared<Impl>(inner, std::move(data_is_local), options, std::move(units))) {}

CoherentStore::~CoherentStore() = default;

void CoherentStore::attach(cluster::EventLoop* loop, lockmgr::LockManager* manager) {
  impl_->attach(loop, manager);
}

CacheStatistics CoherentStore::statistics() const { return impl_->statistics(); }

std::size_t CoherentStore::l1_budget() const { return impl_->l1_budget(); }

void CoherentStore::flush() { impl_->flush(); }

std::uint64_t CoherentStore::write_verifier() const {
  return impl_->verifier_of(impl_->inner().write_verifier());
}

awaitable<Result<store::Wcc>> CoherentStore::commit(store::InodeId inode) {
  auto impl = impl_;
  auto committing = impl->commit(inode);
  co_return co_await std::move(committing);
}

Result<std::shared_ptr<store::Store>> CoherentStore::next() const {
  // Not owned: the inner store outlives the cache.
  return std::shared_ptr<store::Store>(std::shared_ptr<store::Store>(), &impl_->inner());
}

void CoherentStore::set_atime_policy(bool enabled, std::chrono::seconds grace_period) {
  impl_->set_atime_policy(enabled, grace_period);
}

awaitable<Result<store::Attributes>> CoherentStore::getattr(store::InodeId inode) {
  auto impl = impl_;
  auto asking = impl->getattr(inode);
  co_return co_await std::move(asking);
}

awaitable<Result<store::Wcc>> CoherentStore::setattr(store::InodeId inode,
                                                     store::AttributeChanges changes,
                                                     store::Caller caller,
                                                     std::optional<std::int64_t> guard_ctime_ns) {
  // Every attribute change runs under the file's locks, so that attributes cached under PR
  // (sizes, modes, owners) stay true while a lock is held.
  auto impl = impl_;
  auto changing = impl->change_files<store::Wcc>({inode}, [&] {
    return impl->inner().setattr(inode, std::move(changes), std::move(caller), guard_ctime_ns);
  });
  co_return co_await std::move(changing);
}

awaitable<Result<store::AccessResult>> CoherentStore::check_access(store::InodeId inode,
                                                                   store::Caller caller,
                                                                   std::uint32_t requested) {
  auto impl = impl_;
  auto asking = impl->check_access(inode, std::move(caller), requested);
  co_return co_await std::move(asking);
}

awaitable<Result<store::Layout>> CoherentStore::set_access_pattern(store::InodeId inode,
                                                                   std::string pattern) {
  // Under the file's locks: every node that cached the file's pattern drops it.
  auto impl = impl_;
  auto changing = impl->change_files<store::Layout>(
      {inode}, [&] { return impl->inner().set_access_pattern(inode, std::move(pattern)); });
  co_return co_await std::move(changing);
}

awaitable<Result<store::ReadResult>> CoherentStore::read(store::InodeId inode, std::uint64_t offset,
                                                         std::span<std::uint8_t> into,
                                                         store::Caller caller) {
  auto impl = impl_;
  auto reading = impl->read(inode, offset, into, std::move(caller));
  co_return co_await std::move(reading);
}

awaitable<Result<store::ReadPieces>> CoherentStore::read_pieces(store::InodeId inode,
                                                                std::uint64_t offset,
                                                                std::uint32_t count,
                                                                store::Caller caller) {
  auto impl = impl_;
  auto reading = impl->read_pieces(inode, offset, count, std::move(caller));
  co_return co_await std::move(reading);
}

awaitable<Result<store::WriteResult>> CoherentStore::write(store::InodeId inode,
                                                           std::uint64_t offset,
                                                           std::span<const std::uint8_t> data,
                                                           store::Stability stability,
                                                           store::Caller caller) {
  auto impl = impl_;
  auto changing = impl->change_files<store::WriteResult>(
      {inode},
      [&] { return impl->write_under_lock(inode, offset, data, stability, std::move(caller)); },
      true);
  Result<store::WriteResult> written = co_await std::move(changing);
  if (written.ok()) written->verifier = impl->verifier_of(written->verifier);
  co_return written;
}

awaitable<Result<store::NewObject>> CoherentStore::create(store::InodeId directory,
                                                          std::string name, store::CreateMode mode,
                                                          store::AttributeChanges initial,
                                                          store::CreateVerifier verifier,
                                                          store::Caller caller) {
  // An UNCHECKED create with a size, of a name that exists, cuts the file there (an open with
  // O_TRUNC) as a SETATTR does: under the file's locks.
  auto impl = impl_;
  std::vector<store::InodeId> files;
  if (mode == store::CreateMode::unchecked && initial.size) {
    auto finding = impl->file_named(directory, name, caller);
    files = co_await std::move(finding);
  }
  auto changing = impl->change_files<store::NewObject>(std::move(files), [&] {
    return impl->inner().create(directory, std::move(name), mode, std::move(initial), verifier,
                                std::move(caller));
  });
  co_return co_await std::move(changing);
}

awaitable<Result<store::Wcc>> CoherentStore::remove(store::InodeId directory, std::string name,
                                                    store::Caller caller) {
  // Under the file's locks: every node drops the attributes (the link count) and blocks it
  // cached of it.
  auto impl = impl_;
  auto finding = impl->file_named(directory, name, caller);
  std::vector<store::InodeId> files = co_await std::move(finding);
  auto changing = impl->change_files<store::Wcc>(std::move(files), [&] {
    return impl->inner().remove(directory, std::move(name), std::move(caller));
  });
  co_return co_await std::move(changing);
}

awaitable<Result<store::RenameResult>> CoherentStore::rename(store::InodeId from_directory,
                                                             std::string from_name,
                                                             store::InodeId to_directory,
                                                             std::string to_name,
                                                             store::Caller caller) {
  // Under the locks of the file renamed (its ctime) and of the file the new name replaces (its
  // link count).
  auto impl = impl_;
  auto finding_from = impl->file_named(from_directory, from_name, caller);
  std::vector<store::InodeId> files = co_await std::move(finding_from);
  auto finding_to = impl->file_named(to_directory, to_name, caller);
  std::vector<store::InodeId> replaced = co_await std::move(finding_to);
  files.insert(files.end(), replaced.begin(), replaced.end());
  auto changing = impl->change_files<store::RenameResult>(std::move(files), [&] {
    return impl->inner().rename(from_directory, std::move(from_name), to_directory,
                                std::move(to_name), std::move(caller));
  });
  co_return co_await std::move(changing);
}

awaitable<Result<store::LinkResult>> CoherentStore::link(store::InodeId file,
                                                         store::InodeId directory, std::string name,
                                                         store::Caller caller) {
  auto impl = impl_;
  auto changing = impl->change_files<store::LinkResult>({file}, [&] {
    return impl->inner().link(file, directory, std::move(name), std::move(caller));
  });
  co_return co_await std::move(changing);
}

}  // namespace tidepool::cache
