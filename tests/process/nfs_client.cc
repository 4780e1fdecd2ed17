#include "tests/process/nfs_client.h"

#include <gtest/gtest.h>
#include <poll.h>

#include "tests/process/raw_rpc.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

namespace tidepool::test {

const char* nfsstat3_name(int status) {
  switch (status) {
    case NFS3_OK: return "NFS3_OK";
    case NFS3ERR_PERM: return "NFS3ERR_PERM";
    case NFS3ERR_NOENT: return "NFS3ERR_NOENT";
    case NFS3ERR_IO: return "NFS3ERR_IO";
    case NFS3ERR_NXIO: return "NFS3ERR_NXIO";
    case NFS3ERR_ACCES: return "NFS3ERR_ACCES";
    case NFS3ERR_EXIST: return "NFS3ERR_EXIST";
    case NFS3ERR_XDEV: return "NFS3ERR_XDEV";
    case NFS3ERR_NODEV: return "NFS3ERR_NODEV";
    case NFS3ERR_NOTDIR: return "NFS3ERR_NOTDIR";
    case NFS3ERR_ISDIR: return "NFS3ERR_ISDIR";
    case NFS3ERR_INVAL: return "NFS3ERR_INVAL";
    case NFS3ERR_FBIG: return "NFS3ERR_FBIG";
    case NFS3ERR_NOSPC: return "NFS3ERR_NOSPC";
    case NFS3ERR_ROFS: return "NFS3ERR_ROFS";
    case NFS3ERR_MLINK: return "NFS3ERR_MLINK";
    case NFS3ERR_NAMETOOLONG: return "NFS3ERR_NAMETOOLONG";
    case NFS3ERR_NOTEMPTY: return "NFS3ERR_NOTEMPTY";
    case NFS3ERR_DQUOT: return "NFS3ERR_DQUOT";
    case NFS3ERR_STALE: return "NFS3ERR_STALE";
    case NFS3ERR_REMOTE: return "NFS3ERR_REMOTE";
    case NFS3ERR_BADHANDLE: return "NFS3ERR_BADHANDLE";
    case NFS3ERR_NOT_SYNC: return "NFS3ERR_NOT_SYNC";
    case NFS3ERR_BAD_COOKIE: return "NFS3ERR_BAD_COOKIE";
    case NFS3ERR_NOTSUPP: return "NFS3ERR_NOTSUPP";
    case NFS3ERR_TOOSMALL: return "NFS3ERR_TOOSMALL";
    case NFS3ERR_SERVERFAULT: return "NFS3ERR_SERVERFAULT";
    case NFS3ERR_BADTYPE: return "NFS3ERR_BADTYPE";
    case NFS3ERR_JUKEBOX: return "NFS3ERR_JUKEBOX";
    case kNoReply: return "(no reply)";
    default: return "(unknown nfsstat3)";
  }
}

const char* mountstat3_name(int status) {
  switch (status) {
    case MNT3_OK: return "MNT3_OK";
    case MNT3ERR_PERM: return "MNT3ERR_PERM";
    case MNT3ERR_NOENT: return "MNT3ERR_NOENT";
    case MNT3ERR_IO: return "MNT3ERR_IO";
    case MNT3ERR_ACCES: return "MNT3ERR_ACCES";
    case MNT3ERR_NOTDIR: return "MNT3ERR_NOTDIR";
    case MNT3ERR_INVAL: return "MNT3ERR_INVAL";
    case MNT3ERR_NAMETOOLONG: return "MNT3ERR_NAMETOOLONG";
    case MNT3ERR_NOTSUPP: return "MNT3ERR_NOTSUPP";
    case MNT3ERR_SERVERFAULT: return "MNT3ERR_SERVERFAULT";
    case kMountNoReply: return "(no reply)";
    default: return "(unknown mountstat3)";
  }
}

namespace {

// --- Conversions between our types and libnfs's ----------------------------

nfs_fh3 to_fh3(const FileHandle& fh) {
  nfs_fh3 out{};
  out.data.data_len = static_cast<u_int>(fh.size());
  out.data.data_val = const_cast<char*>(fh.data());
  return out;
}

FileHandle from_fh3(const nfs_fh3& fh) {
  return FileHandle(fh.data.data_val, fh.data.data_val + fh.data.data_len);
}

uint64_t verf_to_u64(const char* v) {
  uint64_t out = 0;
  std::memcpy(&out, v, 8);
  return out;
}

void u64_to_verf(uint64_t in, char* v) { std::memcpy(v, &in, 8); }

Attr from_fattr3(const fattr3& a) {
  Attr out;
  out.type = a.type;
  out.mode = a.mode;
  out.nlink = a.nlink;
  out.uid = a.uid;
  out.gid = a.gid;
  out.size = a.size;
  out.used = a.used;
  out.rdev_major = a.rdev.specdata1;
  out.rdev_minor = a.rdev.specdata2;
  out.fsid = a.fsid;
  out.fileid = a.fileid;
  out.atime = a.atime;
  out.mtime = a.mtime;
  out.ctime = a.ctime;
  return out;
}

std::optional<Attr> from_post_op(const post_op_attr& a) {
  if (!a.attributes_follow) return std::nullopt;
  return from_fattr3(a.post_op_attr_u.attributes);
}

Wcc from_wcc(const wcc_data& w) {
  Wcc out;
  if (w.before.attributes_follow) {
    const wcc_attr& b = w.before.pre_op_attr_u.attributes;
    out.before = WccAttr{b.size, b.mtime, b.ctime};
  }
  out.after = from_post_op(w.after);
  return out;
}

FileHandle from_post_op_fh(const post_op_fh3& fh) {
  if (!fh.handle_follows) return {};
  return from_fh3(fh.post_op_fh3_u.handle);
}

sattr3 to_sattr3(const Sattr& s) {
  sattr3 out{};
  if (s.mode) {
    out.mode.set_it = 1;
    out.mode.set_mode3_u.mode = *s.mode;
  }
  if (s.uid) {
    out.uid.set_it = 1;
    out.uid.set_uid3_u.uid = *s.uid;
  }
  if (s.gid) {
    out.gid.set_it = 1;
    out.gid.set_gid3_u.gid = *s.gid;
  }
  if (s.size) {
    out.size.set_it = 1;
    out.size.set_size3_u.size = *s.size;
  }
  out.atime.set_it = s.atime_how;
  if (s.atime_how == SET_TO_CLIENT_TIME) out.atime.set_atime_u.atime = s.atime;
  out.mtime.set_it = s.mtime_how;
  if (s.mtime_how == SET_TO_CLIENT_TIME) out.mtime.set_mtime_u.mtime = s.mtime;
  return out;
}

struct CallState {
  bool done = false;
  int status = RPC_STATUS_ERROR;
  std::string error;
  const std::function<void(void*)>* on_reply = nullptr;
};

void on_rpc_done(rpc_context* /*rpc*/, int status, void* data, void* priv) {
  auto* state = static_cast<CallState*>(priv);
  state->done = true;
  state->status = status;
  if (status == RPC_STATUS_SUCCESS) {
    if (state->on_reply != nullptr && *state->on_reply) {
      (*state->on_reply)(data);
    }
    return;
  }
  if (status == RPC_STATUS_ERROR && data != nullptr) {
    state->error = static_cast<const char*>(data);
  } else if (status == RPC_STATUS_TIMEOUT) {
    state->error = "timed out";
  } else if (status == RPC_STATUS_CANCEL) {
    state->error = "cancelled";
  } else {
    state->error = "failed";
  }
}

}  // namespace

// --- RpcConnection ---------------------------------------------------------

RpcConnection::~RpcConnection() {
  if (rpc_ != nullptr) rpc_destroy_context(rpc_);
}

bool RpcConnection::run_until(const bool& done, Clock::time_point deadline) {
  for (int rounds = 0; !done && rounds < 1000000; ++rounds) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - Clock::now());
    if (left.count() <= 0) {
      error_ = "timed out";
      return false;
    }
    pollfd p{rpc_get_fd(rpc_), static_cast<short>(rpc_which_events(rpc_)),
             0};
    int n = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(),
                                                             100)));
    if (n < 0 && errno != EINTR) {
      error_ = std::string("poll: ") + std::strerror(errno);
      return false;
    }
    if (rpc_service(rpc_, n > 0 ? p.revents : 0) < 0) {
      const char* e = rpc_get_error(rpc_);
      error_ = e != nullptr ? e : "connection failed";
      return done;
    }
  }
  return done;
}

