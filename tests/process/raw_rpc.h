// A deliberately small ONC RPC (RFC 5531) client over a plain TCP socket, for
// the bad-input tests: it can send well-formed calls with any program,
// version, procedure, credential and argument bytes, and it can also send
// records that no real client would (lying lengths, truncated fragments).
//
// It has its own XDR encoder on purpose: the tests must not share the codec
// of the server they check.
//
// Not thread-safe; one RawRpcConnection per thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace tidepool::test {

using Bytes = std::vector<uint8_t>;

// Big-endian XDR encoding into a growing buffer.
class XdrWriter {
 public:
  XdrWriter& u32(uint32_t v);
  XdrWriter& u64(uint64_t v);
  // Fixed-length opaque: the bytes and their padding, no length word.
  XdrWriter& fixed(const void* data, size_t len);
  // Variable-length opaque: length word, bytes, padding.
  XdrWriter& opaque(const void* data, size_t len);
  XdrWriter& opaque(const Bytes& b) { return opaque(b.data(), b.size()); }
  XdrWriter& string(std::string_view s) { return opaque(s.data(), s.size()); }
  // Raw bytes with no padding (for hand-made garbage).
  XdrWriter& raw(const Bytes& b);

  const Bytes& bytes() const { return buf_; }

 private:
  Bytes buf_;
};

// Big-endian XDR decoding; every read is bounds-checked and returns false at
// the end of the buffer.
class XdrReader {
 public:
  explicit XdrReader(const Bytes& b) : buf_(b) {}
  bool u32(uint32_t& v);
  bool u64(uint64_t& v);
  bool opaque(Bytes& out, size_t max_len);
  bool skip_opaque(size_t max_len);
  bool fixed(void* out, size_t len);
  size_t remaining() const { return buf_.size() - pos_; }

 private:
  const Bytes& buf_;
  size_t pos_ = 0;
};

// RFC 5531 constants the tests use.
inline constexpr uint32_t kAuthNone = 0;
inline constexpr uint32_t kAuthSys = 1;
inline constexpr uint32_t kAuthDes = 3;
inline constexpr uint32_t kRpcsecGss = 6;

inline constexpr uint32_t kMsgAccepted = 0;
inline constexpr uint32_t kMsgDenied = 1;

enum class AcceptStat : uint32_t {
  kSuccess = 0,
  kProgUnavail = 1,
  kProgMismatch = 2,
  kProcUnavail = 3,
  kGarbageArgs = 4,
  kSystemErr = 5,
};
enum class RejectStat : uint32_t { kRpcMismatch = 0, kAuthError = 1 };
enum class AuthStat : uint32_t {
  kOk = 0,
  kBadCred = 1,
  kRejectedCred = 2,
  kBadVerf = 3,
  kRejectedVerf = 4,
  kTooWeak = 5,
  kInvalidResp = 6,
  kFailed = 7,
};

// Names for gtest messages.
void PrintTo(AcceptStat s, std::ostream* os);
void PrintTo(RejectStat s, std::ostream* os);
void PrintTo(AuthStat s, std::ostream* os);

inline constexpr uint32_t kPmapProgram = 100000;
inline constexpr uint32_t kNfsProgram = 100003;
inline constexpr uint32_t kMountProgram = 100005;

struct RpcCall {
  uint32_t xid = 0;
  uint32_t rpc_version = 2;
  uint32_t program = kNfsProgram;
  uint32_t version = 3;
  uint32_t procedure = 0;
  uint32_t cred_flavor = kAuthNone;
  Bytes cred_body;
  uint32_t verf_flavor = kAuthNone;
  Bytes verf_body;
  Bytes args;
};

// The body of an AUTH_SYS credential (RFC 5531 appendix A).
Bytes auth_sys_body(uint32_t uid, uint32_t gid,
                    const std::vector<uint32_t>& gids = {},
                    std::string_view machine = "tidepool-test");

// Encodes the call message (no record marking).
Bytes encode_call(const RpcCall& call);

struct RpcReply {
  uint32_t xid = 0;
  uint32_t reply_stat = 0;  // kMsgAccepted or kMsgDenied
  // MSG_ACCEPTED:
  AcceptStat accept_stat = AcceptStat::kSuccess;
  // PROG_MISMATCH (accepted) or RPC_MISMATCH (denied):
  uint32_t mismatch_low = 0;
  uint32_t mismatch_high = 0;
  // MSG_DENIED:
  RejectStat reject_stat = RejectStat::kRpcMismatch;
  AuthStat auth_stat = AuthStat::kOk;
  // Procedure results after accept_stat SUCCESS.
  Bytes results;
};

// Sends `msg` as one UDP datagram from `source` (a local address, any port) to `to`:`port`;
// false if it could not be sent. No reply is awaited.
bool send_datagram(const Bytes& msg, const std::string& source, const std::string& to,
                   uint16_t port);
// Sends `call` as one UDP datagram from `source` to `to`:`port` and returns the reply that
// comes back to that socket before the timeout (nullopt if none, or not a reply).
std::optional<RpcReply> datagram_call(const RpcCall& call, const std::string& source,
                                      const std::string& to, uint16_t port,
                                      std::chrono::milliseconds timeout = std::chrono::seconds(5));
// Parses a reply message; nullopt (with *error set) if it is not one.
std::optional<RpcReply> decode_reply(const Bytes& msg, std::string* error);

// One TCP connection with record marking (RFC 5531 section 11).
class RawRpcConnection {
 public:
  using Clock = std::chrono::steady_clock;

  RawRpcConnection() = default;
  ~RawRpcConnection();
  RawRpcConnection(const RawRpcConnection&) = delete;
  RawRpcConnection& operator=(const RawRpcConnection&) = delete;

  // Connects with a bounded wait, from `source` (a local address) when one is given; false
  // (and error()) on failure.
  bool connect(const std::string& address, uint16_t port,
               std::chrono::milliseconds timeout = std::chrono::seconds(10),
               const std::string& source = {});
  bool connected() const { return fd_ >= 0; }

  // Sends `msg` as one record (one last fragment).
  bool send_record(const Bytes& msg);
  // Sends bytes as they are, without record marking.
  bool send_raw(const Bytes& bytes);
  // Half-closes the connection (no more data from us).
  void shutdown_write();

  // Reads one complete record (up to `max_len` bytes) before the deadline.
  std::optional<Bytes> read_record(std::chrono::milliseconds timeout,
                                   size_t max_len = 16 << 20);
  // Sends `call` and waits for the reply with the same xid.
  std::optional<RpcReply> call(const RpcCall& call,
                               std::chrono::milliseconds timeout =
                                   std::chrono::seconds(10));

  // True if the peer closes (EOF or reset) before the deadline; any data the
  // peer sends first is read and discarded (up to a bound).
  bool wait_closed(std::chrono::milliseconds timeout);

  const std::string& error() const { return error_; }

 private:
  // Reads exactly n bytes before the deadline.
  bool read_exact(uint8_t* out, size_t n, Clock::time_point deadline);

  int fd_ = -1;
  std::string error_;
};

}  // namespace tidepool::test
