// The store of one shard: a facade over the parts that own its state (store/internal/), each
// with its own contract and synchronisation, bottom layer first:
//   ShardRows        the shard's rows, what memory holds beside them, the caches (shard thread)
//   PlacementTable   where each file's data is, moves and copies behind (one shared mutex)
//   MirrorFeed       the mirror kept in step (its gate)
//   CrossShardHolds  what prepared parts of changes across shards hold (shard thread)
//   FileData         the bytes, on the shard's files or a node pool's (store threads)
//   CatchUp          copies behind and units left, mended in the background
//   ShardNamespace   the namespace operations on the shard thread
//   Participant      the shard's part in changes across shards
//   Migration        moves of a file's data between pools
//   ShardExecutor    the shard thread: group commit, syncs, deliveries to the mirror
// This file composes them and answers the Store API: metadata operations run on the shard
// thread, their cache fast paths on the caller's; READ, WRITE and COMMIT join the two.
#include "store/store.h"

#include <spdlog/spdlog.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <cstdio>
#include <filesystem>

#include "store/cross_shard.h"
#include "store/internal/candidates.h"
#include "store/internal/catch_up.h"
#include "store/internal/cross_shard_holds.h"
#include "store/internal/data_files.h"
#include "store/internal/file_data.h"
#include "store/internal/migration.h"
#include "store/internal/mirror_feed.h"
#include "store/internal/participant.h"
#include "store/internal/permissions.h"
#include "store/internal/placement_table.h"
#include "store/internal/schema.h"
#include "store/internal/shard_executor.h"
#include "store/internal/shard_namespace.h"
#include "store/internal/shard_rows.h"
#include "store/pool_data.h"
#include "store/shard_mirror.h"

namespace tidepool::store {

bool same_nodes(std::vector<std::uint64_t> a, std::vector<std::uint64_t> b) {
  std::ranges::sort(a);
  std::ranges::sort(b);
  return a == b;
}

namespace {

using namespace boost::asio::experimental::awaitable_operators;
using internal::AfterCommit;
using internal::check_data_access;
using internal::kMayExecute;
using internal::kMayRead;
using internal::kMayWrite;
using internal::permits;
using internal::ShardNamespace;
using sqlite::Database;

constexpr int kWriteAttempts = 3;

class StoreImpl final : public LocalStore {
 public:
  StoreImpl(const StoreOptions& options, std::unique_ptr<Database> db)
      : options_(options),
        shard_files_(options.data_dir + internal::kDataFilesPath, options.l2),
        pools_(options.peers ? std::make_unique<PoolData>(options.peers, options.integrity)
                             : nullptr),
        placements_(options.integrity),
        mirror_(shard_files_, options.data_dir + internal::kShardDatabasePath + ".copy"),
        rows_(options.shard, options.time_source(), options.atime_enabled,
              options.atime_grace_period),
        data_(shard_files_, pools_.get(), placements_, mirror_, options,
              [this](InodeId inode, const std::string& pool, std::vector<cluster::NodeId> nodes) {
                catch_up_.note_units_left(inode, pool, std::move(nodes));
              }),
        catch_up_(shard_, rows_, placements_, data_, pools_.get(), options.integrity,
                  [this](InodeId inode) { return getattr(inode); }),
        names_(rows_, holds_, data_, placements_, catch_up_, pools_.get(), options),
        participant_(shard_, rows_, holds_, names_),
        migration_(shard_, rows_, placements_, data_, mirror_, pools_.get(), catch_up_, *this,
                   options.layout_locks, options.time_source()),
        shard_(
            std::move(db), [this](Database& db) { return flush(db); },
            [this](bool committed, bool changing) { return batch_done(committed, changing); }) {}

  // The parts' work on the store's threads may use any of them: it ends before they go.
  ~StoreImpl() override {
    close();
    data_.join();
    // shard_, declared last, goes first and takes the database with it: the mirror feed's
    // change recorder (a session on that database) must go before it.
    mirror_.detach();
  }

  // Runs on the opening thread before start(): creates the schema and the root directory.
  Status initialize(Database& db);
  void start() { shard_.start(); }

  // A node holding units that restarted may have lost UNSTABLE data: the verifier changes.
  std::uint64_t write_verifier() const override {
    const std::uint64_t restarts = pools_ ? pools_->restarts() : 0;
    return write_verifier_.load() ^ (restarts * 0x9e3779b97f4a7c15ull);
  }

