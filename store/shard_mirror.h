// The mirror of a shard: a second copy, on another node, kept in step by the home so that it
// can take the home's place when the home dies without losing anything the home acknowledged.
//
// The home's LocalStore sends what it changed through a MirrorTarget: rows as SQLite changesets
// (store/internal/shard_replication.h), file data as the writes, truncations and removals it
// made. A new mirror first receives a whole copy. The mirror's node keeps the copy in a
// ShardCopy, in the same files a LocalStore opens, so that promoting it is opening a store.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <string>
#include <vector>

#include "common/sqlite.h"
#include "common/status.h"
#include "common/xdr.h"
#include "store/store.h"

namespace tidepool::store {

namespace internal {
class DataFiles;
}

// One method per kind of message; the numbers are part of the backend protocol.
enum class MirrorMethod : std::uint32_t {
  changes = 1,    // a sealed changeset, applied durably
  write,          // inode, offset, durable flag, data
  sync,           // inode: make its data durable
  truncate,       // inode, size
  remove,         // inode
  copy_begin,     // start over: the copy is discarded
  copy_database,  // offset, bytes of the database image
  copy_data,      // inode, offset, data of a whole copy
  copy_end,       // the whole copy arrived: make it durable and open it
  read,           // inode, offset, length: the copy's data, to repair the home's
};
inline constexpr std::uint32_t kLastMirrorMethod = static_cast<std::uint32_t>(MirrorMethod::read);

// Where the home sends its changes. call() blocks the store thread that makes it until the
// mirror answered, and fails when it did not take the change. It is also where losing the
// mirror is handled: a target that could make the cluster stop counting on its mirror (so
// that it is never promoted with the change missing) answers ok from then on.
class MirrorTarget {
 public:
  virtual ~MirrorTarget() = default;
  virtual Status call(MirrorMethod method, std::span<const std::uint8_t> request) = 0;
  // Blocks like call(), for a message the mirror answers with bytes (read). Its failure
  // changes nothing: the mirror is not dropped for it.
  virtual Result<xdr::Buffer> fetch(MirrorMethod method, std::span<const std::uint8_t> request) = 0;
};

// The mirror's side. Thread-safe: data messages run concurrently, the rest one at a time.
class ShardCopy {
 public:
  // Opens the copy in `data_dir` as it is on disk; it takes changes only after a whole copy
  // arrived since: a copy that missed changes while its node was down is refused rather
  // than patched.
  static Result<std::unique_ptr<ShardCopy>> open(const std::string& data_dir);
  ~ShardCopy();
  ShardCopy(const ShardCopy&) = delete;
  ShardCopy& operator=(const ShardCopy&) = delete;

  // Applies one message from the home. A message that does not decode is invalid_argument; a
  // change while the copy is not in step (or closed), unavailable.
  Status apply(std::uint32_t method, std::span<const std::uint8_t> request);
  // Answers a read message with the copy's data, verified against its checksums. Only while
  // in step: a copy that is behind would hand out old data.
  Result<xdr::Buffer> read(std::span<const std::uint8_t> request);
  // Makes the copy durable and releases its files; later messages fail as unavailable.
  void close();

 private:
  explicit ShardCopy(std::string data_dir);
  Status begin_copy();
  Status end_copy();
  Status open_database();

  const std::string data_dir_;
  // Data messages hold it shared; database messages, copies and close() exclusively.
  std::shared_mutex mutex_;
  std::unique_ptr<internal::DataFiles> data_;
  std::unique_ptr<sqlite::Database> db_;
  bool in_step_ = false;
  bool closed_ = false;
  int incoming_fd_ = -1;  // the database image being received
};

}  // namespace tidepool::store
