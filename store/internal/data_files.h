// The local data of each inode: one sparse file per inode holding its stripe units at their
// natural offsets, so reading a unit is one pread. Open descriptors are cached (bounded).
// Thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>

#include "common/status.h"

namespace tidepool::store::internal {

class DataFiles {
 public:
  explicit DataFiles(std::string root, std::size_t max_open = 1024);
  ~DataFiles();
  DataFiles(const DataFiles&) = delete;
  DataFiles& operator=(const DataFiles&) = delete;

  Status prepare();  // creates the directory tree

  // Reads into `into`; bytes past the end of the local file read as zeros (sparse tail).
  Status read(std::uint64_t inode, std::uint64_t offset, std::span<std::uint8_t> into);
  // Copies what the page cache holds, from the start of `into`, without blocking; returns how
  // many bytes are filled (all of them when the rest lies past the end of the local file).
  Result<std::size_t> read_cached(std::uint64_t inode, std::uint64_t offset,
                                  std::span<std::uint8_t> into);
  Status write(std::uint64_t inode, std::uint64_t offset, std::span<const std::uint8_t> data);
  // Makes the file's data durable; also its directory entry the first time.
  Status sync(std::uint64_t inode);
  Status truncate(std::uint64_t inode, std::uint64_t size);
  // Removes the file; a missing file is fine.
  void remove(std::uint64_t inode);

 private:
  struct Descriptor {
    explicit Descriptor(int f) : fd(f) {}
    ~Descriptor();
    int fd;
    bool entry_synced = false;  // its directory entry is known durable
  };

  std::string path_of(std::uint64_t inode) const;
  std::string directory_of(std::uint64_t inode) const;
  // create=false and no file: returns null with ok status.
  Result<std::shared_ptr<Descriptor>> open(std::uint64_t inode, bool create);

  std::string root_;
  std::size_t max_open_;
  // Data files are spread over this many directories so none grows huge.
  static constexpr unsigned kFanout = 256;
  // One descriptor per fan-out directory, kept open for the fsync that makes a new file's
  // directory entry durable. Filled by prepare(); -1 until then.
  std::array<int, kFanout> directories_;
  std::mutex mutex_;
  std::unordered_map<std::uint64_t, std::shared_ptr<Descriptor>> open_;  // guarded by mutex_
};

}  // namespace tidepool::store::internal
