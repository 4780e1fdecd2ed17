// The portmapper (PMAP version 2, RFC 1833): answers GETPORT and DUMP for this node's programs,
// so clients find NFS and MOUNT without port options.
#pragma once

#include <vector>

#include "common/status.h"
#include "nfsd/internal/rpc.h"

namespace tidepool::nfsd {

struct PortMapping {
  std::uint32_t program;
  std::uint32_t version;
  std::uint32_t protocol;  // 6 = TCP, 17 = UDP
  std::uint32_t port;
};

inline constexpr std::uint32_t kProtocolTcp = 6;
inline constexpr std::uint32_t kProtocolUdp = 17;

class PortmapProgram final : public RpcProgram {
 public:
  static constexpr std::uint32_t kProgram = 100000;
  explicit PortmapProgram(std::vector<PortMapping> mappings) : mappings_(std::move(mappings)) {}

  std::uint32_t number() const override { return kProgram; }
  std::uint32_t min_version() const override { return 2; }
  std::uint32_t max_version() const override { return 2; }
  awaitable<std::optional<AcceptStatus>> call(const CallContext& context, xdr::Decoder& arguments,
                                              xdr::Encoder& results) override;

 private:
  const std::vector<PortMapping> mappings_;
};

// Registers (or, with unset, removes) the mappings with an rpcbind on 127.0.0.1:111 through
// PMAP SET/UNSET. Fails when no rpcbind answers within a second.
Status register_with_rpcbind(const std::vector<PortMapping>& mappings, bool unset);

}  // namespace tidepool::nfsd
