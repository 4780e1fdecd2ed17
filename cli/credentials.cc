#include "cli/credentials.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/ip/address_v4.hpp>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <iterator>

namespace tidepool::cli {
namespace {

namespace fs = std::filesystem;

Status address_error(std::string_view text) {
  return error(Errc::invalid_argument, "'" + std::string(text) +
                                           "' is not an admin address: expected HOST[:PORT], "
                                           "HOST an IPv4 address");
}

Status file_error(const fs::path& file, const std::string& what) {
  return error(Errc::invalid_argument, file.string() + ": " + what);
}

Result<std::string> string_field(const Json& object, const char* key, const fs::path& file) {
  auto found = object.find(key);
  if (found == object.end() || !found->is_string()) {
    return file_error(file, std::string("'") + key + "' is missing or not a string");
  }
  return found->get<std::string>();
}

Status write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    ssize_t written = ::write(fd, text.data(), text.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      return error(Errc::io_error, std::strerror(errno));
    }
    text.remove_prefix(static_cast<std::size_t>(written));
  }
  return {};
}

}  // namespace

std::string AdminAddress::to_string() const { return host + ":" + std::to_string(port); }

Result<AdminAddress> parse_admin_address(std::string_view text) {
  AdminAddress address;
  std::string_view host = text;
  if (auto colon = text.rfind(':'); colon != std::string_view::npos) {
    host = text.substr(0, colon);
    std::string_view port = text.substr(colon + 1);
    unsigned value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value == 0 ||
        value > 65535) {
      return address_error(text);
    }
    address.port = static_cast<std::uint16_t>(value);
  }
  boost::system::error_code ec;
  boost::asio::ip::make_address_v4(std::string(host), ec);
  if (ec) return address_error(text);
  address.host = std::string(host);
  return address;
}

Result<std::vector<AdminAddress>> parse_admin_address_list(std::string_view text) {
  std::vector<AdminAddress> addresses;
  while (!text.empty()) {
    auto comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    if (!item.empty()) {
      TP_ASSIGN_OR_RETURN(AdminAddress address, parse_admin_address(item));
      addresses.push_back(std::move(address));
    }
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
  }
  if (addresses.empty()) return error(Errc::invalid_argument, "no admin address given");
  return addresses;
}

std::optional<fs::path> named_work_directory(const std::optional<std::string>& flag,
                                             const std::optional<std::string>& variable,
                                             const fs::path& current_directory) {
  // `/` keeps an absolute path as it is.
  if (flag && !flag->empty()) return (current_directory / *flag).lexically_normal();
  if (variable && !variable->empty()) return (current_directory / *variable).lexically_normal();
  return std::nullopt;
}

std::optional<fs::path> find_work_directory(const std::optional<std::string>& flag,
                                            const std::optional<std::string>& variable,
                                            const fs::path& current_directory) {
  if (auto named = named_work_directory(flag, variable, current_directory)) return named;
  for (fs::path directory = current_directory;; directory = directory.parent_path()) {
    std::error_code ec;
    if (fs::is_directory(directory / kWorkDirectoryName, ec)) {
      return directory / kWorkDirectoryName;
    }
    if (directory == directory.parent_path()) return std::nullopt;
  }
}

Result<Credentials> read_credentials(const fs::path& file) {
  std::error_code ec;
  if (!fs::exists(file, ec)) return error(Errc::not_found, "no " + file.string());
  std::ifstream stream(file);
  std::string text(std::istreambuf_iterator<char>(stream), {});
  if (!stream.is_open() || stream.bad()) {
    return error(Errc::io_error, "cannot read " + file.string());
  }

  Json json = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) return file_error(file, "not a JSON object");
  Credentials credentials;
  TP_ASSIGN_OR_RETURN(credentials.cluster, string_field(json, "cluster", file));
  TP_ASSIGN_OR_RETURN(credentials.token, string_field(json, "token", file));
  TP_ASSIGN_OR_RETURN(credentials.ca_certificate, string_field(json, "ca_certificate", file));
  if (auto id = json.find("id"); id != json.end()) credentials.id = *id;
  auto nodes = json.find("nodes");
  if (nodes == json.end() || !nodes->is_array()) {
    return file_error(file, "'nodes' is missing or not a list");
  }
  for (const Json& node : *nodes) {
    if (!node.is_string()) return file_error(file, "'nodes' holds something not an address");
    credentials.nodes.push_back(node.get<std::string>());
  }
  return credentials;
}

Status write_credentials(const fs::path& file, const Credentials& credentials) {
  std::error_code ec;
  if (file.has_parent_path()) fs::create_directories(file.parent_path(), ec);
  if (ec) {
    return error(Errc::io_error,
                 "cannot create " + file.parent_path().string() + ": " + ec.message());
  }
  const Json json = {{"cluster", credentials.cluster},
                     {"id", credentials.id},
                     {"token", credentials.token},
                     {"ca_certificate", credentials.ca_certificate},
                     {"nodes", credentials.nodes}};
  const std::string text = json.dump(2) + "\n";

  // Written beside the file and renamed over it, so that a crash leaves the old credentials or
  // the new ones, never half of them.
  const fs::path temporary = file.string() + ".tmp";
  int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return error(Errc::io_error,
                 "cannot create " + temporary.string() + ": " + std::strerror(errno));
  }
  // open() keeps the mode of a leftover temporary file; the token must stay private.
  Status written =
      ::fchmod(fd, 0600) == 0 ? write_all(fd, text) : error(Errc::io_error, std::strerror(errno));
  if (written.ok() && ::fsync(fd) != 0) written = error(Errc::io_error, std::strerror(errno));
  ::close(fd);
  if (written.ok() && ::rename(temporary.c_str(), file.c_str()) != 0) {
    written = error(Errc::io_error, std::strerror(errno));
  }
  if (!written.ok()) {
    ::unlink(temporary.c_str());
    return error(Errc::io_error, "cannot write " + file.string() + ": " + written.message());
  }
  return {};
}

}  // namespace tidepool::cli
