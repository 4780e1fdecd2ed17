#include "common/config.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <toml++/toml.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <limits>
#include <system_error>
#include <utility>

#include "common/log.h"

namespace tidepool {
namespace {

constexpr std::uint64_t kKiB = 1ull << 10;
constexpr std::uint64_t kMiB = 1ull << 20;
constexpr std::uint64_t kGiB = 1ull << 30;
constexpr std::uint64_t kTiB = 1ull << 40;
constexpr std::uint64_t kPiB = 1ull << 50;
// What an RPC record needs besides the READ or WRITE payload: RPC header, credentials, NFS
// arguments or results.
constexpr std::uint64_t kRpcHeaderRoom = 4 * kKiB;

// Built by appending: GCC 12 at -O3 wrongly reports -Wrestrict for "'" + std::string(...).
std::string quote(std::string_view text) { return std::string("'").append(text).append("'"); }

// In the largest binary unit that divides it exactly: "128KiB", "1GiB", "1000".
constexpr std::uint64_t kMinL2Budget = 64ull << 20;

std::string format_size(std::uint64_t bytes) {
  static constexpr std::pair<std::uint64_t, std::string_view> kUnits[] = {
      {kPiB, "PiB"}, {kTiB, "TiB"}, {kGiB, "GiB"}, {kMiB, "MiB"}, {kKiB, "KiB"}};
  for (const auto& [unit, name] : kUnits) {
    if (bytes != 0 && bytes % unit == 0) return std::to_string(bytes / unit) + std::string(name);
  }
  return std::to_string(bytes);
}

// Splits "128 KiB" into 128 and "KiB"; nullopt unless `text` starts with a decimal number that
// fits in 64 bits.
std::optional<std::pair<std::uint64_t, std::string_view>> split_number(std::string_view text) {
  std::uint64_t number = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (ec != std::errc()) return std::nullopt;
  std::string_view unit = text.substr(static_cast<std::size_t>(end - text.data()));
  while (unit.starts_with(' ')) unit.remove_prefix(1);
  return std::pair{number, unit};
}

bool equal_ignoring_case(std::string_view a, std::string_view b) {
  return std::ranges::equal(
      a, b, [](unsigned char x, unsigned char y) { return std::tolower(x) == std::tolower(y); });
}

bool is_ipv4(std::string_view text) {
  in_addr address;
  return inet_pton(AF_INET, std::string(text).c_str(), &address) == 1;
}

bool is_client(std::string_view text) {
  if (text == "*") return true;
  const std::size_t slash = text.find('/');
  if (!is_ipv4(text.substr(0, slash))) return false;
  if (slash == std::string_view::npos) return true;
  const std::string_view prefix = text.substr(slash + 1);
  unsigned bits = 0;
  const auto [end, ec] = std::from_chars(prefix.data(), prefix.data() + prefix.size(), bits);
  return ec == std::errc() && end == prefix.data() + prefix.size() && prefix.size() <= 2 &&
         bits <= 32;
}

bool is_export_path(std::string_view path) {
  if (path != "/ifs" && !path.starts_with("/ifs/")) return false;
  for (path.remove_prefix(1);;) {
    const std::size_t slash = path.find('/');
    const std::string_view component = path.substr(0, slash);
    if (component.empty() || component == "." || component == "..") return false;
    if (slash == std::string_view::npos) return true;
    path.remove_prefix(slash + 1);
  }
}

bool is_not_empty(std::string_view text) { return !text.empty(); }


bool is_ipv4_and_port(std::string_view text) {
  const std::size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || !is_ipv4(text.substr(0, colon))) return false;
  const std::string_view port = text.substr(colon + 1);
  unsigned number = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), number);
  return ec == std::errc() && end == port.data() + port.size() && number >= 1 && number <= 65535;
}

// Reads a parsed TOML tree into a NodeConfig. Every error names the source, line and key.
class ConfigReader {
 public:
  explicit ConfigReader(std::string_view source) : source_(source) {}

  Result<NodeConfig> read(const toml::table& root);

 private:
  // Reads one key of a section into config_; nullopt when the section has no such key.
  using KeyReader = std::optional<Status> (ConfigReader::*)(std::string_view key,
                                                            const toml::node& value,
                                                            const std::string& name);

