// NFSv3 CREATE, MKDIR, SYMLINK, MKNOD, REMOVE, RMDIR, RENAME and LINK against
// a real server (RFC 1813 sections 3.3.8-3.3.15).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/process/conformance_fixture.h"

namespace tidepool::test {
namespace {

using ::testing::AnyOf;

const Credentials kUser{1000, 1000, {}};

uint64_t fileid_of(NfsClient& c, const FileHandle& fh) {
  auto r = c.getattr(fh);
  EXPECT_EQ(r.status, NFS3_OK);
  return r.attr.fileid;
}

// --- CREATE ----------------------------------------------------------------

using Create = ConformanceTest;

TEST_F(Create, UncheckedMakesAnEmptyFileWithTheMode) {
  FileHandle dir = make_test_dir();
  auto r = nfs().create(dir, "f", UNCHECKED, Sattr::with_mode(0640));
  ASSERT_EQ(r.status, NFS3_OK);
  ASSERT_FALSE(r.fh.empty());
  ASSERT_TRUE(r.attr.has_value());
  EXPECT_EQ(r.attr->type, NF3REG);
  EXPECT_EQ(r.attr->mode & 07777, 0640u);
  EXPECT_EQ(r.attr->size, 0u);
  ASSERT_TRUE(r.dir_wcc.after.has_value());
  EXPECT_EQ(r.dir_wcc.after->type, NF3DIR);
}

TEST_F(Create, UncheckedOverAnExistingFileSucceedsAndAppliesSize) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f", 0644, "contents");
  Sattr truncate;
  truncate.size = 0;
  auto r = nfs().create(dir, "f", UNCHECKED, truncate);
  ASSERT_EQ(r.status, NFS3_OK);
  EXPECT_EQ(nfs().getattr(f).attr.size, 0u);
}

TEST_F(Create, GuardedOverAnExistingNameIsExist) {
  FileHandle dir = make_test_dir();
  nfs().make_file(dir, "f", 0644, "keep");
  EXPECT_EQ(nfs().create(dir, "f", GUARDED).status, NFS3ERR_EXIST);
  nfs().make_dir(dir, "d");
  EXPECT_EQ(nfs().create(dir, "d", GUARDED).status, NFS3ERR_EXIST);
  EXPECT_EQ(nfs().read_all(nfs().lookup(dir, "f").fh), "keep");
}

TEST_F(Create, ExclusiveWithTheSameVerifierIsIdempotent) {
  FileHandle dir = make_test_dir();
  auto first = nfs().create(dir, "f", EXCLUSIVE, {}, 0x1122334455667788);
  ASSERT_EQ(first.status, NFS3_OK);
  auto again = nfs().create(dir, "f", EXCLUSIVE, {}, 0x1122334455667788);
  ASSERT_EQ(again.status, NFS3_OK);
  FileHandle a = first.fh.empty() ? nfs().lookup(dir, "f").fh : first.fh;
  FileHandle b = again.fh.empty() ? nfs().lookup(dir, "f").fh : again.fh;
  EXPECT_EQ(fileid_of(nfs(), a), fileid_of(nfs(), b));
}

TEST_F(Create, ExclusiveWithAnotherVerifierIsExist) {
  FileHandle dir = make_test_dir();
  ASSERT_EQ(nfs().create(dir, "f", EXCLUSIVE, {}, 1).status, NFS3_OK);
  EXPECT_EQ(nfs().create(dir, "f", EXCLUSIVE, {}, 2).status, NFS3ERR_EXIST);
}

TEST_F(Create, ExclusiveOverAnOrdinaryFileIsExist) {
  FileHandle dir = make_test_dir();
  nfs().make_file(dir, "f");
  EXPECT_EQ(nfs().create(dir, "f", EXCLUSIVE, {}, 1).status, NFS3ERR_EXIST);
}

TEST_F(Create, ExclusiveFileTakesAttributesFromALaterSetattr) {
  FileHandle dir = make_test_dir();
  auto r = nfs().create(dir, "f", EXCLUSIVE, {}, 42);
  ASSERT_EQ(r.status, NFS3_OK);
  FileHandle f = r.fh.empty() ? nfs().lookup(dir, "f").fh : r.fh;
  Sattr s = Sattr::with_mode(0640);
  s.atime_how = SET_TO_SERVER_TIME;
  s.mtime_how = SET_TO_SERVER_TIME;
  ASSERT_EQ(nfs().setattr(f, s).status, NFS3_OK);
  EXPECT_EQ(nfs().getattr(f).attr.mode & 07777, 0640u);
}

TEST_F(Create, ByAnotherUserIsOwnedByThatUser) {
  FileHandle dir = make_test_dir(0777);
  auto user = connect_as({1000, 1001, {}});
  auto r = user->create(dir, "f", GUARDED, Sattr::with_mode(0600));
  ASSERT_EQ(r.status, NFS3_OK);
  FileHandle f = r.fh.empty() ? user->lookup(dir, "f").fh : r.fh;
  auto a = nfs().getattr(f).attr;
  EXPECT_EQ(a.uid, 1000u);
  EXPECT_EQ(a.gid, 1001u);
}

TEST_F(Create, WithNameLongerThan255BytesIsNametoolong) {
  FileHandle dir = make_test_dir();
  EXPECT_EQ(nfs().create(dir, long_name(256), GUARDED).status,
            NFS3ERR_NAMETOOLONG);
  EXPECT_EQ(nfs().lookup(dir, long_name(255)).status, NFS3ERR_NOENT);
}

TEST_F(Create, InAFileIsNotdir) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f");
  EXPECT_EQ(nfs().create(f, "x", GUARDED).status, NFS3ERR_NOTDIR);
}

