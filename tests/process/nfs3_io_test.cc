// NFSv3 READ, WRITE and COMMIT against a real server (RFC 1813 sections
// 3.3.6, 3.3.7, 3.3.21).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/process/conformance_fixture.h"

namespace tidepool::test {
namespace {

using ::testing::AnyOf;

const Credentials kUser{1000, 1000, {}};

// --- READ ------------------------------------------------------------------

using Read = ConformanceTest;

TEST_F(Read, ReturnsWhatWasWritten) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f", 0644, "hello, world");
  auto r = nfs().read(f, 0, 100);
  ASSERT_EQ(r.status, NFS3_OK);
  EXPECT_EQ(r.data, "hello, world");
  EXPECT_EQ(r.count, 12u);
  EXPECT_TRUE(r.eof);
}

TEST_F(Read, OfAPrefixIsNotEof) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f", 0644, "0123456789");
  auto r = nfs().read(f, 2, 5);
  ASSERT_EQ(r.status, NFS3_OK);
  EXPECT_EQ(r.data, "23456");
  EXPECT_FALSE(r.eof);
}

TEST_F(Read, AcrossTheEndIsShortAndEof) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f", 0644, "0123456789");
  auto r = nfs().read(f, 7, 100);
  ASSERT_EQ(r.status, NFS3_OK);
  EXPECT_EQ(r.data, "789");
  EXPECT_TRUE(r.eof);
}

TEST_F(Read, BeyondTheEndIsEmptyAndEof) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f", 0644, "0123456789");
  auto r = nfs().read(f, 1000, 10);
  ASSERT_EQ(r.status, NFS3_OK);
  EXPECT_EQ(r.count, 0u);
  EXPECT_TRUE(r.data.empty());
  EXPECT_TRUE(r.eof);
}

TEST_F(Read, OfAHoleReturnsZeros) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f");
  ASSERT_EQ(nfs().write(f, 300001, "x").status, NFS3_OK);
  auto r = nfs().read(f, 1000, 4099);
  ASSERT_EQ(r.status, NFS3_OK);
  EXPECT_EQ(r.data, std::string(4099, '\0'));
  auto tail = nfs().read(f, 300000, 10);
  ASSERT_EQ(tail.status, NFS3_OK);
  EXPECT_EQ(tail.data, std::string("\0x", 2));
  EXPECT_TRUE(tail.eof);
}

TEST_F(Read, LargerThanRtmaxIsShortenedNotRefused) {
  auto info = nfs().fsinfo(root());
  ASSERT_EQ(info.status, NFS3_OK);
  if (info.rtmax > kLibnfsMaxTransfer || info.wtmax > kLibnfsMaxTransfer) {
    GTEST_SKIP() << "rtmax " << info.rtmax << " exceeds what libnfs receives";
  }
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f");
  std::string data = random_bytes(info.rtmax + 4096, 11);
  for (size_t off = 0; off < data.size(); off += info.wtmax) {
    auto w = nfs().write(f, off, std::string_view(data).substr(off, info.wtmax));
    ASSERT_EQ(w.status, NFS3_OK);
  }
  auto r = nfs().read(f, 0, info.rtmax * 2);
  ASSERT_EQ(r.status, NFS3_OK);
  EXPECT_LE(r.count, info.rtmax);
  EXPECT_GT(r.count, 0u);
  EXPECT_EQ(r.data, data.substr(0, r.count));
}

