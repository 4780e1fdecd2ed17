#include "store/internal/cross_shard_holds.h"

#include <string>

namespace tidepool::store::internal {

CrossShardHolds::Keys CrossShardHolds::keys_of(const std::vector<ShardStep>& steps) {
  Keys keys;
  for (const ShardStep& step : steps) {
    switch (step.kind) {
      case StepKind::add_entry:
        keys.entries.insert({step.directory, step.name});
        keys.pinned.insert(step.directory);
        break;
      case StepKind::remove_entry:
        keys.entries.insert({step.directory, step.name});
        break;
      case StepKind::make_inode:
        break;
      case StepKind::remove_directory:
        keys.sealed.insert(step.inode);
        keys.inodes.insert(step.inode);
        break;
      case StepKind::add_links:
      case StepKind::set_parent:
        keys.inodes.insert(step.inode);
        break;
    }
  }
  return keys;
}

Status CrossShardHolds::held_elsewhere() {
  return error(Errc::unavailable, "held by a change across shards under way; retry shortly");
}

Status CrossShardHolds::check_entry(InodeId directory, std::string_view name) const {
  if (entries_.contains({directory, std::string(name)})) return held_elsewhere();
  return {};
}

Status CrossShardHolds::check_inode(InodeId inode) const {
  return inodes_.contains(inode) || pinned_.contains(inode) ? held_elsewhere() : Status{};
}

Status CrossShardHolds::check_not_sealed(InodeId directory) const {
  return sealed_.contains(directory) ? held_elsewhere() : Status{};
}

Status CrossShardHolds::check_free(const Keys& keys) const {
  for (const auto& entry : keys.entries) {
    TP_RETURN_IF_ERROR(check_entry(entry.directory, entry.name));
  }
  for (InodeId inode : keys.inodes) TP_RETURN_IF_ERROR(check_inode(inode));
  for (InodeId inode : keys.pinned) {
    if (inodes_.contains(inode)) return held_elsewhere();
  }
  return {};
}

void CrossShardHolds::hold(TransactionId id, Keys keys) {
  entries_.insert(keys.entries.begin(), keys.entries.end());
  inodes_.insert(keys.inodes.begin(), keys.inodes.end());
  for (InodeId inode : keys.pinned) ++pinned_[inode];
  sealed_.insert(keys.sealed.begin(), keys.sealed.end());
  parts_.emplace(id, std::move(keys));
}

void CrossShardHolds::release(TransactionId id) {
  auto held = parts_.find(id);
  if (held == parts_.end()) return;
  for (const auto& entry : held->second.entries) entries_.erase(entry);
  for (InodeId inode : held->second.inodes) inodes_.erase(inode);
  for (InodeId inode : held->second.pinned) {
    if (--pinned_[inode] == 0) pinned_.erase(inode);
  }
  for (InodeId inode : held->second.sealed) sealed_.erase(inode);
  parts_.erase(held);
}

}  // namespace tidepool::store::internal
