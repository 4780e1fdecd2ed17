// MOUNT v3 (RFC 1813 appendix I) and the node's own PMAP v2 portmapper
// (RFC 1833) against a real server.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>

#include "tests/process/conformance_fixture.h"
#include "tests/process/raw_rpc.h"

namespace tidepool::test {
namespace {

using ::testing::AnyOf;

constexpr uint32_t kTcp = 6;
constexpr uint32_t kUdp = 17;

bool lists_directory(const std::vector<MountEntry>& entries,
                     const std::string& dir) {
  return std::any_of(entries.begin(), entries.end(),
                     [&](const MountEntry& e) { return e.directory == dir; });
}

// A call with an AUTH flavour nobody implements; returns the reply.
std::optional<RpcReply> call_with_bogus_auth(const Endpoint& ep, uint16_t port,
                                             uint32_t program,
                                             uint32_t version,
                                             uint32_t procedure) {
  RawRpcConnection c;
  EXPECT_TRUE(c.connect(ep.address, port)) << c.error();
  RpcCall call{.xid = 0x4242, .program = program, .version = version,
               .procedure = procedure};
  call.cred_flavor = 77;
  call.cred_body = {0, 0, 0, 1};
  auto reply = c.call(call);
  EXPECT_TRUE(reply) << c.error();
  return reply;
}

void expect_auth_error(const std::optional<RpcReply>& reply) {
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->reply_stat, kMsgDenied);
  EXPECT_EQ(reply->reject_stat, RejectStat::kAuthError);
  EXPECT_THAT(reply->auth_stat,
              AnyOf(AuthStat::kBadCred, AuthStat::kRejectedCred,
                    AuthStat::kTooWeak));
}

// MOUNT MNT and DUMP by hand, from a chosen source address.
RpcCall mount_call(uint32_t procedure, Bytes args = {}) {
  return RpcCall{.xid = 0x6d6e74 + procedure, .program = kMountProgram, .version = 3,
                 .procedure = procedure, .cred_flavor = kAuthSys,
                 .cred_body = auth_sys_body(0, 0), .args = std::move(args)};
}

uint32_t mnt_from(const Endpoint& ep, const std::string& source, const std::string& path) {
  RawRpcConnection c;
  EXPECT_TRUE(c.connect(ep.address, ep.mount_port, std::chrono::seconds(10), source))
      << c.error();
  auto reply = c.call(mount_call(1, XdrWriter().string(path).bytes()));
  uint32_t status = ~0u;
  if (!reply || reply->accept_stat != AcceptStat::kSuccess) return status;
  XdrReader r(reply->results);
  r.u32(status);
  return status;
}

// The directories a DUMP reply lists (gtest failure if it does not decode).
std::vector<std::string> dumped_directories(const std::optional<RpcReply>& reply) {
  std::vector<std::string> directories;
  EXPECT_TRUE(reply);
  if (!reply) return directories;
  EXPECT_EQ(reply->accept_stat, AcceptStat::kSuccess);
  XdrReader r(reply->results);
  uint32_t more = 0;
  for (int n = 0; n < 10000 && r.u32(more) && more == 1; ++n) {
    Bytes host, directory;
    if (!r.opaque(host, 255) || !r.opaque(directory, 1024)) break;
    directories.emplace_back(directory.begin(), directory.end());
  }
  EXPECT_EQ(more, 0u) << "the list does not end";
  EXPECT_EQ(r.remaining(), 0u);
  return directories;
}

std::vector<std::string> dump_from(const Endpoint& ep, const std::string& source) {
  RawRpcConnection c;
  EXPECT_TRUE(c.connect(ep.address, ep.mount_port, std::chrono::seconds(10), source))
      << c.error();
  return dumped_directories(c.call(mount_call(2)));
}

// --- MOUNT -----------------------------------------------------------------

using Mount = ConformanceTest;

TEST_F(Mount, NullAnswers) {
  MountClient m(endpoint());
  ASSERT_TRUE(m.connected()) << m.error();
  EXPECT_TRUE(m.null());
}

TEST_F(Mount, NullWithUnknownAuthFlavourIsDenied) {
  expect_auth_error(call_with_bogus_auth(endpoint(), endpoint().mount_port,
                                         kMountProgram, 3, 0));
}

TEST_F(Mount, MntOfTheExportReturnsItsRootHandleAndAuthSys) {
  MountClient m(endpoint());
  ASSERT_TRUE(m.connected()) << m.error();
  auto r = m.mnt(server().export_path);
  ASSERT_EQ(r.status, MNT3_OK);
  EXPECT_FALSE(r.fh.empty());
  EXPECT_LE(r.fh.size(), 64u);
  EXPECT_THAT(r.auth_flavors, ::testing::Contains(1 /* AUTH_SYS */));
  auto a = nfs().getattr(r.fh);
  ASSERT_EQ(a.status, NFS3_OK);
  EXPECT_EQ(a.attr.type, NF3DIR);
  EXPECT_EQ(a.attr.fileid, nfs().getattr(root()).attr.fileid);
}

TEST_F(Mount, MntOfTheReadOnlyExportWorks) {
  MountClient m(endpoint());
  auto r = m.mnt(server().ro_export_path);
  ASSERT_EQ(r.status, MNT3_OK);
  EXPECT_EQ(nfs().getattr(r.fh).status, NFS3_OK);
}

TEST_F(Mount, MntOfAnUnexportedPathIsRefused) {
  MountClient m(endpoint());
  EXPECT_THAT(m.mnt("/no/such/export").status,
              AnyOf(MNT3ERR_NOENT, MNT3ERR_ACCES));
  EXPECT_THAT(m.mnt(server().export_path + "/" + unique_name()).status,
              AnyOf(MNT3ERR_NOENT, MNT3ERR_ACCES));
}

TEST_F(Mount, MntOfAnExportForOtherClientsIsAcces) {
  MountClient m(endpoint());
  EXPECT_EQ(m.mnt(server().denied_export_path).status, MNT3ERR_ACCES);
}

TEST_F(Mount, MntOfAPathThatClimbsOutOfItsExportIsRefused) {
  MountClient m(endpoint());
  EXPECT_EQ(m.mnt(server().ro_export_path + "/..").status, MNT3ERR_ACCES);
  EXPECT_EQ(m.mnt(server().ro_export_path + "/../ro").status, MNT3ERR_ACCES);
}

TEST_F(Mount, MntOfAPathLongerThanMntpathlenIsRefused) {
  // dirpath is string<1024>: a longer one is either not decodable
  // (GARBAGE_ARGS) or refused with NAMETOOLONG.
  RawRpcConnection c;
  ASSERT_TRUE(c.connect(endpoint().address, endpoint().mount_port));
  XdrWriter args;
  args.string(server().export_path + "/" + std::string(1100, 'p'));
  RpcCall call{.xid = 9, .program = kMountProgram, .version = 3,
               .procedure = 1, .cred_flavor = kAuthSys,
               .cred_body = auth_sys_body(0, 0), .args = args.bytes()};
  auto reply = c.call(call);
  ASSERT_TRUE(reply) << c.error();
  ASSERT_EQ(reply->reply_stat, kMsgAccepted);
  if (reply->accept_stat == AcceptStat::kSuccess) {
    XdrReader r(reply->results);
    uint32_t status = 0;
    ASSERT_TRUE(r.u32(status));
    EXPECT_EQ(status, uint32_t{MNT3ERR_NAMETOOLONG});
  } else {
    EXPECT_EQ(reply->accept_stat, AcceptStat::kGarbageArgs);
  }
}

TEST_F(Mount, MntOfAnExportWhoseDirectoryDoesNotExistYetIsNoent) {
  if (!is_tided()) GTEST_SKIP() << "needs tided's /ifs/notyet export";
  MountClient m(endpoint());
  EXPECT_EQ(m.mnt(server().export_path + "/notyet").status, MNT3ERR_NOENT);
  nfs().make_dir(root(), "notyet");
  EXPECT_EQ(m.mnt(server().export_path + "/notyet").status, MNT3_OK);
}

TEST_F(Mount, DumpListsAMountedExport) {
  MountClient m(endpoint());
  ASSERT_EQ(m.mnt(server().export_path).status, MNT3_OK);
  auto list = m.dump();
  ASSERT_TRUE(list);
  EXPECT_TRUE(lists_directory(*list, server().export_path));
}

// A DUMP over UDP would send the list of clients to whatever address the datagram claims.
TEST_F(Mount, DumpOverUdpListsNothing) {
  if (!is_tided()) GTEST_SKIP() << "what DUMP answers over UDP is the server's choice";
  ASSERT_EQ(mnt_from(endpoint(), "127.0.0.1", server().export_path), MNT3_OK);
  ASSERT_THAT(dump_from(endpoint(), "127.0.0.1"), ::testing::Contains(server().export_path));
  EXPECT_THAT(dumped_directories(datagram_call(mount_call(2), "127.0.0.1", endpoint().address,
                                               endpoint().mount_port)),
              ::testing::IsEmpty());
}

// Its own node: the fixture's exports allow every loopback address alike.
TEST(MountDump, AHostSeesOnlyTheMountsOfExportsItMayMount) {
  NodeOptions options;
  ExportSpec everyone{.path = "/ifs"};
  everyone.root_squash = false;
  ExportSpec narrow{.path = "/ifs/narrow"};
  narrow.clients = {"127.0.0.77/32"};
  options.exports = {everyone, narrow};
  TidedNode node(options);
  std::string error;
  ASSERT_TRUE(node.start(&error)) << error;
  {
    NfsClient nfs(node.endpoint());
    nfs.make_dir(mount_root(node.endpoint(), "/ifs"), "narrow");
  }
  ASSERT_EQ(mnt_from(node.endpoint(), "127.0.0.77", "/ifs/narrow"), MNT3_OK);
  ASSERT_EQ(mnt_from(node.endpoint(), "127.0.0.78", "/ifs"), MNT3_OK);
  EXPECT_THAT(dump_from(node.endpoint(), "127.0.0.77"), ::testing::Contains("/ifs/narrow"));
  const std::vector<std::string> seen_by_another = dump_from(node.endpoint(), "127.0.0.78");
  EXPECT_THAT(seen_by_another, ::testing::Contains("/ifs"));
  EXPECT_THAT(seen_by_another, ::testing::Not(::testing::Contains("/ifs/narrow")));
  node.stop();
  EXPECT_EQ(node.exit_description(), "exit 0");
}

// knfsd's default: an export takes calls only from ports that only root may bind.
TEST(SecureExport, RefusesMountAndNfsCallsFromUnprivilegedPorts) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: the allowed calls come from a privileged port";
  NodeOptions options;
  ExportSpec secure{.path = "/ifs"};
  secure.secure = true;
  secure.root_squash = false;
  options.exports = {secure};
  TidedNode node(options);
  std::string error;
  ASSERT_TRUE(node.start(&error)) << error;
  // libnfs run as root binds a privileged port.
  const FileHandle root = mount_root(node.endpoint(), "/ifs");
  ASSERT_FALSE(root.empty());
  NfsClient privileged(node.endpoint());
  const FileHandle file = privileged.make_file(root, "f", 0644, "kept");

