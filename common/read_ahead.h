// Exact reads from a stream socket through a buffer of its own, for framed protocols (ONC RPC
// record marks, the backend's frames): one receive brings in the small frames that have
// arrived, where reading each header and then each body took two receives — and two wake-ups
// of the reading thread — per message. Bodies too large for the buffer are read straight into
// their place, so bulk data is not copied once more.
//
// One coroutine at a time reads; the stream outlives the reader.
#pragma once

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/error_code.hpp>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>

namespace tidepool {

template <typename Stream>
class ReadAhead {
 public:
  // Dozens of small calls; a connection holds it from its first read on.
  static constexpr std::size_t kBufferBytes = 16 << 10;

  explicit ReadAhead(Stream& stream) : stream_(stream) {}

  // Fills `into`; the error that cut it short, if one did, and the bytes delivered.
  boost::asio::awaitable<std::pair<boost::system::error_code, std::size_t>> read_exact(
      boost::asio::mutable_buffer into) {
    constexpr auto use_tuple = boost::asio::as_tuple(boost::asio::use_awaitable);
    auto* out = static_cast<std::uint8_t*>(into.data());
    const std::size_t wanted = into.size();
    std::size_t done = 0;
    for (;;) {
      const std::size_t n = std::min(wanted - done, to_ - from_);
      if (n > 0) std::memcpy(out + done, buffer_.get() + from_, n);
      from_ += n;
      done += n;
      if (done == wanted) co_return std::pair{boost::system::error_code{}, done};
      if (wanted - done >= kBufferBytes / 2) {
        auto [ec, read] = co_await boost::asio::async_read(
            stream_, boost::asio::buffer(out + done, wanted - done), use_tuple);
        ++receives_;
        co_return std::pair{ec, done + read};
      }
      if (!buffer_) buffer_.reset(new std::uint8_t[kBufferBytes]);
      from_ = to_ = 0;
      auto [ec, read] = co_await stream_.async_read_some(
          boost::asio::buffer(buffer_.get(), kBufferBytes), use_tuple);
      ++receives_;
      to_ = read;
      if (ec && read == 0) co_return std::pair{ec, done};
    }
  }

  // How often the reads went to the stream so far: a caller that must act after each receive
  // (TCP acknowledgements) tells from it whether its last call took one.
  std::uint64_t receives() const { return receives_; }

 private:
  Stream& stream_;
  std::unique_ptr<std::uint8_t[]> buffer_;  // made on the first small read
  std::size_t from_ = 0;                    // the bytes in [from_, to_) are unread
  std::size_t to_ = 0;
  std::uint64_t receives_ = 0;
};

}  // namespace tidepool
