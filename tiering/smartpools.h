// The SmartPools job's work (issue 7): walk the namespace under the job's paths, find which file
// pool policy applies to each regular file, and bring the file to what its policy asks for.
//
// It sets a file's access pattern to its policy's, and moves the file's data to the node pool
// its policy's storage target names (Store::migrate), at the policy's protection. A file whose
// data cannot go where its policy wants (the target has no pool with nodes, or the data is kept
// with its shard or in its pool and only the protection differs, or a node of either pool is
// down) is counted as misplaced; a move that failed is also noted as an error.
//
// The walk is depth-first and resumable: the job's checkpoint holds the directories open from
// the root down, each with the cookie to list on from, and the counts at that point. Work done
// after the last saved checkpoint is done again after a take-over, and counted once.
//
// The FlexProtect job walks as SmartPools does but leaves the policies aside: a file whose data is
// in a node pool but placed over other nodes than the pool places data on now (a node lost, or
// back) is restriped over those, at its protection (Store::migrate to its own pool). It counts
// such files as matched, and those it could not restripe as misplaced.
//
// The FilePolicy job does not walk: each policy's filter, compiled to SQL (policy::to_sql),
// finds its candidates in the shard's database (Store::find_files), and a candidate is brought
// to what its policy asks for when that policy is the first to match it. Its checkpoint is the
// policy being gone through and the last inode done; files_scanned counts the candidates. The
// files no policy matches (the default policy's) are left to SmartPools.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "common/clock.h"
#include "common/status.h"
#include "policy/filter.h"
#include "policy/policies.h"
#include "store/store.h"
#include "tiering/jobs.h"

namespace tidepool::tiering {

// What the policies see of a file: its path and attributes, times in whole seconds (rounded
// down, as a shard's SQL compares them).
policy::FileFacts facts_of(const store::Attributes& attributes, std::string path);

struct RunHooks {
  // The policies in force now.
  std::function<policy::PolicySet()> policies;
  // Where data now in node pool `pool` (or kept with its shard, store::kWithShard) goes for
  // storage target `target` (a pool, a tier or anywhere): `pool` itself when it is where the
  // target wants it already; else a pool of the target; none when the target has no pool with
  // nodes.
  std::function<std::optional<std::string>(const std::string& target, const std::string& pool)>
      pool_for;
  // The nodes data in node pool `pool` is placed over now (FlexProtect).
  std::function<std::vector<std::uint64_t>(const std::string& pool)> placed_nodes;
  // Keeps the job as it stands (its checkpoint included). A failure stops the run and is
  // returned: the job was paused, cancelled or taken over meanwhile.
  std::function<boost::asio::awaitable<Status>(const Job&)> save;
  // Asked between files: true stops the run with Errc::unavailable, without a last save.
  std::function<bool()> stopping;
};

struct RunOptions {
  const Clock* clock = nullptr;  // null: the real clock
  std::chrono::milliseconds save_every{1000};
  std::uint32_t page_entries = 256;  // directory entries, or candidates, asked for at a time
};

// Runs `job` from its checkpoint to the end of its walk, saving it at least every
// options.save_every. Returns ok when the walk is done (the job is left to be ended by the
// caller), or what stopped it. Errors on single files or directories are noted in the job and
// the walk goes on. Runs on the caller's executor; the store's operations may complete there.
boost::asio::awaitable<Status> run_smartpools(store::Store& store, Job& job, RunHooks hooks,
                                              RunOptions options);

}  // namespace tidepool::tiering
