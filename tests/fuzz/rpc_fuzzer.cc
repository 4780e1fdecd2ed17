// libFuzzer target: arbitrary bytes as one RPC call message to a node's NFS, MOUNT and PMAP
// programs. The decoders must reject what is malformed without reading past the message or
// allocating by a lying length; whatever decodes runs against a real store. Every reply must
// read back, by RFC 5531's rules, as the reply to the call it answers: its xid, a reply body of a
// known status, and nothing after what that status carries (a NULL procedure's results are
// empty).
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/xdr.h"
#include "tests/fuzz/fuzz_node.h"

namespace {

using tidepool::xdr::Decoder;

constexpr std::uint32_t kReply = 1;
constexpr std::uint32_t kMsgAccepted = 0;
constexpr std::uint32_t kMsgDenied = 1;
constexpr std::uint32_t kSuccess = 0;
constexpr std::uint32_t kProgMismatch = 2;
constexpr std::uint32_t kSystemErr = 5;
constexpr std::uint32_t kRpcMismatch = 0;
constexpr std::uint32_t kAuthError = 1;
constexpr std::uint32_t kLastAuthStat = 7;  // RPCSEC_GSS's are never sent
constexpr std::size_t kMaxAuthBytes = 400;

// Whether `reply` reads as the reply to `call`.
bool answers(std::span<const std::uint8_t> call, std::span<const std::uint8_t> reply) {
  Decoder asked(call);
  const std::uint32_t xid = asked.u32();
  asked.u32();  // CALL
  asked.u32();  // RPC version
  asked.u32();  // program
  asked.u32();  // version
  const std::uint32_t procedure = asked.u32();
  const bool null_call = asked.ok() && procedure == 0;
  Decoder in(reply);
  if (in.u32() != xid || in.u32() != kReply) return false;
  const std::uint32_t status = in.u32();
  if (status == kMsgAccepted) {
    in.u32();  // verifier's flavor
    in.opaque(kMaxAuthBytes);
    const std::uint32_t accepted = in.u32();
    if (!in.ok() || accepted > kSystemErr) return false;
    if (accepted == kProgMismatch) {
      const std::uint32_t low = in.u32();
      const std::uint32_t high = in.u32();
      if (low > high) return false;
    }
    const bool ends_here = accepted != kSuccess || null_call;
    return in.ok() && (!ends_here || in.remaining() == 0);
  }
  if (status != kMsgDenied) return false;
  const std::uint32_t rejected = in.u32();
  if (rejected == kRpcMismatch) {
    const std::uint32_t low = in.u32();
    const std::uint32_t high = in.u32();
    if (low > high) return false;
  } else if (rejected == kAuthError) {
    const std::uint32_t why = in.u32();
    if (why == 0 || why > kLastAuthStat) return false;
  } else {
    return false;
  }
  return in.ok() && in.remaining() == 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static tidepool::fuzz::FuzzNode node("/dev/shm/tidepool-fuzz-" + std::to_string(::getpid()));
  const tidepool::xdr::Buffer reply = node.dispatch({data, size});
  if (!reply.empty() && !answers({data, size}, reply)) std::abort();
  return 0;
}
