#include "common/thread_name.h"

#include <pthread.h>

#include <algorithm>
#include <array>

namespace tidepool {

namespace {
// TASK_COMM_LEN less the terminating zero.
constexpr std::size_t kMaxThreadName = 15;
}  // namespace

void name_this_thread(std::string_view name) {
  std::array<char, kMaxThreadName + 1> buffer{};
  std::copy_n(name.begin(), std::min(name.size(), kMaxThreadName), buffer.begin());
  // Only a name longer than the kernel takes can fail, and it is cut to fit above.
  ::pthread_setname_np(::pthread_self(), buffer.data());
}

std::string this_thread_name() {
  std::array<char, kMaxThreadName + 1> buffer{};
  if (::pthread_getname_np(::pthread_self(), buffer.data(), buffer.size()) != 0) return {};
  return buffer.data();
}

NameForNewThreads::NameForNewThreads(std::string_view name) : creator_name_(this_thread_name()) {
  name_this_thread(name);
}

NameForNewThreads::~NameForNewThreads() { name_this_thread(creator_name_); }

}  // namespace tidepool