  // `where` with line 0 (unknown) leaves the line out.
  Status fail(const toml::source_region& where, const std::string& message) const;

  template <typename ReadKey>
  Status read_table(const toml::node& node, const std::string& name, ReadKey read_key) const;

  std::optional<Status> node_key(std::string_view key, const toml::node& value,
                                 const std::string& name);
  std::optional<Status> cluster_key(std::string_view key, const toml::node& value,
                                    const std::string& name);
  std::optional<Status> frontend_key(std::string_view key, const toml::node& value,
                                     const std::string& name);
  std::optional<Status> nfs_key(std::string_view key, const toml::node& value,
                                const std::string& name);
  std::optional<Status> store_key(std::string_view key, const toml::node& value,
                                  const std::string& name);
  std::optional<Status> jobs_key(std::string_view key, const toml::node& value,
                                 const std::string& name);
  std::optional<Status> sysctl_key(std::string_view key, const toml::node& value,
                                   const std::string& name);
  std::optional<Status> debug_key(std::string_view key, const toml::node& value,
                                  const std::string& name);
  std::optional<Status> log_key(std::string_view key, const toml::node& value,
                                const std::string& name);
  std::optional<Status> export_key(ExportConfig& entry, std::string_view key,
                                   const toml::node& value, const std::string& name) const;
  Status read_exports(const toml::node& value);
  Status read_clients(const toml::node& value, const std::string& name,
                      std::vector<std::string>& out) const;

  // Fails unless small + headroom <= large, at whichever of the two keys the file sets (the
  // defaults alone always pass).
  Status check_at_most(const toml::table& root, std::string_view small_key, std::uint64_t small,
                       std::string_view large_key, std::uint64_t large,
                       std::uint64_t headroom) const;

  template <typename T>
  Status integer(const toml::node& value, const std::string& name, T& out, std::int64_t min,
                 std::int64_t max) const;
  template <typename T>
  Status size(const toml::node& value, const std::string& name, T& out, std::uint64_t min,
              std::uint64_t max) const;
  Status duration(const toml::node& value, const std::string& name, std::chrono::seconds& out,
                  BareNumber bare = BareNumber::seconds) const;
  Status boolean(const toml::node& value, const std::string& name, bool& out) const;
  // `valid`, when given, must accept the string; `what` then says what it should have been.
  Status text(const toml::node& value, const std::string& name, std::string& out,
              bool (*valid)(std::string_view) = nullptr, std::string_view what = {}) const;

  std::string_view source_;
  NodeConfig config_;
};

Result<NodeConfig> ConfigReader::read(const toml::table& root) {
  static constexpr std::pair<std::string_view, KeyReader> kSections[] = {
      {"node", &ConfigReader::node_key},         {"cluster", &ConfigReader::cluster_key},
      {"frontend", &ConfigReader::frontend_key}, {"nfs", &ConfigReader::nfs_key},
      {"store", &ConfigReader::store_key},       {"jobs", &ConfigReader::jobs_key},
      {"sysctl", &ConfigReader::sysctl_key},     {"log", &ConfigReader::log_key},
      {"debug", &ConfigReader::debug_key},
  };
  for (auto&& [key, value] : root) {
    const std::string name(key.str());
    if (name == "exports") {
      TP_RETURN_IF_ERROR(read_exports(value));
      continue;
    }
    const auto* section =
        std::ranges::find(kSections, key.str(), &std::pair<std::string_view, KeyReader>::first);
    if (section == std::end(kSections)) {
      return fail(key.source(),
                  (value.is_table() ? "unknown table " : "unknown key ") + quote(name));
    }
    TP_RETURN_IF_ERROR(
        read_table(value, name, [&](auto k, const toml::node& v, const std::string& n) {
          return (this->*section->second)(k, v, n);
        }));
  }

  if (config_.data_dir.empty()) {
    const toml::node* node = root.get("node");
    return fail(node != nullptr ? node->source() : toml::source_region{},
                "'node.data_dir' is required");
  }
  if (config_.backend_address.empty()) config_.backend_address = config_.frontend_address + ":7100";
  if (config_.admin_address.empty()) config_.admin_address = config_.frontend_address + ":8080";
  TP_RETURN_IF_ERROR(check_at_most(root, "nfs.read_size_preferred", config_.read_size_preferred,
                                   "nfs.read_size_max", config_.read_size_max, 0));
  TP_RETURN_IF_ERROR(check_at_most(root, "nfs.write_size_preferred", config_.write_size_preferred,
                                   "nfs.write_size_max", config_.write_size_max, 0));
  TP_RETURN_IF_ERROR(check_at_most(root, "nfs.read_size_max", config_.read_size_max,
                                   "frontend.max_record_size", config_.max_record_bytes,
                                   kRpcHeaderRoom));
  TP_RETURN_IF_ERROR(check_at_most(root, "nfs.write_size_max", config_.write_size_max,
                                   "frontend.max_record_size", config_.max_record_bytes,
                                   kRpcHeaderRoom));
  return std::move(config_);
}

