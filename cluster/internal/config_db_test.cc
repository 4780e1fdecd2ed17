#include "cluster/internal/config_db.h"

#include <gtest/gtest.h>

namespace tidepool::cluster::internal {
namespace {

xdr::Buffer encoded(const Change& change) {
  xdr::Buffer out;
  xdr::Encoder encoder(out);
  encode_change(change, encoder);
  return out;
}

class ConfigDbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = ConfigDb::open(":memory:");
    ASSERT_TRUE(opened.ok()) << opened.status().to_string();
    db_ = std::move(opened).value();
  }
  Status apply(const Change& change) {
    Change decoded;
    Status outcome;
    Status written = db_->apply(encoded(change), decoded, outcome);
    EXPECT_TRUE(written.ok()) << written.to_string();
    return outcome;
  }
  static NodeInfo node(NodeId id, std::string pool = "f800") {
    return {id,
            "node-" + std::to_string(id),
            "127.0.0." + std::to_string(id) + ":7100",
            "127.0.0." + std::to_string(id),
            "127.0.0." + std::to_string(id) + ":8080",
            std::move(pool),
            true,
            "certificate-of-node-" + std::to_string(id)};
  }
  std::unique_ptr<ConfigDb> db_;
};

TEST_F(ConfigDbTest, EverySuccessfulChangeBumpsTheEpochAndEveryChangeTheHistory) {
  EXPECT_TRUE(apply(Change::add_node(node(1))).ok());
  EXPECT_EQ(db_->epoch(), 1u);
  EXPECT_EQ(apply(Change::create_object("tier", "hot-tier", R"({"pools":["f800"]})")).code(),
            Errc::ok);
  EXPECT_EQ(apply(Change::create_object("tier", "hot-tier", "{}")).code(), Errc::already_exists);
  EXPECT_EQ(db_->epoch(), 2u);
  EXPECT_EQ(db_->applied(), 3u);
  const GroupView& view = db_->view();
  ASSERT_NE(view.object("tier", "hot-tier"), nullptr);
  EXPECT_EQ(view.object("tier", "hot-tier")->body, R"({"pools":["f800"]})");
  EXPECT_EQ(view.object("tier", "hot-tier")->changed, 2u);
}

TEST_F(ConfigDbTest, UpdateAndDeleteNeedTheObjectAndCreateRefusesADuplicate) {
  EXPECT_EQ(apply(Change::update_object("export", "/ifs", "{}")).code(), Errc::not_found);
  EXPECT_EQ(apply(Change::delete_object("export", "/ifs")).code(), Errc::not_found);
  EXPECT_TRUE(apply(Change::create_object("export", "/ifs", "{}")).ok());
  EXPECT_TRUE(apply(Change::update_object("export", "/ifs", R"({"read_only":true})")).ok());
  EXPECT_EQ(db_->view().object("export", "/ifs")->body, R"({"read_only":true})");
  EXPECT_TRUE(apply(Change::delete_object("export", "/ifs")).ok());
  EXPECT_EQ(db_->view().object("export", "/ifs"), nullptr);
}

TEST_F(ConfigDbTest, AConditionalUpdateAppliesOnlyToTheObjectAsItWasRead) {
  ASSERT_TRUE(apply(Change::create_object("cluster", "namespace", "a")).ok());
  const Epoch read_at = db_->view().object("cluster", "namespace")->changed;
  EXPECT_TRUE(apply(Change::update_object("cluster", "namespace", "b", read_at)).ok());
  Status stale = apply(Change::update_object("cluster", "namespace", "c", read_at));
  EXPECT_EQ(stale.code(), Errc::precondition_failed) << stale.to_string();
  EXPECT_EQ(db_->view().object("cluster", "namespace")->body, "b");
  EXPECT_EQ(apply(Change::update_object("cluster", "gone", "c", read_at)).code(), Errc::not_found);
}

TEST_F(ConfigDbTest, NodesRegisterOnceGoDownAndUpAndLeave) {
  EXPECT_TRUE(apply(Change::add_node(node(1))).ok());
  EXPECT_TRUE(apply(Change::add_node(node(2, "h500"))).ok());
  EXPECT_TRUE(apply(Change::add_node(node(2, "h500"))).ok()) << "repeating a registration";
  NodeInfo impostor = node(3);
  impostor.name = "node-2";
  EXPECT_EQ(apply(Change::add_node(impostor)).code(), Errc::already_exists);
  EXPECT_TRUE(apply(Change::set_node_state(2, false)).ok());
  EXPECT_EQ(db_->view().up_nodes(), std::vector<NodeId>{1});
  EXPECT_TRUE(apply(Change::set_node_state(2, true)).ok());
  EXPECT_EQ(db_->view().up_nodes_in_pool("h500"), std::vector<NodeId>{2});
  EXPECT_TRUE(apply(Change::remove_node(2)).ok());
  EXPECT_EQ(apply(Change::remove_node(2)).code(), Errc::not_found);
  EXPECT_EQ(apply(Change::set_node_state(9, false)).code(), Errc::not_found);
  EXPECT_EQ(db_->view().nodes.size(), 1u);
}

