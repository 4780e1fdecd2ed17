#include "cluster/internal/tls_stream.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/cancellation_state.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <climits>
#include <cstring>

namespace tidepool::cluster::internal {

namespace asio = boost::asio;
using asio::awaitable;
using boost::system::error_code;

namespace {

constexpr auto kUseTuple = asio::as_tuple(asio::use_awaitable);
// Writes smaller than this are staged; a record holds 16 KiB of them.
constexpr std::size_t kStageBelow = 4096;
constexpr std::size_t kRecordBytes = 16384;

}  // namespace

// OpenSSL's side of the stream: it writes records into `sealed_` and reads ciphertext from
// `received_`, and never waits; the stream's coroutines move the bytes to and from the socket.
class TlsStream::Bio {
 public:
  static BIO* make(TlsStream& stream) {
    BIO* bio = BIO_new(method());
    if (bio == nullptr) return nullptr;
    BIO_set_data(bio, &stream);
    BIO_set_init(bio, 1);
    return bio;
  }

 private:
  static BIO_METHOD* method() {
    static BIO_METHOD* const made = [] {
      BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "tidepool");
      if (m == nullptr) return m;
      BIO_meth_set_write(m, write);
      BIO_meth_set_read(m, read);
      BIO_meth_set_ctrl(m, control);
      return m;
    }();
    return made;
  }
  static TlsStream& stream(BIO* bio) { return *static_cast<TlsStream*>(BIO_get_data(bio)); }

  static int write(BIO* bio, const char* data, int length) {
    BIO_clear_retry_flags(bio);
    if (length <= 0) return 0;
    auto& sealed = stream(bio).sealed_;
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(data);
    sealed.insert(sealed.end(), bytes, bytes + length);
    return length;
  }
  static int read(BIO* bio, char* data, int length) {
    BIO_clear_retry_flags(bio);
    TlsStream& s = stream(bio);
    const std::size_t available = s.received_to_ - s.received_from_;
    if (available == 0) {
      BIO_set_retry_read(bio);
      return -1;
    }
    const std::size_t n = std::min(available, static_cast<std::size_t>(std::max(length, 0)));
    std::memcpy(data, s.received_.get() + s.received_from_, n);
    s.received_from_ += n;
    return static_cast<int>(n);
  }
  static long control(BIO*, int command, long, void*) { return command == BIO_CTRL_FLUSH ? 1 : 0; }
};

TlsStream::TlsStream(asio::ip::tcp::socket& socket, SSL_CTX* context, Role role) : socket_(socket) {
  ssl_ = SSL_new(context);
  if (ssl_ == nullptr) return;
  BIO* bio = Bio::make(*this);
  if (bio == nullptr) {
    SSL_free(ssl_);
    ssl_ = nullptr;
    return;
  }
  SSL_set_bio(ssl_, bio, bio);  // one reference, the SSL's from now on
  if (role == Role::client) {
    SSL_set_connect_state(ssl_);
  } else {
    SSL_set_accept_state(ssl_);
  }
}

TlsStream::~TlsStream() { SSL_free(ssl_); }

error_code TlsStream::failure(int reason) {
  switch (reason) {
    case SSL_ERROR_ZERO_RETURN:
      return asio::error::eof;
    case SSL_ERROR_SSL:
      if (unsigned long code = ERR_get_error(); code != 0) {
        // The rest of the queue says the same at more length; left, it would sit in whichever
        // thread ran this.
        ERR_clear_error();
        return error_code(static_cast<int>(code), asio::error::get_ssl_category());
      }
      return asio::ssl::error::unexpected_result;
    default:
      return asio::ssl::error::unexpected_result;
  }
}

// A cancellation (with_timeout's deadline) reaches only an operation under way: one that came
// between two operations is seen here, before the next starts, or it would be lost.
awaitable<bool> TlsStream::cancelled() {
  const asio::cancellation_state state = co_await asio::this_coro::cancellation_state;
  co_return state.cancelled() != asio::cancellation_type::none;
}

awaitable<error_code> TlsStream::send_sealed() {
  if (sealed_.empty()) co_return error_code{};
  if (co_await cancelled()) co_return asio::error::operation_aborted;
  auto [ec, n] = co_await asio::async_write(socket_, asio::buffer(sealed_), kUseTuple);
  sealed_.clear();
  co_return ec;
}

awaitable<error_code> TlsStream::receive_more() {
  if (co_await cancelled()) co_return asio::error::operation_aborted;
  if (!received_) received_.reset(new std::uint8_t[kReceiveBytes]);
  if (received_from_ == received_to_) {
    received_from_ = received_to_ = 0;
  } else if (received_from_ > 0) {
    std::memmove(received_.get(), received_.get() + received_from_, received_to_ - received_from_);
    received_to_ -= received_from_;
    received_from_ = 0;
  }
  // OpenSSL asks for more only once it has read all there was, so there is room; were there
  // none, a receive into it would return at once, and for ever.
  if (received_to_ == kReceiveBytes) co_return asio::error::message_size;
  auto [ec, n] = co_await socket_.async_read_some(
      asio::buffer(received_.get() + received_to_, kReceiveBytes - received_to_), kUseTuple);
  received_to_ += n;
  co_return ec;
}

