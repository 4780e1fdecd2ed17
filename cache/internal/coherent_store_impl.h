// CoherentStore's inside (cache/coherent_store.h says what it promises): what the node keeps of
// each file, the locks it keeps it under, and what guards each field. Declared here so that its
// methods can be defined by concern, each group in the file its heading names; change_files,
// through which the facade runs every change, is defined at the end of this header.
//
// Thread-safe, as CoherentStore.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "cache/cache_options.h"
#include "cache/coherent_store.h"
#include "cache/internal/fetch_table.h"
#include "cache/internal/file_locks.h"
#include "cache/internal/prefetcher.h"
#include "cluster/event_loop.h"
#include "common/block_cache.h"
#include "common/status.h"
#include "lockmgr/lock.h"
#include "lockmgr/lock_manager.h"
#include "lockmgr/mode.h"
#include "store/store.h"
#include "store/unit_client.h"

namespace tidepool::cache {

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

class CoherentStore::Impl : public std::enable_shared_from_this<CoherentStore::Impl> {
 public:
  using Blocks = std::vector<BlockCache::Handle>;
  using InodeId = store::InodeId;
  using Mode = lockmgr::Mode;

  // coherent_store_impl.cc: construction, the lock manager, flush and statistics.
  Impl(store::Store& inner, DataIsLocal data_is_local, CacheOptions options,
       std::shared_ptr<store::UnitClient> units);

  store::Store& inner() { return inner_; }

  void attach(cluster::EventLoop* loop, lockmgr::LockManager* manager);

  // Prefetched blocks flushed unread are no waste of SmartRead's: they are forgotten.
  void flush();
  std::size_t l1_budget() const { return blocks_.capacity(); }

  CacheStatistics statistics() const;

  // A held acquisition of a file's lock in `mode`; none when the node has no locks to take
  // (it is no member of a cluster); an error when the lock manager refused or stopped.
  awaitable<Result<std::optional<HeldLock>>> acquire(lockmgr::ResourceName resource, Mode mode);
  // How many times the node lost every lock so far (FileLocks::fences; 0 before locks are
  // attached). A lock taken when the count was `fences` is void once it moved: the group may
  // have given it to another node, whose changes a change made under it would land after —
  // `fenced` then, before anything is sent.
  std::uint64_t lock_fences() const;
  Status still_locked_since(std::uint64_t fences) const;

  // coherent_store_attributes.cc: attributes, rights and atimes.
  void set_atime_policy(bool enabled, std::chrono::seconds grace_period);

  // The file's rights for `caller`, worked out here from the file's attributes (see getattr),
  // as the home's check_access would from its own.
  awaitable<Result<store::AccessResult>> check_access(InodeId inode, store::Caller caller,
                                                      std::uint32_t requested);

  // A file's attributes: under the file's data lock or its attributes' lock, when the node
  // holds one in PR already, those L1 keeps, or the home's, kept if they are a regular file's (a
  // directory's change with the entries made in it, under no lock). Else the home's; for a
  // regular file the node then takes the attributes' lock in the background, for the next
  // GETATTR. A GETATTR never waits for the lock manager.
  awaitable<Result<store::Attributes>> getattr(InodeId inode);

  // coherent_store_read.cc: READs.
  awaitable<Result<store::ReadResult>> read(InodeId inode, std::uint64_t offset,
                                            std::span<std::uint8_t> into, store::Caller caller);

  awaitable<Result<store::ReadPieces>> read_pieces(InodeId inode, std::uint64_t offset,
                                                   std::uint32_t count, store::Caller caller);

  // A READ of a file whose data is on other nodes, answered from L1; none when it goes around
  // L1: with no lock to cache under, for a small random read, and when the file changed under
  // a fetch, its home is away, or a unit fetched whole has a bad block elsewhere than the
  // bytes asked for. `for_reply`: the pieces go out in a reply, not copied at once.
  awaitable<std::optional<Result<store::ReadPieces>>> read_from_l1(InodeId inode,
                                                                   std::uint64_t offset,
                                                                   std::uint32_t count,
                                                                   const store::Caller& caller,
                                                                   bool for_reply);

