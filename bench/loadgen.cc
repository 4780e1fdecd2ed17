// tp-loadgen: an NFSv3 load generator built on libnfs.
//
// It drives one server (tided, NFS-Ganesha, any NFSv3 server) with one of five workloads and
// prints one JSON object with the result on stdout. Each thread owns one `nfs_context` (one TCP
// connection) and keeps `--depth` requests in flight on it through libnfs's async calls and a
// poll loop. Given `--url` several times (nodes of one cluster, one namespace), thread k connects
// to URL k mod n, so that one run spreads its connections over the nodes. `--prepare` creates
// the data set a workload reads; without it the measured run starts. Everything lives under
// /tp-bench (and /tp-small-* for small-file runs) in the export.
//
// Bounded by construction: every measured run stops issuing after `--duration` and gives up on
// in-flight requests 30 s later; every setup call gives up after 60 s; a prepare gives up after
// `--prepare-timeout`. Errors in server answers are counted (the first one is printed to stderr);
// a mount failure or a missing data set exits with status 1, a usage error with status 2.

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

// The raw headers need libnfs.h (EXTERN, the context types) first.
// clang-format off
#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-raw-mount.h>
#include <nfsc/libnfs-raw-nfs.h>
// clang-format on

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace tidepool::bench {
namespace {

using Clock = std::chrono::steady_clock;
using Fh = std::vector<char>;  // an NFSv3 file handle's opaque bytes

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;
constexpr uint64_t kGiB = 1024 * kMiB;
constexpr uint64_t kPrepareBlock = kMiB;     // prepare always writes in 1 MiB WRITEs
constexpr uint64_t kSmallFileSize = 115000;  // the ImageNet JPEG average
constexpr uint64_t kFilesPerDir = 100;       // metadata tree: /tp-bench/meta/d<i/100>/f<i>
constexpr uint32_t kReaddirDircount = 8192;
constexpr uint32_t kReaddirMaxcount = 32768;  // one READDIRPLUS lists a 100-entry directory
constexpr int kRpcTimeoutMs = 20000;
constexpr auto kCallTimeout = std::chrono::seconds(60);
constexpr auto kDrainGrace = std::chrono::seconds(30);
constexpr int kMaxPollMs = 100;

constexpr const char* kBenchDir = "/tp-bench";

// The rename tree: /tp-bench/rename/d<j>, j < kRenameDirs. File i, r<i>, is made in its first
// directory and moves between that and its second, another for each run of kRenameDirs files.
constexpr uint64_t kRenameDirs = 16;
std::pair<size_t, size_t> rename_dirs_of(uint64_t file) {
  const uint64_t first = file % kRenameDirs;
  const uint64_t second = (first + 1 + (file / kRenameDirs) % (kRenameDirs - 1)) % kRenameDirs;
  return {first, second};
}
std::string rename_file_name(uint64_t file) { return "r" + std::to_string(file); }

enum class Workload { kSeqRead, kSeqWrite, kRandRead, kSmallFile, kMetadata, kRename, kDlTrain };

const char* workload_name(Workload w) {
  switch (w) {
    case Workload::kSeqRead:
      return "seq-read";
    case Workload::kSeqWrite:
      return "seq-write";
    case Workload::kRandRead:
      return "rand-read";
    case Workload::kSmallFile:
      return "small-file";
    case Workload::kMetadata:
      return "metadata";
    case Workload::kRename:
      return "rename";
    case Workload::kDlTrain:
      return "dl-train";
  }
  return "?";
}

std::optional<Workload> parse_workload(std::string_view s) {
  for (Workload w :
       {Workload::kSeqRead, Workload::kSeqWrite, Workload::kRandRead, Workload::kSmallFile,
        Workload::kMetadata, Workload::kRename, Workload::kDlTrain}) {
    if (s == workload_name(w)) return w;
  }
  return std::nullopt;
}

struct Options {
  std::vector<std::string> urls;  // thread k uses urls[k % urls.size()]
  Workload workload = Workload::kSeqRead;
  int threads = 4;
  int depth = 8;
  uint64_t block_size = 0;  // 0: the workload's default
  uint64_t file_size = 0;   // 0: the workload's default
  uint64_t files = 2000;
  double duration_s = 10;
  double prepare_timeout_s = 600;
  uint64_t max_ops = 0;  // 0: bounded by time only
  uint64_t seed = 1;
  bool prepare = false;
  // dl-train: read the data set's files from this local directory (the export's own
  // directory, through the page cache) instead of through NFS.
  std::string local_dir;
  // small-file: every thread's files in one directory, rather than a directory a thread.
  bool shared_dir = false;
};

// The server, export and MOUNT port named by an nfs:// URL. libnfs parses the URL again for
// each context (that is how nfsport/mountport reach it); this copy serves the raw MOUNT call.
struct Target {
  std::string url;
  std::string server;
  std::string export_path;
  int mount_port = 0;  // 0: not given in the URL
};

std::optional<Target> parse_target(const std::string& url) {
  constexpr std::string_view kScheme = "nfs://";
  if (url.compare(0, kScheme.size(), kScheme) != 0) return std::nullopt;
  Target t;
  t.url = url;
  const size_t host_end = url.find('/', kScheme.size());
  if (host_end == std::string::npos || host_end == kScheme.size()) return std::nullopt;
  t.server = url.substr(kScheme.size(), host_end - kScheme.size());
  const size_t query = url.find('?', host_end);
  t.export_path = url.substr(host_end, query == std::string::npos ? query : query - host_end);
  if (query != std::string::npos) {
    std::string_view q = std::string_view(url).substr(query + 1);
    while (!q.empty()) {
      const size_t amp = q.find('&');
      std::string_view kv = q.substr(0, amp);
      if (kv.starts_with("mountport=")) {
        kv.remove_prefix(10);
        std::from_chars(kv.data(), kv.data() + kv.size(), t.mount_port);
      }
      if (amp == std::string_view::npos) break;
      q.remove_prefix(amp + 1);
    }
  }
  return t;
}

// Prints the first error any thread meets; the rest are only counted.
std::atomic<bool> g_error_reported{false};

void report_first_error(std::string_view what, std::string_view detail) {
  if (!g_error_reported.exchange(true)) {
    std::fprintf(stderr, "tp-loadgen: first error: %.*s: %.*s\n", static_cast<int>(what.size()),
                 what.data(), static_cast<int>(detail.size()), detail.data());
  }
}

std::string_view error_text(void* data) {
  return data != nullptr ? static_cast<const char*>(data) : "cancelled";
}

// A failed READ's or WRITE's errno and the context's last error: libnfs 4.0 may hand a call
// split in chunks a `data` that is not its error text.
std::string chunked_error_text(int err, nfs_context* nfs) {
  const char* last = nfs != nullptr ? nfs_get_error(nfs) : nullptr;
  return std::string(std::strerror(-err)) + " (" + (last != nullptr ? last : "no detail") + ")";
}

// The outcome of one async call driven to completion by Connection::call.
struct CallState {
  bool done = false;
  int err = 0;
  void* data = nullptr;
  std::string message;
  nfs_stat_64* stat_out = nullptr;  // if set, a successful stat's attributes are copied here
};

void on_call_done(int err, nfs_context* /*nfs*/, void* data, void* private_data) {
  auto* st = static_cast<CallState*>(private_data);
  st->done = true;
  st->err = err;
  if (err < 0) {
    st->message = error_text(data);
  } else if (st->stat_out != nullptr && data != nullptr) {
    *st->stat_out = *static_cast<nfs_stat_64*>(data);
  } else {
    st->data = data;
  }
}

// The outcome of a raw LOOKUP driven to completion by Connection::lookup.
struct LookupState {
  bool done = false;
  bool ok = false;
  std::string message;
  Fh fh;
};

void on_setup_lookup(rpc_context* /*rpc*/, int status, void* data, void* private_data) {
  auto* st = static_cast<LookupState*>(private_data);
  st->done = true;
  if (status != RPC_STATUS_SUCCESS) {
    st->message = error_text(data);
    return;
  }
  auto* res = static_cast<LOOKUP3res*>(data);
  if (res->status != NFS3_OK) {
    st->message = "nfsstat3 " + std::to_string(res->status);
    return;
  }
  const nfs_fh3& obj = res->LOOKUP3res_u.resok.object;
  st->fh.assign(obj.data.data_val, obj.data.data_val + obj.data.data_len);
  st->ok = true;
}

// One mounted libnfs context: one TCP connection to the server. Used by one thread only.
// Callbacks of requests still in flight run when the connection is abandoned or destroyed, so
// whatever they point at must outlive it.
class Connection {
 public:
  static std::unique_ptr<Connection> mount(const Target& target, uint32_t first_xid,
                                           std::string* error) {
    nfs_context* nfs = nfs_init_context();
    if (nfs == nullptr) {
      *error = "cannot create an NFS context";
      return nullptr;
    }
    auto conn = std::unique_ptr<Connection>(new Connection(nfs));
    nfs_set_timeout(nfs, kRpcTimeoutMs);
    // A lost connection ends the run (counted as errors) rather than being retried in a loop.
    nfs_set_autoreconnect(nfs, 0);
    nfs_url* url = nfs_parse_url_dir(nfs, target.url.c_str());
    if (url == nullptr) {
      *error = "bad URL " + target.url + ": " + conn->error();
      return nullptr;
    }
    // Distinct XIDs per connection, so that a duplicate request cache keyed on XID and client
    // address never confuses two of our connections.
    rpc_set_next_xid(nfs_get_rpc_context(nfs), first_xid);
    CallState st;
    const int rc = conn->call(
        [&](nfs_cb cb, void* p) { return nfs_mount_async(nfs, url->server, url->path, cb, p); },
        &st);
    nfs_destroy_url(url);
    if (rc < 0) {
      *error = "cannot mount " + target.url + ": " + st.message;
      return nullptr;
    }
    return conn;
  }

  ~Connection() { abandon(); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  nfs_context* nfs() const { return nfs_; }
  rpc_context* rpc() const { return nfs_get_rpc_context(nfs_); }
  bool usable() const { return nfs_ != nullptr; }

  std::string error() const {
    const char* e = nfs_ != nullptr ? nfs_get_error(nfs_) : nullptr;
    return e != nullptr && *e != '\0' ? e : "connection closed";
  }

  // Destroys the context; the callbacks of requests in flight run now, cancelled.
  void abandon() {
    if (nfs_ != nullptr) {
      nfs_context* nfs = nfs_;
      nfs_ = nullptr;
      nfs_destroy_context(nfs);
    }
  }

  // Waits at most `max_wait_ms` for socket events and runs the callbacks they complete.
  // Returns false once the connection is unusable.
  bool pump(int max_wait_ms) {
    if (nfs_ == nullptr) return false;
    pollfd pfd{};
    pfd.fd = nfs_get_fd(nfs_);
    pfd.events = static_cast<short>(nfs_which_events(nfs_));
    const int n = ::poll(&pfd, 1, max_wait_ms);
    if (n < 0 && errno != EINTR) return false;
    return nfs_service(nfs_, n > 0 ? pfd.revents : 0) >= 0;
  }

  // Starts one async call with `issue(cb, private_data)` and waits for it (bounded). Returns
  // its status (>= 0) or -errno; on failure st->message says why. A call that times out
  // abandons the connection, so that its callback can never touch `st` later.
  template <typename Issue>
  int call(Issue issue, CallState* st) {
    if (nfs_ == nullptr) {
      st->message = "connection closed";
      return -EIO;
    }
    if (issue(&on_call_done, st) < 0) {
      st->message = error();
      return -EIO;
    }
    const auto deadline = Clock::now() + kCallTimeout;
    while (!st->done) {
      if (Clock::now() >= deadline || !pump(kMaxPollMs)) {
        if (!st->done) st->message = Clock::now() >= deadline ? "timed out" : error();
        abandon();  // runs the callback (cancelled) while `st` is still alive
        return -ETIMEDOUT;
      }
    }
    return st->err;
  }

  int mkdir(const std::string& path, std::string* message) {
    CallState st;
    const int rc =
        call([&](nfs_cb cb, void* p) { return nfs_mkdir_async(nfs_, path.c_str(), cb, p); }, &st);
    *message = st.message;
    return rc;
  }

  int create(const std::string& path, int flags, nfsfh** fh, std::string* message) {
    CallState st;
    const int rc =
        call([&](nfs_cb cb,
                 void* p) { return nfs_create_async(nfs_, path.c_str(), flags, 0644, cb, p); },
             &st);
    *message = st.message;
    if (rc >= 0) *fh = static_cast<nfsfh*>(st.data);
    return rc;
  }

  int open(const std::string& path, int flags, nfsfh** fh, std::string* message) {
    CallState st;
    const int rc = call(
        [&](nfs_cb cb, void* p) { return nfs_open_async(nfs_, path.c_str(), flags, cb, p); }, &st);
    *message = st.message;
    if (rc >= 0) *fh = static_cast<nfsfh*>(st.data);
    return rc;
  }

  int close(nfsfh* fh, std::string* message) {
    CallState st;
    const int rc = call([&](nfs_cb cb, void* p) { return nfs_close_async(nfs_, fh, cb, p); }, &st);
    *message = st.message;
    return rc;
  }

  int unlink(const std::string& path, std::string* message) {
    CallState st;
    const int rc =
        call([&](nfs_cb cb, void* p) { return nfs_unlink_async(nfs_, path.c_str(), cb, p); }, &st);
    *message = st.message;
    return rc;
  }

  int rmdir(const std::string& path, std::string* message) {
    CallState st;
    const int rc =
        call([&](nfs_cb cb, void* p) { return nfs_rmdir_async(nfs_, path.c_str(), cb, p); }, &st);
    *message = st.message;
    return rc;
  }

  int stat(const std::string& path, nfs_stat_64* out, std::string* message) {
    CallState st;
    st.stat_out = out;
    const int rc =
        call([&](nfs_cb cb, void* p) { return nfs_stat64_async(nfs_, path.c_str(), cb, p); }, &st);
    *message = st.message;
    return rc;
  }

  // Raw NFSv3 LOOKUP of `name` in the directory `dir`.
  bool lookup(const Fh& dir, const std::string& name, Fh* out, std::string* message) {
    if (nfs_ == nullptr) {
      *message = "connection closed";
      return false;
    }
    LookupState st;
    LOOKUP3args args{};
    args.what.dir.data.data_len = static_cast<u_int>(dir.size());
    args.what.dir.data.data_val = const_cast<char*>(dir.data());
    args.what.name = const_cast<char*>(name.c_str());
    if (rpc_nfs3_lookup_async(rpc(), &on_setup_lookup, &args, &st) < 0) {
      *message = error();
      return false;
    }
    const auto deadline = Clock::now() + kCallTimeout;
    while (!st.done) {
      if (Clock::now() >= deadline || !pump(kMaxPollMs)) {
        if (!st.done) st.message = "timed out or connection lost";
        abandon();
        break;
      }
    }
    *message = st.message;
    if (st.ok) *out = std::move(st.fh);
    return st.ok;
  }

  // mkdir that accepts an existing directory.
  bool ensure_dir(const std::string& path, std::string* message) {
    const int rc = mkdir(path, message);
    if (rc >= 0 || rc == -EEXIST) return true;
    *message = "mkdir " + path + ": " + *message;
    return false;
  }

 private:
  explicit Connection(nfs_context* nfs) : nfs_(nfs) {}

  nfs_context* nfs_;  // null once abandoned
};

// The state of the MOUNT3 MNT exchange in mount_root_fh.
struct MntState {
  std::string export_path;
  bool done = false;
  std::optional<Fh> fh;
  std::string message;
};

void on_mnt(rpc_context* /*rpc*/, int status, void* data, void* private_data) {
  auto* s = static_cast<MntState*>(private_data);
  s->done = true;
  if (status != RPC_STATUS_SUCCESS) {
    s->message = error_text(data);
    return;
  }
  auto* res = static_cast<mountres3*>(data);
  if (res->fhs_status != MNT3_OK) {
    s->message = "MNT status " + std::to_string(res->fhs_status);
    return;
  }
  const fhandle3& fh = res->mountres3_u.mountinfo.fhandle;
  s->fh = Fh(fh.fhandle3_val, fh.fhandle3_val + fh.fhandle3_len);
}

void on_mount_port_connected(rpc_context* rpc, int status, void* data, void* private_data) {
  auto* s = static_cast<MntState*>(private_data);
  if (status != RPC_STATUS_SUCCESS) {
    s->done = true;
    s->message = "connect to the MOUNT port: " + std::string(error_text(data));
    return;
  }
  if (rpc_mount3_mnt_async(rpc, &on_mnt, s->export_path.data(), s) < 0) {
    s->done = true;
    s->message = rpc_get_error(rpc);
  }
}

// The export's root file handle, from a MOUNT3 MNT call on a connection of its own (libnfs
// does not publish the one its mount obtained).
std::optional<Fh> mount_root_fh(const Target& target, std::string* error) {
  if (target.mount_port == 0) {
    *error = "the metadata workload needs mountport= in the URL";
    return std::nullopt;
  }
  rpc_context* rpc = rpc_init_context();
  if (rpc == nullptr) {
    *error = "cannot create an RPC context";
    return std::nullopt;
  }
  MntState st;
  st.export_path = target.export_path;
  const auto deadline = Clock::now() + kCallTimeout;
  if (rpc_connect_port_async(rpc, target.server.c_str(), target.mount_port, MOUNT_PROGRAM, MOUNT_V3,
                             &on_mount_port_connected, &st) < 0) {
    st.done = true;
    st.message = rpc_get_error(rpc);
  }
  while (!st.done && Clock::now() < deadline) {
    pollfd pfd{};
    pfd.fd = rpc_get_fd(rpc);
    pfd.events = static_cast<short>(rpc_which_events(rpc));
    const int n = ::poll(&pfd, 1, kMaxPollMs);
    if (n < 0 && errno != EINTR) break;
    if (rpc_service(rpc, n > 0 ? pfd.revents : 0) < 0) {
      if (!st.done) st.message = rpc_get_error(rpc);
      break;
    }
  }
  rpc_destroy_context(rpc);  // runs a pending callback (cancelled) while `st` is alive
  if (!st.fh) {
    *error = "MOUNT " + target.export_path + ": " + (st.message.empty() ? "timed out" : st.message);
  }
  return st.fh;
}

struct Counters {
  uint64_t ops = 0;
  uint64_t bytes = 0;
  uint64_t errors = 0;
};

class Job;

struct DriveLimits {
  Clock::time_point stop_issuing;  // no new operation starts after this
  Clock::time_point give_up;       // requests still in flight then count as errors
  uint64_t max_ops = 0;            // 0: no bound on the number of operations started
};

enum class DriveEnd { kDone, kGaveUp, kDisconnected };

struct DriveResult {
  DriveEnd end = DriveEnd::kDone;
  bool cut_by_time = false;  // stop_issuing or max_ops ended it before the job ran out of work
};

DriveResult drive(Job& job, const DriveLimits& limits);

// One thread's share of a workload: operations issued into `depth` slots, each slot holding at
// most one operation (which may be a chain of calls). The slot `depth` is reserved for the one
// closing call of a run (start_final). Single-threaded; callbacks run inside Connection::pump.
class Job {
 public:
  Job(Connection& conn, int depth) : conn_(conn), busy_(depth + 1, false) {}
  virtual ~Job() = default;
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  // Runs on the worker thread before the clock starts; may block (bounded).
  virtual bool setup(std::string* error) {
    (void)error;
    return true;
  }
  // Starts a new operation in the idle slot `slot`. Returns false when nothing is left to do.
  virtual bool start(int slot) = 0;
  // Starts the call that closes a timed run (e.g. COMMIT) in `slot`; false if there is none.
  virtual bool start_final(int slot) {
    (void)slot;
    return false;
  }
  // Runs after the clock stopped, only if the connection is still usable.
  virtual void teardown() {}

  const Counters& counters() const { return counters_; }
  int depth() const { return static_cast<int>(busy_.size()) - 1; }

 protected:
  // Called by a completion callback when the slot's operation is over.
  void release(int slot) {
    busy_[slot] = false;
    --in_flight_;
  }
  void record_error(std::string_view what, std::string_view detail) {
    ++counters_.errors;
    report_first_error(what, detail);
  }
  // True once the run gave up: callbacks then only release their slot.
  bool aborted() const { return aborted_; }
  // Whether the run stopped issuing: an operation made of a chain of calls ends early then.
  bool stopping() const { return Clock::now() >= stop_issuing_; }

  Connection& conn_;
  Counters counters_;

 private:
  friend DriveResult drive(Job& job, const DriveLimits& limits);

  std::vector<bool> busy_;  // slot -> an operation is outstanding
  int in_flight_ = 0;       // number of true entries in busy_
  bool aborted_ = false;
  Clock::time_point stop_issuing_ = Clock::time_point::max();
};

DriveResult drive(Job& job, const DriveLimits& limits) {
  DriveResult result;
  job.stop_issuing_ = limits.stop_issuing;
  const int depth = job.depth();
  bool issuing = true;
  bool final_started = false;
  uint64_t started = 0;
  for (;;) {
    const auto now = Clock::now();
    if (issuing && now >= limits.stop_issuing) {
      issuing = false;
      result.cut_by_time = true;
    }
    for (int slot = 0; issuing && slot < depth; ++slot) {
      if (job.busy_[slot]) continue;
      if (limits.max_ops != 0 && started >= limits.max_ops) {
        issuing = false;
        result.cut_by_time = true;
        break;
      }
      job.busy_[slot] = true;
      ++job.in_flight_;
      if (!job.start(slot)) {
        job.busy_[slot] = false;
        --job.in_flight_;
        issuing = false;
        break;
      }
      ++started;
    }
    if (!issuing && job.in_flight_ == 0) {
      if (final_started) return result;
      final_started = true;
      job.busy_[depth] = true;
      ++job.in_flight_;
      if (!job.start_final(depth)) {
        job.busy_[depth] = false;
        --job.in_flight_;
        return result;
      }
      continue;
    }
    if (now >= limits.give_up) {
      job.counters_.errors += static_cast<uint64_t>(job.in_flight_);
      report_first_error("deadline", std::to_string(job.in_flight_) + " requests unanswered");
      job.aborted_ = true;
      job.conn_.abandon();
      result.end = DriveEnd::kGaveUp;
      return result;
    }
    int wait_ms = kMaxPollMs;
    if (issuing) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(limits.stop_issuing - now);
      wait_ms = static_cast<int>(std::clamp<int64_t>(left.count(), 0, kMaxPollMs));
    }
    if (!job.conn_.pump(wait_ms)) {
      job.counters_.errors += static_cast<uint64_t>(job.in_flight_) + 1;
      report_first_error("connection", job.conn_.error());
      job.aborted_ = true;
      job.conn_.abandon();
      result.end = DriveEnd::kDisconnected;
      return result;
    }
  }
}

void fill_random(std::vector<char>* buf, std::mt19937_64* rng) {
  for (size_t i = 0; i < buf->size(); i += sizeof(uint64_t)) {
    const uint64_t v = (*rng)();
    std::memcpy(buf->data() + i, &v, std::min(sizeof v, buf->size() - i));
  }
}

// Reads `file_size` bytes of one file in `block` requests: sequentially (one pass), or at
// random block-aligned offsets until the run's time is up.
class ReadJob final : public Job {
 public:
  ReadJob(Connection& conn, int depth, std::string path, uint64_t file_size, uint64_t block,
          bool random, uint64_t seed)
      : Job(conn, depth),
        path_(std::move(path)),
        file_size_(file_size),
        block_(block),
        random_(random),
        rng_(seed),
        slots_(depth) {
    for (int i = 0; i < depth; ++i) slots_[i] = Slot{this, i, 0};
  }

  bool setup(std::string* error) override {
    std::string msg;
    nfs_stat_64 st{};
    if (conn_.stat(path_, &st, &msg) < 0) {
      *error = "stat " + path_ + ": " + msg + " (run with --prepare first)";
      return false;
    }
    if (st.nfs_size < file_size_) {
      *error = path_ + " holds " + std::to_string(st.nfs_size) + " bytes, not " +
               std::to_string(file_size_) + " (prepare with the same --file-size and --threads)";
      return false;
    }
    if (conn_.open(path_, O_RDONLY, &fh_, &msg) < 0) {
      *error = "open " + path_ + ": " + msg;
      return false;
    }
    return true;
  }

  bool start(int slot) override {
    uint64_t offset = next_;
    if (random_) {
      offset = (rng_() % (file_size_ / block_)) * block_;
    } else if (next_ >= file_size_) {
      return false;
    }
    Slot& s = slots_[slot];
    s.expected = std::min(block_, file_size_ - offset);
    if (nfs_pread_async(conn_.nfs(), fh_, offset, s.expected, &on_read, &s) < 0) {
      record_error("READ", conn_.error());
      return false;
    }
    next_ = offset + s.expected;
    return true;
  }

  void teardown() override {
    std::string msg;
    if (fh_ != nullptr) conn_.close(fh_, &msg);
  }

 private:
  struct Slot {
    ReadJob* job;
    int index;
    uint64_t expected;
  };

  static void on_read(int err, nfs_context* nfs, void*, void* private_data) {
    auto& s = *static_cast<Slot*>(private_data);
    ReadJob& job = *s.job;
    if (!job.aborted()) {
      if (err < 0) {
        job.record_error("READ", chunked_error_text(err, nfs));
      } else if (static_cast<uint64_t>(err) != s.expected) {
        job.record_error("READ", "short read of " + std::to_string(err) + " bytes");
      } else {
        ++job.counters_.ops;
        job.counters_.bytes += static_cast<uint64_t>(err);
      }
    }
    job.release(s.index);
  }

  const std::string path_;
  const uint64_t file_size_;
  const uint64_t block_;
  const bool random_;
  std::mt19937_64 rng_;
  std::vector<Slot> slots_;
  nfsfh* fh_ = nullptr;
  uint64_t next_ = 0;  // sequential: the next offset to read
};

// The seeds' deep-learning training read: each of `depth` readers picks a random file of the
// data set, reads it start to end in `block` READs (one in flight), then picks another.
class DlTrainJob final : public Job {
 public:
  DlTrainJob(Connection& conn, int depth, std::vector<std::string> paths, uint64_t file_size,
             uint64_t block, uint64_t seed)
      : Job(conn, depth),
        paths_(std::move(paths)),
        file_size_(file_size),
        block_(block),
        rng_(seed),
        readers_(depth) {
    for (int i = 0; i < depth; ++i) readers_[i] = Reader{this, i, nullptr, 0, 0};
  }

  bool setup(std::string* error) override {
    std::string msg;
    for (const std::string& path : paths_) {
      nfs_stat_64 st{};
      if (conn_.stat(path, &st, &msg) < 0 || st.nfs_size < file_size_) {
        *error = path + ": " + (msg.empty() ? "shorter than --file-size" : msg) +
                 " (prepare with --threads as many as --files and the same --file-size)";
        return false;
      }
      nfsfh* fh = nullptr;
      if (conn_.open(path, O_RDONLY, &fh, &msg) < 0) {
        *error = "open " + path + ": " + msg;
        return false;
      }
      files_.push_back(fh);
    }
    return true;
  }

  bool start(int slot) override {
    Reader& r = readers_[slot];
    r.file = files_[rng_() % files_.size()];
    r.offset = 0;
    return read_next(r);
  }

  void teardown() override {
    std::string msg;
    for (nfsfh* fh : files_) conn_.close(fh, &msg);
  }

 private:
  struct Reader {
    DlTrainJob* job;
    int index;
    nfsfh* file;
    uint64_t offset;
    uint64_t expected;
  };

  bool read_next(Reader& r) {
    r.expected = std::min(block_, file_size_ - r.offset);
    if (nfs_pread_async(conn_.nfs(), r.file, r.offset, r.expected, &on_read, &r) < 0) {
      record_error("READ", conn_.error());
      return false;
    }
    return true;
  }

  static void on_read(int err, nfs_context* nfs, void*, void* private_data) {
    auto& r = *static_cast<Reader*>(private_data);
    DlTrainJob& job = *r.job;
    if (!job.aborted()) {
      if (err < 0) {
        job.record_error("READ", chunked_error_text(err, nfs));
      } else if (static_cast<uint64_t>(err) != r.expected) {
        job.record_error("READ", "short read of " + std::to_string(err) + " bytes");
      } else {
        ++job.counters_.ops;
        job.counters_.bytes += static_cast<uint64_t>(err);
        r.offset += r.expected;
        if (r.offset < job.file_size_ && !job.stopping() && job.read_next(r)) return;
      }
    }
    job.release(r.index);
  }

  const std::vector<std::string> paths_;
  const uint64_t file_size_;
  const uint64_t block_;
  std::mt19937_64 rng_;
  std::vector<Reader> readers_;
  std::vector<nfsfh*> files_;
};

// Writes the range [begin, end) of one file in `block` requests, then COMMITs (timed).
// `fresh` files are removed and created anew; otherwise the file must exist.
class WriteJob final : public Job {
 public:
  WriteJob(Connection& conn, int depth, std::string path, uint64_t begin, uint64_t end,
           uint64_t block, bool fresh, bool unlink_after, uint64_t seed)
      : Job(conn, depth),
        path_(std::move(path)),
        end_(end),
        block_(block),
        fresh_(fresh),
        unlink_after_(unlink_after),
        next_(begin),
        slots_(depth + 1) {
    std::mt19937_64 rng(seed);
    for (int i = 0; i <= depth; ++i) {
      slots_[i].job = this;
      slots_[i].index = i;
      if (i < depth) {
        slots_[i].buf.resize(block);
        fill_random(&slots_[i].buf, &rng);
      }
    }
  }

  bool setup(std::string* error) override {
    std::string msg;
    int rc = 0;
    if (fresh_) {
      conn_.unlink(path_, &msg);  // absent is fine
      rc = conn_.create(path_, O_WRONLY, &fh_, &msg);
    } else {
      rc = conn_.open(path_, O_WRONLY, &fh_, &msg);
    }
    if (rc < 0) {
      *error = (fresh_ ? "create " : "open ") + path_ + ": " + msg;
      return false;
    }
    return true;
  }

  bool start(int slot) override {
    if (next_ >= end_) return false;
    Slot& s = slots_[slot];
    s.expected = std::min(block_, end_ - next_);
    // Every block differs from the others, so no server can store them as one.
    std::memcpy(s.buf.data(), &next_, std::min<size_t>(sizeof next_, s.buf.size()));
    if (nfs_pwrite_async(conn_.nfs(), fh_, next_, s.expected, s.buf.data(), &on_written, &s) < 0) {
      record_error("WRITE", conn_.error());
      return false;
    }
    next_ += s.expected;
    return true;
  }

  bool start_final(int slot) override {
    if (nfs_fsync_async(conn_.nfs(), fh_, &on_committed, &slots_[slot]) < 0) {
      record_error("COMMIT", conn_.error());
      return false;
    }
    return true;
  }

  void teardown() override {
    std::string msg;
    if (fh_ != nullptr) conn_.close(fh_, &msg);
    if (unlink_after_) conn_.unlink(path_, &msg);
  }

 private:
  struct Slot {
    WriteJob* job = nullptr;
    int index = 0;
    uint64_t expected = 0;
    std::vector<char> buf;  // owned by the request in flight until its callback
  };

  static void on_written(int err, nfs_context* nfs, void*, void* private_data) {
    auto& s = *static_cast<Slot*>(private_data);
    WriteJob& job = *s.job;
    if (!job.aborted()) {
      if (err < 0) {
        job.record_error("WRITE", chunked_error_text(err, nfs));
      } else if (static_cast<uint64_t>(err) != s.expected) {
        job.record_error("WRITE", "short write of " + std::to_string(err) + " bytes");
      } else {
        ++job.counters_.ops;
        job.counters_.bytes += static_cast<uint64_t>(err);
      }
    }
    job.release(s.index);
  }

  static void on_committed(int err, nfs_context*, void* data, void* private_data) {
    auto& s = *static_cast<Slot*>(private_data);
    if (!s.job->aborted() && err < 0) s.job->record_error("COMMIT", error_text(data));
    s.job->release(s.index);
  }

  const std::string path_;
  const uint64_t end_;
  const uint64_t block_;
  const bool fresh_;
  const bool unlink_after_;
  uint64_t next_;
  std::vector<Slot> slots_;
  nfsfh* fh_ = nullptr;
};

// Per file: create, write `size` bytes, close (COMMIT), stat, open, read it back, close.
// One operation = one file through all of that.
class SmallFileJob final : public Job {
 public:
  // `names`: the prefix of its files' names, which threads sharing a directory tell apart by.
  SmallFileJob(Connection& conn, int depth, std::string dir, std::string names, uint64_t count,
               uint64_t size, uint64_t seed)
      : Job(conn, depth),
        dir_(std::move(dir)),
        names_(std::move(names)),
        count_(count),
        size_(size),
        payload_(size),
        slots_(depth) {
    std::mt19937_64 rng(seed);
    fill_random(&payload_, &rng);
    for (int i = 0; i < depth; ++i) {
      slots_[i].job = this;
      slots_[i].index = i;
    }
  }

  // The run's files and directory go, untimed: no later run is measured against a page cache
  // (and a disk) that this one's files still fill, which made results follow the order in which
  // servers ran.
  void teardown() override {
    std::string msg;
    for (uint64_t file = 0; file < next_file_; ++file) conn_.unlink(file_path(file), &msg);
    conn_.rmdir(dir_, &msg);
  }

  bool start(int slot) override {
    if (next_file_ >= count_) return false;
    Slot& s = slots_[slot];
    s.path = file_path(next_file_);
    s.fh = nullptr;
    s.step = Step::kCreate;
    if (nfs_create_async(conn_.nfs(), s.path.c_str(), O_WRONLY, 0644, &on_step, &s) < 0) {
      record_error("CREATE", conn_.error());
      return false;
    }
    ++next_file_;
    return true;
  }

 private:
  enum class Step { kCreate, kWrite, kCloseWritten, kStat, kOpen, kRead, kCloseRead, kCloseFailed };

  std::string file_path(uint64_t file) const {
    return dir_ + "/" + names_ + std::to_string(file);
  }

  struct Slot {
    SmallFileJob* job = nullptr;
    int index = 0;
    Step step = Step::kCreate;
    std::string path;
    nfsfh* fh = nullptr;  // open between create/open and the matching close
  };

  static const char* step_name(Step step) {
    switch (step) {
      case Step::kCreate:
        return "CREATE";
      case Step::kWrite:
        return "WRITE";
      case Step::kCloseWritten:
        return "CLOSE(COMMIT)";
      case Step::kStat:
        return "STAT";
      case Step::kOpen:
        return "OPEN";
      case Step::kRead:
        return "READ";
      case Step::kCloseRead:
      case Step::kCloseFailed:
        return "CLOSE";
    }
    return "?";
  }

  // Ends the slot's file as failed: counts the error and closes a handle left open.
  void fail(Slot& s, std::string_view detail) {
    record_error(step_name(s.step), detail);
    if (s.fh != nullptr) {
      nfsfh* fh = std::exchange(s.fh, nullptr);
      s.step = Step::kCloseFailed;
      if (nfs_close_async(conn_.nfs(), fh, &on_step, &s) >= 0) return;
    }
    release(s.index);
  }

  // Issues the next call of the slot's chain; a call that cannot be queued fails the file.
  void next(Slot& s, Step step) {
    s.step = step;
    nfs_context* nfs = conn_.nfs();
    int rc = 0;
    switch (step) {
      case Step::kWrite:
        rc = nfs_pwrite_async(nfs, s.fh, 0, size_, payload_.data(), &on_step, &s);
        break;
      case Step::kCloseWritten:
      case Step::kCloseRead:
        rc = nfs_close_async(nfs, std::exchange(s.fh, nullptr), &on_step, &s);
        break;
      case Step::kStat:
        rc = nfs_stat64_async(nfs, s.path.c_str(), &on_step, &s);
        break;
      case Step::kOpen:
        rc = nfs_open_async(nfs, s.path.c_str(), O_RDONLY, &on_step, &s);
        break;
      case Step::kRead:
        rc = nfs_pread_async(nfs, s.fh, 0, size_, &on_step, &s);
        break;
      case Step::kCreate:
      case Step::kCloseFailed:
        break;
    }
    if (rc < 0) fail(s, conn_.error());
  }

  static void on_step(int err, nfs_context*, void* data, void* private_data) {
    auto& s = *static_cast<Slot*>(private_data);
    SmallFileJob& job = *s.job;
    if (job.aborted()) {
      job.release(s.index);
      return;
    }
    if (s.step == Step::kCloseFailed) {
      job.release(s.index);
      return;
    }
    if (err < 0) {
      job.fail(s, error_text(data));
      return;
    }
    switch (s.step) {
      case Step::kCreate:
        s.fh = static_cast<nfsfh*>(data);
        job.next(s, Step::kWrite);
        break;
      case Step::kWrite:
        if (static_cast<uint64_t>(err) != job.size_) return job.fail(s, "short write");
        job.next(s, Step::kCloseWritten);
        break;
      case Step::kCloseWritten:
        job.next(s, Step::kStat);
        break;
      case Step::kStat:
        if (static_cast<nfs_stat_64*>(data)->nfs_size != job.size_) {
          return job.fail(s, "size after close differs from the size written");
        }
        job.next(s, Step::kOpen);
        break;
      case Step::kOpen:
        s.fh = static_cast<nfsfh*>(data);
        job.next(s, Step::kRead);
        break;
      case Step::kRead:
        if (static_cast<uint64_t>(err) != job.size_ ||
            std::memcmp(data, job.payload_.data(), job.size_) != 0) {
          return job.fail(s, "read back differs from what was written");
        }
        job.next(s, Step::kCloseRead);
        break;
      case Step::kCloseRead:
        ++job.counters_.ops;
        job.counters_.bytes += 2 * job.size_;
        job.release(s.index);
        break;
      case Step::kCloseFailed:
        break;
    }
  }

  const std::string dir_;
  const std::string names_;
  const uint64_t count_;
  const uint64_t size_;
  std::vector<char> payload_;  // the same bytes for every file; read-only once built
  std::vector<Slot> slots_;
  uint64_t next_file_ = 0;
};

// Creates empty files (create + close each): the metadata tree's leaves.
class CreateFilesJob final : public Job {
 public:
  CreateFilesJob(Connection& conn, int depth, std::vector<std::string> paths)
      : Job(conn, depth), paths_(std::move(paths)), slots_(depth) {
    for (int i = 0; i < depth; ++i) slots_[i] = Slot{this, i, false};
  }

  bool start(int slot) override {
    if (next_ >= paths_.size()) return false;
    Slot& s = slots_[slot];
    s.closing = false;
    if (nfs_create_async(conn_.nfs(), paths_[next_].c_str(), O_WRONLY, 0644, &on_done, &s) < 0) {
      record_error("CREATE", conn_.error());
      return false;
    }
    ++next_;
    return true;
  }

 private:
  struct Slot {
    CreateFilesJob* job;
    int index;
    bool closing;
  };

  static void on_done(int err, nfs_context* nfs, void* data, void* private_data) {
    auto& s = *static_cast<Slot*>(private_data);
    CreateFilesJob& job = *s.job;
    if (job.aborted()) return job.release(s.index);
    if (err < 0) {
      job.record_error(s.closing ? "CLOSE" : "CREATE", error_text(data));
      return job.release(s.index);
    }
    if (!s.closing) {
      s.closing = true;
      if (nfs_close_async(nfs, static_cast<nfsfh*>(data), &on_done, &s) >= 0) return;
      job.record_error("CLOSE", job.conn_.error());
      return job.release(s.index);
    }
    ++job.counters_.ops;
    job.release(s.index);
  }

  const std::vector<std::string> paths_;
  std::vector<Slot> slots_;
  size_t next_ = 0;
};

// Cycles LOOKUP (a random file) -> GETATTR (its handle) -> READDIRPLUS (its directory) per
// slot, as raw NFSv3 calls on handles: one operation = one RPC.
class MetadataJob final : public Job {
 public:
  MetadataJob(Connection& conn, int depth, const std::vector<Fh>* dirs, uint64_t files,
              uint64_t seed)
      : Job(conn, depth), dirs_(*dirs), files_(files), rng_(seed), slots_(depth) {
    for (int i = 0; i < depth; ++i) {
      slots_[i].job = this;
      slots_[i].index = i;
    }
  }

  bool start(int slot) override {
    Slot& s = slots_[slot];
    rpc_context* rpc = conn_.rpc();
    int rc = 0;
    switch (s.phase) {
      case Phase::kLookup: {
        const uint64_t i = rng_() % files_;
        s.dir = static_cast<size_t>(i / kFilesPerDir);
        s.name = "f" + std::to_string(i);
        LOOKUP3args args{};
        set_fh(&args.what.dir, dirs_[s.dir]);
        args.what.name = s.name.data();
        rc = rpc_nfs3_lookup_async(rpc, &on_lookup, &args, &s);
        break;
      }
      case Phase::kGetattr: {
        GETATTR3args args{};
        set_fh(&args.object, s.fh);
        rc = rpc_nfs3_getattr_async(rpc, &on_getattr, &args, &s);
        break;
      }
      case Phase::kReaddirplus: {
        READDIRPLUS3args args{};
        set_fh(&args.dir, dirs_[s.dir]);
        args.cookie = 0;
        args.dircount = kReaddirDircount;
        args.maxcount = kReaddirMaxcount;
        rc = rpc_nfs3_readdirplus_async(rpc, &on_readdirplus, &args, &s);
        break;
      }
    }
    if (rc < 0) {
      record_error("RPC", conn_.error());
      return false;
    }
    return true;
  }

 private:
  enum class Phase { kLookup, kGetattr, kReaddirplus };

  struct Slot {
    MetadataJob* job = nullptr;
    int index = 0;
    Phase phase = Phase::kLookup;
    size_t dir = 0;
    std::string name;
    Fh fh;  // the file found by the last LOOKUP
  };

  static void set_fh(nfs_fh3* out, const Fh& fh) {
    out->data.data_len = static_cast<u_int>(fh.size());
    out->data.data_val = const_cast<char*>(fh.data());
  }

  // Common part of the callbacks: counts the answer; returns the reply if it is NFS3_OK.
  template <typename Res>
  static Res* check(Slot& s, const char* what, int status, void* data) {
    MetadataJob& job = *s.job;
    Res* res = nullptr;
    if (job.aborted()) {
      // cancelled: neither an operation nor an error
    } else if (status != RPC_STATUS_SUCCESS) {
      job.record_error(what, error_text(data));
    } else if (static_cast<Res*>(data)->status != NFS3_OK) {
      job.record_error(what, "nfsstat3 " + std::to_string(static_cast<Res*>(data)->status));
    } else {
      ++job.counters_.ops;
      res = static_cast<Res*>(data);
    }
    return res;
  }

  static void on_lookup(rpc_context*, int status, void* data, void* private_data) {
    auto& s = *static_cast<Slot*>(private_data);
    if (auto* res = check<LOOKUP3res>(s, "LOOKUP", status, data)) {
      const nfs_fh3& obj = res->LOOKUP3res_u.resok.object;
      s.fh.assign(obj.data.data_val, obj.data.data_val + obj.data.data_len);
      s.phase = Phase::kGetattr;
    }
    s.job->release(s.index);
  }

  static void on_getattr(rpc_context*, int status, void* data, void* private_data) {
    auto& s = *static_cast<Slot*>(private_data);
    check<GETATTR3res>(s, "GETATTR", status, data);
    s.phase = Phase::kReaddirplus;
    s.job->release(s.index);
  }

  static void on_readdirplus(rpc_context*, int status, void* data, void* private_data) {
    auto& s = *static_cast<Slot*>(private_data);
    check<READDIRPLUS3res>(s, "READDIRPLUS", status, data);
    s.phase = Phase::kLookup;
    s.job->release(s.index);
  }

  const std::vector<Fh>& dirs_;  // read-only, shared by all threads
  const uint64_t files_;
  std::mt19937_64 rng_;
  std::vector<Slot> slots_;
};

// Renames files between directories, as raw NFSv3 RENAMEs on handles: file i of the rename
// tree moves back and forth between its first directory and its second (rename_dirs_of).
// Slot s of thread k owns the files i = g, g + G, ... (g = k * depth + s, G = threads * depth)
// and renames them in turn, so no two slots move one file. Where a file is is learnt from the
// server: a RENAME that finds no source (NOENT) means the file is in its other directory (a
// run before this one moved it), and JUKEBOX (a change across shards holding the name) means
// again later; neither counts as an operation or an error.
class RenameJob final : public Job {
 public:
  RenameJob(Connection& conn, int depth, const std::vector<Fh>* dirs, uint64_t files, int thread,
            int threads)
      : Job(conn, depth), dirs_(*dirs), slots_(depth) {
    const uint64_t stride = static_cast<uint64_t>(threads) * depth;
    for (int i = 0; i < depth; ++i) {
      Slot& s = slots_[i];
      s.job = this;
      s.index = i;
      for (uint64_t file = static_cast<uint64_t>(thread) * depth + i; file < files;
           file += stride) {
        s.files.push_back({file, false});
      }
    }
  }

  bool start(int slot) override {
    Slot& s = slots_[slot];
    if (s.files.empty()) return false;
    const Placed& placed = s.files[s.next];
    const auto [first, second] = rename_dirs_of(placed.file);
    s.name = rename_file_name(placed.file);
    RENAME3args args{};
    set_fh(&args.from.dir, dirs_[placed.in_second ? second : first]);
    args.from.name = s.name.data();
    set_fh(&args.to.dir, dirs_[placed.in_second ? first : second]);
    args.to.name = s.name.data();
    if (rpc_nfs3_rename_async(conn_.rpc(), &on_rename, &args, &s) < 0) {
      record_error("RPC", conn_.error());
      return false;
    }
    return true;
  }

 private:
  struct Placed {
    uint64_t file = 0;
    bool in_second = false;  // in its second directory, as far as this slot knows
  };
  struct Slot {
    RenameJob* job = nullptr;
    int index = 0;
    std::vector<Placed> files;
    size_t next = 0;      // the file the next RENAME moves
    bool missed = false;  // its last RENAME found it in neither place it tried
    std::string name;
  };

  static void set_fh(nfs_fh3* out, const Fh& fh) {
    out->data.data_len = static_cast<u_int>(fh.size());
    out->data.data_val = const_cast<char*>(fh.data());
  }

  static void on_rename(rpc_context*, int status, void* data, void* private_data) {
    auto& s = *static_cast<Slot*>(private_data);
    RenameJob& job = *s.job;
    Placed& placed = s.files[s.next];
    if (job.aborted()) {
      // cancelled: neither an operation nor an error
    } else if (status != RPC_STATUS_SUCCESS) {
      job.record_error("RENAME", error_text(data));
    } else if (const nfsstat3 answer = static_cast<RENAME3res*>(data)->status; answer == NFS3_OK) {
      ++job.counters_.ops;
      placed.in_second = !placed.in_second;
      s.missed = false;
      s.next = (s.next + 1) % s.files.size();
    } else if (answer == NFS3ERR_NOENT && !s.missed) {
      placed.in_second = !placed.in_second;
      s.missed = true;
    } else if (answer == NFS3ERR_NOENT) {
      // In neither directory (removed from outside): counted once, then passed over.
      job.record_error("RENAME", s.name + " is in neither of its directories");
      s.missed = false;
      s.next = (s.next + 1) % s.files.size();
    } else if (answer != NFS3ERR_JUKEBOX) {
      job.record_error("RENAME", "nfsstat3 " + std::to_string(answer));
    }
    job.release(s.index);
  }

  const std::vector<Fh>& dirs_;  // read-only, shared by all threads
  std::vector<Slot> slots_;
};

// What the main thread prepared for the workers before they start.
struct Plan {
  std::string run_id;  // names this run's own files (seq-write, small-file)
  // metadata: /tp-bench/meta/d<j> handles (rename: /tp-bench/rename/d<j>), per URL: each
  // server's own LOOKUPs found them, so no handle is sent to a server other than the one that
  // issued it.
  std::vector<std::vector<Fh>> dirs;
  uint64_t block = 0;
  uint64_t file_size = 0;
  bool shared_dir = false;  // small-file: one directory for every thread
};

std::string seq_read_path(int thread) {
  return std::string(kBenchDir) + "/seq/r" + std::to_string(thread);
}
std::string rand_read_path() { return std::string(kBenchDir) + "/rand/data"; }
std::string dl_train_path(uint64_t file) {
  return std::string(kBenchDir) + "/dl/s" + std::to_string(file);
}
std::string meta_dir(uint64_t j) { return std::string(kBenchDir) + "/meta/d" + std::to_string(j); }
std::string rename_dir(uint64_t j) {
  return std::string(kBenchDir) + "/rename/d" + std::to_string(j);
}
std::string small_dir(const Plan& plan, int thread) {
  // At the export's root: libnfs resolves every path from the root, one LOOKUP per component.
  return "/tp-small-" + plan.run_id + "-" + (plan.shared_dir ? "all" : std::to_string(thread));
}
uint64_t metadata_dirs(uint64_t files) { return (files + kFilesPerDir - 1) / kFilesPerDir; }

// Share of `total` items that thread `k` of `n` handles: k, k+n, k+2n, ...
uint64_t share(uint64_t total, int k, int n) {
  return total / n + (static_cast<uint64_t>(k) < total % n ? 1 : 0);
}

// The handles of the directories d0..d<count - 1> of the tree /tp-bench/<tree> (metadata's
// or rename's), found through `conn` to `target`.
bool lookup_tree_dirs(const Target& target, Connection& conn, const char* tree, uint64_t count,
                      std::vector<Fh>* dirs, std::string* error) {
  std::optional<Fh> fh = mount_root_fh(target, error);
  if (!fh) return false;
  Fh dir = std::move(*fh);
  std::string msg;
  for (const char* name : {kBenchDir + 1, tree}) {
    if (!conn.lookup(dir, name, &dir, &msg)) {
      *error = std::string("LOOKUP ") + name + " on " + target.server + ": " + msg +
               " (run with --prepare first)";
      return false;
    }
  }
  for (uint64_t j = 0; j < count; ++j) {
    Fh d;
    if (!conn.lookup(dir, "d" + std::to_string(j), &d, &msg)) {
      *error = "LOOKUP " + std::string(kBenchDir) + "/" + tree + "/d" + std::to_string(j) + " on " +
               target.server + ": " + msg + " (run with --prepare and the same --files first)";
      return false;
    }
    dirs->push_back(std::move(d));
  }
  return true;
}

// Main-thread setup on its own connection `conn` to targets[0]: directories, shared files,
// handles. What it creates is then used through every target; that holds for the nodes of one
// cluster because every change here is complete (answered) before a worker starts.
bool make_plan(const Options& opt, const std::vector<Target>& targets, Connection& conn, Plan* plan,
               std::string* error) {
  plan->run_id = std::to_string(std::time(nullptr)) + "-" + std::to_string(::getpid());
  plan->shared_dir = opt.shared_dir;
  const bool rand = opt.workload == Workload::kRandRead;
  const bool seq = opt.workload == Workload::kSeqRead || opt.workload == Workload::kSeqWrite ||
                   opt.workload == Workload::kDlTrain;
  plan->block = opt.block_size != 0 ? opt.block_size : rand ? 4 * kKiB : kMiB;
  plan->file_size = opt.file_size != 0                     ? opt.file_size
                    : opt.workload == Workload::kSmallFile ? kSmallFileSize
                                                           : kGiB;
  if ((seq || rand) && plan->file_size < plan->block) {
    *error = "--file-size must be at least --block-size";
    return false;
  }
  std::string msg;
  switch (opt.workload) {
    case Workload::kSeqRead:
    case Workload::kSeqWrite:
      if (!conn.ensure_dir(kBenchDir, error) ||
          !conn.ensure_dir(std::string(kBenchDir) + "/seq", error))
        return false;
      break;
    case Workload::kDlTrain:
      if (!opt.prepare) break;
      if (!conn.ensure_dir(kBenchDir, error) ||
          !conn.ensure_dir(std::string(kBenchDir) + "/dl", error))
        return false;
      break;
    case Workload::kRandRead:
      if (!opt.prepare) break;
      if (!conn.ensure_dir(kBenchDir, error) ||
          !conn.ensure_dir(std::string(kBenchDir) + "/rand", error))
        return false;
      {
        // Created empty here; the workers then write their shares of it.
        nfsfh* fh = nullptr;
        conn.unlink(rand_read_path(), &msg);
        if (conn.create(rand_read_path(), O_WRONLY, &fh, &msg) < 0 || conn.close(fh, &msg) < 0) {
          *error = "create " + rand_read_path() + ": " + msg;
          return false;
        }
      }
      break;
    case Workload::kSmallFile:
      if (opt.prepare) break;
      for (int k = 0; k < opt.threads; ++k) {
        if (!conn.ensure_dir(small_dir(*plan, k), error)) return false;
      }
      break;
    case Workload::kMetadata:
    case Workload::kRename: {
      const bool rename = opt.workload == Workload::kRename;
      const char* tree = rename ? "rename" : "meta";
      const uint64_t count = rename ? kRenameDirs : metadata_dirs(opt.files);
      if (opt.prepare) {
        if (!conn.ensure_dir(kBenchDir, error) ||
            !conn.ensure_dir(std::string(kBenchDir) + "/" + tree, error))
          return false;
        for (uint64_t j = 0; j < count; ++j) {
          if (!conn.ensure_dir(rename ? rename_dir(j) : meta_dir(j), error)) return false;
        }
        break;
      }
      for (size_t t = 0; t < targets.size(); ++t) {
        std::unique_ptr<Connection> own;  // to targets[t], t > 0
        if (t > 0) {
          own = Connection::mount(targets[t], std::random_device{}(), error);
          if (!own) return false;
        }
        plan->dirs.emplace_back();
        if (!lookup_tree_dirs(targets[t], t > 0 ? *own : conn, tree, count, &plan->dirs.back(),
                              error)) {
          return false;
        }
      }
      break;
    }
  }
  return true;
}

// The job of thread `k`, connected through `conn` to target number `t`.
std::unique_ptr<Job> make_job(const Options& opt, const Plan& plan, Connection& conn, int k,
                              size_t t) {
  const uint64_t seed = opt.seed * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(k) + 1;
  const int depth = opt.depth;
  switch (opt.workload) {
    case Workload::kSeqRead:
      if (opt.prepare) {
        return std::make_unique<WriteJob>(conn, depth, seq_read_path(k), 0, plan.file_size,
                                          kPrepareBlock, true, false, seed);
      }
      return std::make_unique<ReadJob>(conn, depth, seq_read_path(k), plan.file_size, plan.block,
                                       false, seed);
    case Workload::kSeqWrite:
      if (opt.prepare) return nullptr;  // the directory is all it needs
      return std::make_unique<WriteJob>(
          conn, depth, std::string(kBenchDir) + "/seq/w" + std::to_string(k) + "-" + plan.run_id, 0,
          plan.file_size, plan.block, true, true, seed);
    case Workload::kRandRead:
      if (opt.prepare) {
        // Thread k writes the k-th of `threads` slices, each a whole number of 1 MiB blocks.
        const uint64_t blocks = (plan.file_size + kPrepareBlock - 1) / kPrepareBlock;
        const uint64_t per = (blocks + opt.threads - 1) / opt.threads;
        const uint64_t begin = std::min(plan.file_size, k * per * kPrepareBlock);
        const uint64_t end = std::min(plan.file_size, (k + 1) * per * kPrepareBlock);
        return std::make_unique<WriteJob>(conn, depth, rand_read_path(), begin, end, kPrepareBlock,
                                          false, false, seed);
      }
      return std::make_unique<ReadJob>(conn, depth, rand_read_path(), plan.file_size, plan.block,
                                       true, seed);
    case Workload::kSmallFile:
      if (opt.prepare) return nullptr;  // each run writes its own files
      return std::make_unique<SmallFileJob>(conn, depth, small_dir(plan, k),
                                            "f" + std::to_string(k) + "-",
                                            share(opt.files, k, opt.threads), plan.file_size, seed);
    case Workload::kDlTrain: {
      // Thread k writes file k: a data set of N files is prepared with N threads.
      if (opt.prepare) {
        return std::make_unique<WriteJob>(conn, depth, dl_train_path(static_cast<uint64_t>(k)), 0,
                                          plan.file_size, kPrepareBlock, true, false, seed);
      }
      std::vector<std::string> paths;
      for (uint64_t i = 0; i < opt.files; ++i) paths.push_back(dl_train_path(i));
      return std::make_unique<DlTrainJob>(conn, depth, std::move(paths), plan.file_size, plan.block,
                                          seed);
    }
    case Workload::kMetadata:
      if (opt.prepare) {
        std::vector<std::string> paths;
        for (uint64_t i = static_cast<uint64_t>(k); i < opt.files;
             i += static_cast<uint64_t>(opt.threads)) {
          paths.push_back(meta_dir(i / kFilesPerDir) + "/f" + std::to_string(i));
        }
        return std::make_unique<CreateFilesJob>(conn, depth, std::move(paths));
      }
      return std::make_unique<MetadataJob>(conn, depth, &plan.dirs[t], opt.files, seed);
    case Workload::kRename:
      if (opt.prepare) {
        // Each file where it starts; one moved away by an earlier run is made again there,
        // and the first RENAME of it then replaces the other.
        std::vector<std::string> paths;
        for (uint64_t i = static_cast<uint64_t>(k); i < opt.files;
             i += static_cast<uint64_t>(opt.threads)) {
          paths.push_back(rename_dir(rename_dirs_of(i).first) + "/" + rename_file_name(i));
        }
        return std::make_unique<CreateFilesJob>(conn, depth, std::move(paths));
      }
      return std::make_unique<RenameJob>(conn, depth, &plan.dirs[t], opt.files, k, opt.threads);
  }
  return nullptr;
}

// Shared by the workers of one run.
struct RunState {
  explicit RunState(int threads) : start_line(threads, Completion{this}), finish_line(threads) {}

  struct Completion {
    RunState* state;
    void operator()() noexcept { state->started = Clock::now(); }
  };

  std::barrier<Completion> start_line;  // all mounted and set up: the clock starts
  std::barrier<> finish_line;           // every clock stopped: teardowns may start
  Clock::time_point started;
  std::atomic<bool> failed{false};  // a worker could not mount or set up: nobody runs
  std::mutex mu;
  std::string failure;                    // guarded by mu: the first worker failure
  Counters total;                         // guarded by mu
  std::vector<uint64_t> bytes_by_target;  // guarded by mu: what the threads of each URL moved
  double seconds = 0;                     // guarded by mu: the slowest worker's time
  bool incomplete = false;                // guarded by mu: a prepare was cut short
};

void worker(const Options& opt, const std::vector<Target>& targets, const Plan& plan, int k,
            RunState* run) {
  const size_t t = static_cast<size_t>(k) % targets.size();
  std::string error;
  // Declared before the connection it points into: the connection must die first, since
  // abandoning it runs the job's callbacks.
  std::unique_ptr<Job> job;
  std::unique_ptr<Connection> conn = Connection::mount(
      targets[t], static_cast<uint32_t>(std::random_device{}()) ^ (static_cast<uint32_t>(k) << 24),
      &error);
  bool ready = conn != nullptr;
  if (ready) {
    job = make_job(opt, plan, *conn, k, t);  // null: this phase has nothing to do on the wire
    ready = !job || job->setup(&error);
  }
  if (!ready) {
    {
      std::lock_guard lock(run->mu);
      if (run->failure.empty()) run->failure = error;
    }
    run->failed = true;
    run->start_line.arrive_and_drop();
    run->finish_line.arrive_and_drop();
    return;
  }
  run->start_line.arrive_and_wait();
  if (run->failed || !job) {
    run->finish_line.arrive_and_drop();
    return;
  }

  const auto budget = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(opt.prepare ? opt.prepare_timeout_s : opt.duration_s));
  DriveLimits limits;
  limits.stop_issuing = run->started + budget;
  limits.give_up = limits.stop_issuing + kDrainGrace;
  limits.max_ops = opt.prepare || opt.max_ops == 0
                       ? 0
                       : std::max<uint64_t>(1, share(opt.max_ops, k, opt.threads));
  const DriveResult result = drive(*job, limits);
  const double seconds = std::chrono::duration<double>(Clock::now() - run->started).count();
  run->finish_line.arrive_and_wait();
  if (conn->usable()) job->teardown();
  conn.reset();

  std::lock_guard lock(run->mu);
  run->total.ops += job->counters().ops;
  run->total.bytes += job->counters().bytes;
  run->total.errors += job->counters().errors;
  run->bytes_by_target[t] += job->counters().bytes;
  run->seconds = std::max(run->seconds, seconds);
  if (opt.prepare && (result.cut_by_time || result.end != DriveEnd::kDone)) run->incomplete = true;
}

bool parse_size(std::string_view s, uint64_t* out) {
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p == s.data()) return false;
  std::string_view suffix(p, static_cast<size_t>(s.data() + s.size() - p));
  uint64_t mult = 1;
  if (suffix == "" || suffix == "B")
    mult = 1;
  else if (suffix == "K" || suffix == "KiB" || suffix == "k")
    mult = kKiB;
  else if (suffix == "M" || suffix == "MiB")
    mult = kMiB;
  else if (suffix == "G" || suffix == "GiB")
    mult = kGiB;
  else
    return false;
  *out = v * mult;
  return true;
}

