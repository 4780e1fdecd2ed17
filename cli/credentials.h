// Where `tide` finds the cluster: the credentials file `tide.json` that `tide cluster create`
// writes in a work directory, and the admin addresses of the nodes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/json.h"
#include "common/status.h"

namespace tidepool::cli {

inline constexpr std::string_view kCredentialsFileName = "tide.json";
inline constexpr std::string_view kWorkDirectoryName = ".tidepool";
inline constexpr std::uint16_t kDefaultAdminPort = 8080;

// The contents of tide.json.
struct Credentials {
  std::string cluster;             // the cluster's name
  Json id;                         // the cluster's id, as the server gave it
  std::string token;               // the bearer token for /v1/
  std::string ca_certificate;      // PEM of the cluster CA, which signs every member's certificate
  std::vector<std::string> nodes;  // admin addresses "HOST:PORT", tried in this order
};

// A node's admin address.
struct AdminAddress {
  std::string host;  // an IPv4 literal
  std::uint16_t port = kDefaultAdminPort;

  std::string to_string() const;  // "127.0.0.1:8080"
  bool operator==(const AdminAddress&) const = default;
};

// "HOST[:PORT]", HOST an IPv4 literal; invalid_argument when it is not one.
Result<AdminAddress> parse_admin_address(std::string_view text);

// A comma-separated list of addresses, as --cluster and $TIDE_CLUSTER give them.
Result<std::vector<AdminAddress>> parse_admin_address_list(std::string_view text);

// The work directory named by `flag` (--workdir), else by `variable` ($TIDE_WORKDIR), relative
// to `current_directory`; nullopt when neither names one.
std::optional<std::filesystem::path> named_work_directory(
    const std::optional<std::string>& flag, const std::optional<std::string>& variable,
    const std::filesystem::path& current_directory);

// named_work_directory, else the first ".tidepool" directory in `current_directory` or one of
// its parents; nullopt when there is none.
std::optional<std::filesystem::path> find_work_directory(
    const std::optional<std::string>& flag, const std::optional<std::string>& variable,
    const std::filesystem::path& current_directory);

// not_found when `file` does not exist; invalid_argument naming the file when it is not a
// credentials file; io_error when it cannot be read.
Result<Credentials> read_credentials(const std::filesystem::path& file);

// Replaces `file` (or creates it) atomically; only its owner can read it. Creates the
// directory if it is missing.
Status write_credentials(const std::filesystem::path& file, const Credentials& credentials);

}  // namespace tidepool::cli
