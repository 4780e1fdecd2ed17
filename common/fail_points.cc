#include "common/fail_points.h"

#include <map>
#include <mutex>
#include <string>

namespace tidepool::fail_points {
namespace {

std::mutex mutex;
std::map<std::string, std::chrono::milliseconds, std::less<>> pauses;  // guarded by mutex

}  // namespace

void set_pause(std::string_view name, std::chrono::milliseconds pause) {
  std::lock_guard lock(mutex);
  if (pause.count() <= 0) {
    if (auto found = pauses.find(name); found != pauses.end()) pauses.erase(found);
    return;
  }
  pauses.insert_or_assign(std::string(name), pause);
}

std::chrono::milliseconds pause_at(std::string_view name) {
  std::lock_guard lock(mutex);
  auto found = pauses.find(name);
  return found == pauses.end() ? std::chrono::milliseconds(0) : found->second;
}

}  // namespace tidepool::fail_points