  void set_atime_policy(bool enabled, std::chrono::seconds grace_period) override {
    rows_.set_atime_policy(enabled, grace_period);
  }

  // The store's threads keep running until the store goes: operations under way may need them.
  void close() override {
    if (data_.close()) return;
    shard_.stop();
  }

  awaitable<Status> mirror_to(std::shared_ptr<MirrorTarget> mirror) override {
    auto switched = shard_.run<bool>(
        false, [this, mirror = std::move(mirror)](Database& db, AfterCommit&) -> Result<bool> {
          TP_RETURN_IF_ERROR(mirror_.attach(db, mirror));
          return true;
        });
    Result<bool> done = co_await std::move(switched);
    if (!done.ok())
      spdlog::error("shard: no whole copy for the mirror: {}", done.status().to_string());
    co_return done.status();
  }

  awaitable<Status> drop_caches() override {
    auto dropping = shard_.run<bool>(false, [this](Database&, AfterCommit&) -> Result<bool> {
      rows_.clear_caches();
      return true;
    });
    const Result<bool> dropped = co_await std::move(dropping);
    TP_CO_RETURN_IF_ERROR(dropped.status());
    auto dropping_data = data_.drop_caches();
    co_return co_await std::move(dropping_data);
  }

  awaitable<Result<Attributes>> getattr(InodeId inode) override {
    options_.l2->reads().metadata_reads.fetch_add(1, std::memory_order_relaxed);
    if (auto cached = rows_.cached(inode)) {
      options_.l2->reads().metadata_hits.fetch_add(1, std::memory_order_relaxed);
      co_return *cached;
    }
    auto op = shard_.run<Attributes>(false, [this, inode](Database& db, AfterCommit&) {
      return rows_.load_and_remember(db, inode);
    });
    co_return co_await std::move(op);
  }

  awaitable<Result<Wcc>> setattr(InodeId inode, AttributeChanges changes, Caller caller,
                                 std::optional<std::int64_t> guard) override {
    return on_shard(true, &ShardNamespace::setattr, inode, changes, std::move(caller), guard);
  }

  awaitable<Result<LookupResult>> lookup(InodeId directory, std::string name,
                                         Caller caller) override {
    // Everything a LOOKUP needs may be cached; a miss or any refusal takes the shard's path,
    // which gives the precise answer.
    auto dir = rows_.cached(directory);
    if (dir && dir->type == FileType::directory && permits(*dir, caller, kMayExecute)) {
      if (auto child = rows_.cached_entry(directory, name)) {
        if (auto object = rows_.cached(*child)) co_return LookupResult{*object, *dir};
      }
    }
    auto op =
        on_shard(false, &ShardNamespace::lookup, directory, std::move(name), std::move(caller));
    co_return co_await std::move(op);
  }

  awaitable<Result<AccessResult>> check_access(InodeId inode, Caller caller,
                                               std::uint32_t requested) override {
    auto a = co_await getattr(inode);
    if (!a.ok()) co_return a.status();
    co_return AccessResult{internal::granted_access(*a, caller, requested), *a};
  }

  awaitable<Result<ReadlinkResult>> readlink(InodeId inode) override {
    return on_shard(false, &ShardNamespace::readlink, inode);
  }

  awaitable<Result<Layout>> layout(InodeId inode) override {
    return on_shard(false, &ShardNamespace::layout, inode);
  }

  awaitable<Result<CandidatePage>> find_files(std::string where, std::vector<std::int64_t> values,
                                              InodeId after, std::uint32_t limit) override {
    if (limit == 0 || limit > kMaxCandidatePage) {
      co_return error(Errc::invalid_argument, "a page of candidates holds 1 to " +
                                                  std::to_string(kMaxCandidatePage) + " files");
    }
    if (where.size() > kMaxPredicateBytes || values.size() > kMaxPredicateValues ||
        !internal::is_candidate_predicate(where)) {
      co_return error(Errc::invalid_argument, "not a predicate as policy::to_sql gives one");
    }
    auto finding = shard_.run<CandidatePage>(
        false, [this, where = std::move(where), values = std::move(values), after, limit](
                   Database& db, AfterCommit&) {
          return internal::find_candidates(db, rows_, where, values, after, limit);
        });
    co_return co_await std::move(finding);
  }

