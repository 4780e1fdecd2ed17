#include "store/internal/shard_rows.h"

#include <algorithm>
#include <charconv>
#include <unordered_set>

namespace tidepool::store::internal {
namespace {

constexpr std::size_t kCachedInodes = 128 * 1024;
constexpr std::size_t kCachedListings = 4096;
// The deepest directory whose path is worked out.
constexpr std::size_t kMaxPathDepth = 256;
// Inode numbers and cookies are handed out from ranges that `meta` holds durably before any
// number in them goes out, so none is handed out twice, even after a crash lost the change
// that used it: a client may have seen that change (reads complete when their batch commits,
// before it is durable), and with it the file's handle or a READDIR cookie. Each range is
// claimed well ahead of use, in the transaction of an operation that takes a number; it
// counts once durable (on this node and the mirror).
constexpr std::uint64_t kNumbersAhead = 1 << 16;

// Drops what the batch changed; what it only read keeps its entry until the puts refresh it.
template <typename Cache, typename Changes>
void drop_touched(Cache& cache, const Changes& changes) {
  for (const auto& [key, value] : changes) {
    if (!value) cache.drop(key);
  }
}

template <typename T>
const T& value_to_put(const std::optional<T>& value) {
  return *value;
}
template <typename T>
const std::shared_ptr<T>& value_to_put(const std::shared_ptr<T>& value) {
  return value;
}

// Changes hold an optional value, or a shared_ptr (null: drop), per key in batch order.
template <typename Cache, typename Changes>
void put_last(Cache& cache, const Changes& changes) {
  std::unordered_set<typename Cache::key_type, typename Cache::hasher> seen;
  for (auto it = changes.rbegin(); it != changes.rend(); ++it) {
    const auto& [key, value] = *it;
    if (!seen.insert(key).second || !value) continue;
    cache.put(key, value_to_put(value));
  }
}

}  // namespace

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

ShardRows::ShardRows(ShardId shard, const Clock& clock, bool atime_enabled,
                     std::chrono::seconds atime_grace_period)
    : shard_(shard),
      clock_(clock),
      atime_enabled_(atime_enabled),
      atime_grace_ns_(std::chrono::nanoseconds(atime_grace_period).count()),
      attributes_(kCachedInodes),
      names_(kCachedInodes),
      listings_(kCachedListings),
      random_(std::random_device{}()) {}

Status ShardRows::elsewhere(InodeId inode) {
  return error(Errc::cross_device, "inode " + std::to_string(inode) + " is on another shard");
}

std::int64_t ShardRows::now_ns() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_.now().time_since_epoch())
      .count();
}

void ShardRows::set_atime_policy(bool enabled, std::chrono::seconds grace_period) {
  atime_grace_ns_.store(std::chrono::nanoseconds(grace_period).count());
  atime_enabled_.store(enabled);
}

bool ShardRows::atime_due(const Attributes& a) const {
  return atime_enabled_.load(std::memory_order_relaxed) &&
         now_ns() - a.atime_ns >= atime_grace_ns_.load(std::memory_order_relaxed);
}

Result<std::uint64_t> ShardRows::open_counters(Database& db) {
  {
    // Shard 0's first number after the root's; another shard's first.
    auto counters = db.prepare(
        "INSERT OR IGNORE INTO meta(key, value) VALUES('next_inode', ?), ('next_cookie', 1), "
        "('boots', 0)");
    const InodeId first = (InodeId{shard_} << kShardShift) + (shard_ == 0 ? 2 : 1);
    TP_RETURN_IF_ERROR(counters.bind(1, first).run());
  }
  TP_RETURN_IF_ERROR(db.exec("UPDATE meta SET value = value + 1 WHERE key = 'boots'"));
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
  auto autoincrement =
      db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sqlite_sequence'");
  if (autoincrement.next_row()) {
    auto sequence = db.prepare("SELECT seq FROM sqlite_sequence WHERE name = 'dirents'");
    if (sequence.next_row()) {
      next_cookie_ = std::max(next_cookie_, static_cast<std::uint64_t>(sequence.int64(0)) + 1);
    }
    TP_RETURN_IF_ERROR(sequence.status());
  }
  TP_RETURN_IF_ERROR(autoincrement.status());
  // The first claims, durable with the boot count.
  inode_limit_ = next_inode_ + 2 * kNumbersAhead;
  cookie_limit_ = next_cookie_ + 2 * kNumbersAhead;
  TP_RETURN_IF_ERROR(raise_counter(db, Counter::inode, inode_limit_));
  TP_RETURN_IF_ERROR(raise_counter(db, Counter::cookie, cookie_limit_));
  return boots;
}

