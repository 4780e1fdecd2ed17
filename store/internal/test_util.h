// What the store's tests share.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/endian/conversion.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/xdr.h"
#include "store/internal/data_files.h"
#include "store/pool_data.h"

namespace tidepool::store::internal {

// Overwrites the big-endian word at `at` of an encoded message: how a test makes one lie.
inline void put_u32(xdr::Buffer& buffer, std::size_t at, std::uint32_t value) {
  boost::endian::store_big_u32(buffer.data() + at, value);
}

// Runs one store coroutine to completion on a private io_context.
template <typename T>
T run_to_completion(boost::asio::awaitable<T> op) {
  boost::asio::io_context io;
  auto future = boost::asio::co_spawn(io, std::move(op), boost::asio::use_future);
  io.run();
  return future.get();
}

// `n` bytes of a pseudo-random sequence, the same for the same seed.
inline std::vector<std::uint8_t> random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 random(seed);
  std::vector<std::uint8_t> bytes(n);
  for (auto& b : bytes) b = static_cast<std::uint8_t>(random());
  return bytes;
}

// An empty directory of the running test's own: tests run as parallel processes. One level
// under the temporary directory, so that removing it leaves nothing behind: a parameterised
// test's name ("Name/1") would have made it a directory's child.
inline std::filesystem::path fresh_test_directory(const std::string& prefix) {
  std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::replace(name.begin(), name.end(), '/', '-');
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    (prefix + "-" + std::to_string(::getpid()) + "-" + name);
  std::filesystem::remove_all(dir);
  return dir;
}

// Changes one byte of an inode's data file under `data_files_root` behind the store's back, as a
// failing disk would.
inline void flip_data_byte(const std::filesystem::path& data_files_root, std::uint64_t inode,
                           std::uint64_t offset) {
  const Result<ByteOnDisk> where =
      DataFiles::locate_on_disk(data_files_root.string(), inode, offset);
  ASSERT_TRUE(where.ok()) << where.status().to_string();
  const std::string& path = where->path;
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0) << path;
  std::uint8_t b = 0;
  const auto at = static_cast<off_t>(where->position);
  bool flipped = ::pread(fd, &b, 1, at) == 1;
  b ^= 0x5a;
  flipped = flipped && ::pwrite(fd, &b, 1, at) == 1;
  ::close(fd);
  ASSERT_TRUE(flipped) << path << " at " << offset;
}

