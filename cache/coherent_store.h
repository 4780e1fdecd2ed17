// A node's coherent cache in front of the namespace (DESIGN.md, Read path and Coherence through
// the DLM): the Store the NFS front end serves from.
//
// L1 holds blocks of files whose data lives on other nodes, fetched whole (one stripe unit a
// block) and valid only while this node holds a PR lock on the file's data: reads take that
// lock (cached on the node after them), writes, truncations and access-pattern changes take PW,
// whichever node they run on, and so do REMOVE, RENAME and LINK for the regular files whose
// names they change (their link counts and ctimes). A blocking callback that leaves the node
// nothing to read under drops the file's blocks and cached attributes before the lock goes, so
// a write acknowledged to any client is seen by every read on any node that starts after it.
//
// A regular file's attributes are kept under a PR lock too: the data lock when a fetch brought
// them, else the file's attributes' lock, which a GETATTR or an ACCESS takes when the node
// holds neither. Either lock held, those answer from L1 without asking the home. Every change
// of a file takes PW on both its locks. Directories' attributes (which entries made in them
// change) are never kept. Access times that reads move on the home are not pushed to the nodes
// that cached the file: theirs lag until their lock goes (atime moves once per grace period).
//
// SmartRead: each READ of a file read through L1 asks the prefetcher how far ahead the client's
// stream should be, and fetches that in the background, every block once (a demand read of a
// block being prefetched waits for that fetch).
//
// Owner-direct (DESIGN.md, Read path and Write path): a file placed in a node pool is read and
// written at its units' owners by this node itself (store::UnitClient), nothing relayed through
// its home. Its layout is learnt from the home once and kept with its attributes under the data
// lock, dropped by the same callbacks; a home changes a layout (a move, a restripe, a copy that
// fell behind) only with the data lock held exclusively (cache/layout_locks.h). A write goes to
// every copy of each unit it touches, then the home records the size and times (record_write),
// refusing a layout that is not the file's any more. A layout that lets nothing go directly (data
// kept with its shard, a move under way, a copy behind), or any failure, goes the home's way.
//
// Reads of files whose data is on this node go to it directly: its own page cache and
// attribute cache answer them (the L2 this counts). Until locks are attached (the node is no
// member of a cluster) nothing is cached and writes take no lock.
//
// Thread-safe. Operations complete on the caller's executor.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "cache/cache_options.h"
#include "cluster/event_loop.h"
#include "common/block_cache.h"
#include "lockmgr/lock_manager.h"
#include "store/forwarding_store.h"
#include "store/store.h"
#include "store/unit_client.h"

namespace tidepool::cache {

using boost::asio::awaitable;

class CoherentStore final : public store::ForwardingStore {
 public:
  // `inner` is the namespace as this node reaches it (store::ShardRouter); `data_is_local`
  // whether an inode's data is on this node's own disks now (the node is its shard's home).
  // Both outlive the cache. `units`: how this node reads and writes the units of files placed
  // in node pools at their owners directly; null goes the home's way for every file.
  using DataIsLocal = std::function<bool(store::InodeId)>;
  CoherentStore(store::Store& inner, DataIsLocal data_is_local, CacheOptions options,
                std::shared_ptr<store::UnitClient> units = nullptr);
  ~CoherentStore() override;

  // The node's lock manager started, or, with null, is about to stop: caching starts, or every
  // cached block is dropped and caching stops. On the lock manager's loop; detach before the
  // lock manager goes.
  void attach(cluster::EventLoop* loop, lockmgr::LockManager* manager);
  CacheStatistics statistics() const;
  // The L1 budget, in bytes.
  std::size_t l1_budget() const;
  // Drops every L1 block nobody is reading and every attribute cached (tide flush --l1).
  void flush();

  // The home's, changed too when an owner this node wrote to directly restarted.
  std::uint64_t write_verifier() const override;
  // Also kept here: a read from L1 is reported to the file's home only when the cached atime is
  // past the grace period (the home passes the others over).
  void set_atime_policy(bool enabled, std::chrono::seconds grace_period) override;

  awaitable<Result<store::Attributes>> getattr(store::InodeId inode) override;
  awaitable<Result<store::Wcc>> setattr(store::InodeId inode, store::AttributeChanges changes,
                                        store::Caller caller,
                                        std::optional<std::int64_t> guard_ctime_ns) override;
  awaitable<Result<store::AccessResult>> check_access(store::InodeId inode, store::Caller caller,
                                                      std::uint32_t requested) override;
  awaitable<Result<store::Layout>> set_access_pattern(store::InodeId inode,
                                                      std::string pattern) override;
  awaitable<Result<store::ReadResult>> read(store::InodeId inode, std::uint64_t offset,
                                            std::span<std::uint8_t> into,
                                            store::Caller caller) override;
  // READs of files read through L1 are answered with their blocks, pinned until the reply
  // is sent.
  awaitable<Result<store::ReadPieces>> read_pieces(store::InodeId inode, std::uint64_t offset,
                                                   std::uint32_t count,
                                                   store::Caller caller) override;
  awaitable<Result<store::WriteResult>> write(store::InodeId inode, std::uint64_t offset,
                                              std::span<const std::uint8_t> data,
                                              store::Stability stability,
                                              store::Caller caller) override;
  awaitable<Result<store::NewObject>> create(store::InodeId directory, std::string name,
                                             store::CreateMode mode,
                                             store::AttributeChanges initial,
                                             store::CreateVerifier verifier,
                                             store::Caller caller) override;
  awaitable<Result<store::Wcc>> remove(store::InodeId directory, std::string name,
                                       store::Caller caller) override;
  awaitable<Result<store::RenameResult>> rename(store::InodeId from_directory,
                                                std::string from_name, store::InodeId to_directory,
                                                std::string to_name, store::Caller caller) override;
  awaitable<Result<store::LinkResult>> link(store::InodeId file, store::InodeId directory,
                                            std::string name, store::Caller caller) override;
  // Syncs the owners of the file's units itself, then has the home commit the rest; `synced`
  // goes to the home as it is when this node syncs none.
  awaitable<Result<store::Wcc>> commit(store::InodeId inode, store::SyncedCopies synced) override;
  // Every other operation goes to the inner store as it is (ForwardingStore). Among them
  // migrate: the bytes stay what they were, so caches of them stay good, and no lock is taken.

 protected:
  Result<std::shared_ptr<store::Store>> next(store::InodeId addressed) const override;

 private:
  class Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace tidepool::cache