// READs of 64 KiB and more of whole blocks, which tided sends from the page cache by reference,
// return what was written, also right after another write changed part of them.
TEST_F(Read, OfWholeBlocksInLargePiecesReturnsWhatWasWrittenLast) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f");
  std::string data = random_bytes((3u << 20) + 5000, 12);
  constexpr size_t kPiece = 256u << 10;
  for (size_t off = 0; off < data.size(); off += kPiece) {
    ASSERT_EQ(nfs().write(f, off, std::string_view(data).substr(off, kPiece)).status, NFS3_OK);
  }
  struct Range {
    size_t offset;
    size_t count;
  };
  const Range ranges[] = {{0, 1u << 20},
                          {64u << 10, 64u << 10},
                          {(1u << 20) + 4096, 512u << 10},
                          {(3u << 20) - (128u << 10), 256u << 10}};
  for (int pass = 0; pass < 2; ++pass) {
    for (const Range& range : ranges) {
      auto r = nfs().read(f, range.offset, static_cast<uint32_t>(range.count));
      ASSERT_EQ(r.status, NFS3_OK);
      const std::string expected = data.substr(range.offset, range.count);
      EXPECT_EQ(r.count, expected.size()) << "pass " << pass << " at " << range.offset;
      EXPECT_TRUE(r.data == expected) << "pass " << pass << " at " << range.offset;
      EXPECT_EQ(r.eof, range.offset + range.count >= data.size());
    }
    const std::string patch = random_bytes(70'000, 13 + pass);
    ASSERT_EQ(nfs().write(f, 100'000, patch).status, NFS3_OK);
    data.replace(100'000, patch.size(), patch);
  }
}

TEST_F(Read, OfADirectoryIsRefused) {
  FileHandle dir = make_test_dir();
  EXPECT_THAT(nfs().read(dir, 0, 100).status,
              AnyOf(NFS3ERR_ISDIR, NFS3ERR_INVAL));
}

TEST_F(Read, WithoutReadPermissionIsAcces) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "secret", 0600, "top secret");
  auto user = connect_as(kUser);
  EXPECT_EQ(user->read(f, 0, 100).status, NFS3ERR_ACCES);
}

TEST_F(Read, OfRemovedFileIsStale) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f", 0644, "data");
  ASSERT_EQ(nfs().remove(dir, "f").status, NFS3_OK);
  EXPECT_EQ(nfs().read(f, 0, 10).status, NFS3ERR_STALE);
}

TEST_F(Read, WithForgedHandleIsBadhandle) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f", 0644, "data");
  EXPECT_EQ(nfs().read(forge(f), 0, 10).status, NFS3ERR_BADHANDLE);
}

// --- WRITE -----------------------------------------------------------------

using Write = ConformanceTest;

TEST_F(Write, FileSyncIsStableAndComplete) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f");
  auto w = nfs().write(f, 0, "abcdef", FILE_SYNC);
  ASSERT_EQ(w.status, NFS3_OK);
  EXPECT_EQ(w.count, 6u);
  EXPECT_EQ(w.committed, FILE_SYNC);
  ASSERT_TRUE(w.wcc.after.has_value());
  EXPECT_EQ(w.wcc.after->size, 6u);
}

TEST_F(Write, DataSyncIsAtLeastDataSync) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f");
  auto w = nfs().write(f, 0, "abcdef", DATA_SYNC);
  ASSERT_EQ(w.status, NFS3_OK);
  EXPECT_THAT(w.committed, AnyOf(DATA_SYNC, FILE_SYNC));
}

TEST_F(Write, UnstableWritesShareOneVerifier) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f");
  auto a = nfs().write(f, 0, "first", UNSTABLE);
  auto b = nfs().write(f, 5, "second", UNSTABLE);
  ASSERT_EQ(a.status, NFS3_OK);
  ASSERT_EQ(b.status, NFS3_OK);
  EXPECT_EQ(a.verf, b.verf);
  EXPECT_EQ(nfs().read_all(f), "firstsecond");
}

TEST_F(Write, InTheMiddleOverwritesOnlyThatRange) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f", 0644, "aaaaaaaaaa");
  ASSERT_EQ(nfs().write(f, 3, "BBB").status, NFS3_OK);
  EXPECT_EQ(nfs().read_all(f), "aaaBBBaaaa");
}

TEST_F(Write, OfZeroBytesSucceedsAndChangesNothing) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f", 0644, "abc");
  auto w = nfs().write(f, 10, "");
  ASSERT_EQ(w.status, NFS3_OK);
  EXPECT_EQ(w.count, 0u);
  EXPECT_EQ(nfs().getattr(f).attr.size, 3u);
}

TEST_F(Write, ToADirectoryIsRefused) {
  FileHandle dir = make_test_dir();
  EXPECT_THAT(nfs().write(dir, 0, "x").status,
              AnyOf(NFS3ERR_ISDIR, NFS3ERR_INVAL));
}

TEST_F(Write, WithoutWritePermissionIsAcces) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f", 0644, "orig");
  auto user = connect_as(kUser);
  EXPECT_EQ(user->write(f, 0, "evil").status, NFS3ERR_ACCES);
  EXPECT_EQ(nfs().read_all(f), "orig");
}