  EXPECT_EQ(mnt_from(node.endpoint(), "127.0.0.1", "/ifs"), MNT3ERR_ACCES);
  RawRpcConnection unprivileged;
  ASSERT_TRUE(unprivileged.connect(node.endpoint().address, node.endpoint().nfs_port));
  XdrWriter write;
  write.opaque(file.data(), file.size()).u64(0).u32(7).u32(2).string("changed");
  auto reply = unprivileged.call(RpcCall{.xid = 1, .procedure = 7, .cred_flavor = kAuthSys,
                                         .cred_body = auth_sys_body(0, 0), .args = write.bytes()});
  ASSERT_TRUE(reply) << unprivileged.error();
  ASSERT_EQ(reply->accept_stat, AcceptStat::kSuccess);
  XdrReader results(reply->results);
  uint32_t status = 0;
  ASSERT_TRUE(results.u32(status));
  EXPECT_EQ(status, uint32_t{NFS3ERR_PERM});
  EXPECT_EQ(privileged.read_all(file), "kept");
  node.stop();
  EXPECT_EQ(node.exit_description(), "exit 0");
}

TEST_F(Mount, DumpWithUnknownAuthFlavourIsDenied) {
  expect_auth_error(call_with_bogus_auth(endpoint(), endpoint().mount_port,
                                         kMountProgram, 3, 2));
}

