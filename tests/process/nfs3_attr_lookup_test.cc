// NFSv3 NULL, GETATTR, SETATTR, LOOKUP, ACCESS and READLINK against a real
// server (RFC 1813 sections 3.3.0-3.3.5).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/process/conformance_fixture.h"
#include "tests/process/raw_rpc.h"

namespace tidepool::test {
namespace {

using ::testing::AnyOf;

constexpr uint32_t kAllAccess = ACCESS3_READ | ACCESS3_LOOKUP |
                                ACCESS3_MODIFY | ACCESS3_EXTEND |
                                ACCESS3_DELETE;

const Credentials kUser{1000, 1000, {}};

// --- NULL ------------------------------------------------------------------

using Null = ConformanceTest;

TEST_F(Null, Answers) { EXPECT_TRUE(nfs().null()); }

TEST_F(Null, WithUnknownAuthFlavourIsDeniedWithAuthError) {
  RawRpcConnection c;
  ASSERT_TRUE(c.connect(endpoint().address, endpoint().nfs_port)) << c.error();
  RpcCall call{.xid = 7, .program = kNfsProgram, .version = 3, .procedure = 0};
  call.cred_flavor = 99;
  call.cred_body = {1, 2, 3, 4};
  auto reply = c.call(call);
  ASSERT_TRUE(reply) << c.error();
  EXPECT_EQ(reply->reply_stat, kMsgDenied);
  EXPECT_EQ(reply->reject_stat, RejectStat::kAuthError);
  EXPECT_THAT(reply->auth_stat,
              AnyOf(AuthStat::kBadCred, AuthStat::kRejectedCred,
                    AuthStat::kTooWeak));
}

// --- GETATTR ---------------------------------------------------------------

using Getattr = ConformanceTest;

TEST_F(Getattr, OfExportRootIsADirectory) {
  auto r = nfs().getattr(root());
  ASSERT_EQ(r.status, NFS3_OK);
  EXPECT_EQ(r.attr.type, NF3DIR);
  EXPECT_GE(r.attr.nlink, 1u);
  EXPECT_NE(r.attr.fileid, 0u);
}

TEST_F(Getattr, ReflectsACreatedFile) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f", 0640, "12345");
  auto r = nfs().getattr(f);
  ASSERT_EQ(r.status, NFS3_OK);
  EXPECT_EQ(r.attr.type, NF3REG);
  EXPECT_EQ(r.attr.mode & 07777, 0640u);
  EXPECT_EQ(r.attr.size, 5u);
  EXPECT_EQ(r.attr.nlink, 1u);
  EXPECT_EQ(r.attr.uid, 0u);
  EXPECT_EQ(r.attr.fsid, nfs().getattr(dir).attr.fsid);
  EXPECT_NE(r.attr.fileid, nfs().getattr(dir).attr.fileid);
}

TEST_F(Getattr, OfRemovedFileIsStale) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f");
  ASSERT_EQ(nfs().remove(dir, "f").status, NFS3_OK);
  EXPECT_EQ(nfs().getattr(f).status, NFS3ERR_STALE);
}

TEST_F(Getattr, OfHandleOfWrongSizeIsBadhandle) {
  FileHandle shorter(root().begin(), root().begin() + 7);
  EXPECT_EQ(nfs().getattr(shorter).status, NFS3ERR_BADHANDLE);
}

TEST_F(Getattr, OfEmptyHandleIsBadhandle) {
  EXPECT_EQ(nfs().getattr(FileHandle{}).status, NFS3ERR_BADHANDLE);
}

TEST_F(Getattr, OfForgedHandleIsBadhandle) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f");
  EXPECT_EQ(nfs().getattr(forge(f)).status, NFS3ERR_BADHANDLE);
  EXPECT_EQ(nfs().getattr(forge(root())).status, NFS3ERR_BADHANDLE);
}

// --- SETATTR ---------------------------------------------------------------

using Setattr = ConformanceTest;

TEST_F(Setattr, ChangesModeAndReturnsWcc) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f", 0644);
  auto r = nfs().setattr(f, Sattr::with_mode(0600));
  ASSERT_EQ(r.status, NFS3_OK);
  ASSERT_TRUE(r.wcc.after.has_value());
  EXPECT_EQ(r.wcc.after->mode & 07777, 0600u);
  EXPECT_EQ(nfs().getattr(f).attr.mode & 07777, 0600u);
}