Status ConfigReader::fail(const toml::source_region& where, const std::string& message) const {
  std::string place(source_);
  if (where.begin.line != 0) place.append(":").append(std::to_string(where.begin.line));
  return error(Errc::invalid_argument, place + ": " + message);
}

template <typename ReadKey>
Status ConfigReader::read_table(const toml::node& node, const std::string& name,
                                ReadKey read_key) const {
  const toml::table* table = node.as_table();
  if (table == nullptr) return fail(node.source(), quote(name) + " must be a table");
  for (auto&& [key, value] : *table) {
    const std::string key_name = name + "." + std::string(key.str());
    const std::optional<Status> status = read_key(key.str(), value, key_name);
    if (!status) return fail(key.source(), "unknown key " + quote(key_name));
    TP_RETURN_IF_ERROR(*status);
  }
  return {};
}

std::optional<Status> ConfigReader::node_key(std::string_view key, const toml::node& value,
                                             const std::string& name) {
  if (key == "id") return integer(value, name, config_.node_id, 1, 65535);
  if (key == "data_dir") return text(value, name, config_.data_dir, is_not_empty, "a directory");
  if (key == "pool") return text(value, name, config_.pool, is_not_empty, "a pool name");
  if (key == "ram_budget") return size(value, name, config_.ram_budget_bytes, kMiB, kPiB);
  if (key == "l2_budget") {
    std::uint64_t bytes = 0;
    TP_RETURN_IF_ERROR(size(value, name, bytes, 0, kPiB));
    // The L2 keeps 128 KiB units in 16 shards of its budget: less would keep next to nothing.
    if (bytes != 0 && bytes < kMinL2Budget) {
      return fail(value.source(),
                  quote(name) + " must be 0 (no L2) or at least " + format_size(kMinL2Budget));
    }
    config_.l2_budget_bytes = bytes;
    return Status{};
  }
  return std::nullopt;
}

std::optional<Status> ConfigReader::cluster_key(std::string_view key, const toml::node& value,
                                                const std::string& name) {
  if (key == "name") {
    return text(value, name, config_.cluster_name, is_valid_name,
                "a cluster name (1-63 of A-Z a-z 0-9 - _)");
  }
  if (key == "backend_address") {
    return text(value, name, config_.backend_address, is_ipv4_and_port, "an IPv4 address:port");
  }
  if (key == "admin_address") {
    return text(value, name, config_.admin_address, is_ipv4_and_port, "an IPv4 address:port");
  }
  if (key == "backend_tls") return boolean(value, name, config_.backend_tls);
  if (key == "setup_secret_file") {
    return text(value, name, config_.setup_secret_file, is_not_empty, "a file");
  }
  return std::nullopt;
}

