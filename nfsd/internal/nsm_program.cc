#include "nfsd/internal/nsm_program.h"

#include <spdlog/spdlog.h>

#include <string>

namespace tidepool::nfsd {
namespace {

enum Procedure : std::uint32_t {
  kNull = 0,
  kStat = 1,
  kMon = 2,
  kUnmon = 3,
  kUnmonAll = 4,
  kSimuCrash = 5,
  kNotify = 6,
};

enum StatResult : std::uint32_t { kStatSucc = 0, kStatFail = 1 };

constexpr std::size_t kMaxName = 1024;  // SM_MAXSTRLEN

// Odd, and growing with the clock from one start to the next, so no state needs keeping on
// disk: seconds since 2020, which fit 31 bits until 2088.
std::int32_t fresh_state() {
  constexpr std::int64_t k2020 = 1'577'836'800;
  const std::int64_t seconds = std::chrono::duration_cast<std::chrono::seconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count() -
                               k2020;
  return static_cast<std::int32_t>(seconds & 0x7ffffffe) | 1;
}

}  // namespace

NsmProgram::NsmProgram(NlmProgram& nlm) : nlm_(nlm), state_(fresh_state()) {}

awaitable<std::optional<AcceptStatus>> NsmProgram::call(const CallContext& context,
                                                        xdr::Decoder& in, xdr::Encoder& out) {
  switch (context.procedure) {
    case kNull:
      co_return AcceptStatus::success;
    case kStat: {
      in.string(kMaxName);
      if (!in.ok()) co_return AcceptStatus::garbage_args;
      out.u32(kStatSucc);
      out.u32(static_cast<std::uint32_t>(state_));
      co_return AcceptStatus::success;
    }
    case kMon: {
      in.string(kMaxName);  // mon_name
      in.string(kMaxName);  // my_id.my_name
      in.u32();             // my_prog
      in.u32();             // my_vers
      in.u32();             // my_proc
      in.fixed_opaque(16);  // priv
      if (!in.ok()) co_return AcceptStatus::garbage_args;
      out.u32(kStatFail);
      out.u32(static_cast<std::uint32_t>(state_));
      co_return AcceptStatus::success;
    }
    case kUnmon:
    case kUnmonAll:
      // Nothing is monitored for anybody: the arguments do not matter.
      out.u32(static_cast<std::uint32_t>(state_));
      co_return AcceptStatus::success;
    case kNotify: {
      const std::string name(in.string(kMaxName));
      const std::uint32_t new_state = in.u32();
      if (!in.ok()) co_return AcceptStatus::garbage_args;
      spdlog::info("nsm: {} ({}) restarted (state {}): freeing its locks", name,
                   context.client.to_string(), new_state);
      nlm_.client_rebooted(name, context.client);
      co_return AcceptStatus::success;
    }
    case kSimuCrash:
    default:
      co_return AcceptStatus::proc_unavail;
  }
}

}  // namespace tidepool::nfsd
