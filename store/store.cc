#include "store/store.h"

#include <spdlog/spdlog.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <shared_mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "common/config.h"
#include "common/sqlite.h"
#include "common/thread_name.h"
#include "store/cross_shard.h"
#include "store/internal/attribute_cache.h"
#include "store/internal/data_files.h"
#include "store/internal/mirror_messages.h"
#include "store/internal/permissions.h"
#include "store/internal/schema.h"
#include "store/internal/shard_executor.h"
#include "store/internal/shard_replication.h"
#include "store/pool_data.h"
#include "store/shard_mirror.h"

namespace tidepool::store {
namespace {

namespace asio = boost::asio;
using namespace boost::asio::experimental::awaitable_operators;
using internal::AfterCommit;
using internal::check_may_add;
using internal::check_may_delete;
using internal::granted_access;
using internal::in_group;
using internal::is_dot_or_dotdot;
using internal::kDefaultDirectoryMode;
using internal::kDefaultFileMode;
using internal::kMayExecute;
using internal::kMayRead;
using internal::kMayWrite;
using internal::kSetgid;
using internal::new_object;
using internal::permits;
using internal::validate_new_name;
using sqlite::Database;

constexpr std::uint64_t kFirstEntryCookie = 3;  // 1 and 2 are "." and ".."
constexpr std::size_t kCachedInodes = 128 * 1024;
constexpr std::size_t kCachedListings = 4096;
constexpr int kWriteAttempts = 3;
constexpr std::size_t kTruncationSlots = 1024;
constexpr std::size_t kMoveSlots = 1024;
// READs from this size up go out from the page cache by reference: below it, the copy costs
// less than the pipe's system calls.
constexpr std::uint32_t kMinLentBytes = 64u << 10;
// A whole copy for a new mirror, and a repair from the mirror's copy, go in pieces of this size.
constexpr std::size_t kCopyChunkBytes = 1u << 20;
// The deepest directory whose path placement on create works out; deeper files start with
// their shard.
constexpr std::size_t kMaxPathDepth = 256;
// A move keeps its watermark with the shard each time it has copied this much: a crash costs
// at most this much copying again.
constexpr std::uint64_t kWatermarkBytes = 32u << 20;
// A call for a move under way waits for it this long at most, looking this often.
constexpr std::chrono::hours kMoveWaitLimit{1};
constexpr std::chrono::milliseconds kMoveWaitPoll{100};
// The most inode numbers one find_files() call looks through.
constexpr std::uint64_t kMaxInodesExamined = 1u << 20;
// How many times in a row a range is copied again because a node restarted meanwhile.
constexpr int kMaxRangeCopies = 3;
// Rows of units_left one catch-up pass goes through.
constexpr std::size_t kUnitsLeftPerPass = 256;

// Whether `where` has the shape policy::to_sql() gives a predicate — parentheses, AND, OR, the
// inodes columns it names, comparisons, ?N and 1 — so that nothing else, wherever it came from,
// reaches SQLite.
bool is_candidate_predicate(std::string_view where) {
  static constexpr std::string_view kWords[] = {"AND",  "OR",   "atime", "mtime", "ctime",
                                                "birth", "size", "type",  "uid",   "1"};
  static constexpr std::string_view kOperators[] = {"<=", ">=", "!=", "<", ">", "="};
  auto is_word_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  std::size_t at = 0;
  while (at < where.size()) {
    const char c = where[at];
    if (c == ' ' || c == '(' || c == ')') {
      ++at;
    } else if (c == '?') {
      std::size_t end = at + 1;
      while (end < where.size() && std::isdigit(static_cast<unsigned char>(where[end]))) ++end;
      if (end == at + 1) return false;
      at = end;
    } else if (const auto* op = std::find_if(std::begin(kOperators), std::end(kOperators),
                                              [&](std::string_view o) {
                                                return where.substr(at, o.size()) == o;
                                              });
               op != std::end(kOperators)) {
      at += op->size();
    } else if (is_word_char(c)) {
      std::size_t end = at;
      while (end < where.size() && is_word_char(where[end])) ++end;
      if (std::find(std::begin(kWords), std::end(kWords), where.substr(at, end - at)) ==
          std::end(kWords)) {
        return false;
      }
      at = end;
    } else {
      return false;
    }
  }
  return true;
}

// A layout's nodes as its row keeps them: decimal ids joined by commas.
std::string nodes_text(const std::vector<std::uint64_t>& nodes) {
  std::string text;
  for (std::uint64_t node : nodes) text += (text.empty() ? "" : ",") + std::to_string(node);
  return text;
}

std::vector<std::uint64_t> nodes_from_text(std::string_view text) {
  std::vector<std::uint64_t> nodes;
  while (!text.empty()) {
    const std::size_t comma = std::min(text.find(','), text.size());
    std::uint64_t node = 0;
    std::from_chars(text.data(), text.data() + comma, node);
    nodes.push_back(node);
    text.remove_prefix(std::min(comma + 1, text.size()));
  }
  return nodes;
}

}  // namespace

bool same_nodes(std::vector<std::uint64_t> a, std::vector<std::uint64_t> b) {
  std::ranges::sort(a);
  std::ranges::sort(b);
  return a == b;
}

namespace {

Placement placement_of(const Layout& layout) {
  return Placement{layout.pool, layout.protection, layout.stripe_unit, layout.nodes};
}

Status check_data_access(const Attributes& a, const Caller& caller, std::uint32_t want) {
  if (a.type == FileType::directory) return error(Errc::is_a_directory, "is a directory");
  if (a.type != FileType::regular) return error(Errc::invalid_argument, "not a regular file");
  if (caller.uid != a.uid && !permits(a, caller, want)) {
    return error(Errc::access_denied, "permission denied");
  }
  return {};
}

Wcc wcc_of(const Attributes& before, const Attributes& after) { return {pre_of(before), after}; }

Attributes attributes_from_row(const sqlite::Statement& row) {
  Attributes a;
  a.inode = static_cast<InodeId>(row.int64(0));
  a.generation = static_cast<std::uint32_t>(row.int64(1));
  a.type = static_cast<FileType>(row.int64(2));
  a.mode = static_cast<std::uint32_t>(row.int64(3));
  a.nlink = static_cast<std::uint32_t>(row.int64(4));
  a.uid = static_cast<std::uint32_t>(row.int64(5));
  a.gid = static_cast<std::uint32_t>(row.int64(6));
  a.size = static_cast<std::uint64_t>(row.int64(7));
  a.rdev_major = static_cast<std::uint32_t>(row.int64(8));
  a.rdev_minor = static_cast<std::uint32_t>(row.int64(9));
  a.atime_ns = row.int64(10);
  a.mtime_ns = row.int64(11);
  a.ctime_ns = row.int64(12);
  a.birth_ns = row.int64(13);
  a.used = a.size;
  return a;
}

// Size and times an UNSTABLE write changed that are not in the database yet.
struct DirtyAttributes {
  std::uint64_t size;
  std::int64_t mtime_ns;
  std::int64_t ctime_ns;
};

// L2 units a READ reply is sent from, counted against the share of the L2 replies may pin.
struct ReplyPin {
  ReplyPin(internal::CachedUnits units, std::shared_ptr<std::atomic<std::uint64_t>> pins,
           std::uint64_t bytes)
      : units(std::move(units)), pins(std::move(pins)), bytes(bytes) {
    this->pins->fetch_add(bytes, std::memory_order_relaxed);
  }
  ~ReplyPin() { pins->fetch_sub(bytes, std::memory_order_relaxed); }
  ReplyPin(const ReplyPin&) = delete;
  ReplyPin& operator=(const ReplyPin&) = delete;

  internal::CachedUnits units;
  std::shared_ptr<std::atomic<std::uint64_t>> pins;
  std::uint64_t bytes;
};

class StoreImpl final : public LocalStore {
 public:
  StoreImpl(const StoreOptions& options, std::unique_ptr<Database> db)
      : options_(options),
        clock_(options.clock ? *options.clock : real_clock()),
        data_(options.data_dir + internal::kDataFilesPath, options.l2),
        pools_(options.peers ? std::make_unique<PoolData>(options.peers, options.integrity)
                             : nullptr),
        pool_("store-pool", options.threads),
        random_(std::random_device{}()),
        shard_(
            std::move(db), [this](Database& db) { return flush_memory_state(db); },
            [this](bool committed, bool changing) { return batch_done(committed, changing); }) {}

  ~StoreImpl() override {
    close();
    pool_.join();
    // The next home of the shard counts the copies behind.
    options_.integrity->units_left.fetch_sub(units_left_here_.load());
    for (const auto& [inode, nodes] : behind_) {
      options_.integrity->copies_behind.fetch_sub(nodes.size());
    }
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
    atime_grace_ns_.store(std::chrono::nanoseconds(grace_period).count());
    atime_enabled_.store(enabled);
  }

  // The pool keeps running until the store goes: operations still under way may need it.
  void close() override {
    if (closed_.exchange(true)) return;
    shard_.stop();
  }

  awaitable<Status> mirror_to(std::shared_ptr<MirrorTarget> mirror) override {
    auto switched = shard_.run<bool>(
        false, [this, mirror = std::move(mirror)](Database& db, AfterCommit&) -> Result<bool> {
          // Writers wait while the copy is taken, so it holds every change made before it and
          // the mirror receives every change made after.
          std::unique_lock gate(mirror_gate_);
          ++mirror_generation_;
          recorder_.reset();
          mirror_.reset();
          if (!mirror) return true;
          TP_RETURN_IF_ERROR(copy_whole_shard(db, *mirror));
          TP_ASSIGN_OR_RETURN(recorder_, internal::ChangeRecorder::attach(db));
          mirror_ = std::move(mirror);
          return true;
        });
    Result<bool> done = co_await std::move(switched);
    if (!done.ok()) spdlog::error("shard: no whole copy for the mirror: {}", done.status().to_string());
    co_return done.status();
  }

  awaitable<Status> drop_caches() override {
    auto dropping = shard_.run<bool>(false, [this](Database&, AfterCommit&) -> Result<bool> {
      cache_.clear();
      names_.clear();
      listings_.clear();
      return true;
    });
    const Result<bool> dropped = co_await std::move(dropping);
    TP_CO_RETURN_IF_ERROR(dropped.status());
    data_.clear_l2();
    auto advising = offload([this] { return data_.drop_page_cache(); });
    co_return co_await std::move(advising);
  }

  awaitable<Result<Attributes>> getattr(InodeId inode) override {
    options_.reads->metadata_reads.fetch_add(1, std::memory_order_relaxed);
    if (auto cached = cache_.find(inode)) {
      options_.reads->metadata_hits.fetch_add(1, std::memory_order_relaxed);
      co_return *cached;
    }
    auto op = shard_.run<Attributes>(false, [this, inode](Database& db, AfterCommit&) {
      return load_and_remember(db, inode);
    });
    co_return co_await std::move(op);
  }

  awaitable<Result<Wcc>> setattr(InodeId inode, AttributeChanges changes, Caller caller,
                                 std::optional<std::int64_t> guard) override {
    return shard_.run<Wcc>(true, [=, this](Database& db, AfterCommit&) -> Result<Wcc> {
      if (changes.size && *changes.size > kMaxFileSize) {
        return error(Errc::file_too_large, "size beyond the maximum file size");
      }
      TP_ASSIGN_OR_RETURN(Attributes before, load(db, inode));
      if (guard && *guard != before.ctime_ns) {
        return error(Errc::precondition_failed, "ctime guard does not match");
      }
      TP_RETURN_IF_ERROR(check_setattr(before, changes, caller));
      Attributes after = before;
      std::int64_t now = now_ns();
      if (changes.mode) after.mode = *changes.mode & 07777;
      if (changes.gid) after.gid = *changes.gid;
      clear_foreign_setgid(after, caller);
      if (changes.uid) after.uid = *changes.uid;
      if ((changes.uid && *changes.uid != before.uid) || (changes.gid && *changes.gid != before.gid)) {
        if (after.type != FileType::directory && caller.uid != 0) after.mode &= ~06000u;
      }
      if (changes.size && *changes.size != before.size) {
        TP_RETURN_IF_ERROR(truncate_data(inode, *changes.size));
        after.size = *changes.size;
        after.used = after.size;
        after.mtime_ns = now;
      }
      if (changes.atime != SetTime::keep) {
        after.atime_ns = changes.atime == SetTime::server_time ? now : changes.atime_ns;
      }
      if (changes.mtime != SetTime::keep) {
        after.mtime_ns = changes.mtime == SetTime::server_time ? now : changes.mtime_ns;
      }
      after.ctime_ns = now;
      TP_RETURN_IF_ERROR(save(db, after));
      return wcc_of(before, after);
    });
  }

  awaitable<Result<LookupResult>> lookup(InodeId directory, std::string name,
                                         Caller caller) override {
    // Everything a LOOKUP needs may be cached; a miss or any refusal takes the shard's path,
    // which gives the precise answer.
    auto dir = cache_.find(directory);
    if (dir && dir->type == FileType::directory && permits(*dir, caller, kMayExecute)) {
      if (auto child = names_.find({directory, name})) {
        if (auto object = cache_.find(*child)) co_return LookupResult{*object, *dir};
      }
    }
    auto op = shard_.run<LookupResult>(
        false, [this, directory, name, caller](Database& db, AfterCommit&) -> Result<LookupResult> {
          TP_ASSIGN_OR_RETURN(Attributes dir, load_directory(db, directory));
          if (!permits(dir, caller, kMayExecute)) {
            return error(Errc::access_denied, "no search permission on the directory");
          }
          if (name.size() > kMaxNameBytes) return error(Errc::name_too_long, "name too long");
          InodeId child;
          if (name == ".") {
            child = directory;
          } else if (name == "..") {
            TP_ASSIGN_OR_RETURN(child, parent_of(db, directory));
          } else {
            auto found = find_entry(db, directory, name);
            if (!found) return error(Errc::not_found, "no entry '" + name + "'");
            child = *found;
            remember_entry(directory, name, child);
          }
          if (is_foreign(child)) {
            remember(dir);
            Attributes object;
            object.inode = child;
            return LookupResult{object, dir, true};
          }
          TP_ASSIGN_OR_RETURN(Attributes object, load_and_remember(db, child));
          remember(dir);
          return LookupResult{object, dir};
        });
    co_return co_await std::move(op);
  }

  awaitable<Result<AccessResult>> check_access(InodeId inode, Caller caller,
                                               std::uint32_t requested) override {
    auto a = co_await getattr(inode);
    if (!a.ok()) co_return a.status();
    co_return AccessResult{granted_access(*a, caller, requested), *a};
  }

  awaitable<Result<ReadlinkResult>> readlink(InodeId inode) override {
    return shard_.run<ReadlinkResult>(
        false, [=, this](Database& db, AfterCommit&) -> Result<ReadlinkResult> {
          TP_ASSIGN_OR_RETURN(Attributes a, load(db, inode));
          if (a.type != FileType::symlink) return error(Errc::invalid_argument, "not a symlink");
          auto row = db.prepare("SELECT symlink_target FROM inodes WHERE ino = ?");
          row.bind(1, inode);
          if (!row.next_row()) return error(Errc::stale, "inode vanished");
          return ReadlinkResult{row.blob(0), a};
        });
  }

  awaitable<Result<Layout>> layout(InodeId inode) override {
    return shard_.run<Layout>(false, [=, this](Database& db, AfterCommit&) -> Result<Layout> {
      return load_layout(db, inode);
    });
  }

  // Each call compiles its own statement: `where` varies with the policies, and the statement
  // cache keeps only this module's constant texts. `where` comes first and `after` and `limit`
  // are named, so SQLite numbers them after the highest of `where`'s parameters: they are N+1
  // and N+2 exactly when `where` uses ?1..?N, and nothing else is accepted.
  awaitable<Result<CandidatePage>> find_files(std::string where, std::vector<std::int64_t> values,
                                              InodeId after, std::uint32_t limit) override {
    if (limit == 0 || limit > kMaxCandidatePage) {
      co_return error(Errc::invalid_argument, "a page of candidates holds 1 to " +
                                                  std::to_string(kMaxCandidatePage) + " files");
    }
    if (where.size() > kMaxPredicateBytes || values.size() > kMaxPredicateValues ||
        !is_candidate_predicate(where)) {
      co_return error(Errc::invalid_argument, "not a predicate as policy::to_sql gives one");
    }
    auto finding = shard_.run<CandidatePage>(
        false,
        [this, where = std::move(where), values = std::move(values), after, limit](
            Database& db, AfterCommit&) -> Result<CandidatePage> {
          const int n = static_cast<int>(values.size());
          const std::string sql =
              "SELECT ino, generation, type, mode, nlink, uid, gid, size, rdev_major, "
              "rdev_minor, atime, mtime, ctime, birth FROM inodes WHERE (" +
              where + ") AND type = 1 AND ino > :after AND ino <= :until ORDER BY ino";
          sqlite3_stmt* raw = nullptr;
          const char* rest = nullptr;
          if (sqlite3_prepare_v2(db.handle(), sql.c_str(), -1, &raw, &rest) != SQLITE_OK) {
            sqlite3_finalize(raw);
            return error(Errc::invalid_argument, "candidate predicate: " + db.last_error());
          }
          const std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> owned(raw, sqlite3_finalize);
          if (*rest != '\0' || !sqlite3_stmt_readonly(raw)) {
            return error(Errc::invalid_argument, "candidate predicate is more than a condition");
          }
          if (sqlite3_bind_parameter_count(raw) != n + 2 ||
              sqlite3_bind_parameter_index(raw, ":after") != n + 1 ||
              sqlite3_bind_parameter_index(raw, ":until") != n + 2) {
            return error(Errc::invalid_argument,
                         "candidate predicate's parameters are not ?1..?" + std::to_string(n));
          }
          sqlite::Statement rows(raw);
          for (int i = 0; i < n; ++i) rows.bind(i + 1, values[static_cast<std::size_t>(i)]);
          // A call looks at a window of inode numbers at most, so that a predicate few rows
          // meet does not hold this thread for a scan of the whole table.
          constexpr InodeId kLastInode = std::numeric_limits<std::int64_t>::max();  // SQLite's
          const InodeId until =
              std::min<InodeId>(after, kLastInode - kMaxInodesExamined) + kMaxInodesExamined;
          rows.bind(n + 1, after).bind(n + 2, until);
          CandidatePage page;
          // Candidates share directories: each directory's path is worked out once a page.
          std::unordered_map<InodeId, std::string> directories;
          // A page ends at its limit, with `next` the last row looked at (kept or passed over),
          // or at the window's end, with `next` there while the shard has inodes past it: a
          // short page, even an empty one, is not mistaken for the end.
          InodeId last_examined = after;
          bool full = false;
          while (rows.next_row()) {
            if (page.files.size() == limit) {
              full = true;
              break;
            }
            last_examined = static_cast<InodeId>(rows.int64(0));
            Attributes a = attributes_from_row(rows);
            overlay_memory_state(a);
            // A file without a name (removed while open) or with too long a path is passed over.
            Result<std::string> path = path_of_file(db, a.inode, directories);
            if (path.ok()) page.files.push_back({a, std::move(*path)});
          }
          TP_RETURN_IF_ERROR(rows.status());
          if (full) {
            page.next = last_examined;
          } else if (until < next_inode_) {
            page.next = until;
          }
          return page;
        });
    co_return co_await std::move(finding);
  }

