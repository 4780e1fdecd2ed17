#include "nfsd/internal/rpc_client.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/endian/conversion.hpp>
#include <memory>

#include "nfsd/internal/rpc.h"

namespace tidepool::nfsd {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;

constexpr auto kUseTuple = asio::as_tuple(asio::use_awaitable);
constexpr std::uint32_t kLastFragment = 0x80000000u;
constexpr std::uint32_t kPortmapProgram = 100000;
constexpr std::uint32_t kPortmapGetport = 3;
constexpr std::uint16_t kPortmapPort = 111;
constexpr std::uint32_t kTcp = 6;
// A client's answer to a callback is small; anything larger is not an answer.
constexpr std::uint32_t kMaxReplyBytes = 64 * 1024;

std::atomic<std::uint32_t> next_xid{0x6e6c6d00u};

Status no_answer(const std::string& where, const boost::system::error_code& failed) {
  return error(Errc::unavailable, "no answer from " + where + ": " + failed.message());
}

// A socket whose pending operations are cancelled when the deadline passes; shared with the
// timer's handler, which may run after the call returned.
struct Connection {
  explicit Connection(const asio::any_io_executor& executor) : socket(executor), timer(executor) {}
  tcp::socket socket;
  asio::steady_timer timer;
};

awaitable<Result<xdr::Buffer>> call_at(tcp::endpoint to, std::uint32_t program,
                                       std::uint32_t version, std::uint32_t procedure,
                                       std::span<const std::uint8_t> arguments,
                                       std::chrono::milliseconds timeout) {
  auto connection = std::make_shared<Connection>(co_await asio::this_coro::executor);
  connection->timer.expires_after(timeout);
  connection->timer.async_wait([connection](const boost::system::error_code& ec) {
    if (!ec) connection->socket.close();
  });
  const std::uint32_t xid = next_xid.fetch_add(1);
  xdr::Buffer message(4);
  xdr::Encoder out(message);
  encode_call(out, xid, program, version, procedure);
  xdr::append(message, arguments);
  boost::endian::store_big_u32(message.data(),
                               kLastFragment | static_cast<std::uint32_t>(message.size() - 4));
  const std::string where = to.address().to_string() + ":" + std::to_string(to.port());
  auto [connect_error] = co_await connection->socket.async_connect(to, kUseTuple);
  if (connect_error) {
    connection->timer.cancel();
    co_return error(Errc::unavailable,
                    "cannot connect to " + where + ": " + connect_error.message());
  }
  auto [write_error, written] =
      co_await asio::async_write(connection->socket, asio::buffer(message), kUseTuple);
  if (write_error) {
    connection->timer.cancel();
    co_return no_answer(where, write_error);
  }
  Result<xdr::Buffer> results = co_await read_reply(connection->socket, xid, where);
  connection->timer.cancel();
  co_return results;
}

}  // namespace

awaitable<Result<xdr::Buffer>> read_reply(tcp::socket& socket, std::uint32_t xid,
                                          std::string where) {
  // One record of one or more fragments.
  xdr::Buffer reply;
  for (bool last = false; !last;) {
    std::uint8_t mark[4];
    auto [mark_error, got] = co_await asio::async_read(socket, asio::buffer(mark), kUseTuple);
    if (mark_error) {
      co_return no_answer(where, mark_error);
    }
    const std::uint32_t header = boost::endian::load_big_u32(mark);
    last = (header & kLastFragment) != 0;
    const std::uint32_t length = header & ~kLastFragment;
    if (length > kMaxReplyBytes - reply.size()) {
      co_return error(Errc::corrupt, "an over-long reply from " + where);
    }
    const std::size_t at = reply.size();
    reply.resize(at + length);
    auto [body_error, body] =
        co_await asio::async_read(socket, asio::buffer(reply.data() + at, length), kUseTuple);
    if (body_error) {
      co_return no_answer(where, body_error);
    }
  }
  xdr::Decoder in(reply);
  const std::uint32_t reply_xid = in.u32();
  const std::uint32_t type = in.u32();
  const std::uint32_t reply_status = in.u32();  // MSG_ACCEPTED
  in.u32();                                     // verifier flavour
  in.opaque(kMaxAuthBytes);
  const std::uint32_t accept_status = in.u32();
  if (!in.ok() || reply_xid != xid || type != 1 || reply_status != 0 ||
      accept_status != static_cast<std::uint32_t>(AcceptStatus::success)) {
    co_return error(Errc::corrupt, where + " refused the call or answered nonsense (reply " +
                                       std::to_string(reply_status) + ", accept status " +
                                       std::to_string(accept_status) + ")");
  }
  xdr::Buffer results;
  xdr::append(results, in.peek_rest());
  co_return results;
}

awaitable<Result<xdr::Buffer>> call_client(RpcTarget target, std::uint32_t procedure,
                                           std::span<const std::uint8_t> arguments,
                                           std::chrono::milliseconds timeout) {
  xdr::Buffer query;
  xdr::Encoder out(query);
  out.u32(target.program);
  out.u32(target.version);
  out.u32(kTcp);
  out.u32(0);
  auto mapped = co_await call_at(tcp::endpoint(target.host, kPortmapPort), kPortmapProgram, 2,
                                 kPortmapGetport, query, timeout);
  if (!mapped.ok()) co_return mapped.status();
  xdr::Decoder in(*mapped);
  const std::uint32_t port = in.u32();
  if (!in.ok() || port == 0 || port > 65535) {
    co_return error(Errc::unavailable, "program " + std::to_string(target.program) +
                                           " is not registered on " + target.host.to_string());
  }
  co_return co_await call_at(tcp::endpoint(target.host, static_cast<std::uint16_t>(port)),
                             target.program, target.version, procedure, arguments, timeout);
}

awaitable<Result<xdr::Buffer>> call_client_retrying(RpcTarget target, std::uint32_t procedure,
                                                    std::span<const std::uint8_t> arguments,
                                                    std::chrono::milliseconds timeout,
                                                    int attempts) {
  for (int attempt = 1;; ++attempt) {
    Result<xdr::Buffer> reply = co_await call_client(target, procedure, arguments, timeout);
    if (reply.ok() || attempt >= attempts) co_return reply;
    spdlog::info("call {} of program {} on {}, attempt {} of {}: {}", procedure, target.program,
                 target.host.to_string(), attempt, attempts, reply.status().message());
    asio::steady_timer pause(co_await asio::this_coro::executor, std::chrono::seconds(attempt));
    co_await pause.async_wait(kUseTuple);
  }
}

}  // namespace tidepool::nfsd
