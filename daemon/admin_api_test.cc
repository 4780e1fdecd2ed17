// The admin API's dispatch: what is open to anyone, what needs the cluster's token, and what a
// request no route serves is told — on a node outside any cluster, then in a cluster of its own.
#include "daemon/admin_api.h"

#include <gtest/gtest.h>

#include "cluster/tls.h"
#include "common/tls_identity.h"
#include "daemon/admin/test_node.h"

namespace tidepool::daemon {
namespace {

using admin::testing::error_of;
using admin::testing::json_of;
using admin::testing::kNodeId;
using admin::testing::TestNode;
using nlohmann::json;

class AdminApiOutsideAClusterTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(node_.ready()); }
  TestNode node_;
};

TEST_F(AdminApiOutsideAClusterTest, HealthSaysWhichNodeAndNoCluster) {
  const HttpResponse health = node_.call("GET", "/health", "", "");
  EXPECT_EQ(health.status, 200u);
  EXPECT_EQ(
      json_of(health),
      (json{
          {"node", kNodeId}, {"status", "ok"}, {"cluster", nullptr}, {"leader", 0}, {"epoch", 0}}));
}

TEST_F(AdminApiOutsideAClusterTest, MetricsAreServedAsPrometheusText) {
  const HttpResponse metrics = node_.call("GET", "/metrics", "", "");
  EXPECT_EQ(metrics.status, 200u);
  EXPECT_EQ(metrics.body, admin::testing::kMetrics);
  EXPECT_EQ(metrics.content_type, "text/plain; version=0.0.4");
}

TEST_F(AdminApiOutsideAClusterTest, TheNodeDescribesItselfWithItsCertificate) {
  const json node = json_of(node_.call("GET", "/v1/node", "", ""));
  EXPECT_EQ(node["id"], kNodeId);
  EXPECT_EQ(node["pool"], admin::testing::kPool);
  EXPECT_TRUE(node["cluster"].is_null());
  EXPECT_EQ(node["certificate"], node_.membership().self_signed_certificate());
  EXPECT_FALSE(node.contains("state"));
}

TEST_F(AdminApiOutsideAClusterTest, EveryOtherPathUnderV1AsksForACluster) {
  for (const char* target : {"/v1/cluster", "/v1/sysctl", "/v1/no/such/path"}) {
    const HttpResponse refused = node_.call("GET", target, "", "anything");
    EXPECT_EQ(refused.status, 401u) << target;
    EXPECT_EQ(error_of(refused),
              "this node is not in a cluster: create one or add it to one first");
  }
}

TEST_F(AdminApiOutsideAClusterTest, APathOutsideV1IsNotFoundOrNotAllowed) {
  const HttpResponse missing = node_.call("GET", "/status", "", "");
  EXPECT_EQ(missing.status, 404u);
  EXPECT_EQ(error_of(missing), "no such path: /status");
  const HttpResponse wrong = node_.call("POST", "/health", "", "");
  EXPECT_EQ(wrong.status, 405u);
  EXPECT_EQ(error_of(wrong), "POST is not allowed on /health");
}

TEST_F(AdminApiOutsideAClusterTest, CreateAndJoinNeedTheNodesSetupSecret) {
  const std::string secret = node_.setup_secret();
  EXPECT_EQ(secret.size(), 64u);
  for (const std::string target : {"/v1/cluster/create", "/v1/cluster/join"}) {
    const HttpResponse anonymous = node_.call("POST", target, R"({"name": "t"})", "");
    EXPECT_EQ(anonymous.status, 401u) << target;
    EXPECT_EQ(error_of(anonymous),
              "this node is in no cluster: making it a member needs its setup secret as the "
              "bearer token (the file its cluster.setup_secret_file names, by default "
              "DATA_DIR/setup-secret on the node)");
    for (const std::string& wrong : {secret + "0", secret.substr(1), std::string("x")}) {
      const HttpResponse refused = node_.call("POST", target, R"({"name": "t"})", wrong);
      EXPECT_EQ(refused.status, 403u) << target;
      EXPECT_EQ(error_of(refused), "that is not this node's setup secret");
    }
  }
  EXPECT_EQ(node_.joined(), 0);
  EXPECT_FALSE(node_.membership().identity());
}

