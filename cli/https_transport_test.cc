// The HTTPS transport against a real TLS server on loopback, with certificates made the way the
// cluster makes them.
#include "cli/https_transport.h"

#include <gtest/gtest.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <mutex>
#include <thread>

#include "cli/test_util.h"
#include "cluster/tls.h"

namespace tidepool::cli {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using asio::ip::tcp;
using namespace std::chrono_literals;

constexpr auto kUseTuple = asio::as_tuple(asio::use_awaitable);

// A TLS identity on disk: a certificate and its key.
struct Identity {
  std::string certificate;
  std::string private_key;
};

// A cluster CA, the certificate it signed for node 1 serving on 127.0.0.1 (where the test
// servers listen), and one for node 2 on 127.0.0.2.
struct ClusterCertificates {
  Identity ca;
  Identity node;
  Identity other_node;
};

ClusterCertificates make_cluster_certificates(const TemporaryDirectory& directory,
                                              const std::string& cluster) {
  const std::string base = (directory.path() / cluster).string();
  EXPECT_TRUE(
      cluster::create_certificate_authority(cluster, base + "-ca.pem", base + "-ca.key").ok());
  for (const auto& [name, ip] : {std::pair{"1", "127.0.0.1"}, std::pair{"2", "127.0.0.2"}}) {
    const std::string node = base + "-node" + name;
    EXPECT_TRUE(cluster::issue_certificate(base + "-ca.pem", base + "-ca.key", name,
                                           node + ".pem", node + ".key", ip)
                    .ok());
  }
  return {{read_file(base + "-ca.pem"), read_file(base + "-ca.key")},
          {read_file(base + "-node1.pem"), read_file(base + "-node1.key")},
          {read_file(base + "-node2.pem"), read_file(base + "-node2.key")}};
}

// An HTTPS server on 127.0.0.1 that answers every request 200 with `reply_body` and remembers
// what it received. Runs on a thread of its own until destroyed.
class TestServer {
 public:
  TestServer(const Identity& identity, std::string reply_body)
      : reply_body_(std::move(reply_body)) {
    tls_.use_certificate_chain(asio::buffer(identity.certificate));
    tls_.use_private_key(asio::buffer(identity.private_key), ssl::context::pem);
    acceptor_.open(tcp::v4());
    acceptor_.bind({asio::ip::make_address_v4("127.0.0.1"), 0});
    acceptor_.listen();
    asio::co_spawn(io_, accept(), asio::detached);
    thread_ = std::thread([this] { io_.run(); });
  }
  ~TestServer() {
    io_.stop();
    thread_.join();
  }

  AdminAddress address() const { return {"127.0.0.1", acceptor_.local_endpoint().port()}; }

  std::vector<http::request<http::string_body>> requests() {
    std::lock_guard lock(mutex_);
    return requests_;
  }

 private:
  asio::awaitable<void> accept() {
    for (;;) {
      auto [ec, socket] = co_await acceptor_.async_accept(kUseTuple);
      if (ec) co_return;
      asio::co_spawn(io_, serve(std::move(socket)), asio::detached);
    }
  }

  asio::awaitable<void> serve(tcp::socket socket) {
    beast::ssl_stream<beast::tcp_stream> stream(std::move(socket), tls_);
    if (auto [ec] = co_await stream.async_handshake(ssl::stream_base::server, kUseTuple); ec) {
      co_return;
    }
    beast::flat_buffer buffer;
    http::request<http::string_body> request;
    if (auto [ec, n] = co_await http::async_read(stream, buffer, request, kUseTuple); ec) {
      co_return;
    }
    {
      std::lock_guard lock(mutex_);
      requests_.push_back(request);
    }
    http::response<http::string_body> response(http::status::ok, 11);
    response.set(http::field::content_type, "application/json");
    response.body() = reply_body_;
    response.prepare_payload();
    co_await http::async_write(stream, response, kUseTuple);
    co_await stream.async_shutdown(kUseTuple);
  }