bool RpcConnection::connect(const std::string& address, uint16_t port,
                            uint32_t program, uint32_t version,
                            const Credentials& creds) {
  rpc_ = rpc_init_context();
  if (rpc_ == nullptr) {
    error_ = "rpc_init_context failed";
    return false;
  }
  std::vector<uint32_t> groups = creds.groups;
  rpc_set_auth(rpc_, libnfs_authunix_create(
                         "tidepool-test", creds.uid, creds.gid,
                         static_cast<uint32_t>(groups.size()),
                         groups.empty() ? nullptr : groups.data()));
  CallState state;
  if (rpc_connect_port_async(rpc_, address.c_str(), port,
                             static_cast<int>(program),
                             static_cast<int>(version), on_rpc_done,
                             &state) != 0) {
    const char* e = rpc_get_error(rpc_);
    error_ = std::string("connect to ") + address + ":" +
             std::to_string(port) + ": " + (e != nullptr ? e : "failed");
    return false;
  }
  bool replied = run_until(state.done, Clock::now() + timeout_);
  if (!state.done) rpc_disconnect(rpc_, "connect timed out");
  if (!replied || state.status != RPC_STATUS_SUCCESS) {
    error_ = std::string("connect to ") + address + ":" +
             std::to_string(port) + ": " +
             (state.error.empty() ? error_ : state.error);
    return false;
  }
  connected_ = true;
  return true;
}

bool RpcConnection::call(std::string_view what,
                         const std::function<int(rpc_cb, void*)>& issue,
                         const std::function<void(void*)>& on_reply) {
  if (!connected_) {
    if (report_no_reply_) ADD_FAILURE() << what << ": not connected (" << error_ << ")";
    return false;
  }
  CallState state;
  state.on_reply = &on_reply;
  if (issue(on_rpc_done, &state) != 0) {
    const char* e = rpc_get_error(rpc_);
    error_ = e != nullptr ? e : "could not queue the call";
    ADD_FAILURE() << what << ": " << error_;
    return false;
  }
  run_until(state.done, Clock::now() + timeout_);
  if (!state.done) {
    // Fails every call in flight, ours included, so that no callback can
    // run later with a dangling `state`.
    rpc_disconnect(rpc_, "timed out");
    connected_ = false;
  }
  if (state.status != RPC_STATUS_SUCCESS) {
    if (!state.error.empty()) error_ = state.error;
    if (report_no_reply_) ADD_FAILURE() << what << ": no reply: " << error_;
    return false;
  }
  return true;
}

// --- NfsClient -------------------------------------------------------------

NfsClient::NfsClient(const Endpoint& ep, Credentials creds)
    : creds_(std::move(creds)) {
  conn_.connect(ep.address, ep.nfs_port, kNfsProgram, 3, creds_);
}

