#include "nfsd/internal/rpc.h"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

namespace tidepool::nfsd {
namespace {

constexpr std::uint8_t kKept[8] = {0, 0, 0, 7, 0, 0, 0, 8};

// A program that echoes one u32 argument, for exercising the dispatcher.
class EchoProgram final : public RpcProgram {
 public:
  std::uint32_t number() const override { return 400000; }
  std::uint32_t min_version() const override { return 1; }
  std::uint32_t max_version() const override { return 2; }
  awaitable<std::optional<AcceptStatus>> call(const CallContext& c, xdr::Decoder& in,
                                              xdr::Encoder& out) override {
    // 2: leaves kKept by reference between two words, or fails after that with 3.
    if (c.procedure == 2 || c.procedure == 3) {
      out.u32(1);
      if (c.pieces) c.pieces->pieces.push_back({out.size(), kKept, nullptr});
      out.u32(2);
      co_return c.procedure == 2 ? AcceptStatus::success : AcceptStatus::system_err;
    }
    if (c.procedure != 1) co_return AcceptStatus::proc_unavail;
    std::uint32_t v = in.u32();
    if (!in.ok()) co_return AcceptStatus::garbage_args;
    out.u32(v);
    out.u32(c.identity.uid);
    co_return AcceptStatus::success;
  }
};

xdr::Buffer make_call(std::uint32_t program, std::uint32_t version,
                                    std::uint32_t procedure, std::uint32_t flavor,
                                    xdr::Buffer cred,
                                    xdr::Buffer args) {
  xdr::Buffer m;
  xdr::Encoder e(m);
  e.u32(42);
  e.u32(0);
  e.u32(2);
  e.u32(program);
  e.u32(version);
  e.u32(procedure);
  e.u32(flavor);
  e.opaque(cred);
  e.u32(0);
  e.u32(0);
  m.insert(m.end(), args.begin(), args.end());
  return m;
}

xdr::Buffer auth_sys(std::uint32_t uid) {
  xdr::Buffer b;
  xdr::Encoder e(b);
  e.u32(0);
  e.string("host");
  e.u32(uid);
  e.u32(100);
  e.u32(1);
  e.u32(7);
  return b;
}

xdr::Buffer u32_bytes(std::uint32_t v) {
  xdr::Buffer b;
  xdr::Encoder(b).u32(v);
  return b;
}

class DispatcherTest : public ::testing::Test {
 protected:
  DispatcherTest() { dispatcher_.add(&echo_); }

  // Returns the reply words, with any pieces left by reference in their places, or nothing
  // when no reply is sent.
  std::optional<std::vector<std::uint32_t>> dispatch(const xdr::Buffer& call,
                                                     ReplyPieces* pieces = nullptr) {
    boost::asio::io_context io;
    xdr::Buffer reply;
    auto f = boost::asio::co_spawn(
        io,
        dispatcher_.dispatch(call, RpcPeer{boost::asio::ip::address_v4::loopback(), 1000, false},
                             reply, pieces),
        boost::asio::use_future);
    io.run();
    if (!f.get()) return std::nullopt;
    xdr::Buffer whole;
    std::size_t from = 0;
    const std::vector<ReplyPieces::Piece> none;
    for (const ReplyPieces::Piece& piece : pieces ? pieces->pieces : none) {
      whole.insert(whole.end(), reply.begin() + from, reply.begin() + piece.at);
      whole.insert(whole.end(), piece.bytes.begin(), piece.bytes.end());
      from = piece.at;
    }
    whole.insert(whole.end(), reply.begin() + from, reply.end());
    std::vector<std::uint32_t> words;
    xdr::Decoder d(whole);
    while (d.remaining() >= 4) words.push_back(d.u32());
    return words;
  }

  EchoProgram echo_;
  RpcDispatcher dispatcher_;
};

TEST_F(DispatcherTest, SuccessfulCallCarriesResultsAfterTheAcceptedHeader) {
  auto r = dispatch(make_call(400000, 1, 1, 1, auth_sys(1234), u32_bytes(9)));
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, (std::vector<std::uint32_t>{42, 1, 0, 0, 0, 0, 9, 1234}));
}

TEST_F(DispatcherTest, BytesLeftByReferenceGoInTheirPlaceOrAreCopiedWhenTheCallerCannot) {
  ReplyPieces pieces;
  auto r = dispatch(make_call(400000, 1, 2, 0, {}, {}), &pieces);
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, (std::vector<std::uint32_t>{42, 1, 0, 0, 0, 0, 1, 7, 8, 2}));
  ASSERT_EQ(pieces.pieces.size(), 1u);
  EXPECT_EQ(pieces.bytes(), sizeof kKept);
  // Without room for pieces the program writes the words alone.
  r = dispatch(make_call(400000, 1, 2, 0, {}, {}));
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, (std::vector<std::uint32_t>{42, 1, 0, 0, 0, 0, 1, 2}));
}

TEST_F(DispatcherTest, AFailedCallDropsThePiecesItLeft) {
  ReplyPieces pieces;
  auto r = dispatch(make_call(400000, 1, 3, 0, {}, {}), &pieces);
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, (std::vector<std::uint32_t>{42, 1, 0, 0, 0, 5}));
  EXPECT_TRUE(pieces.pieces.empty());
}

TEST_F(DispatcherTest, UnknownProgramIsProgUnavail) {
  auto r = dispatch(make_call(123, 1, 1, 0, {}, {}));
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, (std::vector<std::uint32_t>{42, 1, 0, 0, 0, 1}));
}

TEST_F(DispatcherTest, WrongVersionIsProgMismatchWithTheRange) {
  auto r = dispatch(make_call(400000, 9, 1, 0, {}, {}));
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, (std::vector<std::uint32_t>{42, 1, 0, 0, 0, 2, 1, 2}));
}

TEST_F(DispatcherTest, UnknownProcedureIsProcUnavail) {
  auto r = dispatch(make_call(400000, 1, 7, 0, {}, {}));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->back(), 3u);
  EXPECT_EQ(r->size(), 6u);
}

TEST_F(DispatcherTest, ShortArgumentsAreGarbageArgs) {
  auto r = dispatch(make_call(400000, 1, 1, 0, {}, {}));
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, (std::vector<std::uint32_t>{42, 1, 0, 0, 0, 4}));
}

TEST_F(DispatcherTest, UnsupportedAuthFlavourIsAnAuthError) {
  auto r = dispatch(make_call(400000, 1, 1, 6, {1, 2, 3, 4}, u32_bytes(1)));
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, (std::vector<std::uint32_t>{42, 1, 1, 1, 1}));
}

TEST_F(DispatcherTest, MalformedAuthSysIsBadCred) {
  auto r = dispatch(make_call(400000, 1, 1, 1, {0, 0, 0, 1}, u32_bytes(1)));
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, (std::vector<std::uint32_t>{42, 1, 1, 1, 1}));
}

TEST_F(DispatcherTest, WrongRpcVersionIsRpcMismatch) {
  auto call = make_call(400000, 1, 1, 0, {}, u32_bytes(1));
  call[11] = 3;
  auto r = dispatch(call);
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, (std::vector<std::uint32_t>{42, 1, 1, 0, 2, 2}));
}

TEST_F(DispatcherTest, RepliesAndTruncatedCallsGetNoAnswer) {
  EXPECT_FALSE(dispatch({0, 0, 0, 1}));
  auto reply_message = make_call(400000, 1, 1, 0, {}, {});
  reply_message[7] = 1;
  EXPECT_FALSE(dispatch(reply_message));
}

}  // namespace
}  // namespace tidepool::nfsd
