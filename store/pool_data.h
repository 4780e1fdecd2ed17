// File data placed in a node pool (DESIGN.md, Layout): stripe unit k of inode i is kept on the
// first `copies` nodes of the ring over the pool's nodes for key (i, k), each in a sparse file
// per pool and inode, so that a file's data lives on the nodes of the pool its policy names
// (f800 for the hot tier, h500 for the cold) rather than with its shard.
//
// Each node serves the units it holds with a UnitStore; the home of the file's shard reaches
// them through PoolData, which writes every copy and reads from any good one. Every 4 KiB
// block is checked against its CRC32C on read; a copy that fails is put back from a good one
// and counted.
//
// Placement is over the pool's nodes as they were when the file moved there, kept in its
// layout, so that a node joining or leaving the pool never changes where a unit is looked for.
// While an owner is down, a write goes on to the others (write_past_down) and tells its caller
// which copies it missed; the home keeps those copies as behind, reads none of them, and copies
// the units to the node when it is back (copy_unit_to). Such a write still fails as unavailable
// (NFS3ERR_JUKEBOX, retry later) when some unit's write reached no copy that is not behind; a
// write where no copy may fall behind (write: the target of a move) fails when any owner is
// down. Reads go to the owners that are up first.
//
// Every node's UnitStore draws a boot id when it starts and answers writes and syncs with it:
// a node seen with a new one may have lost UNSTABLE data it had taken, and PoolData counts it,
// so that the home's write verifier changes and clients send that data again (RFC 1813).
#pragma once

#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/types.h"
#include "common/block_cache.h"
#include "common/status.h"
#include "common/xdr.h"
#include "store/store.h"

namespace tidepool::store {

namespace internal {
class DataFiles;
}

// One method per kind of message a node's UnitStore serves; the numbers are part of the
// backend protocol.
enum class UnitMethod : std::uint32_t {
  write = 1,  // pool, inode, offset, durable (value 1), bytes
  read,       // pool, inode, offset, length (value): the bytes
  sync,       // pool, inode, AfterSync (value): make its data durable
  truncate,   // pool, inode, size (value)
  remove,     // pool, inode
  repair,     // pool, inode, offset, bytes: whole checksum blocks put back where they fail
  drop,       // pool, inode, offset, length (value): whole checksum blocks made a hole
};
// What a sync leaves in its owner's page cache: everything, or nothing of the file (the copies
// a job writes, which would push the clients' data out of the owner's memory).
enum class AfterSync : std::uint64_t { keep_cached = 0, release_cached = 1 };
// The most bytes one drop message makes a hole of.
inline constexpr std::uint64_t kMaxDropBytes = std::uint64_t{1} << 30;
inline constexpr std::uint32_t kLastUnitMethod = static_cast<std::uint32_t>(UnitMethod::drop);
// The most pools one node keeps units of.
inline constexpr std::size_t kMaxUnitPools = 4;
// The most bytes one unit message carries.
inline constexpr std::size_t kMaxUnitMessageBytes = 4u << 20;

// The body of every unit message.
struct UnitRequest {
  std::string pool;
  InodeId inode = 0;
  std::uint64_t offset = 0;
  std::uint64_t value = 0;
  std::span<const std::uint8_t> bytes;  // write's data
};
xdr::Buffer encode_unit_request(const UnitRequest& request);
// invalid_argument when the body does not decode, names no valid pool, or reaches past the
// largest file.
Result<UnitRequest> decode_unit_request(std::span<const std::uint8_t> body);


// The stripe units this node holds, one directory of data files per pool under `root`.
// Thread-safe; every call may block on the disk.
//
// A node is in one pool and holds units of that pool only (of a few, if its pool was renamed):
// it keeps at most kMaxUnitPools pools open, each with its directories' descriptors, so that
// messages naming ever new pools cannot use up its file descriptors.
class UnitStore {
 public:
  // `l2`: the node's L2, which keeps the units read here as the shard's own data does, and
  // counts the unit reads and those it answered; null: one of 0 bytes.
  explicit UnitStore(std::string root, std::shared_ptr<L2> l2 = L2::make(0));
  ~UnitStore();
  UnitStore(const UnitStore&) = delete;
  UnitStore& operator=(const UnitStore&) = delete;