// `items` as the inside of a JSON array of strings.
std::string json_strings(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) {
    if (!out.empty()) out += ", ";
    out += '"';
    for (const char c : item) {
      if (c == '"' || c == '\\') {
        out += '\\';
        out += c;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        char escaped[8];
        std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(c));
        out += escaped;
      } else {
        out += c;
      }
    }
    out += '"';
  }
  return out;
}

// The one JSON object a run prints: totals, and the MB/s of each URL's threads.
void print_result(const Options& opt, const Counters& c, double seconds,
                  const std::vector<uint64_t>& bytes_by_target,
                  const std::vector<std::string>& urls) {
  const double secs = seconds > 0 ? seconds : 1e-9;
  std::string per_url;
  for (const uint64_t bytes : bytes_by_target) {
    char figure[32];
    std::snprintf(figure, sizeof figure, "%s%.1f", per_url.empty() ? "" : ", ",
                  static_cast<double>(bytes) / 1e6 / secs);
    per_url += figure;
  }
  std::printf(
      "{\"workload\": \"%s\", \"phase\": \"%s\", \"threads\": %d, \"depth\": %d, "
      "\"seconds\": %.3f, \"ops\": %" PRIu64 ", \"bytes\": %" PRIu64
      ", \"mb_per_s\": %.1f, \"ops_per_s\": %.1f, \"errors\": %" PRIu64
      ", \"urls\": [%s], \"url_mb_per_s\": [%s]}\n",
      workload_name(opt.workload), opt.prepare ? "prepare" : "run", opt.threads, opt.depth, seconds,
      c.ops, c.bytes, static_cast<double>(c.bytes) / 1e6 / secs, static_cast<double>(c.ops) / secs,
      c.errors, json_strings(urls).c_str(), per_url.c_str());
  std::fflush(stdout);
}

