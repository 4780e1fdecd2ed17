#include "tests/process/raw_rpc.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tidepool::test {
namespace {

int remaining_ms(RawRpcConnection::Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - RawRpcConnection::Clock::now());
  if (left.count() <= 0) return 0;
  return static_cast<int>(left.count());
}

}  // namespace

void PrintTo(AcceptStat s, std::ostream* os) {
  static const char* const kNames[] = {"SUCCESS",      "PROG_UNAVAIL",
                                       "PROG_MISMATCH", "PROC_UNAVAIL",
                                       "GARBAGE_ARGS", "SYSTEM_ERR"};
  auto v = static_cast<uint32_t>(s);
  *os << (v < 6 ? kNames[v] : "accept_stat") << " (" << v << ")";
}

void PrintTo(RejectStat s, std::ostream* os) {
  auto v = static_cast<uint32_t>(s);
  *os << (v == 0 ? "RPC_MISMATCH" : v == 1 ? "AUTH_ERROR" : "reject_stat")
      << " (" << v << ")";
}

void PrintTo(AuthStat s, std::ostream* os) {
  static const char* const kNames[] = {
      "AUTH_OK",      "AUTH_BADCRED",      "AUTH_REJECTEDCRED",
      "AUTH_BADVERF", "AUTH_REJECTEDVERF", "AUTH_TOOWEAK",
      "AUTH_INVALIDRESP", "AUTH_FAILED"};
  auto v = static_cast<uint32_t>(s);
  *os << (v < 8 ? kNames[v] : "auth_stat") << " (" << v << ")";
}

XdrWriter& XdrWriter::u32(uint32_t v) {
  buf_.push_back(static_cast<uint8_t>(v >> 24));
  buf_.push_back(static_cast<uint8_t>(v >> 16));
  buf_.push_back(static_cast<uint8_t>(v >> 8));
  buf_.push_back(static_cast<uint8_t>(v));
  return *this;
}

XdrWriter& XdrWriter::u64(uint64_t v) {
  u32(static_cast<uint32_t>(v >> 32));
  return u32(static_cast<uint32_t>(v));
}

XdrWriter& XdrWriter::fixed(const void* data, size_t len) {
  const auto* p = static_cast<const uint8_t*>(data);
  buf_.insert(buf_.end(), p, p + len);
  while (buf_.size() % 4 != 0) buf_.push_back(0);
  return *this;
}

XdrWriter& XdrWriter::opaque(const void* data, size_t len) {
  u32(static_cast<uint32_t>(len));
  return fixed(data, len);
}

XdrWriter& XdrWriter::raw(const Bytes& b) {
  buf_.insert(buf_.end(), b.begin(), b.end());
  return *this;
}

bool XdrReader::u32(uint32_t& v) {
  if (remaining() < 4) return false;
  v = (uint32_t{buf_[pos_]} << 24) | (uint32_t{buf_[pos_ + 1]} << 16) |
      (uint32_t{buf_[pos_ + 2]} << 8) | uint32_t{buf_[pos_ + 3]};
  pos_ += 4;
  return true;
}

bool XdrReader::u64(uint64_t& v) {
  uint32_t hi = 0, lo = 0;
  if (!u32(hi) || !u32(lo)) return false;
  v = (uint64_t{hi} << 32) | lo;
  return true;
}

bool XdrReader::fixed(void* out, size_t len) {
  size_t padded = (len + 3) & ~size_t{3};
  if (remaining() < padded) return false;
  if (len > 0) std::memcpy(out, buf_.data() + pos_, len);
  pos_ += padded;
  return true;
}

bool XdrReader::opaque(Bytes& out, size_t max_len) {
  uint32_t len = 0;
  if (!u32(len) || len > max_len) return false;
  out.resize(len);
  return fixed(out.data(), len);
}

bool XdrReader::skip_opaque(size_t max_len) {
  Bytes ignored;
  return opaque(ignored, max_len);
}

Bytes auth_sys_body(uint32_t uid, uint32_t gid,
                    const std::vector<uint32_t>& gids,
                    std::string_view machine) {
  XdrWriter w;
  w.u32(0x5eed);  // stamp
  w.string(machine);
  w.u32(uid).u32(gid);
  w.u32(static_cast<uint32_t>(gids.size()));
  for (uint32_t g : gids) w.u32(g);
  return w.bytes();
}

Bytes encode_call(const RpcCall& call) {
  XdrWriter w;
  w.u32(call.xid).u32(0 /* CALL */).u32(call.rpc_version);
  w.u32(call.program).u32(call.version).u32(call.procedure);
  w.u32(call.cred_flavor).opaque(call.cred_body);
  w.u32(call.verf_flavor).opaque(call.verf_body);
  w.raw(call.args);
  return w.bytes();
}

