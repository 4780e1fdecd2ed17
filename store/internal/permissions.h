// POSIX permission checks for AUTH_SYS callers, and the rules new objects follow.
#pragma once

#include <algorithm>
#include <cstdint>

#include "common/status.h"
#include "store/store.h"

namespace tidepool::store::internal {

inline constexpr std::uint32_t kMayRead = 4;
inline constexpr std::uint32_t kMayWrite = 2;
inline constexpr std::uint32_t kMayExecute = 1;
inline constexpr std::uint32_t kDefaultFileMode = 0644;
inline constexpr std::uint32_t kDefaultDirectoryMode = 0755;
inline constexpr std::uint32_t kSetuid = 04000;
inline constexpr std::uint32_t kSetgid = 02000;
inline constexpr std::uint32_t kSticky = 01000;
inline constexpr std::uint32_t kGroupExecute = 0010;

inline bool in_group(const Caller& caller, std::uint32_t gid) {
  return caller.gid == gid ||
         std::find(caller.groups.begin(), caller.groups.end(), gid) != caller.groups.end();
}

// want: a mask of kMayRead/kMayWrite/kMayExecute. Root may do anything, except execute a
// non-directory that nobody may execute.
inline bool permits(const Attributes& a, const Caller& caller, std::uint32_t want) {
  if (caller.uid == 0) {
    return !(want & kMayExecute) || a.type == FileType::directory || (a.mode & 0111);
  }
  std::uint32_t bits = caller.uid == a.uid       ? (a.mode >> 6) & 7
                       : in_group(caller, a.gid) ? (a.mode >> 3) & 7
                                                 : a.mode & 7;
  return (bits & want) == want;
}

// The ACCESS bits the caller holds among those requested.
inline std::uint32_t granted_access(const Attributes& a, const Caller& caller,
                                    std::uint32_t requested) {
  bool directory = a.type == FileType::directory;
  std::uint32_t granted = 0;
  if (permits(a, caller, kMayRead)) granted |= access::read;
  if (permits(a, caller, kMayWrite)) {
    granted |= access::modify | access::extend;
    if (directory) granted |= access::erase;
  }
  if (permits(a, caller, kMayExecute)) granted |= directory ? access::lookup : access::execute;
  return granted & requested;
}

// Whether `caller` may read (kMayRead) or write (kMayWrite) a file's data: regular files only;
// the owner may whatever the mode bits, as a local process that opened the file before changing
// its mode could (knfsd does the same).
inline Status check_data_access(const Attributes& a, const Caller& caller, std::uint32_t want) {
  if (a.type == FileType::directory) return error(Errc::is_a_directory, "is a directory");
  if (a.type != FileType::regular) return error(Errc::invalid_argument, "not a regular file");
  if (caller.uid != a.uid && !permits(a, caller, want)) {
    return error(Errc::access_denied, "permission denied");
  }
  return {};
}

inline bool is_dot_or_dotdot(std::string_view name) { return name == "." || name == ".."; }

inline Status validate_new_name(std::string_view name) {
  if (name.empty()) return error(Errc::invalid_argument, "empty name");
  if (name.size() > kMaxNameBytes) return error(Errc::name_too_long, "name longer than 255 bytes");
  if (name.find('/') != std::string_view::npos || name.find('\0') != std::string_view::npos) {
    return error(Errc::invalid_argument, "name contains '/' or NUL");
  }
  if (is_dot_or_dotdot(name)) return error(Errc::already_exists, "'.' and '..' always exist");
  return {};
}

inline Status check_may_add(const Attributes& dir, const Caller& caller) {
  if (!permits(dir, caller, kMayWrite | kMayExecute)) {
    return error(Errc::access_denied, "no write permission on the directory");
  }
  return {};
}

inline Status check_may_delete(const Attributes& dir, const Attributes& victim,
                               const Caller& caller) {
  TP_RETURN_IF_ERROR(check_may_add(dir, caller));
  if ((dir.mode & kSticky) && caller.uid != 0 && caller.uid != dir.uid &&
      caller.uid != victim.uid) {
    return error(Errc::access_denied, "sticky directory: only the owner may remove");
  }
  return {};
}

// A new object's attributes in `dir` as `caller` asked for them, at `now`, but for its inode
// number and generation.
inline Attributes new_object(const Attributes& dir, FileType type, const Caller& caller,
                             const AttributeChanges& initial, std::uint32_t default_mode,
                             std::int64_t now) {
  Attributes a;
  a.type = type;
  a.mode = initial.mode.value_or(default_mode) & 07777;
  a.nlink = type == FileType::directory ? 2 : 1;
  a.uid = caller.uid == 0 && initial.uid ? *initial.uid : caller.uid;
  a.gid = (dir.mode & kSetgid) ? dir.gid : caller.gid;
  if (caller.uid == 0 && initial.gid) a.gid = *initial.gid;
  a.atime_ns = initial.atime == SetTime::client_time ? initial.atime_ns : now;
  a.mtime_ns = initial.mtime == SetTime::client_time ? initial.mtime_ns : now;
  a.ctime_ns = a.birth_ns = now;
  if (type == FileType::regular && initial.size) a.size = a.used = *initial.size;
  // Only root or a member of the file's group may make it setgid to that group.
  if (type == FileType::regular && caller.uid != 0 && !in_group(caller, a.gid)) {
    a.mode &= ~kSetgid;
  }
  // A new directory in a setgid directory is setgid too.
  if (type == FileType::directory && (dir.mode & kSetgid)) a.mode |= kSetgid;
  return a;
}

}  // namespace tidepool::store::internal
