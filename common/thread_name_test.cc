#include "common/thread_name.h"

#include <gtest/gtest.h>

#include <boost/asio/post.hpp>
#include <boost/asio/use_future.hpp>
#include <string>
#include <thread>

namespace tidepool {
namespace {

std::string name_seen_in_a_thread_named(std::string_view name) {
  std::string seen;
  std::thread([&] {
    name_this_thread(name);
    seen = this_thread_name();
  }).join();
  return seen;
}

TEST(ThreadName, AThreadCarriesTheNameItWasGiven) {
  EXPECT_EQ(name_seen_in_a_thread_named("nfs-io-1"), "nfs-io-1");
}

TEST(ThreadName, ANameLongerThanLinuxKeepsIsCutToFifteenBytes) {
  EXPECT_EQ(name_seen_in_a_thread_named("a-very-long-thread-name"), "a-very-long-thr");
}

TEST(ThreadName, NamingOneThreadLeavesTheOthersAlone) {
  const std::string before = this_thread_name();
  name_seen_in_a_thread_named("elsewhere");
  EXPECT_EQ(this_thread_name(), before);
}

TEST(ThreadName, APoolsThreadsCarryItsNameAndItsCreatorKeepsItsOwn) {
  const std::string creator = this_thread_name();
  NamedThreadPool pool("store-pool", 2);
  EXPECT_EQ(this_thread_name(), creator);
  for (int i = 0; i < 8; ++i) {
    auto seen = boost::asio::post(pool, boost::asio::use_future([] { return this_thread_name(); }));
    EXPECT_EQ(seen.get(), "store-pool");
  }
  pool.join();
}

}  // namespace
}  // namespace tidepool
