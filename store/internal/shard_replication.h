// Logical replication of a shard database, for its mirror: the rows each committed
// transaction changed, as an SQLite changeset (the session extension), applied in the same
// order to the mirror's copy. Row changes rather than the operations that made them, so the
// mirror needs none of the home's in-memory state (clocks, caches, inode counters) to stay
// identical, and rather than database pages, so a copy never depends on the home's file
// layout.
//
// Not thread-safe: a recorder lives on its shard's thread, like the database.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "common/sqlite.h"
#include "common/status.h"

struct sqlite3_session;

namespace tidepool::store::internal {

class ChangeRecorder {
 public:
  // Records the changes to every table of `db` from now on. `db` outlives the recorder.
  static Result<std::unique_ptr<ChangeRecorder>> attach(sqlite::Database& db);
  ~ChangeRecorder();
  ChangeRecorder(const ChangeRecorder&) = delete;
  ChangeRecorder& operator=(const ChangeRecorder&) = delete;

  // The changes committed since the last take() (or since attach()), sealed for the mirror,
  // and a fresh start. Empty when nothing changed. Call between transactions.
  Result<std::vector<std::uint8_t>> take();

 private:
  explicit ChangeRecorder(sqlite::Database& db) : db_(db) {}
  Status start();
  void end_session();

  sqlite::Database& db_;
  sqlite3_session* session_ = nullptr;
};

// Appends the seal take() puts on a changeset: a CRC32C over it, little-endian. It catches a
// changeset damaged on its way, not one a member made up.
void seal_changeset(std::vector<std::uint8_t>& changeset);

// Changesets take() made one after another, as one sealed changeset that applies as they would
// in turn (a row inserted and then deleted is not in it at all): several batches reach the
// mirror in one message and one transaction. A changeset that is not whole is Errc::corrupt.
Result<std::vector<std::uint8_t>> merge_changesets(
    std::span<const std::vector<std::uint8_t>> sealed);

// Applies a changeset take() made to `db` in one durable transaction. A changeset that is not
// whole (its seal, a CRC32C over it, does not match), or not of SQLite's changeset form, is
// refused before SQLite reads it: SQLite 3.40's changeset reader can loop forever on a
// truncated or malformed one (found by tests/fuzz/mirror_fuzzer.cc). A change that does not fit —
// the row it updates or deletes is not as the home had it, or the row it inserts exists —
// means the copy is not in step with the home. Either way nothing is applied and the answer
// is Errc::corrupt.
Status apply_changeset(sqlite::Database& db, std::span<const std::uint8_t> sealed);

}  // namespace tidepool::store::internal
