// Logging is spdlog: after init_logging, code calls spdlog::info(...), spdlog::warn(...) etc.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace tidepool {

// True for the level names init_logging accepts: trace, debug, info, warn, error, critical, off.
bool is_log_level(std::string_view level);

// Points spdlog's default logger at `file_path` (appending; empty = stderr) with the given level.
// Call it at startup, before other threads log; calling it again replaces the logger.
// Errors: invalid_argument for an unknown level, io_error for a file that cannot be opened.
Status init_logging(std::string_view level, const std::string& file_path);

}  // namespace tidepool
