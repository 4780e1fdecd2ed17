// CoherentStore::Impl: writes under the file's PW (owner-direct, or the home's way), commits,
// the write verifier, and the files a change of a name touches.
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cache/internal/coherent_store_impl.h"

namespace tidepool::cache {

awaitable<Result<store::WriteResult>> CoherentStore::Impl::write_under_lock(
    InodeId inode, std::uint64_t offset, std::span<const std::uint8_t> data,
    store::Stability stability, store::Caller caller, std::uint64_t fences) {
  if (units_ && locks_.load() && !data_is_local_(inode) && !data.empty()) {
    auto learning = layout_and_rights(inode);
    Result<std::pair<store::Layout, store::Attributes>> known = co_await std::move(learning);
    if (known.ok() && store::UnitClient::serves(known->first) &&
        store::check_write_access(known->second, caller).ok()) {
      // Learning the layout waited on the home: the node may have been fenced meanwhile.
      if (Status locked = still_locked_since(fences); !locked.ok()) co_return locked;
      auto writing =
          units_->write(known->first, inode, offset, data, stability != store::Stability::unstable);
      const Status written = co_await std::move(writing);
      if (Status locked = still_locked_since(fences); !locked.ok()) co_return locked;
      if (written.ok()) {
        auto recording = inner_.record_write(inode, offset, static_cast<std::uint32_t>(data.size()),
                                             stability, caller, known->first);
        Result<store::WriteResult> recorded = co_await std::move(recording);
        if (recorded.code() != Errc::unavailable) co_return recorded;
      }
      forget_layout(inode);
    }
  }
  if (Status locked = still_locked_since(fences); !locked.ok()) co_return locked;
  auto writing = inner_.write(inode, offset, data, stability, std::move(caller));
  Result<store::WriteResult> written = co_await std::move(writing);
  // A reader here may have learnt the layout while the home's write went on, before it noted
  // the copies the write missed: it is learnt again.
  forget_layout(inode);
  co_return written;
}

awaitable<Result<std::pair<store::Layout, store::Attributes>>>
CoherentStore::Impl::layout_and_rights(InodeId inode) {
  const std::uint64_t generation = generation_of(inode);
  std::optional<store::Layout> layout;
  std::optional<store::Attributes> rights;
  {
    FileStripe& stripe = stripe_of(inode);
    std::lock_guard guard(stripe.mutex);
    if (auto it = stripe.files.find(inode); it != stripe.files.end()) {
      layout = it->second.layout;
      rights = it->second.rights ? it->second.rights : it->second.attributes;
    }
  }
  if (!layout) {
    auto asking = inner_.layout(inode);
    Result<store::Layout> asked = co_await std::move(asking);
    if (!asked.ok()) co_return asked.status();
    layout = std::move(*asked);
  }
  if (!rights) {
    auto asking = inner_.getattr(inode);
    Result<store::Attributes> asked = co_await std::move(asking);
    if (!asked.ok()) co_return asked.status();
    rights = std::move(*asked);
  }
  FileStripe& stripe = stripe_of(inode);
  std::lock_guard guard(stripe.mutex);
  if (auto it = stripe.files.find(inode);
      it != stripe.files.end() && it->second.generation == generation) {
    it->second.layout = layout;
    it->second.rights = rights;
  }
  co_return std::pair{std::move(*layout), std::move(*rights)};
}

awaitable<Result<store::Wcc>> CoherentStore::Impl::commit(InodeId inode,
                                                          store::SyncedCopies synced) {
  if (units_ && locks_.load() && !data_is_local_(inode)) {
    std::optional<store::Layout> layout = known_layout(inode);
    if (!layout) {
      auto asking = inner_.layout(inode);
      Result<store::Layout> asked = co_await std::move(asking);
      if (asked.ok()) layout = std::move(*asked);
    }
    if (layout && layout->pool != store::kWithShard && !layout->nodes.empty()) {
      auto syncing = units_->sync(*layout, inode);
      std::vector<store::SyncedNode> nodes = co_await std::move(syncing);
      synced.layout = std::move(*layout);
      synced.nodes = std::move(nodes);
    }
  }
  auto committing = inner_.commit(inode, std::move(synced));
  co_return co_await std::move(committing);
}

std::uint64_t CoherentStore::Impl::verifier_of(std::uint64_t home) const {
  const std::uint64_t restarts = units_ ? units_->restarts() : 0;
  return home ^ (restarts * 0xc2b2ae3d27d4eb4full);
}

awaitable<std::vector<store::InodeId>> CoherentStore::Impl::file_named(InodeId directory,
                                                                       std::string name,
                                                                       store::Caller caller) {
  if (!locks_.load()) co_return std::vector<InodeId>{};
  auto looking = inner_.lookup(directory, std::move(name), std::move(caller));
  Result<store::LookupResult> found = co_await std::move(looking);
  if (!found.ok() || found->object.type != store::FileType::regular) {
    co_return std::vector<InodeId>{};
  }
  co_return std::vector<InodeId>{found->object.inode};
}

}  // namespace tidepool::cache
