// NFS version 3 (RFC 1813): all 22 procedures over the store.
#pragma once

#include "nfsd/internal/rpc.h"
#include "nfsd/internal/service.h"

namespace tidepool::nfsd {

class Nfs3Program final : public RpcProgram {
 public:
  static constexpr std::uint32_t kProgram = 100003;
  explicit Nfs3Program(Service& service) : service_(service) {}

  std::uint32_t number() const override { return kProgram; }
  std::uint32_t min_version() const override { return 3; }
  std::uint32_t max_version() const override { return 3; }
  awaitable<std::optional<AcceptStatus>> call(const CallContext& context, xdr::Decoder& arguments,
                                              xdr::Encoder& results) override;

  struct Call;
  struct Target;

 private:
  awaitable<AcceptStatus> null(Call& call);
  awaitable<AcceptStatus> getattr(Call& call);
  awaitable<AcceptStatus> setattr(Call& call);
  awaitable<AcceptStatus> lookup(Call& call);
  awaitable<AcceptStatus> access(Call& call);
  awaitable<AcceptStatus> readlink(Call& call);
  awaitable<AcceptStatus> read(Call& call);
  awaitable<AcceptStatus> write(Call& call);
  awaitable<AcceptStatus> create(Call& call);
  awaitable<AcceptStatus> mkdir(Call& call);
  awaitable<AcceptStatus> symlink(Call& call);
  awaitable<AcceptStatus> mknod(Call& call);
  awaitable<AcceptStatus> remove(Call& call);
  awaitable<AcceptStatus> rmdir(Call& call);
  awaitable<AcceptStatus> rename(Call& call);
  awaitable<AcceptStatus> link(Call& call);
  awaitable<AcceptStatus> readdir(Call& call);
  awaitable<AcceptStatus> readdirplus(Call& call);
  awaitable<AcceptStatus> fsstat(Call& call);
  awaitable<AcceptStatus> fsinfo(Call& call);
  awaitable<AcceptStatus> pathconf(Call& call);
  awaitable<AcceptStatus> commit(Call& call);

  using Handler = awaitable<AcceptStatus> (Nfs3Program::*)(Call&);
  // What a failure reply carries besides its status: nothing, a post_op_attr, a wcc_data,
  // two of them (RENAME), or a post_op_attr and a wcc_data (LINK).
  enum class FailureBody : std::uint8_t { none, attr, wcc, two_wcc, attr_and_wcc };
  struct Procedure {
    Handler handler;
    bool replay_from_cache;  // non-idempotent: retransmissions get the original reply
    FailureBody failure;
  };
  static const Procedure kProcedures[22];

  // A call answered "retry later" (JUKEBOX): this node may not serve it now.
  static AcceptStatus put_retry_later(xdr::Encoder& out, FailureBody failure);

  Result<Target> target(const Call& call, std::span<const std::uint8_t> handle) const;
  // The target of a call that changes something; when there is none, the failure (with an
  // empty wcc_data) is already in the reply.
  std::optional<Target> changeable(Call& call, std::span<const std::uint8_t> handle) const;
  // The attributes of what the handle names (FSSTAT, FSINFO and PATHCONF open their replies
  // with them); when there are none, the failure is already in the reply.
  awaitable<std::optional<store::Attributes>> attributes_or_fail(
      Call& call, std::span<const std::uint8_t> handle);
  // NFS3_OK and the wcc_data, or the failure.
  AcceptStatus reply_wcc(Call& call, const Result<store::Wcc>& r) const;
  awaitable<AcceptStatus> remove_entry(Call& call, bool directory);
  FileHandle handle_for(const Target& parent, const store::Attributes& a) const;
  awaitable<AcceptStatus> new_object(Call& call, const Target& dir,
                                     Result<store::NewObject> made);
  awaitable<AcceptStatus> list_directory(Call& call, bool plus);

  Service& service_;
};

}  // namespace tidepool::nfsd