TEST_F(Setattr, TruncatesAndExtendsTheFile) {
  FileHandle dir = make_test_dir();
  std::string data = random_bytes(100, 1);
  FileHandle f = nfs().make_file(dir, "f", 0644, data);
  Sattr shrink;
  shrink.size = 10;
  ASSERT_EQ(nfs().setattr(f, shrink).status, NFS3_OK);
  EXPECT_EQ(nfs().getattr(f).attr.size, 10u);
  Sattr grow;
  grow.size = 50;
  ASSERT_EQ(nfs().setattr(f, grow).status, NFS3_OK);
  std::string back = nfs().read_all(f);
  EXPECT_EQ(back, data.substr(0, 10) + std::string(40, '\0'));
}

TEST_F(Setattr, SetsTimesToClientTime) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f");
  Sattr s;
  s.atime_how = SET_TO_CLIENT_TIME;
  s.atime = {1000000000, 250};
  s.mtime_how = SET_TO_CLIENT_TIME;
  s.mtime = {1234567890, 500000000};
  ASSERT_EQ(nfs().setattr(f, s).status, NFS3_OK);
  auto a = nfs().getattr(f).attr;
  EXPECT_EQ(a.mtime.seconds, 1234567890u);
  EXPECT_EQ(a.mtime.nseconds, 500000000u);
  EXPECT_EQ(a.atime.seconds, 1000000000u);
}

TEST_F(Setattr, SetsMtimeToServerTime) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f");
  Sattr old;
  old.mtime_how = SET_TO_CLIENT_TIME;
  old.mtime = {1000, 0};
  ASSERT_EQ(nfs().setattr(f, old).status, NFS3_OK);
  Sattr now;
  now.mtime_how = SET_TO_SERVER_TIME;
  ASSERT_EQ(nfs().setattr(f, now).status, NFS3_OK);
  EXPECT_GT(nfs().getattr(f).attr.mtime.seconds, 1000000000u);
}

TEST_F(Setattr, RootChangesOwner) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f");
  Sattr s;
  s.uid = 1234;
  s.gid = 5678;
  ASSERT_EQ(nfs().setattr(f, s).status, NFS3_OK);
  auto a = nfs().getattr(f).attr;
  EXPECT_EQ(a.uid, 1234u);
  EXPECT_EQ(a.gid, 5678u);
}

TEST_F(Setattr, WithMatchingGuardSucceeds) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f", 0644);
  auto before = nfs().getattr(f).attr;
  EXPECT_EQ(nfs().setattr(f, Sattr::with_mode(0600), before.ctime).status,
            NFS3_OK);
}

TEST_F(Setattr, WithStaleGuardIsNotSyncAndChangesNothing) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f", 0644);
  auto r = nfs().setattr(f, Sattr::with_mode(0600), nfstime3{1, 2});
  EXPECT_EQ(r.status, NFS3ERR_NOT_SYNC);
  EXPECT_EQ(nfs().getattr(f).attr.mode & 07777, 0644u);
}

TEST_F(Setattr, ModeByNonOwnerIsPerm) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f", 0666);
  auto user = connect_as(kUser);
  EXPECT_EQ(user->setattr(f, Sattr::with_mode(0777)).status, NFS3ERR_PERM);
  EXPECT_EQ(nfs().getattr(f).attr.mode & 07777, 0666u);
}

TEST_F(Setattr, ChownByNonRootIsPerm) {
  FileHandle dir = make_test_dir(0777);
  auto user = connect_as(kUser);
  FileHandle f = user->make_file(dir, "mine", 0644);
  Sattr s;
  s.uid = 2000;
  EXPECT_EQ(user->setattr(f, s).status, NFS3ERR_PERM);
  EXPECT_EQ(nfs().getattr(f).attr.uid, 1000u);
}

TEST_F(Setattr, OwnerMayChangeModeOfOwnFile) {
  FileHandle dir = make_test_dir(0777);
  auto user = connect_as(kUser);
  FileHandle f = user->make_file(dir, "mine", 0644);
  EXPECT_EQ(user->setattr(f, Sattr::with_mode(0600)).status, NFS3_OK);
  EXPECT_EQ(nfs().getattr(f).attr.mode & 07777, 0600u) << "read back through another client";
}

TEST_F(Setattr, SizeOfADirectoryIsRefused) {
  FileHandle dir = make_test_dir();
  Sattr s;
  s.size = 0;
  EXPECT_THAT(nfs().setattr(dir, s).status,
              AnyOf(NFS3ERR_ISDIR, NFS3ERR_INVAL));
}