  awaitable<Result<Layout>> set_access_pattern(InodeId inode, std::string pattern) override {
    if (std::find(std::begin(kAccessPatterns), std::end(kAccessPatterns), pattern) ==
        std::end(kAccessPatterns)) {
      co_return error(Errc::invalid_argument, "unknown access pattern '" + pattern +
                                                  "' (random, concurrency or streaming)");
    }
    auto setting =
        shard_.run<Layout>(true, [=, this](Database& db, AfterCommit&) -> Result<Layout> {
          TP_RETURN_IF_ERROR(load_layout(db, inode).status());
          auto update = db.prepare("UPDATE layouts SET access_pattern = ? WHERE ino = ?");
          update.bind(1, pattern).bind(2, inode);
          TP_RETURN_IF_ERROR(update.run());
          return load_layout(db, inode);
        });
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
      std::optional<Attributes> cached = use_cache ? cache_.find(inode) : std::nullopt;
      bool from_cache = cached && !atime_due(*cached);
      if (use_cache) {
        options_.reads->metadata_reads.fetch_add(1, std::memory_order_relaxed);
        if (from_cache) options_.reads->metadata_hits.fetch_add(1, std::memory_order_relaxed);
      }
      if (!from_cache) {
        auto check = shard_.run<Attributes>(
            false, [this, inode](Database& db, AfterCommit&) -> Result<Attributes> {
              TP_ASSIGN_OR_RETURN(Attributes a, load_and_remember(db, inode));
              if (a.type == FileType::regular) note_access(a);
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
      bool l2_hit = false;
      bool from_pool = false;
      if (count > 0) {
        // Data the L2 or the page cache holds is copied here without blocking; else it is read
        // on the pool.
        auto buf = into.first(count);
        // Never waits for a move's chunk on this thread: a busy slot means the pool's read.
        Result<bool> cached_read = false;
        if (std::shared_lock slot(move_slot(inode), std::try_to_lock);
            slot.owns_lock() && !where_of(inode).placed) {
          l2_hit = data_.read_from_l2(inode, offset, buf);
          cached_read = l2_hit ? Result<bool>(true) : data_.read_cached(inode, offset, buf);
        }
        if (!cached_read.ok() && cached_read.status().code() != Errc::corrupt) {
          co_return cached_read.status();
        }
        if (!cached_read.ok() || !*cached_read) {
          auto fill = offload([this, inode, offset, buf, &from_pool] {
            return read_data(inode, offset, buf, from_pool);
          });
          TP_CO_RETURN_IF_ERROR(co_await std::move(fill));
        }
      }
      if (from_cache && !cache_.find(inode)) continue;
      // The nodes holding a placed file's units count what they read for it.
      if (!from_pool) count_data_read(count, l2_hit);
      co_return ReadResult{count, offset + count >= a.size, a};
    }
  }

  // A READ that the L2 holds whole, of a file whose cached attributes need no atime update,
  // is sent from the L2's units; any other goes through read().
  awaitable<Result<ReadPieces>> read_pieces(InodeId inode, std::uint64_t offset,
                                            std::uint32_t count, Caller caller) override {
    if (std::optional<ReadPieces> pieces = pieces_from_l2(inode, offset, count, caller)) {
      co_return std::move(*pieces);
    }
    auto lending = pieces_lent(inode, offset, count, caller);
    if (std::optional<ReadPieces> pieces = co_await std::move(lending)) {
      co_return std::move(*pieces);
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
    if (data.empty()) co_return WriteResult{0, Stability::file_sync, Wcc{before, *checked}, write_verifier()};
    // A truncation between the data going out and the size update would cut the data but not
    // the size: the update then asks for the data to be written again.
    for (int attempt = 0; attempt < kWriteAttempts; ++attempt) {
      std::uint64_t truncations = truncation_count(inode);
      const std::uint64_t moves = move_count(inode);
      const bool durable = stability != Stability::unstable;
      // Copies on nodes known down are noted behind, durably, before the data goes out: a home
      // that dies meanwhile must not leave a successor reading them.
      if (const std::optional<Placement> placed = where_of(inode).placed) {
        std::vector<MissedCopy> down = new_copies_down(inode, *placed, offset, data.size());
        if (!down.empty()) {
          note_behind(inode, *placed, down);
          auto keeping = keep_behind(inode, *placed, std::move(down));
          TP_CO_RETURN_IF_ERROR(co_await std::move(keeping));
        }
      }
      std::vector<MissedCopy> missed;
      std::optional<Placement> placed;
      auto store_data = offload([this, inode, offset, data, durable, &missed, &placed] {
        std::shared_lock gate(mirror_gate_);
        std::shared_lock slot(move_slot(inode));
        const Where where = where_of(inode);
        if (where.moving_to) {
          TP_RETURN_IF_ERROR(pools_->write(*where.moving_to, inode, offset, data, durable));
        }
        if (where.placed) {
          placed = where.placed;
          const Status written = pools_->write_past_down(*where.placed, inode, offset, data,
                                                         durable, where.behind, missed);
          note_behind(inode, *where.placed, missed);
          return written;
        }
        TP_RETURN_IF_ERROR(write_data(inode, offset, data));
        if (durable) TP_RETURN_IF_ERROR(data_.sync(inode));
        if (!mirror_) return Status{};
        return mirror_->call(MirrorMethod::write,
                             internal::encode_mirror_extent({inode, offset, durable, data}));
      });
      const Status stored = co_await std::move(store_data);
      // Also when the write failed: the units it did write left those copies behind.
      if (!missed.empty()) {
        auto keeping = keep_behind(inode, *placed, std::move(missed));
        TP_CO_RETURN_IF_ERROR(co_await std::move(keeping));
      }
      TP_CO_RETURN_IF_ERROR(stored);
      auto update = shard_.run<WriteResult>(
          durable,
          [this, inode, end = offset + data.size(), count = static_cast<std::uint32_t>(data.size()),
           durable, before, truncations, moves,
           uid = caller.uid](Database& db, AfterCommit&) -> Result<WriteResult> {
            if (truncation_count(inode) != truncations) {
              return error(Errc::unavailable, "truncated while being written");
            }
            // A move that began while the data went out may not have copied it: it goes out
            // again, to both copies.
            if (move_count(inode) != moves) {
              return error(Errc::unavailable, "moved while being written");
            }
            // The size read before the data went out may be stale: concurrent writes extend it.
            TP_ASSIGN_OR_RETURN(Attributes current, load(db, inode));
            Attributes after = current;
            after.size = std::max(current.size, end);
            after.used = after.size;
            after.mtime_ns = after.ctime_ns = now_ns();
            // A writer that is not the owner loses setuid/setgid, as a local write would.
            if (uid != 0 && uid != after.uid) after.mode &= ~06000u;
            if (durable || after.mode != current.mode) {
              TP_RETURN_IF_ERROR(save(db, after));
            } else {
              dirty_[inode] = {after.size, after.mtime_ns, after.ctime_ns};
              forget(inode);
            }
            return WriteResult{count, durable ? Stability::file_sync : Stability::unstable,
                               Wcc{before, after}, write_verifier()};
          });
      auto written = co_await std::move(update);
      if (written.code() == Errc::stale) {
        // Removed while its data was being written, which re-created its data file: it goes
        // once the removal is durable, as the removal's own deletion does.
        auto cleanup = shard_.run<bool>(
            true, [this, inode](Database& db, AfterCommit& after) -> Result<bool> {
              if (load(db, inode).code() == Errc::stale) {
                after.durable.push_back([this, inode] { remove_data(inode); });
              }
              return true;
            });
        (void)co_await std::move(cleanup);
      }
      if (written.code() != Errc::unavailable) co_return written;
    }
    co_return error(Errc::unavailable, "truncated or moved while being written, repeatedly");
  }

  awaitable<Result<NewObject>> create(InodeId directory, std::string name, CreateMode mode,
                                      AttributeChanges initial, CreateVerifier verifier,
                                      Caller caller) override {
    return shard_.run<NewObject>(
        true, [=, this](Database& db, AfterCommit& after) -> Result<NewObject> {
          TP_ASSIGN_OR_RETURN(Attributes dir, load_directory(db, directory));
          TP_RETURN_IF_ERROR(validate_new_name(name));
          if (auto existing = find_entry(db, directory, name)) {
            if (is_foreign(*existing)) return elsewhere(*existing);
            return create_existing(db, dir, *existing, mode, initial, verifier, caller);
          }
          TP_RETURN_IF_ERROR(check_may_add(dir, caller));
          TP_RETURN_IF_ERROR(reserve_numbers(db, after));
          Attributes object = new_attributes(dir, FileType::regular, caller, initial,
                                             kDefaultFileMode);
          std::optional<CreateVerifier> stored;
          if (mode == CreateMode::exclusive) stored = verifier;
          const std::optional<Placement> placed = placement_for_new_file(db, directory, name, object);
          TP_ASSIGN_OR_RETURN(NewObject made, add_object(db, dir, name, object, {}, stored, placed));
          if (placed) {
            after.committed.push_back([this, inode = object.inode, target = *placed] {
              std::unique_lock lock(placement_mutex_);
              placed_[inode] = target;
              note_placements();
            });
          }
          return made;
        });
  }

  awaitable<Result<NewObject>> mkdir(InodeId directory, std::string name,
                                     AttributeChanges initial, Caller caller) override {
    return shard_.run<NewObject>(
        true, [=, this](Database& db, AfterCommit& after) -> Result<NewObject> {
          TP_ASSIGN_OR_RETURN(Attributes dir, load_directory(db, directory));
          TP_RETURN_IF_ERROR(validate_new_name(name));
          if (find_entry(db, directory, name)) return error(Errc::already_exists, name);
          TP_RETURN_IF_ERROR(check_may_add(dir, caller));
          if (dir.nlink >= kMaxLinks) return error(Errc::too_many_links, "too many subdirectories");
          TP_RETURN_IF_ERROR(reserve_numbers(db, after));
          Attributes object = new_attributes(dir, FileType::directory, caller, initial,
                                             kDefaultDirectoryMode);
          object.nlink = 2;
          return add_object(db, dir, name, object, {}, std::nullopt);
        });
  }

  awaitable<Result<NewObject>> symlink(InodeId directory, std::string name, std::string target,
                                       AttributeChanges initial, Caller caller) override {
    return shard_.run<NewObject>(
        true, [=, this](Database& db, AfterCommit& after) -> Result<NewObject> {
          if (target.size() > kMaxSymlinkBytes) return error(Errc::name_too_long, "target too long");
          TP_ASSIGN_OR_RETURN(Attributes dir, load_directory(db, directory));
          TP_RETURN_IF_ERROR(validate_new_name(name));
          if (find_entry(db, directory, name)) return error(Errc::already_exists, name);
          TP_RETURN_IF_ERROR(check_may_add(dir, caller));
          TP_RETURN_IF_ERROR(reserve_numbers(db, after));
          AttributeChanges with_mode = initial;
          with_mode.mode = 0777;
          Attributes object = new_attributes(dir, FileType::symlink, caller, with_mode, 0777);
          object.size = object.used = target.size();
          return add_object(db, dir, name, object, target, std::nullopt);
        });
  }

  awaitable<Result<NewObject>> mknod(InodeId directory, std::string name, FileType type,
                                     std::uint32_t rdev_major, std::uint32_t rdev_minor,
                                     AttributeChanges initial, Caller caller) override {
    return shard_.run<NewObject>(
        true, [=, this](Database& db, AfterCommit& after) -> Result<NewObject> {
          if (type == FileType::regular || type == FileType::directory ||
              type == FileType::symlink) {
            return error(Errc::not_supported, "mknod makes devices, sockets and FIFOs only");
          }
          TP_ASSIGN_OR_RETURN(Attributes dir, load_directory(db, directory));
          TP_RETURN_IF_ERROR(validate_new_name(name));
          if (find_entry(db, directory, name)) return error(Errc::already_exists, name);
          TP_RETURN_IF_ERROR(check_may_add(dir, caller));
          bool device = type == FileType::block_device || type == FileType::char_device;
          if (device && caller.uid != 0) {
            return error(Errc::not_permitted, "only root makes device nodes");
          }
          TP_RETURN_IF_ERROR(reserve_numbers(db, after));
          Attributes object = new_attributes(dir, type, caller, initial, kDefaultFileMode);
          if (device) {
            object.rdev_major = rdev_major;
            object.rdev_minor = rdev_minor;
          }
          return add_object(db, dir, name, object, {}, std::nullopt);
        });
  }

  awaitable<Result<Wcc>> remove(InodeId directory, std::string name, Caller caller) override {
    return shard_.run<Wcc>(
        true, [=, this](Database& db, AfterCommit& after) -> Result<Wcc> {
          TP_ASSIGN_OR_RETURN(Attributes dir, load_directory(db, directory));
          if (is_dot_or_dotdot(name)) return error(Errc::is_a_directory, name);
          if (name.size() > kMaxNameBytes) return error(Errc::name_too_long, "name too long");
          auto found = find_entry(db, directory, name);
          if (!found) return error(Errc::not_found, "no entry '" + name + "'");
          if (is_foreign(*found)) return elsewhere(*found);
          TP_ASSIGN_OR_RETURN(Attributes victim, load(db, *found));
          if (victim.type == FileType::directory) return error(Errc::is_a_directory, name);
          TP_RETURN_IF_ERROR(check_may_delete(dir, victim, caller));
          Attributes dir_after = dir;
          TP_RETURN_IF_ERROR(unlink_entry(db, dir_after, name, victim, after));
          return wcc_of(dir, dir_after);
        });
  }

  awaitable<Result<Wcc>> rmdir(InodeId directory, std::string name, Caller caller) override {
    return shard_.run<Wcc>(
        true, [=, this](Database& db, AfterCommit& after) -> Result<Wcc> {
          TP_ASSIGN_OR_RETURN(Attributes dir, load_directory(db, directory));
          if (name == ".") return error(Errc::invalid_argument, "cannot remove '.'");
          if (name == "..") return error(Errc::not_empty, "cannot remove '..'");
          if (name.size() > kMaxNameBytes) return error(Errc::name_too_long, "name too long");
          auto found = find_entry(db, directory, name);
          if (!found) return error(Errc::not_found, "no entry '" + name + "'");
          if (is_foreign(*found)) return elsewhere(*found);
          TP_ASSIGN_OR_RETURN(Attributes victim, load(db, *found));
          if (victim.type != FileType::directory) return error(Errc::not_a_directory, name);
          TP_RETURN_IF_ERROR(check_may_delete(dir, victim, caller));
          if (has_entries(db, victim.inode)) return error(Errc::not_empty, name);
          Attributes dir_after = dir;
          TP_RETURN_IF_ERROR(unlink_entry(db, dir_after, name, victim, after));
          return wcc_of(dir, dir_after);
        });
  }

  awaitable<Result<RenameResult>> rename(InodeId from_directory, std::string from_name,
                                         InodeId to_directory, std::string to_name,
                                         Caller caller) override {
    return shard_.run<RenameResult>(
        true, [=, this](Database& db, AfterCommit& after) {
          return rename_in(db, after, from_directory, from_name, to_directory, to_name, caller);
        });
  }

  awaitable<Result<LinkResult>> link(InodeId file, InodeId directory, std::string name,
                                     Caller caller) override {
    return shard_.run<LinkResult>(
        true, [=, this](Database& db, AfterCommit& after) -> Result<LinkResult> {
          if (is_foreign(file)) return elsewhere(file);
          TP_RETURN_IF_ERROR(check_inode_not_held(file));
          TP_ASSIGN_OR_RETURN(Attributes target, load(db, file));
          TP_ASSIGN_OR_RETURN(Attributes dir, load_directory(db, directory));
          if (target.type == FileType::directory) {
            return error(Errc::is_a_directory, "cannot hard-link a directory");
          }
          TP_RETURN_IF_ERROR(validate_new_name(name));
          if (find_entry(db, directory, name)) return error(Errc::already_exists, name);
          TP_RETURN_IF_ERROR(check_may_add(dir, caller));
          if (target.nlink >= kMaxLinks) return error(Errc::too_many_links, "too many links");
          TP_RETURN_IF_ERROR(reserve_numbers(db, after));
          TP_RETURN_IF_ERROR(add_entry(db, directory, name, file));
          std::int64_t now = now_ns();
          Attributes target_after = target;
          ++target_after.nlink;
          target_after.ctime_ns = now;
          TP_RETURN_IF_ERROR(save(db, target_after));
          Attributes dir_after = dir;
          dir_after.mtime_ns = dir_after.ctime_ns = now;
          TP_RETURN_IF_ERROR(save(db, dir_after));
          return LinkResult{target_after, wcc_of(dir, dir_after)};
        });
  }

  awaitable<Result<DirectoryPage>> readdir(InodeId directory, std::uint64_t cookie,
                                           std::uint64_t verifier, std::uint32_t max_entries,
                                           bool with_attributes, Caller caller) override {
    auto dir = cache_.find(directory);
    if (dir && dir->type == FileType::directory && permits(*dir, caller, kMayRead)) {
      if (auto listing = listings_.find(directory)) {
        auto page = page_from_cache(*dir, **listing, cookie, verifier, max_entries, with_attributes);
        if (page) co_return std::move(*page);
      }
    }
    auto op = shard_.run<DirectoryPage>(
        false, [=, this](Database& db, AfterCommit&) -> Result<DirectoryPage> {
          TP_ASSIGN_OR_RETURN(Attributes dir, load_and_remember(db, directory));
          if (dir.type != FileType::directory) return error(Errc::not_a_directory, "not a directory");
          if (!permits(dir, caller, kMayRead)) {
            return error(Errc::access_denied, "no read permission on the directory");
          }
          return list_directory(db, dir, cookie, verifier, max_entries, with_attributes);
        });
    co_return co_await std::move(op);
  }

  awaitable<Result<FsStatistics>> fsstat() override {
    struct statvfs vfs{};
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
    auto recording = shard_.run<std::uint32_t>(
        false,
        [this, inodes = std::move(inodes)](Database& db, AfterCommit&) -> Result<std::uint32_t> {
          std::uint32_t moved = 0;
          for (InodeId inode : inodes) {
            Result<Attributes> a = load_and_remember(db, inode);
            if (!a.ok() || a->type != FileType::regular || !atime_due(*a)) continue;
            note_access(*a);
            ++moved;
          }
          return moved;
        });
    co_return co_await std::move(recording);
  }

  awaitable<Result<Wcc>> commit(InodeId inode) override {
    auto before = co_await getattr(inode);
    if (!before.ok()) co_return before.status();
    // The size and times go to the shard while the data goes to disk: COMMIT waits for the
    // slower of the two, not for both in turn. A crash between them may leave the new size
    // over data that is not durable, as the once-a-second flush of UNSTABLE sizes may: the
    // client has no reply, and the new write verifier makes it send the data again.
    auto persist = shard_.run<Wcc>(
        true, [this, inode, pre = pre_of(*before)](Database& db, AfterCommit&) -> Result<Wcc> {
          TP_ASSIGN_OR_RETURN(Attributes now, load(db, inode));
          if (dirty_.count(inode)) TP_RETURN_IF_ERROR(save(db, now));
          return Wcc{pre, now};
        });
    if (before->type != FileType::regular) co_return co_await std::move(persist);
    std::vector<MissedCopy> missed;
    std::optional<Placement> placed;
    auto sync = offload([this, inode, size = before->size, &missed, &placed] {
      std::shared_lock gate(mirror_gate_);
      std::shared_lock slot(move_slot(inode));
      const Where where = where_of(inode);
      if (where.moving_to) TP_RETURN_IF_ERROR(pools_->sync(*where.moving_to, inode));
      if (where.placed) {
        placed = where.placed;
        TP_ASSIGN_OR_RETURN(missed, missed_syncs(*where.placed, inode, size, where.behind));
        note_behind(inode, *where.placed, missed);
        return Status{};
      }
      TP_RETURN_IF_ERROR(data_.sync(inode));
      if (!mirror_) return Status{};
      return mirror_->call(MirrorMethod::sync, internal::encode_mirror_inode({inode}));
    });
    auto [synced, persisted] = co_await (std::move(sync) && std::move(persist));
    TP_CO_RETURN_IF_ERROR(synced);
    if (!missed.empty()) {
      auto keeping = keep_behind(inode, *placed, std::move(missed));
      TP_CO_RETURN_IF_ERROR(co_await std::move(keeping));
    }
    co_return persisted;
  }

  awaitable<Result<Move>> migrate(InodeId inode, std::string pool, std::uint32_t protection,
                                  std::uint64_t bytes_per_second) override {
    if (!pools_) {
      co_return error(Errc::not_supported, "moving file data between node pools needs a cluster");
    }
    if (!is_valid_name(pool)) {
      co_return error(Errc::invalid_argument, "'" + pool + "' is not a node pool's name");
    }
    if (protection == 0 || protection > kMaxProtection) {
      co_return error(Errc::invalid_argument, "a protection of 1 to 3 copies");
    }
    if (!reserve_move(inode)) {
      auto waiting = wait_for_move(inode);
      TP_CO_RETURN_IF_ERROR(co_await std::move(waiting));
      auto again = migrate(inode, std::move(pool), protection, bytes_per_second);
      co_return co_await std::move(again);
    }
    // Nothing else moves the file's data until this call is done with it.
    const MoveReservation reservation(this, inode);
    auto reading = layout(inode);
    const Result<Layout> current = co_await std::move(reading);
    if (!current.ok()) co_return current.status();
    const Placement target =
        pool == kWithShard
            ? Placement{}
            : Placement{pool, protection, current->stripe_unit, pools_->nodes_of(pool)};
    // Within its pool at the same protection a file is restriped over the nodes the pool places
    // on now (a node lost, or back), unless that keeps fewer copies: a lost node's copies are
    // then still the file's best.
    const auto copies_over = [protection](const std::vector<cluster::NodeId>& nodes) {
      return std::min<std::size_t>(protection, nodes.size());
    };
    const bool stays =
        current->pool == pool &&
        (pool == kWithShard || (current->protection == protection &&
                                (same_nodes(current->nodes, target.nodes) ||
                                 copies_over(target.nodes) < copies_over(current->nodes))));
    // A move a crash cut short goes on from its watermark, if writes have gone to both copies
    // ever since; one to elsewhere is given up first.
    const std::optional<Placement> dual_writes_to = where_of(inode).moving_to;
    std::optional<Placement> left = left_move(*current);
    // Writes still going to a target whose row is gone (a give-up whose commit the mirror did
    // not confirm) are a move left too.
    if (!left) left = dual_writes_to;
    const bool resuming = !stays && left == target && dual_writes_to == left;
    if (left && !resuming) {
      auto giving_up = give_up_move(inode, *left);
      TP_CO_RETURN_IF_ERROR(co_await std::move(giving_up));
    }
    if (stays && !left) co_return Move{*current};
    if (stays) {
      auto rereading = layout(inode);
      const Result<Layout> now = co_await std::move(rereading);
      if (!now.ok()) co_return now.status();
      co_return Move{*now};
    }
    if (pool == kWithShard) {
      co_return error(Errc::not_supported, "file data does not move back to its shard");
    }
    if (target.nodes.empty()) co_return error(Errc::unavailable, "node pool '" + pool + "' has no node");
    // Within its pool (another protection: a restripe), the old and new placements share each
    // node's file of the file's units: only nodes new to the pool are cleared first, the copy
    // goes over whole units (copy_data), and what either placement alone holds on a node is
    // made a hole unit by unit (drop_units, here and in give_up_move) rather than the node's
    // file removed.
    const bool restripe = current->pool == pool;
    std::optional<Placement> source;
    if (current->pool != kWithShard) source = placement_of(*current);
    const std::uint64_t resumed_at = resuming ? current->moved_bytes : 0;
    if (!resuming) {
      // Units an earlier move left behind on the target's nodes must not show through holes.
      // Before writes go there too: a write from then on must not be cut. Within the pool, only
      // the nodes the old placement does not have: the others' files hold its units.
      Placement cleared = target;
      if (restripe) {
        std::erase_if(cleared.nodes, [&](cluster::NodeId node) {
          return std::find(source->nodes.begin(), source->nodes.end(), node) != source->nodes.end();
        });
      }
      auto clearing = offload([this, inode, cleared] {
        std::unique_lock slot(move_slot(inode));
        return pools_->truncate(cleared, inode, 0);
      });
      TP_CO_RETURN_IF_ERROR(co_await std::move(clearing));
    }
    // From here every write goes to both copies, and one that began before does its data again.
    start_dual_writes(inode, target);
    auto noting = note_watermark(inode, &target, resumed_at);
    Status copied = co_await std::move(noting);
    auto sizing = getattr(inode);
    const Result<Attributes> attributes = co_await std::move(sizing);
    if (copied.ok()) copied = attributes.status();
    const std::uint64_t size = attributes.ok() ? attributes->size : 0;
    // A restripe's copy covers the last unit whole: the new owners' files may hold units a
    // restripe given up left there, which must not show past the end when the file grows.
    const std::uint64_t copy_end = restripe ? whole_units(size, target.stripe_unit) : size;
    const auto start = std::chrono::steady_clock::now();
    int redone = 0;
    // What the copy read and wrote, a range copied again counted again: the pace counts it.
    std::uint64_t copied_bytes = 0;
    for (std::uint64_t at = resumed_at; copied.ok() && at < copy_end;) {
      const std::uint64_t end = std::min(copy_end, at + kWatermarkBytes);
      // A node that restarted before the range was synced may have lost some of it: the range
      // is copied again rather than counted.
      const std::uint64_t restarts = pools_->restarts();
      auto copying = offload([=, this, &copied_bytes] {
        return copy_data(inode, source, target, {at, end, start}, bytes_per_second, copied_bytes);
      });
      copied = co_await std::move(copying);
      if (copied.ok() && pools_->restarts() != restarts) {
        if (++redone > kMaxRangeCopies) {
          // Left as a crash would leave it: the watermark stays for the next attempt.
          co_return error(Errc::unavailable, "nodes keep restarting while the file's data moves");
        }
        continue;
      }
      if (!copied.ok()) break;
      auto advancing = note_watermark(inode, nullptr, end);
      copied = co_await std::move(advancing);
      at = end;
      redone = 0;
    }
    // A store closing leaves the move as it stands: its watermark is where the next home (or
    // this one, reopened) goes on from.
    if (closed_.load()) co_return error(Errc::unavailable, "the store is closed");
    Result<Layout> switched = error(Errc::internal, "not switched");
    if (!copied.ok()) {
      switched = copied;
    } else {
      auto switching = shard_.run<Layout>(
          true, [this, inode, from = current->pool, target](Database& db,
                                                            AfterCommit& after) -> Result<Layout> {
            TP_ASSIGN_OR_RETURN(Layout now, load_layout(db, inode));
            if (now.pool != from) return error(Errc::unavailable, "moved meanwhile");
            auto update =
                db.prepare("UPDATE layouts SET pool = ?, protection = ?, nodes = ? WHERE ino = ?");
            update.bind(1, target.pool).bind(2, target.copies);
            update.bind(3, nodes_text(target.nodes)).bind(4, inode);
            TP_RETURN_IF_ERROR(update.run());
            TP_RETURN_IF_ERROR(forget_move(db, inode));
            // The old copies go, and with them the ones that were behind.
            auto caught_up = db.prepare("DELETE FROM copies_behind WHERE ino = ?");
            TP_RETURN_IF_ERROR(caught_up.bind(1, inode).run());
            if (now.pool != kWithShard) {
              TP_RETURN_IF_ERROR(note_down_units_left(
                  db, after, inode, placement_of(now),
                  now.pool == target.pool ? target.nodes : std::vector<cluster::NodeId>{}));
            }
            after.committed.push_back([this, inode, target] { end_move(inode, target, true); });
            return load_layout(db, inode);
          });
      switched = co_await std::move(switching);
    }
    // A switch committed but reported failed (the mirror did not take it) still switched.
    if (!switched.ok() && where_of(inode).placed != target) {
      auto giving_up = give_up_move(inode, target);
      if (const Status gave_up = co_await std::move(giving_up); !gave_up.ok()) {
        spdlog::warn("inode {}: a move that failed ({}) stays to go on later: {}", inode,
                     switched.status().to_string(), gave_up.to_string());
      }
      co_return switched.status();
    }
    // Readers that began under the old layout finish before its data goes.
    auto resizing = getattr(inode);
    const Result<Attributes> now = co_await std::move(resizing);
    const std::uint64_t end = whole_units(now.ok() ? now->size : size, target.stripe_unit);
    std::vector<cluster::NodeId> kept_by;  // nodes that keep units of the source
    auto freeing = offload([this, inode, source, target, restripe, end, &kept_by] {
      if (restripe) {
        // Readers of the new placement never ask the nodes losing units: once the old one's
        // are done, the units go without holding the slot. One that stays is never read.
        drain_slot(inode);
        if (Status s = pools_->drop_units(*source, target, inode, 0, end, nullptr, &kept_by);
            !s.ok()) {
          spdlog::info("inode {}: some units its old placement had stay on their nodes for now: {}",
                       inode, s.to_string());
        }
        return Status{};
      }
      std::shared_lock gate(mirror_gate_);
      std::unique_lock slot(move_slot(inode));
      if (source) {
        kept_by = pools_->remove(*source, inode);
      } else {
        remove_shard_data(inode);
      }
      return Status{};
    });
    (void)co_await std::move(freeing);
    if (source) note_units_left(inode, source->pool, std::move(kept_by));
    if (!switched.ok()) co_return switched.status();
    spdlog::info("inode {}: its data {} from {} to pool {} ({} copies){}", inode,
                 restripe ? "restriped" : "moved",
                 source ? "pool " + source->pool : std::string("its shard"), target.pool,
                 target.copies,
                 resumed_at > 0 ? ", gone on from byte " + std::to_string(resumed_at) : "");
    co_return Move{*switched, resumed_at, copied_bytes};
  }

  ShardParticipant& participant() override { return participant_; }

  // This shard's parts of changes spanning shards (store/cross_shard.h).
  awaitable<Result<std::vector<InodeId>>> prepare_part(TransactionPart part) {
    return shard_.run<std::vector<InodeId>>(
        true, [this, part = std::move(part)](Database& db, AfterCommit& after) mutable {
          return prepare_in(db, after, part);
        });
  }
  awaitable<Status> commit_part(TransactionId id, bool deciding) {
    return run_changing([this, id, deciding](Database& db, AfterCommit& after) {
      return commit_in(db, after, id, deciding);
    });
  }
  awaitable<Status> abort_part(TransactionId id) {
    return run_changing(
        [this, id](Database& db, AfterCommit& after) { return abort_in(db, after, id); });
  }
  awaitable<Status> finish_part(TransactionId id) {
    return run_changing([id](Database& db, AfterCommit&) {
      auto forget = db.prepare("DELETE FROM transactions WHERE id = ? AND state = ?");
      return forget.bind(1, id).bind(2, kDecided).run();
    });
  }
  awaitable<Result<Outcome>> outcome_of(TransactionId id) {
    return shard_.run<Outcome>(true, [this, id](Database& db, AfterCommit&) -> Result<Outcome> {
      TP_ASSIGN_OR_RETURN(std::optional<PartRow> row, part_row(db, id));
      if (row) {
        return row->state == kPrepared  ? Outcome::prepared
               : row->state == kDecided ? Outcome::committed
                                        : Outcome::aborted;
      }
      // Never to commit from now on: its coordinator may still be preparing it.
      auto tombstone = db.prepare(
          "INSERT INTO transactions(id, coordinator, state, participants, boot) "
          "VALUES(?, ?, ?, '', ?)");
      tombstone.bind(1, id).bind(2, std::uint32_t{options_.shard}).bind(3, kAborted);
      tombstone.bind(4, boot_);
      TP_RETURN_IF_ERROR(tombstone.run());
      return Outcome::aborted;
    });
  }
  awaitable<Result<std::vector<PendingPart>>> pending_parts() {
    return shard_.run<std::vector<PendingPart>>(
        false, [this](Database& db, AfterCommit&) -> Result<std::vector<PendingPart>> {
          // This shard's own parts only from earlier boots: one of this boot is still driven
          // by its coordinator, which is alive. Another shard's part may be asked about at
          // any time: a coordinator told that it does not know one never decides it.
          auto rows = db.prepare(
              "SELECT id, coordinator, state, participants FROM transactions "
              "WHERE state != ? AND (boot < ? OR coordinator != ?) ORDER BY id LIMIT ?");
          rows.bind(1, kAborted).bind(2, boot_).bind(3, std::uint32_t{options_.shard});
          rows.bind(4, static_cast<std::int64_t>(kMaxPendingParts));
          std::vector<PendingPart> parts;
          while (rows.next_row()) {
            PendingPart part{static_cast<TransactionId>(rows.int64(0)),
                             static_cast<ShardId>(rows.int64(1)),
                             {},
                             rows.int64(2) == kDecided};
            for (std::uint64_t shard : nodes_from_text(rows.blob(3))) {
              part.participants.push_back(static_cast<ShardId>(shard));
            }
            parts.push_back(std::move(part));
          }
          TP_RETURN_IF_ERROR(rows.status());
          return parts;
        });
  }

 private:
  // The states of a row of `transactions`.
  static constexpr std::int64_t kPrepared = 0;
  static constexpr std::int64_t kDecided = 1;
  static constexpr std::int64_t kAborted = 2;

  // Forwards store/cross_shard.h's calls to the store.
  class Participant final : public ShardParticipant {
   public:
    explicit Participant(StoreImpl& store) : store_(store) {}
    awaitable<Result<std::vector<InodeId>>> prepare(TransactionPart part) override {
      return store_.prepare_part(std::move(part));
    }
    awaitable<Status> decide(TransactionId id) override { return store_.commit_part(id, true); }
    awaitable<Status> commit(TransactionId id) override { return store_.commit_part(id, false); }
    awaitable<Status> abort(TransactionId id) override { return store_.abort_part(id); }
    awaitable<Status> finish(TransactionId id) override { return store_.finish_part(id); }
    awaitable<Result<Outcome>> outcome(TransactionId id) override { return store_.outcome_of(id); }
    awaitable<Result<std::vector<PendingPart>>> pending() override {
      return store_.pending_parts();
    }

   private:
    StoreImpl& store_;
  };

  template <typename Work>
  awaitable<Status> run_changing(Work work) {
    auto op = shard_.run<bool>(
        true, [work = std::move(work)](Database& db, AfterCommit& after) -> Result<bool> {
          TP_RETURN_IF_ERROR(work(db, after));
          return true;
        });
    const Result<bool> done = co_await std::move(op);
    co_return done.status();
  }

  bool is_foreign(InodeId inode) const { return shard_of(inode) != options_.shard; }
  static Status elsewhere(InodeId inode) {
    return error(Errc::cross_device, "inode " + std::to_string(inode) + " is on another shard");
  }

  // What a prepared part holds against every other change, from its steps alone (so that
  // recovery holds the same again).
  struct HeldKeys {
    std::set<internal::EntryName> entries;  // neither added, removed nor replaced
    std::set<InodeId> inodes;               // neither removed, linked nor moved: by this part alone
    std::set<InodeId> pinned;               // directories not removed: others may pin them too
    std::set<InodeId> sealed;               // directories that take no new entry
  };
  static HeldKeys keys_of(const std::vector<ShardStep>& steps) {
    HeldKeys keys;
    for (const ShardStep& step : steps) {
      switch (step.kind) {
        case StepKind::add_entry:
          keys.entries.insert({step.directory, step.name});
          keys.pinned.insert(step.directory);
          break;
        case StepKind::remove_entry:
          keys.entries.insert({step.directory, step.name});
          break;
        case StepKind::make_inode:
          break;
        case StepKind::remove_directory:
          keys.sealed.insert(step.inode);
          keys.inodes.insert(step.inode);
          break;
        case StepKind::add_links:
        case StepKind::set_parent:
          keys.inodes.insert(step.inode);
          break;
      }
    }
    return keys;
  }
  static Status held_elsewhere() {
    return error(Errc::unavailable, "held by a change across shards under way; retry shortly");
  }
  Status check_entry_not_held(InodeId directory, std::string_view name) const {
    if (held_entries_.contains({directory, std::string(name)})) return held_elsewhere();
    return {};
  }
  // Whether an inode may be removed, relinked or moved: no part holds or pins it.
  Status check_inode_not_held(InodeId inode) const {
    return held_inodes_.contains(inode) || pinned_.contains(inode) ? held_elsewhere() : Status{};
  }
  Status check_keys_free(const HeldKeys& keys) const {
    for (const auto& entry : keys.entries) {
      TP_RETURN_IF_ERROR(check_entry_not_held(entry.directory, entry.name));
    }
    for (InodeId inode : keys.inodes) TP_RETURN_IF_ERROR(check_inode_not_held(inode));
    for (InodeId inode : keys.pinned) {
      if (held_inodes_.contains(inode)) return held_elsewhere();
    }
    return {};
  }
  void hold(TransactionId id, HeldKeys keys) {
    held_entries_.insert(keys.entries.begin(), keys.entries.end());
    held_inodes_.insert(keys.inodes.begin(), keys.inodes.end());
    for (InodeId inode : keys.pinned) ++pinned_[inode];
    sealed_.insert(keys.sealed.begin(), keys.sealed.end());
    held_parts_.emplace(id, std::move(keys));
  }
  void release(TransactionId id) {
    auto held = held_parts_.find(id);
    if (held == held_parts_.end()) return;
    for (const auto& entry : held->second.entries) held_entries_.erase(entry);
    for (InodeId inode : held->second.inodes) held_inodes_.erase(inode);
    for (InodeId inode : held->second.pinned) {
      if (--pinned_[inode] == 0) pinned_.erase(inode);
    }
    for (InodeId inode : held->second.sealed) sealed_.erase(inode);
    held_parts_.erase(held);
  }

  struct PartRow {
    ShardId coordinator = 0;
    std::int64_t state = kPrepared;
  };
  static Result<std::optional<PartRow>> part_row(Database& db, TransactionId id) {
    auto row = db.prepare("SELECT coordinator, state FROM transactions WHERE id = ?");
    row.bind(1, id);
    if (!row.next_row()) {
      TP_RETURN_IF_ERROR(row.status());
      return std::optional<PartRow>();
    }
    return std::optional<PartRow>(PartRow{static_cast<ShardId>(row.int64(0)), row.int64(1)});
  }
  static Result<std::vector<ShardStep>> part_steps(Database& db, TransactionId id) {
    auto rows = db.prepare(
        "SELECT kind, directory, name, inode, delta, parent FROM transaction_steps WHERE id = ? "
        "ORDER BY seq");
    rows.bind(1, id);
    std::vector<ShardStep> steps;
    while (rows.next_row()) {
      ShardStep step;
      step.kind = static_cast<StepKind>(rows.int64(0));
      step.directory = static_cast<InodeId>(rows.int64(1));
      step.name = rows.blob(2);
      step.inode = static_cast<InodeId>(rows.int64(3));
      step.delta = static_cast<std::int32_t>(rows.int64(4));
      step.parent = static_cast<InodeId>(rows.int64(5));
      steps.push_back(std::move(step));
    }
    TP_RETURN_IF_ERROR(rows.status());
    return steps;
  }

  static Status changed_since(const ShardStep& step) {
    return error(Errc::precondition_failed,
                 "the shard changed since the change across shards was planned (step " +
                     std::to_string(static_cast<int>(step.kind)) + ")");
  }
  Status check_local(InodeId inode) const {
    if (is_foreign(inode)) {
      return error(Errc::invalid_argument,
                   "inode " + std::to_string(inode) + " is not this shard's");
    }
    return {};
  }

  // Checks one step against the shard (as the part's earlier steps leave it) and makes its
  // inode; `freed`: the entries the earlier steps remove.
  Status check_step(Database& db, AfterCommit& after, ShardStep& step,
                    std::set<internal::EntryName>& freed) {
    switch (step.kind) {
      case StepKind::add_entry: {
        TP_RETURN_IF_ERROR(check_local(step.directory));
        TP_ASSIGN_OR_RETURN(Attributes dir, load_directory(db, step.directory));
        TP_RETURN_IF_ERROR(validate_new_name(step.name));
        TP_RETURN_IF_ERROR(reserve_numbers(db, after));  // its cookie, taken at commit
        if (sealed_.contains(dir.inode)) return held_elsewhere();
        if (find_entry(db, step.directory, step.name) &&
            !freed.contains({step.directory, step.name})) {
          return changed_since(step);
        }
        if (step.delta > 0 && dir.nlink >= kMaxLinks) {
          return error(Errc::too_many_links, "too many subdirectories");
        }
        return {};
      }
      case StepKind::remove_entry: {
        TP_RETURN_IF_ERROR(check_local(step.directory));
        const std::optional<InodeId> found = find_entry(db, step.directory, step.name);
        if (!found || *found != step.inode) return changed_since(step);
        freed.insert({step.directory, step.name});
        return {};
      }
      case StepKind::make_inode: {
        if (step.attributes.type != FileType::directory) {
          return error(Errc::invalid_argument, "a change across shards makes directories only");
        }
        TP_RETURN_IF_ERROR(reserve_numbers(db, after));
        step.attributes.inode = step.inode = next_inode_++;
        step.attributes.generation = static_cast<std::uint32_t>(random_());
        step.attributes.nlink = 2;
        return insert_inode(db, step.attributes, {}, std::nullopt, step.parent);
      }
      case StepKind::add_links: {
        TP_RETURN_IF_ERROR(check_local(step.inode));
        TP_ASSIGN_OR_RETURN(Attributes file, load(db, step.inode));
        const std::int64_t links = std::int64_t{file.nlink} + step.delta;
        if (file.type == FileType::directory || links < 0) return changed_since(step);
        if (links > kMaxLinks) return error(Errc::too_many_links, "too many links");
        return {};
      }
      case StepKind::remove_directory:
      case StepKind::set_parent: {
        TP_RETURN_IF_ERROR(check_local(step.inode));
        TP_ASSIGN_OR_RETURN(Attributes dir, load(db, step.inode));
        if (dir.type != FileType::directory) return changed_since(step);
        if (step.kind == StepKind::remove_directory && has_entries(db, step.inode)) {
          return error(Errc::not_empty, "directory not empty");
        }
        return {};
      }
    }
    return error(Errc::invalid_argument, "unknown step of a change across shards");
  }

  // What a part says of itself, before the shard is looked at: its steps' counts, and who
  // takes part. A shipped part may say anything.
  Status check_part_shape(const TransactionPart& part) const {
    if (part.steps.empty() || part.steps.size() > kMaxStepsPerPart) {
      return error(Errc::invalid_argument,
                   "a part holds 1 to " + std::to_string(kMaxStepsPerPart) + " steps");
    }
    const bool coordinating = part.coordinator == options_.shard;
    if (!coordinating && !part.participants.empty()) {
      return error(Errc::invalid_argument, "only the coordinator's part names the participants");
    }
    std::set<ShardId> participants;
    for (ShardId shard : part.participants) {
      if (shard == part.coordinator || !participants.insert(shard).second) {
        return error(Errc::invalid_argument, "a change's participants are other shards, once each");
      }
    }
    std::set<internal::EntryName> added;
    for (const ShardStep& step : part.steps) {
      const internal::EntryName name{step.directory, step.name};
      if (step.kind == StepKind::add_entry && !added.insert(name).second) {
        return error(Errc::invalid_argument, "a part adds one name twice");
      }
      if (step.kind == StepKind::remove_entry) added.erase(name);
      const bool entry = step.kind == StepKind::add_entry || step.kind == StepKind::remove_entry;
      const bool link_count_step = entry || step.kind == StepKind::add_links;
      if (link_count_step ? step.delta < -1 || step.delta > 1 : step.delta != 0) {
        return error(Errc::invalid_argument, "a step changes a link count by -1, 0 or 1");
      }
      if (step.kind == StepKind::add_links && step.delta == 0) {
        return error(Errc::invalid_argument, "a step adding links adds or takes one");
      }
    }
    return {};
  }

  Result<std::vector<InodeId>> prepare_in(Database& db, AfterCommit& after, TransactionPart& part) {
    TP_RETURN_IF_ERROR(check_part_shape(part));
    TP_ASSIGN_OR_RETURN(std::optional<PartRow> known, part_row(db, part.id));
    if (known) {
      return known->state == kAborted
                 ? error(Errc::unavailable, "the change across shards was given up; retry")
                 : error(Errc::precondition_failed, "the change across shards is prepared already");
    }
    std::set<internal::EntryName> freed;
    std::vector<InodeId> made;
    for (ShardStep& step : part.steps) {
      TP_RETURN_IF_ERROR(check_step(db, after, step, freed));
      if (step.kind == StepKind::make_inode) made.push_back(step.inode);
    }
    HeldKeys keys = keys_of(part.steps);
    TP_RETURN_IF_ERROR(check_keys_free(keys));
    std::vector<std::uint64_t> participants(part.participants.begin(), part.participants.end());
    auto row = db.prepare(
        "INSERT INTO transactions(id, coordinator, state, participants, boot) "
        "VALUES(?, ?, ?, ?, ?)");
    row.bind(1, part.id).bind(2, std::uint32_t{part.coordinator}).bind(3, kPrepared);
    TP_RETURN_IF_ERROR(row.bind(4, nodes_text(participants)).bind(5, boot_).run());
    std::uint32_t seq = 0;
    for (const ShardStep& step : part.steps) {
      auto insert = db.prepare(
          "INSERT INTO transaction_steps(id, seq, kind, directory, name, inode, delta, parent) "
          "VALUES(?, ?, ?, ?, ?, ?, ?, ?)");
      insert.bind(1, part.id).bind(2, seq++).bind(3, static_cast<std::uint32_t>(step.kind));
      insert.bind(4, step.directory).bind(5, std::string_view(step.name)).bind(6, step.inode);
      insert.bind(7, std::int64_t{step.delta}).bind(8, step.parent);
      TP_RETURN_IF_ERROR(insert.run());
    }
    hold(part.id, std::move(keys));
    after.rolled_back.push_back([this, id = part.id] { release(id); });
    return made;
  }

  Status adjust_directory(Database& db, InodeId directory, std::int32_t delta, std::int64_t now) {
    TP_ASSIGN_OR_RETURN(Attributes dir, load_directory(db, directory));
    dir.nlink = static_cast<std::uint32_t>(std::int64_t{dir.nlink} + delta);
    dir.mtime_ns = dir.ctime_ns = now;
    return save(db, dir);
  }

  Status apply_step(Database& db, AfterCommit& after, const ShardStep& step, std::int64_t now) {
    switch (step.kind) {
      case StepKind::add_entry:
        TP_RETURN_IF_ERROR(insert_entry(db, step.directory, step.name, step.inode));
        return adjust_directory(db, step.directory, step.delta, now);
      case StepKind::remove_entry:
        TP_RETURN_IF_ERROR(delete_entry(db, step.directory, step.name));
        return adjust_directory(db, step.directory, step.delta, now);
      case StepKind::make_inode:
        return {};
      case StepKind::add_links: {
        TP_ASSIGN_OR_RETURN(Attributes file, load(db, step.inode));
        file.nlink = static_cast<std::uint32_t>(std::int64_t{file.nlink} + step.delta);
        file.ctime_ns = now;
        if (file.nlink > 0) return save(db, file);
        return drop_inode(db, file, after);
      }
      case StepKind::remove_directory: {
        TP_ASSIGN_OR_RETURN(Attributes dir, load(db, step.inode));
        return drop_inode(db, dir, after);
      }
      case StepKind::set_parent: {
        TP_RETURN_IF_ERROR(set_parent(db, step.inode, step.parent));
        TP_ASSIGN_OR_RETURN(Attributes dir, load(db, step.inode));
        dir.ctime_ns = now;
        return save(db, dir);
      }
    }
    return error(Errc::internal, "unknown step of a change across shards");
  }

  // `deciding`: the coordinator's commit, which keeps the decision; a part it does not know
  // was aborted (or never prepared) and is not decided. Another shard's part not known was
  // committed before.
  Status commit_in(Database& db, AfterCommit& after, TransactionId id, bool deciding) {
    TP_ASSIGN_OR_RETURN(std::optional<PartRow> row, part_row(db, id));
    if (!row) {
      if (!deciding) return {};
      return error(Errc::precondition_failed, "the change across shards is not known here");
    }
    if (deciding != (row->coordinator == options_.shard)) {
      return error(Errc::invalid_argument, "only a change's coordinator decides it");
    }
    if (row->state == kDecided) return {};
    if (row->state == kAborted) {
      return error(Errc::precondition_failed, "the change across shards was given up");
    }
    TP_ASSIGN_OR_RETURN(std::vector<ShardStep> steps, part_steps(db, id));
    // The cookies of its entries: claimed with the commit if the prepare's claim ran short.
    TP_RETURN_IF_ERROR(claim_ahead(db, after, Counter::cookie, next_cookie_, cookie_limit_));
    const std::int64_t now = now_ns();
    for (const ShardStep& step : steps) TP_RETURN_IF_ERROR(apply_step(db, after, step, now));
    return end_part(db, after, id, deciding ? std::optional(kDecided) : std::nullopt);
  }

  // On the coordinator, the part stays as an aborted row: a decision that comes after it (the
  // change's own, still under way while recovery gave it up) fails.
  Status abort_in(Database& db, AfterCommit& after, TransactionId id) {
    TP_ASSIGN_OR_RETURN(std::optional<PartRow> row, part_row(db, id));
    if (!row || row->state == kAborted) return {};
    if (row->state == kDecided) {
      return error(Errc::precondition_failed, "the change across shards was decided");
    }
    TP_ASSIGN_OR_RETURN(std::vector<ShardStep> steps, part_steps(db, id));
    for (const ShardStep& step : steps) {
      if (step.kind != StepKind::make_inode) continue;
      auto unmake = db.prepare("DELETE FROM inodes WHERE ino = ?");
      TP_RETURN_IF_ERROR(unmake.bind(1, step.inode).run());
      forget(step.inode);
    }
    return end_part(db, after, id,
                    row->coordinator == options_.shard ? std::optional(kAborted) : std::nullopt);
  }

  // A part's steps are done with: its row stays in state `kept` (the coordinator's decision, or
  // its abort), or goes; what it held is released once that is committed.
  Status end_part(Database& db, AfterCommit& after, TransactionId id,
                  std::optional<std::int64_t> kept) {
    auto forget_steps = db.prepare("DELETE FROM transaction_steps WHERE id = ?");
    TP_RETURN_IF_ERROR(forget_steps.bind(1, id).run());
    if (kept) {
      auto keep = db.prepare("UPDATE transactions SET state = ? WHERE id = ?");
      TP_RETURN_IF_ERROR(keep.bind(1, *kept).bind(2, id).run());
    } else {
      auto forget = db.prepare("DELETE FROM transactions WHERE id = ?");
      TP_RETURN_IF_ERROR(forget.bind(1, id).run());
    }
    after.committed.push_back([this, id] { release(id); });
    return {};
  }

  // At open: the parts prepared before a crash hold what they held.
  Status hold_prepared_parts(Database& db) {
    auto rows = db.prepare("SELECT id FROM transactions WHERE state = ?");
    rows.bind(1, kPrepared);
    std::vector<TransactionId> prepared;
    while (rows.next_row()) prepared.push_back(static_cast<TransactionId>(rows.int64(0)));
    TP_RETURN_IF_ERROR(rows.status());
    for (TransactionId id : prepared) {
      TP_ASSIGN_OR_RETURN(std::vector<ShardStep> steps, part_steps(db, id));
      hold(id, keys_of(steps));
    }
    return {};
  }

  // Where a file's data is: in a node pool (placed), or with the shard; where it is being
  // moved to; and the placed copies that are behind, as of the same moment.
  struct Where {
    std::optional<Placement> placed;
    std::optional<Placement> moving_to;
    CopyBehind behind;
  };
  Where where_of(InodeId inode) const {
    // Most shards have no file in a pool: their reads and writes skip the shared lock.
    if (!any_placement_.load(std::memory_order_acquire)) return {};
    std::shared_lock lock(placement_mutex_);
    Where where;
    if (auto placed = placed_.find(inode); placed != placed_.end()) where.placed = placed->second;
    if (auto moving = moving_to_.find(inode); moving != moving_to_.end()) {
      where.moving_to = moving->second;
    }
    where.behind = behind_of_locked(inode);
    return where;
  }
  std::shared_mutex& move_slot(InodeId inode) { return move_slots_[inode % kMoveSlots]; }
  std::uint64_t move_count(InodeId inode) const { return moves_[inode % kMoveSlots].load(); }

  // Keeps other moves of the file away until it is released (false: one is under way).
  bool reserve_move(InodeId inode) {
    std::unique_lock lock(placement_mutex_);
    return in_move_.insert(inode).second;
  }
  // The file's move is over, its old copy freed (or the move given up): it may move again.
  void release_move(InodeId inode) {
    std::unique_lock lock(placement_mutex_);
    in_move_.erase(inode);
  }
  bool move_reserved(InodeId inode) const {
    std::shared_lock lock(placement_mutex_);
    return in_move_.contains(inode);
  }
  // Holds a file's move reservation for as long as it lives.
  class MoveReservation {
   public:
    MoveReservation(StoreImpl* store, InodeId inode) : store_(store), inode_(inode) {}
    ~MoveReservation() { store_->release_move(inode_); }
    MoveReservation(const MoveReservation&) = delete;
    MoveReservation& operator=(const MoveReservation&) = delete;

   private:
    StoreImpl* store_;
    InodeId inode_;
  };

  // From now on every write of the file goes to `target` too (replacing where a move given up
  // sent them), and writes under way do their data again: the moves count changes.
  void start_dual_writes(InodeId inode, const Placement& target) {
    {
      std::unique_lock lock(placement_mutex_);
      moving_to_[inode] = target;
      note_placements();
    }
    moves_[inode % kMoveSlots].fetch_add(1);
  }
  // The move ends: switched (the file's data is at `target` from now on) or not.
  void end_move(InodeId inode, const Placement& target, bool switched) {
    std::unique_lock lock(placement_mutex_);
    if (switched) {
      placed_[inode] = target;
      erase_behind(inode);
    }
    moving_to_.erase(inode);
    note_placements();
  }
  // Holding placement_mutex_ exclusively, after placed_ or moving_to_ changed.
  void note_placements() {
    any_placement_.store(!placed_.empty() || !moving_to_.empty(), std::memory_order_release);
  }

  // Copies a write or sync of `where` missed, from now on read from no more: on the pool, under
  // the file's move slot. Not if the file's data left `where` meanwhile (removed, or moved).
  void note_behind(InodeId inode, const Placement& where, const std::vector<MissedCopy>& missed) {
    if (missed.empty()) return;
    std::unique_lock lock(placement_mutex_);
    if (auto placed = placed_.find(inode); placed == placed_.end() || placed->second != where) {
      return;
    }
    std::map<cluster::NodeId, Behind>& nodes = behind_[inode];
    for (const MissedCopy& copy : missed) {
      auto [behind, added] = nodes.try_emplace(copy.node);
      if (added) options_.integrity->copies_behind.fetch_add(1);
      if (copy.unit == kEveryUnit) {
        behind->second.every_unit = ++behind_notes_;
      } else {
        behind->second.units.insert(copy.unit);
      }
    }
  }
  // Holding placement_mutex_ exclusively: the file's copies behind go (with its data).
  void erase_behind(InodeId inode) {
    auto nodes = behind_.find(inode);
    if (nodes == behind_.end()) return;
    options_.integrity->copies_behind.fetch_sub(nodes->second.size());
    behind_.erase(nodes);
  }
  // Holding placement_mutex_: the file's copies not to read; null when none is behind.
  CopyBehind behind_of_locked(InodeId inode) const {
    auto found = behind_.find(inode);
    if (found == behind_.end()) return nullptr;
    return [nodes = found->second](cluster::NodeId node, std::uint64_t unit) {
      auto behind = nodes.find(node);
      return behind != nodes.end() &&
             (behind->second.every_unit != 0 || behind->second.units.contains(unit));
    };
  }
  CopyBehind behind_of(InodeId inode) const {
    std::shared_lock lock(placement_mutex_);
    return behind_of_locked(inode);
  }
  // Of the copies a write to `where` would miss (their nodes down), those not noted yet.
  std::vector<MissedCopy> new_copies_down(InodeId inode, const Placement& where,
                                          std::uint64_t offset, std::uint64_t length) const {
    std::vector<MissedCopy> down = pools_->copies_down(where, inode, offset, length);
    if (down.empty()) return down;
    const CopyBehind behind = behind_of(inode);
    if (behind) {
      std::erase_if(down, [&](const MissedCopy& copy) { return behind(copy.node, copy.unit); });
    }
    return down;
  }
  // Keeps the missed copies with the shard, durably and on the mirror, while the file's data
  // is still in `where`: a new home must not read them either.
  awaitable<Status> keep_behind(InodeId inode, Placement where, std::vector<MissedCopy> missed) {
    auto keeping =
        shard_.run<bool>(true,
                         [this, inode, where = std::move(where), missed = std::move(missed)](
                             Database& db, AfterCommit&) -> Result<bool> {
                           Result<Layout> layout = load_layout(db, inode);
                           if (layout.code() == Errc::stale || layout.code() == Errc::not_found)
                             return false;
                           TP_RETURN_IF_ERROR(layout.status());
                           if (layout->pool != where.pool || layout->nodes != where.nodes)
                             return false;
                           for (const MissedCopy& copy : missed) {
                             TP_RETURN_IF_ERROR(insert_behind(db, inode, copy));
                           }
                           return true;
                         });
    const Result<bool> kept = co_await std::move(keeping);
    co_return kept.status();
  }
  static Status insert_behind(Database& db, InodeId inode, const MissedCopy& copy) {
    auto insert =
        db.prepare("INSERT OR IGNORE INTO copies_behind(ino, node, unit) VALUES(?, ?, ?)");
    insert.bind(1, inode).bind(2, copy.node);
    insert.bind(3,
                copy.unit == kEveryUnit ? std::int64_t{-1} : static_cast<std::int64_t>(copy.unit));
    return insert.run();
  }
  // On the pool: syncs the file's units on the pool's nodes that are up. Each node that missed
  // the sync and holds some of the file's first `size` bytes may have lost what it took
  // UNSTABLE: all its copies of the file fall behind. Unavailable when some unit then has no
  // copy that is neither.
  Result<std::vector<MissedCopy>> missed_syncs(const Placement& where, InodeId inode,
                                               std::uint64_t size, const CopyBehind& behind) {
    TP_ASSIGN_OR_RETURN(std::vector<cluster::NodeId> nodes, pools_->sync_past_down(where, inode));
    std::vector<MissedCopy> missed;
    if (nodes.empty()) return missed;
    if (!pools_->every_unit_kept(where, inode, size, nodes, behind)) {
      return error(Errc::unavailable, "inode " + std::to_string(inode) +
                                          ": some of its data has no synced copy on a node up");
    }
    for (cluster::NodeId node : nodes) {
      if (!pools_->units_held_by(where, inode, node, size).empty()) {
        missed.push_back({node, kEveryUnit});
      }
    }
    return missed;
  }

  // On the shard thread, about once a second: copies behind on nodes that are up again are
  // caught up, one pass at a time.
  void start_catch_up() {
    if (!pools_ || closed_.load()) return;
    {
      std::shared_lock lock(placement_mutex_);
      if (behind_.empty() && !any_units_left_.load()) return;
    }
    if (catching_up_.exchange(true)) return;
    asio::co_spawn(pool_, catch_up(), asio::detached);
  }
  // Puts the units back on each node that is up and has copies behind, from the good copies,
  // then has the shard forget them. A node that cannot be reached ends the pass: the next one
  // tries again.
  awaitable<void> catch_up() {
    struct PassEnds {
      std::atomic<bool>& running;
      ~PassEnds() { running.store(false); }
    } pass_ends{catching_up_};
    std::vector<std::pair<InodeId, cluster::NodeId>> due;
    {
      std::shared_lock lock(placement_mutex_);
      for (const auto& [inode, nodes] : behind_) {
        for (const auto& [node, behind] : nodes) {
          if (pools_->is_up(node)) due.emplace_back(inode, node);
        }
      }
    }
    for (const auto& due_copy : due) {
      // Named, not bound: lambdas capture them (clang does not capture structured bindings).
      const InodeId inode = due_copy.first;
      const cluster::NodeId node = due_copy.second;
      if (closed_.load()) break;
      auto sizing = getattr(inode);
      const Result<Attributes> attributes = co_await std::move(sizing);
      if (attributes.code() == Errc::stale) {
        auto forgetting = forget_behind(inode, std::nullopt);
        (void)co_await std::move(forgetting);
        continue;
      }
      if (!attributes.ok()) continue;
      auto copying = offload([this, inode, node, size = attributes->size] {
        return catch_up_copy(inode, node, size);
      });
      const Status copied = co_await std::move(copying);
      if (!copied.ok()) {
        spdlog::warn("inode {}: node {} is not caught up yet: {}", inode, node, copied.to_string());
        if (copied.code() == Errc::unavailable || copied.code() == Errc::timed_out) break;
        continue;
      }
      auto forgetting = forget_behind(inode, node);
      if (const Status forgot = co_await std::move(forgetting); !forgot.ok()) {
        spdlog::warn("inode {}: node {}'s copies are caught up but still noted behind: {}", inode,
                     node, forgot.to_string());
      }
    }
    auto clearing = clear_units_left();
    co_await std::move(clearing);
  }

  // Has the shard keep that `nodes` hold units of the file in `pool` where no placement reads
  // them, until clear_units_left() removes them there. Any thread.
  void note_units_left(InodeId inode, const std::string& pool, std::vector<cluster::NodeId> nodes) {
    if (nodes.empty() || closed_.load()) return;
    asio::co_spawn(pool_, keep_units_left(inode, pool, std::move(nodes)), asio::detached);
  }
  awaitable<void> keep_units_left(InodeId inode, std::string pool,
                                  std::vector<cluster::NodeId> nodes) {
    auto keeping = shard_.run<bool>(
        true, [this, inode, pool, nodes](Database& db, AfterCommit& after) -> Result<bool> {
          std::int64_t added = 0;
          for (const cluster::NodeId node : nodes) {
            TP_ASSIGN_OR_RETURN(const std::int64_t one, insert_units_left(db, inode, pool, node));
            added += one;
          }
          after.committed.push_back([this, added] { count_units_left(added); });
          return true;
        });
    if (const Result<bool> kept = co_await std::move(keeping); !kept.ok()) {
      spdlog::warn(
          "inode {}: the nodes that keep its units in pool {} could not be noted, and "
          "keep them: {}",
          inode, pool, kept.status().to_string());
      co_return;
    }
    any_units_left_.store(true);
  }
  // In the transaction after which the file's units in `where` go (its removal, or its move's
  // switch away; `keep`: nodes that keep them as the new placement's): the nodes the view has
  // down keep them, noted with the change itself, so that no crash before the units go loses
  // the note. Nodes that fail later are noted by note_units_left().
  Status note_down_units_left(Database& db, AfterCommit& after, InodeId inode,
                              const Placement& where,
                              const std::vector<cluster::NodeId>& keep = {}) {
    std::int64_t added = 0;
    for (const cluster::NodeId node : where.nodes) {
      if (pools_->is_up(node) || std::ranges::find(keep, node) != keep.end()) continue;
      TP_ASSIGN_OR_RETURN(const std::int64_t one, insert_units_left(db, inode, where.pool, node));
      added += one;
    }
    if (added > 0) {
      after.committed.push_back([this, added] {
        count_units_left(added);
        any_units_left_.store(true);
      });
    }
    return {};
  }
  // Notes that `node` keeps units of the file in `pool`: 1 row added, or 0 if it was noted.
  static Result<std::int64_t> insert_units_left(Database& db, InodeId inode,
                                                const std::string& pool, cluster::NodeId node) {
    auto insert = db.prepare("INSERT OR IGNORE INTO units_left(ino, pool, node) VALUES(?, ?, ?)");
    TP_RETURN_IF_ERROR(insert.bind(1, inode).bind(2, pool).bind(3, node).run());
    return db.changes();
  }
  // This shard's rows of units_left, and the node's gauge, change by `delta`.
  void count_units_left(std::int64_t delta) {
    units_left_here_.fetch_add(static_cast<std::uint64_t>(delta));
    options_.integrity->units_left.fetch_add(static_cast<std::uint64_t>(delta));
  }
  // Removes the units that nodes up keep where no placement reads them (units_left), a page of
  // rows a pass from where the last one ended — unless the file is placed on the node again:
  // its move cleared the node's file first. The file's move reservation keeps its placement
  // still until its row is gone.
  awaitable<void> clear_units_left() {
    if (!any_units_left_.exchange(false)) co_return;
    auto listing = shard_.run<std::vector<LeftUnits>>(
        false, [this](Database& db, AfterCommit&) -> Result<std::vector<LeftUnits>> {
          auto rows = db.prepare(
              "SELECT ino, pool, node FROM units_left WHERE (ino, pool, node) > (?, ?, ?) "
              "ORDER BY ino, pool, node LIMIT ?");
          rows.bind(1, units_left_after_.inode).bind(2, units_left_after_.pool);
          rows.bind(3, units_left_after_.node);
          rows.bind(4, static_cast<std::int64_t>(kUnitsLeftPerPass));
          std::vector<LeftUnits> left;
          while (rows.next_row()) {
            left.push_back({static_cast<InodeId>(rows.int64(0)), rows.blob(1),
                            static_cast<cluster::NodeId>(rows.int64(2))});
          }
          TP_RETURN_IF_ERROR(rows.status());
          return left;
        });
    const Result<std::vector<LeftUnits>> page = co_await std::move(listing);
    if (!page.ok()) {
      any_units_left_.store(true);
      co_return;
    }
    // A page shorter than a whole one ends the table: the next pass starts again from its top.
    bool remaining = page->size() == kUnitsLeftPerPass || units_left_after_ != LeftUnits{};
    units_left_after_ = page->size() == kUnitsLeftPerPass ? page->back() : LeftUnits{};
    std::set<cluster::NodeId> failing;  // not waited for again in this pass
    std::size_t cleared = 0;
    for (const LeftUnits& row : *page) {
      if (closed_.load() || failing.contains(row.node) || !pools_->is_up(row.node) ||
          !reserve_move(row.inode)) {
        remaining = true;
        continue;
      }
      const MoveReservation reservation(this, row.inode);
      const Where where = where_of(row.inode);
      const auto placed_there = [&row](const std::optional<Placement>& placement) {
        return placement && placement->pool == row.pool &&
               std::ranges::find(placement->nodes, row.node) != placement->nodes.end();
      };
      if (!placed_there(where.placed) && !placed_there(where.moving_to)) {
        auto removing = offload([this, &row] {
          return pools_->remove(Placement{row.pool, 1, 0, {row.node}}, row.inode).empty()
                     ? Status{}
                     : error(Errc::unavailable, "not removed");
        });
        if (const Status removed = co_await std::move(removing); !removed.ok()) {
          failing.insert(row.node);
          remaining = true;
          continue;
        }
      }
      auto forgetting =
          shard_.run<bool>(true, [this, &row](Database& db, AfterCommit& after) -> Result<bool> {
            auto forget =
                db.prepare("DELETE FROM units_left WHERE ino = ? AND pool = ? AND node = ?");
            TP_RETURN_IF_ERROR(forget.bind(1, row.inode).bind(2, row.pool).bind(3, row.node).run());
            after.committed.push_back(
                [this, removed = db.changes()] { count_units_left(-removed); });
            return true;
          });
      if (const Result<bool> forgot = co_await std::move(forgetting); !forgot.ok()) {
        remaining = true;
        continue;
      }
      ++cleared;
    }
    if (cleared > 0) {
      spdlog::info("units of {} files left on nodes now up where no placement reads them are gone",
                   cleared);
    }
    if (remaining) any_units_left_.store(true);
  }
  // On the pool: copies each unit of the file that `node` is behind on (all it holds of the
  // first `size` bytes, for every_unit) from a good copy, a unit at a time under the file's
  // move slot, so that no write lands between the read of the good copy and the copy's write.
  // Units written past `size` since were written to the node or noted. A file whose data is
  // no longer placed has no copies behind.
  Status catch_up_copy(InodeId inode, cluster::NodeId node, std::uint64_t size) {
    std::optional<Placement> placed;
    std::set<std::uint64_t> units;
    std::uint64_t every_unit = 0;
    {
      std::unique_lock lock(placement_mutex_);
      auto nodes = behind_.find(inode);
      if (nodes == behind_.end() || !nodes->second.contains(node)) return {};
      const Behind& behind = nodes->second.at(node);
      units = behind.units;
      every_unit = behind.every_unit;
      if (auto found = placed_.find(inode); found != placed_.end()) placed = found->second;
      if (!placed) {
        erase_behind(inode);
        return {};
      }
    }
    if (every_unit != 0) {
      for (std::uint64_t unit : pools_->units_held_by(*placed, inode, node, size))
        units.insert(unit);
    }
    for (std::uint64_t unit : units) {
      if (closed_.load()) return error(Errc::unavailable, "the store is closed");
      std::unique_lock slot(move_slot(inode));
      const Where where = where_of(inode);
      // A move took the file elsewhere meanwhile: its old copies are gone.
      if (where.placed != placed) return {};
      TP_RETURN_IF_ERROR(pools_->copy_unit_to(*placed, inode, unit, node, where.behind));
      options_.integrity->units_caught_up.fetch_add(1);
      std::unique_lock lock(placement_mutex_);
      if (auto nodes = behind_.find(inode); nodes != behind_.end()) {
        if (auto behind = nodes->second.find(node); behind != nodes->second.end()) {
          behind->second.units.erase(unit);
        }
      }
    }
    std::unique_lock lock(placement_mutex_);
    auto nodes = behind_.find(inode);
    if (nodes == behind_.end()) return {};
    if (auto behind = nodes->second.find(node); behind != nodes->second.end()) {
      if (behind->second.every_unit == every_unit) behind->second.every_unit = 0;
      if (behind->second.every_unit == 0 && behind->second.units.empty()) {
        nodes->second.erase(behind);
        options_.integrity->copies_behind.fetch_sub(1);
      }
    }
    if (nodes->second.empty()) behind_.erase(nodes);
    return {};
  }
  // Has the shard keep, of the file's copies on `node` (every node: nullopt), only those still
  // noted behind in memory.
  awaitable<Status> forget_behind(InodeId inode, std::optional<cluster::NodeId> node) {
    auto forgetting =
        shard_.run<bool>(true, [this, inode, node](Database& db, AfterCommit&) -> Result<bool> {
          TP_RETURN_IF_ERROR(forget_caught_up(db, inode, node));
          return true;
        });
    const Result<bool> forgot = co_await std::move(forgetting);
    co_return forgot.status();
  }
  // On the shard thread: the shard keeps, of the file's copies on `node` (every node: nullopt),
  // only those noted behind in memory, as after a catch-up, or when the file is gone.
  Status forget_caught_up(Database& db, InodeId inode, std::optional<cluster::NodeId> node) {
    auto forget = db.prepare(node ? "DELETE FROM copies_behind WHERE ino = ? AND node = ?"
                                  : "DELETE FROM copies_behind WHERE ino = ?");
    forget.bind(1, inode);
    if (node) forget.bind(2, *node);
    TP_RETURN_IF_ERROR(forget.run());
    std::vector<MissedCopy> still;
    {
      std::unique_lock lock(placement_mutex_);
      auto nodes = behind_.find(inode);
      if (nodes == behind_.end()) return {};
      if (!node) {
        erase_behind(inode);
        return {};
      }
      auto behind = nodes->second.find(*node);
      if (behind == nodes->second.end()) return {};
      if (behind->second.every_unit != 0) still.push_back({*node, kEveryUnit});
      for (std::uint64_t unit : behind->second.units) still.push_back({*node, unit});
    }
    for (const MissedCopy& copy : still) TP_RETURN_IF_ERROR(insert_behind(db, inode, copy));
    return {};
  }

  // The move a crash cut short, as the shard keeps it, if any.
  static std::optional<Placement> left_move(const Layout& layout) {
    if (layout.moving_to.empty()) return std::nullopt;
    return Placement{layout.moving_to, layout.moving_protection, layout.stripe_unit,
                     layout.moving_nodes};
  }

  // Keeps the move's watermark with the shard (durable, and on the mirror): with `target`, a
  // new move's row; without, how far the move under way has copied.
  awaitable<Status> note_watermark(InodeId inode, const Placement* target, std::uint64_t copied) {
    std::optional<Placement> row;
    if (target) row = *target;
    auto noting = shard_.run<bool>(
        true, [inode, row, copied](Database& db, AfterCommit&) -> Result<bool> {
          // A file removed meanwhile has no row to keep.
          auto update = row ? db.prepare(
                                  "INSERT OR REPLACE INTO moves(ino, pool, protection, nodes, "
                                  "copied) SELECT ?1, ?2, ?3, ?4, ?5 "
                                  "WHERE EXISTS (SELECT 1 FROM layouts WHERE ino = ?1)")
                            : db.prepare("UPDATE moves SET copied = ?5 WHERE ino = ?1");
          update.bind(1, inode).bind(5, copied);
          if (row) update.bind(2, row->pool).bind(3, row->copies).bind(4, nodes_text(row->nodes));
          TP_RETURN_IF_ERROR(update.run());
          if (db.changes() == 0) return error(Errc::stale, "the file was removed while it moved");
          return true;
        });
    const Result<bool> noted = co_await std::move(noting);
    co_return noted.status();
  }
  static Status forget_move(Database& db, InodeId inode) {
    auto erase = db.prepare("DELETE FROM moves WHERE ino = ?");
    erase.bind(1, inode);
    return erase.run();
  }

  // Waits (bounded) for the move of the file under way here to end.
  awaitable<Status> wait_for_move(InodeId inode) {
    asio::steady_timer timer(co_await asio::this_coro::executor);
    for (const auto deadline = std::chrono::steady_clock::now() + kMoveWaitLimit;
         move_reserved(inode);) {
      if (std::chrono::steady_clock::now() >= deadline || closed_.load()) {
        co_return error(Errc::unavailable, "the file's data is still being moved");
      }
      timer.expires_after(kMoveWaitPoll);
      auto sleeping = timer.async_wait(asio::use_awaitable);
      co_await std::move(sleeping);
    }
    co_return Status{};
  }

  // Gives up a move (one that failed, or one a crash cut short that is not to go on): its
  // watermark goes first, so that no crash can go on into freed units; then writes stop going
  // to its target, and the target's units are freed. When the watermark cannot go, the move
  // stays as a crash would have left it.
  awaitable<Status> give_up_move(InodeId inode, const Placement& target) {
    const std::optional<Placement> placed = where_of(inode).placed;
    // Within the pool, the nodes of the placement kept hold the units legitimately.
    std::vector<cluster::NodeId> kept;
    if (placed && placed->pool == target.pool) kept = placed->nodes;
    auto forgetting = shard_.run<bool>(
        true, [this, inode, &target, &kept](Database& db, AfterCommit& after) -> Result<bool> {
          TP_RETURN_IF_ERROR(forget_move(db, inode));
          TP_RETURN_IF_ERROR(note_down_units_left(db, after, inode, target, kept));
          return true;
        });
    const Result<bool> forgot = co_await std::move(forgetting);
    TP_CO_RETURN_IF_ERROR(forgot.status());
    end_move(inode, target, false);
    std::vector<cluster::NodeId> left;  // nodes that keep units of the target
    if (!placed || placed->pool != target.pool) {
      auto freeing = offload([this, inode, target, &left] {
        std::unique_lock slot(move_slot(inode));
        left = pools_->remove(target, inode);
        return Status{};
      });
      const Status freed = co_await std::move(freeing);
      note_units_left(inode, target.pool, std::move(left));
      co_return freed;
    }
    // A restripe given up: the units it wrote on nodes its placement alone has are never read,
    // and a later restripe writes or drops every unit it adds; they go, as far as they can.
    auto sizing = getattr(inode);
    const Result<Attributes> attributes = co_await std::move(sizing);
    if (!attributes.ok()) co_return Status{};
    auto dropping = offload([this, inode, target, keep = *placed,
                             end = whole_units(attributes->size, target.stripe_unit), &left] {
      drain_slot(inode);
      if (Status s = pools_->drop_units(target, keep, inode, 0, end, nullptr, &left); !s.ok()) {
        spdlog::info(
            "inode {}: some units a restripe given up wrote stay on their nodes for now: {}", inode,
            s.to_string());
      }
      return Status{};
    });
    const Status dropped = co_await std::move(dropping);
    note_units_left(inode, target.pool, std::move(left));
    co_return dropped;
  }

  // Waits for the operations holding the file's move slot when it is called, and lets the
  // ones after go on: those began under a layout already changed.
  void drain_slot(InodeId inode) { std::unique_lock slot(move_slot(inode)); }

  // `size` rounded up to whole stripe units.
  static std::uint64_t whole_units(std::uint64_t size, std::uint32_t stripe_unit) {
    return stripe_unit == 0 ? size : (size + stripe_unit - 1) / stripe_unit * stripe_unit;
  }

  // Bytes [at, end) of a move's copy, whose pace counts from `start`, when the copy began.
  struct CopyRange {
    std::uint64_t at = 0;
    std::uint64_t end = 0;
    std::chrono::steady_clock::time_point start;
  };
  // On the pool: copies a range of the file's data, a chunk at a time under its move slot, from
  // `source` (null: the shard's own copy) to `target`, at most `bytes_per_second` (0: no
  // limit), and makes it durable there. Holes are left holes (made holes, within a pool).
  // `copied`: what the move copied so far, counting the chunks read here.
  Status copy_data(InodeId inode, const std::optional<Placement>& source, const Placement& target,
                   const CopyRange& range, std::uint64_t bytes_per_second, std::uint64_t& copied) {
    std::vector<std::uint8_t> chunk(kCopyChunkBytes);
    for (std::uint64_t at = range.at; at < range.end; at += kCopyChunkBytes) {
      if (closed_.load()) return error(Errc::unavailable, "the store is closed");
      const auto piece =
          std::span(chunk).first(std::min<std::uint64_t>(kCopyChunkBytes, range.end - at));
      std::unique_lock slot(move_slot(inode));
      const CopyBehind held = held_already(inode, source, target);
      if (held && pools_->every_copy_held(target, inode, at, piece.size(), held)) continue;
      TP_RETURN_IF_ERROR(source ? pools_->read(*source, inode, at, piece, behind_of(inode))
                                : read_with_shard(inode, at, piece));
      copied += piece.size();
      if (std::all_of(piece.begin(), piece.end(), [](std::uint8_t b) { return b == 0; })) {
        // Within a pool the new owners' files were not cleared: a hole is made where they may
        // hold a unit a restripe given up left, and on owners whose copy is behind.
        if (source && source->pool == target.pool) {
          TP_RETURN_IF_ERROR(
              pools_->drop_units(target, *source, inode, at, at + piece.size(), behind_of(inode)));
        }
        continue;
      }
      TP_RETURN_IF_ERROR(pools_->write(target, inode, at, piece, false, held));
      slot.unlock();
      // Keeps to the job's pace: this store thread waits, the file's readers and writers don't.
      if (bytes_per_second > 0) {
        std::this_thread::sleep_until(
            range.start + std::chrono::microseconds(copied * 1'000'000 / bytes_per_second));
      }
    }
    return pools_->sync(target, inode);
  }

  // Within one pool, the new placement's copies that the old one has on the same node, up to
  // date: the node's file of the file's units is the same, so a restripe copies only the units
  // that change owners (a node lost or back: a few of them). Null for a move between pools.
  // Under the file's move slot.
  CopyBehind held_already(InodeId inode, const std::optional<Placement>& source,
                          const Placement& target) const {
    if (!source || source->pool != target.pool || source->stripe_unit != target.stripe_unit) {
      return nullptr;
    }
    return [this, inode, source = *source, behind = behind_of(inode)](cluster::NodeId node,
                                                                      std::uint64_t unit) {
      const Result<std::vector<cluster::NodeId>> owners = pools_->owners(source, inode, unit);
      return owners.ok() && std::ranges::find(*owners, node) != owners->end() &&
             !(behind && behind(node, unit));
    };
  }

  // Runs blocking file I/O on the pool; the caller resumes on its own executor.
  template <typename F>
  awaitable<Status> offload(F f) {
    if (closed_.load()) co_return error(Errc::unavailable, "the store is closed");
    auto run = asio::co_spawn(
        pool_, [f = std::move(f)]() -> awaitable<Status> { co_return f(); }, asio::use_awaitable);
    co_return co_await std::move(run);
  }

  void count_data_read(std::uint32_t count, bool l2_hit) {
    options_.reads->data_bytes_read.fetch_add(count, std::memory_order_relaxed);
    if (l2_hit) options_.reads->data_bytes_hit.fetch_add(count, std::memory_order_relaxed);
  }

  // The cached attributes of a file `caller` may read with no atime update due, and how much
  // of the `count` bytes at `offset` lies before its end; none when any of that does not hold.
  std::optional<std::pair<Attributes, std::uint32_t>> readable_from_cache(InodeId inode,
                                                                          std::uint64_t offset,
                                                                          std::uint32_t count,
                                                                          const Caller& caller) {
    std::optional<Attributes> a = cache_.find(inode);
    if (!a || atime_due(*a) || !check_data_access(*a, caller, kMayRead).ok()) return std::nullopt;
    const std::uint64_t available = offset < a->size ? a->size - offset : 0;
    return std::pair{std::move(*a),
                     static_cast<std::uint32_t>(std::min<std::uint64_t>(available, count))};
  }

  // Counts a READ answered with cached attributes, without read(); its result.
  ReadResult counted_cached_read(const Attributes& a, std::uint64_t offset, std::uint32_t count,
                                 bool l2_hit) {
    options_.reads->metadata_reads.fetch_add(1, std::memory_order_relaxed);
    options_.reads->metadata_hits.fetch_add(1, std::memory_order_relaxed);
    count_data_read(count, l2_hit);
    return ReadResult{count, offset + count >= a.size, a};
  }

  std::optional<ReadPieces> pieces_from_l2(InodeId inode, std::uint64_t offset,
                                           std::uint32_t wanted, const Caller& caller) {
    auto readable = readable_from_cache(inode, offset, wanted, caller);
    if (!readable) return std::nullopt;
    const auto& [a, count] = *readable;
    // Replies slow to go pin a quarter of the L2 at most; past that, read() copies.
    if (count == 0 || !options_.l2 ||
        reply_pins_->load(std::memory_order_relaxed) + count > options_.l2->capacity() / 4) {
      return std::nullopt;
    }
    internal::CachedUnits cached;
    // The slot keeps the file's data here while the units are taken.
    if (std::shared_lock slot(move_slot(inode), std::try_to_lock);
        slot.owns_lock() && !where_of(inode).placed) {
      cached = data_.cached_units(inode, offset, count);
    }
    // Removed or truncated since the attributes were taken: read() finds out how.
    if (cached.units.empty() || !cache_.find(inode)) return std::nullopt;
    ReadPieces pieces{
        counted_cached_read(a, offset, count, true), cached.pieces(offset, count), {}};
    pieces.keep = std::make_shared<ReplyPin>(std::move(cached), reply_pins_, count);
    pieces.pins_a_cache = true;
    return pieces;
  }

  // A READ of whole blocks, kMinLentBytes or more, of a file whose cached attributes need no
  // atime update and whose data is the shard's own: the page cache's pages go out by
  // reference, in a pipe (DataFiles::lend). None for any other, or when the data cannot be
  // lent so: read() copies it, and says what went wrong if anything did.
  awaitable<std::optional<ReadPieces>> pieces_lent(InodeId inode, std::uint64_t offset,
                                                   std::uint32_t wanted, const Caller& caller) {
    auto readable = readable_from_cache(inode, offset, wanted, caller);
    if (!readable) co_return std::nullopt;
    const Attributes a = std::move(readable->first);
    const std::uint32_t count = readable->second;  // a plain variable: the lambda captures it
    if (count < kMinLentBytes || count > internal::kMaxLentBytes ||
        offset % internal::kChecksumBlock != 0 || count % internal::kChecksumBlock != 0) {
      co_return std::nullopt;
    }
    std::unique_ptr<PipedBytes> lent;
    auto lending = offload([this, inode, offset, count, &lent]() -> Status {
      // The slot keeps the file's data here while it is lent.
      std::shared_lock slot(move_slot(inode));
      if (where_of(inode).placed) return {};
      TP_ASSIGN_OR_RETURN(lent, data_.lend(inode, offset, count));
      return {};
    });
    const Status lend_status = co_await std::move(lending);
    // Removed or truncated since the attributes were taken: read() finds out how.
    if (!lend_status.ok() || !lent || !cache_.find(inode)) co_return std::nullopt;
    options_.reads->data_bytes_lent.fetch_add(count, std::memory_order_relaxed);
    ReadPieces pieces{counted_cached_read(a, offset, count, false), {}, {}};
    pieces.piped = std::move(lent);
    co_return pieces;
  }

  // On the pool: from the node pool holding the file's data (`from_pool` set), or from the
  // shard's own copy.
  Status read_data(InodeId inode, std::uint64_t offset, std::span<std::uint8_t> into,
                   bool& from_pool) {
    std::shared_lock slot(move_slot(inode));
    if (const Where where = where_of(inode); where.placed) {
      from_pool = true;
      return pools_->read(*where.placed, inode, offset, into, where.behind);
    }
    return read_with_shard(inode, offset, into);
  }

  // On the pool, holding the file's move slot. A block that fails its checksum is put back
  // from the mirror's copy, when there is a mirror; then the read is done again. The repair
  // takes mirror_gate_ shared under the slot, against the usual order (gate, then slot): only
  // shared holders of the gate can wait on a slot, and glibc's rwlock lets a shared holder in
  // while a whole copy waits for the gate.
  Status read_with_shard(InodeId inode, std::uint64_t offset, std::span<std::uint8_t> into) {
    Status read = data_.read(inode, offset, into);
    if (read.code() != Errc::corrupt) return read;
    {
      std::shared_lock gate(mirror_gate_);
      TP_RETURN_IF_ERROR(repair_from_mirror(inode, offset, into.size(), read));
    }
    return data_.read(inode, offset, into);
  }

  // On the pool, holding mirror_gate_ shared. A write into part of a block reads the rest of
  // it, which must be good first.
  Status write_data(InodeId inode, std::uint64_t offset, std::span<const std::uint8_t> data) {
    Status written = data_.write(inode, offset, data);
    if (written.code() != Errc::corrupt) return written;
    TP_RETURN_IF_ERROR(repair_from_mirror(inode, offset, data.size(), written));
    return data_.write(inode, offset, data);
  }

  // Holding mirror_gate_ shared: `failure` (a checksum mismatch in the range) is returned
  // unless the mirror's copy of the range put every bad block back.
  Status repair_from_mirror(InodeId inode, std::uint64_t offset, std::uint64_t length,
                            const Status& failure) {
    options_.integrity->checksum_failures.fetch_add(1);
    if (!mirror_) {
      spdlog::error("inode {}: no mirror to repair the data at offset {} from", inode, offset);
      return failure;
    }
    const std::uint64_t first = offset / internal::kChecksumBlock * internal::kChecksumBlock;
    const std::uint64_t end = (offset + length + internal::kChecksumBlock - 1) /
                              internal::kChecksumBlock * internal::kChecksumBlock;
    std::uint64_t repaired = 0;
    for (std::uint64_t at = first; at < end; at += kCopyChunkBytes) {
      const auto piece =
          static_cast<std::uint32_t>(std::min<std::uint64_t>(kCopyChunkBytes, end - at));
      auto good =
          mirror_->fetch(MirrorMethod::read, internal::encode_mirror_range({inode, at, piece}));
      if (!good.ok() || good->size() != piece) {
        spdlog::error(
            "inode {}: the mirror's copy of offsets {}..{} could not be read to repair "
            "this node's: {}",
            inode, at, at + piece, good.ok() ? "short answer" : good.status().to_string());
        return failure;
      }
      TP_ASSIGN_OR_RETURN(std::uint64_t put_back, data_.repair(inode, at, *good));
      repaired += put_back;
    }
    options_.integrity->checksum_repairs.fetch_add(repaired);
    spdlog::warn("inode {}: put back {} block(s) between offsets {} and {} from the mirror's copy",
                 inode, repaired, first, end);
    return {};
  }

  std::int64_t now_ns() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_.now().time_since_epoch())
        .count();
  }

  // --- everything below runs on the shard thread ---

  // Sends the mirror the database as committed and every data file as on disk — all of it,
  // not only up to each inode's size: a write whose data is down but whose size update has not
  // run yet must find its data on the mirror when the update arrives there.
  Status copy_whole_shard(Database& db, MirrorTarget& mirror) {
    spdlog::info("shard: sending a whole copy to the new mirror");
    TP_RETURN_IF_ERROR(mirror.call(MirrorMethod::copy_begin, {}));
    const std::string image = options_.data_dir + internal::kShardDatabasePath + ".copy";
    std::filesystem::remove(image);
    TP_RETURN_IF_ERROR(db.prepare("VACUUM INTO CAST(? AS TEXT)").bind(1, std::string_view(image)).run());
    Status sent = send_file(image, mirror);
    std::filesystem::remove(image);
    TP_RETURN_IF_ERROR(sent);
    TP_ASSIGN_OR_RETURN(std::vector<InodeId> inodes, data_.list());
    std::vector<std::uint8_t> chunk(kCopyChunkBytes);
    std::uint64_t bytes = 0;
    for (InodeId inode : inodes) {
      TP_ASSIGN_OR_RETURN(auto extents, data_.extents(inode));
      for (const auto& [start, length] : extents) {
        for (std::uint64_t done = 0; done < length; done += chunk.size()) {
          auto piece = std::span(chunk).first(std::min<std::uint64_t>(chunk.size(), length - done));
          TP_RETURN_IF_ERROR(data_.read(inode, start + done, piece));
          TP_RETURN_IF_ERROR(mirror.call(
              MirrorMethod::copy_data,
              internal::encode_mirror_extent({inode, start + done, false, piece})));
          bytes += piece.size();
        }
      }
    }
    TP_RETURN_IF_ERROR(mirror.call(MirrorMethod::copy_end, {}));
    spdlog::info("shard: the mirror holds a whole copy ({} data files, {} bytes of data)",
                 inodes.size(), bytes);
    return {};
  }

  static Status send_file(const std::string& path, MirrorTarget& mirror) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return error(Errc::io_error, "cannot read " + path);
    std::vector<std::uint8_t> chunk(kCopyChunkBytes);
    std::uint64_t offset = 0;
    while (in) {
      in.read(reinterpret_cast<char*>(chunk.data()), static_cast<std::streamsize>(chunk.size()));
      const auto got = static_cast<std::size_t>(in.gcount());
      if (got == 0) break;
      TP_RETURN_IF_ERROR(mirror.call(
          MirrorMethod::copy_database,
          internal::encode_mirror_extent({0, offset, false, std::span(chunk).first(got)})));
      offset += got;
    }
    if (in.bad()) return error(Errc::io_error, "cannot read " + path);
    return {};
  }

