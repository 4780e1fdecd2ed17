// The namespace's locks on directories (store::NamespaceLocks) for a node of a cluster. A key
// is held in this process, and for the node as a lock of the lock manager on the directory
// (lockmgr::ResourceKind::directory) — concurrent-write for a shared holder, exclusive for an
// exclusive one: changes across shards that different nodes coordinate exclude each other as
// those of one node do. The keys are taken in order, so two
// changes never wait for each other in a cycle. The node's lock cache keeps a lock after use
// until another node wants it, so a node that keeps moving entries between the same
// directories asks the lock manager once.
//
// While no lock manager is attached — on a node outside any cluster, before it joins or after
// it left — this process's own locks are the namespace's: no other node coordinates with it.
//
// Known limit: a lock the lock manager takes from the node while a change holds it (the node
// dropped from the view) is not told to that change, which goes on under the process's lock
// and the keys its prepared parts hold.
#pragma once

#include <memory>
#include <vector>

#include "cluster/event_loop.h"
#include "lockmgr/lock_manager.h"
#include "store/namespace.h"

namespace tidepool::cache {

class DirectoryLocks final : public store::NamespaceLocks {
 public:
  DirectoryLocks();
  ~DirectoryLocks() override;

  // As CoherentStore::attach: on the lock manager's loop; null before the lock manager goes
  // (and before this goes, if attached).
  void attach(cluster::EventLoop* loop, lockmgr::LockManager* manager);

  store::awaitable<Result<std::shared_ptr<void>>> lock(std::vector<store::InodeId> keys,
                                                       store::LockMode mode) override;

 private:
  class Impl;
  const std::shared_ptr<Impl> impl_;
};

}  // namespace tidepool::cache