TEST_F(Write, ThroughGroupWritePermissionOfASupplementaryGroupSucceeds) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f", 0664);
  Sattr group;
  group.gid = 501;
  ASSERT_EQ(nfs().setattr(f, group).status, NFS3_OK);
  // The group is the last of 16, the most AUTH_SYS carries.
  std::vector<uint32_t> groups;
  for (uint32_t g = 2000; g < 2015; ++g) groups.push_back(g);
  groups.push_back(501);
  auto member = connect_as({1000, 100, groups});
  EXPECT_EQ(member->write(f, 0, "ok").status, NFS3_OK);
  groups.pop_back();
  auto stranger = connect_as({1000, 100, groups});
  EXPECT_EQ(stranger->write(f, 0, "no").status, NFS3ERR_ACCES);
}

TEST_F(Write, AtMaxFileSizeIsFbig) {
  auto info = nfs().fsinfo(root());
  ASSERT_EQ(info.status, NFS3_OK);
  if (info.maxfilesize >= (uint64_t{1} << 62)) {
    GTEST_SKIP() << "maxfilesize " << info.maxfilesize << " is unbounded";
  }
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f");
  EXPECT_EQ(nfs().write(f, info.maxfilesize, "x").status, NFS3ERR_FBIG);
  EXPECT_EQ(nfs().write(f, info.maxfilesize - 1, "xy").status, NFS3ERR_FBIG);
  EXPECT_EQ(nfs().getattr(f).attr.size, 0u);
}

TEST_F(Write, OfRemovedFileIsStale) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f");
  ASSERT_EQ(nfs().remove(dir, "f").status, NFS3_OK);
  EXPECT_EQ(nfs().write(f, 0, "x").status, NFS3ERR_STALE);
}

TEST_F(Write, WithForgedHandleIsBadhandle) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f");
  EXPECT_EQ(nfs().write(forge(f), 0, "x").status, NFS3ERR_BADHANDLE);
  EXPECT_EQ(nfs().getattr(f).attr.size, 0u);
}

// --- COMMIT ----------------------------------------------------------------

using Commit = ConformanceTest;

TEST_F(Commit, VerifierMatchesTheWriteVerifier) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f");
  auto w = nfs().write(f, 0, random_bytes(70001, 3), UNSTABLE);
  ASSERT_EQ(w.status, NFS3_OK);
  auto c = nfs().commit(f, 0, 0);
  ASSERT_EQ(c.status, NFS3_OK);
  EXPECT_EQ(c.verf, w.verf);
}

TEST_F(Commit, OfARangeSucceedsAndDataIsReadable) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f");
  std::string data = random_bytes(10007, 4);
  ASSERT_EQ(nfs().write(f, 0, data, UNSTABLE).status, NFS3_OK);
  auto c = nfs().commit(f, 100, 5000);
  ASSERT_EQ(c.status, NFS3_OK);
  EXPECT_EQ(nfs().commit(f, 0, 0).verf, c.verf);
  EXPECT_EQ(nfs().read_all(f), data);
}

TEST_F(Commit, OfAFileWithNothingToCommitSucceeds) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f");
  EXPECT_EQ(nfs().commit(f).status, NFS3_OK);
}

TEST_F(Commit, ByACallerWhoMayNotWriteTheFileIsAcces) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f", 0644);
  ASSERT_EQ(nfs().write(f, 0, "root's", UNSTABLE).status, NFS3_OK);
  auto user = connect_as(kUser);
  EXPECT_EQ(user->commit(f).status, NFS3ERR_ACCES);
  EXPECT_EQ(nfs().commit(f).status, NFS3_OK);
}

TEST_F(Commit, OfRemovedFileIsStale) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f");
  ASSERT_EQ(nfs().write(f, 0, "data", UNSTABLE).status, NFS3_OK);
  ASSERT_EQ(nfs().remove(dir, "f").status, NFS3_OK);
  EXPECT_EQ(nfs().commit(f).status, NFS3ERR_STALE);
}

TEST_F(Commit, WithHandleOfWrongSizeIsBadhandle) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f");
  FileHandle shorter(f.begin(), f.end() - 1);
  EXPECT_EQ(nfs().commit(shorter).status, NFS3ERR_BADHANDLE);
}

}  // namespace
}  // namespace tidepool::test
