// Bad input over a raw TCP socket (RFC 5531): every case gets the RPC-level
// answer the RFC prescribes or a closed connection, and afterwards another
// client is still served.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "tests/process/conformance_fixture.h"
#include "tests/process/raw_rpc.h"

namespace tidepool::test {
namespace {

using ::testing::AnyOf;
using std::chrono::milliseconds;
using std::chrono::seconds;

class RpcBadInput : public ConformanceTest {
 protected:
  void SetUp() override {
    ConformanceTest::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_TRUE(conn_.connect(endpoint().address, endpoint().nfs_port))
        << conn_.error();
  }

  // A fresh client gets answers: NULL and GETATTR of the export root.
  void expect_others_still_served() {
    NfsClient other(endpoint());
    ASSERT_TRUE(other.connected()) << other.error();
    EXPECT_TRUE(other.null());
    EXPECT_EQ(other.getattr(root()).status, NFS3_OK);
  }

  RpcCall nfs_call(uint32_t proc, Bytes args = {}) {
    return RpcCall{.xid = next_xid_++, .program = kNfsProgram, .version = 3,
                   .procedure = proc, .cred_flavor = kAuthSys,
                   .cred_body = auth_sys_body(0, 0), .args = std::move(args)};
  }

  // The nfsstat3 of an accepted, successful reply.
  static uint32_t nfs_status(const RpcReply& reply) {
    XdrReader r(reply.results);
    uint32_t status = 0xffffffff;
    EXPECT_TRUE(r.u32(status));
    return status;
  }