  awaitable<Result<Layout>> set_access_pattern(InodeId inode, std::string pattern) override {
    if (std::find(std::begin(kAccessPatterns), std::end(kAccessPatterns), pattern) ==
        std::end(kAccessPatterns)) {
      co_return error(Errc::invalid_argument, "unknown access pattern '" + pattern +
                                                  "' (random, concurrency or streaming)");
    }
    auto setting = on_shard(true, &ShardNamespace::set_access_pattern, inode, std::move(pattern));
    co_return co_await std::move(setting);
  }

  // GCC 12 destroys lambda temporaries of a co_await full-expression twice, so coroutines here
  // build each awaitable as a named local before awaiting it.
  awaitable<Result<ReadResult>> read(InodeId inode, std::uint64_t offset,
                                     std::span<std::uint8_t> into, Caller caller) override {
    // The cached attributes answer unless the read must move atime, which the shard records.
    // If they vanish from the cache while the data is read (a REMOVE or a truncation landed),
    // the read is done again from the shard's answer.
    for (bool use_cache = true;; use_cache = false) {
      std::optional<Attributes> cached = use_cache ? rows_.cached(inode) : std::nullopt;
      bool from_cache = cached && !rows_.atime_due(*cached);
      if (use_cache) {
        options_.l2->reads().metadata_reads.fetch_add(1, std::memory_order_relaxed);
        if (from_cache) options_.l2->reads().metadata_hits.fetch_add(1, std::memory_order_relaxed);
      }
      if (!from_cache) {
        auto check = shard_.run<Attributes>(
            false, [this, inode](Database& db, AfterCommit&) -> Result<Attributes> {
              TP_ASSIGN_OR_RETURN(Attributes a, rows_.load_and_remember(db, inode));
              if (a.type == FileType::regular) rows_.note_access(a);
              return a;
            });
        auto checked = co_await std::move(check);
        if (!checked.ok()) co_return checked.status();
        cached = *checked;
      }
      const Attributes& a = *cached;
      TP_CO_RETURN_IF_ERROR(check_data_access(a, caller, kMayRead));
      std::uint64_t available = offset < a.size ? a.size - offset : 0;
      auto count = static_cast<std::uint32_t>(std::min<std::uint64_t>(available, into.size()));
      internal::FileData::Read how;
      if (count > 0) {
        auto reading = data_.read(inode, offset, into.first(count));
        Result<internal::FileData::Read> done = co_await std::move(reading);
        if (!done.ok()) co_return done.status();
        how = *done;
      }
      if (from_cache && !rows_.cached(inode)) continue;
      // The nodes holding a placed file's units count what they read for it.
      if (!how.from_pool) data_.count_read(count, how.l2_hit);
      co_return ReadResult{count, offset + count >= a.size, a};
    }
  }

  // A READ that the L2 holds whole, or that the page cache can lend whole, of a file whose
  // cached attributes need no atime update, is sent from there; any other goes through read().
  awaitable<Result<ReadPieces>> read_pieces(InodeId inode, std::uint64_t offset,
                                            std::uint32_t count, Caller caller) override {
    if (auto readable = readable_from_cache(inode, offset, count, caller)) {
      // Plain variables: the lambdas and coroutines below take them.
      const Attributes a = std::move(readable->first);
      const std::uint32_t available = readable->second;
      if (std::optional<ReadPieces> pinned = data_.pinned_from_l2(inode, offset, available)) {
        // Removed or truncated since the attributes were taken: read() finds out how.
        if (rows_.cached(inode)) {
          pinned->result = counted_cached_read(a, offset, available, true);
          co_return std::move(*pinned);
        }
      } else {
        auto lending = data_.lend(inode, offset, available);
        if (std::unique_ptr<PipedBytes> lent = co_await std::move(lending);
            lent && rows_.cached(inode)) {
          data_.count_lent(available);
          ReadPieces pieces{counted_cached_read(a, offset, available, false), {}, {}};
          pieces.piped = std::move(lent);
          co_return pieces;
        }
      }
    }
    auto reading = Store::read_pieces(inode, offset, count, std::move(caller));
    co_return co_await std::move(reading);
  }

