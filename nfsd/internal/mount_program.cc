#include "nfsd/internal/mount_program.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "nfsd/internal/status_map.h"

namespace tidepool::nfsd {
namespace {

constexpr std::size_t kMaxMountPath = 1024;
// DUMP is informational: past this many (client, path) pairs new mounts are not recorded.
constexpr std::size_t kMaxRecordedMounts = 10000;
constexpr std::uint32_t kProcNull = 0;
constexpr std::uint32_t kProcMnt = 1;
constexpr std::uint32_t kProcDump = 2;
constexpr std::uint32_t kProcUmnt = 3;
constexpr std::uint32_t kProcUmntAll = 4;
constexpr std::uint32_t kProcExport = 5;

// "/ifs//a/./b/" and "/ifs/a/b" name the same mount: DUMP records the latter.
std::string canonical_path(const std::vector<std::string>& components) {
  std::string path;
  for (const auto& c : components) path += "/" + c;
  return path;
}

}  // namespace

awaitable<std::optional<AcceptStatus>> MountProgram::call(const CallContext& context,
                                                          xdr::Decoder& in, xdr::Encoder& out) {
  switch (context.procedure) {
    case kProcNull: co_return AcceptStatus::success;
    case kProcMnt: co_return co_await mnt(context, in, out);
    case kProcDump: co_return dump(context, out);
    case kProcUmnt: {
      std::string path(in.string(kMaxMountPath));
      if (!in.ok()) co_return AcceptStatus::garbage_args;
      std::lock_guard lock(mutex_);
      mounts_.erase({context.client.to_string(), canonical_path(split_path(path))});
      co_return AcceptStatus::success;
    }
    case kProcUmntAll: {
      std::lock_guard lock(mutex_);
      std::erase_if(mounts_, [&](const auto& m) { return m.first == context.client.to_string(); });
      co_return AcceptStatus::success;
    }
    case kProcExport: co_return export_list(context, out);
    default: co_return AcceptStatus::proc_unavail;
  }
}

awaitable<AcceptStatus> MountProgram::mnt(const CallContext& context, xdr::Decoder& in,
                                          xdr::Encoder& out) {
  auto raw = in.opaque(kMaxMountPath + 1);
  if (!in.ok()) co_return AcceptStatus::garbage_args;
  std::string path(reinterpret_cast<const char*>(raw.data()), raw.size());
  auto refuse = [&out](Mount3Status status) {
    out.u32(status);
    return AcceptStatus::success;
  };
  if (path.size() > kMaxMountPath) co_return refuse(MNT3ERR_NAMETOOLONG);
  // ".." would climb out of the export the path is matched against.
  std::vector<std::string> components = split_path(path);
  if (std::find(components.begin(), components.end(), "..") != components.end()) {
    co_return refuse(MNT3ERR_ACCES);
  }
  std::vector<std::string> below;
  // Held across the co_awaits below: `exported` points into it.
  std::shared_ptr<const ExportTable> exports = service_.exports.snapshot();
  const Export* exported = exports->containing(path, below);
  if (!exported) co_return refuse(MNT3ERR_NOENT);
  // As mountd: MNT3ERR_ACCES for a host the export does not name and for an unprivileged port.
  if (Status admitted = service_.admit(*exported, context); !admitted.ok()) {
    spdlog::info("mount of {} refused to {}:{}: {}", path, context.client.to_string(),
                 context.client_port, admitted.message());
    co_return refuse(MNT3ERR_ACCES);
  }
  auto root = co_await service_.export_root(*exported);
  if (!root.ok()) co_return refuse(mount3_status(root.code()));
  auto a = co_await service_.resolve(*root, below);
  if (!a.ok()) co_return refuse(mount3_status(a.code()));
  {
    std::lock_guard lock(mutex_);
    if (mounts_.size() < kMaxRecordedMounts) {
      mounts_.insert({context.client.to_string(), canonical_path(components)});
    }
  }
  out.u32(MNT3_OK);
  out.opaque(service_.sealer()->seal({exported->id(), a->inode, a->generation}));
  out.u32(1);  // auth flavours: AUTH_SYS
  out.u32(static_cast<std::uint32_t>(AuthFlavor::sys));
  co_return AcceptStatus::success;
}

AcceptStatus MountProgram::dump(const CallContext& context, xdr::Encoder& out) {
  // Over UDP the list would be a reflector's payload sent to a forged address: it is empty
  // there, as it is to a host that may mount nothing. A host sees the mounts of the exports it
  // may mount itself. A mount whose export was removed is not listed, but is kept: its handles
  // work again if the export comes back.
  if (context.datagram) {
    out.boolean(false);
    return AcceptStatus::success;
  }
  std::shared_ptr<const ExportTable> exports = service_.exports.snapshot();
  std::vector<std::string> below;
  std::lock_guard lock(mutex_);
  for (const auto& [client, path] : mounts_) {
    const Export* exported = exports->containing(path, below);
    if (!exported || !exported->allows(context.client)) continue;
    out.boolean(true);
    out.string(client);
    out.string(path);
  }
  out.boolean(false);
  return AcceptStatus::success;
}

AcceptStatus MountProgram::export_list(const CallContext& context, xdr::Encoder& out) {
  // Only what this client may mount: clients such as libnfs mount every listed export below
  // the one asked for and give up when one refuses them.
  std::shared_ptr<const ExportTable> exports = service_.exports.snapshot();
  for (const Export& e : exports->all()) {
    if (!e.allows(context.client)) continue;
    out.boolean(true);
    out.string(e.path());
    for (const std::string& client : e.config().clients) {
      out.boolean(true);
      out.string(client);
    }
    out.boolean(false);
  }
  out.boolean(false);
  return AcceptStatus::success;
}

}  // namespace tidepool::nfsd