  RawRpcConnection conn_;
  uint32_t next_xid_ = 0x1000;
};

Bytes fh_args(const FileHandle& fh) {
  XdrWriter w;
  w.opaque(fh.data(), fh.size());
  return w.bytes();
}

// --- Framing ----------------------------------------------------------------

TEST_F(RpcBadInput, TruncatedRecordThenEofClosesTheConnection) {
  Bytes call = encode_call(nfs_call(0));
  XdrWriter w;
  w.u32(0x80000000u | 200);  // claims 200 bytes
  w.raw(Bytes(call.begin(), call.begin() + 20));
  ASSERT_TRUE(conn_.send_raw(w.bytes()));
  conn_.shutdown_write();
  EXPECT_TRUE(conn_.wait_closed(seconds(10))) << conn_.error();
  expect_others_still_served();
}

TEST_F(RpcBadInput, TruncatedRecordLeftHangingDoesNotStallOthers) {
  XdrWriter w;
  w.u32(0x80000000u | 4000);
  w.raw(Bytes(100, 0xab));
  ASSERT_TRUE(conn_.send_raw(w.bytes()));
  expect_others_still_served();  // while this connection waits for more
}

TEST_F(RpcBadInput, TruncatedCallHeaderGetsNoSuccessfulReply) {
  XdrWriter w;
  w.u32(0x77).u32(0 /* CALL */).u32(2);  // xid, type, rpcvers, then nothing
  ASSERT_TRUE(conn_.send_record(w.bytes()));
  auto rec = conn_.read_record(seconds(2));
  if (rec) {
    std::string error;
    auto reply = decode_reply(*rec, &error);
    ASSERT_TRUE(reply) << error;
    EXPECT_FALSE(reply->reply_stat == kMsgAccepted &&
                 reply->accept_stat == AcceptStat::kSuccess);
  }
  expect_others_still_served();
}

TEST_F(RpcBadInput, FragmentLongerThanTheBoundClosesTheConnection) {
  XdrWriter w;
  w.u32(0x80000000u | 0x7fffffffu);
  w.raw(Bytes(4096, 0));
  conn_.send_raw(w.bytes());  // may fail once the server has closed
  EXPECT_TRUE(conn_.wait_closed(seconds(10))) << conn_.error();
  expect_others_still_served();
}

TEST_F(RpcBadInput, RecordOfManyFragmentsAboveTheBoundClosesTheConnection) {
  // Non-last fragments of 1 MiB each: the record grows without end.
  XdrWriter w;
  w.u32(1u << 20);
  w.raw(Bytes(1u << 20, 0x11));
  const Bytes& fragment = w.bytes();
  bool closed_early = false;
  for (int i = 0; i < 256; ++i) {  // at most 256 MiB
    if (!conn_.send_raw(fragment)) {
      closed_early = true;
      break;
    }
  }
  EXPECT_TRUE(closed_early || conn_.wait_closed(seconds(10)))
      << "server accepted a 256 MiB record";
  expect_others_still_served();
}

TEST_F(RpcBadInput, ManyCallsInFlightAreAllAnswered) {
  // Pipelined in one write; replies may come in any order.
  Bytes batch;
  std::set<uint32_t> xids;
  for (int i = 0; i < 64; ++i) {
    RpcCall call = nfs_call(i % 2 == 0 ? 0 : 1,
                            i % 2 == 0 ? Bytes{} : fh_args(root()));
    xids.insert(call.xid);
    Bytes msg = encode_call(call);
    XdrWriter w;
    w.u32(0x80000000u | static_cast<uint32_t>(msg.size()));
    w.raw(msg);
    batch.insert(batch.end(), w.bytes().begin(), w.bytes().end());
  }
  ASSERT_TRUE(conn_.send_raw(batch));
  for (int i = 0; i < 64 && !xids.empty(); ++i) {
    auto rec = conn_.read_record(seconds(10));
    ASSERT_TRUE(rec) << conn_.error();
    std::string error;
    auto reply = decode_reply(*rec, &error);
    ASSERT_TRUE(reply) << error;
    EXPECT_EQ(reply->accept_stat, AcceptStat::kSuccess);
    EXPECT_EQ(xids.erase(reply->xid), 1u) << "unexpected xid " << reply->xid;
  }
  EXPECT_TRUE(xids.empty());
}

TEST_F(RpcBadInput, CallSplitIntoSeveralFragmentsIsAnswered) {
  Bytes msg = encode_call(nfs_call(1, fh_args(root())));
  XdrWriter w;
  size_t third = msg.size() / 3;
  w.u32(static_cast<uint32_t>(third));
  w.raw(Bytes(msg.begin(), msg.begin() + static_cast<long>(third)));
  w.u32(static_cast<uint32_t>(third));
  w.raw(Bytes(msg.begin() + static_cast<long>(third),
              msg.begin() + static_cast<long>(2 * third)));
  w.u32(0x80000000u | static_cast<uint32_t>(msg.size() - 2 * third));
  w.raw(Bytes(msg.begin() + static_cast<long>(2 * third), msg.end()));
  ASSERT_TRUE(conn_.send_raw(w.bytes()));
  auto rec = conn_.read_record(seconds(10));
  ASSERT_TRUE(rec) << conn_.error();
  std::string error;
  auto reply = decode_reply(*rec, &error);
  ASSERT_TRUE(reply) << error;
  ASSERT_EQ(reply->accept_stat, AcceptStat::kSuccess);
  EXPECT_EQ(nfs_status(*reply), uint32_t{NFS3_OK});
}

TEST_F(RpcBadInput, RetransmittedCreateAndRemoveGetTheOriginalReplies) {
  // A retransmission (same xid) of a non-idempotent call must not be run
  // again: the duplicate request cache answers it with the first reply.
  FileHandle dir = make_test_dir();
  XdrWriter create;
  create.opaque(dir.data(), dir.size()).string("once");
  create.u32(1 /* GUARDED */);
  for (int i = 0; i < 6; ++i) create.u32(0);  // sattr3: nothing set
  RpcCall call = nfs_call(8 /* CREATE */, create.bytes());
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto reply = conn_.call(call);
    ASSERT_TRUE(reply) << conn_.error();
    ASSERT_EQ(reply->accept_stat, AcceptStat::kSuccess);
    EXPECT_EQ(nfs_status(*reply), uint32_t{NFS3_OK}) << "attempt " << attempt;
  }
  XdrWriter remove;
  remove.opaque(dir.data(), dir.size()).string("once");
  call = nfs_call(12 /* REMOVE */, remove.bytes());
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto reply = conn_.call(call);
    ASSERT_TRUE(reply) << conn_.error();
    ASSERT_EQ(reply->accept_stat, AcceptStat::kSuccess);
    EXPECT_EQ(nfs_status(*reply), uint32_t{NFS3_OK}) << "attempt " << attempt;
  }
  EXPECT_EQ(nfs().lookup(dir, "once").status, NFS3ERR_NOENT);
}

// --- Program, version, procedure -------------------------------------------

TEST_F(RpcBadInput, UnknownProgramIsProgUnavail) {
  RpcCall call = nfs_call(0);
  call.program = 0x20000077;
  auto reply = conn_.call(call);
  ASSERT_TRUE(reply) << conn_.error();
  ASSERT_EQ(reply->reply_stat, kMsgAccepted);
  EXPECT_EQ(reply->accept_stat, AcceptStat::kProgUnavail);
  expect_others_still_served();
}

