#include "store/internal/data_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace tidepool::store::internal {

namespace {

Status errno_status(const char* what, int err) {
  Errc code = err == ENOSPC || err == EDQUOT ? Errc::no_space
              : err == EFBIG                 ? Errc::file_too_large
                                             : Errc::io_error;
  return error(code, std::string(what) + ": " + std::strerror(err));
}

}  // namespace

DataFiles::Descriptor::~Descriptor() { ::close(fd); }

DataFiles::DataFiles(std::string root, std::size_t max_open)
    : root_(std::move(root)), max_open_(max_open) {
  directories_.fill(-1);
}

DataFiles::~DataFiles() {
  for (int fd : directories_) {
    if (fd >= 0) ::close(fd);
  }
}

Status DataFiles::prepare() {
  std::error_code ec;
  for (unsigned i = 0; i < kFanout; ++i) {
    char name[8];
    std::snprintf(name, sizeof name, "%02x", i);
    std::string path = root_ + "/" + name;
    std::filesystem::create_directories(path, ec);
    if (ec) return error(Errc::io_error, "cannot create " + path + ": " + ec.message());
    directories_[i] = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (directories_[i] < 0) return errno_status("open data directory", errno);
  }
  return {};
}

std::string DataFiles::directory_of(std::uint64_t inode) const {
  char name[8];
  std::snprintf(name, sizeof name, "%02x", static_cast<unsigned>(inode % kFanout));
  return root_ + "/" + name;
}

std::string DataFiles::path_of(std::uint64_t inode) const {
  char name[24];
  std::snprintf(name, sizeof name, "/%016llx", static_cast<unsigned long long>(inode));
  return directory_of(inode) + name;
}

Result<std::shared_ptr<DataFiles::Descriptor>> DataFiles::open(std::uint64_t inode, bool create) {
  {
    std::lock_guard lock(mutex_);
    if (auto it = open_.find(inode); it != open_.end()) return it->second;
  }
  std::string path = path_of(inode);
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0600);
  if (fd < 0) {
    if (errno == ENOENT && !create) return std::shared_ptr<Descriptor>();
    return errno_status("open data file", errno);
  }
  auto descriptor = std::make_shared<Descriptor>(fd);
  std::lock_guard lock(mutex_);
  if (open_.size() >= max_open_) open_.erase(open_.begin());
  // Another thread may have opened it meanwhile: keep one descriptor per inode.
  auto [it, inserted] = open_.try_emplace(inode, descriptor);
  return it->second;
}

Status DataFiles::read(std::uint64_t inode, std::uint64_t offset, std::span<std::uint8_t> into) {
  TP_ASSIGN_OR_RETURN(auto descriptor, open(inode, false));
  std::size_t done = 0;
  while (descriptor && done < into.size()) {
    ssize_t n = ::pread(descriptor->fd, into.data() + done, into.size() - done,
                        static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_status("read data file", errno);
    }
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  std::memset(into.data() + done, 0, into.size() - done);
  return {};
}

Result<std::size_t> DataFiles::read_cached(std::uint64_t inode, std::uint64_t offset,
                                           std::span<std::uint8_t> into) {
  TP_ASSIGN_OR_RETURN(auto descriptor, open(inode, false));
  std::size_t done = 0;
  while (descriptor && done < into.size()) {
    iovec v{into.data() + done, into.size() - done};
    ssize_t n = ::preadv2(descriptor->fd, &v, 1, static_cast<off_t>(offset + done), RWF_NOWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EOPNOTSUPP) return done;
      return errno_status("read data file", errno);
    }
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  std::memset(into.data() + done, 0, into.size() - done);
  return into.size();
}

Status DataFiles::write(std::uint64_t inode, std::uint64_t offset,
                        std::span<const std::uint8_t> data) {
  TP_ASSIGN_OR_RETURN(auto descriptor, open(inode, true));
  std::size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::pwrite(descriptor->fd, data.data() + done, data.size() - done,
                         static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_status("write data file", errno);
    }
    done += static_cast<std::size_t>(n);
  }
  return {};
}

Status DataFiles::sync(std::uint64_t inode) {
  TP_ASSIGN_OR_RETURN(auto descriptor, open(inode, false));
  if (!descriptor) return {};
  if (::fdatasync(descriptor->fd) != 0) return errno_status("sync data file", errno);
  if (!descriptor->entry_synced) {
    if (::fsync(directories_[inode % kFanout]) != 0) {
      return errno_status("sync data directory", errno);
    }
    descriptor->entry_synced = true;
  }
  return {};
}

Status DataFiles::truncate(std::uint64_t inode, std::uint64_t size) {
  TP_ASSIGN_OR_RETURN(auto descriptor, open(inode, false));
  if (!descriptor) return {};
  if (::ftruncate(descriptor->fd, static_cast<off_t>(size)) != 0) {
    return errno_status("truncate data file", errno);
  }
  if (::fdatasync(descriptor->fd) != 0) return errno_status("sync data file", errno);
  return {};
}

void DataFiles::remove(std::uint64_t inode) {
  {
    std::lock_guard lock(mutex_);
    open_.erase(inode);
  }
  ::unlink(path_of(inode).c_str());
}

}  // namespace tidepool::store::internal
