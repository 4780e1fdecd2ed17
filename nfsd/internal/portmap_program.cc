#include "nfsd/internal/portmap_program.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/endian/conversion.hpp>

namespace tidepool::nfsd {
namespace {

constexpr std::uint32_t kProcNull = 0;
constexpr std::uint32_t kProcSet = 1;
constexpr std::uint32_t kProcUnset = 2;
constexpr std::uint32_t kProcGetport = 3;
constexpr std::uint32_t kProcDump = 4;

}  // namespace

awaitable<std::optional<AcceptStatus>> PortmapProgram::call(const CallContext& context,
                                                            xdr::Decoder& in, xdr::Encoder& out) {
  switch (context.procedure) {
    case kProcNull: co_return AcceptStatus::success;
    case kProcSet:
    case kProcUnset:
      // This portmapper only describes its own node: others register with rpcbind.
      for (int i = 0; i < 4; ++i) in.u32();
      if (!in.ok()) co_return AcceptStatus::garbage_args;
      out.boolean(false);
      co_return AcceptStatus::success;
    case kProcGetport: {
      std::uint32_t program = in.u32();
      std::uint32_t version = in.u32();
      std::uint32_t protocol = in.u32();
      in.u32();
      if (!in.ok()) co_return AcceptStatus::garbage_args;
      std::uint32_t port = 0;
      for (const auto& m : mappings_) {
        if (m.program == program && m.version == version && m.protocol == protocol) port = m.port;
      }
      out.u32(port);
      co_return AcceptStatus::success;
    }
    case kProcDump:
      for (const auto& m : mappings_) {
        out.boolean(true);
        out.u32(m.program);
        out.u32(m.version);
        out.u32(m.protocol);
        out.u32(m.port);
      }
      out.boolean(false);
      co_return AcceptStatus::success;
    default: co_return AcceptStatus::proc_unavail;
  }
}

Status register_with_rpcbind(const std::vector<PortMapping>& mappings, bool unset) {
  for (std::size_t i = 0; i < mappings.size(); ++i) {
    const PortMapping& m = mappings[i];
    xdr::Buffer message(4);
    xdr::Encoder out(message);
    encode_call(out, 0x74696400u + static_cast<std::uint32_t>(i), PortmapProgram::kProgram, 2,
                unset ? kProcUnset : kProcSet);
    out.u32(m.program);
    out.u32(m.version);
    out.u32(m.protocol);
    out.u32(m.port);
    boost::endian::store_big_u32(message.data(),
                                 0x80000000u | static_cast<std::uint32_t>(message.size() - 4));

    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return error(Errc::io_error, "socket() failed");
    timeval timeout{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(111);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    std::uint8_t reply[64];
    bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
              ::send(fd, message.data(), message.size(), MSG_NOSIGNAL) ==
                  static_cast<ssize_t>(message.size()) &&
              ::recv(fd, reply, sizeof reply, 0) >= 32;
    ::close(fd);
    if (!ok) return error(Errc::unavailable, "no rpcbind answers on 127.0.0.1:111");
    // record mark, xid, REPLY, MSG_ACCEPTED, verifier (2 words), SUCCESS, then the boolean.
    if (boost::endian::load_big_u32(reply + 24) != 0 ||
        (!unset && boost::endian::load_big_u32(reply + 28) != 1)) {
      return error(Errc::unavailable, "rpcbind refused to register program " +
                                          std::to_string(m.program));
    }
  }
  return {};
}

}  // namespace tidepool::nfsd