// Nodes 1..n of pool f800 (and node n+1 alone in h500), each with its own UnitStore, reached
// by plain calls; a node can be taken down.
class InProcessPools final : public PoolPeers {
 public:
  InProcessPools(const std::filesystem::path& root, int n) : root_(root), f800_(n) {
    for (int id = 1; id <= n + 1; ++id) {
      stores_.push_back(
          std::make_unique<UnitStore>((root / std::to_string(id)).string(), unit_l2));
    }
  }
  std::vector<cluster::NodeId> nodes_of(const std::string& pool) override {
    std::vector<cluster::NodeId> ids;
    if (pool == "f800") {
      for (int id = 1; id <= f800_; ++id) ids.push_back(id);
    } else if (pool == "h500") {
      ids.push_back(f800_ + 1);
    }
    std::lock_guard lock(down_mutex_);
    std::erase_if(ids, [this](cluster::NodeId id) { return lost_.contains(id); });
    return ids;
  }
  std::size_t nodes_left_out(const std::string& pool) override {
    std::lock_guard lock(down_mutex_);
    return static_cast<std::size_t>(
        std::count_if(lost_.begin(), lost_.end(), [&](cluster::NodeId id) {
          return pool == (static_cast<int>(id) <= f800_ ? "f800" : "h500");
        }));
  }
  bool is_up(cluster::NodeId node) override {
    std::lock_guard lock(down_mutex_);
    return !down_.contains(node) && !removed_.contains(node);
  }
  bool is_removed(cluster::NodeId node) override {
    std::lock_guard lock(down_mutex_);
    return removed_.contains(node);
  }
  // Answered on the caller's thread, as call() is: the stores are in this process.
  boost::asio::awaitable<Result<xdr::Buffer>> call_async(cluster::NodeId node, UnitMethod method,
                                                         xdr::Buffer request) override {
    co_return call(node, method, request);
  }
  Result<xdr::Buffer> call(cluster::NodeId node, UnitMethod method,
                           std::span<const std::uint8_t> request) override {
    if (method == UnitMethod::read && node <= reads_asked.size()) reads_asked[node - 1].fetch_add(1);
    if (method == UnitMethod::sync && node <= syncs_asked.size()) {
      syncs_asked[node - 1].fetch_add(1);
    }
    if (!is_up(node)) {
      calls_to_down.fetch_add(1);
      return error(Errc::unavailable, "node down");
    }
    if (method == UnitMethod::write) {
      unit_writes.fetch_add(1);
      std::unique_lock lock(hold_mutex_);
      if (writes_before_hold_ == 0) {
        ++held_;
        held_changed_.notify_all();
        held_changed_.wait(lock, [this] { return writes_before_hold_ != 0; });
        --held_;
      } else if (writes_before_hold_ > 0) {
        --writes_before_hold_;
      }
    }
    return stores_.at(node - 1)->serve(static_cast<std::uint32_t>(method), request);
  }
  // One after another, as PoolPeers does; counted.
  std::vector<Result<xdr::Buffer>> call_each(std::span<const UnitCall> calls) override {
    rounds.fetch_add(1);
    std::uint64_t largest = largest_round.load();
    while (calls.size() > largest && !largest_round.compare_exchange_weak(largest, calls.size())) {
    }
    return PoolPeers::call_each(calls);
  }
  // Unit writes past the next `count` wait, until release_writes(): a copy stopped mid-way.
  void hold_writes_after(std::int64_t count) {
    std::lock_guard lock(hold_mutex_);
    writes_before_hold_ = count;
  }
  void release_writes() {
    std::lock_guard lock(hold_mutex_);
    writes_before_hold_ = -1;
    held_changed_.notify_all();
  }
  // Waits (bounded) until a write is held; false if none was.
  bool wait_until_held() {
    std::unique_lock lock(hold_mutex_);
    return held_changed_.wait_for(lock, std::chrono::seconds(60), [this] { return held_ > 0; });
  }
  // A new UnitStore on the node's files, as after a restart: a new boot id.
  void restart(cluster::NodeId node) {
    stores_.at(node - 1) =
        std::make_unique<UnitStore>((root_ / std::to_string(node)).string(), unit_l2);
  }
  std::filesystem::path units_of(cluster::NodeId node, const std::string& pool) const {
    return root_ / std::to_string(node) / pool;
  }

  // Takes `nodes` down, and every other node up.
  void set_down(std::set<cluster::NodeId> nodes) {
    std::lock_guard lock(down_mutex_);
    down_ = std::move(nodes);
  }
  // Leaves `nodes` out of their pools (down for long: data is placed on them no more), and
  // every other node in.
  void set_lost(std::set<cluster::NodeId> nodes) {
    std::lock_guard lock(down_mutex_);
    lost_ = std::move(nodes);
  }
  // Has the cluster remove `nodes` (they are down for good), and no other.
  void set_removed(std::set<cluster::NodeId> nodes) {
    std::lock_guard lock(down_mutex_);
    removed_ = std::move(nodes);
  }
  // The unit writes every node was sent, counted together.
  std::atomic<std::uint64_t> unit_writes{0};
  // The unit reads each node was asked for (node k at k - 1), served or not.
  std::array<std::atomic<std::uint64_t>, 8> reads_asked{};
  // The unit syncs each node was asked for (node k at k - 1), served or not.
  std::array<std::atomic<std::uint64_t>, 8> syncs_asked{};
  // The call_each() rounds made, and the most calls one carried.
  std::atomic<std::uint64_t> rounds{0};
  std::atomic<std::uint64_t> largest_round{0};
  // The calls made to nodes while they were down, counted together.
  std::atomic<std::uint64_t> calls_to_down{0};
  // The unit reads every node served, counted together.
  const std::shared_ptr<L2> unit_l2 = L2::make(0);

 private:
  std::mutex down_mutex_;
  std::set<cluster::NodeId> down_;  // guarded by down_mutex_
  std::set<cluster::NodeId> lost_;  // guarded by down_mutex_
  std::set<cluster::NodeId> removed_;  // guarded by down_mutex_
  std::filesystem::path root_;
  int f800_;
  std::vector<std::unique_ptr<UnitStore>> stores_;
  std::mutex hold_mutex_;
  std::condition_variable held_changed_;
  std::int64_t writes_before_hold_ = -1;  // guarded by hold_mutex_; -1: no hold
  int held_ = 0;                          // guarded by hold_mutex_: writes waiting
};

}  // namespace tidepool::store::internal