  // Serves one message: read answers the bytes (not_found when this node holds nothing of the
  // file), write and sync this store's boot id (8 bytes), the others nothing. A block that
  // fails its checksum fails the read as corrupt; an unknown method is not_supported.
  Result<xdr::Buffer> serve(std::uint32_t method, std::span<const std::uint8_t> request);

 private:
  Result<internal::DataFiles*> files_of(const std::string& pool);
  xdr::Buffer boot_reply() const;

  const std::string root_;
  const std::shared_ptr<L2> l2_;
  const std::uint64_t boot_;
  std::mutex mutex_;
  std::map<std::string, std::unique_ptr<internal::DataFiles>> pools_;  // guarded by mutex_
};

// The nodes holding unit `unit` of `inode` among `pool_nodes` (any order), in the order reads
// try them: the first `copies` of the ring over them for key (inode, unit).
std::vector<cluster::NodeId> unit_owners(std::vector<cluster::NodeId> pool_nodes, InodeId inode,
                                         std::uint64_t unit, std::uint32_t copies);

// One message to one node's UnitStore.
struct UnitCall {
  cluster::NodeId node = 0;
  UnitMethod method = UnitMethod::read;
  std::span<const std::uint8_t> request;
};

// How the home reaches the nodes of a pool. Thread-safe; call() blocks until the node answered
// or could not be reached (unavailable, timed_out).
class PoolPeers {
 public:
  virtual ~PoolPeers() = default;
  // The nodes of `pool` to place file data on, up or not, in order; empty for a pool no node
  // is in. A node down for long may be left out, so that its data is protected again on the
  // others.
  virtual std::vector<cluster::NodeId> nodes_of(const std::string& pool) = 0;
  // How many nodes of `pool` nodes_of() leaves out.
  virtual std::size_t nodes_left_out(const std::string& pool) = 0;
  // Whether the group view has `node` up: reads ask such owners first.
  virtual bool is_up(cluster::NodeId node) = 0;
  // Whether the cluster removed `node`: the group view, once known, does not hold it. What it
  // keeps is neither mended nor removed there any more.
  virtual bool is_removed(cluster::NodeId node) = 0;
  virtual Result<xdr::Buffer> call(cluster::NodeId node, UnitMethod method,
                                   std::span<const std::uint8_t> request) = 0;
  // The same without blocking a thread: resumes on the caller's executor.
  virtual boost::asio::awaitable<Result<xdr::Buffer>> call_async(cluster::NodeId node,
                                                                 UnitMethod method,
                                                                 xdr::Buffer request) = 0;
  // Each call as call() makes it, the answers in the calls' order; blocks until every one is
  // answered. These make them one after another; a peer that can have them in flight together
  // does, so that a unit's copies and a range's units cost one round trip rather than one each.
  virtual std::vector<Result<xdr::Buffer>> call_each(std::span<const UnitCall> calls);
};

// The boot ids the owners of units answered writes and syncs with, per node: a new one means
// the node restarted and may have lost what it took UNSTABLE, so the write verifier its callers
// hand out must change. Thread-safe.
class BootIds {
 public:
  // Notes the boot id that leads `reply`, from `node`, and returns it; io_error when there is
  // none.
  Result<std::uint64_t> note(cluster::NodeId node, std::span<const std::uint8_t> reply);
  // Notes a boot id `node` answered someone else with (SyncedCopies).
  void note_boot(cluster::NodeId node, std::uint64_t boot);
  // How many times a node answered with a boot id other than the one it had answered with.
  std::uint64_t restarts() const { return restarts_.load(); }

