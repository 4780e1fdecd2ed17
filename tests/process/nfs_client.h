// A synchronous NFSv3 / MOUNT v3 / PMAP v2 client for the process tests,
// built on libnfs's raw API so that a test can issue exactly one procedure
// with exactly the arguments it wants and see exactly the status the server
// returned:
//
//   NfsClient client(endpoint);
//   auto r = client.lookup(dir_fh, "name");
//   EXPECT_EQ(r.status, NFS3ERR_NOENT);
//
// Every call is bounded by a deadline (10 s by default). A call that gets no
// reply at all (connection refused or closed, timeout, RPC-level rejection)
// is reported as a non-fatal gtest failure naming the procedure, and its
// status is kNoReply; the bad-input tests that want RPC-level errors use
// RawRpcConnection instead.
//
// Results are deep copies: nothing points into libnfs's buffers.
//
// Not thread-safe: one client per thread. Several clients may talk to the
// same server from different threads.
#pragma once

// clang-format off
#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-raw-mount.h>
#include <nfsc/libnfs-raw-nfs.h>
#include <nfsc/libnfs-raw-portmap.h>
// clang-format on

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

// gtest prints statuses by name (found by argument-dependent lookup, so these
// live in the global namespace with the libnfs enums).
void PrintTo(nfsstat3 status, std::ostream* os);
void PrintTo(mountstat3 status, std::ostream* os);

namespace tidepool::test {

// Status of a call that got no reply (see the header comment).
inline constexpr nfsstat3 kNoReply = static_cast<nfsstat3>(16383);
inline constexpr mountstat3 kMountNoReply = static_cast<mountstat3>(16383);

const char* nfsstat3_name(int status);
const char* mountstat3_name(int status);

// Where a server listens.
struct Endpoint {
  std::string address;
  uint16_t nfs_port = 2049;
  uint16_t mount_port = 20048;
  uint16_t portmap_port = 111;
};

// AUTH_SYS identity of a client.
struct Credentials {
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::vector<uint32_t> groups;
};

using FileHandle = std::vector<char>;

// The largest READ reply or WRITE payload libnfs 4.0 handles.
inline constexpr uint32_t kLibnfsMaxTransfer = 1u << 20;

struct Attr {
  ftype3 type = NF3REG;
  uint32_t mode = 0;
  uint32_t nlink = 0;
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint64_t size = 0;
  uint64_t used = 0;
  uint32_t rdev_major = 0;
  uint32_t rdev_minor = 0;
  uint64_t fsid = 0;
  uint64_t fileid = 0;
  nfstime3 atime{};
  nfstime3 mtime{};
  nfstime3 ctime{};
};

// Attributes to set (sattr3); unset members are left alone.
struct Sattr {
  std::optional<uint32_t> mode;
  std::optional<uint32_t> uid;
  std::optional<uint32_t> gid;
  std::optional<uint64_t> size;
  time_how atime_how = DONT_CHANGE;
  nfstime3 atime{};
  time_how mtime_how = DONT_CHANGE;
  nfstime3 mtime{};

