// What a node's NFS front end served: NFSv3 calls by procedure, and every call by the client
// address it came from (calls, bytes, time spent serving), counted as each call ends. The daemon
// turns the totals into rates (`tide statistics pstat`, `tide statistics system`) and lists the
// clients (`tide statistics client`).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace tidepool::nfsd {

inline constexpr std::size_t kNfs3Procedures = 22;
// RFC 1813's name of NFSv3 procedure `procedure` (< kNfs3Procedures), in lower case: "getattr".
const char* nfs3_procedure_name(std::size_t procedure);

struct ClientTotals {
  std::uint32_t address = 0;  // IPv4, host order
  std::uint64_t calls = 0;
  std::uint64_t bytes_in = 0;    // call records, as received
  std::uint64_t bytes_out = 0;   // replies, as sent
  std::uint64_t serving_ns = 0;  // from a call's arrival to its reply, summed
  std::uint64_t slowest_ns = 0;
  std::chrono::steady_clock::time_point last_seen;
};

// Calls refused for who sent them, or for what this node may serve now.
enum class Refusal : std::uint8_t {
  no_lease,          // this node held no lease (cluster/lease.h): JUKEBOX, or NLM's grace period
  foreign_notify,    // SM_NOTIFY from an address no client of this node called from
  foreign_free_all,  // FREE_ALL naming a client that called from another address
  callback_limit,    // a _MSG result or GRANTED callback beyond what a client, or all, may have
  insecure_port,     // a call from an unprivileged source port to a "secure" export
};
inline constexpr std::size_t kRefusals = 5;
// Its name in /metrics: "no_lease".
const char* refusal_name(Refusal why);

// Thread-safe. A call takes one lock: its client's shard's.
class CallStatistics {
 public:
  // Clients beyond `max_clients` push out the ones seen longest ago, so memory stays bounded
  // whatever addresses calls come from.
  explicit CallStatistics(std::size_t max_clients = 4096);

  void record(std::uint32_t program, std::uint32_t version, std::uint32_t procedure,
              std::uint32_t client, std::uint64_t bytes_in, std::uint64_t bytes_out,
              std::chrono::nanoseconds serving);

  // NFSv3 calls by procedure number since the start.
  std::array<std::uint64_t, kNfs3Procedures> nfs3_calls() const;
  // Calls of any program (NFS, MOUNT, NLM, NSM, PMAP) since the start.
  std::uint64_t calls() const { return calls_.load(std::memory_order_relaxed); }
  // The clients counted now, in no particular order.
  std::vector<ClientTotals> clients() const;
  // Counts a refusal; true for the first of its kind, which the caller logs (a flood of forged
  // calls must not flood the log).
  bool refuse(Refusal why);
  std::array<std::uint64_t, kRefusals> refusals() const;

 private:
  static constexpr std::size_t kShards = 16;
  struct Shard {
    mutable std::mutex mutex;
    std::unordered_map<std::uint32_t, ClientTotals> clients;  // guarded by mutex
  };

  const std::size_t max_per_shard_;
  std::array<std::atomic<std::uint64_t>, kNfs3Procedures> nfs3_calls_{};
  std::atomic<std::uint64_t> calls_{0};
  std::array<std::atomic<std::uint64_t>, kRefusals> refusals_{};
  std::array<Shard, kShards> shards_;
};

}  // namespace tidepool::nfsd