// dl-train without NFS: threads x depth readers, each a thread reading random files of the data
// set under `opt.local_dir` start to end with pread, as a training job reading a local copy
// from the page cache would.
int run_local(const Options& opt) {
  constexpr int kMaxLocalReaders = 1024;  // each a thread with a block of its own
  if (opt.threads * opt.depth > kMaxLocalReaders) {
    std::fprintf(stderr, "tp-loadgen: --local-dir runs at most %d readers (--threads x --depth)\n",
                 kMaxLocalReaders);
    return 2;
  }
  const uint64_t file_size = opt.file_size != 0 ? opt.file_size : kGiB;
  const uint64_t block = opt.block_size != 0 ? opt.block_size : kMiB;
  const auto stop = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(opt.duration_s));
  std::mutex mu;
  Counters total;
  std::string failure;
  std::vector<std::thread> readers;
  const auto started = Clock::now();
  for (int r = 0; r < opt.threads * opt.depth; ++r) {
    readers.emplace_back([&, r] {
      std::mt19937_64 rng(opt.seed * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(r) + 1);
      std::vector<char> buffer(block);
      Counters mine;
      while (Clock::now() < stop && mine.errors == 0) {
        const std::string path = opt.local_dir + dl_train_path(rng() % opt.files);
        const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        struct stat st {};
        if (fd < 0 || ::fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < file_size) {
          std::lock_guard lock(mu);
          if (failure.empty()) {
            failure = fd < 0 ? "open " + path + ": " + std::strerror(errno)
                             : path + " is shorter than --file-size";
          }
          if (fd >= 0) ::close(fd);
          ++mine.errors;
          break;
        }
        for (uint64_t at = 0; at < file_size && Clock::now() < stop; at += block) {
          const ssize_t n =
              ::pread(fd, buffer.data(), std::min(block, file_size - at), static_cast<off_t>(at));
          if (n <= 0) {
            ++mine.errors;
            break;
          }
          ++mine.ops;
          mine.bytes += static_cast<uint64_t>(n);
        }
        ::close(fd);
      }
      std::lock_guard lock(mu);
      total.ops += mine.ops;
      total.bytes += mine.bytes;
      total.errors += mine.errors;
    });
  }
  for (auto& reader : readers) reader.join();
  if (!failure.empty()) {
    std::fprintf(stderr, "tp-loadgen: %s\n", failure.c_str());
    return 1;
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
  print_result(opt, total, seconds, {total.bytes}, {"file://" + opt.local_dir});
  return 0;
}

