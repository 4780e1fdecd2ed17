// An NLM v4 client for the process tests, and the client host's own lock manager and status
// monitor that a node calls back: libnfs's NLM calls lock a file through a node, and the
// ClientLockd — a portmapper, NLM's GRANTED procedure and NSM's NOTIFY on port 111 of the
// client's address, served by libnfs — receives the GRANTED callbacks and the SM_NOTIFY calls.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "tests/process/nfs_client.h"

// After libnfs.h, which nfs_client.h brings and these need.
#include <nfsc/libnfs-raw-nlm.h>

namespace tidepool::test {

inline constexpr uint16_t kPortmapPort = 111;
// The status an NLM call that got no reply reports.
inline constexpr uint32_t kNlmNoReply = 1000;

// A TCP socket bound to `address` (port 0: any), connected to `to`:`port` when `to` is given,
// else listening. -1 on failure.
int bound_socket(const std::string& address, uint16_t port, const std::string& to = {},
                 uint16_t to_port = 0);

// The client host's lock manager and status monitor: answers PMAP GETPORT for NLM and NSM with
// port 111 itself, and records the GRANTED callbacks and the SM_NOTIFY calls it receives. It
// listens in the network namespace of the thread that makes it.
class ClientLockd {
 public:
  // On `address` port 111; without one, on a free loopback address 127.201.x.y.
  explicit ClientLockd(const std::string& address = {});
  ~ClientLockd();
  ClientLockd(const ClientLockd&) = delete;
  ClientLockd& operator=(const ClientLockd&) = delete;

  bool listening() const { return listener_ >= 0; }
  const std::string& address() const { return address_; }

  struct Notice {
    std::string mon_name;
    int state = 0;
    std::chrono::steady_clock::time_point at;
  };
  // Waits (bounded) for an SM_NOTIFY.
  std::optional<Notice> wait_notified(std::chrono::milliseconds timeout);
  // Every SM_NOTIFY so far.
  std::vector<Notice> notices();
  // Waits (bounded) for a GRANTED callback for process `svid`.
  bool wait_granted(uint32_t svid, std::chrono::milliseconds timeout);

 private:
  struct Handlers;
  void serve();

  std::string address_;
  int listener_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mutex_;
  std::set<uint32_t> granted_;   // guarded by mutex_
  std::vector<Notice> notices_;  // guarded by mutex_
};

// NLM v4 calls through libnfs to one node, from `source` when given (where the node sends its
// callbacks).
class NlmClient {
 public:
  NlmClient(const Endpoint& node, std::string caller, const std::string& source = {});
  // False also once a call timed out, which closes the connection.
  bool connected() const { return connected_ && connection_.connected(); }
  // Calls that get no reply within `timeout` return kNlmNoReply without failing the test: for
  // tests that cut nodes off on purpose.
  void tolerate_no_reply(std::chrono::milliseconds timeout) {
    connection_.set_timeout(timeout);
    connection_.set_report_no_reply(false);
    report_no_reply_ = false;
  }

  // `state`: the client's NSM state, which a client that restarted tells anew.
  uint32_t lock(const FileHandle& fh, uint32_t svid, bool exclusive, bool block,
                bool reclaim = false, int state = 0);
  // The status; when DENIED, the lock in the way lands in `holder`.
  uint32_t test(const FileHandle& fh, uint32_t svid, bool exclusive,
                nlm4_holder* holder = nullptr);
  uint32_t cancel(const FileHandle& fh, uint32_t svid, bool exclusive);
  uint32_t unlock(const FileHandle& fh, uint32_t svid);

 private:
  nlm4_lock lock_of(const FileHandle& fh, uint32_t svid);
  // The status of the reply; the first word of every NLM result after its cookie.
  uint32_t call(std::string_view what, const std::function<int(rpc_cb, void*)>& issue);

  std::string caller_;
  std::string owner_;
  RpcConnection connection_;
  bool connected_ = false;
  bool report_no_reply_ = true;
};

}  // namespace tidepool::test
