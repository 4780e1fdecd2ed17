// The node configuration: what one tided process reads from its TOML file at startup.
// Cluster-wide settings that change at run time (policies, exports made through the admin API,
// sysctls) live in the group view; the values here seed it on a new node.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tidepool {

struct ExportConfig {
  std::string path;                       // "/ifs" or a path under it, in canonical form
  std::vector<std::string> clients{"*"};  // IPv4 addresses, IPv4 CIDRs or "*" (any); not empty
  bool read_only = false;
  // Calls only from privileged source ports (< 1024), which only root may bind, as knfsd's
  // default "secure"; false is knfsd's "insecure".
  bool secure = true;
  bool root_squash = true;                   // uid 0 becomes anon_uid/anon_gid
  std::optional<std::uint32_t> map_all_uid;  // when set, every caller becomes this uid...
  std::optional<std::uint32_t> map_all_gid;  // ...and gid; set exactly when map_all_uid is
  std::uint32_t anon_uid = 65534;
  std::uint32_t anon_gid = 65534;

  bool operator==(const ExportConfig&) const = default;
};

// The L2's budget when the configuration sets none: a quarter of `ram_bytes`, at most 4GiB.
std::uint64_t default_l2_budget(std::uint64_t ram_bytes);

// Defaults are those of config_reference(); the comments give each field's TOML key.
struct NodeConfig {
  // [node]
  std::uint32_t node_id = 1;                    // "id", 1..65535
  std::string data_dir;                         // "data_dir", required
  std::string pool = "default";                 // "pool"
  std::uint64_t ram_budget_bytes = 1ull << 30;  // "ram_budget", at least 1MiB: the L1
  // "l2_budget": the L2 (this node's own data as it is read); unset: the daemon's choice from
  // the machine's memory (default_l2_budget()); 0: none
  std::optional<std::uint64_t> l2_budget_bytes;
  // [cluster]
  std::string cluster_name;     // "name"; when set, a data directory of another cluster is refused
  std::string backend_address;  // "backend_address", "IPv4:port"; default the frontend address:7100
  std::string admin_address;    // "admin_address", "IPv4:port"; default the frontend address:8080
  bool backend_tls = true;      // "backend_tls": mutual TLS between nodes
  // "setup_secret_file": what a node in no cluster asks of whoever creates a cluster with it or
  // joins it to one; empty: data_dir/setup-secret, which the node makes at its first start
  std::string setup_secret_file;
  // [frontend]
  std::string frontend_address = "127.0.0.1";   // "address", an IPv4 literal
  std::uint16_t nfs_port = 2049;                // "nfs_port"
  std::uint16_t mount_port = 20048;             // "mount_port"
  std::uint16_t portmap_port = 111;             // "portmap_port"; 0 = do not serve PMAP ourselves
  bool register_with_rpcbind = true;            // "register_with_rpcbind"
  std::uint32_t io_threads = 4;                 // "io_threads", 1..64
  std::uint32_t max_record_bytes = 2u << 20;    // "max_record_size", 64KiB..64MiB
  std::uint32_t max_calls_per_connection = 64;  // "max_calls_per_connection", 1..4096
  // [nfs]; sizes 4KiB..1MiB, a preferred size at most its maximum, and a maximum plus 4KiB of
  // RPC headers at most max_record_bytes.
  std::uint32_t read_size_max = 1u << 20;                // "read_size_max"
  std::uint32_t read_size_preferred = 128u << 10;        // "read_size_preferred"
  std::uint32_t write_size_max = 1u << 20;               // "write_size_max"
  std::uint32_t write_size_preferred = 512u << 10;       // "write_size_preferred"
  std::uint32_t duplicate_request_cache_entries = 4096;  // same key, 1..1048576
  std::chrono::seconds nlm_grace_period{45};             // "nlm_grace_period", at most 1h
  // [store]
  std::uint32_t store_threads = 4;               // "threads", 1..64
  std::uint32_t stripe_unit_bytes = 128u << 10;  // "stripe_unit", a power of two 4KiB..16MiB
  // "shards", 1..256: how many shards the namespace is cut into; fixed when the cluster (or a
  // node's data directory) is made: later values are not taken
  std::uint32_t namespace_shards = 1;
  // [jobs]; each 1s..1h
  // "checkpoint_interval": how often a running job keeps its progress in the group view, which
  // every node applies — what a job taken up elsewhere starts from, and what `tide job` shows
  std::chrono::seconds job_checkpoint_interval{5};
  // "retry_after": how long a job stopped on a transient error waits to be taken up again
  std::chrono::seconds job_retry_after{3};
  // [sysctl]; keys are quoted dotted names
  bool atime_enabled = true;                           // "efs.bam.atime_enabled"
  std::chrono::seconds atime_grace_period{24 * 3600};  // "efs.bam.atime_grace_period"
  // [debug]; for fault-injection tests
  // "cluster_create_pause", at most 1h: the pause of fail point kClusterCreateRecords
  std::chrono::seconds cluster_create_pause{0};
  // [log]
  std::string log_level = "info";  // "level": trace|debug|info|warn|error|critical|off
  std::string log_file;            // "file"; empty = stderr
  // [[exports]]; none without the key: a careful default, since an export to everyone, written
  // for the administrator, would be served before they chose whom to serve. Paths are unique.
  std::vector<ExportConfig> exports;

  bool operator==(const NodeConfig&) const = default;
};

// Parses and validates a whole configuration. Every error is invalid_argument with a one-line
// message naming `source_name`, the line and the key:
//   node.toml:7: unknown key 'frontend.nfs_prot'
//   node.toml:4:9: <TOML syntax error>
// Unknown tables and keys are errors, so a typo never silently leaves a default in place.
Result<NodeConfig> parse_config(std::string_view toml_text, std::string_view source_name);

// parse_config on a file's contents, with the path as the source name. A file that cannot be read
// is not_found or io_error, naming the path.
Result<NodeConfig> load_config_file(const std::string& path);

// "4096", "128KiB", "1MiB", "2GiB", "1TiB" (also "K", "M", "G", "T"); "KB", "MB", "GB", "TB" are
// powers of 1000. Units are case-insensitive and may follow a space. Errors: invalid_argument,
// also for values that overflow 64 bits.
Result<std::uint64_t> parse_size(std::string_view text);

// The longest efs.bam.atime_grace_period: a year. Longer would stop atime for good, and the
// span in nanoseconds must stay far inside 64 bits.
inline constexpr std::chrono::seconds kMaxAtimeGracePeriod{52 * 7 * 86400};

// What a duration written as a plain integer counts. OneFS's keys take OneFS's own unit:
// efs.bam.atime_grace_period counts milliseconds there (86400000 is one day).
enum class BareNumber { seconds, milliseconds };
// "90s", "5m", "12h", "1d"/"1D", "2w"/"2W", "86400000ms"; a plain integer counts `bare`.
// Milliseconds must be whole seconds. Errors: invalid_argument.
Result<std::chrono::seconds> parse_duration(std::string_view text,
                                            BareNumber bare = BareNumber::seconds);

// Checks an export made through the admin API by the rules of [[exports]]: a canonical path
// under /ifs, clients that are IPv4 addresses, CIDRs or "*", map_all_gid only with map_all_uid.
// Errors: invalid_argument naming the field.
Status validate_export(const ExportConfig& entry);

// 1-63 characters of A-Z a-z 0-9 - _: names of clusters, node pools and tiers.
bool is_valid_name(std::string_view name);

// Every key with its default and one line of meaning, as TOML that parse_config accepts (with an
// example data_dir): the output of `tided --print-default-config`.
std::string config_reference();

}  // namespace tidepool
