// The durable half of a Raft server: current term, vote, log entries and the latest snapshot,
// in one SQLite database. Every call is durable when it returns (the log's file is opened with
// full synchronous commits; ":memory:" for simulated nodes whose "disk" is their RaftLog
// object, kept by the test across a simulated crash).
//
// Functions return Raft error codes (0 on success) because their only caller is the raft_io
// adapter. Not thread-safe: used on the group member's EventLoop only.
#pragma once

#include "cluster/internal/raft_c.h"

#include <memory>
#include <string>

#include "common/sqlite.h"
#include "common/status.h"

namespace tidepool::cluster::internal {

class RaftLog {
 public:
  static Result<std::unique_ptr<RaftLog>> open(const std::string& path);

  // Everything Raft needs to start, allocated as Raft frees it: entries in one batch, the
  // snapshot with its data in a single buffer.
  int load(raft_term* term, raft_id* voted_for, raft_snapshot** snapshot,
           raft_index* start_index, raft_entry** entries, std::size_t* n_entries);
  // Writes the first entry: the cluster's initial configuration. Fails with
  // RAFT_CANTBOOTSTRAP when the log is not empty.
  int bootstrap(const raft_configuration& conf);
  int set_term(raft_term term);  // also forgets the vote
  int set_vote(raft_id server);
  // Appends after the last entry.
  int append(const raft_entry entries[], unsigned n);
  // Deletes the entry at `index` and all after it.
  int truncate(raft_index index);
  // Stores `snapshot` and deletes the entries it covers except the last `trailing`; with
  // trailing 0 (a snapshot installed from the leader) the whole log goes.
  int put_snapshot(const raft_snapshot& snapshot, unsigned trailing);
  // The stored snapshot, or null when there is none.
  int get_snapshot(raft_snapshot** snapshot);

  raft_index last_index() const { return next_index_ - 1; }
  // The last index and term the stored snapshot covers (0, 0 without one).
  raft_index snapshot_index() const { return snapshot_index_; }
  raft_term snapshot_term() const { return snapshot_term_; }

 private:
  explicit RaftLog(std::unique_ptr<sqlite::Database> db) : db_(std::move(db)) {}
  int set_meta(int key, std::uint64_t value);

  std::unique_ptr<sqlite::Database> db_;
  raft_index next_index_ = 1;  // index the next appended entry gets
  raft_index snapshot_index_ = 0;
  raft_term snapshot_term_ = 0;
};

}  // namespace tidepool::cluster::internal
