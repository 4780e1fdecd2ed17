// The admin plane's HTTPS: a server for the REST API and metrics, and the client a member uses
// to reach a node it adds. Beast stays behind this header.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "cluster/tls.h"
#include "common/status.h"

namespace tidepool::daemon {

struct HttpRequest {
  std::string method;  // "GET", "POST"...
  std::string target;  // "/v1/cluster?x=1"
  std::string authorization;
  std::string body;
};

struct HttpResponse {
  unsigned status = 200;
  std::string body;
  std::string content_type = "application/json";
};

// {"error": message} with `status`.
HttpResponse error_response(unsigned status, std::string_view message);

using HttpHandler = std::function<boost::asio::awaitable<HttpResponse>(HttpRequest)>;

struct HttpServerLimits {
  std::size_t max_body_bytes = 1 << 20;
  std::size_t max_connections = 256;
  std::chrono::seconds handshake_timeout{10};
  std::chrono::seconds idle_timeout{60};
};

class HttpsServer {
 public:
  // Listens on `address` ("127.0.0.3:8080") and serves each connection as a coroutine on
  // `strand`. Fails when the address cannot be listened on.
  static Result<std::unique_ptr<HttpsServer>> start(boost::asio::any_io_executor strand,
                                                    const std::string& address,
                                                    const cluster::PemPair& certificate,
                                                    HttpHandler handler,
                                                    HttpServerLimits limits = {});
  ~HttpsServer();
  // New connections present `certificate`; call on the strand.
  Status set_certificate(const cluster::PemPair& certificate);
  // Stops accepting and closes open connections; call on the strand.
  void stop();

  class Impl;

 private:
  explicit HttpsServer(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

struct HttpReply {
  unsigned status = 0;
  std::string body;
  std::string server_fingerprint;  // of the certificate the server presented
};

// A request to a node that is in no cluster yet, which no CA vouches for.
struct NewNodeRequest {
  std::string address;  // "127.0.0.5:8080"
  std::string method;
  std::string target;
  std::string body;
  std::string authorization;  // the header's value; empty: none
  // Empty: any certificate. Else the server must present the certificate of this fingerprint
  // (cluster::certificate_fingerprint), checked before anything is sent.
  std::string pinned_fingerprint;
};

// One request over TLS to a node in no cluster; the reply names the certificate it presented.
boost::asio::awaitable<Result<HttpReply>> https_request_to_new_node(
    boost::asio::any_io_executor executor, NewNodeRequest request,
    std::chrono::milliseconds timeout);

}  // namespace tidepool::daemon
