// Real `tided` processes for the process tests.
//
// A TidedNode owns one tided child process, its own loopback address taken
// out of 127.0.0.0/8 (so test processes run in parallel, and next to a
// `./dev up`, on the standard ports 2049/20048/111 without clashing), a fresh
// temporary directory for its data and config, and the process's log. The
// destructor stops the process by PID (SIGTERM, then SIGKILL after a bound)
// even when the test failed, and the child dies with the test process
// (PR_SET_PDEATHSIG). kill() + start() restarts on the same data directory
// and address.
//
// The destructor also fails the running test when the node did not end well:
// a stop() that did not end in exit status 0 (a leak the sanitizers found at
// exit, a crash on the way down, a hang past the bound) or a sanitizer's
// report anywhere in its log. It then prints the report and keeps the
// node's directory, log included.
//
// Not thread-safe: drive a node from one thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tests/process/nfs_client.h"

namespace tidepool::test {

struct ExportSpec {
  std::string path;
  std::vector<std::string> clients = {"127.0.0.0/8"};
  bool read_only = false;
  // Not the server's default (true): the raw-RPC clients, a libnfs client not run as root and
  // qemu's guests connect from unprivileged ports.
  bool secure = false;
  std::optional<bool> root_squash;  // server default: true
  std::optional<uint32_t> map_all_uid;
  std::optional<uint32_t> map_all_gid;
  std::optional<uint32_t> anon_uid;
  std::optional<uint32_t> anon_gid;
};

struct NodeOptions {
  uint32_t node_id = 1;
  std::string pool;  // empty: the server's default
  // More keys of the [node] table, one "key = value" a line.
  std::string node_toml;
  std::vector<ExportSpec> exports;
  // Appended verbatim to the generated config file.
  std::string extra_toml;
  // The address to answer on; empty: a free loopback address (pick_loopback_address).
  std::string address;
  // The network namespace (by its name under /run/netns) to run in; empty: the test's own.
  std::string network_namespace;
  std::chrono::milliseconds start_timeout = std::chrono::seconds(10);
  // Long enough for the leak check at exit under the sanitizers, which reads the whole heap.
  std::chrono::milliseconds stop_timeout = std::chrono::seconds(20);
};

// The path of the tided binary this test binary was built with ("" if the
// build has no tided target).
std::string tided_path();
// Likewise for the tide CLI.
std::string tide_path();
// Whether a test's directories (the nodes' data and logs) stay after it: TIDEPOOL_KEEP_TEST_DIRS
// is set, to read what the nodes did.
bool keep_test_dirs();

class TidedNode {
 public:
  // Picks a free loopback address and makes the temporary directory and the
  // config file; does not start the process.
  explicit TidedNode(NodeOptions options);
  ~TidedNode();
  TidedNode(const TidedNode&) = delete;
  TidedNode& operator=(const TidedNode&) = delete;

  // Starts tided and waits (bounded) until its NFS, MOUNT and PMAP ports
  // accept connections. False with *error (including the log's tail) if it
  // exits or does not listen in time.
  bool start(std::string* error);
  // SIGTERM, then SIGKILL after options.stop_timeout; reaps the child.
  void stop();
  // SIGTERM without waiting for the exit, which stop() then waits for: to stop several nodes
  // at once, as their peers going away one by one would slow each one's way down.
  void ask_to_stop();
  // SIGKILL now; reaps the child.
  void kill();
  // True while the child has not exited.
  bool running();
  // How the last child exited ("exit 1", "signal 11"), or "" if it has not.
  const std::string& exit_description() const { return exit_description_; }
  // True if the last child exited on its own: neither stop() nor kill() ended it (a crash).
  bool exited_unasked() const { return exited_unasked_; }

  pid_t pid() const { return pid_; }
  const Endpoint& endpoint() const { return endpoint_; }
  const std::string& root_dir() const { return root_dir_; }
  const std::string& data_dir() const { return data_dir_; }
  const std::string& config_path() const { return config_path_; }
  const std::string& log_path() const { return log_path_; }
  // The last `max_bytes` of the process's stdout/stderr.
  std::string log_tail(size_t max_bytes = 4000) const;

 private:
  void write_config();
  // What went wrong so far that the destructor fails the test for: every stop() that did not
  // end in exit status 0 within options.stop_timeout, and a sanitizer's report in the log
  // (from its first line). "" if nothing.
  std::string ending_problems() const;
  // Reaps the child if it exited; true if it did.
  bool reap(bool block);

  NodeOptions options_;
  Endpoint endpoint_;
  std::string root_dir_;
  std::string data_dir_;
  std::string config_path_;
  std::string log_path_;
  pid_t pid_ = -1;
  std::string exit_description_;
  bool ending_ = false;  // stop() or kill() is ending the child
  bool asked_to_stop_ = false;  // SIGTERM sent to this child
  bool exited_unasked_ = false;
  std::string unclean_stops_;  // one line for each stop() that did not end in exit 0
};

// A sanitizer's report in a process's output, from its first line (at most `max_bytes` of it),
// or "" if there is none: AddressSanitizer, LeakSanitizer and UndefinedBehaviorSanitizer errors.
std::string sanitizer_report(const std::string& log, std::size_t max_bytes = 32000);

// The port a node answers PMAP on when 111 is held on every loopback address
// (by a system rpcbind listening on 0.0.0.0).
inline constexpr uint16_t kFallbackPortmapPort = 10111;

// A free loopback address 127.a.b.c with a >= 1 (so never 127.0.0.1,
// 127.0.0.100, 127.0.0.200 or 127.0.0.201): a and b derived from the PID, c
// from a per-process counter; probed by binding the three front-end ports.
// If only the portmapper port is taken, switches `ports.portmap_port` to
// kFallbackPortmapPort.
std::string pick_loopback_address(Endpoint& ports);

// True once address:port accepts a TCP connection (polled until timeout).
bool wait_for_port(const std::string& address, uint16_t port,
                   std::chrono::milliseconds timeout);

}  // namespace tidepool::test
