#include "nfsd/internal/nfs3_xdr.h"

#include <algorithm>

namespace tidepool::nfsd::nfs3 {

namespace {
constexpr std::int64_t kNanosPerSecond = 1'000'000'000;
}

void put_time(xdr::Encoder& out, std::int64_t ns) {
  // nfstime3 has unsigned 32-bit seconds: clamp what does not fit.
  std::int64_t seconds = ns / kNanosPerSecond;
  std::int64_t nanos = ns % kNanosPerSecond;
  if (ns < 0) seconds = nanos = 0;
  seconds = std::min<std::int64_t>(seconds, 0xffffffff);
  out.u32(static_cast<std::uint32_t>(seconds));
  out.u32(static_cast<std::uint32_t>(nanos));
}

std::int64_t get_time(xdr::Decoder& in) {
  std::int64_t seconds = in.u32();
  std::int64_t nanos = in.u32();
  if (nanos >= kNanosPerSecond) in.fail();
  return seconds * kNanosPerSecond + nanos;
}

void put_fattr(xdr::Encoder& out, const store::Attributes& a, std::uint64_t fsid) {
  out.u32(static_cast<std::uint32_t>(a.type));
  out.u32(a.mode);
  out.u32(a.nlink);
  out.u32(a.uid);
  out.u32(a.gid);
  out.u64(a.size);
  out.u64(a.used);
  out.u32(a.rdev_major);
  out.u32(a.rdev_minor);
  out.u64(fsid);
  out.u64(a.inode);
  put_time(out, a.atime_ns);
  put_time(out, a.mtime_ns);
  put_time(out, a.ctime_ns);
}

void put_post_op_attr(xdr::Encoder& out, const std::optional<store::Attributes>& a,
                      std::uint64_t fsid) {
  out.boolean(a.has_value());
  if (a) put_fattr(out, *a, fsid);
}

void put_wcc(xdr::Encoder& out, const store::Wcc& wcc, std::uint64_t fsid) {
  out.boolean(wcc.before.has_value());
  if (wcc.before) {
    out.u64(wcc.before->size);
    put_time(out, wcc.before->mtime_ns);
    put_time(out, wcc.before->ctime_ns);
  }
  put_post_op_attr(out, wcc.after, fsid);
}

void put_empty_wcc(xdr::Encoder& out) {
  out.boolean(false);
  out.boolean(false);
}

void put_handle(xdr::Encoder& out, const FileHandle& handle) { out.opaque(handle); }

void put_post_op_handle(xdr::Encoder& out, const FileHandle& handle) {
  out.boolean(true);
  put_handle(out, handle);
}

store::AttributeChanges get_sattr(xdr::Decoder& in) {
  store::AttributeChanges c;
  if (in.boolean()) c.mode = in.u32();
  if (in.boolean()) c.uid = in.u32();
  if (in.boolean()) c.gid = in.u32();
  if (in.boolean()) c.size = in.u64();
  auto get_how = [&in](store::SetTime& how, std::int64_t& ns) {
    switch (in.u32()) {
      case 0: how = store::SetTime::keep; break;
      case 1: how = store::SetTime::server_time; break;
      case 2:
        how = store::SetTime::client_time;
        ns = get_time(in);
        break;
      default: in.fail();
    }
  };
  get_how(c.atime, c.atime_ns);
  get_how(c.mtime, c.mtime_ns);
  return c;
}

}  // namespace tidepool::nfsd::nfs3
