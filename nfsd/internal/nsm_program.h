// The network status monitor (NSM, program 100024 version 1), as far as an NFS server needs
// it: a client that restarts tells the servers it used, with SM_NOTIFY, that its locks are gone,
// and NLM frees them. Monitoring on behalf of local programs (SM_MON) is refused: nothing on a
// node asks for it, since NLM watches its own clients.
#pragma once

#include <chrono>
#include <cstdint>

#include "nfsd/internal/nlm_program.h"
#include "nfsd/internal/rpc.h"

namespace tidepool::nfsd {

class NsmProgram final : public RpcProgram {
 public:
  static constexpr std::uint32_t kProgram = 100024;
  static constexpr std::uint32_t kVersion = 1;

  explicit NsmProgram(NlmProgram& nlm);

  std::uint32_t number() const override { return kProgram; }
  std::uint32_t min_version() const override { return kVersion; }
  std::uint32_t max_version() const override { return kVersion; }
  awaitable<std::optional<AcceptStatus>> call(const CallContext& context, xdr::Decoder& arguments,
                                              xdr::Encoder& results) override;

  // This node's NSM state number: odd while it runs, and larger after every restart.
  std::int32_t state() const { return state_; }

 private:
  NlmProgram& nlm_;
  const std::int32_t state_;
};

}  // namespace tidepool::nfsd