TEST_F(Setattr, SizeBeyondMaxFileSizeIsFbig) {
  auto info = nfs().fsinfo(root());
  ASSERT_EQ(info.status, NFS3_OK);
  if (info.maxfilesize >= (uint64_t{1} << 62)) {
    GTEST_SKIP() << "maxfilesize " << info.maxfilesize << " is unbounded";
  }
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f");
  Sattr s;
  s.size = info.maxfilesize + 1;
  EXPECT_EQ(nfs().setattr(f, s).status, NFS3ERR_FBIG);
}

TEST_F(Setattr, OfRemovedFileIsStale) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f");
  ASSERT_EQ(nfs().remove(dir, "f").status, NFS3_OK);
  EXPECT_EQ(nfs().setattr(f, Sattr::with_mode(0600)).status, NFS3ERR_STALE);
}

TEST_F(Setattr, OfForgedHandleIsBadhandle) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f");
  EXPECT_EQ(nfs().setattr(forge(f), Sattr::with_mode(0600)).status,
            NFS3ERR_BADHANDLE);
}

// --- LOOKUP ----------------------------------------------------------------

using Lookup = ConformanceTest;

TEST_F(Lookup, FindsACreatedFile) {
  FileHandle dir = make_test_dir();
  auto c = nfs().create(dir, "f", GUARDED, Sattr::with_mode(0644));
  ASSERT_EQ(c.status, NFS3_OK);
  auto r = nfs().lookup(dir, "f");
  ASSERT_EQ(r.status, NFS3_OK);
  ASSERT_TRUE(r.attr.has_value());
  EXPECT_EQ(r.attr->type, NF3REG);
  EXPECT_EQ(r.attr->fileid, nfs().getattr(c.fh.empty() ? r.fh : c.fh)
                                .attr.fileid);
  EXPECT_EQ(nfs().getattr(r.fh).status, NFS3_OK);
}

TEST_F(Lookup, OfMissingNameIsNoent) {
  FileHandle dir = make_test_dir();
  EXPECT_EQ(nfs().lookup(dir, "missing").status, NFS3ERR_NOENT);
}

TEST_F(Lookup, InAFileIsNotdir) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f");
  EXPECT_EQ(nfs().lookup(f, "x").status, NFS3ERR_NOTDIR);
}

TEST_F(Lookup, OfNameLongerThan255BytesIsNametoolong) {
  FileHandle dir = make_test_dir();
  EXPECT_EQ(nfs().lookup(dir, long_name(256)).status, NFS3ERR_NAMETOOLONG);
}

TEST_F(Lookup, OfNameOf255BytesWorks) {
  FileHandle dir = make_test_dir();
  nfs().make_file(dir, long_name(255));
  EXPECT_EQ(nfs().lookup(dir, long_name(255)).status, NFS3_OK);
}

TEST_F(Lookup, DotIsTheDirectoryAndDotDotItsParent) {
  FileHandle dir = make_test_dir();
  FileHandle sub = nfs().make_dir(dir, "sub");
  auto dot = nfs().lookup(sub, ".");
  ASSERT_EQ(dot.status, NFS3_OK);
  EXPECT_EQ(nfs().getattr(dot.fh).attr.fileid,
            nfs().getattr(sub).attr.fileid);
  auto dotdot = nfs().lookup(sub, "..");
  ASSERT_EQ(dotdot.status, NFS3_OK);
  EXPECT_EQ(nfs().getattr(dotdot.fh).attr.fileid,
            nfs().getattr(dir).attr.fileid);
}

TEST_F(Lookup, DotDotAtAnExportRootDoesNotLeaveTheExport) {
  const FileHandle& ro_root = server().ro_root;
  auto r = nfs().lookup(ro_root, "..");
  if (r.status != NFS3_OK) {
    EXPECT_THAT(r.status, AnyOf(NFS3ERR_NOENT, NFS3ERR_ACCES));
    return;
  }
  // The handle may only name the export root itself.
  EXPECT_EQ(nfs().getattr(r.fh).attr.fileid,
            nfs().getattr(ro_root).attr.fileid);
}

TEST_F(Lookup, WithoutSearchPermissionIsAcces) {
  FileHandle dir = make_test_dir();
  FileHandle closed = nfs().make_dir(dir, "closed", 0700);
  nfs().make_file(closed, "f");
  auto user = connect_as(kUser);
  EXPECT_EQ(user->lookup(closed, "f").status, NFS3ERR_ACCES);
}

