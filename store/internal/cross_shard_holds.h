// What the parts of changes across shards prepared on a shard hold against every other change
// (store/cross_shard.h): entries neither added, removed nor replaced, inodes neither removed,
// linked nor moved, directories not removed (pinned, possibly by several parts) or taking no
// new entry (sealed). A change that meets a hold is refused as unavailable: retry shortly.
//
// Owned by the shard thread: every call runs there, so it needs no lock.
#pragma once

#include <set>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/status.h"
#include "store/cross_shard.h"
#include "store/internal/attribute_cache.h"

namespace tidepool::store::internal {

class CrossShardHolds {
 public:
  // What a prepared part holds, worked out from its steps alone (so that recovery holds the
  // same again).
  struct Keys {
    std::set<EntryName> entries;  // neither added, removed nor replaced
    std::set<InodeId> inodes;     // neither removed, linked nor moved: by this part alone
    std::set<InodeId> pinned;     // directories not removed: others may pin them too
    std::set<InodeId> sealed;     // directories that take no new entry
  };
  static Keys keys_of(const std::vector<ShardStep>& steps);
  // The refusal every check below answers with.
  static Status held_elsewhere();

  Status check_entry(InodeId directory, std::string_view name) const;
  // Whether an inode may be removed, relinked or moved: no part holds or pins it.
  Status check_inode(InodeId inode) const;
  // Whether `directory` may take a new entry.
  Status check_not_sealed(InodeId directory) const;
  // Whether a part holding `keys` may be prepared: nothing another part holds is among them.
  Status check_free(const Keys& keys) const;

  void hold(TransactionId id, Keys keys);
  // What part `id` held is free again; nothing when it holds nothing.
  void release(TransactionId id);

 private:
  std::unordered_map<TransactionId, Keys> parts_;
  std::set<EntryName> entries_;
  std::unordered_set<InodeId> inodes_;
  std::unordered_map<InodeId, int> pinned_;  // by how many parts
  std::unordered_set<InodeId> sealed_;
};

}  // namespace tidepool::store::internal
