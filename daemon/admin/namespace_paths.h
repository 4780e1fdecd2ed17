// Paths of the namespace as the admin API takes them: segments from "ifs" on, resolved from
// the root through the store as this node serves it.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <string>
#include <vector>

#include "common/status.h"
#include "store/store.h"

namespace tidepool::daemon::admin {

// "/ifs/a/b" for {"ifs", "a", "b"}.
std::string shown_path(const std::vector<std::string>& path);

// The file at `path` (its segments, "ifs" first). not_found naming the path when there is no
// such file; invalid_argument for a '.' or '..' segment. `path` is a copy: the coroutine may
// outlive the caller's.
boost::asio::awaitable<Result<store::Attributes>> resolve_path(store::Store& store,
                                                               std::vector<std::string> path);

}  // namespace tidepool::daemon::admin