  const std::string reply_body_;
  ssl::context tls_{ssl::context::tls_server};
  asio::io_context io_;  // after tls_: connections still queued end before the context does
  tcp::acceptor acceptor_{io_};
  std::thread thread_;
  std::mutex mutex_;
  std::vector<http::request<http::string_body>> requests_;  // guarded by mutex_
};

std::unique_ptr<Transport> https(ConnectionSettings settings) {
  Result<std::unique_ptr<Transport>> transport = make_https_transport(std::move(settings));
  EXPECT_TRUE(transport.ok()) << transport.status().to_string();
  return transport.ok() ? std::move(transport).value() : nullptr;
}

class HttpsTransportTest : public ::testing::Test {
 protected:
  TemporaryDirectory directory_;
  ClusterCertificates cluster_ = make_cluster_certificates(directory_, "tidepool");
};

TEST_F(HttpsTransportTest, AMemberIsVerifiedByTheChainAndItsAddressAndGetsTheHeaders) {
  TestServer server(cluster_.node, R"({"name":"hot"})");
  std::unique_ptr<Transport> transport = https({.addresses = {server.address()},
                                                .token = "secret",
                                                .ca_certificate = cluster_.ca.certificate});
  ASSERT_NE(transport, nullptr);
  Result<HttpReply> reply =
      transport->send(Method::post, "/v1/storagepool/tiers", R"({"name":"hot"})");
  ASSERT_TRUE(reply.ok()) << reply.status().to_string();
  EXPECT_EQ(reply->status, 200u);
  EXPECT_EQ(reply->body, R"({"name":"hot"})");

  const std::vector<http::request<http::string_body>> requests = server.requests();
  ASSERT_EQ(requests.size(), 1u);
  const http::request<http::string_body>& request = requests[0];
  EXPECT_EQ(request.method(), http::verb::post);
  EXPECT_EQ(request.target(), "/v1/storagepool/tiers");
  EXPECT_EQ(request[http::field::authorization], "Bearer secret");
  EXPECT_EQ(request[http::field::content_type], "application/json");
  EXPECT_EQ(request[http::field::host], server.address().to_string());
  EXPECT_EQ(request.body(), R"({"name":"hot"})");
}

TEST_F(HttpsTransportTest, ANodeOfAnotherClusterIsRefusedAndNotPassedOver) {
  TestServer stranger(make_cluster_certificates(directory_, "other").node, "{}");
  TestServer member(cluster_.node, "{}");
  std::unique_ptr<Transport> transport = https({.addresses = {stranger.address(), member.address()},
                                                .token = "secret",
                                                .ca_certificate = cluster_.ca.certificate});
  ASSERT_NE(transport, nullptr);
  Result<HttpReply> reply = transport->send(Method::get, "/v1/cluster", "");
  ASSERT_FALSE(reply.ok());
  EXPECT_NE(reply.status().message().find(stranger.address().to_string() +
                                          ": TLS handshake failed: certificate verify failed"),
            std::string::npos)
      << reply.status().message();
  // The token never went to the stranger, and the request was not sent elsewhere instead.
  EXPECT_TRUE(stranger.requests().empty());
  EXPECT_TRUE(member.requests().empty());
}

TEST_F(HttpsTransportTest, AMembersCertificateAtAnotherAddressIsRefused) {
  // Node 2's certificate, from the same CA, presented at 127.0.0.1: a removed node that took
  // over the address, or a member answering for another.
  TestServer impostor(cluster_.other_node, "{}");
  std::unique_ptr<Transport> transport = https({.addresses = {impostor.address()},
                                                .token = "secret",
                                                .ca_certificate = cluster_.ca.certificate});
  ASSERT_NE(transport, nullptr);
  Result<HttpReply> reply = transport->send(Method::get, "/v1/cluster", "");
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.code(), Errc::access_denied);
  EXPECT_EQ(reply.status().message(),
            impostor.address().to_string() +
                ": the certificate presented is not that of the cluster's node at this address");
  EXPECT_TRUE(impostor.requests().empty());
}

TEST_F(HttpsTransportTest, WithoutACaAnyNodeIsTrustedOnFirstUse) {
  // A node not yet in a cluster presents a self-signed certificate.
  TestServer lone_node(cluster_.ca, R"({"token":"t"})");
  std::unique_ptr<Transport> transport = https({.addresses = {lone_node.address()}});
  ASSERT_NE(transport, nullptr);
  Result<HttpReply> reply = transport->send(Method::post, "/v1/cluster/create", "{}");
  ASSERT_TRUE(reply.ok()) << reply.status().to_string();
  EXPECT_EQ(reply->body, R"({"token":"t"})");
  const std::vector<http::request<http::string_body>> requests = lone_node.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].count(http::field::authorization), 0u);
}

