// The group view's state machine: applies encoded Changes, in log order, to a SQLite database
// (nodes, configuration objects, the certificates of removed nodes, and the epoch/applied/digest
// counters), and turns it into and out of Raft snapshots. Every outcome depends only on the
// database and the change, so every node reaches the same state. Not thread-safe.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "cluster/group.h"
#include "common/sqlite.h"
#include "common/status.h"
#include "common/xdr.h"

namespace tidepool::cluster::internal {

inline constexpr std::size_t kMaxNameLength = 256;
inline constexpr std::size_t kMaxObjectBodyBytes = 1 << 20;
inline constexpr std::size_t kMaxFingerprintLength = 128;

void encode_change(const Change& change, xdr::Encoder& out);
Result<Change> decode_change(std::span<const std::uint8_t> bytes);

class ConfigDb {
 public:
  // Opens the database at `path` and empties it: the state is rebuilt from the Raft log.
  static Result<std::unique_ptr<ConfigDb>> open(const std::string& path);

  // Applies one encoded change. `outcome` says what the change did (a change that cannot be
  // decoded is refused as invalid_argument, and still counts in the history). The returned
  // Status is not ok only if the database itself failed, in which case nothing was applied.
  Status apply(std::span<const std::uint8_t> encoded, Change& change, Status& outcome);

  xdr::Buffer snapshot();
  Status restore(std::span<const std::uint8_t> snapshot);

  const GroupView& view();
  Epoch epoch() const { return counters_.epoch; }
  std::uint64_t applied() const { return counters_.applied; }
  std::uint64_t digest() const { return counters_.digest; }

 private:
  explicit ConfigDb(std::unique_ptr<sqlite::Database> db) : db_(std::move(db)) {}
  Status apply_change(const Change& change, Status& outcome);
  bool exists(const std::string& kind, const std::string& name);
  bool revoked(const std::string& certificate);
  struct Counters {
    Epoch epoch = 0;
    std::uint64_t applied = 0;
    std::uint64_t digest = 0;
  };
  // Ends the open transaction: stores `next` and commits, then takes `next` as the counters;
  // on any failure (`written` included) rolls back and leaves everything as it was.
  Status commit(const Counters& next, Status written);
  Status clear();

  std::unique_ptr<sqlite::Database> db_;
  Counters counters_;
  GroupView view_;
  bool view_stale_ = true;
};

}  // namespace tidepool::cluster::internal