  // READ bytes served from this node's own copy (L2), or around L1.
  void count_around_l1(bool local, std::uint32_t bytes);

  // Changes: change_files at the end of this header, the rest in coherent_store_write.cc.

  // Runs `change` under the data and attributes locks of `files` in PW, taken in inode order (two
  // changes of the same files never wait for each other crosswise), then drops what this node
  // cached of them (its own readers may have fetched them meanwhile: they shared the locks).
  // `data_only`: the change writes the files' data and nothing else, so what they are laid out
  // as, and who may write them, stays known.
  template <typename T, typename Change>
  awaitable<Result<T>> change_files(std::vector<InodeId> files, Change change,
                                    bool data_only = false);

  // The regular file `name` names in `directory` now, if any: a change of the name changes
  // the file too (its link count, its ctime).
  awaitable<std::vector<InodeId>> file_named(InodeId directory, std::string name,
                                             store::Caller caller);

  // Under the file's data lock in PW: its bytes go to the owners of its units directly when its
  // layout lets them (store/unit_client.h), the home recording the size and times, else the
  // home's way (which also takes over when the direct way fails, writing the bytes again).
  // `fences`: lock_fences() before the lock was taken.
  awaitable<Result<store::WriteResult>> write_under_lock(InodeId inode, std::uint64_t offset,
                                                         std::span<const std::uint8_t> data,
                                                         store::Stability stability,
                                                         store::Caller caller,
                                                         std::uint64_t fences);

  // Makes the file's units durable on their owners up, seeing any of them that restarted
  // (verifier_of), then has the home commit the file, telling it the owners synced so that it
  // syncs only the others. A sync that fails here is the home's to settle: it syncs that owner
  // again, and notes the copies that missed it.
  awaitable<Result<store::Wcc>> commit(InodeId inode, store::SyncedCopies synced);

  // A verifier of the home's, changed whenever an owner this node wrote to directly restarted
  // (the constant differs from the home's own fold, so that the two never cancel out).
  std::uint64_t verifier_of(std::uint64_t home) const;

 private:
  static constexpr std::size_t kFileStripes = 16;

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
  struct Counters {
    std::atomic<std::uint64_t> l1_bytes_accessed{0};
    std::atomic<std::uint64_t> l1_bytes_hit{0};
    std::atomic<std::uint64_t> l1_bytes_fetched{0};
    std::atomic<std::uint64_t> l1_bytes_prefetched{0};
    std::atomic<std::uint64_t> l1_prefetch_used{0};
    std::atomic<std::uint64_t> l1_prefetch_wasted{0};
    std::atomic<std::uint64_t> l1_prefetch_deferred{0};
    std::atomic<std::uint64_t> l1_bypassed_bytes{0};
    std::atomic<std::uint64_t> l1_metadata_reads{0};
    std::atomic<std::uint64_t> l1_metadata_hits{0};
    std::atomic<std::uint64_t> coherence_invalidations{0};
    std::atomic<std::uint64_t> l2_bytes_read{0};
  };
  struct BlockKeyHash {
    std::size_t operator()(const BlockKey& key) const {
      return std::hash<std::uint64_t>{}(key.inode * 0x9e3779b97f4a7c15ull ^ key.block);
    }
  };
  struct PinnedBlocks;

  // coherent_store_impl.cc: the state kept of each file.
  static lockmgr::ResourceName data_lock(InodeId inode) {
    return {lockmgr::ResourceKind::data, inode};
  }
  static lockmgr::ResourceName attributes_lock(InodeId inode) {
    return {lockmgr::ResourceKind::attributes, inode};
  }
  static AccessPattern pattern_named(const std::string& name);

  FileStripe& stripe_of(InodeId inode) { return stripes_[inode % kFileStripes]; }

  std::optional<AccessPattern> known_pattern(InodeId inode);
  std::optional<store::Attributes> known_attributes(InodeId inode);
  // The same, but none unless the file's layout is known too (without copying it).
  std::optional<store::Attributes> known_attributes_and_layout(InodeId inode);
  std::optional<store::Layout> known_layout(InodeId inode);

