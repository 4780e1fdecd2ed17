#include "nfsd/call_statistics.h"

#include <algorithm>

namespace tidepool::nfsd {
namespace {

constexpr std::uint32_t kNfsProgram = 100003;
constexpr std::uint32_t kNfsVersion = 3;

constexpr const char* kNfs3ProcedureNames[kNfs3Procedures] = {
    "null",    "getattr",     "setattr", "lookup", "access",   "readlink", "read",   "write",
    "create",  "mkdir",       "symlink", "mknod",  "remove",   "rmdir",    "rename", "link",
    "readdir", "readdirplus", "fsstat",  "fsinfo", "pathconf", "commit"};

constexpr const char* kRefusalNames[kRefusals] = {"no_lease", "foreign_notify",
                                                   "foreign_free_all", "callback_limit",
                                                   "insecure_port"};

}  // namespace

const char* refusal_name(Refusal why) { return kRefusalNames[static_cast<std::size_t>(why)]; }

bool CallStatistics::refuse(Refusal why) {
  return refusals_[static_cast<std::size_t>(why)].fetch_add(1, std::memory_order_relaxed) == 0;
}

std::array<std::uint64_t, kRefusals> CallStatistics::refusals() const {
  std::array<std::uint64_t, kRefusals> counted{};
  for (std::size_t i = 0; i < kRefusals; ++i) {
    counted[i] = refusals_[i].load(std::memory_order_relaxed);
  }
  return counted;
}

const char* nfs3_procedure_name(std::size_t procedure) {
  return procedure < kNfs3Procedures ? kNfs3ProcedureNames[procedure] : "unknown";
}

CallStatistics::CallStatistics(std::size_t max_clients)
    : max_per_shard_(std::max<std::size_t>(1, max_clients / kShards)) {}

void CallStatistics::record(std::uint32_t program, std::uint32_t version, std::uint32_t procedure,
                            std::uint32_t client, std::uint64_t bytes_in, std::uint64_t bytes_out,
                            std::chrono::nanoseconds serving) {
  calls_.fetch_add(1, std::memory_order_relaxed);
  if (program == kNfsProgram && version == kNfsVersion && procedure < kNfs3Procedures) {
    nfs3_calls_[procedure].fetch_add(1, std::memory_order_relaxed);
  }
  const auto now = std::chrono::steady_clock::now();
  const auto ns = static_cast<std::uint64_t>(std::max<std::int64_t>(0, serving.count()));
  // Addresses of one subnet differ in their low bits.
  Shard& shard = shards_[(client ^ (client >> 8)) % kShards];
  std::lock_guard lock(shard.mutex);
  auto found = shard.clients.find(client);
  if (found == shard.clients.end()) {
    if (shard.clients.size() >= max_per_shard_) {
      auto oldest = std::min_element(
          shard.clients.begin(), shard.clients.end(),
          [](const auto& a, const auto& b) { return a.second.last_seen < b.second.last_seen; });
      shard.clients.erase(oldest);
    }
    found = shard.clients.emplace(client, ClientTotals{.address = client}).first;
  }
  ClientTotals& totals = found->second;
  ++totals.calls;
  totals.bytes_in += bytes_in;
  totals.bytes_out += bytes_out;
  totals.serving_ns += ns;
  totals.slowest_ns = std::max(totals.slowest_ns, ns);
  totals.last_seen = now;
}

std::array<std::uint64_t, kNfs3Procedures> CallStatistics::nfs3_calls() const {
  std::array<std::uint64_t, kNfs3Procedures> calls{};
  for (std::size_t i = 0; i < kNfs3Procedures; ++i) {
    calls[i] = nfs3_calls_[i].load(std::memory_order_relaxed);
  }
  return calls;
}

std::vector<ClientTotals> CallStatistics::clients() const {
  std::vector<ClientTotals> all;
  for (const Shard& shard : shards_) {
    std::lock_guard lock(shard.mutex);
    for (const auto& [address, totals] : shard.clients) all.push_back(totals);
  }
  return all;
}

}  // namespace tidepool::nfsd