  awaitable<Result<WriteResult>> write(InodeId inode, std::uint64_t offset,
                                       std::span<const std::uint8_t> data, Stability stability,
                                       Caller caller) override {
    if (offset > kMaxFileSize || data.size() > kMaxFileSize - offset) {
      co_return error(Errc::file_too_large, "write beyond the maximum file size");
    }
    auto checked = co_await getattr(inode);
    if (!checked.ok()) co_return checked.status();
    TP_CO_RETURN_IF_ERROR(check_data_access(*checked, caller, kMayWrite));
    const PreAttributes before = pre_of(*checked);
    // A write of nothing succeeds and changes nothing (RFC 1813, WRITE).
    if (data.empty())
      co_return WriteResult{0, Stability::file_sync, Wcc{before, *checked}, write_verifier()};
    // A truncation between the data going out and the size update would cut the data but not
    // the size: the update then asks for the data to be written again.
    for (int attempt = 0; attempt < kWriteAttempts; ++attempt) {
      const std::uint64_t truncations = data_.truncation_count(inode);
      const std::uint64_t moves = placements_.move_count(inode);
      const bool durable = stability != Stability::unstable;
      // Copies on nodes known down are noted behind, durably, before the data goes out: a home
      // that dies meanwhile must not leave a successor reading them.
      if (const std::optional<Placement> placed = placements_.where_of(inode).placed) {
        TP_CO_ASSIGN_OR_RETURN(std::vector<MissedCopy> down,
                               data_.new_copies_down(inode, *placed, offset, data.size()));
        if (!down.empty()) {
          placements_.note_behind(inode, *placed, down);
          auto keeping = catch_up_.keep_behind(inode, *placed, std::move(down));
          TP_CO_RETURN_IF_ERROR(co_await std::move(keeping));
        }
      }
      std::vector<MissedCopy> missed;
      std::optional<Placement> placed;
      auto store_data = data_.offload([this, inode, offset, data, durable, &missed, &placed] {
        return data_.write(inode, offset, data, durable, missed, placed);
      });
      const Status stored = co_await std::move(store_data);
      // Also when the write failed: the units it did write left those copies behind.
      if (!missed.empty()) {
        auto keeping = catch_up_.keep_behind(inode, *placed, std::move(missed));
        TP_CO_RETURN_IF_ERROR(co_await std::move(keeping));
      }
      TP_CO_RETURN_IF_ERROR(stored);
      auto update = record_size(inode, offset + data.size(), static_cast<std::uint32_t>(data.size()),
                                durable, before, caller.uid, truncations, moves);
      auto written = co_await std::move(update);
      if (written.code() == Errc::stale) {
        // Removed while its data was being written, which re-created its data file: it goes
        // once the removal is durable, as the removal's own deletion does.
        auto cleanup =
            shard_.run<bool>(true, [this, inode](Database& db, AfterCommit& after) -> Result<bool> {
              if (rows_.load(db, inode).code() == Errc::stale) {
                after.durable.push_back([this, inode] { data_.remove(inode); });
              }
              return true;
            });
        (void)co_await std::move(cleanup);
      }
      if (written.code() != Errc::unavailable) co_return written;
    }
    co_return error(Errc::unavailable, "truncated or moved while being written, repeatedly");
  }

  awaitable<Result<WriteResult>> record_write(InodeId inode, std::uint64_t offset,
                                              std::uint32_t count, Stability stability,
                                              Caller caller, Layout written_under) override {
    if (offset > kMaxFileSize || count > kMaxFileSize - offset) {
      co_return error(Errc::file_too_large, "write beyond the maximum file size");
    }
    const std::uint64_t truncations = data_.truncation_count(inode);
    const std::uint64_t moves = placements_.move_count(inode);
    auto checked = co_await getattr(inode);
    if (!checked.ok()) co_return checked.status();
    TP_CO_RETURN_IF_ERROR(check_data_access(*checked, caller, kMayWrite));
    const internal::Where where = placements_.where_of(inode);
    if (where.placed != placement_of(written_under) || where.moving_to || where.behind ||
        written_under.epoch != truncations + moves) {
      co_return error(Errc::unavailable, "the file was laid out anew while it was written");
    }
    auto update = record_size(inode, offset + count, count, stability != Stability::unstable,
                              pre_of(*checked), caller.uid, truncations, moves);
    co_return co_await std::move(update);
  }

