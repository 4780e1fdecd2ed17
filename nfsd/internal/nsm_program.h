// The network status monitor (NSM, program 100024 version 1), as far as an NFS server needs
// it, both ways:
// - a client that restarts tells the servers it used, with SM_NOTIFY, that its locks are gone,
//   and NLM frees them;
// - the hosts that hold NLM locks through this node are kept in the data directory, and after a
//   restart each is told (SM_NOTIFY to its status monitor, as rpc.statd's sm-notify does) that
//   this node rebooted, so that it reclaims its locks within the grace period.
// Monitoring on behalf of local programs (SM_MON) is refused: nothing on a node asks for it,
// since NLM tells this monitor of its clients itself.
//
// Thread-safe.
#pragma once

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/address_v4.hpp>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <set>
#include <string>

#include "nfsd/internal/nlm_program.h"
#include "nfsd/internal/rpc.h"

namespace tidepool::nfsd {

class NsmProgram final : public RpcProgram {
 public:
  static constexpr std::uint32_t kProgram = 100024;
  static constexpr std::uint32_t kVersion = 1;

  explicit NsmProgram(NlmProgram& nlm);

  std::uint32_t number() const override { return kProgram; }
  std::uint32_t min_version() const override { return kVersion; }
  std::uint32_t max_version() const override { return kVersion; }
  awaitable<std::optional<AcceptStatus>> call(const CallContext& context, xdr::Decoder& arguments,
                                              xdr::Encoder& results) override;

  // This node's NSM state number: odd while it runs, and larger after every restart (kept in
  // the data directory from start() on, so that two quick restarts still differ).
  std::int32_t state() const { return state_; }

  // Takes the next state number, loads the hosts of the last run (`directory`/nsm-hosts) and
  // tells each, in the background on `executor`, that this node — `our_name`, the name its
  // clients mount it by — rebooted. Until called, nothing is written or sent.
  void start(boost::asio::any_io_executor executor, const std::filesystem::path& directory,
             std::string our_name);
  // This node lost the locks its clients held through it (it was fenced): as after a restart,
  // takes the next state number and tells every host that held locks through it, in the
  // background on `executor`. Nothing before start().
  void restarted(boost::asio::any_io_executor executor);
  // `host` holds or waits for a lock through this node: it is told after the next restart
  // (kept in memory until start(), then in the file).
  void monitor(const boost::asio::ip::address_v4& host);

  static constexpr std::size_t kMaxHosts = 4096;

 private:
  boost::asio::awaitable<void> notify(boost::asio::ip::address_v4 host);
  // Writes monitored_ and to_notify_ to hosts_file_; called with mutex_ held.
  void persist();
  // The state after the one `state_file` holds (or a fresh one), written back there.
  static std::int32_t next_state(const std::filesystem::path& state_file);

  NlmProgram& nlm_;
  std::atomic<std::int32_t> state_;
  std::mutex mutex_;
  std::filesystem::path hosts_file_;                 // guarded by mutex_; empty until start()
  std::string our_name_;                             // guarded by mutex_
  std::set<boost::asio::ip::address_v4> monitored_;  // this run's; guarded by mutex_
  std::set<boost::asio::ip::address_v4> to_notify_;  // the last run's, not yet told
};

}  // namespace tidepool::nfsd
