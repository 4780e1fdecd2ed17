// TLS on a connected TCP socket, for the backend transport. OpenSSL reads and writes the
// ciphertext through buffers of this class (a BIO of its own), so a batch of messages leaves in
// one send however many records it takes, and one receive brings in as many records as have
// arrived. asio::ssl::stream moves each 16 KiB record through a BIO pair, a second buffer and a
// syscall (with the peer's wake-up) of its own: a third of the backend's throughput on this
// project's machines.
//
// One coroutine at a time uses a stream, on one executor (the transport's strand). The socket
// outlives the stream.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/system/error_code.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

typedef struct ssl_st SSL;
typedef struct ssl_ctx_st SSL_CTX;
typedef struct bio_st BIO;

namespace tidepool::cluster::internal {

class TlsStream {
 public:
  enum class Role { client, server };

  // Ciphertext gathered before it is sent; a send is less than twice this.
  static constexpr std::size_t kSendBytes = 1 << 20;
  // Ciphertext taken from the socket in one receive, at most (a buffer the stream holds while it
  // has bytes to read, or waits for some).
  static constexpr std::size_t kReceiveBytes = 256 << 10;

  // `context` carries the identity and the peer verification; it outlives the stream.
  TlsStream(boost::asio::ip::tcp::socket& socket, SSL_CTX* context, Role role);
  ~TlsStream();
  TlsStream(const TlsStream&) = delete;
  TlsStream& operator=(const TlsStream&) = delete;

  // Each ends at the first error, which it returns: the connection is then of no further use.
  boost::asio::awaitable<boost::system::error_code> handshake();
  // All of `buffers`, in order.
  boost::asio::awaitable<boost::system::error_code> write_all(
      std::span<const boost::asio::const_buffer> buffers);
  // Exactly `into.size()` bytes.
  boost::asio::awaitable<boost::system::error_code> read_exact(boost::asio::mutable_buffer into);
  // Nothing to send for a while: the buffers a large batch grew go back.
  void idle();
  SSL* native_handle() { return ssl_; }

 private:
  class Bio;

  // Encrypts what is staged into records.
  boost::system::error_code seal_staged();
  boost::system::error_code seal(const std::uint8_t* data, std::size_t size);
  boost::asio::awaitable<bool> cancelled();
  boost::asio::awaitable<boost::system::error_code> send_sealed();
  boost::asio::awaitable<boost::system::error_code> receive_more();
  // Frees the receive buffer when OpenSSL has read all of it (a writer's, after its handshake).
  void release_drained();
  // The error an OpenSSL call's SSL_get_error() stands for.
  static boost::system::error_code failure(int reason);

  boost::asio::ip::tcp::socket& socket_;
  SSL* ssl_ = nullptr;
  // Small writes are gathered here before they are sealed, so that a batch of small messages
  // takes a record, not a record each (and each of those an AEAD pass of its own).
  std::vector<std::uint8_t> staged_;
  std::vector<std::uint8_t> sealed_;  // records OpenSSL wrote, not sent yet
  // Ciphertext received; OpenSSL has read the bytes before `received_from_`. Made by the first
  // receive.
  std::unique_ptr<std::uint8_t[]> received_;
  std::size_t received_from_ = 0;
  std::size_t received_to_ = 0;
};

}  // namespace tidepool::cluster::internal
