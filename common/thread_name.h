// Threads named for what they do, so that top -H, perf and gdb tell them apart.
#pragma once

#include <boost/asio/thread_pool.hpp>
#include <cstddef>
#include <string>
#include <string_view>

namespace tidepool {

// Names the calling thread. Linux keeps 15 bytes of a name; the rest is cut.
void name_this_thread(std::string_view name);

// The calling thread's name, as name_this_thread left it.
std::string this_thread_name();

// While it lives, threads the calling thread starts are born with `name`: Linux threads take
// their creator's name. The creator's own name comes back when it goes.
class NameForNewThreads {
 public:
  explicit NameForNewThreads(std::string_view name);
  ~NameForNewThreads();
  NameForNewThreads(const NameForNewThreads&) = delete;
  NameForNewThreads& operator=(const NameForNewThreads&) = delete;

 private:
  std::string creator_name_;
};

// An asio thread pool whose threads carry `name`.
class NamedThreadPool : public boost::asio::thread_pool {
 public:
  NamedThreadPool(std::string_view name, std::size_t threads)
      : NamedThreadPool(threads, NameForNewThreads(name)) {}

 private:
  // The name lasts until this constructor returns, with the pool's threads started.
  NamedThreadPool(std::size_t threads, const NameForNewThreads&) : thread_pool(threads) {}
};

}  // namespace tidepool