 private:
  std::mutex mutex_;
  std::map<cluster::NodeId, std::uint64_t> boots_;  // guarded by mutex_
  std::atomic<std::uint64_t> restarts_{0};
};

// A unit's copy that a write or sync did not reach, its node down or not answering; unit
// kEveryUnit: every unit of the file the node holds (a sync it missed).
inline constexpr std::uint64_t kEveryUnit = ~std::uint64_t{0};
struct MissedCopy {
  cluster::NodeId node = 0;
  std::uint64_t unit = 0;
  auto operator<=>(const MissedCopy&) const = default;
};

// Whether the copy of a unit on a node is behind (missed writes), and not to be read.
using CopyBehind = std::function<bool(cluster::NodeId node, std::uint64_t unit)>;

// Where a file's data lives when a pool holds it.
struct Placement {
  std::string pool;
  std::uint32_t copies = 0;  // each unit's copies; fewer when the pool has fewer nodes
  std::uint32_t stripe_unit = 0;
  std::vector<cluster::NodeId> nodes;  // the pool's nodes when the file moved there
  bool operator==(const Placement&) const = default;
};

// Where a file laid out so keeps its data (its pool, not a move's target).
inline Placement placement_of(const Layout& layout) {
  return Placement{layout.pool, layout.protection, layout.stripe_unit, layout.nodes};
}

// The home's side. Thread-safe; every call blocks.
class PoolData {
 public:
  PoolData(std::shared_ptr<PoolPeers> peers, std::shared_ptr<IntegrityCounters> integrity);

  // The nodes of `pool` now, to place a file there, and how many of its nodes that leaves out.
  std::vector<cluster::NodeId> nodes_of(const std::string& pool) const;
  std::size_t nodes_left_out(const std::string& pool) const { return peers_->nodes_left_out(pool); }
  bool is_up(cluster::NodeId node) const { return peers_->is_up(node); }
  bool is_removed(cluster::NodeId node) const { return peers_->is_removed(node); }
  // The nodes holding unit `unit` of `inode`; unavailable when the placement has no node.
  Result<std::vector<cluster::NodeId>> owners(const Placement& where, InodeId inode,
                                              std::uint64_t unit) const;
  // How many times a node holding units was seen to have restarted (and may have lost data
  // not yet synced). The home folds it into its write verifier.
  std::uint64_t restarts() const { return boot_ids_.restarts(); }
  // To every owner of each unit touched, but those that `hold` it already; `durable`: on their
  // disks before this returns.
  Status write(const Placement& where, InodeId inode, std::uint64_t offset,
               std::span<const std::uint8_t> data, bool durable, const CopyBehind& hold = nullptr);
  // Whether every owner of every unit of [offset, offset + length) holds it (`hold`).
  bool every_copy_held(const Placement& where, InodeId inode, std::uint64_t offset,
                       std::uint64_t length, const CopyBehind& hold) const;
  // The same, passing over owners down or not answering: their copies go into `missed` (also
  // those of units done before a failure). Each unit must reach an owner whose copy is not
  // `behind`, else unavailable.
  Status write_past_down(const Placement& where, InodeId inode, std::uint64_t offset,
                         std::span<const std::uint8_t> data, bool durable, const CopyBehind& behind,
                         std::vector<MissedCopy>& missed);
  // The copies of the units of [offset, offset + length) on nodes the view has down; unavailable
  // when a unit has no owner up whose copy is not `behind`, as a write then fails
  // (write_past_down): its copies down must not be noted behind for it, or none might be left
  // that is not.
  Result<std::vector<MissedCopy>> copies_down(const Placement& where, InodeId inode,
                                              std::uint64_t offset, std::uint64_t length,
                                              const CopyBehind& behind = nullptr) const;
  // From the first good copy of each unit that is not `behind`, owners that are up first; a
  // unit no owner holds reads as zeros (a hole). A copy that failed its checksum is put back
  // from the good one; when every copy fails, corrupt, logged with the inode and offset.
  Status read(const Placement& where, InodeId inode, std::uint64_t offset,
              std::span<std::uint8_t> into, const CopyBehind& behind = nullptr);
  // On every node of the placement; `after` says what stays in their page caches.
  Status sync(const Placement& where, InodeId inode, AfterSync after = AfterSync::keep_cached);
  // The same, passing over the nodes down or not answering, which it returns, and the nodes an
  // initiator synced already (`synced`, whose boot ids it notes); unavailable when no node
  // synced.
  Result<std::vector<cluster::NodeId>> sync_past_down(const Placement& where, InodeId inode,
                                                      const std::vector<SyncedNode>& synced = {});
  // Whether every unit of [0, end) has an owner outside `missed` whose copy is not `behind`.
  bool every_unit_kept(const Placement& where, InodeId inode, std::uint64_t end,
                       const std::vector<cluster::NodeId>& missed, const CopyBehind& behind) const;
  // The units of [0, end) that `node` holds copies of.
  std::vector<std::uint64_t> units_held_by(const Placement& where, InodeId inode,
                                           cluster::NodeId node, std::uint64_t end) const;
  // Within one pool: makes [begin, end) (whole checksum blocks) of each unit a hole on the
  // nodes `from` places it on and `keep` does not, or does with a copy `behind` (what a restripe
  // leaves behind, or a given-up one wrote). Durable once the nodes sync the file. Tries every
  // node the view has up; the first failure is returned (unavailable for a node down), and the
  // nodes that keep some of the units go into `left`, when given.
  Status drop_units(const Placement& from, const Placement& keep, InodeId inode,
                    std::uint64_t begin, std::uint64_t end, const CopyBehind& behind,
                    std::vector<cluster::NodeId>* left = nullptr);
  // Puts a good copy of the whole unit (one not `behind`, not `node`'s) on `node`, durably.
  // io_error when there is no good copy to read; the write's own error otherwise.
  Status copy_unit_to(const Placement& where, InodeId inode, std::uint64_t unit,
                      cluster::NodeId node, const CopyBehind& behind);
  Status truncate(const Placement& where, InodeId inode, std::uint64_t size);
  // Removes the file's units from every node of the placement the view has up; returns the
  // nodes that keep them (down, or not answering).
  std::vector<cluster::NodeId> remove(const Placement& where, InodeId inode);

