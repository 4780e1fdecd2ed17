#include "cli/tide.h"

#include <gtest/gtest.h>

#include <string>

#include "cli/internal/tide_fixture.h"

namespace tidepool::cli {
namespace {

using internal::TideTest;

TEST_F(TideTest, ExportsCreateModifyViewDelete) {
  write_credentials_in(root_.path());
  cluster_.reply(201, R"({"id": 3, "path": "/ifs/data"})");
  EXPECT_EQ(tide({"nfs", "exports", "create", "/ifs/data", "--clients", "10.0.0.0/8", "--read-only",
                  "--map-all", "1000:100"}),
            kExitSuccess)
      << err_.str();
  EXPECT_EQ(cluster_.requests().back().method, Method::post);
  EXPECT_EQ(cluster_.requests().back().target, "/v1/nfs/exports");
  EXPECT_EQ(cluster_.requests().back().body,
            R"({"path":"/ifs/data","clients":["10.0.0.0/8"],"read_only":true,)"
            R"("map_all_uid":1000,"map_all_gid":100})");
  EXPECT_EQ(out_.str(), "Created export 3 (/ifs/data).\n");

  cluster_.reply(200, R"({"id": 3})");
  EXPECT_EQ(tide({"nfs", "exports", "modify", "3", "--read-only", "false", "--clear-map-all"}),
            kExitSuccess);
  EXPECT_EQ(cluster_.requests().back().method, Method::put);
  EXPECT_EQ(cluster_.requests().back().target, "/v1/nfs/exports/3");
  EXPECT_EQ(cluster_.requests().back().body,
            R"({"read_only":false,"map_all_uid":null,"map_all_gid":null})");
  EXPECT_EQ(out_.str(), "Modified export 3.\n");

  cluster_.reply(200, R"({"id": 3, "path": "/ifs/data", "read_only": false, "map_all_uid": null})");
  EXPECT_EQ(tide({"nfs", "exports", "view", "3"}), kExitSuccess);
  EXPECT_EQ(out_.str(),
            "         ID: 3\n"
            "       Path: /ifs/data\n"
            "  Read Only: No\n"
            "Map All UID: -\n");

  cluster_.reply(204, "");
  EXPECT_EQ(tide({"nfs", "exports", "delete", "3", "--force"}), kExitSuccess);
  EXPECT_EQ(cluster_.requests().back().method, Method::delete_);
  EXPECT_EQ(cluster_.requests().back().target, "/v1/nfs/exports/3");
  EXPECT_EQ(out_.str(), "Deleted export 3.\n");
}

TEST_F(TideTest, ADeleteAsksOnATerminalAndFromAScriptNeedsForce) {
  write_credentials_in(root_.path());
  const std::size_t sent = cluster_.requests().size();
  EXPECT_EQ(tide({"nfs", "exports", "delete", "3"}), kExitFailure);
  EXPECT_EQ(err_.str(),
            "tide: not deleting export 3 without confirmation: standard input is not a "
            "terminal; pass --force\n");
  std::vector<std::string> asked;
  std::string answer = "no";
  environment_.ask = [&](const std::string& question) -> std::optional<std::string> {
    asked.push_back(question);
    return answer;
  };
  EXPECT_EQ(tide({"storagepool", "tiers", "delete", "hot"}), kExitFailure);
  EXPECT_EQ(err_.str(), "tide: not deleting tier 'hot': not confirmed\n");
  EXPECT_EQ(cluster_.requests().size(), sent) << "deleted without a yes";

  answer = " Yes ";
  cluster_.reply(204, "");
  EXPECT_EQ(tide({"filepool", "policies", "delete", "cold"}), kExitSuccess);
  EXPECT_EQ(cluster_.requests().back().target, "/v1/filepool/policies/cold");
  EXPECT_EQ(asked, (std::vector<std::string>{
                       "Are you sure you want to delete tier 'hot'? (yes/[no]): ",
                       "Are you sure you want to delete policy 'cold'? (yes/[no]): "}));
}

}  // namespace
}  // namespace tidepool::cli
