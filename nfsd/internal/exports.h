// The export table: which directories are exported, to whom, and how callers are mapped.
#pragma once

#include <boost/asio/ip/address_v4.hpp>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/config.h"
#include "nfsd/internal/rpc.h"
#include "store/store.h"

namespace tidepool::nfsd {

class Export {
 public:
  explicit Export(ExportConfig config);
  Export(const Export& other);

  // Stable across restarts and reordering of the configuration: derived from the path.
  std::uint32_t id() const { return id_; }
  const ExportConfig& config() const { return config_; }
  const std::string& path() const { return config_.path; }
  bool read_only() const { return config_.read_only; }
  // Path components below /ifs ("/ifs/a/b" -> {"a", "b"}).
  const std::vector<std::string>& components() const { return components_; }

  bool allows(boost::asio::ip::address_v4 client) const;
  // The caller after root squashing / map-all.
  store::Caller caller_for(const CallerIdentity& identity) const;

  // The export's root directory, once MOUNT or a call resolved it (0 before).
  store::InodeId root_inode() const { return root_inode_.load(std::memory_order_relaxed); }
  void set_root_inode(store::InodeId inode) const {
    root_inode_.store(inode, std::memory_order_relaxed);
  }

 private:
  struct Network {
    std::uint32_t address;
    std::uint32_t mask;
  };

  ExportConfig config_;
  std::uint32_t id_;
  std::vector<std::string> components_;
  std::vector<Network> networks_;
  mutable std::atomic<store::InodeId> root_inode_{0};
};

class ExportTable {
 public:
  explicit ExportTable(const std::vector<ExportConfig>& exports);

  const Export* by_id(std::uint32_t id) const;
  // The export with the longest path that is `path` or one of its ancestors; `below` receives
  // the components of `path` under it.
  const Export* containing(std::string_view path, std::vector<std::string>& below) const;
  const std::vector<Export>& all() const { return exports_; }

 private:
  std::vector<Export> exports_;
};

// The export table in force, replaceable while calls run on other threads. A call takes one
// snapshot when it starts and holds it until it ends, so the Export pointers it keeps across
// co_awaits stay valid however often the table is replaced meanwhile.
class LiveExports {
 public:
  explicit LiveExports(const std::vector<ExportConfig>& exports);

  std::shared_ptr<const ExportTable> snapshot() const { return table_.load(); }
  // Exports whose path is unchanged keep their resolved root inode (their id, derived from the
  // path, is unchanged too, so their file handles stay valid). False, and nothing replaced, when
  // `exports` is the list in force: the daemon applies every change of the cluster's view.
  bool replace(const std::vector<ExportConfig>& exports);

 private:
  std::atomic<std::shared_ptr<const ExportTable>> table_;
};

// Splits "/ifs/a/b" into {"ifs", "a", "b"}; empty components and "." are dropped.
std::vector<std::string> split_path(std::string_view path);

}  // namespace tidepool::nfsd