TEST_F(Create, WithoutWritePermissionOnTheDirectoryIsAcces) {
  FileHandle dir = make_test_dir(0755);
  auto user = connect_as(kUser);
  EXPECT_EQ(user->create(dir, "f", GUARDED).status, NFS3ERR_ACCES);
  EXPECT_EQ(nfs().lookup(dir, "f").status, NFS3ERR_NOENT);
}

TEST_F(Create, InARemovedDirectoryIsStale) {
  FileHandle dir = make_test_dir();
  FileHandle sub = nfs().make_dir(dir, "sub");
  ASSERT_EQ(nfs().rmdir(dir, "sub").status, NFS3_OK);
  EXPECT_EQ(nfs().create(sub, "f", GUARDED).status, NFS3ERR_STALE);
}

TEST_F(Create, InAForgedDirectoryHandleIsBadhandle) {
  FileHandle dir = make_test_dir();
  EXPECT_EQ(nfs().create(forge(dir), "f", GUARDED).status, NFS3ERR_BADHANDLE);
  EXPECT_EQ(nfs().lookup(dir, "f").status, NFS3ERR_NOENT);
}

// --- MKDIR -----------------------------------------------------------------

using Mkdir = ConformanceTest;

TEST_F(Mkdir, MakesADirectoryWithTheMode) {
  FileHandle dir = make_test_dir();
  auto r = nfs().mkdir(dir, "d", Sattr::with_mode(0750));
  ASSERT_EQ(r.status, NFS3_OK);
  ASSERT_FALSE(r.fh.empty());
  ASSERT_TRUE(r.attr.has_value());
  EXPECT_EQ(r.attr->type, NF3DIR);
  EXPECT_EQ(r.attr->mode & 07777, 0750u);
  EXPECT_EQ(nfs().lookup(dir, "d").status, NFS3_OK);
  EXPECT_TRUE(nfs().list(r.fh).size() <= 2);  // at most "." and ".."
}

TEST_F(Mkdir, OverAnExistingNameIsExist) {
  FileHandle dir = make_test_dir();
  nfs().make_dir(dir, "d");
  nfs().make_file(dir, "f");
  EXPECT_EQ(nfs().mkdir(dir, "d").status, NFS3ERR_EXIST);
  EXPECT_EQ(nfs().mkdir(dir, "f").status, NFS3ERR_EXIST);
}