  // The generation of the file's cached state, made now if there is none.
  std::uint64_t generation_of(InodeId inode);

  // Keeps attributes read under `generation`, unless the file changed meanwhile.
  void remember(InodeId inode, std::uint64_t generation, const store::Attributes& attributes);

  // Drops what the node cached of the file: its blocks, attributes and pattern. Fetches under
  // way then keep nothing. Whether it had cached anything.
  bool invalidate(InodeId inode);

  // Drops the file's cached attributes; whether there were any. Attributes a fetch under the
  // data lock brings meanwhile are kept: that lock covers them.
  bool forget_attributes(InodeId inode);

  // The home said the layout the node wrote under is not the file's any more.
  void forget_layout(InodeId inode);

  // After this node's own write of the file's data: its blocks and attributes go, and fetches
  // under way keep nothing; its layout and rights stay.
  void forget_after_write(InodeId inode);

  void drop_everything();

  // coherent_store_attributes.cc: the attributes' lock, learning a file, reporting reads.

  // Has the node hold a regular file's attributes' lock in PR, cached, once the lock manager
  // grants it; at most kMaxAttributeLocksTaken at once, one per file. Nothing when L1 answers
  // for no file here: the node is no member of a cluster, or it is the home of the file's shard
  // (which answers from its own attribute cache).
  void take_attributes_lock(const store::Attributes& attributes);

  // The file's attributes' lock went: it is not asked for again before the pause is over.
  void pause_attributes_lock(InodeId inode);

  // A hold in PR of the file's data lock, or else of its attributes' lock, when the node has
  // that lock already and L1 may answer for the file; never asks the lock manager.
  std::optional<HeldLock> held_already(InodeId inode);

  // Under a hold of the file's data lock or its attributes' lock: the attributes L1 keeps, or
  // the home's, kept if they are a regular file's.
  awaitable<Result<store::Attributes>> attributes_under_lock(InodeId inode);

  // Under the file's data lock: its attributes and layout, asked of the home together, kept
  // unless the file changed meanwhile. The attributes, if they are known now.
  awaitable<std::optional<store::Attributes>> learn_file(InodeId inode);

  // Whether a read of a file with these cached attributes would move its atime at the home.
  // The home's atime is never older than the one cached here: every attribute change takes
  // PW and drops the cached attributes, and only reads move it on after that. So a cached
  // atime within the grace period means the home would pass the report over.
  bool atime_due(const store::Attributes& cached) const;

  // Queues `inode` for its home's atime, unless it was reported within the interval; a sender
  // on `executor` takes everything queued while it was sending, so reports come in batches.
  void report_read(InodeId inode, const boost::asio::any_io_executor& executor);

  static awaitable<void> send_read_reports(std::shared_ptr<Impl> self);

  // coherent_store_read.cc: READs through L1.

  // Under `lock`, an acquisition of the file's data lock in PR, which the prefetch this read
  // starts shares. The bytes stay in their blocks, held by the result; for a reply
  // (`for_reply`) the blocks count against the share of L1 that replies may pin.
  awaitable<Result<store::ReadPieces>> read_through_l1(InodeId inode, std::uint64_t offset,
                                                       std::uint32_t length,
                                                       const store::Caller& caller,
                                                       std::shared_ptr<HeldLock> lock,
                                                       bool for_reply);

  // The bytes of [offset, end) in block `block`.
  std::uint64_t overlap(std::uint64_t block, std::uint64_t offset, std::uint64_t end) const;

  // coherent_store_fetch.cc: blocks fetched into L1.

  // The blocks first + i for every i in `wanted`, fetched (or found) together; the first
  // error when one cannot be had. Under an acquisition of the file's data lock.
  awaitable<Result<Blocks>> fetch(InodeId inode, std::uint64_t first,
                                  std::vector<std::size_t> wanted, std::size_t count,
                                  bool prefetch);