TEST_F(Mount, UmntRemovesTheEntryFromDump) {
  MountClient m(endpoint());
  ASSERT_EQ(m.mnt(server().ro_export_path).status, MNT3_OK);
  EXPECT_TRUE(m.umnt(server().ro_export_path));
  auto list = m.dump();
  ASSERT_TRUE(list);
  EXPECT_FALSE(lists_directory(*list, server().ro_export_path));
  // Unmounting is advisory: handles keep working.
  EXPECT_EQ(nfs().getattr(server().ro_root).status, NFS3_OK);
}

TEST_F(Mount, UmntOfAPathNeverMountedIsHarmless) {
  MountClient m(endpoint());
  EXPECT_TRUE(m.umnt("/never/mounted"));
  EXPECT_TRUE(m.null());
}

TEST_F(Mount, UmntWithAPathLongerThanMntpathlenIsGarbageArgs) {
  RawRpcConnection c;
  ASSERT_TRUE(c.connect(endpoint().address, endpoint().mount_port));
  XdrWriter args;
  args.string(std::string(1500, 'u'));
  RpcCall call{.xid = 10, .program = kMountProgram, .version = 3,
               .procedure = 3, .cred_flavor = kAuthSys,
               .cred_body = auth_sys_body(0, 0), .args = args.bytes()};
  auto reply = c.call(call);
  ASSERT_TRUE(reply) << c.error();
  ASSERT_EQ(reply->reply_stat, kMsgAccepted);
  EXPECT_EQ(reply->accept_stat, AcceptStat::kGarbageArgs);
  MountClient m(endpoint());
  EXPECT_TRUE(m.null());
}

