#include "store/internal/candidates.h"

#include <sqlite3.h>

#include <algorithm>
#include <cctype>
#include <iterator>
#include <limits>
#include <memory>
#include <unordered_map>

namespace tidepool::store::internal {
namespace {

// The most inode numbers one find_files() call looks through.
constexpr std::uint64_t kMaxInodesExamined = 1u << 20;

}  // namespace

bool is_candidate_predicate(std::string_view where) {
  static constexpr std::string_view kWords[] = {"AND",   "OR",   "atime", "mtime", "ctime",
                                                "birth", "size", "type",  "uid",   "1"};
  static constexpr std::string_view kOperators[] = {"<=", ">=", "!=", "<", ">", "="};
  auto is_word_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  };
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
    } else if (const auto* op = std::find_if(
                   std::begin(kOperators), std::end(kOperators),
                   [&](std::string_view o) { return where.substr(at, o.size()) == o; });
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

// Each call compiles its own statement: `where` varies with the policies, and the statement
// cache keeps only constant texts. `where` comes first and `after` and `until` are named, so
// SQLite numbers them after the highest of `where`'s parameters: they are N+1 and N+2 exactly
// when `where` uses ?1..?N, and nothing else is accepted.
Result<CandidatePage> find_candidates(sqlite::Database& db, ShardRows& rows_of_shard,
                                      const std::string& where,
                                      const std::vector<std::int64_t>& values, InodeId after,
                                      std::uint32_t limit) {
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
  // A call looks at a window of inode numbers at most, so that a predicate few rows meet does
  // not hold the shard thread for a scan of the whole table.
  constexpr InodeId kLastInode = std::numeric_limits<std::int64_t>::max();  // SQLite's
  const InodeId until =
      std::min<InodeId>(after, kLastInode - kMaxInodesExamined) + kMaxInodesExamined;
  rows.bind(n + 1, after).bind(n + 2, until);
  CandidatePage page;
  // Candidates share directories: each directory's path is worked out once a page.
  std::unordered_map<InodeId, std::string> directories;
  // A page ends at its limit, with `next` the last row looked at (kept or passed over), or at
  // the window's end, with `next` there while the shard has inodes past it: a short page, even
  // an empty one, is not mistaken for the end.
  InodeId last_examined = after;
  bool full = false;
  while (rows.next_row()) {
    if (page.files.size() == limit) {
      full = true;
      break;
    }
    last_examined = static_cast<InodeId>(rows.int64(0));
    Attributes a = attributes_from_row(rows);
    rows_of_shard.overlay_memory_state(a);
    // A file without a name (removed while open) or with too long a path is passed over.
    Result<std::string> path = rows_of_shard.path_of_file(db, a.inode, directories);
    if (path.ok()) page.files.push_back({a, std::move(*path)});
  }
  TP_RETURN_IF_ERROR(rows.status());
  if (full) {
    page.next = last_examined;
  } else if (until < rows_of_shard.next_inode()) {
    page.next = until;
  }
  return page;
}

}  // namespace tidepool::store::internal