  Result<Attributes> load(Database& db, InodeId inode) {
    auto row = db.prepare(
        "SELECT ino, generation, type, mode, nlink, uid, gid, size, rdev_major, rdev_minor, "
        "atime, mtime, ctime, birth FROM inodes WHERE ino = ?");
    row.bind(1, inode);
    if (!row.next_row()) {
      TP_RETURN_IF_ERROR(row.status());
      return error(Errc::stale, "no inode " + std::to_string(inode));
    }
    Attributes a = attributes_from_row(row);
    overlay_memory_state(a);
    return a;
  }

  // Applies what UNSTABLE writes and reads changed but the database does not hold yet.
  void overlay_memory_state(Attributes& a) const {
    if (auto it = dirty_.find(a.inode); it != dirty_.end()) {
      a.size = a.used = it->second.size;
      a.mtime_ns = it->second.mtime_ns;
      a.ctime_ns = it->second.ctime_ns;
    }
    if (auto it = pending_atimes_.find(a.inode); it != pending_atimes_.end()) {
      a.atime_ns = it->second;
    }
  }

  Result<Attributes> load_and_remember(Database& db, InodeId inode) {
    auto a = load(db, inode);
    if (a.ok()) remember(*a);
    return a;
  }

  Result<Attributes> load_directory(Database& db, InodeId inode) {
    TP_ASSIGN_OR_RETURN(Attributes a, load(db, inode));
    if (a.type != FileType::directory) return error(Errc::not_a_directory, "not a directory");
    return a;
  }

