#include "tests/process/cluster.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

#include "tests/process/raw_rpc.h"

#ifndef TIDED_PATH
#define TIDED_PATH ""
#endif
#ifndef TIDE_PATH
#define TIDE_PATH ""
#endif

namespace tidepool::test {
namespace {

using Clock = std::chrono::steady_clock;

std::string toml_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// True if nothing listens on (or holds) address:port.
bool port_is_free(const std::string& address, uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  ::inet_pton(AF_INET, address.c_str(), &sa.sin_addr);
  int one = 1;
  // Like a server would: TIME_WAIT leftovers of an earlier run do not count.
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

bool keep_test_dirs() { return std::getenv("TIDEPOOL_KEEP_TEST_DIRS") != nullptr; }

std::string tided_path() {
  if (const char* env = std::getenv("TIDEPOOL_TIDED")) return env;
  return TIDED_PATH;
}

std::string tide_path() {
  if (const char* env = std::getenv("TIDEPOOL_TIDE")) return env;
  return TIDE_PATH;
}

std::string pick_loopback_address(Endpoint& ports) {
  static std::atomic<uint32_t> counter{0};
  uint32_t pid = static_cast<uint32_t>(::getpid());
  for (int attempt = 0; attempt < 64; ++attempt) {
    uint32_t n = counter++;
    // 127.a.b.c: a and b from the PID (a >= 1, so never 127.0.x.x), c from
    // the counter; two live PIDs collide only 65024 apart.
    uint32_t a = 1 + pid % 254;
    uint32_t b = (pid / 254) % 256;
    uint32_t c = 1 + n % 254;
    std::string addr = "127." + std::to_string(a) + "." + std::to_string(b) +
                       "." + std::to_string(c);
    if (!port_is_free(addr, ports.nfs_port) ||
        !port_is_free(addr, ports.mount_port)) {
      continue;
    }
    if (!port_is_free(addr, ports.portmap_port)) {
      // A portmapper listening on 0.0.0.0:111 (a system rpcbind) holds the
      // port on every loopback address: answer PMAP on another port.
      if (ports.portmap_port == kFallbackPortmapPort ||
          !port_is_free(addr, kFallbackPortmapPort)) {
        continue;
      }
      std::fprintf(stderr,
                   "tidepool tests: port %u is taken on %s (rpcbind on "
                   "0.0.0.0?); the node answers PMAP on port %u\n",
                   ports.portmap_port, addr.c_str(), kFallbackPortmapPort);
      ports.portmap_port = kFallbackPortmapPort;
    }
    return addr;
  }
  return "";
}

bool wait_for_port(const std::string& address, uint16_t port,
                   std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  for (int tries = 0; tries < 10000 && Clock::now() < deadline; ++tries) {
    RawRpcConnection c;
    if (c.connect(address, port, std::chrono::milliseconds(500))) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

TidedNode::TidedNode(NodeOptions options) : options_(std::move(options)) {
  endpoint_.address =
      options_.address.empty() ? pick_loopback_address(endpoint_) : options_.address;
  auto base = std::filesystem::temp_directory_path() /
              ("tidepool-test-" + std::to_string(::getpid()) + "-XXXXXX");
  std::string tmpl = base.string();
  if (::mkdtemp(tmpl.data()) != nullptr) root_dir_ = tmpl;
  data_dir_ = root_dir_ + "/data";
  config_path_ = root_dir_ + "/tided.toml";
  log_path_ = root_dir_ + "/tided.log";
  std::error_code ec;
  std::filesystem::create_directories(data_dir_, ec);
  write_config();
}

TidedNode::~TidedNode() {
  stop();
  const std::string problems = ending_problems();
  if (!problems.empty()) {
    ADD_FAILURE() << "tided node " << options_.node_id << " on " << endpoint_.address
                  << " did not end well (its directory is kept: " << root_dir_ << "):\n"
                  << problems;
    return;
  }
  if (!root_dir_.empty() && !keep_test_dirs()) {
    std::error_code ec;
    std::filesystem::remove_all(root_dir_, ec);
  }
}

void TidedNode::write_config() {
  std::ofstream out(config_path_);
  out << "# Written by the Tidepool process tests.\n"
      << "[node]\n"
      << "id = " << options_.node_id << "\n"
      << "data_dir = " << toml_string(data_dir_) << "\n"
      << (options_.pool.empty() ? "" : "pool = " + toml_string(options_.pool) + "\n")
      << options_.node_toml << "\n"
      << "[frontend]\n"
      << "address = " << toml_string(endpoint_.address) << "\n"
      << "nfs_port = " << endpoint_.nfs_port << "\n"
      << "mount_port = " << endpoint_.mount_port << "\n"
      << "portmap_port = " << endpoint_.portmap_port << "\n"
      << "register_with_rpcbind = false\n";
  for (const ExportSpec& e : options_.exports) {
    out << "\n[[exports]]\n"
        << "path = " << toml_string(e.path) << "\n"
        << "clients = [";
    for (size_t i = 0; i < e.clients.size(); ++i) {
      out << (i ? ", " : "") << toml_string(e.clients[i]);
    }
    out << "]\n";
    if (e.read_only) out << "read_only = true\n";
    out << "secure = " << (e.secure ? "true" : "false") << "\n";
    if (e.root_squash) {
      out << "root_squash = " << (*e.root_squash ? "true" : "false") << "\n";
    }
    if (e.map_all_uid) out << "map_all_uid = " << *e.map_all_uid << "\n";
    if (e.map_all_gid) out << "map_all_gid = " << *e.map_all_gid << "\n";
    if (e.anon_uid) out << "anon_uid = " << *e.anon_uid << "\n";
    if (e.anon_gid) out << "anon_gid = " << *e.anon_gid << "\n";
  }
  if (!options_.extra_toml.empty()) out << "\n" << options_.extra_toml << "\n";
}

bool TidedNode::start(std::string* error) {
  if (pid_ > 0 && running()) return true;
  std::string binary = tided_path();
  if (binary.empty() || ::access(binary.c_str(), X_OK) != 0) {
    *error = "no tided binary at '" + binary +
             "' (build the tided target, or set TIDEPOOL_TIDED)";
    return false;
  }
  if (endpoint_.address.empty() || root_dir_.empty()) {
    *error =
        "no temporary directory, or no loopback address with ports " +
        std::to_string(endpoint_.nfs_port) + ", " +
        std::to_string(endpoint_.mount_port) + " and " +
        std::to_string(endpoint_.portmap_port) +
        " free (is something listening on 0.0.0.0 there, e.g. rpcbind?)";
    return false;
  }
  // Everything the child needs is prepared before fork(): after it, only
  // async-signal-safe calls.
  std::string arg0 = "tided", arg1 = "--config", arg2 = config_path_;
  char* argv[] = {arg0.data(), arg1.data(), arg2.data(), nullptr};
  int log_fd = ::open(log_path_.c_str(),
                      O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  int namespace_fd = -1;
  if (!options_.network_namespace.empty()) {
    namespace_fd = ::open(("/run/netns/" + options_.network_namespace).c_str(),
                          O_RDONLY | O_CLOEXEC);
    if (namespace_fd < 0) {
      *error = "network namespace " + options_.network_namespace + ": " + std::strerror(errno);
      if (log_fd >= 0) ::close(log_fd);
      if (null_fd >= 0) ::close(null_fd);
      return false;
    }
  }
  pid_t parent = ::getpid();
  pid_t child = ::fork();
  if (child < 0) {
    *error = std::string("fork: ") + std::strerror(errno);
    if (log_fd >= 0) ::close(log_fd);
    if (null_fd >= 0) ::close(null_fd);
    if (namespace_fd >= 0) ::close(namespace_fd);
    return false;
  }
  if (child == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(126);
    if (namespace_fd >= 0 && ::setns(namespace_fd, CLONE_NEWNET) != 0) ::_exit(125);
    if (null_fd >= 0) ::dup2(null_fd, 0);
    if (log_fd >= 0) {
      ::dup2(log_fd, 1);
      ::dup2(log_fd, 2);
    }
    ::execv(binary.c_str(), argv);
    ::_exit(127);
  }
  if (log_fd >= 0) ::close(log_fd);
  if (null_fd >= 0) ::close(null_fd);
  if (namespace_fd >= 0) ::close(namespace_fd);
  pid_ = child;
  exit_description_.clear();
  ending_ = false;
  asked_to_stop_ = false;
  exited_unasked_ = false;

  auto deadline = Clock::now() + options_.start_timeout;
  for (uint16_t port :
       {endpoint_.nfs_port, endpoint_.mount_port, endpoint_.portmap_port}) {
    bool up = false;
    for (int tries = 0; tries < 100000 && Clock::now() < deadline; ++tries) {
      if (!running()) break;
      RawRpcConnection c;
      if (c.connect(endpoint_.address, port, std::chrono::milliseconds(200))) {
        up = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!up) {
      std::ostringstream msg;
      msg << "tided (pid " << child << ") on " << endpoint_.address;
      if (!running()) {
        msg << " exited (" << exit_description_ << ")";
      } else {
        msg << " did not listen on port " << port << " within "
            << options_.start_timeout.count() << " ms";
        stop();
      }
      msg << "; config " << config_path_ << "; log tail:\n" << log_tail();
      *error = msg.str();
      return false;
    }
  }
  return true;
}

bool TidedNode::reap(bool block) {
  if (pid_ <= 0) return true;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, block ? 0 : WNOHANG);
  if (r == 0) return false;
  if (r == pid_) {
    if (WIFEXITED(status)) {
      exit_description_ = "exit " + std::to_string(WEXITSTATUS(status));
    } else if (WIFSIGNALED(status)) {
      exit_description_ = "signal " + std::to_string(WTERMSIG(status));
    } else {
      exit_description_ = "status " + std::to_string(status);
    }
  } else {
    exit_description_ = std::string("waitpid: ") + std::strerror(errno);
  }
  exited_unasked_ = !ending_;
  pid_ = -1;
  return true;
}

bool TidedNode::running() { return pid_ > 0 && !reap(false); }

void TidedNode::ask_to_stop() {
  if (pid_ <= 0 || asked_to_stop_ || !running()) return;
  ending_ = true;
  asked_to_stop_ = true;
  ::kill(pid_, SIGTERM);
}

void TidedNode::stop() {
  if (pid_ <= 0) return;
  if (!running()) return;
  const pid_t stopping = pid_;
  // A second SIGTERM would meet a process that already handled the first one and no longer
  // catches it: that signal would end it, and not its way down.
  ask_to_stop();
  auto deadline = Clock::now() + options_.stop_timeout;
  for (int tries = 0; tries < 100000 && Clock::now() < deadline; ++tries) {
    if (reap(false)) {
      if (exit_description_ != "exit 0") {
        unclean_stops_ += "pid " + std::to_string(stopping) + " ended with " + exit_description_ +
                          " on SIGTERM, not exit 0\n";
      }
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill();
  unclean_stops_ += "pid " + std::to_string(stopping) + " did not exit within " +
                    std::to_string(options_.stop_timeout.count()) +
                    " ms of SIGTERM, and was killed\n";
}

std::string TidedNode::ending_problems() const {
  std::string problems = unclean_stops_;
  std::ifstream in(log_path_, std::ios::binary);
  const std::string log{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (const std::string report = sanitizer_report(log); !report.empty()) {
    problems += "a sanitizer reported in " + log_path_ + ":\n" + report;
  } else if (!problems.empty()) {
    problems += "its log ends:\n" + log_tail();
  }
  return problems;
}

std::string sanitizer_report(const std::string& log, std::size_t max_bytes) {
  std::size_t first = std::string::npos;
  for (const char* marker : {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                             ": runtime error: ", "SUMMARY: UndefinedBehaviorSanitizer"}) {
    first = std::min(first, log.find(marker));
  }
  if (first == std::string::npos) return "";
  const std::size_t line = log.rfind('\n', first);
  const std::size_t from = line == std::string::npos ? 0 : line + 1;
  return log.substr(from, max_bytes);
}

void TidedNode::kill() {
  if (pid_ <= 0) return;
  ending_ = true;
  ::kill(pid_, SIGKILL);
  reap(true);
}

std::string TidedNode::log_tail(size_t max_bytes) const {
  std::ifstream in(log_path_, std::ios::binary);
  if (!in) return "(no log)";
  in.seekg(0, std::ios::end);
  auto size = static_cast<size_t>(in.tellg());
  size_t start = size > max_bytes ? size - max_bytes : 0;
  in.seekg(static_cast<std::streamoff>(start));
  std::string out(size - start, '\0');
  in.read(out.data(), static_cast<std::streamsize>(out.size()));
  return out;
}

}  // namespace tidepool::test