TEST_F(Mount, UmntallRemovesThisHostsEntries) {
  MountClient m(endpoint());
  ASSERT_EQ(m.mnt(server().export_path).status, MNT3_OK);
  ASSERT_EQ(m.mnt(server().ro_export_path).status, MNT3_OK);
  EXPECT_TRUE(m.umntall());
  auto list = m.dump();
  ASSERT_TRUE(list);
  EXPECT_FALSE(lists_directory(*list, server().export_path));
  EXPECT_FALSE(lists_directory(*list, server().ro_export_path));
  EXPECT_EQ(nfs().getattr(root()).status, NFS3_OK);
}

TEST_F(Mount, UmntallWithUnknownAuthFlavourIsDenied) {
  expect_auth_error(call_with_bogus_auth(endpoint(), endpoint().mount_port,
                                         kMountProgram, 3, 4));
}

TEST_F(Mount, ExportListsEveryExport) {
  MountClient m(endpoint());
  auto list = m.exports();
  ASSERT_TRUE(list);
  std::vector<std::string> dirs;
  for (const auto& e : *list) dirs.push_back(e.directory);
  EXPECT_THAT(dirs, ::testing::Contains(server().export_path));
  EXPECT_THAT(dirs, ::testing::Contains(server().ro_export_path));
  if (is_tided()) {
    for (const auto& e : *list) {
      if (e.directory == "/ifs") {
        EXPECT_THAT(e.groups, ::testing::ElementsAre("127.0.0.0/8"));
      }
    }
  }
}

TEST_F(Mount, ExportWithUnknownAuthFlavourIsDenied) {
  expect_auth_error(call_with_bogus_auth(endpoint(), endpoint().mount_port,
                                         kMountProgram, 3, 5));
}

TEST_F(Mount, Version4IsProgMismatch) {
  RawRpcConnection c;
  ASSERT_TRUE(c.connect(endpoint().address, endpoint().mount_port));
  auto reply = c.call({.xid = 11, .program = kMountProgram, .version = 4});
  ASSERT_TRUE(reply) << c.error();
  ASSERT_EQ(reply->reply_stat, kMsgAccepted);
  ASSERT_EQ(reply->accept_stat, AcceptStat::kProgMismatch);
  EXPECT_LE(reply->mismatch_low, 3u);
  EXPECT_EQ(reply->mismatch_high, 3u);
}

TEST_F(Mount, UnknownProcedureIsProcUnavail) {
  RawRpcConnection c;
  ASSERT_TRUE(c.connect(endpoint().address, endpoint().mount_port));
  auto reply = c.call({.xid = 12, .program = kMountProgram, .version = 3,
                       .procedure = 6});
  ASSERT_TRUE(reply) << c.error();
  ASSERT_EQ(reply->reply_stat, kMsgAccepted);
  EXPECT_EQ(reply->accept_stat, AcceptStat::kProcUnavail);
}

TEST_F(Mount, PlainLibnfsUrlMountsTheExport) {
  // nfs://ADDR/EXPORT with libnfs's defaults: ports from the node's own
  // portmapper, nested exports traversed (DESIGN.md: libnfs URLs work
  // without extra options).
  nfs_context* ctx = nfs_init_context();
  ASSERT_NE(ctx, nullptr);
  nfs_set_timeout(ctx, 10000);
  std::string url = "nfs://" + endpoint().address + server().export_path;
  if (endpoint().portmap_port != 111) {
    url += "?nfsport=" + std::to_string(endpoint().nfs_port) +
           "&mountport=" + std::to_string(endpoint().mount_port);
  }
  nfs_url* parsed = nfs_parse_url_dir(ctx, url.c_str());
  ASSERT_NE(parsed, nullptr) << nfs_get_error(ctx);
  int rc = nfs_mount(ctx, parsed->server, parsed->path);
  EXPECT_EQ(rc, 0) << url << ": " << nfs_get_error(ctx);
  if (rc == 0) {
    struct nfs_stat_64 st {};
    EXPECT_EQ(nfs_stat64(ctx, "/ro", &st), 0) << nfs_get_error(ctx);
  }
  nfs_destroy_url(parsed);
  nfs_destroy_context(ctx);
}

