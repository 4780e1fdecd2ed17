#include "common/log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <optional>
#include <utility>

namespace tidepool {
namespace {

std::optional<spdlog::level::level_enum> level_named(std::string_view name) {
  static constexpr std::pair<std::string_view, spdlog::level::level_enum> kLevels[] = {
      {"trace", spdlog::level::trace}, {"debug", spdlog::level::debug},
      {"info", spdlog::level::info},   {"warn", spdlog::level::warn},
      {"error", spdlog::level::err},   {"critical", spdlog::level::critical},
      {"off", spdlog::level::off},
  };
  for (const auto& [level_name, level] : kLevels) {
    if (level_name == name) return level;
  }
  return std::nullopt;
}

}  // namespace

bool is_log_level(std::string_view level) { return level_named(level).has_value(); }

Status init_logging(std::string_view level, const std::string& file_path) {
  const auto threshold = level_named(level);
  if (!threshold) {
    return error(Errc::invalid_argument,
                 "unknown log level '" + std::string(level) +
                     "' (expected trace, debug, info, warn, error, critical or off)");
  }
  try {
    spdlog::sink_ptr sink;
    if (file_path.empty()) {
      sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    } else {
      sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(file_path);
    }
    auto logger = std::make_shared<spdlog::logger>("tidepool", std::move(sink));
    logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ [%t] %v");
    logger->set_level(*threshold);
    // Info and worse are rare (start, stop, refusals) and reach the file at once, even if the
    // process dies right after; a periodic flusher thread would not survive --daemonize's fork.
    logger->flush_on(spdlog::level::info);
    spdlog::set_default_logger(std::move(logger));
  } catch (const std::exception& e) {  // spdlog throws when it cannot open the file
    return error(Errc::io_error, "cannot log to '" + file_path + "': " + e.what());
  }
  return {};
}

}  // namespace tidepool