TEST_F(Mkdir, WithNameLongerThan255BytesIsNametoolong) {
  FileHandle dir = make_test_dir();
  EXPECT_EQ(nfs().mkdir(dir, long_name(256)).status, NFS3ERR_NAMETOOLONG);
}

TEST_F(Mkdir, InAFileIsNotdir) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f");
  EXPECT_EQ(nfs().mkdir(f, "d").status, NFS3ERR_NOTDIR);
}

TEST_F(Mkdir, WithoutWritePermissionIsAcces) {
  FileHandle dir = make_test_dir(0755);
  auto user = connect_as(kUser);
  EXPECT_EQ(user->mkdir(dir, "d").status, NFS3ERR_ACCES);
}

TEST_F(Mkdir, InARemovedDirectoryIsStale) {
  FileHandle dir = make_test_dir();
  FileHandle sub = nfs().make_dir(dir, "sub");
  ASSERT_EQ(nfs().rmdir(dir, "sub").status, NFS3_OK);
  EXPECT_EQ(nfs().mkdir(sub, "d").status, NFS3ERR_STALE);
}

// --- SYMLINK ---------------------------------------------------------------

using Symlink = ConformanceTest;

TEST_F(Symlink, MakesALinkThatReadlinkReturns) {
  FileHandle dir = make_test_dir();
  auto r = nfs().symlink(dir, "l", "/elsewhere/target");
  ASSERT_EQ(r.status, NFS3_OK);
  FileHandle l = r.fh.empty() ? nfs().lookup(dir, "l").fh : r.fh;
  auto a = nfs().getattr(l);
  ASSERT_EQ(a.status, NFS3_OK);
  EXPECT_EQ(a.attr.type, NF3LNK);
  EXPECT_EQ(a.attr.size, std::string("/elsewhere/target").size());
  EXPECT_EQ(nfs().readlink(l).target, "/elsewhere/target");
}

TEST_F(Symlink, OverAnExistingNameIsExist) {
  FileHandle dir = make_test_dir();
  nfs().make_file(dir, "f");
  EXPECT_EQ(nfs().symlink(dir, "f", "target").status, NFS3ERR_EXIST);
}

TEST_F(Symlink, WithNameLongerThan255BytesIsNametoolong) {
  FileHandle dir = make_test_dir();
  EXPECT_EQ(nfs().symlink(dir, long_name(256), "target").status,
            NFS3ERR_NAMETOOLONG);
}

TEST_F(Symlink, WithoutWritePermissionIsAcces) {
  FileHandle dir = make_test_dir(0755);
  auto user = connect_as(kUser);
  EXPECT_EQ(user->symlink(dir, "l", "target").status, NFS3ERR_ACCES);
}

TEST_F(Symlink, InAFileIsNotdir) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f");
  EXPECT_EQ(nfs().symlink(f, "l", "target").status, NFS3ERR_NOTDIR);
}

// --- MKNOD -----------------------------------------------------------------

using Mknod = ConformanceTest;

TEST_F(Mknod, MakesAFifo) {
  FileHandle dir = make_test_dir();
  auto r = nfs().mknod(dir, "fifo", NF3FIFO, Sattr::with_mode(0644));
  ASSERT_EQ(r.status, NFS3_OK);
  FileHandle fh = r.fh.empty() ? nfs().lookup(dir, "fifo").fh : r.fh;
  EXPECT_EQ(nfs().getattr(fh).attr.type, NF3FIFO);
}

TEST_F(Mknod, MakesASocket) {
  FileHandle dir = make_test_dir();
  auto r = nfs().mknod(dir, "sock", NF3SOCK, Sattr::with_mode(0644));
  ASSERT_EQ(r.status, NFS3_OK);
  FileHandle fh = r.fh.empty() ? nfs().lookup(dir, "sock").fh : r.fh;
  EXPECT_EQ(nfs().getattr(fh).attr.type, NF3SOCK);
}

TEST_F(Mknod, OfARegularFileIsBadtype) {
  FileHandle dir = make_test_dir();
  EXPECT_EQ(nfs().mknod(dir, "f", NF3REG).status, NFS3ERR_BADTYPE);
  EXPECT_EQ(nfs().lookup(dir, "f").status, NFS3ERR_NOENT);
}