  awaitable<Result<NewObject>> create(InodeId directory, std::string name, CreateMode mode,
                                      AttributeChanges initial, CreateVerifier verifier,
                                      Caller caller) override {
    return on_shard(true, &ShardNamespace::create, directory, std::move(name), mode, initial,
                    verifier, std::move(caller));
  }

  awaitable<Result<NewObject>> mkdir(InodeId directory, std::string name, AttributeChanges initial,
                                     Caller caller) override {
    return on_shard(true, &ShardNamespace::mkdir, directory, std::move(name), initial,
                    std::move(caller));
  }

  awaitable<Result<NewObject>> symlink(InodeId directory, std::string name, std::string target,
                                       AttributeChanges initial, Caller caller) override {
    return on_shard(true, &ShardNamespace::symlink, directory, std::move(name), std::move(target),
                    initial, std::move(caller));
  }

  awaitable<Result<NewObject>> mknod(InodeId directory, std::string name, FileType type,
                                     std::uint32_t rdev_major, std::uint32_t rdev_minor,
                                     AttributeChanges initial, Caller caller) override {
    return on_shard(true, &ShardNamespace::mknod, directory, std::move(name), type, rdev_major,
                    rdev_minor, initial, std::move(caller));
  }

  awaitable<Result<Wcc>> remove(InodeId directory, std::string name, Caller caller) override {
    return on_shard(true, &ShardNamespace::remove, directory, std::move(name), std::move(caller));
  }

  awaitable<Result<Wcc>> rmdir(InodeId directory, std::string name, Caller caller) override {
    return on_shard(true, &ShardNamespace::rmdir, directory, std::move(name), std::move(caller));
  }

  awaitable<Result<RenameResult>> rename(InodeId from_directory, std::string from_name,
                                         InodeId to_directory, std::string to_name,
                                         Caller caller) override {
    return on_shard(true, &ShardNamespace::rename, from_directory, std::move(from_name),
                    to_directory, std::move(to_name), std::move(caller));
  }

  awaitable<Result<LinkResult>> link(InodeId file, InodeId directory, std::string name,
                                     Caller caller) override {
    return on_shard(true, &ShardNamespace::link, file, directory, std::move(name),
                    std::move(caller));
  }

  awaitable<Result<DirectoryPage>> readdir(InodeId directory, std::uint64_t cookie,
                                           std::uint64_t verifier, std::uint32_t max_entries,
                                           bool with_attributes, Caller caller) override {
    auto dir = rows_.cached(directory);
    if (dir && dir->type == FileType::directory && permits(*dir, caller, kMayRead)) {
      if (auto listing = rows_.cached_listing(directory)) {
        auto page =
            names_.page_from_cache(*dir, **listing, cookie, verifier, max_entries, with_attributes);
        if (page) co_return std::move(*page);
      }
    }
    auto op = on_shard(false, &ShardNamespace::readdir, directory, cookie, verifier, max_entries,
                       with_attributes, std::move(caller));
    co_return co_await std::move(op);
  }

  awaitable<Result<FsStatistics>> fsstat() override {
    struct statvfs vfs {};
    if (::statvfs(options_.data_dir.c_str(), &vfs) != 0) {
      co_return error(Errc::io_error, "statvfs of the data directory failed");
    }
    FsStatistics s;
    s.total_bytes = static_cast<std::uint64_t>(vfs.f_blocks) * vfs.f_frsize;
    s.free_bytes = static_cast<std::uint64_t>(vfs.f_bfree) * vfs.f_frsize;
    s.available_bytes = static_cast<std::uint64_t>(vfs.f_bavail) * vfs.f_frsize;
    s.total_files = vfs.f_files;
    s.free_files = vfs.f_ffree;
    s.available_files = vfs.f_favail;
    co_return s;
  }

  awaitable<Result<std::uint32_t>> record_reads(std::vector<InodeId> inodes) override {
    return on_shard(false, &ShardNamespace::record_reads, std::move(inodes));
  }