void ShardRows::clear_caches() {
  attributes_.clear();
  names_.clear();
  listings_.clear();
}

Result<Attributes> ShardRows::load(Database& db, InodeId inode) {
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

void ShardRows::overlay_memory_state(Attributes& a) const {
  if (auto it = dirty_.find(a.inode); it != dirty_.end()) {
    a.size = a.used = it->second.size;
    a.mtime_ns = it->second.mtime_ns;
    a.ctime_ns = it->second.ctime_ns;
  }
  if (auto it = pending_atimes_.find(a.inode); it != pending_atimes_.end()) {
    a.atime_ns = it->second;
  }
}

Result<Attributes> ShardRows::load_and_remember(Database& db, InodeId inode) {
  auto a = load(db, inode);
  if (a.ok()) remember(*a);
  return a;
}

Result<Attributes> ShardRows::load_directory(Database& db, InodeId inode) {
  TP_ASSIGN_OR_RETURN(Attributes a, load(db, inode));
  if (a.type != FileType::directory) return error(Errc::not_a_directory, "not a directory");
  return a;
}

Status ShardRows::save(Database& db, const Attributes& a) {
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

Status ShardRows::insert_inode(Database& db, const Attributes& object,
                               std::string_view symlink_target,
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

Status ShardRows::set_parent(Database& db, InodeId directory, InodeId parent) {
  auto update = db.prepare("UPDATE inodes SET parent = ? WHERE ino = ?");
  TP_RETURN_IF_ERROR(update.bind(1, parent).bind(2, directory).run());
  forget_listing(directory);  // its ".."
  return {};
}

Result<Layout> ShardRows::load_layout(Database& db, InodeId inode) {
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

std::optional<InodeId> ShardRows::find_entry(Database& db, InodeId directory,
                                             std::string_view name) {
  auto row = db.prepare("SELECT ino FROM dirents WHERE dir = ? AND name = ?");
  row.bind(1, directory).bind(2, name);
  if (!row.next_row()) return std::nullopt;
  return static_cast<InodeId>(row.int64(0));
}

bool ShardRows::has_entries(Database& db, InodeId directory) {
  auto row = db.prepare("SELECT 1 FROM dirents WHERE dir = ? LIMIT 1");
  row.bind(1, directory);
  return row.next_row();
}

Result<ShardRows::Entry> ShardRows::entry_of(Database& db, InodeId inode) {
  auto row = db.prepare("SELECT dir, name FROM dirents WHERE ino = ? ORDER BY cookie LIMIT 1");
  row.bind(1, inode);
  if (!row.next_row()) return error(Errc::stale, "no entry names inode " + std::to_string(inode));
  return Entry{static_cast<InodeId>(row.int64(0)), row.blob(1)};
}

Result<std::string> ShardRows::path_of_file(Database& db, InodeId file,
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

Result<std::string> ShardRows::path_of(Database& db, InodeId directory) {
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

Result<InodeId> ShardRows::parent_of(Database& db, InodeId directory) {
  if (directory == kRootInode) return kRootInode;
  auto row = db.prepare("SELECT parent FROM inodes WHERE ino = ?");
  row.bind(1, directory);
  if (row.next_row() && !row.is_null(0)) return static_cast<InodeId>(row.int64(0));
  TP_RETURN_IF_ERROR(row.status());
  TP_ASSIGN_OR_RETURN(Entry entry, entry_of(db, directory));
  return entry.directory;
}

Status ShardRows::insert_entry(Database& db, InodeId directory, std::string_view name,
                               InodeId inode) {
  auto stmt = db.prepare("INSERT INTO dirents(cookie, dir, name, ino) VALUES(?, ?, ?, ?)");
  stmt.bind(1, next_cookie_++).bind(2, directory).bind(3, name).bind(4, inode);
  forget_listing(directory);
  return stmt.run();
}

Status ShardRows::delete_entry(Database& db, InodeId directory, std::string_view name) {
  auto stmt = db.prepare("DELETE FROM dirents WHERE dir = ? AND name = ?");
  stmt.bind(1, directory).bind(2, name);
  forget_entry(directory, name);
  return stmt.run();
}

Status ShardRows::reserve_numbers(Database& db, AfterCommit& after) {
  if (next_inode_ >= inode_limit_.load() || next_cookie_ >= cookie_limit_.load()) {
    return error(Errc::unavailable, "inode numbers are being reserved; retry shortly");
  }
  TP_RETURN_IF_ERROR(claim_ahead(db, after, Counter::inode, next_inode_, inode_limit_));
  return claim_cookies(db, after);
}

Status ShardRows::claim_cookies(Database& db, AfterCommit& after) {
  return claim_ahead(db, after, Counter::cookie, next_cookie_, cookie_limit_);
}

Status ShardRows::claim_ahead(Database& db, AfterCommit& after, Counter counter, std::uint64_t next,
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
Status ShardRows::raise_counter(Database& db, Counter counter, std::uint64_t value) {
  auto stmt =
      db.prepare(counter == Counter::inode
                     ? "UPDATE meta SET value = ?1 WHERE key = 'next_inode' AND value < ?1"
                     : "UPDATE meta SET value = ?1 WHERE key = 'next_cookie' AND value < ?1");
  stmt.bind(1, value);
  return stmt.run();
}

void ShardRows::keep_unstable(const Attributes& after) {
  dirty_[after.inode] = {after.size, after.mtime_ns, after.ctime_ns};
  forget(after.inode);
}

void ShardRows::note_access(const Attributes& a) {
  if (atime_due(a)) {
    pending_atimes_[a.inode] = now_ns();
    forget(a.inode);
  }
}

void ShardRows::forget_memory_state(InodeId inode) {
  dirty_.erase(inode);
  pending_atimes_.erase(inode);
  forget(inode);
}

ShardRows::Flush ShardRows::flush_memory_state(Database& db) {
  if (dirty_.empty() && pending_atimes_.empty()) return {};
  std::vector<InodeId> inodes;
  for (auto& [inode, d] : dirty_) inodes.push_back(inode);
  for (auto& [inode, t] : pending_atimes_) inodes.push_back(inode);
  if (!db.exec("BEGIN IMMEDIATE").ok()) return {};
  for (InodeId inode : inodes) {
    auto a = load(db, inode);
    if (a.ok()) {
      (void)save(db, *a);
    } else if (a.code() == Errc::stale) {
      forget_memory_state(inode);
    }
  }
  const bool committed = db.exec("COMMIT").ok();
  if (!committed) (void)db.exec("ROLLBACK");
  return {true, committed};
}

void ShardRows::remember_entry(InodeId directory, std::string_view name, InodeId inode) {
  name_changes_.push_back({{directory, std::string(name)}, inode});
}

void ShardRows::forget_entry(InodeId directory, std::string_view name) {
  name_changes_.push_back({{directory, std::string(name)}, std::nullopt});
  forget_listing(directory);
}

void ShardRows::remember_listing(InodeId directory, std::shared_ptr<const Listing> listing) {
  listing_changes_.emplace_back(directory, std::move(listing));
}

void ShardRows::batch_done(bool committed) {
  if (committed) {
    // Two phases, so no reader pairs one cache's new state with another's old one (a new
    // directory mtime beside its old listing): first everything the batch changed leaves
    // all three caches, then each key gets its last change if that was a put.
    drop_touched(attributes_, attribute_changes_);
    drop_touched(names_, name_changes_);
    drop_touched(listings_, listing_changes_);
    put_last(attributes_, attribute_changes_);
    put_last(names_, name_changes_);
    put_last(listings_, listing_changes_);
  } else {
    clear_caches();
  }
  attribute_changes_.clear();
  name_changes_.clear();
  listing_changes_.clear();
}

}  // namespace tidepool::store::internal