TEST_F(AdminApiOutsideAClusterTest, TheNodeProvesItKnowsItsSecretForTheCertificateItPresents) {
  const json node = json_of(node_.call("GET", "/v1/node", "", ""));
  const Result<std::string> fingerprint =
      cluster::certificate_fingerprint(node["certificate"].get<std::string>());
  ASSERT_TRUE(fingerprint.ok());
  EXPECT_EQ(node["setup_proof"], setup_proof(node_.setup_secret(), *fingerprint));
  EXPECT_NE(node["setup_proof"], setup_proof(node_.setup_secret() + "x", *fingerprint));
  EXPECT_FALSE(node.contains("cluster_certificate"));
  ASSERT_TRUE(node_.create_cluster());
  const json member = json_of(node_.call("GET", "/v1/node", "", ""));
  EXPECT_FALSE(member.contains("setup_proof"));
  // A member proves instead that it holds the certificate its cluster issued to it.
  const std::string issued = member.value("cluster_certificate", std::string());
  EXPECT_TRUE(cluster::check_issued_by(issued, node_.membership().ca_certificate(),
                                       cluster::node_common_name(member["id"]))
                  .ok());
}

TEST_F(AdminApiOutsideAClusterTest, CreateNeedsANamedCluster) {
  const std::string secret = node_.setup_secret();
  EXPECT_EQ(node_.call("POST", "/v1/cluster/create", "[]", secret).status, 400u);
  const HttpResponse unnamed =
      node_.call("POST", "/v1/cluster/create", R"({"name": 5})", secret);
  EXPECT_EQ(unnamed.status, 400u);
  EXPECT_EQ(error_of(unnamed), "'name' must be a string");
  EXPECT_EQ(node_.call("POST", "/v1/cluster/create", R"({"name": "no spaces"})", secret).status,
            400u);
  EXPECT_EQ(node_.joined(), 0);
}

TEST_F(AdminApiOutsideAClusterTest, AJoinNeedsThePackageAMemberSends) {
  const HttpResponse refused =
      node_.call("POST", "/v1/cluster/join", R"({"cluster": {}})", node_.setup_secret());
  EXPECT_EQ(refused.status, 400u);
  EXPECT_EQ(error_of(refused), "a join needs cluster {name, id}, ca_certificate and certificate");
}

class AdminApiTest : public admin::testing::OneNodeClusterTest {};

TEST_F(AdminApiTest, CreatingAClusterMakesTheNodeItsMemberAndLeader) {
  EXPECT_EQ(node_.joined(), 1);
  const json health = json_of(node_.call("GET", "/health", "", ""));
  EXPECT_EQ(health["cluster"], "tidepool");
  EXPECT_EQ(health["leader"], kNodeId);
  EXPECT_EQ(json_of(node_.call("GET", "/v1/node", "", ""))["cluster"]["name"], "tidepool");
  const HttpResponse again = node_.call("POST", "/v1/cluster/create", json{{"name", "other"}});
  EXPECT_EQ(again.status, 409u);
  EXPECT_EQ(error_of(again), "this node is already in cluster 'tidepool'");
}

TEST_F(AdminApiTest, ATokenIsRequiredAndMustBeTheClusters) {
  for (const std::string& token :
       {std::string(), std::string("not-the-token"), node_.token() + "x"}) {
    const HttpResponse refused = node_.call("GET", "/v1/cluster", "", token);
    EXPECT_EQ(refused.status, 401u) << token;
    EXPECT_EQ(error_of(refused), "a valid bearer token is required");
  }
  const HttpResponse changed = node_.call("PUT", "/v1/sysctl/efs.bam.atime_enabled",
                                          R"({"value": "false"})", "not-the-token");
  EXPECT_EQ(changed.status, 401u);
  EXPECT_EQ(json_of(node_.call("GET", "/v1/sysctl/efs.bam.atime_enabled"))["value"], "true");
}

