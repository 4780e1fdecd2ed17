// NFSv3 READDIR, READDIRPLUS, FSSTAT, FSINFO and PATHCONF against a real
// server (RFC 1813 sections 3.3.16-3.3.20), and the read-only export (ROFS).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "tests/process/conformance_fixture.h"

namespace tidepool::test {
namespace {

using ::testing::AnyOf;

bool is_dot(const std::string& n) { return n == "." || n == ".."; }

// Name -> number of times it was listed, without "." and "..".
std::map<std::string, int> count_names(const std::vector<DirEntry>& entries) {
  std::map<std::string, int> out;
  for (const auto& e : entries) {
    if (!is_dot(e.name)) ++out[e.name];
  }
  return out;
}

std::vector<std::string> make_files(NfsClient& c, const FileHandle& dir,
                                    int n) {
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) {
    names.push_back("entry-with-a-longish-name-" + std::to_string(i));
    c.make_file(dir, names.back());
  }
  return names;
}

// --- READDIR ---------------------------------------------------------------

using Readdir = ConformanceTest;

TEST_F(Readdir, ListsEveryEntryOnce) {
  FileHandle dir = make_test_dir();
  auto names = make_files(nfs(), dir, 20);
  nfs().make_dir(dir, "subdir");
  names.push_back("subdir");
  auto counted = count_names(nfs().list(dir));
  ASSERT_EQ(counted.size(), names.size());
  for (const auto& n : names) EXPECT_EQ(counted[n], 1) << n;
}

TEST_F(Readdir, FileidsMatchLookup) {
  FileHandle dir = make_test_dir();
  make_files(nfs(), dir, 3);
  for (const auto& e : nfs().list(dir)) {
    if (is_dot(e.name)) continue;
    auto l = nfs().lookup(dir, e.name);
    ASSERT_EQ(l.status, NFS3_OK);
    EXPECT_EQ(nfs().getattr(l.fh).attr.fileid, e.fileid) << e.name;
  }
}

TEST_F(Readdir, InSmallPagesReturnsEveryEntryExactlyOnce) {
  FileHandle dir = make_test_dir();
  auto names = make_files(nfs(), dir, 150);
  uint64_t cookie = 0, verf = 0;
  std::vector<DirEntry> all;
  int pages = 0;
  for (; pages < 1000; ++pages) {
    auto r = nfs().readdir(dir, cookie, verf, 1024);
    ASSERT_EQ(r.status, NFS3_OK) << "page " << pages;
    all.insert(all.end(), r.entries.begin(), r.entries.end());
    if (r.eof) break;
    ASSERT_FALSE(r.entries.empty()) << "no entries and no eof";
    cookie = r.entries.back().cookie;
    verf = r.cookieverf;
  }
  EXPECT_GT(pages, 2) << "count 1024 should need several pages";
  auto counted = count_names(all);
  EXPECT_EQ(counted.size(), names.size());
  for (const auto& n : names) EXPECT_EQ(counted[n], 1) << n;
}

TEST_F(Readdir, OfAnEmptyDirectoryIsEofWithNoNames) {
  FileHandle dir = make_test_dir();
  auto r = nfs().readdir(dir);
  ASSERT_EQ(r.status, NFS3_OK);
  EXPECT_TRUE(r.eof);
  EXPECT_TRUE(count_names(r.entries).empty());
}

TEST_F(Readdir, NoLongerListsARemovedName) {
  FileHandle dir = make_test_dir();
  make_files(nfs(), dir, 3);
  ASSERT_EQ(nfs().remove(dir, "entry-with-a-longish-name-1").status, NFS3_OK);
  auto counted = count_names(nfs().list(dir));
  EXPECT_EQ(counted.size(), 2u);
  EXPECT_EQ(counted.count("entry-with-a-longish-name-1"), 0u);
}

TEST_F(Readdir, WithAWrongCookieVerifierIsBadCookie) {
  FileHandle dir = make_test_dir();
  make_files(nfs(), dir, 40);
  auto first = nfs().readdir(dir, 0, 0, 512);
  ASSERT_EQ(first.status, NFS3_OK);
  ASSERT_FALSE(first.eof);
  ASSERT_FALSE(first.entries.empty());
  auto r = nfs().readdir(dir, first.entries.back().cookie,
                         first.cookieverf ^ 0x5a5a5a5a5a5a5a5aull, 512);
  EXPECT_EQ(r.status, NFS3ERR_BAD_COOKIE);
}

TEST_F(Readdir, WithCountTooSmallForOneEntryIsToosmall) {
  FileHandle dir = make_test_dir();
  make_files(nfs(), dir, 2);
  EXPECT_EQ(nfs().readdir(dir, 0, 0, 16).status, NFS3ERR_TOOSMALL);
}

TEST_F(Readdir, OfAFileIsNotdir) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f");
  EXPECT_EQ(nfs().readdir(f).status, NFS3ERR_NOTDIR);
}