std::optional<Status> ConfigReader::frontend_key(std::string_view key, const toml::node& value,
                                                 const std::string& name) {
  if (key == "address") {
    return text(value, name, config_.frontend_address, is_ipv4, "an IPv4 address");
  }
  if (key == "nfs_port") return integer(value, name, config_.nfs_port, 1, 65535);
  if (key == "mount_port") return integer(value, name, config_.mount_port, 1, 65535);
  if (key == "portmap_port") return integer(value, name, config_.portmap_port, 0, 65535);
  if (key == "register_with_rpcbind") return boolean(value, name, config_.register_with_rpcbind);
  if (key == "io_threads") return integer(value, name, config_.io_threads, 1, 64);
  if (key == "max_record_size") {
    return size(value, name, config_.max_record_bytes, 64 * kKiB, 64 * kMiB);
  }
  if (key == "max_calls_per_connection") {
    return integer(value, name, config_.max_calls_per_connection, 1, 4096);
  }
  return std::nullopt;
}

std::optional<Status> ConfigReader::nfs_key(std::string_view key, const toml::node& value,
                                            const std::string& name) {
  if (key == "read_size_max") return size(value, name, config_.read_size_max, 4 * kKiB, kMiB);
  if (key == "read_size_preferred") {
    return size(value, name, config_.read_size_preferred, 4 * kKiB, kMiB);
  }
  if (key == "write_size_max") return size(value, name, config_.write_size_max, 4 * kKiB, kMiB);
  if (key == "write_size_preferred") {
    return size(value, name, config_.write_size_preferred, 4 * kKiB, kMiB);
  }
  if (key == "duplicate_request_cache_entries") {
    return integer(value, name, config_.duplicate_request_cache_entries, 1, 1 << 20);
  }
  if (key == "nlm_grace_period") {
    TP_RETURN_IF_ERROR(duration(value, name, config_.nlm_grace_period));
    if (config_.nlm_grace_period > std::chrono::hours(1)) {
      return fail(value.source(), quote(name) + " must be at most 1h");
    }
    return Status::success();
  }
  return std::nullopt;
}

std::optional<Status> ConfigReader::store_key(std::string_view key, const toml::node& value,
                                              const std::string& name) {
  if (key == "threads") return integer(value, name, config_.store_threads, 1, 64);
  if (key == "shards") return integer(value, name, config_.namespace_shards, 1, 256);
  if (key == "stripe_unit") {
    TP_RETURN_IF_ERROR(size(value, name, config_.stripe_unit_bytes, 4 * kKiB, 16 * kMiB));
    if (!std::has_single_bit(config_.stripe_unit_bytes)) {
      return fail(value.source(), quote(name) + " must be a power of two");
    }
    return Status::success();
  }
  return std::nullopt;
}

std::optional<Status> ConfigReader::jobs_key(std::string_view key, const toml::node& value,
                                             const std::string& name) {
  std::chrono::seconds* interval = key == "checkpoint_interval" ? &config_.job_checkpoint_interval
                                   : key == "retry_after"       ? &config_.job_retry_after
                                                                : nullptr;
  if (interval == nullptr) return std::nullopt;
  TP_RETURN_IF_ERROR(duration(value, name, *interval));
  if (*interval < std::chrono::seconds(1) || *interval > std::chrono::hours(1)) {
    return fail(value.source(), quote(name) + " must be 1s to 1h");
  }
  return Status{};
}

std::optional<Status> ConfigReader::sysctl_key(std::string_view key, const toml::node& value,
                                               const std::string& name) {
  if (key == "efs.bam.atime_enabled") return boolean(value, name, config_.atime_enabled);
  if (key == "efs.bam.atime_grace_period") {
    TP_RETURN_IF_ERROR(
        duration(value, name, config_.atime_grace_period, BareNumber::milliseconds));
    if (config_.atime_grace_period > kMaxAtimeGracePeriod) {
      return fail(value.source(), quote(name) + " must be at most 52W");
    }
    return Status{};
  }
  // An unquoted dotted name makes nested tables: say how to write it instead of "unknown key".
  if (value.is_table()) {
    return fail(value.source(),
                quote(name) + ": quote sysctl names, e.g. \"efs.bam.atime_enabled\" = true");
  }
  return std::nullopt;
}

std::optional<Status> ConfigReader::debug_key(std::string_view key, const toml::node& value,
                                              const std::string& name) {
  if (key != "cluster_create_pause") return std::nullopt;
  TP_RETURN_IF_ERROR(duration(value, name, config_.cluster_create_pause));
  if (config_.cluster_create_pause > std::chrono::hours(1)) {
    return fail(value.source(), quote(name) + " must be at most 1h");
  }
  return Status{};
}

