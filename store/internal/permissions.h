// POSIX permission checks for AUTH_SYS callers.
#pragma once

#include <algorithm>
#include <cstdint>

#include "store/store.h"

namespace tidepool::store::internal {

inline constexpr std::uint32_t kMayRead = 4;
inline constexpr std::uint32_t kMayWrite = 2;
inline constexpr std::uint32_t kMayExecute = 1;

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

}  // namespace tidepool::store::internal
