// XDR encoding of the NFSv3 (RFC 1813) types the procedures share.
#pragma once

#include <optional>
#include <span>

#include "common/xdr.h"
#include "nfsd/internal/file_handle.h"
#include "store/store.h"

namespace tidepool::nfsd::nfs3 {

inline constexpr std::size_t kMaxHandleBytes = 64;
// Names longer than NAME_MAX are decoded so they can be refused with NAMETOOLONG.
inline constexpr std::size_t kMaxDecodedName = 4096;
inline constexpr std::size_t kMaxPath = 4096;
inline constexpr std::size_t kFattrBytes = 84;

void put_time(xdr::Encoder& out, std::int64_t ns);
void put_fattr(xdr::Encoder& out, const store::Attributes& a, std::uint64_t fsid);
void put_post_op_attr(xdr::Encoder& out, const std::optional<store::Attributes>& a,
                      std::uint64_t fsid);
void put_wcc(xdr::Encoder& out, const store::Wcc& wcc, std::uint64_t fsid);
void put_empty_wcc(xdr::Encoder& out);
void put_handle(xdr::Encoder& out, const FileHandle& handle);
void put_post_op_handle(xdr::Encoder& out, const FileHandle& handle);

std::int64_t get_time(xdr::Decoder& in);
store::AttributeChanges get_sattr(xdr::Decoder& in);

}  // namespace tidepool::nfsd::nfs3
