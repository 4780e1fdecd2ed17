// Calls from the server to a client's RPC services — NLM's GRANTED callbacks and the results of
// the asynchronous NLM procedures — over TCP, one connection per call, found through the
// client's portmapper.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/address_v4.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstdint>
#include <span>
#include <string>

#include "common/status.h"
#include "common/xdr.h"

namespace tidepool::nfsd {

struct RpcTarget {
  boost::asio::ip::address_v4 host;
  std::uint32_t program = 0;
  std::uint32_t version = 0;
};

// Asks the portmapper on host:111 for the target's TCP port, then calls `procedure` with the
// encoded `arguments` (AUTH_NONE) and returns the encoded results. unavailable when nobody
// answers within `timeout` (for each of the two calls), or the program is not registered;
// corrupt for a reply that refuses the call or does not parse.
boost::asio::awaitable<Result<xdr::Buffer>> call_client(RpcTarget target, std::uint32_t procedure,
                                                        std::span<const std::uint8_t> arguments,
                                                        std::chrono::milliseconds timeout);
// call_client, made again while it fails, after pauses of 1, 2, 3… seconds, `attempts` times in
// all (each failure logged): the first success or the last failure.
boost::asio::awaitable<Result<xdr::Buffer>> call_client_retrying(
    RpcTarget target, std::uint32_t procedure, std::span<const std::uint8_t> arguments,
    std::chrono::milliseconds timeout, int attempts);

// Reads the reply to call `xid` from `socket`, which outlives the call (`where` names the peer
// in errors): one record of at most 64 KiB, in one or more fragments, that accepts the call
// with success; its results. corrupt for a reply that is over-long, refuses the call or does
// not parse; unavailable when the connection fails first.
boost::asio::awaitable<Result<xdr::Buffer>> read_reply(boost::asio::ip::tcp::socket& socket,
                                                       std::uint32_t xid, std::string where);

}  // namespace tidepool::nfsd
