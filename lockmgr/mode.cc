#include "lockmgr/mode.h"

#include <strings.h>

#include <string>

namespace tidepool::lockmgr {
namespace {

constexpr std::array<std::string_view, kModeCount> kModeNames = {"NL", "CR", "CW",
                                                                 "PR", "PW", "EX"};

}  // namespace

std::string_view mode_name(Mode mode) { return kModeNames.at(static_cast<std::size_t>(mode)); }

std::optional<Mode> parse_mode(std::string_view name) {
  for (std::size_t i = 0; i < kModeCount; ++i) {
    if (name.size() == kModeNames[i].size() &&
        ::strncasecmp(name.data(), kModeNames[i].data(), name.size()) == 0) {
      return static_cast<Mode>(i);
    }
  }
  return std::nullopt;
}

}  // namespace tidepool::lockmgr