std::optional<RpcReply> decode_reply(const Bytes& msg, std::string* error) {
  XdrReader r(msg);
  RpcReply reply;
  uint32_t mtype = 0;
  if (!r.u32(reply.xid) || !r.u32(mtype) || mtype != 1 ||
      !r.u32(reply.reply_stat)) {
    *error = "not an RPC reply";
    return std::nullopt;
  }
  if (reply.reply_stat == kMsgAccepted) {
    uint32_t flavor = 0, stat = 0;
    if (!r.u32(flavor) || !r.skip_opaque(400) || !r.u32(stat)) {
      *error = "truncated accepted reply";
      return std::nullopt;
    }
    reply.accept_stat = static_cast<AcceptStat>(stat);
    if (reply.accept_stat == AcceptStat::kProgMismatch &&
        (!r.u32(reply.mismatch_low) || !r.u32(reply.mismatch_high))) {
      *error = "truncated PROG_MISMATCH reply";
      return std::nullopt;
    }
    if (reply.accept_stat == AcceptStat::kSuccess) {
      reply.results.assign(msg.end() - static_cast<long>(r.remaining()),
                           msg.end());
    }
    return reply;
  }
  if (reply.reply_stat == kMsgDenied) {
    uint32_t stat = 0;
    if (!r.u32(stat)) {
      *error = "truncated denied reply";
      return std::nullopt;
    }
    reply.reject_stat = static_cast<RejectStat>(stat);
    if (reply.reject_stat == RejectStat::kRpcMismatch) {
      if (!r.u32(reply.mismatch_low) || !r.u32(reply.mismatch_high)) {
        *error = "truncated RPC_MISMATCH reply";
        return std::nullopt;
      }
    } else {
      uint32_t auth = 0;
      if (!r.u32(auth)) {
        *error = "truncated AUTH_ERROR reply";
        return std::nullopt;
      }
      reply.auth_stat = static_cast<AuthStat>(auth);
    }
    return reply;
  }
  *error = "unknown reply_stat " + std::to_string(reply.reply_stat);
  return std::nullopt;
}

RawRpcConnection::~RawRpcConnection() {
  if (fd_ >= 0) ::close(fd_);
}

bool RawRpcConnection::connect(const std::string& address, uint16_t port,
                               std::chrono::milliseconds timeout, const std::string& source) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  if (::inet_pton(AF_INET, address.c_str(), &sa.sin_addr) != 1) {
    error_ = "bad address " + address;
    return false;
  }
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    error_ = std::string("socket: ") + std::strerror(errno);
    return false;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (!source.empty()) {
    sockaddr_in local{};
    local.sin_family = AF_INET;
    if (::inet_pton(AF_INET, source.c_str(), &local.sin_addr) != 1 ||
        ::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0) {
      error_ = "cannot send from " + source + ": " + std::strerror(errno);
      ::close(fd);
      return false;
    }
  }
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 &&
      errno != EINPROGRESS) {
    error_ = std::string("connect: ") + std::strerror(errno);
    ::close(fd);
    return false;
  }
  pollfd p{fd, POLLOUT, 0};
  int n = ::poll(&p, 1, static_cast<int>(timeout.count()));
  int soerr = 0;
  socklen_t len = sizeof soerr;
  ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len);
  if (n != 1 || soerr != 0) {
    error_ = std::string("connect: ") +
             (n == 1 ? std::strerror(soerr) : "timed out");
    ::close(fd);
    return false;
  }
  fd_ = fd;
  return true;
}