TEST_F(Readdir, OfARemovedDirectoryIsStale) {
  FileHandle dir = make_test_dir();
  FileHandle sub = nfs().make_dir(dir, "sub");
  ASSERT_EQ(nfs().rmdir(dir, "sub").status, NFS3_OK);
  EXPECT_EQ(nfs().readdir(sub).status, NFS3ERR_STALE);
}

TEST_F(Readdir, WithoutReadPermissionIsAcces) {
  FileHandle dir = make_test_dir();
  FileHandle closed = nfs().make_dir(dir, "closed", 0700);
  auto user = connect_as({1000, 1000, {}});
  EXPECT_EQ(user->readdir(closed).status, NFS3ERR_ACCES);
}

// --- READDIRPLUS -----------------------------------------------------------

using Readdirplus = ConformanceTest;

TEST_F(Readdirplus, ReturnsAttributesAndUsableHandles) {
  FileHandle dir = make_test_dir();
  nfs().make_file(dir, "file", 0640, "12345");
  nfs().make_dir(dir, "dir");
  auto r = nfs().readdirplus(dir);
  ASSERT_EQ(r.status, NFS3_OK);
  EXPECT_TRUE(r.eof);
  int seen = 0;
  for (const auto& e : r.entries) {
    if (is_dot(e.name)) continue;
    ++seen;
    ASSERT_TRUE(e.attr.has_value()) << e.name;
    ASSERT_FALSE(e.fh.empty()) << e.name;
    EXPECT_EQ(e.attr->fileid, e.fileid);
    auto a = nfs().getattr(e.fh);
    ASSERT_EQ(a.status, NFS3_OK);
    EXPECT_EQ(a.attr.fileid, e.fileid);
    if (e.name == "file") {
      EXPECT_EQ(e.attr->type, NF3REG);
      EXPECT_EQ(e.attr->size, 5u);
      EXPECT_EQ(e.attr->mode & 07777, 0640u);
    } else {
      EXPECT_EQ(e.name, "dir");
      EXPECT_EQ(e.attr->type, NF3DIR);
    }
  }
  EXPECT_EQ(seen, 2);
}

TEST_F(Readdirplus, InSmallPagesReturnsEveryEntryExactlyOnce) {
  FileHandle dir = make_test_dir();
  auto names = make_files(nfs(), dir, 60);
  uint64_t cookie = 0, verf = 0;
  std::vector<DirEntry> all;
  int pages = 0;
  for (; pages < 1000; ++pages) {
    auto r = nfs().readdirplus(dir, cookie, verf, 512, 2048);
    ASSERT_EQ(r.status, NFS3_OK) << "page " << pages;
    all.insert(all.end(), r.entries.begin(), r.entries.end());
    if (r.eof) break;
    ASSERT_FALSE(r.entries.empty()) << "no entries and no eof";
    cookie = r.entries.back().cookie;
    verf = r.cookieverf;
  }
  EXPECT_GT(pages, 2);
  auto counted = count_names(all);
  EXPECT_EQ(counted.size(), names.size());
  for (const auto& n : names) EXPECT_EQ(counted[n], 1) << n;
}

TEST_F(Readdirplus, WithAWrongCookieVerifierIsBadCookie) {
  FileHandle dir = make_test_dir();
  make_files(nfs(), dir, 40);
  auto first = nfs().readdirplus(dir, 0, 0, 512, 2048);
  ASSERT_EQ(first.status, NFS3_OK);
  ASSERT_FALSE(first.eof);
  ASSERT_FALSE(first.entries.empty());
  auto r = nfs().readdirplus(dir, first.entries.back().cookie,
                             first.cookieverf ^ 0x5a5a5a5a5a5a5a5aull, 512,
                             2048);
  EXPECT_EQ(r.status, NFS3ERR_BAD_COOKIE);
}

TEST_F(Readdirplus, OfAFileIsNotdir) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f");
  EXPECT_EQ(nfs().readdirplus(f).status, NFS3ERR_NOTDIR);
}

TEST_F(Readdirplus, OfARemovedDirectoryIsStale) {
  FileHandle dir = make_test_dir();
  FileHandle sub = nfs().make_dir(dir, "sub");
  ASSERT_EQ(nfs().rmdir(dir, "sub").status, NFS3_OK);
  EXPECT_EQ(nfs().readdirplus(sub).status, NFS3ERR_STALE);
}