TEST_F(AdminApiTest, ARotatedTokenReplacesTheOldOne) {
  const std::string old = node_.token();
  EXPECT_EQ(node_.call("POST", "/v1/cluster/token", "", "not-the-token").status, 401u);
  const HttpResponse rotated = node_.call("POST", "/v1/cluster/token");
  ASSERT_EQ(rotated.status, 200u) << rotated.body;
  const std::string fresh = json_of(rotated).value("token", std::string());
  EXPECT_EQ(fresh.size(), 64u);
  EXPECT_NE(fresh, old);
  const HttpResponse refused = node_.call("GET", "/v1/cluster", "", old);
  EXPECT_EQ(refused.status, 401u);
  EXPECT_EQ(error_of(refused), "a valid bearer token is required");
  EXPECT_EQ(node_.call("GET", "/v1/cluster", "", fresh).status, 200u);
}

TEST_F(AdminApiTest, WithTheTokenAnUnknownPathIsNotFound) {
  const HttpResponse missing = node_.call("GET", "/v1/no/such/path");
  EXPECT_EQ(missing.status, 404u);
  EXPECT_EQ(error_of(missing), "no such path: /v1/no/such/path");
  EXPECT_EQ(node_.call("GET", "/v1/storagepool/tiers/a/b").status, 404u);
}

TEST_F(AdminApiTest, WithTheTokenAWrongMethodIsNotAllowed) {
  for (const auto& [method, target] :
       std::vector<std::pair<std::string, std::string>>{{"DELETE", "/v1/sysctl"},
                                                        {"POST", "/v1/statistics/cache"},
                                                        {"DELETE", "/v1/namespace/ifs/a"},
                                                        {"GET", "/v1/cluster/create"}}) {
    const HttpResponse refused = node_.call(method, target);
    EXPECT_EQ(refused.status, 405u) << method << " " << target;
    EXPECT_EQ(error_of(refused), method + " is not allowed on " + target);
  }
}

TEST_F(AdminApiTest, StatusShowsTheClusterOfOneNode) {
  const HttpResponse answer = node_.call("GET", "/v1/cluster");
  ASSERT_EQ(answer.status, 200u) << answer.body;
  const json status = json_of(answer);
  EXPECT_EQ(status["name"], "tidepool");
  EXPECT_EQ(status["leader"], kNodeId);
  EXPECT_EQ(status["health"], "ok");
  ASSERT_EQ(status["nodes"].size(), 1u);
  const json& node = status["nodes"][0];
  EXPECT_EQ(node["id"], kNodeId);
  EXPECT_EQ(node["state"], "up");
  EXPECT_EQ(node["stats"], (json{{"in_bytes_per_second", 1'000},
                                 {"out_bytes_per_second", 2'000},
                                 {"used_bytes", 3'000},
                                 {"size_bytes", 4'000}}));
  EXPECT_EQ(status["namespace"]["home"], kNodeId);
  EXPECT_EQ(status["namespace"]["state"], "serving");
  EXPECT_EQ(
      status["nodepools"],
      (json::array({{{"name", admin::testing::kPool}, {"nodes", {kNodeId}}, {"tier", nullptr}}})));
  EXPECT_EQ(status["jobs"], json::array());
}

TEST_F(AdminApiTest, RemovingANodeNotInTheClusterIsNotFound) {
  const HttpResponse missing = node_.call("DELETE", "/v1/cluster/nodes/99");
  EXPECT_EQ(missing.status, 404u);
  EXPECT_EQ(error_of(missing), "no node 99 in the cluster");
  EXPECT_EQ(node_.call("DELETE", "/v1/cluster/nodes/x").status, 404u);
}

TEST_F(AdminApiTest, AddingANodeNeedsItsAddress) {
  const HttpResponse refused = node_.call("POST", "/v1/cluster/nodes", json{{"address", 1}});
  EXPECT_EQ(refused.status, 400u);
  EXPECT_EQ(error_of(refused), "'address' must be the new node's admin address, IP:PORT");
  const HttpResponse secretless =
      node_.call("POST", "/v1/cluster/nodes", json{{"address", "127.0.0.1:1"}});
  EXPECT_EQ(secretless.status, 400u);
  EXPECT_EQ(error_of(secretless),
            "'setup_secret' must be the new node's setup secret (the file its "
            "cluster.setup_secret_file names, by default DATA_DIR/setup-secret)");
}

}  // namespace
}  // namespace tidepool::daemon
