#include "daemon/http.h"

#include <spdlog/spdlog.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <list>
#include <nlohmann/json.hpp>

#include "cluster/tcp_transport.h"
#include "common/tls_identity.h"

namespace tidepool::daemon {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
constexpr auto kAsTuple = asio::as_tuple(asio::use_awaitable);

using Stream = beast::ssl_stream<beast::tcp_stream>;

Result<std::shared_ptr<ssl::context>> server_context(const cluster::PemPair& certificate) {
  auto context = std::make_shared<ssl::context>(ssl::context::tls_server);
  boost::system::error_code ec;
  context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                           ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                           ssl::context::no_tlsv1_1,
                       ec);
  if (!ec) context->use_certificate_chain(asio::buffer(certificate.certificate), ec);
  if (!ec) context->use_private_key(asio::buffer(certificate.private_key), ssl::context::pem, ec);
  if (ec) return error(Errc::invalid_argument, "bad admin certificate or key: " + ec.message());
  return context;
}

}  // namespace

class HttpsServer::Impl : public std::enable_shared_from_this<Impl> {
 public:
  Impl(asio::any_io_executor strand, HttpHandler handler, HttpServerLimits limits)
      : strand_(strand), acceptor_(strand), handler_(std::move(handler)), limits_(limits) {}

  Status listen(const std::string& address) {
    TP_ASSIGN_OR_RETURN(auto host_port, cluster::split_host_port(address));
    boost::system::error_code ec;
    const auto ip = asio::ip::make_address_v4(host_port.first, ec);
    if (ec) return error(Errc::invalid_argument, "bad admin address " + address);
    acceptor_.open(tcp::v4(), ec);
    if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind({ip, host_port.second}, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      return error(Errc::already_exists, "cannot listen on admin address " + address + ": " +
                                             ec.message());
    }
    asio::co_spawn(strand_, accept_loop(shared_from_this()), asio::detached);
    return {};
  }

  Status set_certificate(const cluster::PemPair& certificate) {
    TP_ASSIGN_OR_RETURN(context_, server_context(certificate));
    return {};
  }

  void stop() {
    stopped_ = true;
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    for (Stream* stream : streams_) beast::get_lowest_layer(*stream).close();
  }

 private:
  static asio::awaitable<void> accept_loop(std::shared_ptr<Impl> self) {
    while (!self->stopped_) {
      auto [ec, socket] = co_await self->acceptor_.async_accept(kAsTuple);
      if (ec) {
        if (self->stopped_) break;
        continue;
      }
      if (self->streams_.size() >= self->limits_.max_connections) continue;  // closes it
      asio::co_spawn(self->strand_, serve(self, std::move(socket), self->context_),
                     asio::detached);
    }
  }

  static asio::awaitable<void> serve(std::shared_ptr<Impl> self, tcp::socket socket,
                                     std::shared_ptr<ssl::context> context) {
    Stream stream(beast::tcp_stream(std::move(socket)), *context);
    auto registered = self->streams_.insert(self->streams_.end(), &stream);
    co_await self->converse(stream);
    self->streams_.erase(registered);
  }

  asio::awaitable<void> converse(Stream& stream) {
    beast::get_lowest_layer(stream).expires_after(limits_.handshake_timeout);
    auto [handshake_error] = co_await stream.async_handshake(ssl::stream_base::server, kAsTuple);
    if (handshake_error) co_return;
    beast::flat_buffer buffer;
    while (!stopped_) {
      http::request_parser<http::string_body> parser;
      parser.body_limit(limits_.max_body_bytes);
      beast::get_lowest_layer(stream).expires_after(limits_.idle_timeout);
      auto [read_error, bytes] = co_await http::async_read(stream, buffer, parser, kAsTuple);
      HttpResponse response;
      bool keep_alive = false;
      if (read_error == http::error::body_limit) {
        response = error_response(413, "request body over " +
                                       std::to_string(limits_.max_body_bytes) + " bytes");
      } else if (read_error) {
        co_return;
      } else {
        http::request<http::string_body> request = parser.release();
        keep_alive = request.keep_alive();
        HttpRequest call{std::string(request.method_string()), std::string(request.target()),
                         std::string(request[http::field::authorization]),
                         std::move(request.body())};
        auto handled = handler_(std::move(call));
        response = co_await std::move(handled);
      }
      http::response<http::string_body> reply{static_cast<http::status>(response.status), 11};
      reply.set(http::field::server, "tided");
      reply.set(http::field::content_type, response.content_type);
      reply.keep_alive(keep_alive);
      reply.body() = std::move(response.body);
      reply.prepare_payload();
      auto [write_error, written] = co_await http::async_write(stream, reply, kAsTuple);
      if (write_error || !keep_alive) break;
    }
    beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(2));
    co_await stream.async_shutdown(kAsTuple);
  }

  asio::any_io_executor strand_;
  tcp::acceptor acceptor_;
  HttpHandler handler_;
  HttpServerLimits limits_;
  std::shared_ptr<ssl::context> context_;
  std::list<Stream*> streams_;
  bool stopped_ = false;
};