TEST_F(Readdirplus, WithForgedHandleIsBadhandle) {
  FileHandle dir = make_test_dir();
  EXPECT_EQ(nfs().readdirplus(forge(dir)).status, NFS3ERR_BADHANDLE);
}

// --- FSSTAT ----------------------------------------------------------------

using Fsstat = ConformanceTest;

TEST_F(Fsstat, ReportsConsistentSpaceAndFiles) {
  auto r = nfs().fsstat(root());
  ASSERT_EQ(r.status, NFS3_OK);
  EXPECT_GT(r.tbytes, 0u);
  EXPECT_LE(r.fbytes, r.tbytes);
  EXPECT_LE(r.abytes, r.fbytes);
  EXPECT_LE(r.ffiles, r.tfiles);
  EXPECT_LE(r.afiles, r.ffiles);
}

TEST_F(Fsstat, WorksOnAnyHandleOfTheExport) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f");
  EXPECT_EQ(nfs().fsstat(f).status, NFS3_OK);
}

TEST_F(Fsstat, OfARemovedFileIsStale) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f");
  ASSERT_EQ(nfs().remove(dir, "f").status, NFS3_OK);
  EXPECT_EQ(nfs().fsstat(f).status, NFS3ERR_STALE);
}

TEST_F(Fsstat, WithForgedHandleIsBadhandle) {
  EXPECT_EQ(nfs().fsstat(forge(root())).status, NFS3ERR_BADHANDLE);
}

// --- FSINFO ----------------------------------------------------------------

using Fsinfo = ConformanceTest;

TEST_F(Fsinfo, ReportsTransferSizesAndProperties) {
  auto r = nfs().fsinfo(root());
  ASSERT_EQ(r.status, NFS3_OK);
  EXPECT_GT(r.rtmax, 0u);
  EXPECT_LE(r.rtpref, r.rtmax);
  EXPECT_GT(r.wtmax, 0u);
  EXPECT_LE(r.wtpref, r.wtmax);
  EXPECT_GT(r.dtpref, 0u);
  EXPECT_GT(r.maxfilesize, 0u);
  EXPECT_TRUE(r.properties & FSF3_LINK);
  EXPECT_TRUE(r.properties & FSF3_SYMLINK);
  EXPECT_TRUE(r.properties & FSF3_CANSETTIME);
  if (is_tided()) {
    EXPECT_EQ(r.rtmax, 1u << 20);
    EXPECT_EQ(r.rtpref, 128u << 10);
    EXPECT_EQ(r.wtmax, 1u << 20);
    EXPECT_EQ(r.wtpref, 512u << 10);
    EXPECT_EQ(r.maxfilesize, uint64_t{1} << 43);
  }
}

TEST_F(Fsinfo, OfARemovedFileIsStale) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f");
  ASSERT_EQ(nfs().remove(dir, "f").status, NFS3_OK);
  EXPECT_EQ(nfs().fsinfo(f).status, NFS3ERR_STALE);
}

TEST_F(Fsinfo, WithHandleOfWrongSizeIsBadhandle) {
  FileHandle shorter(root().begin(), root().begin() + 3);
  EXPECT_EQ(nfs().fsinfo(shorter).status, NFS3ERR_BADHANDLE);
}

// --- PATHCONF --------------------------------------------------------------

using Pathconf = ConformanceTest;

TEST_F(Pathconf, ReportsNameLimits) {
  auto r = nfs().pathconf(root());
  ASSERT_EQ(r.status, NFS3_OK);
  EXPECT_GE(r.name_max, 255u);
  if (is_tided()) {
    EXPECT_EQ(r.name_max, 255u);
  }
  EXPECT_TRUE(r.no_trunc);
  EXPECT_FALSE(r.case_insensitive);
  EXPECT_TRUE(r.case_preserving);
  EXPECT_GE(r.linkmax, 1u);
}

TEST_F(Pathconf, OfARemovedFileIsStale) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f");
  ASSERT_EQ(nfs().remove(dir, "f").status, NFS3_OK);
  EXPECT_EQ(nfs().pathconf(f).status, NFS3ERR_STALE);
}

TEST_F(Pathconf, WithForgedHandleIsBadhandle) {
  EXPECT_EQ(nfs().pathconf(forge(root())).status, NFS3ERR_BADHANDLE);
}

// --- A read-only export ----------------------------------------------------

using ReadOnlyExport = ConformanceTest;

TEST_F(ReadOnlyExport, ServesReads) {
  auto d = make_ro_test_dir();
  nfs().make_file(d.rw, "f", 0644, "readable");
  auto l = nfs().lookup(d.ro, "f");
  ASSERT_EQ(l.status, NFS3_OK);
  EXPECT_EQ(nfs().getattr(l.fh).status, NFS3_OK);
  EXPECT_EQ(nfs().read_all(l.fh), "readable");
  EXPECT_EQ(count_names(nfs().list(d.ro)).count("f"), 1u);
}