bool NfsClient::null() {
  return conn_.call(
      "NFS3 NULL",
      [&](rpc_cb cb, void* priv) {
        return rpc_nfs3_null_async(conn_.get(), cb, priv);
      },
      {});
}

AttrResult NfsClient::getattr(const FileHandle& fh) {
  AttrResult out;
  GETATTR3args args{};
  args.object = to_fh3(fh);
  conn_.call(
      "GETATTR",
      [&](rpc_cb cb, void* priv) {
        return rpc_nfs3_getattr_async(conn_.get(), cb, &args, priv);
      },
      [&](void* data) {
        auto* res = static_cast<GETATTR3res*>(data);
        out.status = res->status;
        if (res->status == NFS3_OK) {
          out.attr = from_fattr3(res->GETATTR3res_u.resok.obj_attributes);
        }
      });
  return out;
}

WccResult NfsClient::setattr(const FileHandle& fh, const Sattr& s,
                             std::optional<nfstime3> guard_ctime) {
  WccResult out;
  SETATTR3args args{};
  args.object = to_fh3(fh);
  args.new_attributes = to_sattr3(s);
  if (guard_ctime) {
    args.guard.check = 1;
    args.guard.sattrguard3_u.obj_ctime = *guard_ctime;
  }
  conn_.call(
      "SETATTR",
      [&](rpc_cb cb, void* priv) {
        return rpc_nfs3_setattr_async(conn_.get(), cb, &args, priv);
      },
      [&](void* data) {
        auto* res = static_cast<SETATTR3res*>(data);
        out.status = res->status;
        out.wcc = from_wcc(res->status == NFS3_OK
                               ? res->SETATTR3res_u.resok.obj_wcc
                               : res->SETATTR3res_u.resfail.obj_wcc);
      });
  return out;
}

LookupResult NfsClient::lookup(const FileHandle& dir, const std::string& name) {
  LookupResult out;
  std::string n = name;
  LOOKUP3args args{};
  args.what.dir = to_fh3(dir);
  args.what.name = n.data();
  conn_.call(
      "LOOKUP",
      [&](rpc_cb cb, void* priv) {
        return rpc_nfs3_lookup_async(conn_.get(), cb, &args, priv);
      },
      [&](void* data) {
        auto* res = static_cast<LOOKUP3res*>(data);
        out.status = res->status;
        if (res->status == NFS3_OK) {
          const auto& ok = res->LOOKUP3res_u.resok;
          out.fh = from_fh3(ok.object);
          out.attr = from_post_op(ok.obj_attributes);
          out.dir_attr = from_post_op(ok.dir_attributes);
        } else {
          out.dir_attr =
              from_post_op(res->LOOKUP3res_u.resfail.dir_attributes);
        }
      });
  return out;
}

AccessResult NfsClient::access(const FileHandle& fh, uint32_t mask) {
  AccessResult out;
  ACCESS3args args{};
  args.object = to_fh3(fh);
  args.access = mask;
  conn_.call(
      "ACCESS",
      [&](rpc_cb cb, void* priv) {
        return rpc_nfs3_access_async(conn_.get(), cb, &args, priv);
      },
      [&](void* data) {
        auto* res = static_cast<ACCESS3res*>(data);
        out.status = res->status;
        if (res->status == NFS3_OK) out.access = res->ACCESS3res_u.resok.access;
      });
  return out;
}

ReadlinkResult NfsClient::readlink(const FileHandle& fh) {
  ReadlinkResult out;
  READLINK3args args{};
  args.symlink = to_fh3(fh);
  conn_.call(
      "READLINK",
      [&](rpc_cb cb, void* priv) {
        return rpc_nfs3_readlink_async(conn_.get(), cb, &args, priv);
      },
      [&](void* data) {
        auto* res = static_cast<READLINK3res*>(data);
        out.status = res->status;
        if (res->status == NFS3_OK && res->READLINK3res_u.resok.data) {
          out.target = res->READLINK3res_u.resok.data;
        }
      });
  return out;
}

ReadResult NfsClient::read(const FileHandle& fh, uint64_t offset,
                           uint32_t count) {
  ReadResult out;
  READ3args args{};
  args.file = to_fh3(fh);
  args.offset = offset;
  args.count = count;
  conn_.call(
      "READ",
      [&](rpc_cb cb, void* priv) {
        return rpc_nfs3_read_async(conn_.get(), cb, &args, priv);
      },
      [&](void* data) {
        auto* res = static_cast<READ3res*>(data);
        out.status = res->status;
        if (res->status == NFS3_OK) {
          const auto& ok = res->READ3res_u.resok;
          out.count = ok.count;
          out.eof = ok.eof != 0;
          out.data.assign(ok.data.data_val, ok.data.data_len);
          out.attr = from_post_op(ok.file_attributes);
        } else {
          out.attr = from_post_op(res->READ3res_u.resfail.file_attributes);
        }
      });
  return out;
}

WriteResult NfsClient::write(const FileHandle& fh, uint64_t offset,
                             std::string_view data, stable_how stable) {
  return write_with_count(fh, offset, static_cast<uint32_t>(data.size()),
                          data, stable);
}