  awaitable<Result<Wcc>> commit(InodeId inode, SyncedCopies synced) override {
    auto before = co_await getattr(inode);
    if (!before.ok()) co_return before.status();
    // The size and times go to the shard while the data goes to disk: COMMIT waits for the
    // slower of the two, not for both in turn. A crash between them may leave the new size
    // over data that is not durable, as the once-a-second flush of UNSTABLE sizes may: the
    // client has no reply, and the new write verifier makes it send the data again.
    auto persist = shard_.run<Wcc>(
        true, [this, inode, pre = pre_of(*before)](Database& db, AfterCommit&) -> Result<Wcc> {
          TP_ASSIGN_OR_RETURN(Attributes now, rows_.load(db, inode));
          if (rows_.has_unstable(inode)) TP_RETURN_IF_ERROR(rows_.save(db, now));
          return Wcc{pre, now};
        });
    if (before->type != FileType::regular) co_return co_await std::move(persist);
    std::vector<MissedCopy> missed;
    std::optional<Placement> placed;
    auto sync = data_.offload([this, inode, size = before->size, &synced, &missed, &placed] {
      return data_.sync(inode, size, synced, missed, placed);
    });
    auto [durable, persisted] = co_await (std::move(sync) && std::move(persist));
    TP_CO_RETURN_IF_ERROR(durable);
    if (!missed.empty()) {
      // Copies newly behind: every node drops the layout it cached, which let it read them.
      std::shared_ptr<void> held;
      if (options_.layout_locks) {
        auto locking = options_.layout_locks->exclusive(inode);
        Result<std::shared_ptr<void>> locked = co_await std::move(locking);
        TP_CO_RETURN_IF_ERROR(locked.status());
        held = std::move(*locked);
      }
      auto keeping = catch_up_.keep_behind(inode, *placed, std::move(missed));
      TP_CO_RETURN_IF_ERROR(co_await std::move(keeping));
    }
    co_return persisted;
  }

  awaitable<Result<Move>> migrate(InodeId inode, std::string pool, std::uint32_t protection,
                                  std::uint64_t bytes_per_second) override {
    return migration_.migrate(inode, std::move(pool), protection, bytes_per_second);
  }

  ShardParticipant& participant() override { return participant_; }

  bool data_in_node_pool(InodeId inode) const override {
    return placements_.is_placed(inode);
  }
  void note_protection() override { catch_up_.note_protection(); }

 private:
  // Runs one of ShardNamespace's operations on the shard thread; `mutates` opens a write
  // transaction.
  template <typename T, typename... Params, typename... Args>
  awaitable<Result<T>> on_shard(bool mutates,
                                Result<T> (ShardNamespace::*operation)(Database&, AfterCommit&,
                                                                       Params...),
                                Args... args) {
    return shard_.run<T>(mutates, [this, operation, ... args = std::move(args)](
                                      Database& db, AfterCommit& after) mutable {
      return (names_.*operation)(db, after, std::move(args)...);
    });
  }

  // The size, times and mode a write of `count` bytes ending at `end` leaves, on the shard; a
  // truncation or a move begun since the counts were taken had the data go out again
  // (unavailable).
  awaitable<Result<WriteResult>> record_size(InodeId inode, std::uint64_t end, std::uint32_t count,
                                             bool durable, PreAttributes before, std::uint32_t uid,
                                             std::uint64_t truncations, std::uint64_t moves) {
    return shard_.run<WriteResult>(
        durable,
        [this, inode, end, count, durable, before, truncations, moves, uid](
            Database& db, AfterCommit&) -> Result<WriteResult> {
          if (data_.truncation_count(inode) != truncations) {
            return error(Errc::unavailable, "truncated while being written");
          }
          // A move that began while the data went out may not have copied it: it goes out
          // again, to both copies.
          if (placements_.move_count(inode) != moves) {
            return error(Errc::unavailable, "moved while being written");
          }
          // The size read before the data went out may be stale: concurrent writes extend it.
          TP_ASSIGN_OR_RETURN(Attributes current, rows_.load(db, inode));
          Attributes after = current;
          after.size = std::max(current.size, end);
          after.used = after.size;
          after.mtime_ns = after.ctime_ns = rows_.now_ns();
          // A writer that is not the owner loses setuid/setgid, as a local write would.
          if (uid != 0 && uid != after.uid) after.mode &= ~06000u;
          if (durable || after.mode != current.mode) {
            TP_RETURN_IF_ERROR(rows_.save(db, after));
          } else {
            rows_.keep_unstable(after);
          }
          return WriteResult{count, durable ? Stability::file_sync : Stability::unstable,
                             Wcc{before, after}, write_verifier()};
        });
  }

