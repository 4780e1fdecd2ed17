// NLM version 4 (the Network Lock Manager that goes with NFSv3; X/Open XNFS, and RFC 1813's
// companion): NFS clients' byte-range locks, kept as the cluster's advisory locks so that a
// client locking through one node conflicts with a client locking through any other.
//
// TEST, LOCK (blocking requests answered BLOCKED and later granted through a GRANTED callback to
// the client's lock manager), CANCEL, UNLOCK, SHARE, UNSHARE, NM_LOCK, FREE_ALL and the
// asynchronous _MSG variants, whose results go back to the client as _RES calls. Once the node
// can lock (it joined the cluster), a grace period admits only reclaims. A GRANTED callback the
// client never acknowledges (it vanished) gives the lock back, so nobody else waits on it
// forever.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "lockmgr/advisory_locks.h"
#include "nfsd/internal/rpc.h"
#include "nfsd/internal/service.h"
#include "nfsd/server.h"

namespace tidepool::nfsd {

// Whether the results of a GRANTED callback (nlm4_res) say that the client took the lock.
bool client_took_grant(std::span<const std::uint8_t> results);

class NlmProgram final : public RpcProgram {
 public:
  static constexpr std::uint32_t kProgram = 100021;
  static constexpr std::uint32_t kVersion = 4;
  // Callbacks to clients run on `executor`.
  NlmProgram(Service& service, boost::asio::any_io_executor executor);

  std::uint32_t number() const override { return kProgram; }
  std::uint32_t min_version() const override { return kVersion; }
  std::uint32_t max_version() const override { return kVersion; }
  awaitable<std::optional<AcceptStatus>> call(const CallContext& context, xdr::Decoder& arguments,
                                              xdr::Encoder& results) override;

  // The cluster's advisory locks, once the node is a member (until then locks are refused as
  // DENIED_NOLOCKS); empty again when it leaves. Callable from any thread.
  void set_locks(std::weak_ptr<lockmgr::AdvisoryLocks> locks);
  // Until called, only reclaims are accepted; from then on, for the grace period. A second call
  // does nothing unless `again` (after the node lost its clients' locks), which starts a new
  // one. Callable from any thread.
  void start_grace_period(bool again = false);

  // NLM's side of the status monitor, set before serving: `monitor` learns of every host that
  // holds or waits for a lock through this node; `serving` runs once, when the locks first come.
  struct StatusMonitor {
    std::function<void(const boost::asio::ip::address_v4& host)> monitor;
    std::function<void()> serving;
  };
  void set_status_monitor(StatusMonitor monitor);

  // The clients that used NLM through this node (at most kMaxSessions, the most recently
  // seen), with what each holds; `done` may run on another thread.
  void sessions(std::function<void(std::vector<NlmSession>)> done) const;
  // A client's status monitor says it restarted (SM_NOTIFY) with NSM state `state`: its locks
  // and reservations are gone with its processes. Frees those of every client whose calls came
  // from `address`, but not of one whose last LOCK told this state already; a notice from an
  // address no client called from is refused (counted, logged once).
  void client_rebooted(const std::string& name, const boost::asio::ip::address_v4& address,
                       std::uint32_t state);

  static constexpr std::size_t kMaxSessions = 4096;

  struct Lock;
  struct Request;
  struct ShareRequest;

 private:
  std::shared_ptr<lockmgr::AdvisoryLocks> locks() const;
  // Before the locks first come, and for the grace period after.
  bool in_grace() const;
  // What the handle names, as the advisory locks know it; empty for a stale or forged handle
  // or one the client may not use.
  awaitable<std::optional<std::uint64_t>> file_of(const CallContext& context, const Lock& lock);
  // The advisory lock a request names, in `lock`: NLM4_GRANTED, or why it names none
  // (NLM4_STALE_FH, NLM4_FBIG).
  awaitable<std::uint32_t> advisory_lock(const CallContext& context, const Request& request,
                                         lockmgr::AdvisoryLock& lock);
  // DENIED with the lock in the way in `holder`.
  awaitable<std::uint32_t> test(const CallContext& context, const Request& request,
                                std::optional<lockmgr::AdvisoryConflict>& holder);
  awaitable<std::uint32_t> lock(const CallContext& context, const Request& request);
  awaitable<std::uint32_t> cancel(const CallContext& context, const Request& request);
  awaitable<std::uint32_t> unlock(const CallContext& context, const Request& request);
  // SHARE when `reserve`, else UNSHARE.
  awaitable<std::uint32_t> share(const CallContext& context, const ShareRequest& request,
                                 bool reserve);
  // Frees the locks of the client with this key (name@address).
  awaitable<void> free_client(std::string key);
  // Whether `name`, calling from the context's address, tells another NSM state than it last
  // did: it restarted.
  bool told_a_new_state(const CallContext& context, const std::string& name,
                        std::optional<std::uint32_t> state) const;
  bool known_client(const std::string& key) const;
  bool known_client_name(const std::string& name) const;
  // Records that `name` called from the context's address, telling its NSM state if it did.
  void saw_client(const CallContext& context, const std::string& name,
                  std::optional<std::uint32_t> state);
  // A place for one more callback to `client`, or false (counted, logged once) when it has, or
  // all have, as many under way as they may; give_back_callback when it ends.
  bool take_callback(const boost::asio::ip::address_v4& client);
  void give_back_callback(const boost::asio::ip::address_v4& client);
  // Tells the client its blocked request is granted (at `granted_at`, on the lease's clock);
  // gives the lock back if it never says it still wants it, if it may be sent no more
  // callbacks now, or if the lease did not hold since the grant.
  awaitable<void> send_granted(CallContext context, Request request, std::uint64_t granted_at);
  // The result of a _MSG call, as the matching _RES call to the client.
  void send_result(const CallContext& context, std::uint32_t procedure, xdr::Buffer results);

  Service& service_;
  boost::asio::any_io_executor executor_;
  StatusMonitor status_monitor_;
  mutable std::mutex mutex_;
  std::weak_ptr<lockmgr::AdvisoryLocks> locks_;                      // guarded by mutex_
  std::optional<std::chrono::steady_clock::time_point> grace_ends_;  // guarded by mutex_
  bool served_ = false;  // the locks came once; guarded by mutex_
  // By name@address, without lock counts (the advisory locks have them); guarded by mutex_.
  std::map<std::string, NlmSession> seen_;
  std::map<std::string, std::uint32_t> seen_states_;  // the NSM state LOCK last told, by key
  std::map<std::uint32_t, int> callbacks_by_client_;  // under way, by address; guarded by mutex_
  int callbacks_ = 0;                                 // under way to all; guarded by mutex_
};

}  // namespace tidepool::nfsd