WriteResult NfsClient::write_with_count(const FileHandle& fh, uint64_t offset,
                                        uint32_t count, std::string_view data,
                                        stable_how stable) {
  WriteResult out;
  WRITE3args args{};
  args.file = to_fh3(fh);
  args.offset = offset;
  args.count = count;
  args.stable = stable;
  args.data.data_len = static_cast<u_int>(data.size());
  args.data.data_val = const_cast<char*>(data.data());
  conn_.call(
      "WRITE",
      [&](rpc_cb cb, void* priv) {
        return rpc_nfs3_write_async(conn_.get(), cb, &args, priv);
      },
      [&](void* res_data) {
        auto* res = static_cast<WRITE3res*>(res_data);
        out.status = res->status;
        if (res->status == NFS3_OK) {
          const auto& ok = res->WRITE3res_u.resok;
          out.count = ok.count;
          out.committed = ok.committed;
          out.verf = verf_to_u64(ok.verf);
          out.wcc = from_wcc(ok.file_wcc);
        } else {
          out.wcc = from_wcc(res->WRITE3res_u.resfail.file_wcc);
        }
      });
  return out;
}

CreateResult NfsClient::create(const FileHandle& dir, const std::string& name,
                               createmode3 mode, const Sattr& attrs,
                               uint64_t verifier) {
  CreateResult out;
  std::string n = name;
  CREATE3args args{};
  args.where.dir = to_fh3(dir);
  args.where.name = n.data();
  args.how.mode = mode;
  if (mode == EXCLUSIVE) {
    u64_to_verf(verifier, args.how.createhow3_u.verf);
  } else {
    args.how.createhow3_u.obj_attributes = to_sattr3(attrs);
  }
  conn_.call(
      "CREATE",
      [&](rpc_cb cb, void* priv) {
        return rpc_nfs3_create_async(conn_.get(), cb, &args, priv);
      },
      [&](void* data) {
        auto* res = static_cast<CREATE3res*>(data);
        out.status = res->status;
        if (res->status == NFS3_OK) {
          const auto& ok = res->CREATE3res_u.resok;
          out.fh = from_post_op_fh(ok.obj);
          out.attr = from_post_op(ok.obj_attributes);
          out.dir_wcc = from_wcc(ok.dir_wcc);
        } else {
          out.dir_wcc = from_wcc(res->CREATE3res_u.resfail.dir_wcc);
        }
      });
  return out;
}

CreateResult NfsClient::mkdir(const FileHandle& dir, const std::string& name,
                              const Sattr& attrs) {
  CreateResult out;
  std::string n = name;
  MKDIR3args args{};
  args.where.dir = to_fh3(dir);
  args.where.name = n.data();
  args.attributes = to_sattr3(attrs);
  conn_.call(
      "MKDIR",
      [&](rpc_cb cb, void* priv) {
        return rpc_nfs3_mkdir_async(conn_.get(), cb, &args, priv);
      },
      [&](void* data) {
        auto* res = static_cast<MKDIR3res*>(data);
        out.status = res->status;
        if (res->status == NFS3_OK) {
          const auto& ok = res->MKDIR3res_u.resok;
          out.fh = from_post_op_fh(ok.obj);
          out.attr = from_post_op(ok.obj_attributes);
          out.dir_wcc = from_wcc(ok.dir_wcc);
        } else {
          out.dir_wcc = from_wcc(res->MKDIR3res_u.resfail.dir_wcc);
        }
      });
  return out;
}

CreateResult NfsClient::symlink(const FileHandle& dir, const std::string& name,
                                const std::string& target,
                                const Sattr& attrs) {
  CreateResult out;
  std::string n = name;
  std::string t = target;
  SYMLINK3args args{};
  args.where.dir = to_fh3(dir);
  args.where.name = n.data();
  args.symlink.symlink_attributes = to_sattr3(attrs);
  args.symlink.symlink_data = t.data();
  conn_.call(
      "SYMLINK",
      [&](rpc_cb cb, void* priv) {
        return rpc_nfs3_symlink_async(conn_.get(), cb, &args, priv);
      },
      [&](void* data) {
        auto* res = static_cast<SYMLINK3res*>(data);
        out.status = res->status;
        if (res->status == NFS3_OK) {
          const auto& ok = res->SYMLINK3res_u.resok;
          out.fh = from_post_op_fh(ok.obj);
          out.attr = from_post_op(ok.obj_attributes);
          out.dir_wcc = from_wcc(ok.dir_wcc);
        } else {
          out.dir_wcc = from_wcc(res->SYMLINK3res_u.resfail.dir_wcc);
        }
      });
  return out;
}

CreateResult NfsClient::mknod(const FileHandle& dir, const std::string& name,
                              ftype3 type, const Sattr& attrs, uint32_t major,
                              uint32_t minor) {
  CreateResult out;
  std::string n = name;
  MKNOD3args args{};
  args.where.dir = to_fh3(dir);
  args.where.name = n.data();
  args.what.type = type;
  switch (type) {
    case NF3CHR:
      args.what.mknoddata3_u.chr_device.dev_attributes = to_sattr3(attrs);
      args.what.mknoddata3_u.chr_device.spec = {major, minor};
      break;
    case NF3BLK:
      args.what.mknoddata3_u.blk_device.dev_attributes = to_sattr3(attrs);
      args.what.mknoddata3_u.blk_device.spec = {major, minor};
      break;
    case NF3SOCK:
      args.what.mknoddata3_u.sock_attributes = to_sattr3(attrs);
      break;
    case NF3FIFO:
      args.what.mknoddata3_u.pipe_attributes = to_sattr3(attrs);
      break;
    default:
      break;  // other types have no arguments (and must be refused)
  }
  conn_.call(
      "MKNOD",
      [&](rpc_cb cb, void* priv) {
        return rpc_nfs3_mknod_async(conn_.get(), cb, &args, priv);
      },
      [&](void* data) {
        auto* res = static_cast<MKNOD3res*>(data);
        out.status = res->status;
        if (res->status == NFS3_OK) {
          const auto& ok = res->MKNOD3res_u.resok;
          out.fh = from_post_op_fh(ok.obj);
          out.attr = from_post_op(ok.obj_attributes);
          out.dir_wcc = from_wcc(ok.dir_wcc);
        } else {
          out.dir_wcc = from_wcc(res->MKNOD3res_u.resfail.dir_wcc);
        }
      });
  return out;
}

