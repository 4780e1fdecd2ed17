#include "daemon/metrics.h"

#include <map>

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

std::string render_metrics(Membership& membership, const nfsd::NfsServer::Traffic& traffic,
                           const NodeStats& stats, const store::IntegrityCounters& integrity) {
  Exposition out;
  const NodeConfig& config = membership.config();
  out.family("tidepool_node_info", "gauge", "This node: its id and pool.");
  out.sample("tidepool_node_info", 1,
             "node=\"" + std::to_string(config.node_id) + "\",pool=\"" + config.pool + "\"");
  out.metric("tidepool_nfs_received_bytes_total", "counter",
             "Bytes received from NFS, MOUNT and portmap clients.", traffic.bytes_received);
  out.metric("tidepool_nfs_sent_bytes_total", "counter", "Bytes sent to NFS clients.",
             traffic.bytes_sent);
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
             "Backend connections refused: bad hello, bad frame or failed TLS.",
             transport.connections_refused);
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
