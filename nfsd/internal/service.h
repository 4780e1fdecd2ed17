// What the RPC programs of one node share: the store, the exports, the handle sealer, the
// duplicate request cache and the advertised limits.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/config.h"
#include "nfsd/internal/duplicate_request_cache.h"
#include "nfsd/internal/exports.h"
#include "nfsd/internal/file_handle.h"
#include "store/store.h"

namespace tidepool::nfsd {

struct Service {
  Service(store::Store& s, const NodeConfig& c, HandleSealer h)
      : store(s),
        config(c),
        exports(c.exports),
        sealer(h),
        replies(c.duplicate_request_cache_entries),
        fsid(0x7469646500000000ull | c.node_id) {}

  store::Store& store;
  const NodeConfig& config;
  LiveExports exports;
  HandleSealer sealer;
  DuplicateRequestCache replies;
  std::uint64_t fsid;

  // Walks `components` from `from` as root (as knfsd does for MOUNT) to a directory's
  // attributes; fails on anything that is not a directory along the way.
  awaitable<Result<store::Attributes>> resolve(store::InodeId from,
                                            std::vector<std::string> components);
  // The export's root directory inode, resolved once and remembered. `e` is from a snapshot the
  // caller holds until this completes.
  awaitable<Result<store::InodeId>> export_root(const Export& e);
};

}  // namespace tidepool::nfsd
