// What the RPC programs of one node share: the store, the exports, the handle sealer, the
// duplicate request cache and the advertised limits.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cluster/lease.h"
#include "common/config.h"
#include "nfsd/call_statistics.h"
#include "nfsd/internal/duplicate_request_cache.h"
#include "nfsd/internal/exports.h"
#include "nfsd/internal/file_handle.h"
#include "store/store.h"

namespace tidepool::nfsd {

struct Service {
  Service(store::Store& s, const NodeConfig& c, HandleSealer h, CallStatistics& calls)
      : store(s),
        config(c),
        statistics(calls),
        exports(c.exports),
        current_sealer(std::make_shared<const HandleSealer>(std::move(h))),
        replies(c.duplicate_request_cache_entries),
        fsid(0x7469646500000000ull | c.node_id) {}

  store::Store& store;
  const NodeConfig& config;
  CallStatistics& statistics;
  LiveExports exports;
  // Replaced when the node joins a cluster and takes the cluster's handle key.
  std::atomic<std::shared_ptr<const HandleSealer>> current_sealer;
  DuplicateRequestCache replies;
  std::uint64_t fsid;

  std::shared_ptr<const HandleSealer> sealer() const { return current_sealer.load(); }

  // Whether `exported` takes this call: access_denied from a host it does not name,
  // not_permitted from an unprivileged source port when it is secure (counted, and logged the
  // first time).
  Status admit(const Export& exported, const CallContext& context) const;

  // This node's lease (cluster/lease.h) while it is a cluster member; null otherwise, when
  // nothing it holds can be taken from it.
  std::atomic<std::shared_ptr<const cluster::Lease>> lease;
  // Now, on the lease's clock; 0 without a lease.
  std::uint64_t lease_clock() const {
    auto held = lease.load();
    return held ? held->now_ms() : 0;
  }
  // Whether the lease held without a break since `start` (a lease_clock() time), or no lease
  // applies.
  bool lease_held_since(std::uint64_t start) const {
    auto held = lease.load();
    return !held || held->held_since(start);
  }
  // Waits a little for the lease, as a node gets it back within moments after a pause or a
  // restart and clients retry a refusal only seconds later. The time it is held from (to check
  // again with lease_held_since before answering), or nothing: answer "retry later" — also
  // when the node was fenced while the call waited, since the call may have been sent under a
  // lock the group gave away meanwhile, before its client could be told.
  awaitable<std::optional<std::uint64_t>> held_lease() const;
  // Counts a call answered "retry later" for want of a lease; the first is logged.
  void refused_for_want_of_lease() const;

  // Walks `components` from `from` as root (as knfsd does for MOUNT) to a directory's
  // attributes; fails on anything that is not a directory along the way.
  awaitable<Result<store::Attributes>> resolve(store::InodeId from,
                                            std::vector<std::string> components);
  // The export's root directory inode, resolved once and remembered. `e` is from a snapshot the
  // caller holds until this completes.
  awaitable<Result<store::InodeId>> export_root(const Export& e);
};

}  // namespace tidepool::nfsd
