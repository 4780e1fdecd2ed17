// MOUNT version 3 (RFC 1813, appendix I): MNT, DUMP, UMNT, UMNTALL, EXPORT.
#pragma once

#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "nfsd/internal/rpc.h"
#include "nfsd/internal/service.h"

namespace tidepool::nfsd {

class MountProgram final : public RpcProgram {
 public:
  static constexpr std::uint32_t kProgram = 100005;
  explicit MountProgram(Service& service) : service_(service) {}

  std::uint32_t number() const override { return kProgram; }
  std::uint32_t min_version() const override { return 3; }
  std::uint32_t max_version() const override { return 3; }
  awaitable<std::optional<AcceptStatus>> call(const CallContext& context, xdr::Decoder& arguments,
                                              xdr::Encoder& results) override;

 private:
  awaitable<AcceptStatus> mnt(const CallContext& context, xdr::Decoder& in, xdr::Encoder& out);
  AcceptStatus dump(const CallContext& context, xdr::Encoder& out);
  AcceptStatus export_list(const CallContext& context, xdr::Encoder& out);

  Service& service_;
  std::mutex mutex_;
  std::set<std::pair<std::string, std::string>> mounts_;  // (client, path); guarded by mutex_
};

}  // namespace tidepool::nfsd