// `cluster create` asks first, then sends the secret only to the node that presented the same
// certificate.
TEST_F(HttpsTransportTest, APinnedRequestGoesOnlyToTheNodePresentingThatCertificate) {
  TestServer lone_node(cluster_.node, "{}");
  std::unique_ptr<Transport> asking = https({.addresses = {lone_node.address()}});
  ASSERT_NE(asking, nullptr);
  Result<HttpReply> answer = asking->send(Method::get, "/v1/node", "");
  ASSERT_TRUE(answer.ok()) << answer.status().to_string();
  EXPECT_EQ(answer->server_fingerprint,
            *cluster::certificate_fingerprint(cluster_.node.certificate));

  std::unique_ptr<Transport> pinned = https({.addresses = {lone_node.address()},
                                             .token = "setup-secret",
                                             .pinned_fingerprint = answer->server_fingerprint});
  ASSERT_TRUE(pinned->send(Method::post, "/v1/cluster/create", "{}").ok());
  std::unique_ptr<Transport> elsewhere = https(
      {.addresses = {lone_node.address()},
       .token = "setup-secret",
       .pinned_fingerprint = *cluster::certificate_fingerprint(cluster_.other_node.certificate)});
  Result<HttpReply> refused = elsewhere->send(Method::post, "/v1/cluster/create", "{}");
  EXPECT_EQ(refused.code(), Errc::access_denied);
  EXPECT_EQ(refused.status().message(),
            lone_node.address().to_string() +
                ": presented another certificate than the node that answered before");
  EXPECT_EQ(lone_node.requests().size(), 2u) << "the question and the pinned request only";
}

TEST_F(HttpsTransportTest, ARefusedConnectionMovesOnToTheNextAddress) {
  TestServer member(cluster_.node, "{}");
  std::unique_ptr<Transport> transport = https({.addresses = {{"127.0.0.1", 1}, member.address()},
                                                .token = "secret",
                                                .ca_certificate = cluster_.ca.certificate});
  ASSERT_NE(transport, nullptr);
  Result<HttpReply> reply = transport->send(Method::get, "/v1/cluster", "");
  ASSERT_TRUE(reply.ok()) << reply.status().to_string();
  EXPECT_EQ(member.requests().size(), 1u);
}

TEST_F(HttpsTransportTest, WhenNoAddressAnswersEachIsNamed) {
  std::unique_ptr<Transport> transport =
      https({.addresses = {{"127.0.0.1", 1}, {"127.0.0.2", 1}}, .token = "secret"});
  ASSERT_NE(transport, nullptr);
  Result<HttpReply> reply = transport->send(Method::get, "/v1/cluster", "");
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.code(), Errc::unavailable);
  EXPECT_EQ(reply.status().message(),
            "cannot reach the cluster (127.0.0.1:1: connection refused; "
            "127.0.0.2:1: connection refused)");
}

TEST_F(HttpsTransportTest, ANodeThatNeverAnswersTimesOut) {
  // The kernel completes the TCP handshake for a listening socket nobody accepts on.
  asio::io_context io;
  tcp::acceptor silent(io, {asio::ip::make_address_v4("127.0.0.1"), 0});
  const AdminAddress address{"127.0.0.1", silent.local_endpoint().port()};
  std::unique_ptr<Transport> transport =
      https({.addresses = {address}, .token = "secret", .timeout = 300ms});
  ASSERT_NE(transport, nullptr);
  const auto start = std::chrono::steady_clock::now();
  Result<HttpReply> reply = transport->send(Method::get, "/v1/cluster", "");
  const auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.code(), Errc::timed_out);
  EXPECT_EQ(reply.status().message(), address.to_string() + ": no reply within 0.3 s");
  EXPECT_GE(elapsed, 250ms);
  EXPECT_LT(elapsed, 5s);
}

TEST(HttpsTransport, ACaCertificateThatIsNotPemIsRefused) {
  Result<std::unique_ptr<Transport>> transport = make_https_transport(
      {.addresses = {{"127.0.0.1", 8080}}, .token = "t", .ca_certificate = "not PEM"});
  ASSERT_FALSE(transport.ok());
  EXPECT_EQ(transport.code(), Errc::invalid_argument);
}

TEST(HttpsTransport, ATokenThatWouldSplitTheHeaderIsRefused) {
  Result<std::unique_ptr<Transport>> transport =
      make_https_transport({.addresses = {{"127.0.0.1", 8080}}, .token = "t\r\nX-Admin: yes"});
  ASSERT_FALSE(transport.ok());
  EXPECT_EQ(transport.code(), Errc::invalid_argument);
}

}  // namespace
}  // namespace tidepool::cli
