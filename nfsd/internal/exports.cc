#include "nfsd/internal/exports.h"

#include <algorithm>
#include <charconv>

namespace tidepool::nfsd {
namespace {

// FNV-1a: a stable 32-bit id for an export path.
std::uint32_t path_id(std::string_view path) {
  std::uint32_t h = 2166136261u;
  for (char c : path) {
    h ^= static_cast<std::uint8_t>(c);
    h *= 16777619u;
  }
  return h;
}

}  // namespace

std::vector<std::string> split_path(std::string_view path) {
  std::vector<std::string> parts;
  std::size_t i = 0;
  while (i < path.size()) {
    std::size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    std::string_view part = path.substr(i, j - i);
    if (!part.empty() && part != ".") parts.emplace_back(part);
    i = j + 1;
  }
  return parts;
}

Export::Export(ExportConfig config) : config_(std::move(config)), id_(path_id(config_.path)) {
  components_ = split_path(config_.path);
  if (!components_.empty()) components_.erase(components_.begin());  // "ifs"
  for (const std::string& client : config_.clients) {
    if (client == "*") {
      networks_.push_back({0, 0});
      continue;
    }
    // Entries come validated (by the configuration loader, or before they are replicated); one
    // that is not anyway admits nobody rather than taking the daemon down.
    std::size_t slash = client.find('/');
    int prefix = 32;
    if (slash != std::string::npos) {
      const char* first = client.data() + slash + 1;
      const char* last = client.data() + client.size();
      auto parsed = std::from_chars(first, last, prefix);
      if (parsed.ec != std::errc() || parsed.ptr != last || prefix < 0 || prefix > 32) continue;
    }
    boost::system::error_code ec;
    auto address = boost::asio::ip::make_address_v4(client.substr(0, slash), ec);
    if (ec) continue;
    std::uint32_t mask = prefix == 0 ? 0 : ~std::uint32_t{0} << (32 - prefix);
    networks_.push_back({address.to_uint() & mask, mask});
  }
}

Export::Export(const Export& other)
    : config_(other.config_),
      id_(other.id_),
      components_(other.components_),
      networks_(other.networks_),
      root_inode_(other.root_inode()) {}

bool Export::allows(boost::asio::ip::address_v4 client) const {
  std::uint32_t a = client.to_uint();
  return std::any_of(networks_.begin(), networks_.end(),
                     [a](const Network& n) { return (a & n.mask) == n.address; });
}

store::Caller Export::caller_for(const CallerIdentity& identity) const {
  store::Caller caller{config_.anon_uid, config_.anon_gid, {}};
  if (config_.map_all_uid) {
    caller.uid = *config_.map_all_uid;
    caller.gid = config_.map_all_gid.value_or(config_.anon_gid);
    return caller;
  }
  if (identity.flavor != AuthFlavor::sys) return caller;
  caller.uid = identity.uid;
  caller.gid = identity.gid;
  caller.groups = identity.groups;
  if (config_.root_squash) {
    if (caller.uid == 0) caller.uid = config_.anon_uid;
    if (caller.gid == 0) caller.gid = config_.anon_gid;
    std::replace(caller.groups.begin(), caller.groups.end(), std::uint32_t{0}, config_.anon_gid);
  }
  return caller;
}

ExportTable::ExportTable(const std::vector<ExportConfig>& exports) {
  for (const auto& e : exports) exports_.emplace_back(e);
}

const Export* ExportTable::by_id(std::uint32_t id) const {
  for (const Export& e : exports_) {
    if (e.id() == id) return &e;
  }
  return nullptr;
}

const Export* ExportTable::containing(std::string_view path,
                                      std::vector<std::string>& below) const {
  std::vector<std::string> parts = split_path(path);
  if (parts.empty() || parts.front() != "ifs") return nullptr;
  parts.erase(parts.begin());
  const Export* best = nullptr;
  for (const Export& e : exports_) {
    const auto& c = e.components();
    if (c.size() > parts.size() || !std::equal(c.begin(), c.end(), parts.begin())) continue;
    if (!best || c.size() > best->components().size()) best = &e;
  }
  if (best) below.assign(parts.begin() + static_cast<long>(best->components().size()), parts.end());
  return best;
}

LiveExports::LiveExports(const std::vector<ExportConfig>& exports)
    : table_(std::make_shared<const ExportTable>(exports)) {}

bool LiveExports::replace(const std::vector<ExportConfig>& exports) {
  std::shared_ptr<const ExportTable> previous = snapshot();
  if (std::ranges::equal(previous->all(), exports, {}, &Export::config)) return false;
  auto next = std::make_shared<const ExportTable>(exports);
  // Saves every mounted client a walk from the root on its first call after the change.
  for (const Export& e : next->all()) {
    const Export* before = previous->by_id(e.id());
    if (before && before->path() == e.path()) e.set_root_inode(before->root_inode());
  }
  table_.store(std::move(next));
  return true;
}

}  // namespace tidepool::nfsd
