// How a shard's home keeps its mirror in step (store/shard_mirror.h): a whole copy of the
// shard when a mirror is attached (the database as committed and every data file), then each
// batch's changes, merged with the batches committed since the last message into one message
// sent on the sync thread, in commit order, before the batch's changing operations complete;
// and, from the data path, every write, sync, truncation and removal of data the shard keeps.
//
// Thread safety: attach() runs on the shard thread holding the gate exclusively, so writers wait
// while a whole copy is taken: it holds every change made before it, and the mirror receives
// every change made after. Data operations hold the gate shared (gate()) while their bytes go
// to the disk and the mirror; batch_done() runs on the shard thread, the deliveries it returns
// on the sync thread.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <vector>

#include "common/sqlite.h"
#include "store/internal/data_files.h"
#include "store/internal/shard_executor.h"
#include "store/internal/shard_replication.h"
#include "store/shard_mirror.h"

namespace tidepool::store::internal {

// A whole copy for a new mirror, and a repair from the mirror's copy, go in pieces of this
// size.
inline constexpr std::size_t kCopyChunkBytes = 1u << 20;

class MirrorFeed {
 public:
  // `data`: the shard's data files; `image`: where the copy of the database is made.
  MirrorFeed(DataFiles& data, std::string image);

  // On the shard thread: keeps `mirror` in step from now on, after a whole copy; null stops
  // mirroring. Fails, leaving the shard unmirrored, when the copy did not complete.
  Status attach(sqlite::Database& db, std::shared_ptr<MirrorTarget> mirror);
  // On the shard thread after each batch: what the batch's delivery is (its changes to the
  // mirror), once it committed; `changing`: it ran changing operations, which wait for the
  // mirror even when they changed no row (they may have read what an earlier batch changed).
  Delivery batch_done(bool committed, bool changing);
  // Once the shard thread, the sync thread and the store's threads stopped, before the
  // database goes: the recorder's session is attached to the database and must be deleted
  // first (sqlite3session_delete locks and writes the connection).
  void detach();

  // Held shared by data operations while their bytes go to the disk and the mirror.
  std::shared_lock<std::shared_mutex> gate() { return std::shared_lock(gate_); }
  // Holding the gate shared, or on the shard thread: whether a mirror is kept in step.
  bool mirrored() const { return mirror_ != nullptr; }
  // Holding the gate shared: sends a data message; nothing to do without a mirror.
  Status send(MirrorMethod method, std::span<const std::uint8_t> message);
  // Holding the gate shared: the mirror's answer to a read; unavailable without a mirror.
  Result<xdr::Buffer> fetch(MirrorMethod method, std::span<const std::uint8_t> message);

 private:
  // Batches' changes committed and not sent to the mirror yet, in commit order: added on the
  // shard thread, sent on the sync thread.
  struct Undelivered {
    std::uint64_t generation;  // generation_ when they committed
    std::vector<std::uint8_t> changes;
    std::shared_ptr<std::optional<Status>> outcome;  // set by the message that carried them
  };

  // Sends the mirror the database as committed and every data file as on disk — all of it,
  // not only up to each inode's size: a write whose data is down but whose size update has not
  // run yet must find its data on the mirror when the update arrives there.
  Status copy_whole_shard(sqlite::Database& db, MirrorTarget& mirror);
  static Status send_file(const std::string& path, MirrorTarget& mirror);
  // On the sync thread: sends the mirror every batch's changes not sent yet, merged into one
  // message (one transaction there, one sync), and tells each batch how that went. Once a
  // message failed (and the mirror could not be dropped), every later batch fails the same
  // way until a whole copy is taken: the mirror missed changes the later ones build on.
  void deliver_changes();

  DataFiles& data_;
  const std::string image_;

  // Set on the shard thread holding gate_ exclusively; read there, or elsewhere holding it
  // shared.
  std::shared_mutex gate_;
  std::shared_ptr<MirrorTarget> mirror_;
  std::unique_ptr<ChangeRecorder> recorder_;  // while mirror_ is set
  // Changes queued before a whole copy was taken for the mirror are in the copy: deliveries
  // compare the generation they were queued under with this one, which attach() moves.
  std::uint64_t generation_ = 0;
  std::mutex undelivered_mutex_;
  std::vector<Undelivered> undelivered_;  // guarded by undelivered_mutex_
  // The sync thread's: the generation whose changes stopped reaching the mirror, and why.
  std::uint64_t undelivered_since_ = std::numeric_limits<std::uint64_t>::max();
  Status undelivered_reason_;
};

}  // namespace tidepool::store::internal