  Status save(Database& db, const Attributes& a) {
    auto stmt = db.prepare(
        "UPDATE inodes SET mode = ?, nlink = ?, uid = ?, gid = ?, size = ?, atime = ?, "
        "mtime = ?, ctime = ? WHERE ino = ?");
    stmt.bind(1, a.mode).bind(2, a.nlink).bind(3, a.uid).bind(4, a.gid).bind(5, a.size);
    stmt.bind(6, a.atime_ns).bind(7, a.mtime_ns).bind(8, a.ctime_ns).bind(9, a.inode);
    TP_RETURN_IF_ERROR(stmt.run());
    dirty_.erase(a.inode);
    pending_atimes_.erase(a.inode);
    forget(a.inode);
    return {};
  }

  // Persists what UNSTABLE writes and reads left in memory; bounded staleness, not durability.
  internal::Delivery flush_memory_state(Database& db) {
    start_catch_up();
    if (dirty_.empty() && pending_atimes_.empty()) return nullptr;
    std::vector<InodeId> inodes;
    for (auto& [inode, d] : dirty_) inodes.push_back(inode);
    for (auto& [inode, t] : pending_atimes_) inodes.push_back(inode);
    if (!db.exec("BEGIN IMMEDIATE").ok()) return nullptr;
    for (InodeId inode : inodes) {
      auto a = load(db, inode);
      if (a.ok()) {
        (void)save(db, *a);
      } else if (a.code() == Errc::stale) {
        dirty_.erase(inode);
        pending_atimes_.erase(inode);
        forget(inode);
      }
    }
    bool committed = db.exec("COMMIT").ok();
    if (!committed) (void)db.exec("ROLLBACK");
    return batch_done(committed, false);
  }

