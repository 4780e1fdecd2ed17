// The small files a node keeps in its data directory (its identity, certificates, how many
// shards its copy of the namespace has).
#pragma once

#include <sys/types.h>

#include <string>

#include "common/status.h"

namespace tidepool {

// The whole file; not_found when it cannot be read.
Result<std::string> read_file(const std::string& path);
// A secret an administrator keeps in a file (a setup secret, a token): the file's text without
// its trailing white space, which editors and `echo` add.
Result<std::string> read_secret_file(const std::string& path);
// Durable before it is visible: written aside, synced, renamed over, directory synced.
Status write_file(const std::string& path, const std::string& contents, mode_t mode);

}  // namespace tidepool