TEST_F(Mknod, OfADirectoryIsBadtype) {
  FileHandle dir = make_test_dir();
  EXPECT_EQ(nfs().mknod(dir, "d", NF3DIR).status, NFS3ERR_BADTYPE);
}

TEST_F(Mknod, OverAnExistingNameIsExist) {
  FileHandle dir = make_test_dir();
  nfs().make_file(dir, "f");
  EXPECT_EQ(nfs().mknod(dir, "f", NF3FIFO).status, NFS3ERR_EXIST);
}

TEST_F(Mknod, WithNameLongerThan255BytesIsNametoolong) {
  FileHandle dir = make_test_dir();
  EXPECT_EQ(nfs().mknod(dir, long_name(256), NF3FIFO).status,
            NFS3ERR_NAMETOOLONG);
}

// --- REMOVE ----------------------------------------------------------------

using Remove = ConformanceTest;

TEST_F(Remove, RemovesTheNameAndStalesTheHandle) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f", 0644, "bye");
  auto r = nfs().remove(dir, "f");
  ASSERT_EQ(r.status, NFS3_OK);
  EXPECT_EQ(nfs().lookup(dir, "f").status, NFS3ERR_NOENT);
  EXPECT_EQ(nfs().getattr(f).status, NFS3ERR_STALE);
}

TEST_F(Remove, OfOneOfTwoLinksKeepsTheOther) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "a", 0644, "shared");
  ASSERT_EQ(nfs().link(f, dir, "b").status, NFS3_OK);
  ASSERT_EQ(nfs().remove(dir, "a").status, NFS3_OK);
  auto b = nfs().lookup(dir, "b");
  ASSERT_EQ(b.status, NFS3_OK);
  EXPECT_EQ(nfs().getattr(b.fh).attr.nlink, 1u);
  EXPECT_EQ(nfs().read_all(f), "shared");
}

TEST_F(Remove, OfAMissingNameIsNoent) {
  FileHandle dir = make_test_dir();
  EXPECT_EQ(nfs().remove(dir, "missing").status, NFS3ERR_NOENT);
}

TEST_F(Remove, OfADirectoryIsIsdir) {
  FileHandle dir = make_test_dir();
  nfs().make_dir(dir, "d");
  EXPECT_EQ(nfs().remove(dir, "d").status, NFS3ERR_ISDIR);
  EXPECT_EQ(nfs().lookup(dir, "d").status, NFS3_OK);
}

TEST_F(Remove, InAFileIsNotdir) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f");
  EXPECT_EQ(nfs().remove(f, "x").status, NFS3ERR_NOTDIR);
}

TEST_F(Remove, WithNameLongerThan255BytesIsNametoolong) {
  FileHandle dir = make_test_dir();
  EXPECT_EQ(nfs().remove(dir, long_name(256)).status, NFS3ERR_NAMETOOLONG);
}

TEST_F(Remove, WithoutWritePermissionOnTheDirectoryIsAcces) {
  FileHandle dir = make_test_dir(0755);
  nfs().make_file(dir, "f", 0666);
  auto user = connect_as(kUser);
  EXPECT_EQ(user->remove(dir, "f").status, NFS3ERR_ACCES);
  EXPECT_EQ(nfs().lookup(dir, "f").status, NFS3_OK);
}

TEST_F(Remove, InARemovedDirectoryIsStale) {
  FileHandle dir = make_test_dir();
  FileHandle sub = nfs().make_dir(dir, "sub");
  ASSERT_EQ(nfs().rmdir(dir, "sub").status, NFS3_OK);
  EXPECT_EQ(nfs().remove(sub, "x").status, NFS3ERR_STALE);
}

// --- RMDIR -----------------------------------------------------------------

using Rmdir = ConformanceTest;

TEST_F(Rmdir, RemovesAnEmptyDirectory) {
  FileHandle dir = make_test_dir();
  FileHandle d = nfs().make_dir(dir, "d");
  ASSERT_EQ(nfs().rmdir(dir, "d").status, NFS3_OK);
  EXPECT_EQ(nfs().lookup(dir, "d").status, NFS3ERR_NOENT);
  EXPECT_EQ(nfs().getattr(d).status, NFS3ERR_STALE);
}