void usage(FILE* out) {
  std::fprintf(
      out,
      "usage: tp-loadgen --url 'nfs://HOST/EXPORT?nfsport=P&mountport=M' --workload W [options]\n"
      "  --url URL            repeatable (nodes of one cluster): thread k uses URL k mod n\n"
      "  --workload W         seq-read | seq-write | rand-read | small-file | metadata |\n"
      "                       rename (files moved between 16 directories) |\n"
      "                       dl-train (depth readers a thread, each reading random files\n"
      "                       of --files whole, one READ in flight; prepared by --threads\n"
      "                       as many as --files)\n"
      "  --local-dir DIR      dl-train: read DIR/tp-bench/dl/s<i> with pread, no NFS\n"
      "  --shared-dir         small-file: every thread's files in one directory\n"
      "  --prepare            create the data set W reads (instead of the measured run)\n"
      "  --threads N          threads, one connection each (default 4)\n"
      "  --depth D            requests in flight per thread (default 8)\n"
      "  --block-size S       bytes per READ/WRITE (default 1M; rand-read 4K)\n"
      "  --file-size S        seq: per thread; rand-read: the shared file (default 1G);\n"
      "                       small-file: per file (default 115000)\n"
      "  --files N            small-file / metadata / rename / dl-train file count\n"
      "                       (default 2000)\n"
      "  --duration SEC       stop issuing after SEC seconds (default 10)\n"
      "  --max-ops N          and after N operations in all (default: no bound)\n"
      "  --prepare-timeout SEC  give up a prepare after SEC seconds (default 600)\n"
      "  --seed N             random seed (default 1)\n"
      "Sizes take K, M, G (binary) suffixes. Prints one JSON object on stdout.\n");
}

