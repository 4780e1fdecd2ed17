#include "nfsd/call_statistics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <thread>

namespace tidepool::nfsd {
namespace {

using namespace std::chrono_literals;

constexpr std::uint32_t kNfs = 100003;
constexpr std::uint32_t kMount = 100005;

ClientTotals client(const CallStatistics& statistics, std::uint32_t address) {
  for (const ClientTotals& c : statistics.clients()) {
    if (c.address == address) return c;
  }
  return {};
}

TEST(CallStatistics, CountsNfs3ProceduresAndEveryCallByClient) {
  CallStatistics statistics;
  statistics.record(kNfs, 3, 1, 0x7f000001, 100, 120, 10us);   // GETATTR
  statistics.record(kNfs, 3, 6, 0x7f000001, 140, 4200, 30us);  // READ
  statistics.record(kNfs, 3, 6, 0x7f000002, 140, 4200, 5us);
  statistics.record(kMount, 3, 1, 0x7f000002, 80, 60, 1us);  // MNT: a call, not an NFSv3 one
  statistics.record(kNfs, 2, 1, 0x7f000002, 80, 60, 1us);    // NFSv2 is not NFSv3 either

  const auto calls = statistics.nfs3_calls();
  EXPECT_EQ(calls[1], 1u);
  EXPECT_EQ(calls[6], 2u);
  EXPECT_EQ(std::accumulate(calls.begin(), calls.end(), std::uint64_t{0}), 3u);
  EXPECT_EQ(statistics.calls(), 5u);
  EXPECT_STREQ(nfs3_procedure_name(6), "read");
  EXPECT_STREQ(nfs3_procedure_name(17), "readdirplus");
  EXPECT_STREQ(nfs3_procedure_name(22), "unknown");

  ASSERT_EQ(statistics.clients().size(), 2u);
  ClientTotals first = client(statistics, 0x7f000001);
  EXPECT_EQ(first.calls, 2u);
  EXPECT_EQ(first.bytes_in, 240u);
  EXPECT_EQ(first.bytes_out, 4320u);
  EXPECT_EQ(first.serving_ns, 40'000u);
  EXPECT_EQ(first.slowest_ns, 30'000u);
  EXPECT_EQ(client(statistics, 0x7f000002).calls, 3u);
}

TEST(CallStatistics, KeepsAtMostItsLimitOfClientsDroppingTheOnesSeenLongestAgo) {
  CallStatistics statistics(16);  // one client per shard
  for (std::uint32_t address = 1; address <= 1000; ++address) {
    statistics.record(kNfs, 3, 0, address, 40, 24, 1us);
  }
  const auto clients = statistics.clients();
  EXPECT_LE(clients.size(), 16u);
  EXPECT_GE(clients.size(), 8u);
  // The last addresses recorded are the ones kept.
  for (const ClientTotals& c : clients) EXPECT_GT(c.address, 1000u - 64u) << c.address;
  EXPECT_EQ(statistics.nfs3_calls()[0], 1000u);
}

TEST(CallStatistics, CountsEveryCallFromManyThreads) {
  CallStatistics statistics;
  std::vector<std::thread> threads;
  for (std::uint32_t t = 0; t < 4; ++t) {
    threads.emplace_back([&statistics, t] {
      for (int i = 0; i < 10'000; ++i) statistics.record(kNfs, 3, 6, t % 2, 1, 2, 1ns);
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(statistics.nfs3_calls()[6], 40'000u);
  EXPECT_EQ(client(statistics, 0).calls + client(statistics, 1).calls, 40'000u);
  EXPECT_EQ(client(statistics, 1).bytes_out, 40'000u);
}

TEST(CallStatistics, CountsRefusalsByKindAndSaysWhichIsTheFirstOfItsKind) {
  CallStatistics statistics;
  EXPECT_TRUE(statistics.refuse(Refusal::foreign_notify));
  EXPECT_FALSE(statistics.refuse(Refusal::foreign_notify));
  EXPECT_TRUE(statistics.refuse(Refusal::no_lease));
  const auto counted = statistics.refusals();
  EXPECT_EQ(counted[static_cast<std::size_t>(Refusal::foreign_notify)], 2u);
  EXPECT_EQ(counted[static_cast<std::size_t>(Refusal::no_lease)], 1u);
  EXPECT_EQ(counted[static_cast<std::size_t>(Refusal::callback_limit)], 0u);
  EXPECT_STREQ(refusal_name(Refusal::foreign_free_all), "foreign_free_all");
}

}  // namespace
}  // namespace tidepool::nfsd