TEST_F(Rmdir, OfANonEmptyDirectoryIsNotempty) {
  FileHandle dir = make_test_dir();
  FileHandle d = nfs().make_dir(dir, "d");
  nfs().make_file(d, "f");
  EXPECT_EQ(nfs().rmdir(dir, "d").status, NFS3ERR_NOTEMPTY);
  EXPECT_EQ(nfs().lookup(d, "f").status, NFS3_OK);
}

TEST_F(Rmdir, OfAFileIsNotdir) {
  FileHandle dir = make_test_dir();
  nfs().make_file(dir, "f");
  EXPECT_EQ(nfs().rmdir(dir, "f").status, NFS3ERR_NOTDIR);
  EXPECT_EQ(nfs().lookup(dir, "f").status, NFS3_OK);
}

TEST_F(Rmdir, OfAMissingNameIsNoent) {
  FileHandle dir = make_test_dir();
  EXPECT_EQ(nfs().rmdir(dir, "missing").status, NFS3ERR_NOENT);
}

TEST_F(Rmdir, OfDotIsInval) {
  FileHandle dir = make_test_dir();
  FileHandle d = nfs().make_dir(dir, "d");
  EXPECT_EQ(nfs().rmdir(d, ".").status, NFS3ERR_INVAL);
  EXPECT_EQ(nfs().getattr(d).status, NFS3_OK);
}

TEST_F(Rmdir, WithNameLongerThan255BytesIsNametoolong) {
  FileHandle dir = make_test_dir();
  EXPECT_EQ(nfs().rmdir(dir, long_name(256)).status, NFS3ERR_NAMETOOLONG);
}

TEST_F(Rmdir, WithoutWritePermissionIsAcces) {
  FileHandle dir = make_test_dir(0755);
  nfs().make_dir(dir, "d", 0777);
  auto user = connect_as(kUser);
  EXPECT_EQ(user->rmdir(dir, "d").status, NFS3ERR_ACCES);
}

// --- RENAME ----------------------------------------------------------------

using Rename = ConformanceTest;

TEST_F(Rename, MovesAFileWithinADirectory) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "old", 0644, "data");
  ASSERT_EQ(nfs().rename(dir, "old", dir, "new").status, NFS3_OK);
  EXPECT_EQ(nfs().lookup(dir, "old").status, NFS3ERR_NOENT);
  auto n = nfs().lookup(dir, "new");
  ASSERT_EQ(n.status, NFS3_OK);
  EXPECT_EQ(fileid_of(nfs(), n.fh), fileid_of(nfs(), f));
  EXPECT_EQ(nfs().read_all(f), "data");
}

TEST_F(Rename, MovesAFileAcrossDirectories) {
  FileHandle dir = make_test_dir();
  FileHandle a = nfs().make_dir(dir, "a");
  FileHandle b = nfs().make_dir(dir, "b");
  nfs().make_file(a, "f", 0644, "moved");
  auto r = nfs().rename(a, "f", b, "g");
  ASSERT_EQ(r.status, NFS3_OK);
  EXPECT_EQ(nfs().lookup(a, "f").status, NFS3ERR_NOENT);
  EXPECT_EQ(nfs().read_all(nfs().lookup(b, "g").fh), "moved");
}

TEST_F(Rename, OverAnExistingFileReplacesIt) {
  FileHandle dir = make_test_dir();
  FileHandle src = nfs().make_file(dir, "src", 0644, "new");
  FileHandle dst = nfs().make_file(dir, "dst", 0644, "old");
  ASSERT_EQ(nfs().rename(dir, "src", dir, "dst").status, NFS3_OK);
  auto l = nfs().lookup(dir, "dst");
  ASSERT_EQ(l.status, NFS3_OK);
  EXPECT_EQ(fileid_of(nfs(), l.fh), fileid_of(nfs(), src));
  EXPECT_EQ(nfs().read_all(l.fh), "new");
  EXPECT_EQ(nfs().getattr(dst).status, NFS3ERR_STALE);
}