TEST_F(ReadOnlyExport, GrantsNoModifyAccess) {
  auto d = make_ro_test_dir();
  nfs().make_file(d.rw, "f", 0666);
  auto f = nfs().lookup(d.ro, "f").fh;
  auto r = nfs().access(f, ACCESS3_READ | ACCESS3_MODIFY | ACCESS3_EXTEND);
  ASSERT_EQ(r.status, NFS3_OK);
  EXPECT_EQ(r.access, uint32_t{ACCESS3_READ});
  auto rd = nfs().access(d.ro, ACCESS3_LOOKUP | ACCESS3_MODIFY |
                                   ACCESS3_EXTEND | ACCESS3_DELETE);
  ASSERT_EQ(rd.status, NFS3_OK);
  EXPECT_EQ(rd.access, uint32_t{ACCESS3_LOOKUP});
}

TEST_F(ReadOnlyExport, WriteIsRofs) {
  auto d = make_ro_test_dir();
  nfs().make_file(d.rw, "f", 0666, "orig");
  auto f = nfs().lookup(d.ro, "f").fh;
  EXPECT_EQ(nfs().write(f, 0, "changed").status, NFS3ERR_ROFS);
  EXPECT_EQ(nfs().read_all(f), "orig");
}

TEST_F(ReadOnlyExport, CommitIsRofs) {
  auto d = make_ro_test_dir();
  FileHandle written = nfs().make_file(d.rw, "f", 0666);
  ASSERT_EQ(nfs().write(written, 0, "unstable", UNSTABLE).status, NFS3_OK);
  auto f = nfs().lookup(d.ro, "f").fh;
  EXPECT_EQ(nfs().commit(f).status, NFS3ERR_ROFS);
}

TEST_F(ReadOnlyExport, SetattrIsRofs) {
  auto d = make_ro_test_dir();
  nfs().make_file(d.rw, "f", 0666);
  auto f = nfs().lookup(d.ro, "f").fh;
  EXPECT_EQ(nfs().setattr(f, Sattr::with_mode(0600)).status, NFS3ERR_ROFS);
}

TEST_F(ReadOnlyExport, CreateIsRofs) {
  auto d = make_ro_test_dir();
  EXPECT_EQ(nfs().create(d.ro, "f", GUARDED).status, NFS3ERR_ROFS);
  EXPECT_EQ(nfs().lookup(d.rw, "f").status, NFS3ERR_NOENT);
}

TEST_F(ReadOnlyExport, MkdirIsRofs) {
  auto d = make_ro_test_dir();
  EXPECT_EQ(nfs().mkdir(d.ro, "d").status, NFS3ERR_ROFS);
}

TEST_F(ReadOnlyExport, SymlinkIsRofs) {
  auto d = make_ro_test_dir();
  EXPECT_EQ(nfs().symlink(d.ro, "l", "target").status, NFS3ERR_ROFS);
}

TEST_F(ReadOnlyExport, MknodIsRofs) {
  auto d = make_ro_test_dir();
  EXPECT_EQ(nfs().mknod(d.ro, "p", NF3FIFO).status, NFS3ERR_ROFS);
}

TEST_F(ReadOnlyExport, RemoveIsRofs) {
  auto d = make_ro_test_dir();
  nfs().make_file(d.rw, "f");
  EXPECT_EQ(nfs().remove(d.ro, "f").status, NFS3ERR_ROFS);
  EXPECT_EQ(nfs().lookup(d.rw, "f").status, NFS3_OK);
}

TEST_F(ReadOnlyExport, RmdirIsRofs) {
  auto d = make_ro_test_dir();
  nfs().make_dir(d.rw, "sub");
  EXPECT_EQ(nfs().rmdir(d.ro, "sub").status, NFS3ERR_ROFS);
}

TEST_F(ReadOnlyExport, RenameIsRofs) {
  auto d = make_ro_test_dir();
  nfs().make_file(d.rw, "f");
  EXPECT_EQ(nfs().rename(d.ro, "f", d.ro, "g").status, NFS3ERR_ROFS);
  EXPECT_EQ(nfs().lookup(d.rw, "f").status, NFS3_OK);
}

TEST_F(ReadOnlyExport, LinkIsRofs) {
  auto d = make_ro_test_dir();
  nfs().make_file(d.rw, "f");
  auto f = nfs().lookup(d.ro, "f").fh;
  EXPECT_EQ(nfs().link(f, d.ro, "g").status, NFS3ERR_ROFS);
}

}  // namespace
}  // namespace tidepool::test
