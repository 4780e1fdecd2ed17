// The client a member uses to reach a node it adds, against the admin API's own HTTPS server on
// loopback: it names the certificate the server presented, and a pinned request goes nowhere
// but to the certificate it was pinned to.
#include "daemon/http.h"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>
#include <optional>
#include <vector>

#include "cluster/tls.h"

namespace tidepool::daemon {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

// A loopback address:port nothing listened on a moment ago.
std::string free_address() {
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor(io, {asio::ip::make_address_v4("127.0.0.1"), 0});
  return "127.0.0.1:" + std::to_string(acceptor.local_endpoint().port());
}

class NewNodeRequestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto identity = cluster::create_self_signed_certificate("node-5");
    ASSERT_TRUE(identity.ok());
    identity_ = *identity;
    auto server = HttpsServer::start(strand_, address_, identity_,
                                     [this](HttpRequest request) -> asio::awaitable<HttpResponse> {
                                       received_.push_back(request);
                                       co_return HttpResponse{200, "{}"};
                                     });
    ASSERT_TRUE(server.ok()) << server.status().to_string();
    server_ = std::move(server).value();
  }

  void TearDown() override {
    if (server_) server_->stop();
    io_.run_for(1s);
  }

  Result<HttpReply> send(NewNodeRequest request) {
    std::optional<Result<HttpReply>> reply;
    asio::co_spawn(strand_, https_request_to_new_node(strand_, std::move(request), 5s),
                   [&reply](std::exception_ptr, Result<HttpReply> value) { reply = value; });
    for (int turn = 0; turn < 100 && !reply; ++turn) io_.run_one_for(100ms);
    return reply ? *reply : error(Errc::timed_out, "no reply within the test's bound");
  }

  asio::io_context io_;
  asio::strand<asio::io_context::executor_type> strand_ = asio::make_strand(io_);
  std::string address_ = free_address();
  cluster::PemPair identity_;
  std::unique_ptr<HttpsServer> server_;
  std::vector<HttpRequest> received_;
};

TEST_F(NewNodeRequestTest, TheReplyNamesTheCertificateTheServerPresented) {
  const Result<HttpReply> reply = send(NewNodeRequest{.address = address_,
                                                      .method = "POST",
                                                      .target = "/v1/cluster/join",
                                                      .body = "{}",
                                                      .authorization = "Bearer s3cret"});
  ASSERT_TRUE(reply.ok()) << reply.status().to_string();
  EXPECT_EQ(reply->status, 200u);
  EXPECT_EQ(reply->server_fingerprint,
            cluster::certificate_fingerprint(identity_.certificate).value());
  ASSERT_EQ(received_.size(), 1u);
  EXPECT_EQ(received_[0].authorization, "Bearer s3cret");
  EXPECT_EQ(received_[0].target, "/v1/cluster/join");
}

TEST_F(NewNodeRequestTest, APinnedRequestSendsNothingToAnotherCertificate) {
  auto other = cluster::create_self_signed_certificate("node-5");
  ASSERT_TRUE(other.ok());
  const Result<HttpReply> refused =
      send(NewNodeRequest{.address = address_,
                          .method = "POST",
                          .target = "/v1/cluster/join",
                          .authorization = "Bearer s3cret",
                          .pinned_fingerprint =
                              cluster::certificate_fingerprint(other->certificate).value()});
  EXPECT_EQ(refused.code(), Errc::access_denied);
  EXPECT_EQ(refused.status().message(), address_ + " presented another certificate than before");
  EXPECT_TRUE(received_.empty());

  const Result<HttpReply> pinned =
      send(NewNodeRequest{.address = address_,
                          .method = "GET",
                          .target = "/v1/node",
                          .pinned_fingerprint =
                              cluster::certificate_fingerprint(identity_.certificate).value()});
  ASSERT_TRUE(pinned.ok()) << pinned.status().to_string();
  EXPECT_EQ(received_.size(), 1u);
}

}  // namespace
}  // namespace tidepool::daemon
