#include "nfsd/internal/service.h"

namespace tidepool::nfsd {

awaitable<Result<store::InodeId>> Service::resolve(store::InodeId from,
                                                   std::vector<std::string> components) {
  const store::Caller root{0, 0, {}};
  store::InodeId at = from;
  for (const std::string& name : components) {
    auto found = co_await store.lookup(at, name, root);
    if (!found.ok()) co_return found.status();
    at = found->object.inode;
  }
  auto a = co_await store.getattr(at);
  if (!a.ok()) co_return a.status();
  if (a->type != store::FileType::directory) co_return error(Errc::not_a_directory, "not a directory");
  co_return at;
}

awaitable<Result<store::InodeId>> Service::export_root(const Export& e) {
  if (store::InodeId known = e.root_inode()) co_return known;
  auto root = co_await resolve(store::kRootInode, e.components());
  if (root.ok()) e.set_root_inode(*root);
  co_return root;
}

}  // namespace tidepool::nfsd