TEST_F(RpcBadInput, NfsVersion2IsProgMismatchNamingVersion3) {
  RpcCall call = nfs_call(0);
  call.version = 2;
  auto reply = conn_.call(call);
  ASSERT_TRUE(reply) << conn_.error();
  ASSERT_EQ(reply->reply_stat, kMsgAccepted);
  ASSERT_EQ(reply->accept_stat, AcceptStat::kProgMismatch);
  EXPECT_EQ(reply->mismatch_low, 3u);
  EXPECT_GE(reply->mismatch_high, 3u);
  if (is_tided()) {
    EXPECT_EQ(reply->mismatch_high, 3u);
  }
  expect_others_still_served();
}

TEST_F(RpcBadInput, NfsVersion4IsProgMismatchOnTided) {
  if (!is_tided()) GTEST_SKIP() << "a peer may serve NFSv4";
  RpcCall call = nfs_call(0);
  call.version = 4;
  auto reply = conn_.call(call);
  ASSERT_TRUE(reply) << conn_.error();
  ASSERT_EQ(reply->reply_stat, kMsgAccepted);
  ASSERT_EQ(reply->accept_stat, AcceptStat::kProgMismatch);
  EXPECT_EQ(reply->mismatch_low, 3u);
  EXPECT_EQ(reply->mismatch_high, 3u);
  expect_others_still_served();
}

TEST_F(RpcBadInput, UnknownProcedureIsProcUnavail) {
  for (uint32_t proc : {22u, 1000u, 0xffffffffu}) {
    auto reply = conn_.call(nfs_call(proc));
    ASSERT_TRUE(reply) << conn_.error();
    ASSERT_EQ(reply->reply_stat, kMsgAccepted);
    EXPECT_EQ(reply->accept_stat, AcceptStat::kProcUnavail) << "proc " << proc;
  }
  expect_others_still_served();
}

TEST_F(RpcBadInput, RpcVersion3IsRpcMismatch) {
  RpcCall call = nfs_call(0);
  call.rpc_version = 3;
  auto reply = conn_.call(call);
  ASSERT_TRUE(reply) << conn_.error();
  ASSERT_EQ(reply->reply_stat, kMsgDenied);
  EXPECT_EQ(reply->reject_stat, RejectStat::kRpcMismatch);
  EXPECT_EQ(reply->mismatch_low, 2u);
  EXPECT_EQ(reply->mismatch_high, 2u);
  expect_others_still_served();
}

// --- Arguments ---------------------------------------------------------------

TEST_F(RpcBadInput, TruncatedArgumentsAreGarbageArgs) {
  XdrWriter args;
  args.u32(static_cast<uint32_t>(root().size()));  // length, then no bytes
  auto reply = conn_.call(nfs_call(3 /* LOOKUP */, args.bytes()));
  ASSERT_TRUE(reply) << conn_.error();
  ASSERT_EQ(reply->reply_stat, kMsgAccepted);
  EXPECT_EQ(reply->accept_stat, AcceptStat::kGarbageArgs);
  expect_others_still_served();
}

TEST_F(RpcBadInput, HandleLongerThan64BytesIsGarbageArgs) {
  FileHandle huge(65, 'h');
  auto reply = conn_.call(nfs_call(1 /* GETATTR */, fh_args(huge)));
  ASSERT_TRUE(reply) << conn_.error();
  ASSERT_EQ(reply->reply_stat, kMsgAccepted);
  EXPECT_EQ(reply->accept_stat, AcceptStat::kGarbageArgs);
  expect_others_still_served();
}

TEST_F(RpcBadInput, StringWithAHugeLengthIsGarbageArgs) {
  XdrWriter args;
  args.opaque(root().data(), root().size());
  args.u32(0xfffffff0u);  // name length: 4 GiB, and 8 bytes follow
  args.u64(0x6e616d656e616d65ull);
  auto reply = conn_.call(nfs_call(3 /* LOOKUP */, args.bytes()));
  ASSERT_TRUE(reply) << conn_.error();
  ASSERT_EQ(reply->reply_stat, kMsgAccepted);
  EXPECT_EQ(reply->accept_stat, AcceptStat::kGarbageArgs);
  expect_others_still_served();
}

TEST_F(RpcBadInput, WriteWhoseDataIsShorterThanItsLengthIsGarbageArgs) {
  XdrWriter args;
  args.opaque(root().data(), root().size());
  args.u64(0).u32(100).u32(2 /* FILE_SYNC */);
  args.u32(100);  // opaque data<> of 100 bytes, but only 8 follow
  args.u64(0);
  auto reply = conn_.call(nfs_call(7 /* WRITE */, args.bytes()));
  ASSERT_TRUE(reply) << conn_.error();
  ASSERT_EQ(reply->reply_stat, kMsgAccepted);
  EXPECT_EQ(reply->accept_stat, AcceptStat::kGarbageArgs);
  expect_others_still_served();
}

// --- Authentication ----------------------------------------------------------