HttpResponse error_response(unsigned status, std::string_view message) {
  return HttpResponse{status, nlohmann::json{{"error", message}}.dump()};
}

HttpsServer::HttpsServer(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpsServer::~HttpsServer() { impl_->stop(); }

Result<std::unique_ptr<HttpsServer>> HttpsServer::start(asio::any_io_executor strand,
                                                        const std::string& address,
                                                        const cluster::PemPair& certificate,
                                                        HttpHandler handler,
                                                        HttpServerLimits limits) {
  auto impl = std::make_shared<Impl>(strand, std::move(handler), limits);
  TP_RETURN_IF_ERROR(impl->set_certificate(certificate));
  TP_RETURN_IF_ERROR(impl->listen(address));
  return std::unique_ptr<HttpsServer>(new HttpsServer(std::move(impl)));
}

Status HttpsServer::set_certificate(const cluster::PemPair& certificate) {
  return impl_->set_certificate(certificate);
}

void HttpsServer::stop() { impl_->stop(); }

asio::awaitable<Result<HttpReply>> https_request_to_new_node(asio::any_io_executor executor,
                                                             NewNodeRequest call,
                                                             std::chrono::milliseconds timeout) {
  const std::string& address = call.address;
  auto host_port = cluster::split_host_port(address);
  if (!host_port.ok()) co_return host_port.status();
  boost::system::error_code ec;
  const auto ip = asio::ip::make_address_v4(host_port->first, ec);
  if (ec) co_return error(Errc::invalid_argument, "bad address " + address);
  ssl::context context(ssl::context::tls_client);
  // What vouches for the node is its fingerprint, checked below, not a CA.
  context.set_verify_mode(ssl::verify_none);
  Stream stream(executor, context);
  auto unreachable = [&](const boost::system::error_code& e) {
    return error(Errc::unavailable, "cannot reach " + address + ": " + e.message());
  };
  beast::get_lowest_layer(stream).expires_after(timeout);
  auto [connect_error] =
      co_await beast::get_lowest_layer(stream).async_connect(tcp::endpoint(ip, host_port->second),
                                                             kAsTuple);
  if (connect_error) co_return unreachable(connect_error);
  auto [handshake_error] = co_await stream.async_handshake(ssl::stream_base::client, kAsTuple);
  if (handshake_error) co_return unreachable(handshake_error);
  HttpReply reply;
  reply.server_fingerprint = peer_fingerprint(stream.native_handle());
  if (!call.pinned_fingerprint.empty() && reply.server_fingerprint != call.pinned_fingerprint) {
    co_return error(Errc::access_denied, address + " presented another certificate than before");
  }
  http::request<http::string_body> request{http::string_to_verb(call.method), call.target, 11};
  request.set(http::field::host, address);
  request.set(http::field::content_type, "application/json");
  if (!call.authorization.empty()) request.set(http::field::authorization, call.authorization);
  request.body() = std::move(call.body);
  request.prepare_payload();
  auto [write_error, written] = co_await http::async_write(stream, request, kAsTuple);
  if (write_error) co_return unreachable(write_error);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(1 << 20);
  auto [read_error, read] = co_await http::async_read(stream, buffer, parser, kAsTuple);
  if (read_error) co_return unreachable(read_error);
  auto response = parser.release();
  co_await stream.async_shutdown(kAsTuple);
  reply.status = response.result_int();
  reply.body = std::move(response.body());
  co_return reply;
}

}  // namespace tidepool::daemon
