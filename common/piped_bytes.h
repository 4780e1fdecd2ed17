// Bytes held by reference in a pipe: splice(2) puts a file's page-cache pages in it without
// copying them, and a socket takes them from there the same way (DESIGN.md, Read path). The
// pipe closes with the last owner, which frees the pages it still references.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "common/status.h"

namespace tidepool {

class PipedBytes {
 public:
  // A pipe that holds at least `capacity` bytes of whole pages.
  static Result<std::unique_ptr<PipedBytes>> make(std::size_t capacity);
  ~PipedBytes();
  PipedBytes(const PipedBytes&) = delete;
  PipedBytes& operator=(const PipedBytes&) = delete;

  // Moves [offset, offset + length) of `file` in, waiting for the disk if it must. Fewer
  // bytes than that (the file ends before, or the pipe is full) fail with unavailable, and
  // leave the pipe to be thrown away.
  Status splice_in(int file, std::uint64_t offset, std::size_t length);
  // Bytes in the pipe not yet taken out.
  std::size_t size() const { return size_; }
  // Where a sender splices them out from, counting each byte it took with taken().
  int read_end() const { return read_end_; }
  void taken(std::size_t bytes) { size_ -= bytes; }
  // Another pipe holding references to the same pages, to read them through without taking
  // them out of this one.
  Result<std::unique_ptr<PipedBytes>> duplicate() const;
  // Copies the next into.size() bytes out (they leave the pipe), for a caller that keeps them.
  Status copy_out(std::span<std::uint8_t> into);

 private:
  PipedBytes(int read_end, int write_end, std::size_t capacity)
      : read_end_(read_end), write_end_(write_end), capacity_(capacity) {}

  int read_end_;
  int write_end_;
  std::size_t capacity_;
  std::size_t size_ = 0;
};

}  // namespace tidepool
