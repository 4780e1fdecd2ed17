#include "nfsd/internal/status_map.h"

namespace tidepool::nfsd {

Nfs3Status nfs3_status(Errc code) {
  switch (code) {
    case Errc::ok: return NFS3_OK;
    case Errc::not_found: return NFS3ERR_NOENT;
    case Errc::already_exists: return NFS3ERR_EXIST;
    case Errc::not_a_directory: return NFS3ERR_NOTDIR;
    case Errc::is_a_directory: return NFS3ERR_ISDIR;
    case Errc::not_empty: return NFS3ERR_NOTEMPTY;
    case Errc::access_denied: return NFS3ERR_ACCES;
    case Errc::not_permitted: return NFS3ERR_PERM;
    case Errc::invalid_argument: return NFS3ERR_INVAL;
    case Errc::name_too_long: return NFS3ERR_NAMETOOLONG;
    case Errc::file_too_large: return NFS3ERR_FBIG;
    case Errc::too_many_links: return NFS3ERR_MLINK;
    case Errc::cross_device: return NFS3ERR_XDEV;
    case Errc::read_only: return NFS3ERR_ROFS;
    case Errc::stale: return NFS3ERR_STALE;
    case Errc::bad_handle: return NFS3ERR_BADHANDLE;
    case Errc::bad_cookie: return NFS3ERR_BAD_COOKIE;
    case Errc::precondition_failed: return NFS3ERR_NOT_SYNC;
    case Errc::not_supported: return NFS3ERR_NOTSUPP;
    case Errc::no_space: return NFS3ERR_NOSPC;
    case Errc::unavailable:
    case Errc::timed_out:
    case Errc::behind:
    case Errc::fenced: return NFS3ERR_JUKEBOX;
    case Errc::io_error:
    case Errc::corrupt: return NFS3ERR_IO;
    case Errc::internal: return NFS3ERR_SERVERFAULT;
  }
  return NFS3ERR_SERVERFAULT;
}

Mount3Status mount3_status(Errc code) {
  switch (code) {
    case Errc::ok: return MNT3_OK;
    case Errc::not_found:
    case Errc::stale: return MNT3ERR_NOENT;
    case Errc::access_denied: return MNT3ERR_ACCES;
    case Errc::not_permitted: return MNT3ERR_PERM;
    case Errc::not_a_directory: return MNT3ERR_NOTDIR;
    case Errc::invalid_argument: return MNT3ERR_INVAL;
    case Errc::name_too_long: return MNT3ERR_NAMETOOLONG;
    case Errc::not_supported: return MNT3ERR_NOTSUPP;
    case Errc::io_error:
    case Errc::corrupt: return MNT3ERR_IO;
    default: return MNT3ERR_SERVERFAULT;
  }
}

}  // namespace tidepool::nfsd