WccResult NfsClient::remove(const FileHandle& dir, const std::string& name) {
  WccResult out;
  std::string n = name;
  REMOVE3args args{};
  args.object.dir = to_fh3(dir);
  args.object.name = n.data();
  conn_.call(
      "REMOVE",
      [&](rpc_cb cb, void* priv) {
        return rpc_nfs3_remove_async(conn_.get(), cb, &args, priv);
      },
      [&](void* data) {
        auto* res = static_cast<REMOVE3res*>(data);
        out.status = res->status;
        out.wcc = from_wcc(res->status == NFS3_OK
                               ? res->REMOVE3res_u.resok.dir_wcc
                               : res->REMOVE3res_u.resfail.dir_wcc);
      });
  return out;
}

WccResult NfsClient::rmdir(const FileHandle& dir, const std::string& name) {
  WccResult out;
  std::string n = name;
  RMDIR3args args{};
  args.object.dir = to_fh3(dir);
  args.object.name = n.data();
  conn_.call(
      "RMDIR",
      [&](rpc_cb cb, void* priv) {
        return rpc_nfs3_rmdir_async(conn_.get(), cb, &args, priv);
      },
      [&](void* data) {
        auto* res = static_cast<RMDIR3res*>(data);
        out.status = res->status;
        out.wcc = from_wcc(res->status == NFS3_OK
                               ? res->RMDIR3res_u.resok.dir_wcc
                               : res->RMDIR3res_u.resfail.dir_wcc);
      });
  return out;
}

RenameResult NfsClient::rename(const FileHandle& from_dir,
                               const std::string& from,
                               const FileHandle& to_dir,
                               const std::string& to) {
  RenameResult out;
  std::string f = from;
  std::string t = to;
  RENAME3args args{};
  args.from.dir = to_fh3(from_dir);
  args.from.name = f.data();
  args.to.dir = to_fh3(to_dir);
  args.to.name = t.data();
  conn_.call(
      "RENAME",
      [&](rpc_cb cb, void* priv) {
        return rpc_nfs3_rename_async(conn_.get(), cb, &args, priv);
      },
      [&](void* data) {
        auto* res = static_cast<RENAME3res*>(data);
        out.status = res->status;
        if (res->status == NFS3_OK) {
          out.from_wcc = from_wcc(res->RENAME3res_u.resok.fromdir_wcc);
          out.to_wcc = from_wcc(res->RENAME3res_u.resok.todir_wcc);
        } else {
          out.from_wcc = from_wcc(res->RENAME3res_u.resfail.fromdir_wcc);
          out.to_wcc = from_wcc(res->RENAME3res_u.resfail.todir_wcc);
        }
      });
  return out;
}

LinkResult NfsClient::link(const FileHandle& file, const FileHandle& dir,
                           const std::string& name) {
  LinkResult out;
  std::string n = name;
  LINK3args args{};
  args.file = to_fh3(file);
  args.link.dir = to_fh3(dir);
  args.link.name = n.data();
  conn_.call(
      "LINK",
      [&](rpc_cb cb, void* priv) {
        return rpc_nfs3_link_async(conn_.get(), cb, &args, priv);
      },
      [&](void* data) {
        auto* res = static_cast<LINK3res*>(data);
        out.status = res->status;
        out.attr = from_post_op(res->status == NFS3_OK
                                    ? res->LINK3res_u.resok.file_attributes
                                    : res->LINK3res_u.resfail.file_attributes);
      });
  return out;
}

ReaddirResult NfsClient::readdir(const FileHandle& dir, uint64_t cookie,
                                 uint64_t cookieverf, uint32_t count) {
  ReaddirResult out;
  READDIR3args args{};
  args.dir = to_fh3(dir);
  args.cookie = cookie;
  u64_to_verf(cookieverf, args.cookieverf);
  args.count = count;
  conn_.call(
      "READDIR",
      [&](rpc_cb cb, void* priv) {
        return rpc_nfs3_readdir_async(conn_.get(), cb, &args, priv);
      },
      [&](void* data) {
        auto* res = static_cast<READDIR3res*>(data);
        out.status = res->status;
        if (res->status != NFS3_OK) return;
        const auto& ok = res->READDIR3res_u.resok;
        out.cookieverf = verf_to_u64(ok.cookieverf);
        out.eof = ok.reply.eof != 0;
        for (entry3* e = ok.reply.entries; e != nullptr; e = e->nextentry) {
          DirEntry d;
          d.fileid = e->fileid;
          d.name = e->name != nullptr ? e->name : "";
          d.cookie = e->cookie;
          out.entries.push_back(std::move(d));
        }
      });
  return out;
}

