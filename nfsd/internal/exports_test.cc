#include "nfsd/internal/exports.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

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

TEST(Exports, MalformedClientEntriesAdmitNobody) {
  Export e(make_export("/ifs", {"10.0.0.0/33", "10.0.0.0/x", "10.0.0.1/", "10.0.0.0/-1",
                                "not-an-address", "192.168.0.0/16"}));
  EXPECT_FALSE(e.allows(boost::asio::ip::make_address_v4("10.0.0.1")));
  EXPECT_FALSE(e.allows(boost::asio::ip::make_address_v4("10.0.0.0")));
  EXPECT_TRUE(e.allows(boost::asio::ip::make_address_v4("192.168.3.4")));
}

TEST(LiveExports, ReplacingKeepsSnapshotsAndTheRootsOfUnchangedPaths) {
  LiveExports live({make_export("/ifs", {"*"}), make_export("/ifs/a", {"*"})});
  std::shared_ptr<const ExportTable> before = live.snapshot();
  std::vector<std::string> below;
  const Export* ifs = before->containing("/ifs", below);
  const Export* a = before->containing("/ifs/a", below);
  ASSERT_TRUE(ifs && a);
  ifs->set_root_inode(1);
  a->set_root_inode(42);

  EXPECT_FALSE(live.replace({make_export("/ifs", {"*"}), make_export("/ifs/a", {"*"})}));
  EXPECT_EQ(live.snapshot(), before);
  EXPECT_TRUE(live.replace({make_export("/ifs/a", {"10.0.0.0/8"}), make_export("/ifs/b", {"*"})}));
  std::shared_ptr<const ExportTable> after = live.snapshot();
  EXPECT_EQ(after->by_id(ifs->id()), nullptr);
  const Export* new_a = after->by_id(a->id());
  ASSERT_NE(new_a, nullptr);
  EXPECT_EQ(new_a->root_inode(), 42u);
  EXPECT_EQ(new_a->config().clients, std::vector<std::string>{"10.0.0.0/8"});
  const Export* b = after->containing("/ifs/b", below);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->root_inode(), 0u);
  // What a call in flight holds is untouched.
  EXPECT_EQ(before->all().size(), 2u);
  EXPECT_EQ(ifs->path(), "/ifs");
  EXPECT_EQ(a->config().clients, std::vector<std::string>{"*"});
  EXPECT_EQ(live.snapshot()->all().size(), 2u);
  EXPECT_EQ(live.snapshot()->all().front().path(), "/ifs/a");
}

// Readers do what a call does: snapshot, find an export, and use it after the table has been
// replaced under them. The ASan build turns a table freed too early into a failure.
TEST(LiveExports, ReplacingUnderConcurrentReadersLeavesTheirExportsIntact) {
  const std::vector<ExportConfig> one{make_export("/ifs", {"*"}), make_export("/ifs/a", {"*"})};
  const std::vector<ExportConfig> two{make_export("/ifs/a", {"10.0.0.0/8"}),
                                      make_export("/ifs/b", {"*"}), make_export("/ifs/c", {"*"})};
  LiveExports live(one);
  const auto client = boost::asio::ip::make_address_v4("10.1.2.3");
  std::atomic<bool> done{false};
  std::atomic<int> wrong{0};
  std::atomic<std::uint64_t> reads{0};
  auto reader = [&] {
    while (!done.load()) {
      std::shared_ptr<const ExportTable> table = live.snapshot();
      std::vector<std::string> below;
      const Export* found = table->containing("/ifs/a/x", below);
      const std::size_t size = table->all().size();
      std::this_thread::yield();  // a co_await: the table may be replaced meanwhile
      bool ok = found && found->path() == "/ifs/a" && below == std::vector<std::string>{"x"} &&
                table->by_id(found->id()) == found && found->allows(client) &&
                (size == one.size() || size == two.size()) &&
                (found->root_inode() == 0 || found->root_inode() == 7);
      found->set_root_inode(7);
      if (!ok) wrong.fetch_add(1);
      reads.fetch_add(1);
    }
  };
  std::vector<std::thread> readers;
  for (int i = 0; i < 3; ++i) readers.emplace_back(reader);
  for (int i = 0; i < 2000 || reads.load() < 10000; ++i) live.replace(i % 2 == 0 ? two : one);
  done = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace tidepool::nfsd
