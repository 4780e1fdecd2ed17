#include "cli/https_transport.h"

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cctype>
#include <cstdio>
#include <exception>

#include "common/tls_identity.h"

namespace tidepool::cli {
namespace {

// Each request runs as a coroutine on an io_context of its own, so that every step has a
// deadline (Beast's tcp_stream enforces them on asynchronous operations only) while the caller
// simply waits.

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using asio::awaitable;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

constexpr auto kUseTuple = asio::as_tuple(asio::use_awaitable);
constexpr auto kConnectTimeout = std::chrono::seconds(2);
// Long enough for a node to answer our close_notify; a node that does not is not waited for.
constexpr auto kShutdownTimeout = std::chrono::milliseconds(500);
constexpr const char* kUserAgent = "tide/0.1";

// "connection refused" rather than "Connection refused": it follows an address and a colon.
std::string describe(const boost::system::error_code& ec) {
  if (ec == beast::error::timeout) return "timed out";
  std::string text = ec.message();
  if (!text.empty()) text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
  return text;
}

std::string seconds_text(std::chrono::milliseconds duration) {
  char text[32];
  if (duration.count() % 1000 == 0) {
    std::snprintf(text, sizeof text, "%lld s", static_cast<long long>(duration.count() / 1000));
  } else {
    std::snprintf(text, sizeof text, "%.1f s", static_cast<double>(duration.count()) / 1000);
  }
  return text;
}

// Tokens come from a file and the environment; one with a line break would smuggle headers in.
bool fits_in_header(std::string_view token) {
  return std::all_of(token.begin(), token.end(), [](char c) { return c > ' ' && c < 0x7f; });
}

class HttpsTransport final : public Transport {
 public:
  HttpsTransport(ConnectionSettings settings, ssl::context tls)
      : settings_(std::move(settings)), tls_(std::move(tls)) {}

  Result<HttpReply> send(Method method, const std::string& target,
                         const std::string& body) override {
    const Clock::time_point deadline = Clock::now() + settings_.timeout;
    std::string unreachable;
    for (const AdminAddress& address : settings_.addresses) {
      Result<HttpReply> reply = run(exchange(address, method, target, body, deadline));
      // Only a refused or unanswered connection moves on: once a node has the request it may
      // have acted on it, and sending it again could act twice.
      if (reply.ok() || reply.code() != Errc::unavailable) return reply;
      if (!unreachable.empty()) unreachable += "; ";
      unreachable += reply.status().message();
    }
    return error(Errc::unavailable, "cannot reach the cluster (" + unreachable + ")");
  }

 private:
  static Result<HttpReply> run(awaitable<Result<HttpReply>> task) {
    asio::io_context io;
    Result<HttpReply> outcome;
    asio::co_spawn(io, std::move(task),
                   [&outcome](std::exception_ptr failure, Result<HttpReply> result) {
                     if (!failure) {
                       outcome = std::move(result);
                       return;
                     }
                     try {
                       std::rethrow_exception(failure);
                     } catch (const std::exception& e) {
                       outcome = error(Errc::internal, e.what());
                     }
                   });
    io.run();
    return outcome;
  }

  http::request<http::string_body> make_request(const AdminAddress& address, Method method,
                                                const std::string& target,
                                                const std::string& body) const {
    http::request<http::string_body> request(method, target, 11);
    request.set(http::field::host, address.to_string());
    request.set(http::field::user_agent, kUserAgent);
    request.set(http::field::accept, "application/json");
    request.set(http::field::connection, "close");
    if (!settings_.token.empty()) {
      request.set(http::field::authorization, "Bearer " + settings_.token);
    }
    if (!body.empty()) {
      request.set(http::field::content_type, "application/json");
      request.body() = body;
    }
    request.prepare_payload();
    return request;
  }

  // A failure after the connection was accepted: final, naming the address and the step.
  Status exchange_failure(const std::string& name, std::string_view step,
                          const boost::system::error_code& ec) const {
    if (ec == beast::error::timeout) {
      return error(Errc::timed_out, name + ": no reply within " + seconds_text(settings_.timeout));
    }
    return error(Errc::io_error, name + ": " + std::string(step) + ": " + describe(ec));
  }