  static Sattr with_mode(uint32_t m) {
    Sattr s;
    s.mode = m;
    return s;
  }
};

struct WccAttr {
  uint64_t size = 0;
  nfstime3 mtime{};
  nfstime3 ctime{};
};

struct Wcc {
  std::optional<WccAttr> before;
  std::optional<Attr> after;
};

// --- Results, one per shape of reply ---------------------------------------

struct StatusResult {
  nfsstat3 status = kNoReply;
};

struct AttrResult {  // GETATTR
  nfsstat3 status = kNoReply;
  Attr attr;
};

struct WccResult {  // SETATTR, REMOVE, RMDIR
  nfsstat3 status = kNoReply;
  Wcc wcc;
};

struct LookupResult {
  nfsstat3 status = kNoReply;
  FileHandle fh;
  std::optional<Attr> attr;
  std::optional<Attr> dir_attr;
};

struct AccessResult {
  nfsstat3 status = kNoReply;
  uint32_t access = 0;
};

struct ReadlinkResult {
  nfsstat3 status = kNoReply;
  std::string target;
};

struct ReadResult {
  nfsstat3 status = kNoReply;
  uint32_t count = 0;
  bool eof = false;
  std::string data;
  std::optional<Attr> attr;
};

struct WriteResult {
  nfsstat3 status = kNoReply;
  uint32_t count = 0;
  stable_how committed = UNSTABLE;
  uint64_t verf = 0;
  Wcc wcc;
};

struct CreateResult {  // CREATE, MKDIR, SYMLINK, MKNOD
  nfsstat3 status = kNoReply;
  FileHandle fh;  // empty if the server returned no handle
  std::optional<Attr> attr;
  Wcc dir_wcc;
};

struct RenameResult {
  nfsstat3 status = kNoReply;
  Wcc from_wcc;
  Wcc to_wcc;
};

struct LinkResult {
  nfsstat3 status = kNoReply;
  std::optional<Attr> attr;
};

struct DirEntry {
  uint64_t fileid = 0;
  std::string name;
  uint64_t cookie = 0;
  std::optional<Attr> attr;  // READDIRPLUS only
  FileHandle fh;             // READDIRPLUS only, may be empty
};

struct ReaddirResult {  // READDIR, READDIRPLUS
  nfsstat3 status = kNoReply;
  uint64_t cookieverf = 0;
  std::vector<DirEntry> entries;
  bool eof = false;
};

struct FsstatResult {
  nfsstat3 status = kNoReply;
  uint64_t tbytes = 0, fbytes = 0, abytes = 0;
  uint64_t tfiles = 0, ffiles = 0, afiles = 0;
  uint32_t invarsec = 0;
};

struct FsinfoResult {
  nfsstat3 status = kNoReply;
  uint32_t rtmax = 0, rtpref = 0, rtmult = 0;
  uint32_t wtmax = 0, wtpref = 0, wtmult = 0;
  uint32_t dtpref = 0;
  uint64_t maxfilesize = 0;
  nfstime3 time_delta{};
  uint32_t properties = 0;
};

struct PathconfResult {
  nfsstat3 status = kNoReply;
  uint32_t linkmax = 0;
  uint32_t name_max = 0;
  bool no_trunc = false;
  bool chown_restricted = false;
  bool case_insensitive = false;
  bool case_preserving = false;
};

struct CommitResult {
  nfsstat3 status = kNoReply;
  uint64_t verf = 0;
  Wcc wcc;
};

struct MountResult {
  mountstat3 status = kMountNoReply;
  FileHandle fh;
  std::vector<int> auth_flavors;
};

struct MountEntry {
  std::string hostname;
  std::string directory;
};

struct ExportEntry {
  std::string directory;
  std::vector<std::string> groups;
};

struct PmapMapping {
  uint32_t program = 0, version = 0, protocol = 0, port = 0;
};

// One libnfs rpc_context connected to one program on one port, with a
// synchronous call helper. Owns the context.
class RpcConnection {
 public:
  using Clock = std::chrono::steady_clock;

  RpcConnection() = default;
  ~RpcConnection();
  RpcConnection(const RpcConnection&) = delete;
  RpcConnection& operator=(const RpcConnection&) = delete;

  // Connects (bounded) and sets the AUTH_SYS credential.
  bool connect(const std::string& address, uint16_t port, uint32_t program,
               uint32_t version, const Credentials& creds);
  bool connected() const { return connected_; }
  const std::string& error() const { return error_; }
  rpc_context* get() { return rpc_; }

  // Issues one call and services the connection until its callback runs or
  // the deadline passes. `issue(cb, priv)` queues the call with libnfs and
  // returns its result code; `on_reply(data)` copies what it needs out of
  // the decoded reply. Returns false (with error()) if there was no reply.
  bool call(std::string_view what,
            const std::function<int(rpc_cb, void*)>& issue,
            const std::function<void(void*)>& on_reply);

  void set_timeout(std::chrono::milliseconds t) { timeout_ = t; }
  // Whether a call that gets no reply fails the test (the default) or only reports it; not,
  // where a node may be cut off on purpose.
  void set_report_no_reply(bool report) { report_no_reply_ = report; }

 private:
  bool run_until(const bool& done, Clock::time_point deadline);

  rpc_context* rpc_ = nullptr;
  bool connected_ = false;
  std::string error_;
  std::chrono::milliseconds timeout_ = std::chrono::seconds(10);
  bool report_no_reply_ = true;
};

// NFSv3 procedures on one connection.
class NfsClient {
 public:
  explicit NfsClient(const Endpoint& ep, Credentials creds = {});
  bool connected() const { return conn_.connected(); }
  const std::string& error() const { return conn_.error(); }
  const Credentials& credentials() const { return creds_; }
  // Calls that get no reply within `timeout` return kNoReply without failing the test, and
  // leave the client unconnected: for tests that cut nodes off on purpose.
  void tolerate_no_reply(std::chrono::milliseconds timeout) {
    conn_.set_timeout(timeout);
    conn_.set_report_no_reply(false);
  }