 private:
  // Calls `visit` with each unit of [begin, end) of the file and its owners, in order, until it
  // returns false.
  static void for_each_unit_owners(
      const Placement& where, InodeId inode, std::uint64_t begin, std::uint64_t end,
      const std::function<bool(std::uint64_t unit, const std::vector<cluster::NodeId>& owners)>&
          visit);
  // Calls `visit` for each unit's piece of [offset, offset + length): the unit, where the piece
  // starts in the range, and its length; stops at the first failure.
  static Status for_each_unit(std::uint32_t stripe_unit, std::uint64_t offset, std::size_t length,
                       const std::function<Status(std::uint64_t unit, std::size_t done,
                                                  std::size_t piece)>& visit);
  Status read_unit(const Placement& where, InodeId inode, std::uint64_t offset,
                   std::span<std::uint8_t> into, const CopyBehind& behind);
  // The owners of `unit` that reads try, in order: those not `behind`, the ones up first;
  // unavailable when every copy is behind.
  Result<std::vector<cluster::NodeId>> read_order(const Placement& where, InodeId inode,
                                                  std::uint64_t unit,
                                                  const CopyBehind& behind) const;
  // Reads `into` (within one unit) from the first of `nodes` that has a good copy, asking with
  // `request` (its read message); `first`, when given, is what nodes[0] answered already.
  Status read_from(const Placement& where, InodeId inode, std::uint64_t offset,
                   std::span<std::uint8_t> into, const std::vector<cluster::NodeId>& nodes,
                   const xdr::Buffer& request, std::optional<Result<xdr::Buffer>> first);
  // peers_->call_each, at most kUnitCallsInFlight calls at a time.
  std::vector<Result<xdr::Buffer>> call_each(std::span<const UnitCall> calls);
  // What a write or sync's answer from `node` says, its boot id noted.
  Status boot_noted(cluster::NodeId node, const Result<xdr::Buffer>& answer);
  void repair(const Placement& where, InodeId inode, std::uint64_t offset, std::size_t length,
              cluster::NodeId good, const std::vector<cluster::NodeId>& bad);
  // Whether an owner of `unit` is up and holds a copy that is not `behind`.
  bool current_copy_up(const std::vector<cluster::NodeId>& owners, std::uint64_t unit,
                       const CopyBehind& behind) const;
  static Status no_current_copy_up(InodeId inode, std::uint64_t unit);
  Status write_units(const Placement& where, InodeId inode, std::uint64_t offset,
                     std::span<const std::uint8_t> data, bool durable, const CopyBehind& behind,
                     std::vector<MissedCopy>* missed, const CopyBehind& hold = nullptr);
  // A write or sync to `node`, noting its boot id.
  Status call_counting_boots(cluster::NodeId node, UnitMethod method, const xdr::Buffer& request);

  const std::shared_ptr<PoolPeers> peers_;
  const std::shared_ptr<IntegrityCounters> integrity_;
  BootIds boot_ids_;
};

}  // namespace tidepool::store
