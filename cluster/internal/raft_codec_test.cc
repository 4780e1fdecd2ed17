#include "cluster/internal/raft_codec.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace tidepool::cluster::internal {
namespace {

xdr::Buffer encode(const raft_message& message, NodeId sender) {
  xdr::Buffer out;
  xdr::Encoder encoder(out);
  encode_raft_message(message, sender, encoder);
  return out;
}

TEST(RaftCodec, RequestVoteRoundTrips) {
  raft_message m{};
  m.type = RAFT_IO_REQUEST_VOTE;
  m.request_vote = {7, 3, 42, 6, true, true};
  auto decoded = decode_raft_message(encode(m, 3));
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(decoded->server_id, 3u);
  EXPECT_EQ(decoded->request_vote.term, 7u);
  EXPECT_EQ(decoded->request_vote.candidate_id, 3u);
  EXPECT_EQ(decoded->request_vote.last_log_index, 42u);
  EXPECT_EQ(decoded->request_vote.last_log_term, 6u);
  EXPECT_TRUE(decoded->request_vote.disrupt_leader);
  EXPECT_TRUE(decoded->request_vote.pre_vote);
}

TEST(RaftCodec, AppendEntriesRoundTripsIntoOneBatch) {
  std::string a = "first", b, c = "third entry";
  raft_entry entries[3] = {};
  entries[0] = {5, RAFT_COMMAND, {a.data(), a.size()}, nullptr};
  entries[1] = {5, RAFT_BARRIER, {nullptr, 0}, nullptr};
  entries[2] = {6, RAFT_CHANGE, {c.data(), c.size()}, nullptr};
  raft_message m{};
  m.type = RAFT_IO_APPEND_ENTRIES;
  m.append_entries = {6, 10, 5, 9, entries, 3};
  auto decoded = decode_raft_message(encode(m, 2));
  ASSERT_TRUE(decoded.ok());
  const auto& got = decoded->append_entries;
  EXPECT_EQ(got.prev_log_index, 10u);
  EXPECT_EQ(got.leader_commit, 9u);
  ASSERT_EQ(got.n_entries, 3u);
  EXPECT_EQ(std::string(static_cast<char*>(got.entries[0].buf.base), got.entries[0].buf.len), a);
  EXPECT_EQ(got.entries[1].buf.len, 0u);
  EXPECT_EQ(std::string(static_cast<char*>(got.entries[2].buf.base), got.entries[2].buf.len), c);
  EXPECT_EQ(got.entries[2].type, RAFT_CHANGE);
  EXPECT_EQ(got.entries[0].batch, got.entries[2].batch);
  raft_message copy = *decoded;
  release_raft_message(copy);
}

TEST(RaftCodec, InstallSnapshotRoundTripsItsConfigurationAndData) {
  raft_message m{};
  m.type = RAFT_IO_INSTALL_SNAPSHOT;
  raft_configuration_init(&m.install_snapshot.conf);
  ASSERT_EQ(raft_configuration_add(&m.install_snapshot.conf, 1, "127.0.0.1:7100", RAFT_VOTER), 0);
  ASSERT_EQ(raft_configuration_add(&m.install_snapshot.conf, 2, "127.0.0.2:7100", RAFT_SPARE), 0);
  std::string data = "state";
  m.install_snapshot.term = 4;
  m.install_snapshot.last_index = 100;
  m.install_snapshot.last_term = 3;
  m.install_snapshot.conf_index = 90;
  m.install_snapshot.data = {data.data(), data.size()};
  auto decoded = decode_raft_message(encode(m, 1));
  raft_configuration_close(&m.install_snapshot.conf);
  ASSERT_TRUE(decoded.ok());
  raft_message got = *decoded;
  ASSERT_EQ(got.install_snapshot.conf.n, 2u);
  EXPECT_STREQ(got.install_snapshot.conf.servers[1].address, "127.0.0.2:7100");
  EXPECT_EQ(got.install_snapshot.conf.servers[1].role, RAFT_SPARE);
  EXPECT_EQ(got.install_snapshot.conf_index, 90u);
  EXPECT_EQ(std::string(static_cast<char*>(got.install_snapshot.data.base),
                        got.install_snapshot.data.len),
            data);
  release_raft_message(got);
}

TEST(RaftCodec, ResultsAndTimeoutNowRoundTrip) {
  raft_message m{};
  m.type = RAFT_IO_APPEND_ENTRIES_RESULT;
  m.append_entries_result = {8, 12, 11};
  auto r = decode_raft_message(encode(m, 4));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->append_entries_result.rejected, 12u);
  m = {};
  m.type = RAFT_IO_REQUEST_VOTE_RESULT;
  m.request_vote_result = {8, true, raft_tribool_true};
  r = decode_raft_message(encode(m, 4));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->request_vote_result.vote_granted);
  EXPECT_EQ(r->request_vote_result.pre_vote, raft_tribool_true);
  m = {};
  m.type = RAFT_IO_TIMEOUT_NOW;
  m.timeout_now = {9, 20, 8};
  r = decode_raft_message(encode(m, 4));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->timeout_now.last_log_index, 20u);
}

TEST(RaftCodec, RefusesUnknownTypesTruncationTrailingBytesAndSenderZero) {
  raft_message m{};
  m.type = RAFT_IO_APPEND_ENTRIES_RESULT;
  m.append_entries_result = {8, 0, 11};
  xdr::Buffer good = encode(m, 4);
  for (std::size_t cut = 0; cut < good.size(); ++cut) {
    EXPECT_FALSE(decode_raft_message({good.data(), cut}).ok()) << "cut at " << cut;
  }
  xdr::Buffer longer = good;
  longer.insert(longer.end(), {0, 0, 0, 0});
  EXPECT_FALSE(decode_raft_message(longer).ok());
  xdr::Buffer unknown = good;
  unknown[3] = 99;
  EXPECT_FALSE(decode_raft_message(unknown).ok());
  EXPECT_FALSE(decode_raft_message(encode(m, 0)).ok());
}

TEST(RaftCodec, RefusesLyingEntryCountsAndLengthsWithoutAllocating) {
  xdr::Buffer out;
  xdr::Encoder e(out);
  e.u32(RAFT_IO_APPEND_ENTRIES);
  e.u64(2);
  for (int i = 0; i < 4; ++i) e.u64(1);
  e.u32(4000);  // promises 4000 entries, carries one
  e.u64(1);
  e.u32(RAFT_COMMAND);
  e.u32(0xfffffff0);  // and a length far beyond the message
  EXPECT_FALSE(decode_raft_message(out).ok());

  xdr::Buffer bad_type;
  xdr::Encoder t(bad_type);
  t.u32(RAFT_IO_APPEND_ENTRIES);
  t.u64(2);
  for (int i = 0; i < 4; ++i) t.u64(1);
  t.u32(1);
  t.u64(1);
  t.u32(77);  // not an entry type
  t.u32(0);
  EXPECT_FALSE(decode_raft_message(bad_type).ok());
}

}  // namespace
}  // namespace tidepool::cluster::internal