namespace {

// A UDP socket bound to `source` that has sent `msg` to `to`:`port`; -1 if it could not.
int send_from(const Bytes& msg, const std::string& source, const std::string& to,
              uint16_t port) {
  sockaddr_in local{};
  local.sin_family = AF_INET;
  sockaddr_in remote{};
  remote.sin_family = AF_INET;
  remote.sin_port = htons(port);
  if (::inet_pton(AF_INET, source.c_str(), &local.sin_addr) != 1 ||
      ::inet_pton(AF_INET, to.c_str(), &remote.sin_addr) != 1) {
    return -1;
  }
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const bool sent =
      ::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local) == 0 &&
      ::sendto(fd, msg.data(), msg.size(), 0, reinterpret_cast<sockaddr*>(&remote),
               sizeof remote) == static_cast<ssize_t>(msg.size());
  if (!sent) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

bool send_datagram(const Bytes& msg, const std::string& source, const std::string& to,
                   uint16_t port) {
  int fd = send_from(msg, source, to, port);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

std::optional<RpcReply> datagram_call(const RpcCall& call, const std::string& source,
                                      const std::string& to, uint16_t port,
                                      std::chrono::milliseconds timeout) {
  int fd = send_from(encode_call(call), source, to, port);
  if (fd < 0) return std::nullopt;
  Bytes datagram(65536);
  pollfd p{fd, POLLIN, 0};
  ssize_t n = ::poll(&p, 1, static_cast<int>(timeout.count())) == 1
                  ? ::recv(fd, datagram.data(), datagram.size(), 0)
                  : -1;
  ::close(fd);
  if (n < 0) return std::nullopt;
  datagram.resize(static_cast<size_t>(n));
  std::string error;
  return decode_reply(datagram, &error);
}

bool RawRpcConnection::send_raw(const Bytes& bytes) {
  auto deadline = Clock::now() + std::chrono::seconds(10);
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off,
                       MSG_NOSIGNAL);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd_, POLLOUT, 0};
      int ms = remaining_ms(deadline);
      if (ms == 0 || ::poll(&p, 1, ms) <= 0) {
        error_ = "send timed out";
        return false;
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    error_ = std::string("send: ") + std::strerror(errno);
    return false;
  }
  return true;
}

bool RawRpcConnection::send_record(const Bytes& msg) {
  XdrWriter w;
  w.u32(0x80000000u | static_cast<uint32_t>(msg.size()));
  w.raw(msg);
  return send_raw(w.bytes());
}

void RawRpcConnection::shutdown_write() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_WR);
}

bool RawRpcConnection::read_exact(uint8_t* out, size_t n,
                                  Clock::time_point deadline) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::recv(fd_, out + got, n - got, 0);
    if (r > 0) {
      got += static_cast<size_t>(r);
      continue;
    }
    if (r == 0) {
      error_ = "connection closed by peer";
      return false;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      error_ = std::string("recv: ") + std::strerror(errno);
      return false;
    }
    pollfd p{fd_, POLLIN, 0};
    int ms = remaining_ms(deadline);
    if (ms == 0 || ::poll(&p, 1, ms) <= 0) {
      error_ = "timed out waiting for the reply";
      return false;
    }
  }
  return true;
}

std::optional<Bytes> RawRpcConnection::read_record(
    std::chrono::milliseconds timeout, size_t max_len) {
  auto deadline = Clock::now() + timeout;
  Bytes record;
  for (int fragments = 0; fragments < 1024; ++fragments) {
    uint8_t hdr[4];
    if (!read_exact(hdr, 4, deadline)) return std::nullopt;
    uint32_t mark = (uint32_t{hdr[0]} << 24) | (uint32_t{hdr[1]} << 16) |
                    (uint32_t{hdr[2]} << 8) | uint32_t{hdr[3]};
    size_t len = mark & 0x7fffffffu;
    if (record.size() + len > max_len) {
      error_ = "reply record too large";
      return std::nullopt;
    }
    size_t old = record.size();
    record.resize(old + len);
    if (!read_exact(record.data() + old, len, deadline)) return std::nullopt;
    if (mark & 0x80000000u) return record;
  }
  error_ = "too many fragments in a reply";
  return std::nullopt;
}

std::optional<RpcReply> RawRpcConnection::call(
    const RpcCall& call, std::chrono::milliseconds timeout) {
  if (!send_record(encode_call(call))) return std::nullopt;
  auto deadline = Clock::now() + timeout;
  for (int replies = 0; replies < 64; ++replies) {
    int ms = remaining_ms(deadline);
    if (ms == 0) break;
    auto rec = read_record(std::chrono::milliseconds(ms));
    if (!rec) return std::nullopt;
    auto reply = decode_reply(*rec, &error_);
    if (!reply) return std::nullopt;
    if (reply->xid == call.xid) return reply;
  }
  error_ = "no reply with xid " + std::to_string(call.xid);
  return std::nullopt;
}

bool RawRpcConnection::wait_closed(std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  uint8_t buf[65536];
  size_t discarded = 0;
  while (discarded < (64u << 20)) {
    ssize_t r = ::recv(fd_, buf, sizeof buf, 0);
    if (r == 0) return true;
    if (r > 0) {
      discarded += static_cast<size_t>(r);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == ECONNRESET || errno == EPIPE) return true;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      error_ = std::string("recv: ") + std::strerror(errno);
      return false;
    }
    pollfd p{fd_, POLLIN, 0};
    int ms = remaining_ms(deadline);
    if (ms == 0 || ::poll(&p, 1, ms) <= 0) {
      error_ = "connection still open";
      return false;
    }
  }
  error_ = "peer keeps sending";
  return false;
}

}  // namespace tidepool::test