ReaddirResult NfsClient::readdirplus(const FileHandle& dir, uint64_t cookie,
                                     uint64_t cookieverf, uint32_t dircount,
                                     uint32_t maxcount) {
  ReaddirResult out;
  READDIRPLUS3args args{};
  args.dir = to_fh3(dir);
  args.cookie = cookie;
  u64_to_verf(cookieverf, args.cookieverf);
  args.dircount = dircount;
  args.maxcount = maxcount;
  conn_.call(
      "READDIRPLUS",
      [&](rpc_cb cb, void* priv) {
        return rpc_nfs3_readdirplus_async(conn_.get(), cb, &args, priv);
      },
      [&](void* data) {
        auto* res = static_cast<READDIRPLUS3res*>(data);
        out.status = res->status;
        if (res->status != NFS3_OK) return;
        const auto& ok = res->READDIRPLUS3res_u.resok;
        out.cookieverf = verf_to_u64(ok.cookieverf);
        out.eof = ok.reply.eof != 0;
        for (entryplus3* e = ok.reply.entries; e != nullptr;
             e = e->nextentry) {
          DirEntry d;
          d.fileid = e->fileid;
          d.name = e->name != nullptr ? e->name : "";
          d.cookie = e->cookie;
          d.attr = from_post_op(e->name_attributes);
          d.fh = from_post_op_fh(e->name_handle);
          out.entries.push_back(std::move(d));
        }
      });
  return out;
}

FsstatResult NfsClient::fsstat(const FileHandle& fh) {
  FsstatResult out;
  FSSTAT3args args{};
  args.fsroot = to_fh3(fh);
  conn_.call(
      "FSSTAT",
      [&](rpc_cb cb, void* priv) {
        return rpc_nfs3_fsstat_async(conn_.get(), cb, &args, priv);
      },
      [&](void* data) {
        auto* res = static_cast<FSSTAT3res*>(data);
        out.status = res->status;
        if (res->status != NFS3_OK) return;
        const auto& ok = res->FSSTAT3res_u.resok;
        out.tbytes = ok.tbytes;
        out.fbytes = ok.fbytes;
        out.abytes = ok.abytes;
        out.tfiles = ok.tfiles;
        out.ffiles = ok.ffiles;
        out.afiles = ok.afiles;
        out.invarsec = ok.invarsec;
      });
  return out;
}

FsinfoResult NfsClient::fsinfo(const FileHandle& fh) {
  FsinfoResult out;
  FSINFO3args args{};
  args.fsroot = to_fh3(fh);
  conn_.call(
      "FSINFO",
      [&](rpc_cb cb, void* priv) {
        return rpc_nfs3_fsinfo_async(conn_.get(), cb, &args, priv);
      },
      [&](void* data) {
        auto* res = static_cast<FSINFO3res*>(data);
        out.status = res->status;
        if (res->status != NFS3_OK) return;
        const auto& ok = res->FSINFO3res_u.resok;
        out.rtmax = ok.rtmax;
        out.rtpref = ok.rtpref;
        out.rtmult = ok.rtmult;
        out.wtmax = ok.wtmax;
        out.wtpref = ok.wtpref;
        out.wtmult = ok.wtmult;
        out.dtpref = ok.dtpref;
        out.maxfilesize = ok.maxfilesize;
        out.time_delta = ok.time_delta;
        out.properties = ok.properties;
      });
  return out;
}

PathconfResult NfsClient::pathconf(const FileHandle& fh) {
  PathconfResult out;
  PATHCONF3args args{};
  args.object = to_fh3(fh);
  conn_.call(
      "PATHCONF",
      [&](rpc_cb cb, void* priv) {
        return rpc_nfs3_pathconf_async(conn_.get(), cb, &args, priv);
      },
      [&](void* data) {
        auto* res = static_cast<PATHCONF3res*>(data);
        out.status = res->status;
        if (res->status != NFS3_OK) return;
        const auto& ok = res->PATHCONF3res_u.resok;
        out.linkmax = ok.linkmax;
        out.name_max = ok.name_max;
        out.no_trunc = ok.no_trunc != 0;
        out.chown_restricted = ok.chown_restricted != 0;
        out.case_insensitive = ok.case_insensitive != 0;
        out.case_preserving = ok.case_preserving != 0;
      });
  return out;
}

CommitResult NfsClient::commit(const FileHandle& fh, uint64_t offset,
                               uint32_t count) {
  CommitResult out;
  COMMIT3args args{};
  args.file = to_fh3(fh);
  args.offset = offset;
  args.count = count;
  conn_.call(
      "COMMIT",
      [&](rpc_cb cb, void* priv) {
        return rpc_nfs3_commit_async(conn_.get(), cb, &args, priv);
      },
      [&](void* data) {
        auto* res = static_cast<COMMIT3res*>(data);
        out.status = res->status;
        if (res->status == NFS3_OK) {
          out.verf = verf_to_u64(res->COMMIT3res_u.resok.verf);
          out.wcc = from_wcc(res->COMMIT3res_u.resok.file_wcc);
        } else {
          out.wcc = from_wcc(res->COMMIT3res_u.resfail.file_wcc);
        }
      });
  return out;
}

FileHandle NfsClient::make_file(const FileHandle& dir, const std::string& name,
                                uint32_t mode, std::string_view contents) {
  auto r = create(dir, name, GUARDED, Sattr::with_mode(mode));
  EXPECT_EQ(r.status, NFS3_OK) << "CREATE " << name;
  FileHandle fh = r.fh;
  if (r.status == NFS3_OK && fh.empty()) {
    auto l = lookup(dir, name);
    EXPECT_EQ(l.status, NFS3_OK) << "LOOKUP " << name;
    fh = l.fh;
  }
  if (!contents.empty() && !fh.empty()) {
    auto w = write(fh, 0, contents, FILE_SYNC);
    EXPECT_EQ(w.status, NFS3_OK) << "WRITE " << name;
    EXPECT_EQ(w.count, contents.size()) << "WRITE " << name;
  }
  return fh;
}

FileHandle NfsClient::make_dir(const FileHandle& dir, const std::string& name,
                               uint32_t mode) {
  auto r = mkdir(dir, name, Sattr::with_mode(mode));
  EXPECT_EQ(r.status, NFS3_OK) << "MKDIR " << name;
  FileHandle fh = r.fh;
  if (r.status == NFS3_OK && fh.empty()) {
    auto l = lookup(dir, name);
    EXPECT_EQ(l.status, NFS3_OK) << "LOOKUP " << name;
    fh = l.fh;
  }
  return fh;
}