  // After a committed batch the attribute cache learns what it read and changed, and the batch's
  // changes go to the mirror (on the sync thread, in commit order). A failed commit may have
  // dropped sizes UNSTABLE writes left in memory: a new verifier makes clients resend
  // everything they have not committed, as after a restart, and the cache starts over.
  internal::Delivery batch_done(bool committed, bool changing) {
    internal::Delivery delivery;
    if (committed && recorder_) {
      auto changes = recorder_->take();
      if (!changes.ok()) {
        delivery = [failed = changes.status()] { return failed; };
      } else if (changing || !changes->empty()) {
        // Also changing operations that changed no row wait for the mirror: they may have
        // read what an earlier batch changed, and that batch's changes may not get there.
        auto outcome = std::make_shared<std::optional<Status>>();
        {
          std::lock_guard lock(undelivered_mutex_);
          undelivered_.push_back({mirror_generation_, std::move(*changes), outcome});
        }
        delivery = [this, outcome] {
          if (!*outcome) deliver_changes();
          return **outcome;
        };
      }
    }
    if (committed) {
      // Two phases, so no reader pairs one cache's new state with another's old one (a new
      // directory mtime beside its old listing): first everything the batch changed leaves
      // all three caches, then each key gets its last change if that was a put.
      drop_touched(cache_, cache_changes_);
      drop_touched(names_, name_changes_);
      drop_touched(listings_, listing_changes_);
      put_last(cache_, cache_changes_);
      put_last(names_, name_changes_);
      put_last(listings_, listing_changes_);
    } else {
      spdlog::error("a shard commit failed: changing the write verifier");
      write_verifier_ = write_verifier_.load() + (std::uint64_t{1} << 32);
      cache_.clear();
      names_.clear();
      listings_.clear();
    }
    cache_changes_.clear();
    name_changes_.clear();
    listing_changes_.clear();
    return delivery;
  }

