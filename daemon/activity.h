// A node's activity: what `tide statistics system` and `tide statistics pstat` show per second
// (CPU, NFS calls by procedure and bytes, network, disk), worked out from totals sampled once a
// second, and the NFS clients `tide statistics client` lists.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "cluster/types.h"
#include "nfsd/call_statistics.h"

namespace tidepool::daemon {

// Totals since the process started, read at one instant.
struct ActivityTotals {
  std::chrono::steady_clock::time_point at;
  std::uint64_t cpu_ns = 0;  // this process, user and system
  std::uint64_t calls = 0;   // RPC calls of every program
  std::array<std::uint64_t, nfsd::kNfs3Procedures> nfs3_calls{};
  std::uint64_t nfs_bytes_in = 0;
  std::uint64_t nfs_bytes_out = 0;
  std::uint64_t backend_bytes_in = 0;
  std::uint64_t backend_bytes_out = 0;
  std::uint64_t disk_read_bytes = 0;  // this process's reads and writes that reached the disk
  std::uint64_t disk_write_bytes = 0;
};

// This process's CPU time and disk bytes (getrusage, /proc/self/io) into `totals`; what the
// system does not tell stays 0.
void read_process_totals(ActivityTotals& totals);

// Not thread-safe: the daemon samples and reports on one strand.
class ActivityRates {
 public:
  // The rates become those between the previous totals and these.
  void sample(const ActivityTotals& now);

  std::uint64_t nfs_in_per_second() const { return per_second(&ActivityTotals::nfs_bytes_in); }
  std::uint64_t nfs_out_per_second() const { return per_second(&ActivityTotals::nfs_bytes_out); }

  // {"statistics": {"node", "cpu_percent", "nfs": {"ops_per_second", "in_bytes_per_second",
  // "out_bytes_per_second", "procedures": {"getattr": ops per second, ...}}, "network":
  // {"in_bytes_per_second", "out_bytes_per_second"}, "disk": {"read_bytes_per_second",
  // "write_bytes_per_second"}}}; zeros until two samples were taken.
  nlohmann::json report(cluster::NodeId self) const;

 private:
  std::uint64_t per_second(std::uint64_t ActivityTotals::*total) const;
  std::uint64_t per_second(std::uint64_t earlier, std::uint64_t later) const;

  std::optional<ActivityTotals> previous_;
  std::optional<ActivityTotals> latest_;
};

// The sum of the nodes' "statistics" objects; "node" is left out.
nlohmann::json system_statistics_total(const nlohmann::json& nodes);

// {"clients": [{"node", "client": "a.b.c.d", "calls", "in_bytes", "out_bytes",
// "latency_average_us", "latency_max_us"}]}, busiest first.
nlohmann::json client_statistics_report(cluster::NodeId self,
                                        const std::vector<nfsd::ClientTotals>& clients);

}  // namespace tidepool::daemon