  // The block, from the owners of its unit directly when the file's layout and size are known
  // and let it, else (and when that fails) from the home, which brings the attributes too.
  static awaitable<void> fetch_block(std::shared_ptr<Impl> self, BlockKey key,
                                     std::uint64_t generation, bool prefetch,
                                     FetchTable::Fetched fetched);

  // A read of the block from the owners of its unit, when the node knows the file's layout,
  // which lets it, and its size, which the block lies within; none otherwise. Under an
  // acquisition of the file's data lock, as every fetch.
  std::optional<awaitable<Result<store::ReadPieces>>> direct_read(const BlockKey& key,
                                                                  std::size_t room);

  static awaitable<Result<store::ReadPieces>> read_from_owners(
      std::shared_ptr<store::UnitClient> units, store::Layout layout, store::Attributes attributes,
      InodeId inode, std::uint64_t start, std::uint32_t count);

  // Keeps the block `read` fetched under `generation`, with the attributes it returned, unless
  // the file changed meanwhile. Its bytes stay where the read left them (the home's reply
  // message, or the buffer a local read filled): the stores under L1 leave one piece at most.
  Result<BlockCache::Handle> keep(const BlockKey& key, std::uint64_t generation,
                                  store::ReadPieces read, std::size_t room);

  // The bytes the block can hold: a whole unit, or what the file has left when its size is
  // known (a small file's block charges the budget what it holds).
  std::size_t room_for(const BlockKey& key);

  // coherent_store_prefetch.cc: SmartRead.

  // Tells SmartRead of a READ of `length` bytes at `offset` of a file of `size` bytes, and
  // starts fetching, in the background and under `lock`, what it advises and L1 lacks. Nothing
  // for a read that reaches the end of the file: a small file read whole costs no look-up of
  // its pattern. Only a first read of the file, or a fetch, leaves the READ's own coroutine.
  awaitable<void> prefetch_ahead(InodeId inode, std::uint64_t client, std::uint64_t offset,
                                 std::uint64_t length, std::uint64_t size,
                                 std::shared_ptr<HeldLock> lock);

  static awaitable<void> learn_pattern_then_prefetch(std::shared_ptr<Impl> self, InodeId inode,
                                                     std::uint64_t client, std::uint64_t offset,
                                                     std::uint64_t length, std::uint64_t size,
                                                     std::shared_ptr<HeldLock> lock);

  // Of `blocks` more blocks to prefetch, how many fit within the node's limit, now counted in
  // flight (at least one while nothing is).
  std::size_t reserve_prefetch(std::size_t blocks);
  // Fetches the blocks first + i, i in `missing` (reserved), of the `count` from `first`.
  static awaitable<void> prefetch(std::shared_ptr<Impl> self, InodeId inode, std::uint64_t first,
                                  std::size_t count, std::vector<std::size_t> missing,
                                  std::shared_ptr<HeldLock> lock);

  void note_prefetched(const BlockKey& key);
  void note_read(const BlockKey& key);

  // coherent_store_write.cc: what a write at the owners is checked against.

  // Under the file's data lock: its layout and the attributes its writers' rights are checked
  // against, as the node keeps them, or the home's, kept.
  awaitable<Result<std::pair<store::Layout, store::Attributes>>> layout_and_rights(InodeId inode);

  store::Store& inner_;
  const DataIsLocal data_is_local_;
  const std::shared_ptr<store::UnitClient> units_;  // null: every file goes the home's way
  const std::uint32_t block_bytes_;
  BlockCache blocks_;
  FetchTable fetches_;
  Prefetcher prefetcher_;
  const std::uint64_t prefetch_limit_;  // bytes in flight, all prefetches together
  std::atomic<std::uint64_t> prefetch_in_flight_{0};
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
  Clock& clock_;
};

template <typename T, typename Change>
awaitable<Result<T>> CoherentStore::Impl::change_files(std::vector<InodeId> files, Change change,
                                                       bool data_only) {
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  const std::uint64_t fences = lock_fences();
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
  if (Status locked = still_locked_since(fences); !locked.ok()) co_return locked;
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

}  // namespace tidepool::cache