  // On the sync thread: sends the mirror every batch's changes not sent yet, merged into one
  // message (one transaction there, one sync), and tells each batch how that went. Once a
  // message failed (and the mirror could not be dropped), every later batch fails the same
  // way until a whole copy is taken: the mirror missed changes the later ones build on.
  void deliver_changes() {
    std::vector<Undelivered> taken;
    {
      std::lock_guard lock(undelivered_mutex_);
      taken.swap(undelivered_);
    }
    std::vector<std::vector<std::uint8_t>> changes;
    std::vector<Undelivered*> current;
    std::shared_lock gate(mirror_gate_);
    for (Undelivered& batch : taken) {
      // A whole copy taken since holds these changes already (it was taken after they
      // committed), and a mirror no longer kept needs none.
      if (batch.generation != mirror_generation_) {
        *batch.outcome = Status{};
        continue;
      }
      current.push_back(&batch);
      if (!batch.changes.empty()) changes.push_back(std::move(batch.changes));
    }
    Status sent;
    if (undelivered_since_ == mirror_generation_) {
      sent = undelivered_reason_;
    } else if (!changes.empty()) {
      Result<std::vector<std::uint8_t>> merged = internal::merge_changesets(changes);
      sent = merged.ok() ? mirror_->call(MirrorMethod::changes, *merged) : merged.status();
      if (!sent.ok()) {
        undelivered_since_ = mirror_generation_;
        undelivered_reason_ = sent;
      }
    }
    for (Undelivered* batch : current) *batch->outcome = sent;
  }

  // Drops what the batch changed; what it only read keeps its entry until the puts refresh it.
  template <typename Cache, typename Changes>
  static void drop_touched(Cache& cache, const Changes& changes) {
    for (const auto& [key, value] : changes) {
      if (!value) cache.drop(key);
    }
  }

  template <typename T>
  static const T& value_to_put(const std::optional<T>& value) { return *value; }
  template <typename T>
  static const std::shared_ptr<T>& value_to_put(const std::shared_ptr<T>& value) { return value; }

  // Changes hold an optional value, or a shared_ptr (null: drop), per key in batch order.
  template <typename Cache, typename Changes>
  static void put_last(Cache& cache, const Changes& changes) {
    std::unordered_set<typename Cache::key_type, typename Cache::hasher> seen;
    for (auto it = changes.rbegin(); it != changes.rend(); ++it) {
      const auto& [key, value] = *it;
      if (!seen.insert(key).second || !value) continue;
      cache.put(key, value_to_put(value));
    }
  }
  void remember(const Attributes& a) { cache_changes_.emplace_back(a.inode, a); }
  void forget(InodeId inode) { cache_changes_.emplace_back(inode, std::nullopt); }
  void remember_entry(InodeId directory, std::string_view name, InodeId inode) {
    name_changes_.push_back({{directory, std::string(name)}, inode});
  }
  void forget_entry(InodeId directory, std::string_view name) {
    name_changes_.push_back({{directory, std::string(name)}, std::nullopt});
    listing_changes_.emplace_back(directory, nullptr);
  }

  // A read moves atime only when it is older than the grace period, so reads do not become
  // metadata writes; the new atime is persisted with the next flush.
  std::uint64_t truncation_count(InodeId inode) const {
    return truncations_[inode % kTruncationSlots].load();
  }
  Status truncate_data(InodeId inode, std::uint64_t size) {
    truncations_[inode % kTruncationSlots].fetch_add(1);
    std::shared_lock slot(move_slot(inode));
    const Where where = where_of(inode);
    if (where.moving_to) TP_RETURN_IF_ERROR(pools_->truncate(*where.moving_to, inode, size));
    if (where.placed) return pools_->truncate(*where.placed, inode, size);
    TP_RETURN_IF_ERROR(data_.truncate(inode, size));
    if (!mirror_) return {};
    return mirror_->call(MirrorMethod::truncate, internal::encode_mirror_inode({inode, size}));
  }

  // After the commit that removed the inode, so a failure here leaves only an orphan file.
  void remove_data(InodeId inode) {
    Where where;
    {
      std::unique_lock lock(placement_mutex_);
      if (auto placed = placed_.find(inode); placed != placed_.end()) {
        where.placed = placed->second;
        placed_.erase(placed);
      }
      erase_behind(inode);
      if (auto moving = moving_to_.find(inode); moving != moving_to_.end()) {
        where.moving_to = moving->second;
        // A move under way forgets its target itself; one a crash cut short is forgotten here.
        if (!in_move_.contains(inode)) moving_to_.erase(moving);
      }
      note_placements();
    }
    if (!where.placed && !where.moving_to) {
      std::shared_lock gate(mirror_gate_);
      return remove_shard_data(inode);
    }
    // Calls to the pool's nodes go on the store's threads: the shard thread never waits on them.
    asio::post(pool_, [this, inode, where] {
      std::shared_lock gate(mirror_gate_);
      std::shared_lock slot(move_slot(inode));
      if (where.moving_to) {
        note_units_left(inode, where.moving_to->pool, pools_->remove(*where.moving_to, inode));
      }
      if (where.placed) {
        note_units_left(inode, where.placed->pool, pools_->remove(*where.placed, inode));
      } else {
        remove_shard_data(inode);
      }
    });
  }

  // The shard's own copy of the file's data, on the home and its mirror. Holding mirror_gate_
  // shared (off the shard thread, mirror_ is read only so).
  void remove_shard_data(InodeId inode) {
    data_.remove(inode);
    if (!mirror_) return;
    if (Status s = mirror_->call(MirrorMethod::remove, internal::encode_mirror_inode({inode}));
        !s.ok()) {
      spdlog::warn("the mirror may keep the data of removed inode {}: {}", inode, s.to_string());
    }
  }

  bool atime_due(const Attributes& a) const {
    return atime_enabled_.load(std::memory_order_relaxed) &&
           now_ns() - a.atime_ns >= atime_grace_ns_.load(std::memory_order_relaxed);
  }

  void note_access(const Attributes& a) {
    if (atime_due(a)) {
      std::int64_t now = now_ns();
      pending_atimes_[a.inode] = now;
      forget(a.inode);
    }
  }

  std::optional<InodeId> find_entry(Database& db, InodeId directory, std::string_view name) {
    auto row = db.prepare("SELECT ino FROM dirents WHERE dir = ? AND name = ?");
    row.bind(1, directory).bind(2, name);
    if (!row.next_row()) return std::nullopt;
    return static_cast<InodeId>(row.int64(0));
  }