  // The cached attributes of a file `caller` may read with no atime update due, and how much
  // of the `count` bytes at `offset` lies before its end; none when any of that does not hold.
  std::optional<std::pair<Attributes, std::uint32_t>> readable_from_cache(InodeId inode,
                                                                          std::uint64_t offset,
                                                                          std::uint32_t count,
                                                                          const Caller& caller) {
    std::optional<Attributes> a = rows_.cached(inode);
    if (!a || rows_.atime_due(*a) || !check_data_access(*a, caller, kMayRead).ok()) {
      return std::nullopt;
    }
    const std::uint64_t available = offset < a->size ? a->size - offset : 0;
    return std::pair{std::move(*a),
                     static_cast<std::uint32_t>(std::min<std::uint64_t>(available, count))};
  }

  // Counts a READ answered with cached attributes, without read(); its result.
  ReadResult counted_cached_read(const Attributes& a, std::uint64_t offset, std::uint32_t count,
                                 bool l2_hit) {
    options_.l2->reads().metadata_reads.fetch_add(1, std::memory_order_relaxed);
    options_.l2->reads().metadata_hits.fetch_add(1, std::memory_order_relaxed);
    data_.count_read(count, l2_hit);
    return ReadResult{count, offset + count >= a.size, a};
  }

  // About once a second, between batches: the catch-up's next pass, and what UNSTABLE writes
  // and reads left in memory persisted.
  internal::Delivery flush(Database& db) {
    catch_up_.start();
    const internal::ShardRows::Flush flushed = rows_.flush_memory_state(db);
    if (!flushed.any) return nullptr;
    return batch_done(flushed.committed, false);
  }

  // After a committed batch the caches learn what it read and changed, and the batch's changes
  // go to the mirror. A failed commit may have dropped sizes UNSTABLE writes left in memory: a
  // new verifier makes clients resend everything they have not committed, as after a restart,
  // and the caches start over.
  internal::Delivery batch_done(bool committed, bool changing) {
    internal::Delivery delivery = mirror_.batch_done(committed, changing);
    if (!committed) {
      spdlog::error("a shard commit failed: changing the write verifier");
      write_verifier_ = write_verifier_.load() + (std::uint64_t{1} << 32);
    }
    rows_.batch_done(committed);
    return delivery;
  }