TEST_F(Rename, MovesADirectoryWithItsContents) {
  FileHandle dir = make_test_dir();
  FileHandle a = nfs().make_dir(dir, "a");
  FileHandle dest = nfs().make_dir(dir, "dest");
  nfs().make_file(a, "inside", 0644, "x");
  ASSERT_EQ(nfs().rename(dir, "a", dest, "a2").status, NFS3_OK);
  auto moved = nfs().lookup(dest, "a2");
  ASSERT_EQ(moved.status, NFS3_OK);
  EXPECT_EQ(nfs().lookup(moved.fh, "inside").status, NFS3_OK);
  auto up = nfs().lookup(moved.fh, "..");
  ASSERT_EQ(up.status, NFS3_OK);
  EXPECT_EQ(fileid_of(nfs(), up.fh), fileid_of(nfs(), dest));
}

TEST_F(Rename, ADirectoryOverAnEmptyDirectoryReplacesIt) {
  FileHandle dir = make_test_dir();
  FileHandle a = nfs().make_dir(dir, "a");
  nfs().make_dir(dir, "empty");
  ASSERT_EQ(nfs().rename(dir, "a", dir, "empty").status, NFS3_OK);
  EXPECT_EQ(fileid_of(nfs(), nfs().lookup(dir, "empty").fh),
            fileid_of(nfs(), a));
}

TEST_F(Rename, OntoItselfChangesNothing) {
  FileHandle dir = make_test_dir();
  nfs().make_file(dir, "f", 0644, "same");
  ASSERT_EQ(nfs().rename(dir, "f", dir, "f").status, NFS3_OK);
  EXPECT_EQ(nfs().read_all(nfs().lookup(dir, "f").fh), "same");
}

TEST_F(Rename, BetweenTwoLinksOfOneFileChangesNothing) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "a");
  ASSERT_EQ(nfs().link(f, dir, "b").status, NFS3_OK);
  ASSERT_EQ(nfs().rename(dir, "a", dir, "b").status, NFS3_OK);
  EXPECT_EQ(nfs().lookup(dir, "a").status, NFS3_OK);
  EXPECT_EQ(nfs().lookup(dir, "b").status, NFS3_OK);
}

TEST_F(Rename, OfAMissingNameIsNoent) {
  FileHandle dir = make_test_dir();
  EXPECT_EQ(nfs().rename(dir, "missing", dir, "x").status, NFS3ERR_NOENT);
}

TEST_F(Rename, OfADirectoryIntoItsOwnSubtreeIsInval) {
  FileHandle dir = make_test_dir();
  FileHandle a = nfs().make_dir(dir, "a");
  FileHandle b = nfs().make_dir(a, "b");
  EXPECT_EQ(nfs().rename(dir, "a", b, "a").status, NFS3ERR_INVAL);
  EXPECT_EQ(nfs().rename(dir, "a", a, "self").status, NFS3ERR_INVAL);
  EXPECT_EQ(nfs().lookup(dir, "a").status, NFS3_OK);
}

TEST_F(Rename, OfAFileOverADirectoryIsRefused) {
  FileHandle dir = make_test_dir();
  nfs().make_file(dir, "f");
  nfs().make_dir(dir, "d");
  EXPECT_THAT(nfs().rename(dir, "f", dir, "d").status,
              AnyOf(NFS3ERR_ISDIR, NFS3ERR_EXIST));
  EXPECT_EQ(nfs().lookup(dir, "f").status, NFS3_OK);
}

TEST_F(Rename, OfADirectoryOverAFileIsRefused) {
  FileHandle dir = make_test_dir();
  nfs().make_file(dir, "f");
  nfs().make_dir(dir, "d");
  EXPECT_THAT(nfs().rename(dir, "d", dir, "f").status,
              AnyOf(NFS3ERR_NOTDIR, NFS3ERR_EXIST));
  EXPECT_EQ(nfs().getattr(nfs().lookup(dir, "f").fh).attr.type, NF3REG);
}

