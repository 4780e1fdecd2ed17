// The fixture of `tide`'s tests: command lines run in-process, against a FakeCluster that
// records what is sent and answers with the replies queued, under a FakeClock.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cli/admin_client.h"
#include "cli/credentials.h"
#include "cli/test_util.h"
#include "cli/tide.h"
#include "common/clock.h"
#include "common/status.h"
#include "common/tls_identity.h"

namespace tidepool::cli::internal {

struct SentRequest {
  Method method;
  std::string target;
  std::string body;
  ConnectionSettings settings;
};

// Stands in for the cluster: records what is sent and answers with the replies queued.
class FakeCluster {
 public:
  void reply(unsigned status, std::string body, std::string reason = "") {
    replies_.push_back(HttpReply{status, std::move(reason), std::move(body), kNodeFingerprint});
  }
  // A node in no cluster answering GET /v1/node with the proof that it knows `setup_secret` for
  // the certificate it presents.
  void reply_as_node_outside_a_cluster(std::string_view setup_secret) {
    reply(200, Json{{"id", 1},
                    {"cluster", nullptr},
                    {"setup_proof", setup_proof(setup_secret, kNodeFingerprint)}}
                   .dump());
  }
  // The fingerprint of the certificate every fake node presents.
  static constexpr const char* kNodeFingerprint = "fingerprint-of-the-nodes-certificate";
  const std::vector<SentRequest>& requests() const { return requests_; }

  Result<std::unique_ptr<Transport>> connect(ConnectionSettings settings) {
    return std::unique_ptr<Transport>(std::make_unique<FakeTransport>(*this, std::move(settings)));
  }

 private:
  class FakeTransport final : public Transport {
   public:
    FakeTransport(FakeCluster& cluster, ConnectionSettings settings)
        : cluster_(cluster), settings_(std::move(settings)) {}
    Result<HttpReply> send(Method method, const std::string& target,
                           const std::string& body) override {
      cluster_.requests_.push_back({method, target, body, settings_});
      if (cluster_.replies_.empty()) return HttpReply{500, "Internal Server Error", ""};
      HttpReply reply = std::move(cluster_.replies_.front());
      cluster_.replies_.pop_front();
      return reply;
    }

   private:
    FakeCluster& cluster_;
    const ConnectionSettings settings_;
  };

  std::deque<HttpReply> replies_;
  std::vector<SentRequest> requests_;
};

class TideTest : public ::testing::Test {
 protected:
  TideTest() {
    environment_.variable = [this](const std::string& name) -> std::optional<std::string> {
      auto found = variables_.find(name);
      if (found == variables_.end()) return std::nullopt;
      return found->second;
    };
    environment_.current_directory = root_.path();
    environment_.connect = [this](ConnectionSettings settings) {
      return cluster_.connect(std::move(settings));
    };
    environment_.clock = &clock_;
    environment_.sleep = [this](std::chrono::milliseconds duration) { clock_.advance(duration); };
  }

  int tide(std::vector<std::string> args) {
    out_.str("");
    err_.str("");
    return run_tide(std::move(args), out_, err_, environment_);
  }

  // tide.json of a cluster in `directory`/.tidepool.
  std::filesystem::path write_credentials_in(const std::filesystem::path& directory,
                                             const std::string& cluster = "tidepool") {
    const std::filesystem::path file = directory / ".tidepool" / "tide.json";
    EXPECT_TRUE(write_credentials(file, Credentials{.cluster = cluster,
                                                    .id = "c0ffee",
                                                    .token = "secret",
                                                    .ca_certificate = "CA PEM",
                                                    .nodes = {"127.0.0.1:8080", "127.0.0.2"}})
                    .ok());
    return file;
  }

  const SentRequest& only_request() {
    EXPECT_EQ(cluster_.requests().size(), 1u);
    static const SentRequest none{};
    return cluster_.requests().empty() ? none : cluster_.requests().front();
  }

  TemporaryDirectory root_;
  FakeClock clock_{std::chrono::system_clock::time_point()};
  std::map<std::string, std::string> variables_;
  Environment environment_;
  FakeCluster cluster_;
  std::ostringstream out_;
  std::ostringstream err_;
};

}  // namespace tidepool::cli::internal