// --- PMAP v2 ---------------------------------------------------------------

using Portmap = ConformanceTest;

TEST_F(Portmap, NullAnswers) {
  PortmapClient p(endpoint());
  ASSERT_TRUE(p.connected()) << p.error();
  EXPECT_TRUE(p.null());
}

TEST_F(Portmap, GetportOfNfsV3OverTcpIsTheNfsPort) {
  PortmapClient p(endpoint());
  EXPECT_EQ(p.getport(kNfsProgram, 3, kTcp), endpoint().nfs_port);
}

TEST_F(Portmap, GetportOfMountV3OverTcpIsTheMountPort) {
  PortmapClient p(endpoint());
  EXPECT_EQ(p.getport(kMountProgram, 3, kTcp), endpoint().mount_port);
}

TEST_F(Portmap, GetportOfThePortmapperIsItsOwnPort) {
  PortmapClient p(endpoint());
  EXPECT_EQ(p.getport(kPmapProgram, 2, kTcp), endpoint().portmap_port);
}

TEST_F(Portmap, GetportOfAnUnregisteredProgramIsZero) {
  PortmapClient p(endpoint());
  EXPECT_EQ(p.getport(0x20000077, 1, kTcp), 0u);
}

TEST_F(Portmap, GetportOfAnUnregisteredVersionOrProtocolIsZero) {
  PortmapClient p(endpoint());
  EXPECT_EQ(p.getport(kNfsProgram, 2, kTcp), 0u);
  if (is_tided()) {
    EXPECT_EQ(p.getport(kNfsProgram, 3, kUdp), 0u);
  }
}

TEST_F(Portmap, DumpListsNfsMountAndItself) {
  PortmapClient p(endpoint());
  auto list = p.dump();
  ASSERT_TRUE(list);
  auto has = [&](uint32_t prog, uint32_t vers, uint32_t port) {
    return std::any_of(list->begin(), list->end(), [&](const PmapMapping& m) {
      return m.program == prog && m.version == vers && m.protocol == kTcp &&
             m.port == port;
    });
  };
  EXPECT_TRUE(has(kNfsProgram, 3, endpoint().nfs_port));
  EXPECT_TRUE(has(kMountProgram, 3, endpoint().mount_port));
  EXPECT_TRUE(has(kPmapProgram, 2, endpoint().portmap_port));
}

TEST_F(Portmap, Version5IsProgMismatch) {
  RawRpcConnection c;
  ASSERT_TRUE(c.connect(endpoint().address, endpoint().portmap_port));
  auto reply = c.call({.xid = 13, .program = kPmapProgram, .version = 5});
  ASSERT_TRUE(reply) << c.error();
  ASSERT_EQ(reply->reply_stat, kMsgAccepted);
  ASSERT_EQ(reply->accept_stat, AcceptStat::kProgMismatch);
  EXPECT_LE(reply->mismatch_low, 2u);
  EXPECT_GE(reply->mismatch_high, 2u);
  EXPECT_LT(reply->mismatch_high, 5u);
}

TEST_F(Portmap, UnknownProcedureIsProcUnavail) {
  RawRpcConnection c;
  ASSERT_TRUE(c.connect(endpoint().address, endpoint().portmap_port));
  auto reply = c.call({.xid = 14, .program = kPmapProgram, .version = 2,
                       .procedure = 99});
  ASSERT_TRUE(reply) << c.error();
  ASSERT_EQ(reply->reply_stat, kMsgAccepted);
  EXPECT_EQ(reply->accept_stat, AcceptStat::kProcUnavail);
}

TEST_F(Portmap, GetportWithTruncatedArgsIsGarbageArgs) {
  RawRpcConnection c;
  ASSERT_TRUE(c.connect(endpoint().address, endpoint().portmap_port));
  XdrWriter args;
  args.u32(kNfsProgram).u32(3);  // prot and port missing
  auto reply = c.call({.xid = 15, .program = kPmapProgram, .version = 2,
                       .procedure = 3, .args = args.bytes()});
  ASSERT_TRUE(reply) << c.error();
  ASSERT_EQ(reply->reply_stat, kMsgAccepted);
  EXPECT_EQ(reply->accept_stat, AcceptStat::kGarbageArgs);
}

}  // namespace
}  // namespace tidepool::test
