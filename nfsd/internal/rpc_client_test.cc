// How the node reads a client's answer to its callbacks: the record may come in fragments, and
// what is too long, answers another call or refuses the call is no answer.
#include "nfsd/internal/rpc_client.h"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/asio/write.hpp>
#include <vector>

#include "nfsd/internal/nlm_program.h"

namespace tidepool::nfsd {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;

constexpr std::uint32_t kXid = 0x6e6c6d07u;

// An accepted reply to `xid` with results nlm4_res{cookie, status}.
xdr::Buffer granted_reply(std::uint32_t xid, std::uint32_t status) {
  xdr::Buffer reply;
  xdr::Encoder out(reply);
  for (std::uint32_t word : {xid, 1u, 0u, 0u, 0u, 0u}) out.u32(word);
  out.opaque(std::vector<std::uint8_t>{7});
  out.u32(status);
  return reply;
}

void fragment(xdr::Buffer& stream, std::span<const std::uint8_t> bytes, bool last) {
  xdr::Encoder(stream).u32((last ? 0x80000000u : 0u) | static_cast<std::uint32_t>(bytes.size()));
  xdr::append(stream, bytes);
}

// What read_reply makes of `stream`, sent whole and then the connection's end.
Result<xdr::Buffer> read_from(const xdr::Buffer& stream, std::uint32_t xid) {
  asio::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  tcp::socket client(io);
  client.connect(acceptor.local_endpoint());
  tcp::socket server = acceptor.accept();
  asio::write(server, asio::buffer(stream));
  server.shutdown(tcp::socket::shutdown_send);
  auto reading = asio::co_spawn(io, read_reply(client, xid, "the client"), asio::use_future);
  io.run();
  return reading.get();
}

TEST(ReadReply, AReplyInFragmentsGivesItsResults) {
  const xdr::Buffer reply = granted_reply(kXid, 0);
  xdr::Buffer stream;
  fragment(stream, std::span(reply).first(10), false);
  fragment(stream, std::span(reply).subspan(10), true);
  auto results = read_from(stream, kXid);
  ASSERT_TRUE(results.ok()) << results.status().to_string();
  EXPECT_TRUE(client_took_grant(*results));

  const xdr::Buffer refused = granted_reply(kXid, 1);  // NLM4_DENIED
  xdr::Buffer whole;
  fragment(whole, refused, true);
  auto denied = read_from(whole, kXid);
  ASSERT_TRUE(denied.ok());
  EXPECT_FALSE(client_took_grant(*denied));
}

TEST(ReadReply, AnotherCallsReplyARefusalOrAnOverLongRecordIsNoAnswer) {
  xdr::Buffer other;
  fragment(other, granted_reply(kXid + 1, 0), true);
  EXPECT_EQ(read_from(other, kXid).code(), Errc::corrupt);

  xdr::Buffer refusal = granted_reply(kXid, 0);
  refusal[23] = 1;  // accept status PROG_UNAVAIL
  xdr::Buffer refused;
  fragment(refused, refusal, true);
  EXPECT_EQ(read_from(refused, kXid).code(), Errc::corrupt);

  // A fragment that claims more than a reply may be, though the bytes never come.
  xdr::Buffer over_long;
  xdr::Encoder(over_long).u32(0x80000000u | (64u * 1024 + 1));
  EXPECT_EQ(read_from(over_long, kXid).code(), Errc::corrupt);

  const xdr::Buffer whole = granted_reply(kXid, 0);
  xdr::Buffer cut;
  fragment(cut, std::span(whole).first(8), false);
  EXPECT_EQ(read_from(cut, kXid).code(), Errc::unavailable);
}

}  // namespace
}  // namespace tidepool::nfsd