TEST_F(ConfigDbTest, RemovingANodeRevokesItsCertificateForGood) {
  ASSERT_TRUE(apply(Change::add_node(node(1))).ok());
  ASSERT_TRUE(apply(Change::add_node(node(2))).ok());
  EXPECT_TRUE(db_->view().revoked_certificates.empty());
  ASSERT_TRUE(apply(Change::remove_node(2)).ok());
  EXPECT_EQ(db_->view().revoked_certificates, std::vector<std::string>{"certificate-of-node-2"});
  EXPECT_EQ(apply(Change::add_node(node(2))).code(), Errc::access_denied)
      << "a removed node comes back only with a certificate issued anew";
  NodeInfo again = node(2);
  again.certificate = "another-certificate-of-node-2";
  EXPECT_TRUE(apply(Change::add_node(again)).ok());
  EXPECT_EQ(db_->view().node(2)->certificate, "another-certificate-of-node-2");
  EXPECT_EQ(db_->view().revoked_certificates.size(), 1u);
}

TEST_F(ConfigDbTest, AChangeThatCannotBeDecodedIsRefusedButCounted) {
  std::uint8_t garbage[] = {0, 0, 0, 9, 1, 2};
  Change decoded;
  Status outcome;
  ASSERT_TRUE(db_->apply(garbage, decoded, outcome).ok());
  EXPECT_EQ(outcome.code(), Errc::invalid_argument);
  EXPECT_EQ(db_->applied(), 1u);
  EXPECT_EQ(db_->epoch(), 0u);
}

TEST_F(ConfigDbTest, ASnapshotRestoresTheSameStateAndHistory) {
  ASSERT_TRUE(apply(Change::add_node(node(1))).ok());
  ASSERT_TRUE(apply(Change::add_node(node(2))).ok());
  ASSERT_TRUE(apply(Change::set_node_state(2, false)).ok());
  ASSERT_TRUE(apply(Change::add_node(node(3))).ok());
  ASSERT_TRUE(apply(Change::remove_node(3)).ok());
  ASSERT_TRUE(apply(Change::create_object("sysctl", "efs.bam.atime_enabled", "1")).ok());
  xdr::Buffer snapshot = db_->snapshot();
  GroupView before = db_->view();

  auto other = ConfigDb::open(":memory:");
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE((*other)->restore(snapshot).ok());
  const GroupView& after = (*other)->view();
  EXPECT_EQ(after.epoch, before.epoch);
  EXPECT_EQ(after.applied, before.applied);
  EXPECT_EQ(after.digest, before.digest);
  EXPECT_EQ(after.nodes, before.nodes);
  EXPECT_EQ(after.objects, before.objects);
  EXPECT_EQ(after.revoked_certificates, before.revoked_certificates);
  EXPECT_EQ(after.revoked_certificates.size(), 1u);

  xdr::Buffer cut(snapshot.begin(), snapshot.end() - 3);
  EXPECT_EQ((*other)->restore(cut).code(), Errc::corrupt);
  EXPECT_EQ((*other)->view().digest, before.digest) << "a bad snapshot changes nothing";
}

TEST_F(ConfigDbTest, TheDigestDependsOnTheOrderOfChanges) {
  auto other = ConfigDb::open(":memory:");
  ASSERT_TRUE(other.ok());
  Change a = Change::create_object("tier", "a", "{}");
  Change b = Change::create_object("tier", "b", "{}");
  ASSERT_TRUE(apply(a).ok());
  ASSERT_TRUE(apply(b).ok());
  Change decoded;
  Status outcome;
  ASSERT_TRUE((*other)->apply(encoded(b), decoded, outcome).ok());
  ASSERT_TRUE((*other)->apply(encoded(a), decoded, outcome).ok());
  ASSERT_EQ(db_->view().objects.size(), 2u);
  ASSERT_EQ((*other)->view().objects.size(), 2u);
  EXPECT_EQ(db_->view().objects[1].name, (*other)->view().objects[1].name);
  EXPECT_NE(db_->digest(), (*other)->digest());
}

}  // namespace
}  // namespace tidepool::cluster::internal