int run_main(int argc, char** argv) {
  Options opt;
  bool have_workload = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    const size_t eq = arg.find('=');
    const bool inline_value = arg.starts_with("--") && eq != std::string::npos;
    if (inline_value) {
      value = arg.substr(eq + 1);
      arg.resize(eq);
    }
    auto take = [&]() -> bool {
      if (inline_value) return true;
      if (i + 1 >= argc) return false;
      value = argv[++i];
      return true;
    };
    auto bad = [&]() {
      std::fprintf(stderr, "tp-loadgen: bad or missing value for %s\n", arg.c_str());
      return 2;
    };
    uint64_t n = 0;
    if (arg == "--help" || arg == "-h") {
      usage(stdout);
      return 0;
    } else if (arg == "--prepare") {
      opt.prepare = true;
    } else if (arg == "--url") {
      if (!take()) return bad();
      opt.urls.push_back(value);
    } else if (arg == "--shared-dir") {
      opt.shared_dir = true;
    } else if (arg == "--local-dir") {
      if (!take() || value.empty()) return bad();
      opt.local_dir = value;
    } else if (arg == "--workload") {
      if (!take()) return bad();
      auto w = parse_workload(value);
      if (!w) return bad();
      opt.workload = *w;
      have_workload = true;
    } else if (arg == "--threads" || arg == "--depth") {
      if (!take() || !parse_size(value, &n) || n < 1 || n > 256) return bad();
      (arg == "--threads" ? opt.threads : opt.depth) = static_cast<int>(n);
    } else if (arg == "--block-size") {
      if (!take() || !parse_size(value, &opt.block_size) || opt.block_size == 0 ||
          opt.block_size > kMiB) {
        return bad();  // libnfs caps one transfer at 1 MiB
      }
    } else if (arg == "--file-size") {
      if (!take() || !parse_size(value, &opt.file_size) || opt.file_size == 0) return bad();
    } else if (arg == "--files") {
      if (!take() || !parse_size(value, &opt.files) || opt.files == 0) return bad();
    } else if (arg == "--max-ops") {
      if (!take() || !parse_size(value, &opt.max_ops)) return bad();
    } else if (arg == "--seed") {
      if (!take() || !parse_size(value, &opt.seed)) return bad();
    } else if (arg == "--duration" || arg == "--prepare-timeout") {
      if (!take()) return bad();
      char* end = nullptr;
      const double d = std::strtod(value.c_str(), &end);
      if (end == value.c_str() || *end != '\0' || !(d > 0) || d > 86400) return bad();
      (arg == "--duration" ? opt.duration_s : opt.prepare_timeout_s) = d;
    } else {
      std::fprintf(stderr, "tp-loadgen: unknown option %s\n", arg.c_str());
      usage(stderr);
      return 2;
    }
  }
  if (!opt.local_dir.empty()) {
    if (opt.workload != Workload::kDlTrain || opt.prepare || !have_workload) {
      std::fprintf(stderr, "tp-loadgen: --local-dir is for measured dl-train runs only\n");
      return 2;
    }
    return run_local(opt);
  }
  if (opt.urls.empty() || !have_workload) {
    usage(stderr);
    return 2;
  }
  std::vector<Target> targets;
  for (const std::string& url : opt.urls) {
    std::optional<Target> target = parse_target(url);
    if (!target) {
      std::fprintf(stderr, "tp-loadgen: bad URL %s (want nfs://HOST/EXPORT?...)\n", url.c_str());
      return 2;
    }
    targets.push_back(std::move(*target));
  }

  std::string error;
  Plan plan;
  {
    std::unique_ptr<Connection> conn =
        Connection::mount(targets.front(), std::random_device{}(), &error);
    if (!conn) {
      std::fprintf(stderr, "tp-loadgen: %s\n", error.c_str());
      return 1;
    }
    if (!make_plan(opt, targets, *conn, &plan, &error)) {
      std::fprintf(stderr, "tp-loadgen: %s\n", error.c_str());
      return 1;
    }
  }

  RunState run(opt.threads);
  run.bytes_by_target.assign(targets.size(), 0);
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(opt.threads));
  for (int k = 0; k < opt.threads; ++k) {
    threads.emplace_back(worker, std::cref(opt), std::cref(targets), std::cref(plan), k, &run);
  }
  for (auto& t : threads) t.join();
  if (run.failed) {
    std::fprintf(stderr, "tp-loadgen: %s\n", run.failure.c_str());
    return 1;
  }

  print_result(opt, run.total, run.seconds, run.bytes_by_target, opt.urls);
  if (opt.prepare && (run.incomplete || run.total.errors != 0)) {
    std::fprintf(stderr, "tp-loadgen: prepare of %s did not complete (%" PRIu64 " errors)\n",
                 workload_name(opt.workload), run.total.errors);
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace tidepool::bench

int main(int argc, char** argv) { return tidepool::bench::run_main(argc, argv); }
