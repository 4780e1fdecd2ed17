#include "daemon/activity.h"

#include <gtest/gtest.h>

namespace tidepool::daemon {
namespace {

using namespace std::chrono_literals;

ActivityTotals totals_at(std::chrono::steady_clock::time_point at, std::uint64_t scale) {
  ActivityTotals t;
  t.at = at;
  t.cpu_ns = 250'000'000 * scale;  // a quarter of a second of CPU per second
  t.calls = 1000 * scale;
  t.nfs3_calls[1] = 600 * scale;  // getattr
  t.nfs3_calls[6] = 300 * scale;  // read
  t.nfs_bytes_in = 10'000 * scale;
  t.nfs_bytes_out = 1'000'000 * scale;
  t.backend_bytes_in = 500 * scale;
  t.backend_bytes_out = 700 * scale;
  t.disk_read_bytes = 4096 * scale;
  t.disk_write_bytes = 8192 * scale;
  return t;
}

TEST(ActivityRates, ArePerSecondBetweenTheLastTwoSamples) {
  ActivityRates rates;
  const auto start = std::chrono::steady_clock::time_point{} + 100s;
  rates.sample(totals_at(start, 1));
  EXPECT_EQ(rates.report(3)["statistics"]["nfs"]["ops_per_second"], 0u) << "one sample: no rate";

  rates.sample(totals_at(start + 2s, 3));  // two seconds, twice the totals again
  const nlohmann::json s = rates.report(3)["statistics"];
  EXPECT_EQ(s["node"], 3);
  EXPECT_DOUBLE_EQ(s["cpu_percent"].get<double>(), 25.0);
  EXPECT_EQ(s["nfs"]["ops_per_second"], 1000u);
  EXPECT_EQ(s["nfs"]["procedures"]["getattr"], 600u);
  EXPECT_EQ(s["nfs"]["procedures"]["read"], 300u);
  EXPECT_EQ(s["nfs"]["procedures"]["commit"], 0u);
  EXPECT_EQ(s["nfs"]["procedures"].size(), nfsd::kNfs3Procedures);
  EXPECT_EQ(s["nfs"]["in_bytes_per_second"], 10'000u);
  EXPECT_EQ(s["nfs"]["out_bytes_per_second"], 1'000'000u);
  EXPECT_EQ(s["network"]["in_bytes_per_second"], 10'500u) << "clients and other nodes";
  EXPECT_EQ(s["network"]["out_bytes_per_second"], 1'000'700u);
  EXPECT_EQ(s["disk"]["read_bytes_per_second"], 4096u);
  EXPECT_EQ(s["disk"]["write_bytes_per_second"], 8192u);
  EXPECT_EQ(rates.nfs_out_per_second(), 1'000'000u);
}

TEST(ActivityRates, ACounterThatWentBackReadsAsZero) {
  ActivityRates rates;
  const auto start = std::chrono::steady_clock::time_point{} + 100s;
  rates.sample(totals_at(start, 5));
  rates.sample(totals_at(start + 1s, 1));
  const nlohmann::json s = rates.report(1)["statistics"];
  EXPECT_EQ(s["nfs"]["ops_per_second"], 0u);
  EXPECT_DOUBLE_EQ(s["cpu_percent"].get<double>(), 0.0);
}

TEST(SystemStatisticsTotal, SumsEveryRateAndTheCpu) {
  ActivityRates a;
  ActivityRates b;
  const auto start = std::chrono::steady_clock::time_point{} + 100s;
  a.sample(totals_at(start, 1));
  a.sample(totals_at(start + 1s, 2));
  b.sample(totals_at(start, 1));
  b.sample(totals_at(start + 1s, 3));
  const nlohmann::json nodes = {a.report(1)["statistics"], b.report(2)["statistics"]};
  const nlohmann::json total = system_statistics_total(nodes);
  EXPECT_FALSE(total.contains("node"));
  EXPECT_DOUBLE_EQ(total["cpu_percent"].get<double>(), 75.0);
  EXPECT_EQ(total["nfs"]["ops_per_second"], 3000u);
  EXPECT_EQ(total["nfs"]["procedures"]["getattr"], 1800u);
  EXPECT_EQ(total["disk"]["write_bytes_per_second"], 3 * 8192u);
}

TEST(ClientStatisticsReport, ListsTheBusiestClientFirstWithAverageAndSlowestCall) {
  nfsd::ClientTotals quiet{
      .address = 0x7f000102, .calls = 2, .serving_ns = 3000, .slowest_ns = 2000};
  nfsd::ClientTotals busy{.address = 0x0a000001,
                          .calls = 10,
                          .bytes_in = 100,
                          .bytes_out = 900,
                          .serving_ns = 50'000,
                          .slowest_ns = 20'000};
  const nlohmann::json list = client_statistics_report(4, {quiet, busy})["clients"];
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0]["client"], "10.0.0.1");
  EXPECT_EQ(list[0]["node"], 4);
  EXPECT_EQ(list[0]["calls"], 10u);
  EXPECT_EQ(list[0]["out_bytes"], 900u);
  EXPECT_DOUBLE_EQ(list[0]["latency_average_us"].get<double>(), 5.0);
  EXPECT_DOUBLE_EQ(list[0]["latency_max_us"].get<double>(), 20.0);
  EXPECT_EQ(list[1]["client"], "127.0.1.2");
  EXPECT_DOUBLE_EQ(list[1]["latency_average_us"].get<double>(), 1.5);
}

TEST(ProcessTotals, ReadThisProcesssCpuTime) {
  ActivityTotals t;
  volatile std::uint64_t spin = 0;
  for (int i = 0; i < 10'000'000; ++i) spin = spin + static_cast<std::uint64_t>(i);
  read_process_totals(t);
  EXPECT_GT(t.cpu_ns, 0u);
}

}  // namespace
}  // namespace tidepool::daemon