  const StoreOptions options_;
  internal::DataFiles shard_files_;
  // The data of files placed in node pools; null outside a cluster.
  const std::unique_ptr<PoolData> pools_;
  internal::PlacementTable placements_;
  internal::MirrorFeed mirror_;
  std::atomic<std::uint64_t> write_verifier_ = 0;
  internal::ShardRows rows_;
  internal::CrossShardHolds holds_;
  internal::FileData data_;
  internal::CatchUp catch_up_;
  internal::ShardNamespace names_;
  internal::Participant participant_;
  internal::Migration migration_;
  internal::ShardExecutor shard_;  // last: its thread stops before the state above goes
};

// Shards made before a column was added gain it: layouts' nodes (empty, as their files' data
// is kept with the shard) and inodes' parent (null: the entry naming the directory tells).
// Both statements are constants, as Database::prepare wants.
Status add_column_if_missing(Database& db, const char* find_column, const char* add_column) {
  auto columns = db.prepare(find_column);
  if (columns.next_row()) return {};
  TP_RETURN_IF_ERROR(columns.status());
  return db.exec(add_column);
}

// Layouts written while the marker of data kept with the shard was "default" say so; a pool of
// that name had no data then (placing data there kept it with the shard). Once per database.
Status rename_old_shard_marker(Database& db) {
  auto marker = db.prepare("SELECT 1 FROM meta WHERE key = 'shard_marker_renamed'");
  if (marker.next_row()) return {};
  TP_RETURN_IF_ERROR(marker.status());
  auto rename = db.prepare("UPDATE layouts SET pool = ? WHERE pool = 'default'");
  TP_RETURN_IF_ERROR(rename.bind(1, kWithShard).run());
  return db.exec("INSERT INTO meta(key, value) VALUES('shard_marker_renamed', 1)");
}

Status StoreImpl::initialize(Database& db) {
  TP_RETURN_IF_ERROR(shard_files_.prepare());
  TP_RETURN_IF_ERROR(db.exec(internal::kShardSchema));
  TP_RETURN_IF_ERROR(
      add_column_if_missing(db, "SELECT 1 FROM pragma_table_info('layouts') WHERE name = 'nodes'",
                            "ALTER TABLE layouts ADD COLUMN nodes TEXT NOT NULL DEFAULT ''"));
  TP_RETURN_IF_ERROR(
      add_column_if_missing(db, "SELECT 1 FROM pragma_table_info('inodes') WHERE name = 'parent'",
                            "ALTER TABLE inodes ADD COLUMN parent INTEGER"));
  TP_RETURN_IF_ERROR(db.exec("BEGIN IMMEDIATE"));
  TP_ASSIGN_OR_RETURN(const std::uint64_t boots, rows_.open_counters(db));
  TP_RETURN_IF_ERROR(rename_old_shard_marker(db));
  write_verifier_ = (boots << 32) ^ (rows_.random() & 0xffffffffu);
  if (options_.shard == 0) TP_RETURN_IF_ERROR(names_.make_root(db));
  TP_RETURN_IF_ERROR(participant_.open(db, boots));
  TP_RETURN_IF_ERROR(placements_.open(db));
  TP_RETURN_IF_ERROR(catch_up_.open(db));
  TP_RETURN_IF_ERROR(db.exec("COMMIT"));
  // The boot counted durably before the verifier it makes is handed out.
  return db.sync_wal();
}

}  // namespace

Status check_read_access(const Attributes& a, const Caller& caller) {
  return check_data_access(a, caller, kMayRead);
}

Status check_write_access(const Attributes& a, const Caller& caller) {
  return check_data_access(a, caller, kMayWrite);
}

std::uint32_t access_granted(const Attributes& a, const Caller& caller, std::uint32_t requested) {
  return internal::granted_access(a, caller, requested);
}

Status take_out_of_pipe(ReadPieces& read) {
  if (!read.piped) return {};
  std::shared_ptr<std::uint8_t[]> bytes =
      std::make_shared_for_overwrite<std::uint8_t[]>(read.piped->size());
  const std::span<std::uint8_t> into(bytes.get(), read.piped->size());
  TP_RETURN_IF_ERROR(read.piped->copy_out(into));
  read.piped.reset();
  read.pieces.assign(1, into);
  read.keep = std::move(bytes);
  return {};
}

awaitable<Result<ReadPieces>> Store::read_pieces(InodeId inode, std::uint64_t offset,
                                                 std::uint32_t count, Caller caller) {
  // Uninitialized: the read fills what it returns, and nothing past that is sent.
  std::shared_ptr<std::uint8_t[]> bytes = std::make_shared_for_overwrite<std::uint8_t[]>(count);
  auto reading = read(inode, offset, {bytes.get(), count}, std::move(caller));
  Result<ReadResult> read = co_await std::move(reading);
  if (!read.ok()) co_return read.status();
  ReadPieces pieces{*read, {}, bytes};
  if (read->count > 0) pieces.pieces.emplace_back(bytes.get(), read->count);
  co_return pieces;
}

std::string shard_directory(const std::string& data_dir, ShardId shard) {
  if (shard == 0) return data_dir;
  char name[16];
  std::snprintf(name, sizeof name, "/shard-%04x", static_cast<unsigned>(shard));
  return data_dir + name;
}

Result<std::unique_ptr<LocalStore>> Store::open(const StoreOptions& options) {
  if (!options.l2) return error(Errc::invalid_argument, "a store needs an L2 (of 0 bytes: none)");
  std::error_code ec;
  std::filesystem::create_directories(options.data_dir + "/shards", ec);
  if (ec) {
    return error(Errc::io_error,
                 "cannot create data directory " + options.data_dir + ": " + ec.message());
  }
  if (::access(options.data_dir.c_str(), W_OK) != 0) {
    return error(Errc::access_denied, "data directory " + options.data_dir + " is not writable");
  }
  TP_ASSIGN_OR_RETURN(auto db, Database::open(options.data_dir + internal::kShardDatabasePath,
                                              Database::Durability::synced_by_caller));
  Database& raw = *db;
  auto store = std::make_unique<StoreImpl>(options, std::move(db));
  TP_RETURN_IF_ERROR(store->initialize(raw));
  store->start();
  return std::unique_ptr<LocalStore>(std::move(store));
}

}  // namespace tidepool::store
