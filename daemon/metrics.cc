#include "daemon/metrics.h"

#include <boost/asio/ip/address_v4.hpp>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "daemon/activity.h"

namespace tidepool::daemon {
namespace {

class Exposition {
 public:
  void family(std::string_view name, std::string_view type, std::string_view help) {
    text_.append("# HELP ").append(name).append(" ").append(help).append("\n");
    text_.append("# TYPE ").append(name).append(" ").append(type).append("\n");
  }
  void sample(std::string_view name, std::uint64_t value, std::string_view labels = {}) {
    text_.append(name);
    if (!labels.empty()) text_.append("{").append(labels).append("}");
    text_.append(" ").append(std::to_string(value)).append("\n");
  }
  void metric(std::string_view name, std::string_view type, std::string_view help,
              std::uint64_t value) {
    family(name, type, help);
    sample(name, value);
  }
  std::string take() { return std::move(text_); }

 private:
  std::string text_;
};

}  // namespace

std::string render_metrics(Membership& membership, const nfsd::NfsServer& server,
                           const NodeStats& stats, const store::IntegrityCounters& integrity,
                           const cache::CacheStatistics& cache, const store::ReadCounters& l2) {
  Exposition out;
  const NodeConfig& config = membership.config();
  out.family("tidepool_node_info", "gauge", "This node: its id and pool.");
  out.sample("tidepool_node_info", 1,
             "node=\"" + std::to_string(config.node_id) + "\",pool=\"" + config.pool + "\"");
  const nfsd::NfsServer::Traffic traffic = server.traffic();
  out.metric("tidepool_nfs_received_bytes_total", "counter",
             "Bytes received from NFS, MOUNT and portmap clients.", traffic.bytes_received);
  out.metric("tidepool_nfs_sent_bytes_total", "counter", "Bytes sent to NFS clients.",
             traffic.bytes_sent);
  const nfsd::CallStatistics& calls = server.calls();
  out.metric("tidepool_rpc_calls_total", "counter",
             "RPC calls served: NFS, MOUNT, NLM, NSM and portmap.", calls.calls());
  out.family("tidepool_rpc_refused_total", "counter",
             "Calls refused for who sent them or for what this node may serve now, by reason.");
  const auto refusals = calls.refusals();
  for (std::size_t r = 0; r < refusals.size(); ++r) {
    out.sample("tidepool_rpc_refused_total", refusals[r],
               std::string("reason=\"") + nfsd::refusal_name(static_cast<nfsd::Refusal>(r)) + "\"");
  }
  out.family("tidepool_nfs3_calls_total", "counter", "NFSv3 calls served, by procedure.");
  const auto nfs3_calls = calls.nfs3_calls();
  for (std::size_t p = 0; p < nfs3_calls.size(); ++p) {
    out.sample("tidepool_nfs3_calls_total", nfs3_calls[p],
               std::string("procedure=\"") + nfsd::nfs3_procedure_name(p) + "\"");
  }
  const std::vector<nfsd::ClientTotals> clients = calls.clients();
  auto per_client = [&](std::string_view name, std::string_view type, std::string_view help,
                        std::uint64_t nfsd::ClientTotals::*value, std::uint64_t divisor) {
    out.family(name, type, help);
    for (const nfsd::ClientTotals& c : clients) {
      out.sample(name, c.*value / divisor,
                 "client=\"" + boost::asio::ip::address_v4(c.address).to_string() + "\"");
    }
  };
  per_client("tidepool_nfs_client_calls_total", "counter", "RPC calls, by client address.",
             &nfsd::ClientTotals::calls, 1);
  per_client("tidepool_nfs_client_received_bytes_total", "counter",
             "Bytes of calls, by client address.", &nfsd::ClientTotals::bytes_in, 1);
  per_client("tidepool_nfs_client_sent_bytes_total", "counter",
             "Bytes of replies, by client address.", &nfsd::ClientTotals::bytes_out, 1);
  per_client("tidepool_nfs_client_serving_microseconds_total", "counter",
             "Time from a call's arrival to its reply, summed, by client address.",
             &nfsd::ClientTotals::serving_ns, 1000);
  per_client("tidepool_nfs_client_slowest_call_microseconds", "gauge",
             "The longest a call took, by client address.", &nfsd::ClientTotals::slowest_ns, 1000);
  ActivityTotals process;
  read_process_totals(process);
  out.metric("tidepool_process_cpu_microseconds_total", "counter",
             "CPU time of this node's process, user and system.", process.cpu_ns / 1000);
  out.metric("tidepool_disk_read_bytes_total", "counter",
             "Bytes this node's process read from its disks (page cache hits left out).",
             process.disk_read_bytes);
  out.metric("tidepool_disk_written_bytes_total", "counter",
             "Bytes this node's process wrote to its disks.", process.disk_write_bytes);
  out.metric("tidepool_data_size_bytes", "gauge", "Size of the file system under the data directory.",
             stats.size_bytes);
  out.metric("tidepool_data_used_bytes", "gauge", "Bytes used on that file system.",
             stats.used_bytes);
  out.metric("tidepool_checksum_failures_total", "counter",
             "Reads and writes of this node's file data that met a block failing its CRC32C.",
             integrity.checksum_failures.load());
  out.metric("tidepool_checksum_repairs_total", "counter",
             "Blocks of this node's file data put back from the mirror's copy.",
             integrity.checksum_repairs.load());
  out.metric("tidepool_copies_behind", "gauge",
             "Copies of placed files' data, one per file and node, that missed writes while their "
             "node was down and wait for it to catch up.",
             integrity.copies_behind.load());
  out.metric("tidepool_units_caught_up_total", "counter",
             "Stripe units put back on nodes that had missed writes to them.",
             integrity.units_caught_up.load());
  out.metric("tidepool_units_left", "gauge",
             "Files whose units stay on a node where no placement reads them, one per file, pool "
             "and node: the node was down when they were to go, and they go when it is up.",
             integrity.units_left.load());
  out.family("tidepool_protection_low_water_copies", "gauge",
             "The fewest copies of file data and metadata since the node started: of any stripe "
             "unit of a file whose shard this node homed, up to date on members up (of=\"units\"); "
             "of any shard of the namespace, home and in-step mirror up, once every shard had two "
             "(of=\"shards\"). Absent until seen.");
  for (const auto& [of, mark] : {std::pair{"units", &integrity.unit_copies_low_water},
                                 std::pair{"shards", &integrity.shard_copies_low_water}}) {
    const std::uint64_t copies = mark->load();
    if (copies != store::IntegrityCounters::kNotSeen) {
      out.sample("tidepool_protection_low_water_copies", copies, std::string("of=\"") + of + "\"");
    }
  }
  out.metric("tidepool_cache_l1_accessed_bytes_total", "counter",
             "READ bytes of files whose data is on other nodes, asked while L1 could serve them.",
             cache.l1_bytes_accessed);
  out.metric("tidepool_cache_l1_hit_bytes_total", "counter",
             "Of those, bytes in L1 when the READ came.", cache.l1_bytes_hit);
  out.metric("tidepool_cache_l1_fetched_bytes_total", "counter",
             "Bytes fetched into L1 for READs that missed.", cache.l1_bytes_fetched);
  out.metric("tidepool_cache_l1_prefetched_bytes_total", "counter",
             "Bytes fetched into L1 ahead of the readers (SmartRead).", cache.l1_bytes_prefetched);
  out.metric("tidepool_cache_l1_prefetch_used_bytes_total", "counter",
             "Prefetched bytes read afterwards.", cache.l1_prefetch_used);
  out.metric("tidepool_cache_l1_prefetch_wasted_bytes_total", "counter",
             "Prefetched bytes evicted or dropped unread.", cache.l1_prefetch_wasted);
  out.metric("tidepool_cache_l1_prefetch_deferred_bytes_total", "counter",
             "Bytes SmartRead advised but left to the readers' next READs: the node had its "
             "limit of prefetch bytes in flight.",
             cache.l1_prefetch_deferred);
  out.metric("tidepool_cache_l1_prefetch_in_flight_bytes", "gauge",
             "Bytes being prefetched into L1 now.", cache.l1_prefetch_in_flight);
  out.metric("tidepool_cache_l1_bypassed_bytes_total", "counter",
             "READ bytes of other nodes' files served around L1 (no lock, small random reads).",
             cache.l1_bypassed_bytes);
  out.metric("tidepool_cache_l1_bytes", "gauge", "Bytes L1 holds now, entries included.",
             cache.blocks.bytes);
  out.metric("tidepool_cache_coherence_invalidations_total", "counter",
             "Files whose L1 blocks and attributes were dropped for another node's lock.",
             cache.coherence_invalidations);
  out.metric("tidepool_cache_l2_read_bytes_total", "counter",
             "READ bytes of files whose data is on this node, served from its own copy.",
             cache.l2_bytes_read);
  out.metric("tidepool_cache_l2_data_read_bytes_total", "counter",
             "Bytes this node's copy of the namespace read for any node.",
             l2.data_bytes_read.load());
  out.metric("tidepool_cache_l2_data_hit_bytes_total", "counter",
             "Of those, bytes the page cache held.", l2.data_bytes_hit.load());
  out.metric("tidepool_cache_l2_data_lent_bytes_total", "counter",
             "Of those, bytes sent from the page cache by reference (spliced).",
             l2.data_bytes_lent.load());
  out.metric("tidepool_cache_l2_metadata_reads_total", "counter",
             "Attribute look-ups of this node's copy of the namespace.", l2.metadata_reads.load());
  out.metric("tidepool_cache_l2_metadata_hits_total", "counter",
             "Of those, look-ups its attribute cache answered.", l2.metadata_hits.load());

  const bool member = membership.identity().has_value();
  out.metric("tidepool_cluster_member", "gauge", "1 when this node belongs to a cluster.",
             member ? 1 : 0);
  const auto transport = membership.transport_stats();
  out.metric("tidepool_backend_messages_sent_total", "counter", "Messages sent to other nodes.",
             transport.messages_sent);
  out.metric("tidepool_backend_messages_received_total", "counter",
             "Messages received from other nodes.", transport.messages_received);
  out.metric("tidepool_backend_messages_dropped_total", "counter",
             "Messages dropped: a peer unreachable past the queue bound, or over the size bound.",
             transport.messages_dropped);
  out.metric("tidepool_backend_connections_refused_total", "counter",
             "Backend connections refused or closed: bad hello, bad frame, failed TLS, or a "
             "certificate not the peer's own, or revoked.",
             transport.connections_refused);
  out.metric("tidepool_backend_sent_bytes_total", "counter",
             "Bytes of messages sent to other nodes.", transport.bytes_sent);
  out.metric("tidepool_backend_received_bytes_total", "counter",
             "Bytes of messages received from other nodes.", transport.bytes_received);
  if (!member) return out.take();

  cluster::GroupMember& group = *membership.group();
  const cluster::GroupView& view = group.view();
  out.metric("tidepool_group_epoch", "counter", "The group epoch: changes applied to the view.",
             view.epoch);
  out.metric("tidepool_group_leader", "gauge", "The node id of the group's leader; 0 if unknown.",
             group.leader());
  out.metric("tidepool_group_is_leader", "gauge", "1 when this node leads the group.",
             group.is_leader() ? 1 : 0);
  out.family("tidepool_group_node_up", "gauge", "1 when the group view has the node up.");
  for (const cluster::NodeInfo& node : view.nodes) {
    out.sample("tidepool_group_node_up", node.up ? 1 : 0,
               "node=\"" + std::to_string(node.id) + "\",pool=\"" + node.pool + "\"");
  }
  return out.take();
}

}  // namespace tidepool::daemon