std::vector<DirEntry> NfsClient::list(const FileHandle& dir, uint32_t count) {
  std::vector<DirEntry> all;
  uint64_t cookie = 0;
  uint64_t verf = 0;
  for (int pages = 0; pages < 10000; ++pages) {
    auto r = readdir(dir, cookie, verf, count);
    EXPECT_EQ(r.status, NFS3_OK) << "READDIR page " << pages;
    if (r.status != NFS3_OK) break;
    for (auto& e : r.entries) all.push_back(e);
    if (r.eof) return all;
    if (r.entries.empty()) {
      ADD_FAILURE() << "READDIR returned no entries and no eof";
      break;
    }
    cookie = r.entries.back().cookie;
    verf = r.cookieverf;
  }
  return all;
}

std::string NfsClient::read_all(const FileHandle& fh, uint32_t chunk) {
  std::string out;
  for (int rounds = 0; rounds < 1000000; ++rounds) {
    auto r = read(fh, out.size(), chunk);
    EXPECT_EQ(r.status, NFS3_OK) << "READ at " << out.size();
    if (r.status != NFS3_OK) break;
    out += r.data;
    if (r.eof) return out;
    if (r.data.empty()) {
      ADD_FAILURE() << "READ returned no data and no eof at " << out.size();
      break;
    }
  }
  return out;
}

// --- MountClient -----------------------------------------------------------

MountClient::MountClient(const Endpoint& ep, Credentials creds) {
  conn_.connect(ep.address, ep.mount_port, kMountProgram, 3, creds);
}

bool MountClient::null() {
  return conn_.call(
      "MOUNT NULL",
      [&](rpc_cb cb, void* priv) {
        return rpc_mount3_null_async(conn_.get(), cb, priv);
      },
      {});
}

MountResult MountClient::mnt(const std::string& path) {
  MountResult out;
  std::string p = path;
  conn_.call(
      "MNT",
      [&](rpc_cb cb, void* priv) {
        return rpc_mount3_mnt_async(conn_.get(), cb, p.data(), priv);
      },
      [&](void* data) {
        auto* res = static_cast<mountres3*>(data);
        out.status = res->fhs_status;
        if (res->fhs_status != MNT3_OK) return;
        const auto& ok = res->mountres3_u.mountinfo;
        out.fh.assign(ok.fhandle.fhandle3_val,
                      ok.fhandle.fhandle3_val + ok.fhandle.fhandle3_len);
        out.auth_flavors.assign(
            ok.auth_flavors.auth_flavors_val,
            ok.auth_flavors.auth_flavors_val + ok.auth_flavors.auth_flavors_len);
      });
  return out;
}

std::optional<std::vector<MountEntry>> MountClient::dump() {
  std::vector<MountEntry> out;
  bool ok = conn_.call(
      "MOUNT DUMP",
      [&](rpc_cb cb, void* priv) {
        return rpc_mount3_dump_async(conn_.get(), cb, priv);
      },
      [&](void* data) {
        mountlist list = data != nullptr ? *static_cast<mountlist*>(data)
                                         : nullptr;
        for (int n = 0; list != nullptr && n < 100000;
             list = list->ml_next, ++n) {
          out.push_back({list->ml_hostname ? list->ml_hostname : "",
                         list->ml_directory ? list->ml_directory : ""});
        }
      });
  if (!ok) return std::nullopt;
  return out;
}

bool MountClient::umnt(const std::string& path) {
  std::string p = path;
  return conn_.call(
      "UMNT",
      [&](rpc_cb cb, void* priv) {
        return rpc_mount3_umnt_async(conn_.get(), cb, p.data(), priv);
      },
      {});
}

bool MountClient::umntall() {
  return conn_.call(
      "UMNTALL",
      [&](rpc_cb cb, void* priv) {
        return rpc_mount3_umntall_async(conn_.get(), cb, priv);
      },
      {});
}

std::optional<std::vector<ExportEntry>> MountClient::exports() {
  std::vector<ExportEntry> out;
  bool ok = conn_.call(
      "EXPORT",
      [&](rpc_cb cb, void* priv) {
        return rpc_mount3_export_async(conn_.get(), cb, priv);
      },
      [&](void* data) {
        ::exports list = data != nullptr ? *static_cast<::exports*>(data)
                                         : nullptr;
        for (int n = 0; list != nullptr && n < 100000;
             list = list->ex_next, ++n) {
          ExportEntry e;
          e.directory = list->ex_dir ? list->ex_dir : "";
          int g = 0;
          for (::groups gr = list->ex_groups; gr != nullptr && g < 100000;
               gr = gr->gr_next, ++g) {
            e.groups.push_back(gr->gr_name ? gr->gr_name : "");
          }
          out.push_back(std::move(e));
        }
      });
  if (!ok) return std::nullopt;
  return out;
}

// --- PortmapClient ---------------------------------------------------------

PortmapClient::PortmapClient(const Endpoint& ep) {
  conn_.connect(ep.address, ep.portmap_port, kPmapProgram, 2, {});
}

bool PortmapClient::null() {
  return conn_.call(
      "PMAP NULL",
      [&](rpc_cb cb, void* priv) {
        return rpc_pmap2_null_async(conn_.get(), cb, priv);
      },
      {});
}

