// File pool policy filters (issue 7): which files a policy applies to, as data. A filter is an
// OR of ANDs of conditions on a file's path, name, size, times, type and owner. It is written
// either as a readable expression or as OneFS's flags (`--begin-filter ... --end-filter`), is
// evaluated purely against a file's facts, and compiles to an SQL predicate over a shard's
// inodes table so that a shard finds its candidates through its indexes.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/status.h"

namespace tidepool::policy {

enum class Field : std::uint8_t {
  path,   // the file's path under /ifs; a glob: * within a name, ** any run of names (at
          // least one: /ifs/**/x does not match /ifs/x); a path over 4096 bytes matches no
          // pattern, and does not fail to match one either
  name,   // its last name; a glob
  iname,  // the same, ignoring case
  size,
  accessed,
  modified,
  changed,
  birth,
  type,   // file, directory, symlink, block, char, socket, fifo
  owner,  // uid
};

enum class Comparison : std::uint8_t { lt, le, gt, ge, eq, ne, matches, not_matches };

// A time to compare with: an age ("30d": thirty days before the evaluation's now) or a moment.
struct Age {
  std::int64_t seconds = 0;
  bool operator==(const Age&) const = default;
};
struct Moment {
  std::int64_t unix_seconds = 0;
  bool operator==(const Moment&) const = default;
};

struct Condition {
  Field field = Field::size;
  Comparison comparison = Comparison::eq;
  // size and owner: a number; times: Age or Moment; path, name, iname and type: text.
  std::variant<std::uint64_t, Age, Moment, std::string> value;
  bool operator==(const Condition&) const = default;
};

// Every condition holds.
using Clause = std::vector<Condition>;

// Some clause holds; a filter without clauses matches every file.
struct Filter {
  std::vector<Clause> clauses;
  bool operator==(const Filter&) const = default;
};

// The name a filter's `type` gives a file type numbered as NFSv3's ftype3 (and the store's
// FileType): 1 "file", 2 "directory", 3 "block", 4 "char", 5 "symlink", 6 "socket", 7 "fifo";
// "unknown" for another number.
const char* type_name(unsigned ftype);

// What the evaluator knows of one file.
struct FileFacts {
  std::string path;  // absolute: /ifs/...
  std::uint64_t size = 0;
  std::int64_t atime = 0;  // Unix seconds
  std::int64_t mtime = 0;
  std::int64_t ctime = 0;
  std::int64_t birth = 0;
  std::string type = "file";
  std::uint32_t uid = 0;
};

// The readable form, e.g. `accessed > 30d and size >= 1GiB and path =~ /ifs/data/**`: clauses
// joined by `or`, conditions by `and`. Fields as in Field; comparisons < <= > >= == != and, for
// path, name and iname, =~ (glob matches) and !~. Sizes take B, KB, MB, GB, TB, PB (powers of
// 1000) or KiB, MiB, GiB, TiB, PiB; ages s, min, h, d, w, mo (30 days), y (365 days), any case,
// up to 100y; dates from 1970 to 2200;
// moments are dates, 2024-01-31 or 2024-01-31T12:00:00Z. Text with spaces is quoted "...".
// A mistake is invalid_argument saying at which column, what was expected and what was found.
Result<Filter> parse_expression(std::string_view text);

// OneFS's flags: `--begin-filter`, then conditions such as `--size=1GB` each followed by
// `--operator=gt` (lt, le, gt, ge, eq, ne; eq when left out, which times refuse; for paths and
// names eq is a match), joined by `--and` and `--or`, then `--end-filter`.
// Conditions: --path, --name (with --case-sensitive=false for iname), --size, --accessed-time,
// --modified-time, --changed-time, --birth-time, --file-type, --owner. A mistake names the
// argument (1-based) and what was expected.
Result<Filter> parse_flags(std::span<const std::string> arguments);

// Whether `facts` meets `filter` at `now` (Unix seconds). Pure.
bool matches(const Filter& filter, const FileFacts& facts, std::int64_t now);

// The readable form of `filter`, which parse_expression reads back to the same filter.
std::string to_expression(const Filter& filter);

// A predicate over a shard's `inodes` table (columns atime, mtime, ctime, birth in ns, size,
// type, uid) with its values to bind in order (?1, ?2, ...). Conditions on path and names have
// no column there: a clause holding one selects a superset, and `exact` is false — the
// candidates must then be checked with matches().
struct SqlPredicate {
  std::string where;
  std::vector<std::int64_t> values;
  bool exact = true;
};
SqlPredicate to_sql(const Filter& filter, std::int64_t now);

}  // namespace tidepool::policy
