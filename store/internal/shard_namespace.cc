#include "store/internal/shard_namespace.h"

#include <algorithm>

#include "store/internal/permissions.h"

namespace tidepool::store::internal {
namespace {

constexpr std::uint64_t kFirstEntryCookie = 3;  // 1 and 2 are "." and ".."

// As Linux (setattr_copy): a chmod by a caller outside the file's group (its new group when the
// same call changes it) cannot make it setgid.
void clear_foreign_setgid(Attributes& a, const Caller& caller) {
  if (caller.uid != 0 && !in_group(caller, a.gid)) a.mode &= ~kSetgid;
}

// As Linux's NFS server (nfsd_sanitize_attrs): a chown of anything but a directory, by anyone,
// drops setuid, and setgid unless it only marks the file for mandatory locking (no group
// execute).
void clear_privileges_on_chown(Attributes& a) {
  if (a.type == FileType::directory) return;
  a.mode &= ~kSetuid;
  if (a.mode & kGroupExecute) a.mode &= ~kSetgid;
}

}  // namespace

Status check_setattr(const Attributes& a, const AttributeChanges& c, const Caller& caller) {
  bool root = caller.uid == 0;
  bool owner = caller.uid == a.uid;
  if (c.mode && !root && !owner) return error(Errc::not_permitted, "only the owner may chmod");
  // As POSIX with _POSIX_CHOWN_RESTRICTED: a stranger may not even "change" the owner or group
  // to what they are.
  if (c.uid && !root && !(owner && *c.uid == a.uid)) {
    return error(Errc::not_permitted, "only root may chown");
  }
  if (c.gid && !root && !(owner && (*c.gid == a.gid || in_group(caller, *c.gid)))) {
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

ShardNamespace::ShardNamespace(ShardRows& rows, CrossShardHolds& holds, FileData& data,
                               PlacementTable& placements, CatchUp& catch_up, PoolData* pools,
                               const StoreOptions& options)
    : rows_(rows),
      holds_(holds),
      data_(data),
      placements_(placements),
      catch_up_(catch_up),
      pools_(pools),
      placement_(options.placement),
      stripe_unit_(options.stripe_unit_bytes) {}

Result<Wcc> ShardNamespace::setattr(Db& db, AfterCommit&, InodeId inode, AttributeChanges changes,
                                    Caller caller, std::optional<std::int64_t> guard) {
  if (changes.size && *changes.size > kMaxFileSize) {
    return error(Errc::file_too_large, "size beyond the maximum file size");
  }
  TP_ASSIGN_OR_RETURN(Attributes before, rows_.load(db, inode));
  if (guard && *guard != before.ctime_ns) {
    return error(Errc::precondition_failed, "ctime guard does not match");
  }
  TP_RETURN_IF_ERROR(check_setattr(before, changes, caller));
  Attributes after = before;
  std::int64_t now = rows_.now_ns();
  if (changes.gid) after.gid = *changes.gid;
  if (changes.uid) after.uid = *changes.uid;
  if (changes.mode) {
    after.mode = *changes.mode & 07777;
    clear_foreign_setgid(after, caller);
  }
  if (changes.uid || changes.gid) clear_privileges_on_chown(after);
  if (changes.size && *changes.size != before.size) {
    TP_RETURN_IF_ERROR(data_.truncate(inode, *changes.size));
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
  TP_RETURN_IF_ERROR(rows_.save(db, after));
  return wcc_of(before, after);
}

Result<LookupResult> ShardNamespace::lookup(Db& db, AfterCommit&, InodeId directory,
                                            std::string name, Caller caller) {
  TP_ASSIGN_OR_RETURN(Attributes dir, rows_.load_directory(db, directory));
  if (!permits(dir, caller, kMayExecute)) {
    return error(Errc::access_denied, "no search permission on the directory");
  }
  if (name.size() > kMaxNameBytes) return error(Errc::name_too_long, "name too long");
  InodeId child;
  if (name == ".") {
    child = directory;
  } else if (name == "..") {
    TP_ASSIGN_OR_RETURN(child, rows_.parent_of(db, directory));
  } else {
    auto found = rows_.find_entry(db, directory, name);
    if (!found) return error(Errc::not_found, "no entry '" + name + "'");
    child = *found;
    rows_.remember_entry(directory, name, child);
  }
  if (rows_.is_foreign(child)) {
    rows_.remember(dir);
    Attributes object;
    object.inode = child;
    return LookupResult{object, dir, true};
  }
  TP_ASSIGN_OR_RETURN(Attributes object, rows_.load_and_remember(db, child));
  rows_.remember(dir);
  return LookupResult{object, dir};
}

Result<ReadlinkResult> ShardNamespace::readlink(Db& db, AfterCommit&, InodeId inode) {
  TP_ASSIGN_OR_RETURN(Attributes a, rows_.load(db, inode));
  if (a.type != FileType::symlink) return error(Errc::invalid_argument, "not a symlink");
  auto row = db.prepare("SELECT symlink_target FROM inodes WHERE ino = ?");
  row.bind(1, inode);
  if (!row.next_row()) return error(Errc::stale, "inode vanished");
  return ReadlinkResult{row.blob(0), a};
}

Result<Layout> ShardNamespace::layout(Db& db, AfterCommit&, InodeId inode) {
  TP_ASSIGN_OR_RETURN(Layout layout, rows_.load_layout(db, inode));
  layout.copies_behind = placements_.behind_of(inode) != nullptr;
  layout.epoch = data_.truncation_count(inode) + placements_.move_count(inode);
  return layout;
}

Result<Layout> ShardNamespace::set_access_pattern(Db& db, AfterCommit& after, InodeId inode,
                                                  std::string pattern) {
  TP_RETURN_IF_ERROR(rows_.load_layout(db, inode).status());
  auto update = db.prepare("UPDATE layouts SET access_pattern = ? WHERE ino = ?");
  update.bind(1, pattern).bind(2, inode);
  TP_RETURN_IF_ERROR(update.run());
  return layout(db, after, inode);
}

Result<NewObject> ShardNamespace::create(Db& db, AfterCommit& after, InodeId directory,
                                         std::string name, CreateMode mode,
                                         AttributeChanges initial, CreateVerifier verifier,
                                         Caller caller) {
  TP_ASSIGN_OR_RETURN(Attributes dir, rows_.load_directory(db, directory));
  TP_RETURN_IF_ERROR(validate_new_name(name));
  if (auto existing = rows_.find_entry(db, directory, name)) {
    if (rows_.is_foreign(*existing)) return ShardRows::elsewhere(*existing);
    return create_existing(db, dir, *existing, mode, initial, verifier, caller);
  }
  TP_RETURN_IF_ERROR(check_may_add(dir, caller));
  TP_RETURN_IF_ERROR(rows_.reserve_numbers(db, after));
  Attributes object = new_attributes(dir, FileType::regular, caller, initial, kDefaultFileMode);
  std::optional<CreateVerifier> stored;
  if (mode == CreateMode::exclusive) stored = verifier;
  const std::optional<Placement> placed = placement_for_new_file(db, directory, name, object);
  TP_ASSIGN_OR_RETURN(NewObject made, add_object(db, dir, name, object, {}, stored, placed));
  if (placed) {
    after.committed.push_back(
        [this, inode = object.inode, target = *placed] { placements_.place(inode, target); });
  }
  return made;
}

Result<NewObject> ShardNamespace::mkdir(Db& db, AfterCommit& after, InodeId directory,
                                        std::string name, AttributeChanges initial, Caller caller) {
  TP_ASSIGN_OR_RETURN(Attributes dir, rows_.load_directory(db, directory));
  TP_RETURN_IF_ERROR(validate_new_name(name));
  if (rows_.find_entry(db, directory, name)) return error(Errc::already_exists, name);
  TP_RETURN_IF_ERROR(check_may_add(dir, caller));
  if (dir.nlink >= kMaxLinks) return error(Errc::too_many_links, "too many subdirectories");
  TP_RETURN_IF_ERROR(rows_.reserve_numbers(db, after));
  Attributes object =
      new_attributes(dir, FileType::directory, caller, initial, kDefaultDirectoryMode);
  object.nlink = 2;
  return add_object(db, dir, name, object, {}, std::nullopt);
}

Result<NewObject> ShardNamespace::symlink(Db& db, AfterCommit& after, InodeId directory,
                                          std::string name, std::string target,
                                          AttributeChanges initial, Caller caller) {
  if (target.size() > kMaxSymlinkBytes) return error(Errc::name_too_long, "target too long");
  TP_ASSIGN_OR_RETURN(Attributes dir, rows_.load_directory(db, directory));
  TP_RETURN_IF_ERROR(validate_new_name(name));
  if (rows_.find_entry(db, directory, name)) return error(Errc::already_exists, name);
  TP_RETURN_IF_ERROR(check_may_add(dir, caller));
  TP_RETURN_IF_ERROR(rows_.reserve_numbers(db, after));
  AttributeChanges with_mode = initial;
  with_mode.mode = 0777;
  Attributes object = new_attributes(dir, FileType::symlink, caller, with_mode, 0777);
  object.size = object.used = target.size();
  return add_object(db, dir, name, object, target, std::nullopt);
}

Result<NewObject> ShardNamespace::mknod(Db& db, AfterCommit& after, InodeId directory,
                                        std::string name, FileType type, std::uint32_t rdev_major,
                                        std::uint32_t rdev_minor, AttributeChanges initial,
                                        Caller caller) {
  if (type == FileType::regular || type == FileType::directory || type == FileType::symlink) {
    return error(Errc::not_supported, "mknod makes devices, sockets and FIFOs only");
  }
  TP_ASSIGN_OR_RETURN(Attributes dir, rows_.load_directory(db, directory));
  TP_RETURN_IF_ERROR(validate_new_name(name));
  if (rows_.find_entry(db, directory, name)) return error(Errc::already_exists, name);
  TP_RETURN_IF_ERROR(check_may_add(dir, caller));
  bool device = type == FileType::block_device || type == FileType::char_device;
  if (device && caller.uid != 0) return error(Errc::not_permitted, "only root makes device nodes");
  TP_RETURN_IF_ERROR(rows_.reserve_numbers(db, after));
  Attributes object = new_attributes(dir, type, caller, initial, kDefaultFileMode);
  if (device) {
    object.rdev_major = rdev_major;
    object.rdev_minor = rdev_minor;
  }
  return add_object(db, dir, name, object, {}, std::nullopt);
}

Result<Wcc> ShardNamespace::remove(Db& db, AfterCommit& after, InodeId directory, std::string name,
                                   Caller caller) {
  TP_ASSIGN_OR_RETURN(Attributes dir, rows_.load_directory(db, directory));
  if (is_dot_or_dotdot(name)) return error(Errc::is_a_directory, name);
  if (name.size() > kMaxNameBytes) return error(Errc::name_too_long, "name too long");
  auto found = rows_.find_entry(db, directory, name);
  if (!found) return error(Errc::not_found, "no entry '" + name + "'");
  if (rows_.is_foreign(*found)) return ShardRows::elsewhere(*found);
  TP_ASSIGN_OR_RETURN(Attributes victim, rows_.load(db, *found));
  if (victim.type == FileType::directory) return error(Errc::is_a_directory, name);
  TP_RETURN_IF_ERROR(check_may_delete(dir, victim, caller));
  Attributes dir_after = dir;
  TP_RETURN_IF_ERROR(unlink_entry(db, dir_after, name, victim, after));
  return wcc_of(dir, dir_after);
}

Result<Wcc> ShardNamespace::rmdir(Db& db, AfterCommit& after, InodeId directory, std::string name,
                                  Caller caller) {
  TP_ASSIGN_OR_RETURN(Attributes dir, rows_.load_directory(db, directory));
  if (name == ".") return error(Errc::invalid_argument, "cannot remove '.'");
  if (name == "..") return error(Errc::not_empty, "cannot remove '..'");
  if (name.size() > kMaxNameBytes) return error(Errc::name_too_long, "name too long");
  auto found = rows_.find_entry(db, directory, name);
  if (!found) return error(Errc::not_found, "no entry '" + name + "'");
  if (rows_.is_foreign(*found)) return ShardRows::elsewhere(*found);
  TP_ASSIGN_OR_RETURN(Attributes victim, rows_.load(db, *found));
  if (victim.type != FileType::directory) return error(Errc::not_a_directory, name);
  TP_RETURN_IF_ERROR(check_may_delete(dir, victim, caller));
  if (rows_.has_entries(db, victim.inode)) return error(Errc::not_empty, name);
  Attributes dir_after = dir;
  TP_RETURN_IF_ERROR(unlink_entry(db, dir_after, name, victim, after));
  return wcc_of(dir, dir_after);
}

Result<RenameResult> ShardNamespace::rename(Db& db, AfterCommit& after, InodeId from_directory,
                                            std::string from_name, InodeId to_directory,
                                            std::string to_name, Caller caller) {
  TP_ASSIGN_OR_RETURN(Attributes from_dir, rows_.load_directory(db, from_directory));
  TP_ASSIGN_OR_RETURN(Attributes to_dir, rows_.load_directory(db, to_directory));
  if (is_dot_or_dotdot(from_name) || is_dot_or_dotdot(to_name)) {
    return error(Errc::invalid_argument, "cannot rename '.' or '..'");
  }
  if (from_name.size() > kMaxNameBytes) return error(Errc::name_too_long, "name too long");
  TP_RETURN_IF_ERROR(validate_new_name(to_name));
  auto source_inode = rows_.find_entry(db, from_directory, from_name);
  if (!source_inode) return error(Errc::not_found, "no entry '" + from_name + "'");
  if (rows_.is_foreign(*source_inode)) return ShardRows::elsewhere(*source_inode);
  TP_ASSIGN_OR_RETURN(Attributes source, rows_.load(db, *source_inode));
  TP_RETURN_IF_ERROR(check_may_delete(from_dir, source, caller));
  TP_RETURN_IF_ERROR(check_may_add(to_dir, caller));
  bool moving_directory = source.type == FileType::directory;
  if (moving_directory && from_directory != to_directory) {
    // Its ".." changes, so it must be writable, and it must not move into its own subtree.
    if (!permits(source, caller, kMayWrite)) {
      return error(Errc::access_denied, "no write permission on the moved directory");
    }
    for (InodeId up = to_directory;;) {
      if (up == source.inode) {
        return error(Errc::invalid_argument, "cannot move a directory into itself");
      }
      if (up == kRootInode) break;
      TP_ASSIGN_OR_RETURN(up, rows_.parent_of(db, up));
      if (rows_.is_foreign(up)) return ShardRows::elsewhere(up);  // the walk goes elsewhere
    }
    TP_RETURN_IF_ERROR(holds_.check_inode(source.inode));
  }
  std::optional<Attributes> replaced;
  if (auto target_inode = rows_.find_entry(db, to_directory, to_name)) {
    if (*target_inode == source.inode) {
      return RenameResult{wcc_of(from_dir, from_dir), wcc_of(to_dir, to_dir)};
    }
    if (rows_.is_foreign(*target_inode)) return ShardRows::elsewhere(*target_inode);
    TP_ASSIGN_OR_RETURN(Attributes target, rows_.load(db, *target_inode));
    bool target_is_directory = target.type == FileType::directory;
    if (moving_directory && !target_is_directory) {
      return error(Errc::not_a_directory, "cannot replace a file with a directory");
    }
    if (!moving_directory && target_is_directory) {
      return error(Errc::is_a_directory, "cannot replace a directory with a file");
    }
    if (target_is_directory && rows_.has_entries(db, target.inode)) {
      return error(Errc::not_empty, "target directory is not empty");
    }
    TP_RETURN_IF_ERROR(check_may_delete(to_dir, target, caller));
    replaced = target;
  }
  std::int64_t now = rows_.now_ns();
  Attributes to_after = to_dir;
  TP_RETURN_IF_ERROR(holds_.check_entry(from_directory, from_name));
  TP_RETURN_IF_ERROR(holds_.check_entry(to_directory, to_name));
  TP_RETURN_IF_ERROR(holds_.check_not_sealed(to_directory));
  if (replaced) TP_RETURN_IF_ERROR(unlink_entry(db, to_after, to_name, *replaced, after));
  auto move = db.prepare("UPDATE dirents SET dir = ?, name = ? WHERE dir = ? AND name = ?");
  move.bind(1, to_directory).bind(2, std::string_view(to_name));
  move.bind(3, from_directory).bind(4, std::string_view(from_name));
  TP_RETURN_IF_ERROR(move.run());
  rows_.forget_entry(from_directory, from_name);
  rows_.forget_entry(to_directory, to_name);
  if (moving_directory && from_directory != to_directory) {
    TP_RETURN_IF_ERROR(rows_.set_parent(db, source.inode, to_directory));
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
    TP_RETURN_IF_ERROR(rows_.save(db, from_after));
    to_after = from_after;
  } else {
    TP_RETURN_IF_ERROR(rows_.save(db, from_after));
    TP_RETURN_IF_ERROR(rows_.save(db, to_after));
  }
  Attributes moved = source;
  moved.ctime_ns = now;
  TP_RETURN_IF_ERROR(rows_.save(db, moved));
  return RenameResult{wcc_of(from_dir, from_after), wcc_of(to_dir, to_after)};
}

Result<LinkResult> ShardNamespace::link(Db& db, AfterCommit& after, InodeId file, InodeId directory,
                                        std::string name, Caller caller) {
  if (rows_.is_foreign(file)) return ShardRows::elsewhere(file);
  TP_RETURN_IF_ERROR(holds_.check_inode(file));
  TP_ASSIGN_OR_RETURN(Attributes target, rows_.load(db, file));
  TP_ASSIGN_OR_RETURN(Attributes dir, rows_.load_directory(db, directory));
  if (target.type == FileType::directory) {
    return error(Errc::is_a_directory, "cannot hard-link a directory");
  }
  TP_RETURN_IF_ERROR(validate_new_name(name));
  if (rows_.find_entry(db, directory, name)) return error(Errc::already_exists, name);
  TP_RETURN_IF_ERROR(check_may_add(dir, caller));
  if (target.nlink >= kMaxLinks) return error(Errc::too_many_links, "too many links");
  TP_RETURN_IF_ERROR(rows_.reserve_numbers(db, after));
  TP_RETURN_IF_ERROR(add_entry(db, directory, name, file));
  std::int64_t now = rows_.now_ns();
  Attributes target_after = target;
  ++target_after.nlink;
  target_after.ctime_ns = now;
  TP_RETURN_IF_ERROR(rows_.save(db, target_after));
  Attributes dir_after = dir;
  dir_after.mtime_ns = dir_after.ctime_ns = now;
  TP_RETURN_IF_ERROR(rows_.save(db, dir_after));
  return LinkResult{target_after, wcc_of(dir, dir_after)};
}

Result<DirectoryPage> ShardNamespace::readdir(Db& db, AfterCommit&, InodeId directory,
                                              std::uint64_t cookie, std::uint64_t verifier,
                                              std::uint32_t max_entries, bool with_attributes,
                                              Caller caller) {
  TP_ASSIGN_OR_RETURN(Attributes dir, rows_.load_and_remember(db, directory));
  if (dir.type != FileType::directory) return error(Errc::not_a_directory, "not a directory");
  if (!permits(dir, caller, kMayRead)) {
    return error(Errc::access_denied, "no read permission on the directory");
  }
  DirectoryPage page;
  page.directory = dir;
  page.cookie_verifier = static_cast<std::uint64_t>(dir.birth_ns);
  if (cookie != 0 && verifier != 0 && verifier != page.cookie_verifier) {
    return error(Errc::bad_cookie, "cookie verifier does not match");
  }
  auto add = [&](InodeId inode, std::string name, std::uint64_t entry_cookie) -> Status {
    DirectoryEntry e{inode, std::move(name), entry_cookie, std::nullopt};
    if (with_attributes && !rows_.is_foreign(inode)) {
      TP_ASSIGN_OR_RETURN(e.attributes, rows_.load(db, inode));
    }
    page.entries.push_back(std::move(e));
    return {};
  };
  if (cookie == 0 && max_entries > 0) TP_RETURN_IF_ERROR(add(dir.inode, ".", 1));
  if (cookie <= 1 && page.entries.size() < max_entries) {
    TP_ASSIGN_OR_RETURN(InodeId parent, rows_.parent_of(db, dir.inode));
    TP_RETURN_IF_ERROR(add(parent, "..", 2));
  }
  std::uint64_t after_row = cookie >= kFirstEntryCookie ? cookie - 2 : 0;
  // One query returns the entries with their inodes' attributes (READDIRPLUS) in order; none
  // for an inode of another shard.
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
      if (rows_.is_foreign(inode)) {
        page.entries.push_back(
            {inode, rows.blob(15), static_cast<std::uint64_t>(rows.int64(14)) + 2, std::nullopt});
      }
      continue;
    }
    Attributes a = attributes_from_row(rows);
    rows_.overlay_memory_state(a);
    DirectoryEntry e{a.inode, rows.blob(15), static_cast<std::uint64_t>(rows.int64(14)) + 2,
                     std::nullopt};
    if (with_attributes) {
      e.attributes = a;
      rows_.remember(a);
    }
    page.entries.push_back(std::move(e));
  }
  TP_RETURN_IF_ERROR(rows.status());
  // The end is reached only once "." and ".." went out too.
  page.eof = seen <= room && (cookie >= 2 || page.entries.size() >= 2 - cookie);
  if (cookie == 0 && page.eof && page.entries.size() >= 2) {
    auto listing = std::make_shared<Listing>();
    listing->parent = page.entries[1].inode;
    for (std::size_t i = 2; i < page.entries.size(); ++i) {
      const auto& e = page.entries[i];
      listing->entries.push_back({e.inode, e.name, e.cookie});
    }
    rows_.remember_listing(dir.inode, std::move(listing));
  }
  return page;
}

std::optional<Result<DirectoryPage>> ShardNamespace::page_from_cache(
    const Attributes& dir, const Listing& listing, std::uint64_t cookie, std::uint64_t verifier,
    std::uint32_t max_entries, bool with_attributes) const {
  DirectoryPage page;
  page.directory = dir;
  page.cookie_verifier = static_cast<std::uint64_t>(dir.birth_ns);
  if (cookie != 0 && verifier != 0 && verifier != page.cookie_verifier) {
    return Result<DirectoryPage>(error(Errc::bad_cookie, "cookie verifier does not match"));
  }
  auto add = [&](InodeId inode, std::string_view name, std::uint64_t entry_cookie) {
    DirectoryEntry e{inode, std::string(name), entry_cookie, std::nullopt};
    // An inode of another shard goes without its attributes, as from the database: a
    // directory's ".." is often on another shard, and giving up on it made every READDIRPLUS
    // of such a directory a query.
    if (with_attributes && !rows_.is_foreign(inode)) {
      e.attributes = rows_.cached(inode);
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

Result<std::uint32_t> ShardNamespace::record_reads(Db& db, AfterCommit&,
                                                   std::vector<InodeId> inodes) {
  std::uint32_t moved = 0;
  for (InodeId inode : inodes) {
    Result<Attributes> a = rows_.load_and_remember(db, inode);
    if (!a.ok() || a->type != FileType::regular || !rows_.atime_due(*a)) continue;
    rows_.note_access(*a);
    ++moved;
  }
  return moved;
}

Status ShardNamespace::make_root(Db& db) {
  if (rows_.load(db, kRootInode).ok()) return {};
  Attributes root;
  root.inode = kRootInode;
  root.generation = 1;
  root.type = FileType::directory;
  // /ifs is open to everyone, as OneFS ships it; administrators narrow it with exports.
  root.mode = 0777;
  root.nlink = 2;
  root.atime_ns = root.mtime_ns = root.ctime_ns = root.birth_ns = rows_.now_ns();
  return rows_.insert_inode(db, root, {}, std::nullopt, kRootInode);
}

Status ShardNamespace::drop_inode(Db& db, const Attributes& victim, AfterCommit& after) {
  for (const char* sql :
       {"DELETE FROM inodes WHERE ino = ?", "DELETE FROM layouts WHERE ino = ?",
        "DELETE FROM moves WHERE ino = ?", "DELETE FROM copies_behind WHERE ino = ?"}) {
    auto stmt = db.prepare(sql);
    stmt.bind(1, victim.inode);
    TP_RETURN_IF_ERROR(stmt.run());
  }
  InodeId inode = victim.inode;
  rows_.forget_memory_state(inode);
  if (victim.type == FileType::regular) {
    const Where where = placements_.where_of(inode);
    if (where.placed) {
      TP_RETURN_IF_ERROR(catch_up_.note_down_units_left(db, after, inode, *where.placed));
    }
    if (where.moving_to) {
      TP_RETURN_IF_ERROR(catch_up_.note_down_units_left(db, after, inode, *where.moving_to));
    }
    after.durable.push_back([this, inode] { data_.remove(inode); });
  }
  return {};
}

Status ShardNamespace::add_entry(Db& db, InodeId directory, std::string_view name, InodeId inode) {
  TP_RETURN_IF_ERROR(holds_.check_entry(directory, name));
  TP_RETURN_IF_ERROR(holds_.check_not_sealed(directory));
  return rows_.insert_entry(db, directory, name, inode);
}

Status ShardNamespace::remove_entry(Db& db, InodeId directory, std::string_view name) {
  TP_RETURN_IF_ERROR(holds_.check_entry(directory, name));
  return rows_.delete_entry(db, directory, name);
}

Attributes ShardNamespace::new_attributes(const Attributes& dir, FileType type,
                                          const Caller& caller, const AttributeChanges& initial,
                                          std::uint32_t default_mode) {
  Attributes a = new_object(dir, type, caller, initial, default_mode, rows_.now_ns());
  a.inode = rows_.take_inode_number();
  a.generation = rows_.new_generation();
  a.nlink = 1;
  return a;
}

Result<NewObject> ShardNamespace::add_object(Db& db, const Attributes& dir, const std::string& name,
                                             const Attributes& object,
                                             std::string_view symlink_target,
                                             const std::optional<CreateVerifier>& verifier,
                                             const std::optional<Placement>& placed) {
  TP_RETURN_IF_ERROR(rows_.insert_inode(db, object, symlink_target, verifier, dir.inode));
  if (object.type == FileType::regular) {
    auto layout = db.prepare(
        "INSERT INTO layouts(ino, pool, stripe_unit, protection, nodes) VALUES(?, ?, ?, ?, ?)");
    layout.bind(1, object.inode).bind(2, placed ? placed->pool : std::string(kWithShard));
    layout.bind(3, stripe_unit_);
    layout.bind(4, placed ? placed->copies : kDefaultProtection);
    layout.bind(5, placed ? nodes_text(placed->nodes) : std::string());
    TP_RETURN_IF_ERROR(layout.run());
  }
  TP_RETURN_IF_ERROR(add_entry(db, dir.inode, name, object.inode));
  Attributes dir_after = dir;
  dir_after.mtime_ns = dir_after.ctime_ns = object.ctime_ns;
  if (object.type == FileType::directory) ++dir_after.nlink;
  TP_RETURN_IF_ERROR(rows_.save(db, dir_after));
  return NewObject{object, wcc_of(dir, dir_after)};
}

Result<NewObject> ShardNamespace::create_existing(Db& db, const Attributes& dir, InodeId existing,
                                                  CreateMode mode, const AttributeChanges& initial,
                                                  const CreateVerifier& verifier,
                                                  const Caller& caller) {
  if (!permits(dir, caller, kMayExecute)) {
    return error(Errc::access_denied, "no search permission on the directory");
  }
  TP_ASSIGN_OR_RETURN(Attributes object, rows_.load(db, existing));
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
    TP_RETURN_IF_ERROR(data_.truncate(existing, *initial.size));
    Attributes after = object;
    after.size = after.used = *initial.size;
    after.mtime_ns = after.ctime_ns = rows_.now_ns();
    TP_RETURN_IF_ERROR(rows_.save(db, after));
    object = after;
  }
  return NewObject{object, wcc_of(dir, dir)};
}

Status ShardNamespace::unlink_entry(Db& db, Attributes& dir, const std::string& name,
                                    const Attributes& victim, AfterCommit& after) {
  TP_RETURN_IF_ERROR(holds_.check_inode(victim.inode));
  TP_RETURN_IF_ERROR(remove_entry(db, dir.inode, name));
  std::int64_t now = rows_.now_ns();
  dir.mtime_ns = dir.ctime_ns = now;
  bool is_directory = victim.type == FileType::directory;
  if (is_directory) --dir.nlink;
  TP_RETURN_IF_ERROR(rows_.save(db, dir));
  std::uint32_t links = is_directory ? 0 : victim.nlink - 1;
  if (links > 0) {
    Attributes v = victim;
    v.nlink = links;
    v.ctime_ns = now;
    return rows_.save(db, v);
  }
  return drop_inode(db, victim, after);
}

std::optional<Placement> ShardNamespace::placement_for_new_file(Db& db, InodeId directory,
                                                                const std::string& name,
                                                                const Attributes& object) {
  if (!placement_ || !pools_ || !placement_->places_any()) return std::nullopt;
  std::string path;
  if (placement_->needs_path()) {
    Result<std::string> directory_path = rows_.path_of(db, directory);
    if (!directory_path.ok()) return std::nullopt;
    path = *directory_path + "/" + name;
  }
  const std::optional<PoolChoice> choice =
      placement_->place(NewFile{std::move(path), object.uid, object.birth_ns});
  if (!choice || choice->pool == kWithShard || choice->protection == 0 ||
      choice->protection > kMaxProtection) {
    return std::nullopt;
  }
  Placement placed{choice->pool, choice->protection, stripe_unit_, pools_->nodes_of(choice->pool)};
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

}  // namespace tidepool::store::internal
