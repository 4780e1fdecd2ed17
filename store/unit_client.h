// An initiator's own way to a file's data (DESIGN.md, Read path and Write path): the stripe
// units of a file placed in a node pool, read from and written to their owners directly over
// backend RPC, nothing relayed through the file's home.
//
// Only for a layout that serves() — its data in a pool, no move under way, no copy behind —
// and only while the caller holds the file's data lock (cache/coherent_store.h), under which
// the layout it read stays true: a move or a restripe changes a layout only under that lock
// held exclusively. Anything else, and every failure here, goes the home's way, which knows the
// copies behind and the moves, and repairs copies that fail their checksums.
//
// Thread-safe; every call resumes on its caller's executor and blocks no thread.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "common/status.h"
#include "common/xdr.h"
#include "store/pool_data.h"
#include "store/store.h"

namespace tidepool::store {

class UnitClient {
 public:
  explicit UnitClient(std::shared_ptr<PoolPeers> peers);

  // Whether a file laid out so is read and written at its units' owners directly.
  static bool serves(const Layout& layout);

  // Bytes [offset, offset + length) of the file, within one of its units: from the first of the
  // unit's owners that is up and answers; zeros when no owner holds anything of the file (a
  // hole). Unavailable when no copy could be read whole (an owner away), or one fails its
  // checksum: the home's way then puts it back from a good one.
  boost::asio::awaitable<Result<xdr::Buffer>> read(const Layout& layout, InodeId inode,
                                                   std::uint64_t offset, std::uint32_t length);
  // To every owner of every unit the bytes touch, all at once; `durable`: on their disks before
  // this returns. Unavailable when an owner is down or does not take its part: copies may then
  // differ, until the caller writes the bytes again the home's way.
  boost::asio::awaitable<Status> write(const Layout& layout, InodeId inode, std::uint64_t offset,
                                       std::span<const std::uint8_t> data, bool durable);
  // Makes what the file's units took durable on every node of its layout that the view has up,
  // and returns those that did it, with their boot ids; the home's COMMIT, which follows, syncs
  // the others, or notes their copies behind.
  boost::asio::awaitable<std::vector<SyncedNode>> sync(const Layout& layout, InodeId inode);
  // How many times an owner answered a write or a sync with a new boot id: it restarted, and
  // may have lost what it took UNSTABLE. Folded into the write verifier the caller hands out.
  std::uint64_t restarts() const { return boot_ids_.restarts(); }

 private:
  // A call whose reply is the owner's boot id (write, sync).
  boost::asio::awaitable<Status> call_counting_boots(cluster::NodeId node, UnitMethod method,
                                                     xdr::Buffer request);

  // A sync of `node` whose boot id goes into (*synced)[slot] once it answers.
  boost::asio::awaitable<Status> sync_noting(
      cluster::NodeId node, xdr::Buffer request,
      std::shared_ptr<std::vector<std::optional<SyncedNode>>> synced, std::size_t slot);

  const std::shared_ptr<PoolPeers> peers_;
  BootIds boot_ids_;
};

}  // namespace tidepool::store