std::optional<Status> ConfigReader::log_key(std::string_view key, const toml::node& value,
                                            const std::string& name) {
  if (key == "level") {
    return text(value, name, config_.log_level, is_log_level,
                "a log level (trace, debug, info, warn, error, critical or off)");
  }
  if (key == "file") return text(value, name, config_.log_file);
  return std::nullopt;
}

std::optional<Status> ConfigReader::export_key(ExportConfig& entry, std::string_view key,
                                               const toml::node& value,
                                               const std::string& name) const {
  if (key == "path") {
    return text(value, name, entry.path, is_export_path,
                "/ifs or a path under it without empty, '.' or '..' components");
  }
  if (key == "clients") return read_clients(value, name, entry.clients);
  if (key == "read_only") return boolean(value, name, entry.read_only);
  if (key == "secure") return boolean(value, name, entry.secure);
  if (key == "root_squash") return boolean(value, name, entry.root_squash);
  constexpr std::int64_t kMaxId = std::numeric_limits<std::uint32_t>::max();
  if (key == "map_all_uid") return integer(value, name, entry.map_all_uid, 0, kMaxId);
  if (key == "map_all_gid") return integer(value, name, entry.map_all_gid, 0, kMaxId);
  if (key == "anon_uid") return integer(value, name, entry.anon_uid, 0, kMaxId);
  if (key == "anon_gid") return integer(value, name, entry.anon_gid, 0, kMaxId);
  return std::nullopt;
}

Status ConfigReader::read_exports(const toml::node& value) {
  const toml::array* list = value.as_array();
  if (list == nullptr || !(list->empty() || list->is_array_of_tables())) {
    return fail(value.source(), "'exports' must be an array of tables ([[exports]])");
  }
  for (std::size_t i = 0; i < list->size(); ++i) {
    const toml::table& table = *list->get(i)->as_table();
    const std::string name = "exports[" + std::to_string(i) + "]";
    ExportConfig entry;
    TP_RETURN_IF_ERROR(
        read_table(table, name, [&](auto k, const toml::node& v, const std::string& n) {
          return export_key(entry, k, v, n);
        }));
    if (!table.contains("path"))
      return fail(table.source(), quote(name + ".path") + " is required");
    if (entry.map_all_gid && !entry.map_all_uid) {
      return fail(table.get("map_all_gid")->source(),
                  quote(name + ".map_all_gid") + " is only meaningful with map_all_uid");
    }
    if (entry.map_all_uid && !entry.map_all_gid) entry.map_all_gid = entry.anon_gid;
    for (std::size_t j = 0; j < config_.exports.size(); ++j) {
      if (config_.exports[j].path == entry.path) {
        return fail(table.get("path")->source(), quote(name + ".path") + ": " + quote(entry.path) +
                                                     " is already exported by exports[" +
                                                     std::to_string(j) + "]");
      }
    }
    config_.exports.push_back(std::move(entry));
  }
  return {};
}

Status ConfigReader::read_clients(const toml::node& value, const std::string& name,
                                  std::vector<std::string>& out) const {
  const toml::array* list = value.as_array();
  if (list == nullptr || list->empty()) {
    return fail(value.source(), quote(name) + " must be a non-empty array of strings");
  }
  out.clear();
  for (std::size_t i = 0; i < list->size(); ++i) {
    TP_RETURN_IF_ERROR(text(*list->get(i), name + "[" + std::to_string(i) + "]", out.emplace_back(),
                            is_client, "an IPv4 address or CIDR"));
  }
  return {};
}

Status ConfigReader::check_at_most(const toml::table& root, std::string_view small_key,
                                   std::uint64_t small, std::string_view large_key,
                                   std::uint64_t large, std::uint64_t headroom) const {
  if (small + headroom <= large) return {};
  toml::node_view at = root.at_path(small_key);
  if (!at) at = root.at_path(large_key);
  std::string message = quote(small_key) + " (" + format_size(small) + ")";
  if (headroom != 0) message += " plus " + format_size(headroom) + " of headers";
  return fail(at ? at.node()->source() : toml::source_region{},
              message + " must not exceed " + quote(large_key) + " (" + format_size(large) + ")");
}

