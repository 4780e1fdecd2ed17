#include "daemon/admin/namespace_paths.h"

namespace tidepool::daemon::admin {

std::string shown_path(const std::vector<std::string>& path) {
  std::string shown;
  for (const std::string& segment : path) shown += "/" + segment;
  return shown;
}

boost::asio::awaitable<Result<store::Attributes>> resolve_path(store::Store& store,
                                                               std::vector<std::string> path) {
  if (path.empty() || path.front() != "ifs") {
    co_return error(Errc::not_found, "paths in the namespace start with /ifs");
  }
  const store::Caller root{0, 0, {}};
  auto getting = store.getattr(store::kRootInode);
  Result<store::Attributes> attributes = co_await std::move(getting);
  for (std::size_t i = 1; i < path.size() && attributes.ok(); ++i) {
    if (path[i] == "." || path[i] == "..") {
      co_return error(Errc::invalid_argument, "the path must not contain '.' or '..'");
    }
    auto looking = store.lookup(attributes->inode, path[i], root);
    Result<store::LookupResult> found = co_await std::move(looking);
    if (!found.ok()) {
      attributes = found.status();
    } else {
      attributes = found->object;
    }
  }
  if (!attributes.ok() && attributes.status().code() == Errc::not_found) {
    co_return error(Errc::not_found, "no such file: " + shown_path(path));
  }
  co_return attributes;
}

}  // namespace tidepool::daemon::admin