awaitable<error_code> TlsStream::handshake() {
  co_await asio::this_coro::throw_if_cancelled(false);
  if (ssl_ == nullptr) co_return asio::error::no_memory;
  for (;;) {
    ERR_clear_error();
    const int result = SSL_do_handshake(ssl_);
    const int reason = result == 1 ? SSL_ERROR_NONE : SSL_get_error(ssl_, result);
    const bool wants_more = reason == SSL_ERROR_WANT_READ;
    const error_code failed = result == 1 || wants_more ? error_code{} : failure(reason);
    // What OpenSSL wrote goes first: the peer's next step waits for it, or it is the alert
    // that tells the peer why the handshake failed (the reason to return, whether or not the
    // alert got out).
    if (error_code sent = co_await send_sealed(); sent) co_return failed ? failed : sent;
    if (result == 1) {
      release_drained();
      co_return error_code{};
    }
    if (!wants_more) co_return failed;
    if (error_code received = co_await receive_more(); received) co_return received;
  }
}

error_code TlsStream::seal(const std::uint8_t* data, std::size_t size) {
  while (size > 0) {
    std::size_t written = 0;
    ERR_clear_error();
    const int result = SSL_write_ex(ssl_, data, std::min<std::size_t>(size, INT_MAX), &written);
    if (result != 1) return failure(SSL_get_error(ssl_, result));
    data += written;
    size -= written;
  }
  return {};
}

void TlsStream::release_drained() {
  if (received_from_ == received_to_) {
    received_.reset();
    received_from_ = received_to_ = 0;
  }
}

void TlsStream::idle() {
  if (sealed_.capacity() > kRecordBytes) std::vector<std::uint8_t>().swap(sealed_);
  if (staged_.capacity() > kRecordBytes) std::vector<std::uint8_t>().swap(staged_);
  release_drained();
}

error_code TlsStream::seal_staged() {
  const error_code ec = seal(staged_.data(), staged_.size());
  staged_.clear();
  return ec;
}

awaitable<error_code> TlsStream::write_all(std::span<const asio::const_buffer> buffers) {
  co_await asio::this_coro::throw_if_cancelled(false);
  if (ssl_ == nullptr) co_return asio::error::no_memory;
  for (const asio::const_buffer& buffer : buffers) {
    const auto* data = static_cast<const std::uint8_t*>(buffer.data());
    std::size_t left = buffer.size();
    if (left < kStageBelow) {
      staged_.insert(staged_.end(), data, data + left);
      if (staged_.size() >= kRecordBytes) {
        if (error_code ec = seal_staged(); ec) co_return ec;
      }
    } else {
      if (error_code ec = seal_staged(); ec) co_return ec;
      while (left > 0) {
        const std::size_t piece = std::min(left, kSendBytes);
        if (error_code ec = seal(data, piece); ec) co_return ec;
        data += piece;
        left -= piece;
        if (left > 0 && sealed_.size() >= kSendBytes) {
          if (error_code ec = co_await send_sealed(); ec) co_return ec;
        }
      }
    }
    if (sealed_.size() >= kSendBytes) {
      if (error_code ec = co_await send_sealed(); ec) co_return ec;
    }
  }
  if (error_code ec = seal_staged(); ec) co_return ec;
  co_return co_await send_sealed();
}

awaitable<error_code> TlsStream::read_exact(asio::mutable_buffer into) {
  co_await asio::this_coro::throw_if_cancelled(false);
  if (ssl_ == nullptr) co_return asio::error::no_memory;
  auto* data = static_cast<std::uint8_t*>(into.data());
  std::size_t left = into.size();
  while (left > 0) {
    std::size_t read = 0;
    ERR_clear_error();
    const int result = SSL_read_ex(ssl_, data, left, &read);
    if (result == 1) {
      data += read;
      left -= read;
      continue;
    }
    const int reason = SSL_get_error(ssl_, result);
    const bool wants_more = reason == SSL_ERROR_WANT_READ;
    const error_code failed = wants_more ? error_code{} : failure(reason);
    // A post-handshake message (a key update) may want an answer.
    if (error_code sent = co_await send_sealed(); sent) co_return failed ? failed : sent;
    if (!wants_more) co_return failed;
    if (error_code received = co_await receive_more(); received) co_return received;
  }
  co_return error_code{};
}

}  // namespace tidepool::cluster::internal
