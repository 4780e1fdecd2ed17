#include "nfsd/internal/service.h"

namespace tidepool::nfsd {

awaitable<Result<store::Attributes>> Service::resolve(store::InodeId from,
                                                   std::vector<std::string> components) {
  const store::Caller root{0, 0, {}};
  auto at = co_await store.getattr(from);
  if (!at.ok()) co_return at.status();
  for (const std::string& name : components) {
    auto found = co_await store.lookup(at->inode, name, root);
    if (!found.ok()) co_return found.status();
    at = found->object;
  }
  if (at->type != store::FileType::directory) {
    co_return error(Errc::not_a_directory, "not a directory");
  }
  co_return at;
}

awaitable<Result<store::InodeId>> Service::export_root(const Export& e) {
  if (store::InodeId known = e.root_inode()) co_return known;
  auto root = co_await resolve(store::kRootInode, e.components());
  if (!root.ok()) co_return root.status();
  e.set_root_inode(root->inode);
  co_return root->inode;
}

}  // namespace tidepool::nfsd