template <typename T>
Status ConfigReader::integer(const toml::node& value, const std::string& name, T& out,
                             std::int64_t min, std::int64_t max) const {
  const std::optional<std::int64_t> number = value.value_exact<std::int64_t>();
  if (!number || *number < min || *number > max) {
    return fail(value.source(), quote(name) + " must be an integer in " + std::to_string(min) +
                                    ".." + std::to_string(max));
  }
  out = static_cast<T>(*number);
  return {};
}

template <typename T>
Status ConfigReader::size(const toml::node& value, const std::string& name, T& out,
                          std::uint64_t min, std::uint64_t max) const {
  std::optional<std::uint64_t> bytes;
  if (const auto number = value.value_exact<std::int64_t>(); number && *number >= 0) {
    bytes = static_cast<std::uint64_t>(*number);
  } else if (const auto string = value.value_exact<std::string>()) {
    Result<std::uint64_t> parsed = parse_size(*string);
    if (!parsed.ok()) return fail(value.source(), quote(name) + ": " + parsed.status().message());
    bytes = *parsed;
  }
  if (!bytes || *bytes < min || *bytes > max) {
    return fail(value.source(),
                quote(name) + " must be a size in " + format_size(min) + ".." + format_size(max));
  }
  out = static_cast<T>(*bytes);
  return {};
}

Status ConfigReader::duration(const toml::node& value, const std::string& name,
                              std::chrono::seconds& out, BareNumber bare) const {
  std::optional<std::string> text = value.value_exact<std::string>();
  if (const auto number = value.value_exact<std::int64_t>(); number && *number >= 0) {
    text = std::to_string(*number);
  }
  if (!text) {
    return fail(value.source(),
                quote(name) + " must be a duration such as 90s, 5m, 12h, 1D or 2W");
  }
  Result<std::chrono::seconds> parsed = parse_duration(*text, bare);
  if (!parsed.ok()) return fail(value.source(), quote(name) + ": " + parsed.status().message());
  out = *parsed;
  return {};
}

Status ConfigReader::boolean(const toml::node& value, const std::string& name, bool& out) const {
  const std::optional<bool> flag = value.value_exact<bool>();
  if (!flag) return fail(value.source(), quote(name) + " must be true or false");
  out = *flag;
  return {};
}

Status ConfigReader::text(const toml::node& value, const std::string& name, std::string& out,
                          bool (*valid)(std::string_view), std::string_view what) const {
  std::optional<std::string> string = value.value_exact<std::string>();
  if (!string) return fail(value.source(), quote(name) + " must be a string");
  if (valid != nullptr && !valid(*string)) {
    return fail(value.source(),
                quote(name) + ": " + quote(*string) + " is not " + std::string(what));
  }
  out = std::move(*string);
  return {};
}

}  // namespace

bool is_valid_name(std::string_view text) {
  return !text.empty() && text.size() <= 63 && std::ranges::all_of(text, [](unsigned char c) {
    return std::isalnum(c) != 0 || c == '-' || c == '_';
  });
}

Status validate_export(const ExportConfig& entry) {
  if (!is_export_path(entry.path)) {
    return error(Errc::invalid_argument,
                 "path " + quote(entry.path) +
                     " is not /ifs or a path under it without empty, '.' or '..' components");
  }
  if (entry.clients.empty()) return error(Errc::invalid_argument, "clients must not be empty");
  for (const std::string& client : entry.clients) {
    if (!is_client(client)) {
      return error(Errc::invalid_argument,
                   "client " + quote(client) + " is not an IPv4 address, a CIDR or '*'");
    }
  }
  if (entry.map_all_gid.has_value() && !entry.map_all_uid.has_value()) {
    return error(Errc::invalid_argument, "map_all_gid is only meaningful with map_all_uid");
  }
  return {};
}