  // unavailable exactly when the connection was not accepted.
  awaitable<Result<HttpReply>> exchange(const AdminAddress& address, Method method,
                                        const std::string& target, const std::string& body,
                                        Clock::time_point deadline) {
    const std::string name = address.to_string();
    boost::system::error_code ec;
    const tcp::endpoint endpoint(asio::ip::make_address_v4(address.host, ec), address.port);
    if (ec) co_return error(Errc::invalid_argument, name + ": not an IPv4 address");

    beast::ssl_stream<beast::tcp_stream> stream(co_await asio::this_coro::executor, tls_);
    // A certificate of the cluster CA is not enough: it must be the one of the node at this
    // address (a node's certificate names its admin address), not another member's or a
    // removed node's at an address it took over.
    if (settings_.ca_certificate &&
        X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(stream.native_handle()),
                                      address.host.c_str()) != 1) {
      co_return error(Errc::invalid_argument, name + ": not an IPv4 address");
    }
    beast::tcp_stream& tcp = beast::get_lowest_layer(stream);
    tcp.expires_at(std::min(Clock::now() + kConnectTimeout, deadline));
    auto [connect_error] = co_await tcp.async_connect(endpoint, kUseTuple);
    if (connect_error) co_return error(Errc::unavailable, name + ": " + describe(connect_error));

    tcp.expires_at(deadline);
    auto [handshake_error] = co_await stream.async_handshake(ssl::stream_base::client, kUseTuple);
    if (SSL_get_verify_result(stream.native_handle()) == X509_V_ERR_IP_ADDRESS_MISMATCH) {
      co_return error(Errc::access_denied,
                      name + ": the certificate presented is not that of the cluster's node at "
                             "this address");
    }
    if (handshake_error) co_return exchange_failure(name, "TLS handshake failed", handshake_error);
    std::string fingerprint = peer_fingerprint(stream.native_handle());
    if (!settings_.pinned_fingerprint.empty() && fingerprint != settings_.pinned_fingerprint) {
      co_return error(Errc::access_denied,
                      name + ": presented another certificate than the node that answered before");
    }
    const http::request<http::string_body> request = make_request(address, method, target, body);
    auto [write_error, bytes_written] = co_await http::async_write(stream, request, kUseTuple);
    if (write_error) co_return exchange_failure(name, "sending the request", write_error);
    beast::flat_buffer buffer;
    http::response<http::string_body> response;
    auto [read_error, bytes_read] = co_await http::async_read(stream, buffer, response, kUseTuple);
    if (read_error) co_return exchange_failure(name, "reading the reply", read_error);

    // close_notify, so that the node sees the connection end cleanly rather than truncated.
    // The reply is complete already: how the shutdown goes does not matter.
    tcp.expires_after(kShutdownTimeout);
    co_await stream.async_shutdown(kUseTuple);
    co_return HttpReply{response.result_int(), std::string(response.reason()),
                        std::move(response.body()), std::move(fingerprint)};
  }

  const ConnectionSettings settings_;
  ssl::context tls_;
};

}  // namespace

Result<std::unique_ptr<Transport>> make_https_transport(ConnectionSettings settings) {
  if (settings.addresses.empty()) return error(Errc::invalid_argument, "no admin address");
  if (!fits_in_header(settings.token)) {
    return error(Errc::invalid_argument, "the token holds characters a token cannot have");
  }
  ssl::context tls(ssl::context::tls_client);
  boost::system::error_code ec;
  tls.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                      ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1,
                  ec);
  if (!ec && settings.ca_certificate) {
    tls.add_certificate_authority(asio::buffer(*settings.ca_certificate), ec);
    // The chain here; the address each connection's certificate must name, in exchange().
    if (!ec) tls.set_verify_mode(ssl::verify_peer, ec);
  } else if (!ec) {
    tls.set_verify_mode(ssl::verify_none, ec);
  }
  if (ec) {
    return error(Errc::invalid_argument, "cannot use the cluster CA certificate: " + ec.message());
  }
  return std::unique_ptr<Transport>(
      std::make_unique<HttpsTransport>(std::move(settings), std::move(tls)));
}

}  // namespace tidepool::cli