TEST_F(RpcBadInput, UnsupportedAuthFlavourIsAuthError) {
  for (uint32_t flavor : {kAuthDes, kRpcsecGss, 390003u /* krb5 */, 99u}) {
    RpcCall call = nfs_call(1, fh_args(root()));
    call.cred_flavor = flavor;
    call.cred_body = Bytes(24, 0x5a);
    auto reply = conn_.call(call);
    ASSERT_TRUE(reply) << "flavor " << flavor << ": " << conn_.error();
    EXPECT_EQ(reply->reply_stat, kMsgDenied) << "flavor " << flavor;
    EXPECT_EQ(reply->reject_stat, RejectStat::kAuthError);
    EXPECT_THAT(reply->auth_stat,
                AnyOf(AuthStat::kBadCred, AuthStat::kRejectedCred,
                      AuthStat::kTooWeak))
        << "flavor " << flavor;
  }
  expect_others_still_served();
}

TEST_F(RpcBadInput, AuthSysWithMoreThan16GroupsIsBadCred) {
  std::vector<uint32_t> groups(17, 100);
  RpcCall call = nfs_call(1, fh_args(root()));
  call.cred_body = auth_sys_body(1000, 1000, groups);
  auto reply = conn_.call(call);
  ASSERT_TRUE(reply) << conn_.error();
  EXPECT_EQ(reply->reply_stat, kMsgDenied);
  EXPECT_EQ(reply->reject_stat, RejectStat::kAuthError);
  EXPECT_EQ(reply->auth_stat, AuthStat::kBadCred);
  expect_others_still_served();
}

TEST_F(RpcBadInput, TruncatedAuthSysCredentialIsBadCred) {
  RpcCall call = nfs_call(1, fh_args(root()));
  call.cred_body = Bytes{0, 0, 0, 1, 0, 0, 0, 200};  // stamp, name len 200
  auto reply = conn_.call(call);
  ASSERT_TRUE(reply) << conn_.error();
  EXPECT_EQ(reply->reply_stat, kMsgDenied);
  EXPECT_EQ(reply->reject_stat, RejectStat::kAuthError);
  EXPECT_EQ(reply->auth_stat, AuthStat::kBadCred);
  expect_others_still_served();
}

TEST_F(RpcBadInput, AuthNoneIsAcceptedForNull) {
  RpcCall call = nfs_call(0);
  call.cred_flavor = kAuthNone;
  call.cred_body.clear();
  auto reply = conn_.call(call);
  ASSERT_TRUE(reply) << conn_.error();
  EXPECT_EQ(reply->reply_stat, kMsgAccepted);
  EXPECT_EQ(reply->accept_stat, AcceptStat::kSuccess);
}

// --- File handles ------------------------------------------------------------

TEST_F(RpcBadInput, HandleOfTheWrongSizeIsBadhandle) {
  for (size_t len : {size_t{1}, size_t{8}, root().size() - 1,
                     root().size() + 1}) {
    if (len > 64 || len == 0) continue;
    FileHandle fh(len, 'x');
    std::copy(root().begin(),
              root().begin() + static_cast<long>(std::min(len, root().size())),
              fh.begin());
    auto reply = conn_.call(nfs_call(1 /* GETATTR */, fh_args(fh)));
    ASSERT_TRUE(reply) << conn_.error();
    ASSERT_EQ(reply->accept_stat, AcceptStat::kSuccess);
    EXPECT_EQ(nfs_status(*reply), uint32_t{NFS3ERR_BADHANDLE})
        << "handle of " << len << " bytes";
  }
  expect_others_still_served();
}

TEST_F(RpcBadInput, ForgedHandleIsBadhandle) {
  // Right size, every single bit flipped in turn (bounded to the first 64
  // positions of interest: the whole handle is at most 64 bytes).
  FileHandle base = root();
  for (size_t i = 0; i < base.size(); ++i) {
    FileHandle fh = base;
    fh[i] = static_cast<char>(fh[i] ^ 0x40);
    auto reply = conn_.call(nfs_call(1 /* GETATTR */, fh_args(fh)));
    ASSERT_TRUE(reply) << conn_.error();
    ASSERT_EQ(reply->accept_stat, AcceptStat::kSuccess);
    uint32_t status = nfs_status(*reply);
    if (i + 1 == base.size() || is_tided()) {
      // tided seals the whole handle with a MAC: any change is detected.
      EXPECT_EQ(status, uint32_t{NFS3ERR_BADHANDLE}) << "byte " << i;
    } else {
      EXPECT_NE(status, uint32_t{NFS3_OK}) << "byte " << i;
    }
  }
  expect_others_still_served();
}

}  // namespace
}  // namespace tidepool::test
