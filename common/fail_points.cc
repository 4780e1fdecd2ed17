#include "common/fail_points.h"

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <string>

namespace tidepool::fail_points {
namespace {

std::mutex mutex;
std::map<std::string, std::chrono::milliseconds, std::less<>> pauses;  // guarded by mutex
std::set<std::string, std::less<>> switches_on;                        // guarded by mutex
std::atomic<bool> any_switch_on{false};

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

void set_switch(std::string_view name, bool on) {
  std::lock_guard lock(mutex);
  if (on) {
    switches_on.emplace(name);
  } else if (auto found = switches_on.find(name); found != switches_on.end()) {
    switches_on.erase(found);
  }
  any_switch_on = !switches_on.empty();
}

bool switched_on(std::string_view name) {
  if (!any_switch_on.load(std::memory_order_relaxed)) return false;
  std::lock_guard lock(mutex);
  return switches_on.contains(name);
}

}  // namespace tidepool::fail_points
