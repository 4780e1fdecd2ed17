// XDR (RFC 4506) encoding and decoding.
//
// XdrDecoder never reads past its buffer: every read checks what is left, and variable-length
// items are refused when their length exceeds what is left or the caller's maximum. Failure is
// sticky: after the first bad read every further read returns zero/empty and ok() stays false,
// so a decoder function reads all fields and checks once at the end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <memory>
#include <utility>
#include <vector>

namespace tidepool::xdr {

inline constexpr std::size_t padded(std::size_t n) { return (n + 3) & ~std::size_t{3}; }

// Leaves bytes added by resize() uninitialised: message buffers are resized to their final
// size and then filled (a shipped read's reply by pread, a record by recv), so zeroing them
// first would only cost a pass over every byte.
template <typename T>
struct UninitializedAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  UninitializedAllocator() = default;
  template <typename U>
  UninitializedAllocator(const UninitializedAllocator<U>&) noexcept {}  // NOLINT
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

// The byte buffer RPC messages are read into and encoded in.
using Buffer = std::vector<std::uint8_t, UninitializedAllocator<std::uint8_t>>;

// Appends `bytes` with one memcpy. Buffer's own range insert and range constructor go through
// the allocator's construct() byte by byte.
void append(Buffer& out, std::span<const std::uint8_t> bytes);

class Decoder {
 public:
  explicit Decoder(std::span<const std::uint8_t> buffer) : buffer_(buffer) {}

  bool ok() const { return !failed_; }
  void fail() { failed_ = true; }
  std::size_t remaining() const { return failed_ ? 0 : buffer_.size() - position_; }
  std::size_t position() const { return position_; }

  std::uint32_t u32();
  std::int32_t i32() { return static_cast<std::int32_t>(u32()); }
  std::uint64_t u64();
  std::int64_t i64() { return static_cast<std::int64_t>(u64()); }
  // XDR booleans are 0 or 1; anything else is malformed.
  bool boolean();
  // Fixed-length opaque of n bytes (plus padding). The span views the decoder's buffer.
  std::span<const std::uint8_t> fixed_opaque(std::size_t n);
  // Variable-length opaque/string of at most max_length bytes.
  std::span<const std::uint8_t> opaque(std::size_t max_length);
  std::string_view string(std::size_t max_length);
  // An array count that is also bounded by what is left: each element takes at least
  // min_element_size bytes, so a lying count cannot make the caller allocate.
  std::uint32_t array_count(std::size_t max_count, std::size_t min_element_size = 4);
  // Everything not read yet (used for the body of a call handed to the next layer).
  std::span<const std::uint8_t> rest();
  // The same, without consuming it.
  std::span<const std::uint8_t> peek_rest() const {
    return failed_ ? std::span<const std::uint8_t>{} : buffer_.subspan(position_);
  }

 private:
  const std::uint8_t* take(std::size_t n);

  std::span<const std::uint8_t> buffer_;
  std::size_t position_ = 0;
  bool failed_ = false;
};

// Appends XDR to a buffer the encoder does not own.
class Encoder {
 public:
  explicit Encoder(Buffer& out) : out_(out) {}

  void u32(std::uint32_t v);
  void i32(std::int32_t v) { u32(static_cast<std::uint32_t>(v)); }
  void u64(std::uint64_t v);
  void i64(std::int64_t v) { u64(static_cast<std::uint64_t>(v)); }
  void boolean(bool v) { u32(v ? 1 : 0); }
  void fixed_opaque(std::span<const std::uint8_t> bytes);
  void opaque(std::span<const std::uint8_t> bytes);
  void string(std::string_view s) {
    opaque({reinterpret_cast<const std::uint8_t*>(s.data()), s.size()});
  }
  // Writes a length and reserves room for up to max_length bytes, returned for the caller to
  // fill; finish_opaque(actual) then fixes the length and padding. Lets a shipped read's reply
  // be read from disk straight into the reply buffer.
  std::span<std::uint8_t> begin_opaque(std::size_t max_length);
  void finish_opaque(std::size_t actual_length);

  std::size_t size() const { return out_.size(); }
  Buffer& buffer() { return out_; }

 private:
  Buffer& out_;
  std::size_t pending_opaque_at_ = 0;
};

}  // namespace tidepool::xdr