std::optional<uint32_t> PortmapClient::getport(uint32_t program,
                                               uint32_t version,
                                               uint32_t protocol) {
  uint32_t port = 0;
  bool ok = conn_.call(
      "PMAP GETPORT",
      [&](rpc_cb cb, void* priv) {
        return rpc_pmap2_getport_async(conn_.get(), static_cast<int>(program),
                                       static_cast<int>(version),
                                       static_cast<int>(protocol), cb, priv);
      },
      [&](void* data) { port = *static_cast<uint32_t*>(data); });
  if (!ok) return std::nullopt;
  return port;
}

std::optional<std::vector<PmapMapping>> PortmapClient::dump() {
  std::vector<PmapMapping> out;
  bool ok = conn_.call(
      "PMAP DUMP",
      [&](rpc_cb cb, void* priv) {
        return rpc_pmap2_dump_async(conn_.get(), cb, priv);
      },
      [&](void* data) {
        auto* res = static_cast<pmap2_dump_result*>(data);
        int n = 0;
        for (pmap2_mapping_list* l = res->list; l != nullptr && n < 100000;
             l = l->next, ++n) {
          out.push_back({l->map.prog, l->map.vers, l->map.prot, l->map.port});
        }
      });
  if (!ok) return std::nullopt;
  return out;
}

namespace {

// Runs `share(from, to)` on `streams` threads over [0, size) cut at multiples of `piece`; true if
// every share returned true.
bool in_streams(uint64_t size, uint32_t piece, int streams,
                const std::function<bool(uint64_t from, uint64_t to)>& share) {
  const uint64_t pieces = (size + piece - 1) / piece;
  const uint64_t per_stream = (pieces + streams - 1) / streams;
  std::atomic<bool> all{true};
  std::vector<std::thread> threads;
  for (uint64_t from = 0; from < size; from += per_stream * piece) {
    const uint64_t to = std::min<uint64_t>(size, from + per_stream * piece);
    threads.emplace_back([&, from, to] {
      if (!share(from, to)) all = false;
    });
  }
  for (std::thread& thread : threads) thread.join();
  return all;
}

}  // namespace

bool write_in_streams(const Endpoint& ep, const FileHandle& fh, std::string_view data,
                      uint32_t piece, int streams) {
  const bool written = in_streams(data.size(), piece, streams, [&](uint64_t from, uint64_t to) {
    NfsClient nfs(ep);
    for (uint64_t at = from; at < to; at += piece) {
      const WriteResult w =
          nfs.write(fh, at, data.substr(at, std::min<uint64_t>(piece, to - at)), UNSTABLE);
      if (w.status != NFS3_OK) {
        ADD_FAILURE() << "WRITE at " << at << ": " << nfsstat3_name(w.status);
        return false;
      }
    }
    return true;
  });
  if (!written) return false;
  const CommitResult committed = NfsClient(ep).commit(fh);
  EXPECT_EQ(committed.status, NFS3_OK) << "COMMIT";
  return committed.status == NFS3_OK;
}

bool reads_back_as(const Endpoint& ep, const FileHandle& fh, std::string_view expected,
                   uint32_t piece, int streams) {
  NfsClient nfs(ep);
  const AttrResult attr = nfs.getattr(fh);
  if (attr.status != NFS3_OK || attr.attr.size != expected.size()) {
    ADD_FAILURE() << "GETATTR: " << nfsstat3_name(attr.status) << ", size " << attr.attr.size
                  << " where " << expected.size() << " was expected";
    return false;
  }
  const bool pieces = in_streams(expected.size(), piece, streams, [&](uint64_t from, uint64_t to) {
    NfsClient reader(ep);
    for (uint64_t at = from; at < to; at += piece) {
      const std::string_view want = expected.substr(at, std::min<uint64_t>(piece, to - at));
      const ReadResult r = reader.read(fh, at, static_cast<uint32_t>(want.size()));
      if (r.status != NFS3_OK || r.data != want) {
        ADD_FAILURE() << "READ at " << at << ": " << nfsstat3_name(r.status) << ", "
                      << r.data.size() << " bytes"
                      << (r.status == NFS3_OK ? ", not those written" : "");
        return false;
      }
    }
    return true;
  });
  if (!pieces) return false;
  const ReadResult end = nfs.read(fh, expected.size(), piece);
  EXPECT_TRUE(end.status == NFS3_OK && end.eof && end.data.empty())
      << "READ at the end: " << nfsstat3_name(end.status) << ", " << end.data.size() << " bytes";
  return end.status == NFS3_OK && end.eof && end.data.empty();
}

FileHandle mount_root(const Endpoint& ep, const std::string& export_path) {
  MountClient m(ep);
  EXPECT_TRUE(m.connected()) << m.error();
  if (!m.connected()) return {};
  auto r = m.mnt(export_path);
  EXPECT_EQ(r.status, MNT3_OK) << "MNT " << export_path;
  return r.fh;
}

std::string libnfs_url(const Endpoint& ep, const std::string& export_path,
                    std::optional<Credentials> creds) {
  std::string url = "nfs://" + ep.address + export_path +
                    "?nfsport=" + std::to_string(ep.nfs_port) +
                    "&mountport=" + std::to_string(ep.mount_port);
  if (creds) {
    url += "&uid=" + std::to_string(creds->uid) +
           "&gid=" + std::to_string(creds->gid);
  }
  return url;
}

}  // namespace tidepool::test

void PrintTo(nfsstat3 status, std::ostream* os) {
  *os << tidepool::test::nfsstat3_name(status) << " ("
      << static_cast<int>(status) << ")";
}

void PrintTo(mountstat3 status, std::ostream* os) {
  *os << tidepool::test::mountstat3_name(status) << " ("
      << static_cast<int>(status) << ")";
}