Result<NodeConfig> parse_config(std::string_view toml_text, std::string_view source_name) {
  toml::parse_result parsed = toml::parse(toml_text);
  if (!parsed) {
    const toml::source_position& at = parsed.error().source().begin;
    return error(Errc::invalid_argument, std::string(source_name) + ":" + std::to_string(at.line) +
                                             ":" + std::to_string(at.column) + ": " +
                                             std::string(parsed.error().description()));
  }
  return ConfigReader(source_name).read(parsed.table());
}

Result<NodeConfig> load_config_file(const std::string& path) {
  const auto unreadable = [&path](int err) {
    return error(err == ENOENT ? Errc::not_found : Errc::io_error,
                 "cannot read config file '" + path + "': " + std::generic_category().message(err));
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return unreadable(errno);
  std::string text;
  char buffer[16 * 1024];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n > 0) {
      text.append(buffer, static_cast<std::size_t>(n));
    } else if (n == 0) {
      break;
    } else if (errno != EINTR) {
      const int err = errno;
      ::close(fd);
      return unreadable(err);
    }
  }
  ::close(fd);
  return parse_config(text, path);
}

Result<std::uint64_t> parse_size(std::string_view text) {
  static constexpr std::pair<std::string_view, std::uint64_t> kUnits[] = {
      {"", 1},
      {"B", 1},
      {"K", kKiB},
      {"KiB", kKiB},
      {"KB", 1000},
      {"M", kMiB},
      {"MiB", kMiB},
      {"MB", 1000'000},
      {"G", kGiB},
      {"GiB", kGiB},
      {"GB", 1000'000'000},
      {"T", kTiB},
      {"TiB", kTiB},
      {"TB", 1000'000'000'000},
      {"P", kPiB},
      {"PiB", kPiB},
      {"PB", 1000'000'000'000'000},
  };
  if (const auto split = split_number(text)) {
    const auto [number, unit] = *split;
    for (const auto& [name, multiplier] : kUnits) {
      if (equal_ignoring_case(unit, name) &&
          number <= std::numeric_limits<std::uint64_t>::max() / multiplier) {
        return number * multiplier;
      }
    }
  }
  return error(Errc::invalid_argument,
               quote(text) + " is not a size such as 4096, 128KiB, 1MiB, 2GiB or 1TB");
}

Result<std::chrono::seconds> parse_duration(std::string_view text, BareNumber bare) {
  // "M" is left out: minutes or months?
  static constexpr std::pair<std::string_view, std::int64_t> kUnits[] = {
      {"", 1},     {"s", 1},     {"S", 1},     {"m", 60},        {"h", 3600},
      {"H", 3600}, {"d", 86400}, {"D", 86400}, {"w", 7 * 86400}, {"W", 7 * 86400},
  };
  if (const auto split = split_number(text)) {
    const auto [number, unit] = *split;
    if (unit == "ms" || (unit.empty() && bare == BareNumber::milliseconds)) {
      if (number % 1000 != 0) {
        return error(Errc::invalid_argument,
                     quote(text) + " counts milliseconds and must be whole seconds, such as "
                                   "86400000 for one day");
      }
      return std::chrono::seconds(static_cast<std::int64_t>(number / 1000));
    }
    for (const auto& [name, multiplier] : kUnits) {
      if (unit == name && number <= static_cast<std::uint64_t>(
                                        std::numeric_limits<std::int64_t>::max() / multiplier)) {
        return std::chrono::seconds(static_cast<std::int64_t>(number) * multiplier);
      }
    }
  }
  return error(Errc::invalid_argument,
               quote(text) + " is not a duration such as 90s, 5m, 12h, 1D or 2W");
}

std::uint64_t default_l2_budget(std::uint64_t ram_bytes) {
  return std::min<std::uint64_t>(ram_bytes / 4, 4ull << 30);
}

std::string config_reference() {
  return R"(# Tidepool node configuration. Every key is optional except node.data_dir; the values shown
# are the defaults. Sizes are a byte count or a string: "128KiB", "1MiB", "2GiB" (also K, M, G;
# KB, MB, GB are powers of 1000). Durations are seconds or a string: "90s", "5m", "12h", "1D", "2W"
# (OneFS's keys in [sysctl] take OneFS's units: efs.bam.atime_grace_period counts milliseconds).

[node]
id = 1                          # this node's id in the cluster, 1..65535
data_dir = "/var/lib/tidepool"  # required: where this node keeps its shards and stripe units
pool = "default"                # the node pool this node belongs to
ram_budget = "1GiB"             # memory for the L1 (other nodes' data), at least 1MiB
# l2_budget = "4GiB"            # memory for the L2 (this node's own data); unset: a quarter of
                                # the machine's RAM, at most 4GiB; 0: no L2, else at least 64MiB

[cluster]
# name = "tidepool"             # unset by default; when set, refuse a data_dir of another cluster
# backend_address = "127.0.0.1:7100"  # node-to-node messages; default the front-end address:7100
# admin_address = "127.0.0.1:8080"    # admin API, /metrics, /health; default front-end address:8080
backend_tls = true              # mutual TLS between nodes; switch off only for benchmarks
# setup_secret_file = "/var/lib/tidepool/setup-secret"  # default data_dir/setup-secret, made
                                # at first start: while in no cluster, the node is made the
                                # first of one or joined to one only by who gives this secret

[frontend]
address = "127.0.0.1"           # IPv4 address NFS, MOUNT and portmap listen on
nfs_port = 2049                 # NFS port
mount_port = 20048              # MOUNT port
portmap_port = 111              # port to answer PMAP on; 0 = do not serve PMAP ourselves
register_with_rpcbind = true    # register NFS and MOUNT with a running rpcbind
io_threads = 4                  # threads serving client connections, 1..64
max_record_size = "2MiB"        # largest RPC record accepted, 64KiB..64MiB
max_calls_per_connection = 64   # calls in progress on one connection, 1..4096

[nfs]
read_size_max = "1MiB"          # largest READ (FSINFO rtmax), 4KiB..1MiB
read_size_preferred = "128KiB"  # READ size advertised to clients (rtpref), at most read_size_max
write_size_max = "1MiB"         # largest WRITE (wtmax), 4KiB..1MiB
write_size_preferred = "512KiB" # WRITE size advertised to clients (wtpref), at most write_size_max
duplicate_request_cache_entries = 4096  # replies kept to answer retransmissions, 1..1048576
nlm_grace_period = "45s"        # once the node joins, only reclaims of NFS locks; at most 1h

[store]
threads = 4                     # threads for SQLite and block I/O, 1..64
stripe_unit = "128KiB"          # bytes of a file per stripe unit, a power of two in 4KiB..16MiB

[jobs]
checkpoint_interval = "5s"      # how often a running job keeps its progress in the group view
                                # (every node applies each save), 1s..1h
retry_after = "3s"              # how long a job stopped on a transient error (the namespace out
                                # of reach, no quorum) waits to be taken up again, 1s..1h

[sysctl]
"efs.bam.atime_enabled" = true       # track access times
"efs.bam.atime_grace_period" = "1D"  # persist an atime only once it has moved by this much;
                                     # a bare number is milliseconds, as in OneFS: 86400000

[log]
level = "info"                  # trace, debug, info, warn, error, critical or off
file = ""                       # file to append the log to; empty = stderr

# One [[exports]] table per export, each key shown with its default but path. Without any, the
# node exports nothing until it is in a cluster that has exports ("tide nfs exports create");
# a node in no cluster serves only the exports named here. A cluster takes its first exports
# from the configuration of the node that creates it.
# [[exports]]
# path = "/ifs"                 # "/ifs" or a directory under it; required
# clients = ["*"]               # IPv4 addresses, CIDRs such as "10.0.0.0/8", or "*" for any
# read_only = false             # refuse every change
# secure = true                 # only calls from privileged source ports (< 1024), as knfsd;
#                               # false for clients that cannot bind one (a non-root nfs-ls)
# root_squash = true            # callers with uid 0 become anon_uid/anon_gid
# map_all_uid = 65534           # unset by default; when set, every caller becomes this uid
# map_all_gid = 65534           # and this gid; defaults to anon_gid when map_all_uid is set
# anon_uid = 65534              # uid of squashed callers
# anon_gid = 65534              # gid of squashed callers
)";
}

}  // namespace tidepool