  bool has_entries(Database& db, InodeId directory) {
    auto row = db.prepare("SELECT 1 FROM dirents WHERE dir = ? LIMIT 1");
    row.bind(1, directory);
    return row.next_row();
  }

  // Where the policy that matches a new regular file wants its data: a node pool whose every
  // node is up now (else the file starts with its shard, and the SmartPools job moves it).
  std::optional<Placement> placement_for_new_file(Database& db, InodeId directory,
                                                  const std::string& name,
                                                  const Attributes& object) {
    if (!options_.placement || !pools_ || !options_.placement->places_any()) return std::nullopt;
    Result<std::string> path = path_of(db, directory);
    if (!path.ok()) return std::nullopt;
    const std::optional<PoolChoice> choice =
        options_.placement->place(NewFile{*path + "/" + name, object.uid, object.birth_ns});
    if (!choice || choice->pool == kWithShard || choice->protection == 0 ||
        choice->protection > kMaxProtection) {
      return std::nullopt;
    }
    Placement placed{choice->pool, choice->protection, options_.stripe_unit_bytes,
                     pools_->nodes_of(choice->pool)};
    // Without the pool's lost nodes, fewer copies than the pool can keep: the shard's two.
    const std::size_t pool_nodes = placed.nodes.size() + pools_->nodes_left_out(choice->pool);
    if (std::min<std::size_t>(placed.copies, placed.nodes.size()) <
        std::min<std::size_t>(placed.copies, pool_nodes)) {
      return std::nullopt;
    }
    if (placed.nodes.empty() || placed.nodes.size() > kMaxPoolNodes ||
        !std::all_of(placed.nodes.begin(), placed.nodes.end(),
                     [this](std::uint64_t node) { return pools_->is_up(node); })) {
      return std::nullopt;
    }
    return placed;
  }

  // The entry naming `inode`: its directory and name (its first, by cookie, when it has several).
  struct Entry {
    InodeId directory = 0;
    std::string name;
  };
  Result<Entry> entry_of(Database& db, InodeId inode) {
    auto row = db.prepare("SELECT dir, name FROM dirents WHERE ino = ? ORDER BY cookie LIMIT 1");
    row.bind(1, inode);
    if (!row.next_row()) return error(Errc::stale, "no entry names inode " + std::to_string(inode));
    return Entry{static_cast<InodeId>(row.int64(0)), row.blob(1)};
  }

  // The path of a file, "/ifs/..."; `directories` keeps the paths of the directories worked out
  // so far.
  Result<std::string> path_of_file(Database& db, InodeId file,
                                   std::unordered_map<InodeId, std::string>& directories) {
    TP_ASSIGN_OR_RETURN(Entry entry, entry_of(db, file));
    auto known = directories.find(entry.directory);
    if (known == directories.end()) {
      TP_ASSIGN_OR_RETURN(std::string path, path_of(db, entry.directory));
      known = directories.emplace(entry.directory, std::move(path)).first;
    }
    std::string path = known->second + "/" + entry.name;
    if (path.size() > kMaxPathBytes) return error(Errc::name_too_long, "path too long");
    return path;
  }

  // The path of a directory, "/ifs/...". Every directory is in this shard while the namespace
  // has one shard (issue 4 spreads them).
  Result<std::string> path_of(Database& db, InodeId directory) {
    std::vector<std::string> names;
    for (InodeId at = directory; at != kRootInode;) {
      if (names.size() >= kMaxPathDepth) return error(Errc::name_too_long, "path too deep");
      TP_ASSIGN_OR_RETURN(Entry entry, entry_of(db, at));
      names.push_back(std::move(entry.name));
      at = entry.directory;
    }
    std::string path = "/ifs";
    for (auto name = names.rbegin(); name != names.rend(); ++name) {
      path += "/" + *name;
      if (path.size() > kMaxPathBytes) return error(Errc::name_too_long, "path too long");
    }
    return path;
  }

  // May be another shard's.
  Result<InodeId> parent_of(Database& db, InodeId directory) {
    if (directory == kRootInode) return kRootInode;
    auto row = db.prepare("SELECT parent FROM inodes WHERE ino = ?");
    row.bind(1, directory);
    if (row.next_row() && !row.is_null(0)) return static_cast<InodeId>(row.int64(0));
    TP_RETURN_IF_ERROR(row.status());
    TP_ASSIGN_OR_RETURN(Entry entry, entry_of(db, directory));
    return entry.directory;
  }

  // Every change of an entry made here goes through add_entry or remove_entry, which refuse
  // what a change across shards holds; that change's own commit goes around them.
  Status add_entry(Database& db, InodeId directory, std::string_view name, InodeId inode) {
    TP_RETURN_IF_ERROR(check_entry_not_held(directory, name));
    if (sealed_.contains(directory)) return held_elsewhere();
    return insert_entry(db, directory, name, inode);
  }
  Status remove_entry(Database& db, InodeId directory, std::string_view name) {
    TP_RETURN_IF_ERROR(check_entry_not_held(directory, name));
    return delete_entry(db, directory, name);
  }
  Status insert_entry(Database& db, InodeId directory, std::string_view name, InodeId inode) {
    auto stmt = db.prepare("INSERT INTO dirents(cookie, dir, name, ino) VALUES(?, ?, ?, ?)");
    stmt.bind(1, next_cookie_++).bind(2, directory).bind(3, name).bind(4, inode);
    listing_changes_.emplace_back(directory, nullptr);
    return stmt.run();
  }
  Status delete_entry(Database& db, InodeId directory, std::string_view name) {
    auto stmt = db.prepare("DELETE FROM dirents WHERE dir = ? AND name = ?");
    stmt.bind(1, directory).bind(2, name);
    forget_entry(directory, name);
    return stmt.run();
  }

  // Inode numbers and cookies are handed out from ranges that `meta` holds durably before any
  // number in them goes out, so none is handed out twice, even after a crash lost the change
  // that used it: a client may have seen that change (reads complete when their batch commits,
  // before it is durable), and with it the file's handle or a READDIR cookie. Each range is
  // claimed well ahead of use, in the transaction of an operation that takes a number; it
  // counts once durable (on this node and the mirror).
  static constexpr std::uint64_t kNumbersAhead = 1 << 16;
  enum class Counter { inode, cookie };

  // In every changing operation that takes an inode number or a cookie (at most one of each),
  // before it takes them. Unavailable (retry later) in the unlikely case that the claimed range
  // ran out before its claim was durable.
  Status reserve_numbers(Database& db, AfterCommit& after) {
    if (next_inode_ >= inode_limit_.load() || next_cookie_ >= cookie_limit_.load()) {
      return error(Errc::unavailable, "inode numbers are being reserved; retry shortly");
    }
    TP_RETURN_IF_ERROR(claim_ahead(db, after, Counter::inode, next_inode_, inode_limit_));
    return claim_ahead(db, after, Counter::cookie, next_cookie_, cookie_limit_);
  }

  Status claim_ahead(Database& db, AfterCommit& after, Counter counter, std::uint64_t next,
                     std::atomic<std::uint64_t>& limit) {
    if (limit.load() - next > kNumbersAhead) return {};
    const std::uint64_t claimed = next + 2 * kNumbersAhead;
    TP_RETURN_IF_ERROR(raise_counter(db, counter, claimed));
    after.durable.push_back([&limit, claimed] {
      std::uint64_t now = limit.load();
      while (now < claimed && !limit.compare_exchange_weak(now, claimed)) {
      }
    });
    return {};
  }

  // meta's next_inode or next_cookie, raised to `value` if it is below.
  static Status raise_counter(Database& db, Counter counter, std::uint64_t value) {
    auto stmt = db.prepare(counter == Counter::inode
                               ? "UPDATE meta SET value = ?1 WHERE key = 'next_inode' AND value < ?1"
                               : "UPDATE meta SET value = ?1 WHERE key = 'next_cookie' AND value < ?1");
    stmt.bind(1, value);
    return stmt.run();
  }

  // Regular files only; the owner may read and write whatever the mode bits, as a local
  // process that opened the file before changing its mode could (knfsd does the same).

  // A regular file's layouts row; invalid_argument for any other type.
  Result<Layout> load_layout(Database& db, InodeId inode) {
    TP_ASSIGN_OR_RETURN(Attributes a, load(db, inode));
    if (a.type != FileType::regular) return error(Errc::invalid_argument, "not a regular file");
    auto row = db.prepare(
        "SELECT l.pool, l.stripe_unit, l.protection, l.access_pattern, l.nodes, m.pool, "
        "m.protection, m.nodes, m.copied FROM layouts l LEFT JOIN moves m ON m.ino = l.ino "
        "WHERE l.ino = ?");
    row.bind(1, inode);
    if (!row.next_row()) {
      return error(Errc::corrupt, "file " + std::to_string(inode) + " has no layout");
    }
    return Layout{row.blob(0),
                  static_cast<std::uint32_t>(row.int64(1)),
                  static_cast<std::uint32_t>(row.int64(2)),
                  row.blob(3),
                  nodes_from_text(row.blob(4)),
                  row.blob(5),
                  static_cast<std::uint32_t>(row.int64(6)),
                  nodes_from_text(row.blob(7)),
                  static_cast<std::uint64_t>(row.int64(8))};
  }

  Status check_setattr(const Attributes& a, const AttributeChanges& c, const Caller& caller) {
    bool root = caller.uid == 0;
    bool owner = caller.uid == a.uid;
    if (c.mode && !root && !owner) return error(Errc::not_permitted, "only the owner may chmod");
    if (c.uid && *c.uid != a.uid && !root) return error(Errc::not_permitted, "only root may chown");
    if (c.gid && *c.gid != a.gid && !root && !(owner && in_group(caller, *c.gid))) {
      return error(Errc::not_permitted, "only the owner may change the group to one of theirs");
    }
    if (c.size) {
      if (a.type == FileType::directory) return error(Errc::is_a_directory, "is a directory");
      if (a.type != FileType::regular) return error(Errc::invalid_argument, "not a regular file");
      if (!owner && !permits(a, caller, kMayWrite)) {
        return error(Errc::access_denied, "no write permission");
      }
    }
    bool explicit_time = c.atime == SetTime::client_time || c.mtime == SetTime::client_time;
    bool any_time = c.atime != SetTime::keep || c.mtime != SetTime::keep;
    if (explicit_time && !root && !owner) {
      return error(Errc::not_permitted, "only the owner may set times");
    }
    if (any_time && !root && !owner && !permits(a, caller, kMayWrite)) {
      return error(Errc::access_denied, "no write permission");
    }
    return {};
  }

  Attributes new_attributes(const Attributes& dir, FileType type, const Caller& caller,
                            const AttributeChanges& initial, std::uint32_t default_mode) {
    Attributes a = new_object(dir, type, caller, initial, default_mode, now_ns());
    a.inode = next_inode_++;
    a.generation = static_cast<std::uint32_t>(random_());
    a.nlink = 1;
    return a;
  }

  // Only root or a member of the file's group may make it setgid to that group.
  static void clear_foreign_setgid(Attributes& a, const Caller& caller) {
    if (a.type == FileType::regular && caller.uid != 0 && !in_group(caller, a.gid)) {
      a.mode &= ~kSetgid;
    }
  }

  // A new regular file's data is kept with the shard, or in `placed`.
  Result<NewObject> add_object(Database& db, const Attributes& dir, const std::string& name,
                               const Attributes& object, std::string_view symlink_target,
                               const std::optional<CreateVerifier>& verifier,
                               const std::optional<Placement>& placed = std::nullopt) {
    TP_RETURN_IF_ERROR(insert_inode(db, object, symlink_target, verifier, dir.inode));
    if (object.type == FileType::regular) {
      auto layout = db.prepare(
          "INSERT INTO layouts(ino, pool, stripe_unit, protection, nodes) VALUES(?, ?, ?, ?, ?)");
      layout.bind(1, object.inode).bind(2, placed ? placed->pool : std::string(kWithShard));
      layout.bind(3, options_.stripe_unit_bytes);
      layout.bind(4, placed ? placed->copies : kDefaultProtection);
      layout.bind(5, placed ? nodes_text(placed->nodes) : std::string());
      TP_RETURN_IF_ERROR(layout.run());
    }
    TP_RETURN_IF_ERROR(add_entry(db, dir.inode, name, object.inode));
    Attributes dir_after = dir;
    dir_after.mtime_ns = dir_after.ctime_ns = object.ctime_ns;
    if (object.type == FileType::directory) ++dir_after.nlink;
    TP_RETURN_IF_ERROR(save(db, dir_after));
    return NewObject{object, wcc_of(dir, dir_after)};
  }

