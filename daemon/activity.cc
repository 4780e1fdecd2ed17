#include "daemon/activity.h"

#include <sys/resource.h>

#include <algorithm>
#include <boost/asio/ip/address_v4.hpp>
#include <fstream>
#include <string>

#include "daemon/report_sums.h"

namespace tidepool::daemon {
namespace {

using nlohmann::json;

std::uint64_t nanoseconds_of(const timeval& t) {
  return static_cast<std::uint64_t>(t.tv_sec) * 1'000'000'000u +
         static_cast<std::uint64_t>(t.tv_usec) * 1'000u;
}

}  // namespace

void read_process_totals(ActivityTotals& totals) {
  rusage usage{};
  if (::getrusage(RUSAGE_SELF, &usage) == 0) {
    totals.cpu_ns = nanoseconds_of(usage.ru_utime) + nanoseconds_of(usage.ru_stime);
  }
  // "read_bytes:" and "write_bytes:" are what went to and came from the storage layer, page
  // cache hits left out.
  std::ifstream io("/proc/self/io");
  std::string key;
  std::uint64_t value = 0;
  while (io >> key >> value) {
    if (key == "read_bytes:") totals.disk_read_bytes = value;
    if (key == "write_bytes:") totals.disk_write_bytes = value;
  }
}

void ActivityRates::sample(const ActivityTotals& now) {
  previous_ = std::move(latest_);
  latest_ = now;
}

std::uint64_t ActivityRates::per_second(std::uint64_t earlier, std::uint64_t later) const {
  if (!previous_ || later < earlier) return 0;
  const auto elapsed =
      std::chrono::duration_cast<std::chrono::microseconds>(latest_->at - previous_->at);
  if (elapsed.count() <= 0) return 0;
  return static_cast<std::uint64_t>(
      static_cast<double>(later - earlier) * 1e6 / static_cast<double>(elapsed.count()) + 0.5);
}

std::uint64_t ActivityRates::per_second(std::uint64_t ActivityTotals::*total) const {
  if (!previous_) return 0;
  return per_second((*previous_).*total, (*latest_).*total);
}

json ActivityRates::report(cluster::NodeId self) const {
  json procedures = json::object();
  for (std::size_t p = 0; p < nfsd::kNfs3Procedures; ++p) {
    procedures[nfsd::nfs3_procedure_name(p)] =
        previous_ ? per_second(previous_->nfs3_calls[p], latest_->nfs3_calls[p]) : 0;
  }
  double cpu_percent = 0;
  if (previous_ && latest_->at > previous_->at && latest_->cpu_ns >= previous_->cpu_ns) {
    const auto wall =
        std::chrono::duration_cast<std::chrono::nanoseconds>(latest_->at - previous_->at);
    cpu_percent = static_cast<double>(latest_->cpu_ns - previous_->cpu_ns) * 100.0 /
                  static_cast<double>(wall.count());
  }
  const std::uint64_t nfs_in = per_second(&ActivityTotals::nfs_bytes_in);
  const std::uint64_t nfs_out = per_second(&ActivityTotals::nfs_bytes_out);
  json statistics{
      {"node", self},
      {"cpu_percent", cpu_percent},
      {"nfs",
       {{"ops_per_second", per_second(&ActivityTotals::calls)},
        {"in_bytes_per_second", nfs_in},
        {"out_bytes_per_second", nfs_out},
        {"procedures", std::move(procedures)}}},
      // The node's traffic with clients and with the other nodes.
      {"network",
       {{"in_bytes_per_second", nfs_in + per_second(&ActivityTotals::backend_bytes_in)},
        {"out_bytes_per_second", nfs_out + per_second(&ActivityTotals::backend_bytes_out)}}},
      {"disk",
       {{"read_bytes_per_second", per_second(&ActivityTotals::disk_read_bytes)},
        {"write_bytes_per_second", per_second(&ActivityTotals::disk_write_bytes)}}},
  };
  return json{{"statistics", std::move(statistics)}};
}

json system_statistics_total(const json& nodes) {
  json total = json::object();
  double cpu_percent = 0;
  for (const json& node : nodes) {
    if (!node.is_object()) continue;
    add_counters(total, node);
    const json& cpu = node.value("cpu_percent", json());
    if (cpu.is_number()) cpu_percent += cpu.get<double>();
  }
  total["cpu_percent"] = cpu_percent;
  return total;
}

json client_statistics_report(cluster::NodeId self,
                              const std::vector<nfsd::ClientTotals>& clients) {
  std::vector<nfsd::ClientTotals> busiest = clients;
  std::sort(busiest.begin(), busiest.end(),
            [](const auto& a, const auto& b) { return a.calls > b.calls; });
  json list = json::array();
  for (const nfsd::ClientTotals& c : busiest) {
    list.push_back({{"node", self},
                    {"client", boost::asio::ip::address_v4(c.address).to_string()},
                    {"calls", c.calls},
                    {"in_bytes", c.bytes_in},
                    {"out_bytes", c.bytes_out},
                    {"latency_average_us", c.calls == 0 ? 0.0
                                                        : static_cast<double>(c.serving_ns) / 1e3 /
                                                              static_cast<double>(c.calls)},
                    {"latency_max_us", static_cast<double>(c.slowest_ns) / 1e3}});
  }
  return json{{"clients", std::move(list)}};
}

}  // namespace tidepool::daemon