TEST_F(Rename, OfADirectoryOverANonEmptyDirectoryIsRefused) {
  FileHandle dir = make_test_dir();
  nfs().make_dir(dir, "a");
  FileHandle full = nfs().make_dir(dir, "full");
  nfs().make_file(full, "f");
  EXPECT_THAT(nfs().rename(dir, "a", dir, "full").status,
              AnyOf(NFS3ERR_NOTEMPTY, NFS3ERR_EXIST));
  EXPECT_EQ(nfs().lookup(full, "f").status, NFS3_OK);
}

TEST_F(Rename, ToANameLongerThan255BytesIsNametoolong) {
  FileHandle dir = make_test_dir();
  nfs().make_file(dir, "f");
  EXPECT_EQ(nfs().rename(dir, "f", dir, long_name(256)).status,
            NFS3ERR_NAMETOOLONG);
  EXPECT_EQ(nfs().lookup(dir, "f").status, NFS3_OK);
}

TEST_F(Rename, WithoutWritePermissionIsAcces) {
  FileHandle dir = make_test_dir(0755);
  nfs().make_file(dir, "f", 0666);
  auto user = connect_as(kUser);
  EXPECT_EQ(user->rename(dir, "f", dir, "g").status, NFS3ERR_ACCES);
}

TEST_F(Rename, FromARemovedDirectoryIsStale) {
  FileHandle dir = make_test_dir();
  FileHandle sub = nfs().make_dir(dir, "sub");
  ASSERT_EQ(nfs().rmdir(dir, "sub").status, NFS3_OK);
  EXPECT_EQ(nfs().rename(sub, "x", dir, "y").status, NFS3ERR_STALE);
}

// --- LINK ------------------------------------------------------------------

using Link = ConformanceTest;

TEST_F(Link, AddsASecondNameForTheSameFile) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "a", 0644, "both");
  auto r = nfs().link(f, dir, "b");
  ASSERT_EQ(r.status, NFS3_OK);
  if (r.attr) {
    EXPECT_EQ(r.attr->nlink, 2u);
  }
  auto b = nfs().lookup(dir, "b");
  ASSERT_EQ(b.status, NFS3_OK);
  EXPECT_EQ(fileid_of(nfs(), b.fh), fileid_of(nfs(), f));
  EXPECT_EQ(nfs().getattr(f).attr.nlink, 2u);
  EXPECT_EQ(nfs().read_all(b.fh), "both");
}

TEST_F(Link, OverAnExistingNameIsExist) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "a");
  nfs().make_file(dir, "b");
  EXPECT_EQ(nfs().link(f, dir, "b").status, NFS3ERR_EXIST);
}

TEST_F(Link, OfADirectoryIsRefused) {
  FileHandle dir = make_test_dir();
  FileHandle d = nfs().make_dir(dir, "d");
  EXPECT_THAT(nfs().link(d, dir, "d2").status,
              AnyOf(NFS3ERR_ISDIR, NFS3ERR_INVAL));
  EXPECT_EQ(nfs().lookup(dir, "d2").status, NFS3ERR_NOENT);
}

TEST_F(Link, IntoAFileIsNotdir) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f");
  FileHandle g = nfs().make_file(dir, "g");
  EXPECT_EQ(nfs().link(f, g, "x").status, NFS3ERR_NOTDIR);
}

TEST_F(Link, WithNameLongerThan255BytesIsNametoolong) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f");
  EXPECT_EQ(nfs().link(f, dir, long_name(256)).status, NFS3ERR_NAMETOOLONG);
}

TEST_F(Link, OfARemovedFileIsStale) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f");
  ASSERT_EQ(nfs().remove(dir, "f").status, NFS3_OK);
  EXPECT_EQ(nfs().link(f, dir, "again").status, NFS3ERR_STALE);
}

TEST_F(Link, WithoutWritePermissionOnTheDirectoryIsAcces) {
  FileHandle dir = make_test_dir(0755);
  FileHandle f = nfs().make_file(dir, "f", 0666);
  auto user = connect_as(kUser);
  EXPECT_EQ(user->link(f, dir, "g").status, NFS3ERR_ACCES);
}

}  // namespace
}  // namespace tidepool::test
