// The locks the shards' homes take around a change of a file's layout (store::LayoutLocks): the
// file's data lock of the lock manager (lockmgr::ResourceKind::data), taken exclusively by a
// holder of its own on the node, so that the node's cache (cache/coherent_store.h), which reads
// and writes a file's units at their owners under that lock with the layout it cached, gives
// the lock up, and the layout with it, like every other node's.
//
// While no lock manager is attached — a node outside any cluster, before it joins or after it
// left — no node caches layouts, and the lock is held at once.
#pragma once

#include <memory>

#include "cluster/event_loop.h"
#include "lockmgr/lock_manager.h"
#include "store/store.h"

namespace tidepool::cache {

class LayoutLocks final : public store::LayoutLocks {
 public:
  LayoutLocks();
  ~LayoutLocks() override;

  // As CoherentStore::attach: on the lock manager's loop; null before the lock manager goes
  // (and before this goes, if attached).
  void attach(cluster::EventLoop* loop, lockmgr::LockManager* manager);

  store::awaitable<Result<std::shared_ptr<void>>> exclusive(store::InodeId inode) override;

 private:
  class Impl;
  const std::shared_ptr<Impl> impl_;
};

}  // namespace tidepool::cache
