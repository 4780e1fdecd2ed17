#include "nfsd/internal/exports.h"

#include <gtest/gtest.h>

namespace tidepool::nfsd {
namespace {

ExportConfig make_export(std::string path, std::vector<std::string> clients) {
  ExportConfig c;
  c.path = std::move(path);
  c.clients = std::move(clients);
  return c;
}

TEST(Exports, ClientsMatchByHostAndCidr) {
  Export e(make_export("/ifs", {"10.1.2.3", "192.168.0.0/16"}));
  EXPECT_TRUE(e.allows(boost::asio::ip::make_address_v4("10.1.2.3")));
  EXPECT_FALSE(e.allows(boost::asio::ip::make_address_v4("10.1.2.4")));
  EXPECT_TRUE(e.allows(boost::asio::ip::make_address_v4("192.168.77.1")));
  EXPECT_TRUE(Export(make_export("/ifs", {"*"})).allows(boost::asio::ip::make_address_v4("1.2.3.4")));
}

TEST(Exports, RootIsSquashedToNobodyByDefault) {
  Export e(make_export("/ifs", {"*"}));
  CallerIdentity root{AuthFlavor::sys, 0, 0, {0, 5}};
  auto c = e.caller_for(root);
  EXPECT_EQ(c.uid, 65534u);
  EXPECT_EQ(c.gid, 65534u);
  EXPECT_EQ(c.groups, (std::vector<std::uint32_t>{65534, 5}));
  CallerIdentity alice{AuthFlavor::sys, 1000, 100, {}};
  EXPECT_EQ(e.caller_for(alice).uid, 1000u);
}

TEST(Exports, MapAllMapsEveryone) {
  ExportConfig c = make_export("/ifs", {"*"});
  c.map_all_uid = 500;
  c.map_all_gid = 600;
  Export e(c);
  auto mapped = e.caller_for({AuthFlavor::sys, 1000, 100, {7}});
  EXPECT_EQ(mapped.uid, 500u);
  EXPECT_EQ(mapped.gid, 600u);
  EXPECT_TRUE(mapped.groups.empty());
}

TEST(Exports, LongestExportContainingAPathWins) {
  ExportTable table({make_export("/ifs", {"*"}), make_export("/ifs/data", {"*"})});
  std::vector<std::string> below;
  const Export* e = table.containing("/ifs/data/set1/", below);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->path(), "/ifs/data");
  EXPECT_EQ(below, std::vector<std::string>{"set1"});
  EXPECT_EQ(table.containing("/other", below), nullptr);
  EXPECT_EQ(table.by_id(e->id()), e);
}

}  // namespace
}  // namespace tidepool::nfsd