  // A directory's `parent` is kept (its ".."); other objects' is not.
  Status insert_inode(Database& db, const Attributes& object, std::string_view symlink_target,
                      const std::optional<CreateVerifier>& verifier, InodeId parent) {
    auto insert = db.prepare(
        "INSERT INTO inodes(ino, generation, type, mode, nlink, uid, gid, size, rdev_major, "
        "rdev_minor, atime, mtime, ctime, birth, symlink_target, create_verifier, parent) "
        "VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    insert.bind(1, object.inode).bind(2, object.generation);
    insert.bind(3, static_cast<std::uint32_t>(object.type)).bind(4, object.mode);
    insert.bind(5, object.nlink).bind(6, object.uid).bind(7, object.gid).bind(8, object.size);
    insert.bind(9, object.rdev_major).bind(10, object.rdev_minor).bind(11, object.atime_ns);
    insert.bind(12, object.mtime_ns).bind(13, object.ctime_ns).bind(14, object.birth_ns);
    if (object.type == FileType::symlink) {
      insert.bind(15, symlink_target);
    } else {
      insert.bind_null(15);
    }
    if (verifier) {
      insert.bind(16, std::span<const std::uint8_t>(*verifier));
    } else {
      insert.bind_null(16);
    }
    if (object.type == FileType::directory) {
      insert.bind(17, parent);
    } else {
      insert.bind_null(17);
    }
    return insert.run();
  }

  Status set_parent(Database& db, InodeId directory, InodeId parent) {
    auto update = db.prepare("UPDATE inodes SET parent = ? WHERE ino = ?");
    TP_RETURN_IF_ERROR(update.bind(1, parent).bind(2, directory).run());
    listing_changes_.emplace_back(directory, nullptr);  // its ".."
    return {};
  }

  Status make_root(Database& db) {
    Attributes root;
    root.inode = kRootInode;
    root.generation = 1;
    root.type = FileType::directory;
    // /ifs is open to everyone, as OneFS ships it; administrators narrow it with exports.
    root.mode = 0777;
    root.nlink = 2;
    root.atime_ns = root.mtime_ns = root.ctime_ns = root.birth_ns = now_ns();
    if (load(db, kRootInode).ok()) return {};
    return insert_inode(db, root, {}, std::nullopt, kRootInode);
  }

  Result<NewObject> create_existing(Database& db, const Attributes& dir, InodeId existing,
                                    CreateMode mode, const AttributeChanges& initial,
                                    const CreateVerifier& verifier, const Caller& caller) {
    if (!permits(dir, caller, kMayExecute)) {
      return error(Errc::access_denied, "no search permission on the directory");
    }
    TP_ASSIGN_OR_RETURN(Attributes object, load(db, existing));
    if (mode == CreateMode::guarded) return error(Errc::already_exists, "file exists");
    if (mode == CreateMode::exclusive) {
      auto row = db.prepare("SELECT create_verifier FROM inodes WHERE ino = ?");
      row.bind(1, existing);
      if (row.next_row() && !row.is_null(0) &&
          row.blob(0) == std::string(verifier.begin(), verifier.end())) {
        return NewObject{object, wcc_of(dir, dir)};  // a retransmitted exclusive create
      }
      return error(Errc::already_exists, "file exists");
    }
    if (object.type != FileType::regular) return error(Errc::already_exists, "exists");
    if (initial.size && *initial.size != object.size) {
      TP_RETURN_IF_ERROR(check_data_access(object, caller, kMayWrite));
      TP_RETURN_IF_ERROR(truncate_data(existing, *initial.size));
      Attributes after = object;
      after.size = after.used = *initial.size;
      after.mtime_ns = after.ctime_ns = now_ns();
      TP_RETURN_IF_ERROR(save(db, after));
      object = after;
    }
    return NewObject{object, wcc_of(dir, dir)};
  }

  // Removes name -> victim from dir (updating dir in place) and frees the victim when its last
  // link goes; its data file is deleted only after the transaction is durable.
  Status unlink_entry(Database& db, Attributes& dir, const std::string& name,
                      const Attributes& victim, AfterCommit& after) {
    TP_RETURN_IF_ERROR(check_inode_not_held(victim.inode));
    TP_RETURN_IF_ERROR(remove_entry(db, dir.inode, name));
    std::int64_t now = now_ns();
    dir.mtime_ns = dir.ctime_ns = now;
    bool is_directory = victim.type == FileType::directory;
    if (is_directory) --dir.nlink;
    TP_RETURN_IF_ERROR(save(db, dir));
    std::uint32_t links = is_directory ? 0 : victim.nlink - 1;
    if (links > 0) {
      Attributes v = victim;
      v.nlink = links;
      v.ctime_ns = now;
      return save(db, v);
    }
    return drop_inode(db, victim, after);
  }

  // The inode goes, and once that is durable, a regular file's data.
  Status drop_inode(Database& db, const Attributes& victim, AfterCommit& after) {
    for (const char* sql :
         {"DELETE FROM inodes WHERE ino = ?", "DELETE FROM layouts WHERE ino = ?",
          "DELETE FROM moves WHERE ino = ?", "DELETE FROM copies_behind WHERE ino = ?"}) {
      auto stmt = db.prepare(sql);
      stmt.bind(1, victim.inode);
      TP_RETURN_IF_ERROR(stmt.run());
    }
    InodeId inode = victim.inode;
    dirty_.erase(inode);
    pending_atimes_.erase(inode);
    forget(inode);
    if (victim.type == FileType::regular) {
      const Where where = where_of(inode);
      if (where.placed) TP_RETURN_IF_ERROR(note_down_units_left(db, after, inode, *where.placed));
      if (where.moving_to) {
        TP_RETURN_IF_ERROR(note_down_units_left(db, after, inode, *where.moving_to));
      }
      after.durable.push_back([this, inode] { remove_data(inode); });
    }
    return {};
  }

  Result<RenameResult> rename_in(Database& db, AfterCommit& after, InodeId from_directory,
                                 const std::string& from_name, InodeId to_directory,
                                 const std::string& to_name, const Caller& caller) {
    TP_ASSIGN_OR_RETURN(Attributes from_dir, load_directory(db, from_directory));
    TP_ASSIGN_OR_RETURN(Attributes to_dir, load_directory(db, to_directory));
    if (is_dot_or_dotdot(from_name) || is_dot_or_dotdot(to_name)) {
      return error(Errc::invalid_argument, "cannot rename '.' or '..'");
    }
    if (from_name.size() > kMaxNameBytes) return error(Errc::name_too_long, "name too long");
    TP_RETURN_IF_ERROR(validate_new_name(to_name));
    auto source_inode = find_entry(db, from_directory, from_name);
    if (!source_inode) return error(Errc::not_found, "no entry '" + from_name + "'");
    if (is_foreign(*source_inode)) return elsewhere(*source_inode);
    TP_ASSIGN_OR_RETURN(Attributes source, load(db, *source_inode));
    TP_RETURN_IF_ERROR(check_may_delete(from_dir, source, caller));
    TP_RETURN_IF_ERROR(check_may_add(to_dir, caller));
    bool moving_directory = source.type == FileType::directory;
    if (moving_directory && from_directory != to_directory) {
      // Its ".." changes, so it must be writable, and it must not move into its own subtree.
      if (!permits(source, caller, kMayWrite)) {
        return error(Errc::access_denied, "no write permission on the moved directory");
      }
      for (InodeId up = to_directory;; ) {
        if (up == source.inode) {
          return error(Errc::invalid_argument, "cannot move a directory into itself");
        }
        if (up == kRootInode) break;
        TP_ASSIGN_OR_RETURN(up, parent_of(db, up));
        if (is_foreign(up)) return elsewhere(up);  // the walk up goes through another shard
      }
      TP_RETURN_IF_ERROR(check_inode_not_held(source.inode));
    }
    std::optional<Attributes> replaced;
    if (auto target_inode = find_entry(db, to_directory, to_name)) {
      if (*target_inode == source.inode) {
        return RenameResult{wcc_of(from_dir, from_dir), wcc_of(to_dir, to_dir)};
      }
      if (is_foreign(*target_inode)) return elsewhere(*target_inode);
      TP_ASSIGN_OR_RETURN(Attributes target, load(db, *target_inode));
      bool target_is_directory = target.type == FileType::directory;
      if (moving_directory && !target_is_directory) {
        return error(Errc::not_a_directory, "cannot replace a file with a directory");
      }
      if (!moving_directory && target_is_directory) {
        return error(Errc::is_a_directory, "cannot replace a directory with a file");
      }
      if (target_is_directory && has_entries(db, target.inode)) {
        return error(Errc::not_empty, "target directory is not empty");
      }
      TP_RETURN_IF_ERROR(check_may_delete(to_dir, target, caller));
      replaced = target;
    }
    std::int64_t now = now_ns();
    Attributes to_after = to_dir;
    TP_RETURN_IF_ERROR(check_entry_not_held(from_directory, from_name));
    TP_RETURN_IF_ERROR(check_entry_not_held(to_directory, to_name));
    if (sealed_.contains(to_directory)) return held_elsewhere();
    if (replaced) TP_RETURN_IF_ERROR(unlink_entry(db, to_after, to_name, *replaced, after));
    auto move = db.prepare("UPDATE dirents SET dir = ?, name = ? WHERE dir = ? AND name = ?");
    move.bind(1, to_directory).bind(2, std::string_view(to_name));
    move.bind(3, from_directory).bind(4, std::string_view(from_name));
    TP_RETURN_IF_ERROR(move.run());
    forget_entry(from_directory, from_name);
    forget_entry(to_directory, to_name);
    if (moving_directory && from_directory != to_directory) {
      TP_RETURN_IF_ERROR(set_parent(db, source.inode, to_directory));
    }
    // The same directory on both sides: one set of attributes, updated once.
    Attributes from_after = from_directory == to_directory ? to_after : from_dir;
    from_after.mtime_ns = from_after.ctime_ns = now;
    if (moving_directory && from_directory != to_directory) {
      --from_after.nlink;
      ++to_after.nlink;
    }
    to_after.mtime_ns = to_after.ctime_ns = now;
    if (from_directory == to_directory) {
      TP_RETURN_IF_ERROR(save(db, from_after));
      to_after = from_after;
    } else {
      TP_RETURN_IF_ERROR(save(db, from_after));
      TP_RETURN_IF_ERROR(save(db, to_after));
    }
    Attributes moved = source;
    moved.ctime_ns = now;
    TP_RETURN_IF_ERROR(save(db, moved));
    return RenameResult{wcc_of(from_dir, from_after), wcc_of(to_dir, to_after)};
  }

  Result<DirectoryPage> list_directory(Database& db, const Attributes& dir, std::uint64_t cookie,
                                       std::uint64_t verifier, std::uint32_t max_entries,
                                       bool with_attributes) {
    DirectoryPage page;
    page.directory = dir;
    page.cookie_verifier = static_cast<std::uint64_t>(dir.birth_ns);
    if (cookie != 0 && verifier != 0 && verifier != page.cookie_verifier) {
      return error(Errc::bad_cookie, "cookie verifier does not match");
    }
    auto add = [&](InodeId inode, std::string name, std::uint64_t entry_cookie) -> Status {
      DirectoryEntry e{inode, std::move(name), entry_cookie, std::nullopt};
      if (with_attributes && !is_foreign(inode)) {
        TP_ASSIGN_OR_RETURN(e.attributes, load(db, inode));
      }
      page.entries.push_back(std::move(e));
      return {};
    };
    if (cookie == 0 && max_entries > 0) TP_RETURN_IF_ERROR(add(dir.inode, ".", 1));
    if (cookie <= 1 && page.entries.size() < max_entries) {
      TP_ASSIGN_OR_RETURN(InodeId parent, parent_of(db, dir.inode));
      TP_RETURN_IF_ERROR(add(parent, "..", 2));
    }
    std::uint64_t after_row = cookie >= kFirstEntryCookie ? cookie - 2 : 0;
    // One query returns the entries with their inodes' attributes (READDIRPLUS) in order;
    // none for an inode of another shard.
    auto rows = db.prepare(
        "SELECT i.ino, i.generation, i.type, i.mode, i.nlink, i.uid, i.gid, i.size, "
        "i.rdev_major, i.rdev_minor, i.atime, i.mtime, i.ctime, i.birth, d.cookie, d.name, d.ino "
        "FROM dirents d LEFT JOIN inodes i ON i.ino = d.ino WHERE d.dir = ? AND d.cookie > ? "
        "ORDER BY d.cookie LIMIT ?");
    std::uint32_t room = max_entries - static_cast<std::uint32_t>(page.entries.size());
    rows.bind(1, dir.inode).bind(2, after_row).bind(3, room + 1);
    std::uint32_t seen = 0;
    while (rows.next_row()) {
      if (seen++ == room) break;
      if (rows.is_null(0)) {
        const auto inode = static_cast<InodeId>(rows.int64(16));
        if (is_foreign(inode)) {
          page.entries.push_back(
              {inode, rows.blob(15), static_cast<std::uint64_t>(rows.int64(14)) + 2, std::nullopt});
        }
        continue;
      }
      Attributes a = attributes_from_row(rows);
      overlay_memory_state(a);
      DirectoryEntry e{a.inode, rows.blob(15), static_cast<std::uint64_t>(rows.int64(14)) + 2,
                       std::nullopt};
      if (with_attributes) {
        e.attributes = a;
        remember(a);
      }
      page.entries.push_back(std::move(e));
    }
    TP_RETURN_IF_ERROR(rows.status());
    // The end is reached only once "." and ".." went out too.
    page.eof = seen <= room && (cookie >= 2 || page.entries.size() >= 2 - cookie);
    if (cookie == 0 && page.eof && page.entries.size() >= 2) {
      auto listing = std::make_shared<internal::Listing>();
      listing->parent = page.entries[1].inode;
      for (std::size_t i = 2; i < page.entries.size(); ++i) {
        const auto& e = page.entries[i];
        listing->entries.push_back({e.inode, e.name, e.cookie});
      }
      listing_changes_.emplace_back(dir.inode, std::move(listing));
    }
    return page;
  }

  // The page list_directory would return, built from a cached listing and cached attributes;
  // nothing when an attribute it needs is not cached.
  std::optional<Result<DirectoryPage>> page_from_cache(const Attributes& dir,
                                                       const internal::Listing& listing,
                                                       std::uint64_t cookie,
                                                       std::uint64_t verifier,
                                                       std::uint32_t max_entries,
                                                       bool with_attributes) const {
    DirectoryPage page;
    page.directory = dir;
    page.cookie_verifier = static_cast<std::uint64_t>(dir.birth_ns);
    if (cookie != 0 && verifier != 0 && verifier != page.cookie_verifier) {
      return Result<DirectoryPage>(error(Errc::bad_cookie, "cookie verifier does not match"));
    }
    auto add = [&](InodeId inode, std::string_view name, std::uint64_t entry_cookie) {
      DirectoryEntry e{inode, std::string(name), entry_cookie, std::nullopt};
      if (with_attributes) {
        e.attributes = cache_.find(inode);
        if (!e.attributes) return false;
      }
      page.entries.push_back(std::move(e));
      return true;
    };
    if (cookie == 0 && max_entries > 0 && !add(dir.inode, ".", 1)) return std::nullopt;
    if (cookie <= 1 && page.entries.size() < max_entries && !add(listing.parent, "..", 2)) {
      return std::nullopt;
    }
    auto it = std::upper_bound(listing.entries.begin(), listing.entries.end(), cookie,
                               [](std::uint64_t c, const auto& e) { return c < e.cookie; });
    for (; it != listing.entries.end() && page.entries.size() < max_entries; ++it) {
      if (!add(it->inode, it->name, it->cookie)) return std::nullopt;
    }
    page.eof = it == listing.entries.end() && (cookie >= 2 || page.entries.size() >= 2 - cookie);
    return Result<DirectoryPage>(std::move(page));
  }

  StoreOptions options_;
  std::atomic<bool> atime_enabled_{options_.atime_enabled};
  std::atomic<std::int64_t> atime_grace_ns_{
      std::chrono::nanoseconds(options_.atime_grace_period).count()};
  const Clock& clock_;
  internal::DataFiles data_;
  // Bytes of the L2 that READ replies hold (ReplyPin); shared with the pins, which may outlive
  // the store.
  const std::shared_ptr<std::atomic<std::uint64_t>> reply_pins_ =
      std::make_shared<std::atomic<std::uint64_t>>(0);
  // The data of files placed in node pools; null outside a cluster.
  const std::unique_ptr<PoolData> pools_;
  NamedThreadPool pool_;
  std::atomic<std::uint64_t> write_verifier_ = 0;
  std::atomic<bool> closed_ = false;

  // Set on the shard thread holding mirror_gate_ exclusively; read there, or elsewhere holding
  // it shared (data writes, which must not reach the disk while a whole copy is being taken).
  std::shared_mutex mirror_gate_;
  std::shared_ptr<MirrorTarget> mirror_;
  std::unique_ptr<internal::ChangeRecorder> recorder_;  // while mirror_ is set
  // Changes queued before a whole copy was taken for the mirror are in the copy: deliveries
  // compare the generation they were queued under with this one, which mirror_to() moves.
  std::uint64_t mirror_generation_ = 0;
  // Batches' changes committed and not sent to the mirror yet, in commit order: added on the
  // shard thread, sent on the sync thread.
  struct Undelivered {
    std::uint64_t generation;  // mirror_generation_ when they committed
    std::vector<std::uint8_t> changes;
    std::shared_ptr<std::optional<Status>> outcome;  // set by the message that carried them
  };
  std::mutex undelivered_mutex_;
  std::vector<Undelivered> undelivered_;
  // The sync thread's: the generation whose changes stopped reaching the mirror, and why.
  std::uint64_t undelivered_since_ = std::numeric_limits<std::uint64_t>::max();
  Status undelivered_reason_;

  // Owned by the shard thread once the store is open.
  std::mt19937_64 random_;
  InodeId next_inode_ = kRootInode + 1;
  std::uint64_t next_cookie_ = 1;
  // Below these, numbers are claimed durably in meta (reserve_numbers); raised on the sync
  // thread.
  std::atomic<std::uint64_t> inode_limit_ = 0;
  std::atomic<std::uint64_t> cookie_limit_ = 0;
  std::unordered_map<InodeId, DirtyAttributes> dirty_;
  std::unordered_map<InodeId, std::int64_t> pending_atimes_;
  // Changes for cache_, applied once the batch that made them committed (empty: drop).
  std::vector<std::pair<InodeId, std::optional<Attributes>>> cache_changes_;
  std::vector<std::pair<internal::EntryName, std::optional<InodeId>>> name_changes_;
  std::vector<std::pair<InodeId, std::shared_ptr<const internal::Listing>>> listing_changes_;

  // Bumped (by the shard thread) whenever a file in the slot is truncated; writes compare it
  // before and after their data goes out. Slots are shared by inodes: a collision only costs a
  // write its retry.
  std::array<std::atomic<std::uint64_t>, kTruncationSlots> truncations_{};

  // Files whose data a node pool holds, as their layouts say (loaded at open, changed after the
  // commit that moves a file), and files being moved, with where to.
  mutable std::shared_mutex placement_mutex_;
  std::unordered_map<InodeId, Placement> placed_;     // guarded by placement_mutex_
  std::unordered_map<InodeId, Placement> moving_to_;  // guarded by placement_mutex_
  std::atomic<bool> any_placement_{false};  // either map is not empty
  // Files a move is under way for (reserve_move() to release_move()); guarded by the same.
  std::unordered_set<InodeId> in_move_;
  // Copies of placed files that missed writes or syncs while their node was down, as
  // copies_behind keeps them: per file and node, the units missed, or all the node holds
  // (every_unit: the note's number, so that a catch-up forgets only what it saw). Guarded by
  // placement_mutex_, as are the notes' numbers.
  struct Behind {
    std::set<std::uint64_t> units;
    std::uint64_t every_unit = 0;
  };
  std::unordered_map<InodeId, std::map<cluster::NodeId, Behind>> behind_;
  std::uint64_t behind_notes_ = 0;
  std::atomic<bool> catching_up_ = false;  // a catch_up() is under way
  // units_left may have rows: set after one is written, cleared before a pass reads them.
  std::atomic<bool> any_units_left_ = false;
  std::atomic<std::uint64_t> units_left_here_ = 0;  // its rows
  // A row of units_left, and where clear_units_left() goes on from: on the catch-up pass only.
  struct LeftUnits {
    InodeId inode = 0;
    std::string pool;
    cluster::NodeId node = 0;
    bool operator==(const LeftUnits&) const = default;
  };
  LeftUnits units_left_after_;
  // Bumped when a move of a file in the slot begins; writes compare it before and after
  // their data goes out, as they do truncations_.
  std::array<std::atomic<std::uint64_t>, kMoveSlots> moves_{};
  // A move copies each chunk, and frees the old data, holding its file's slot exclusively;
  // every other data operation holds it shared while its bytes go to or come from a disk, so
  // none sees a layout switch half done. Slots are shared by inodes, as truncations_'s are.
  std::array<std::shared_mutex, kMoveSlots> move_slots_;

  internal::AttributeCache cache_{kCachedInodes};
  internal::NameCache names_{kCachedInodes};
  internal::ListingCache listings_{kCachedListings};

  // Owned by the shard thread: what the parts of changes across shards prepared here hold.
  Participant participant_{*this};
  std::uint64_t boot_ = 0;  // meta's boots, this store's
  std::unordered_map<TransactionId, HeldKeys> held_parts_;
  std::set<internal::EntryName> held_entries_;
  std::unordered_set<InodeId> held_inodes_;
  std::unordered_map<InodeId, int> pinned_;  // by how many parts
  std::unordered_set<InodeId> sealed_;

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

Status StoreImpl::initialize(Database& db) {
  TP_RETURN_IF_ERROR(data_.prepare());
  TP_RETURN_IF_ERROR(db.exec(internal::kShardSchema));
  TP_RETURN_IF_ERROR(
      add_column_if_missing(db, "SELECT 1 FROM pragma_table_info('layouts') WHERE name = 'nodes'",
                            "ALTER TABLE layouts ADD COLUMN nodes TEXT NOT NULL DEFAULT ''"));
  TP_RETURN_IF_ERROR(
      add_column_if_missing(db, "SELECT 1 FROM pragma_table_info('inodes') WHERE name = 'parent'",
                            "ALTER TABLE inodes ADD COLUMN parent INTEGER"));
  TP_RETURN_IF_ERROR(db.exec("BEGIN IMMEDIATE"));
  {
    // Shard 0's first number after the root's; another shard's first.
    auto counters = db.prepare(
        "INSERT OR IGNORE INTO meta(key, value) VALUES('next_inode', ?), ('next_cookie', 1), "
        "('boots', 0)");
    const InodeId first = (InodeId{options_.shard} << kShardShift) + (options_.shard == 0 ? 2 : 1);
    TP_RETURN_IF_ERROR(counters.bind(1, first).run());
  }
  TP_RETURN_IF_ERROR(db.exec("UPDATE meta SET value = value + 1 WHERE key = 'boots'"));
  {
    // meta holds how far numbers are claimed (reserve_numbers), past every one handed out;
    // databases made before claims counted inode numbers there at each create, and cookies in
    // AUTOINCREMENT's sqlite_sequence.
    auto row = db.prepare("SELECT key, value FROM meta");
    std::uint64_t boots = 0;
    while (row.next_row()) {
      std::string key = row.blob(0);
      const auto value = static_cast<std::uint64_t>(row.int64(1));
      if (key == "next_inode") next_inode_ = std::max(next_inode_, value);
      if (key == "next_cookie") next_cookie_ = std::max(next_cookie_, value);
      if (key == "boots") boots = value;
    }
    TP_RETURN_IF_ERROR(row.status());
    auto autoincrement = db.prepare(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sqlite_sequence'");
    if (autoincrement.next_row()) {
      auto sequence = db.prepare("SELECT seq FROM sqlite_sequence WHERE name = 'dirents'");
      if (sequence.next_row()) {
        next_cookie_ = std::max(next_cookie_, static_cast<std::uint64_t>(sequence.int64(0)) + 1);
      }
      TP_RETURN_IF_ERROR(sequence.status());
    }
    TP_RETURN_IF_ERROR(autoincrement.status());
    write_verifier_ = (boots << 32) ^ (random_() & 0xffffffffu);
    boot_ = boots;
  }
  // The first claims, durable with the boot count below.
  inode_limit_ = next_inode_ + 2 * kNumbersAhead;
  cookie_limit_ = next_cookie_ + 2 * kNumbersAhead;
  TP_RETURN_IF_ERROR(raise_counter(db, Counter::inode, inode_limit_));
  TP_RETURN_IF_ERROR(raise_counter(db, Counter::cookie, cookie_limit_));
  if (options_.shard == 0) TP_RETURN_IF_ERROR(make_root(db));
  {
    // What earlier boots answered their coordinators: those coordinators are gone.
    auto forget = db.prepare("DELETE FROM transactions WHERE state = ? AND boot < ?");
    TP_RETURN_IF_ERROR(forget.bind(1, kAborted).bind(2, boot_).run());
  }
  TP_RETURN_IF_ERROR(hold_prepared_parts(db));
  auto placed = db.prepare(
      "SELECT ino, pool, protection, stripe_unit, nodes FROM layouts WHERE pool != ?");
  placed.bind(1, kWithShard);
  while (placed.next_row()) {
    placed_[static_cast<InodeId>(placed.int64(0))] =
        Placement{placed.blob(1), static_cast<std::uint32_t>(placed.int64(2)),
                  static_cast<std::uint32_t>(placed.int64(3)), nodes_from_text(placed.blob(4))};
  }
  TP_RETURN_IF_ERROR(placed.status());
  // Moves a crash cut short: writes go to both copies until the move goes on or is given up.
  auto moving = db.prepare(
      "SELECT m.ino, m.pool, m.protection, l.stripe_unit, m.nodes FROM moves m "
      "JOIN layouts l ON l.ino = m.ino");
  while (moving.next_row()) {
    moving_to_[static_cast<InodeId>(moving.int64(0))] =
        Placement{moving.blob(1), static_cast<std::uint32_t>(moving.int64(2)),
                  static_cast<std::uint32_t>(moving.int64(3)), nodes_from_text(moving.blob(4))};
  }
  TP_RETURN_IF_ERROR(moving.status());
  note_placements();
  auto behind = db.prepare("SELECT ino, node, unit FROM copies_behind");
  std::vector<InodeId> gone;  // files whose data is no longer placed
  while (behind.next_row()) {
    const auto inode = static_cast<InodeId>(behind.int64(0));
    const std::int64_t unit = behind.int64(2);
    if (auto placed = placed_.find(inode); placed != placed_.end()) {
      note_behind(inode, placed->second,
                  {{static_cast<cluster::NodeId>(behind.int64(1)),
                    unit < 0 ? kEveryUnit : static_cast<std::uint64_t>(unit)}});
    } else {
      gone.push_back(inode);
    }
  }
  TP_RETURN_IF_ERROR(behind.status());
  for (InodeId inode : gone) {
    auto forget = db.prepare("DELETE FROM copies_behind WHERE ino = ?");
    TP_RETURN_IF_ERROR(forget.bind(1, inode).run());
  }
  auto left = db.prepare("SELECT count(*) FROM units_left");
  if (!left.next_row()) return left.status();
  count_units_left(left.int64(0));
  any_units_left_.store(left.int64(0) > 0);
  TP_RETURN_IF_ERROR(db.exec("COMMIT"));
  // The boot counted durably before the verifier it makes is handed out.
  return db.sync_wal();
}

}  // namespace

Status check_read_access(const Attributes& a, const Caller& caller) {
  return check_data_access(a, caller, kMayRead);
}

std::uint32_t access_granted(const Attributes& a, const Caller& caller, std::uint32_t requested) {
  return granted_access(a, caller, requested);
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
  std::error_code ec;
  std::filesystem::create_directories(options.data_dir + "/shards", ec);
  if (ec) {
    return error(Errc::io_error, "cannot create data directory " + options.data_dir + ": " +
                                     ec.message());
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