  bool null();
  AttrResult getattr(const FileHandle& fh);
  WccResult setattr(const FileHandle& fh, const Sattr& s,
                    std::optional<nfstime3> guard_ctime = std::nullopt);
  LookupResult lookup(const FileHandle& dir, const std::string& name);
  AccessResult access(const FileHandle& fh, uint32_t mask);
  ReadlinkResult readlink(const FileHandle& fh);
  ReadResult read(const FileHandle& fh, uint64_t offset, uint32_t count);
  WriteResult write(const FileHandle& fh, uint64_t offset,
                    std::string_view data, stable_how stable = FILE_SYNC);
  // Sends `count` in the header but `data` as the payload (they may differ).
  WriteResult write_with_count(const FileHandle& fh, uint64_t offset,
                               uint32_t count, std::string_view data,
                               stable_how stable);
  CreateResult create(const FileHandle& dir, const std::string& name,
                      createmode3 mode, const Sattr& attrs = {},
                      uint64_t verifier = 0);
  CreateResult mkdir(const FileHandle& dir, const std::string& name,
                     const Sattr& attrs = {});
  CreateResult symlink(const FileHandle& dir, const std::string& name,
                       const std::string& target, const Sattr& attrs = {});
  CreateResult mknod(const FileHandle& dir, const std::string& name,
                     ftype3 type, const Sattr& attrs = {},
                     uint32_t major = 0, uint32_t minor = 0);
  WccResult remove(const FileHandle& dir, const std::string& name);
  WccResult rmdir(const FileHandle& dir, const std::string& name);
  RenameResult rename(const FileHandle& from_dir, const std::string& from,
                      const FileHandle& to_dir, const std::string& to);
  LinkResult link(const FileHandle& file, const FileHandle& dir,
                  const std::string& name);
  ReaddirResult readdir(const FileHandle& dir, uint64_t cookie = 0,
                        uint64_t cookieverf = 0, uint32_t count = 8192);
  ReaddirResult readdirplus(const FileHandle& dir, uint64_t cookie = 0,
                            uint64_t cookieverf = 0, uint32_t dircount = 8192,
                            uint32_t maxcount = 32768);
  FsstatResult fsstat(const FileHandle& fh);
  FsinfoResult fsinfo(const FileHandle& fh);
  PathconfResult pathconf(const FileHandle& fh);
  CommitResult commit(const FileHandle& fh, uint64_t offset = 0,
                      uint32_t count = 0);

  // --- Conveniences for setting up a test; they record a gtest failure if
  // the server refuses. -----------------------------------------------------

  // CREATE GUARDED with `mode`; the handle (looked up if not returned).
  FileHandle make_file(const FileHandle& dir, const std::string& name,
                       uint32_t mode = 0644, std::string_view contents = {});
  FileHandle make_dir(const FileHandle& dir, const std::string& name,
                      uint32_t mode = 0755);
  // Every entry of a directory, following cookies (bounded).
  std::vector<DirEntry> list(const FileHandle& dir, uint32_t count = 8192);
  // The whole file, read in `chunk`-sized pieces (bounded).
  std::string read_all(const FileHandle& fh, uint32_t chunk = 65536);

 private:
  Credentials creds_;
  RpcConnection conn_;
};

// MOUNT v3 procedures on one connection.
class MountClient {
 public:
  explicit MountClient(const Endpoint& ep, Credentials creds = {});
  bool connected() const { return conn_.connected(); }
  const std::string& error() const { return conn_.error(); }

  bool null();
  MountResult mnt(const std::string& path);
  std::optional<std::vector<MountEntry>> dump();
  bool umnt(const std::string& path);
  bool umntall();
  std::optional<std::vector<ExportEntry>> exports();

 private:
  RpcConnection conn_;
};

// PMAP v2 procedures on one connection.
class PortmapClient {
 public:
  explicit PortmapClient(const Endpoint& ep);
  bool connected() const { return conn_.connected(); }
  const std::string& error() const { return conn_.error(); }

  bool null();
  // The port, 0 if not registered, nullopt if there was no reply.
  std::optional<uint32_t> getport(uint32_t program, uint32_t version,
                                  uint32_t protocol);
  std::optional<std::vector<PmapMapping>> dump();

 private:
  RpcConnection conn_;
};

// Big files in a few seconds: `streams` connections to `ep` at once, each over a contiguous
// share of the file in pieces of `piece` bytes (a synchronous client waits out every round trip;
// several keep the node busy).
//
// Writes `data` from offset 0 of `fh` (UNSTABLE), then COMMITs; false, with a gtest failure
// naming the offset, if a WRITE or the COMMIT is refused.
bool write_in_streams(const Endpoint& ep, const FileHandle& fh, std::string_view data,
                      uint32_t piece = kLibnfsMaxTransfer, int streams = 4);
// Whether `fh` holds exactly `expected`: its size, every piece's bytes, and EOF right after them;
// a gtest failure naming the first wrong offset if not.
bool reads_back_as(const Endpoint& ep, const FileHandle& fh, std::string_view expected,
                   uint32_t piece = kLibnfsMaxTransfer, int streams = 4);

// Mounts `export_path` and returns its root handle (gtest failure if not).
FileHandle mount_root(const Endpoint& ep, const std::string& export_path);

// An NFS URL for libnfs's high-level API that names both ports, so that it
// does not need a portmapper.
std::string libnfs_url(const Endpoint& ep, const std::string& export_path,
                    std::optional<Credentials> creds = std::nullopt);

}  // namespace tidepool::test