TEST_F(Lookup, InRemovedDirectoryIsStale) {
  FileHandle dir = make_test_dir();
  FileHandle sub = nfs().make_dir(dir, "sub");
  ASSERT_EQ(nfs().rmdir(dir, "sub").status, NFS3_OK);
  EXPECT_EQ(nfs().lookup(sub, "x").status, NFS3ERR_STALE);
}

TEST_F(Lookup, WithForgedHandleIsBadhandle) {
  EXPECT_EQ(nfs().lookup(forge(root()), "ro").status, NFS3ERR_BADHANDLE);
}

// --- ACCESS ----------------------------------------------------------------

using Access = ConformanceTest;

TEST_F(Access, OwnerOfADirectoryGetsEverythingAsked) {
  FileHandle dir = make_test_dir();
  auto r = nfs().access(dir, kAllAccess);
  ASSERT_EQ(r.status, NFS3_OK);
  EXPECT_EQ(r.access, kAllAccess);
}

TEST_F(Access, OtherUserMayOnlyReadAFileOfMode0644) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f", 0644);
  auto user = connect_as(kUser);
  auto r = user->access(f, ACCESS3_READ | ACCESS3_MODIFY | ACCESS3_EXTEND |
                               ACCESS3_EXECUTE);
  ASSERT_EQ(r.status, NFS3_OK);
  EXPECT_EQ(r.access, uint32_t{ACCESS3_READ});
}

TEST_F(Access, SupplementaryGroupGrantsGroupBits) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f", 0664);
  Sattr group;
  group.gid = 500;
  ASSERT_EQ(nfs().setattr(f, group).status, NFS3_OK);
  auto member = connect_as({1000, 100, {7, 500}});
  auto r = member->access(f, ACCESS3_READ | ACCESS3_MODIFY);
  ASSERT_EQ(r.status, NFS3_OK);
  EXPECT_EQ(r.access, uint32_t{ACCESS3_READ | ACCESS3_MODIFY});
  auto stranger = connect_as({1000, 100, {7}});
  r = stranger->access(f, ACCESS3_READ | ACCESS3_MODIFY);
  ASSERT_EQ(r.status, NFS3_OK);
  EXPECT_EQ(r.access, uint32_t{ACCESS3_READ});
}

TEST_F(Access, OfRemovedFileIsStale) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f");
  ASSERT_EQ(nfs().remove(dir, "f").status, NFS3_OK);
  EXPECT_EQ(nfs().access(f, ACCESS3_READ).status, NFS3ERR_STALE);
}

TEST_F(Access, WithHandleOfWrongSizeIsBadhandle) {
  FileHandle longer = root();
  longer.push_back('x');
  EXPECT_EQ(nfs().access(longer, ACCESS3_READ).status, NFS3ERR_BADHANDLE);
}

// --- READLINK --------------------------------------------------------------

using Readlink = ConformanceTest;

TEST_F(Readlink, ReturnsTheTargetVerbatim) {
  FileHandle dir = make_test_dir();
  auto s = nfs().symlink(dir, "l", "some/where/../else");
  ASSERT_EQ(s.status, NFS3_OK);
  FileHandle l = s.fh.empty() ? nfs().lookup(dir, "l").fh : s.fh;
  auto r = nfs().readlink(l);
  ASSERT_EQ(r.status, NFS3_OK);
  EXPECT_EQ(r.target, "some/where/../else");
}

TEST_F(Readlink, OfARegularFileIsInval) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f");
  EXPECT_EQ(nfs().readlink(f).status, NFS3ERR_INVAL);
}

TEST_F(Readlink, OfRemovedLinkIsStale) {
  FileHandle dir = make_test_dir();
  auto s = nfs().symlink(dir, "l", "target");
  ASSERT_EQ(s.status, NFS3_OK);
  FileHandle l = s.fh.empty() ? nfs().lookup(dir, "l").fh : s.fh;
  ASSERT_EQ(nfs().remove(dir, "l").status, NFS3_OK);
  EXPECT_EQ(nfs().readlink(l).status, NFS3ERR_STALE);
}

TEST_F(Readlink, WithForgedHandleIsBadhandle) {
  FileHandle dir = make_test_dir();
  auto s = nfs().symlink(dir, "l", "target");
  ASSERT_EQ(s.status, NFS3_OK);
  FileHandle l = s.fh.empty() ? nfs().lookup(dir, "l").fh : s.fh;
  EXPECT_EQ(nfs().readlink(forge(l)).status, NFS3ERR_BADHANDLE);
}

}  // namespace
}  // namespace tidepool::test
