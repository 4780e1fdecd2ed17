// How a shard finds the candidates of a file pool policy (Store::find_files): the policy's SQL
// predicate (policy::to_sql) run over the shard's inodes table, a window of inode numbers at a
// time, with each file's path worked out from its entries.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/sqlite.h"
#include "store/internal/shard_rows.h"
#include "store/store.h"

namespace tidepool::store::internal {

// Whether `where` has the shape policy::to_sql() gives a predicate — parentheses, AND, OR, the
// inodes columns it names, comparisons, ?N and 1 — so that nothing else, wherever it came from,
// reaches SQLite.
bool is_candidate_predicate(std::string_view where);

// On the shard thread: one page of candidates, as Store::find_files describes it; `where` has
// passed is_candidate_predicate() and `limit` is in range.
Result<CandidatePage> find_candidates(sqlite::Database& db, ShardRows& rows,
                                      const std::string& where,
                                      const std::vector<std::int64_t>& values, InodeId after,
                                      std::uint32_t limit);

}  // namespace tidepool::store::internal
