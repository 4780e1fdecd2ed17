#include "common/piped_bytes.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace tidepool {

namespace {
Status errno_status(const char* what, int err) {
  return error(Errc::io_error, std::string(what) + ": " + std::strerror(err));
}
}  // namespace

Result<std::unique_ptr<PipedBytes>> PipedBytes::make(std::size_t capacity) {
  int ends[2];
  if (::pipe2(ends, O_CLOEXEC) != 0) return errno_status("create a pipe", errno);
  std::unique_ptr<PipedBytes> pipe(new PipedBytes(ends[0], ends[1], capacity));
  // The kernel rounds the size up to a power of two pages; one page's buffer per page spliced.
  if (::fcntl(ends[1], F_SETPIPE_SZ, static_cast<int>(capacity)) < 0) {
    return errno_status("size a pipe", errno);
  }
  return pipe;
}

PipedBytes::~PipedBytes() {
  ::close(read_end_);
  ::close(write_end_);
}

Status PipedBytes::splice_in(int file, std::uint64_t offset, std::size_t length) {
  auto at = static_cast<loff_t>(offset);
  std::size_t moved = 0;
  while (moved < length) {
    // Never waits for room: a pipe too small for the bytes is a pipe to throw away.
    const ssize_t n =
        ::splice(file, &at, write_end_, nullptr, length - moved, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return error(Errc::unavailable, "a pipe too small for its bytes");
      return errno_status("splice a file into a pipe", errno);
    }
    if (n == 0) return error(Errc::unavailable, "the file ends before the bytes to splice");
    moved += static_cast<std::size_t>(n);
    size_ += static_cast<std::size_t>(n);
  }
  return {};
}

Result<std::unique_ptr<PipedBytes>> PipedBytes::duplicate() const {
  TP_ASSIGN_OR_RETURN(std::unique_ptr<PipedBytes> copy, make(capacity_));
  if (size_ == 0) return copy;
  // tee(2) always starts at the front of the pipe: one call must take it all.
  ssize_t n;
  do {
    n = ::tee(read_end_, copy->write_end_, size_, SPLICE_F_NONBLOCK);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return errno_status("duplicate a pipe", errno);
  if (static_cast<std::size_t>(n) != size_) {
    return error(Errc::unavailable, "a pipe duplicated only in part");
  }
  copy->size_ = size_;
  return copy;
}

Status PipedBytes::copy_out(std::span<std::uint8_t> into) {
  if (into.size() > size_) return error(Errc::internal, "more bytes asked of a pipe than it holds");
  std::size_t done = 0;
  while (done < into.size()) {
    const ssize_t n = ::read(read_end_, into.data() + done, into.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_status("read a pipe", errno);
    }
    if (n == 0) return error(Errc::internal, "a pipe ended before its bytes");
    done += static_cast<std::size_t>(n);
    size_ -= static_cast<std::size_t>(n);
  }
  return {};
}

}  // namespace tidepool
