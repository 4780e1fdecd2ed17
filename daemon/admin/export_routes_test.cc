// NFS exports through the admin API of a one-node cluster.
#include <gtest/gtest.h>

#include "daemon/admin/test_node.h"

namespace tidepool::daemon::admin::testing {
namespace {

class ExportRoutesTest : public OneNodeClusterTest {};

json export_of(std::uint32_t id, const std::string& path, bool read_only) {
  return json{{"id", id},
              {"path", path},
              {"clients", {"*"}},
              {"read_only", read_only},
              {"secure", true},
              {"root_squash", true},
              {"map_all_uid", nullptr},
              {"map_all_gid", nullptr},
              {"anon_uid", 65534},
              {"anon_gid", 65534}};
}

TEST_F(ExportRoutesTest, AnExportIsCreatedReadChangedAndDeleted) {
  EXPECT_EQ(json_of(node_.call("GET", "/v1/nfs/exports")), (json{{"exports", json::array()}}));
  const HttpResponse created = node_.call("POST", "/v1/nfs/exports", json{{"path", "/ifs/data"}});
  EXPECT_EQ(created.status, 201u) << created.body;
  EXPECT_EQ(json_of(created), export_of(1, "/ifs/data", false));
  ASSERT_EQ(node_.call("POST", "/v1/nfs/exports", json{{"path", "/ifs/home"}}).status, 201u);
  EXPECT_EQ(json_of(node_.call("GET", "/v1/nfs/exports")),
            (json{{"exports", json::array({export_of(1, "/ifs/data", false),
                                           export_of(2, "/ifs/home", false)})}}));

  const HttpResponse changed = node_.call("PUT", "/v1/nfs/exports/1", json{{"read_only", true}});
  EXPECT_EQ(changed.status, 200u) << changed.body;
  EXPECT_EQ(json_of(node_.call("GET", "/v1/nfs/exports/1")), export_of(1, "/ifs/data", true));
  ASSERT_EQ(node_.call("PUT", "/v1/nfs/exports/1", json{{"secure", false}}).status, 200u);
  json insecure = export_of(1, "/ifs/data", true);
  insecure["secure"] = false;
  EXPECT_EQ(json_of(node_.call("GET", "/v1/nfs/exports/1")), insecure);

  EXPECT_EQ(node_.call("DELETE", "/v1/nfs/exports/1").status, 204u);
  const HttpResponse gone = node_.call("GET", "/v1/nfs/exports/1");
  EXPECT_EQ(gone.status, 404u);
  EXPECT_EQ(error_of(gone), "no export 1");
  EXPECT_EQ(json_of(node_.call("POST", "/v1/nfs/exports", json{{"path", "/ifs/x"}}))["id"], 3);
}

TEST_F(ExportRoutesTest, AnExportIsRefusedWhatItCannotBe) {
  const HttpResponse pathless = node_.call("POST", "/v1/nfs/exports", json{{"read_only", true}});
  EXPECT_EQ(pathless.status, 400u);
  EXPECT_EQ(error_of(pathless), "'path' is required");
  ASSERT_EQ(node_.call("POST", "/v1/nfs/exports", json{{"path", "/ifs/data"}}).status, 201u);
  const HttpResponse twice = node_.call("POST", "/v1/nfs/exports", json{{"path", "/ifs/data"}});
  EXPECT_EQ(twice.status, 409u);
  EXPECT_EQ(error_of(twice), "/ifs/data is already exported (export 1)");
  const HttpResponse secure_as_text =
      node_.call("PUT", "/v1/nfs/exports/1", json{{"secure", "yes"}});
  EXPECT_EQ(secure_as_text.status, 400u);
  EXPECT_EQ(error_of(secure_as_text), "'secure' must be true or false");
  EXPECT_EQ(node_.call("PUT", "/v1/nfs/exports/7", json{{"read_only", true}}).status, 404u);
  EXPECT_EQ(node_.call("PUT", "/v1/nfs/exports/one", json{{"read_only", true}}).status, 404u);
  EXPECT_EQ(node_.call("DELETE", "/v1/nfs/exports/7").status, 404u);
}

}  // namespace
}  // namespace tidepool::daemon::admin::testing
