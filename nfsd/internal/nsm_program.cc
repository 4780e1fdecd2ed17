#include "nfsd/internal/nsm_program.h"

#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "nfsd/internal/rpc_client.h"

namespace tidepool::nfsd {
namespace {

enum Procedure : std::uint32_t {
  kNull = 0,
  kStat = 1,
  kMon = 2,
  kUnmon = 3,
  kUnmonAll = 4,
  kSimuCrash = 5,
  kNotify = 6,
};

enum StatResult : std::uint32_t { kStatSucc = 0, kStatFail = 1 };

constexpr std::size_t kMaxName = 1024;  // SM_MAXSTRLEN
constexpr int kNotifyAttempts = 5;
constexpr std::chrono::seconds kNotifyTimeout{5};

// Odd, and growing with the clock from one start to the next, so no state needs keeping on
// disk: seconds since 2020, which fit 31 bits until 2088.
std::int32_t fresh_state() {
  constexpr std::int64_t k2020 = 1'577'836'800;
  const std::int64_t seconds = std::chrono::duration_cast<std::chrono::seconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count() -
                               k2020;
  return static_cast<std::int32_t>(seconds & 0x7ffffffe) | 1;
}

}  // namespace

NsmProgram::NsmProgram(NlmProgram& nlm) : nlm_(nlm), state_(fresh_state()) {}

std::int32_t NsmProgram::next_state(const std::filesystem::path& state_file) {
  std::int64_t last = 0;
  std::ifstream(state_file) >> last;
  std::int64_t next = fresh_state();
  if (next <= last) next = last + 2;
  if (next > std::numeric_limits<std::int32_t>::max()) next = 1;
  next |= 1;
  const std::filesystem::path temporary = state_file.string() + ".new";
  std::ofstream(temporary, std::ios::trunc) << next << "\n";
  std::error_code ec;
  std::filesystem::rename(temporary, state_file, ec);
  if (ec) spdlog::warn("nsm: cannot write {}: {}", state_file.string(), ec.message());
  return static_cast<std::int32_t>(next);
}

void NsmProgram::start(boost::asio::any_io_executor executor,
                       const std::filesystem::path& directory, std::string our_name) {
  state_ = next_state(directory / "nsm-state");
  std::vector<boost::asio::ip::address_v4> last_run;
  {
    std::lock_guard guard(mutex_);
    hosts_file_ = directory / "nsm-hosts";
    our_name_ = std::move(our_name);
    std::ifstream in(hosts_file_);
    std::string line;
    while (std::getline(in, line) && to_notify_.size() < kMaxHosts) {
      boost::system::error_code ec;
      const auto host = boost::asio::ip::make_address_v4(line, ec);
      if (ec) {
        spdlog::warn("nsm: ignoring '{}' in {}: not an IPv4 address", line, hosts_file_.string());
        continue;
      }
      to_notify_.insert(host);
    }
    last_run.assign(to_notify_.begin(), to_notify_.end());
    if (!monitored_.empty()) persist();
  }
  if (!last_run.empty()) {
    spdlog::info("nsm: telling {} lock holders of the last run that this node restarted",
                 last_run.size());
  }
  for (const auto& host : last_run) {
    boost::asio::co_spawn(executor, notify(host), boost::asio::detached);
  }
}

void NsmProgram::restarted(boost::asio::any_io_executor executor) {
  std::vector<boost::asio::ip::address_v4> holders;
  {
    std::lock_guard guard(mutex_);
    if (hosts_file_.empty()) return;
    state_ = next_state(hosts_file_.parent_path() / "nsm-state");
    holders.assign(monitored_.begin(), monitored_.end());
  }
  spdlog::warn("nsm: this node lost its clients' locks (it was fenced); telling {} lock holders "
               "to reclaim them (state {})",
               holders.size(), state_.load());
  for (const auto& host : holders) {
    boost::asio::co_spawn(executor, notify(host), boost::asio::detached);
  }
}

void NsmProgram::monitor(const boost::asio::ip::address_v4& host) {
  std::lock_guard guard(mutex_);
  if (monitored_.contains(host)) return;
  if (monitored_.size() >= kMaxHosts) {
    spdlog::warn("nsm: more than {} lock holders; {} will not be told of a restart", kMaxHosts,
                 host.to_string());
    return;
  }
  monitored_.insert(host);
  // Before start() the host is kept in memory, and written with the rest then.
  if (!hosts_file_.empty()) persist();
}

boost::asio::awaitable<void> NsmProgram::notify(boost::asio::ip::address_v4 host) {
  xdr::Buffer arguments;
  xdr::Encoder out(arguments);
  {
    std::lock_guard guard(mutex_);
    out.string(our_name_);  // stat_chge: mon_name, state
  }
  const std::int32_t state = state_;
  out.u32(static_cast<std::uint32_t>(state));
  auto calling = call_client_retrying({host, kProgram, kVersion}, kNotify, arguments,
                                      kNotifyTimeout, kNotifyAttempts);
  const Result<xdr::Buffer> reply = co_await std::move(calling);
  if (reply.ok()) {
    spdlog::info("nsm: told {} that this node restarted (state {})", host.to_string(), state);
  } else {
    spdlog::warn("nsm: {} was not told of the restart ({}); its locks are not reclaimed",
                 host.to_string(), reply.status().message());
  }
  std::lock_guard guard(mutex_);
  to_notify_.erase(host);
  persist();
}

void NsmProgram::persist() {
  const std::filesystem::path temporary = hosts_file_.string() + ".new";
  {
    std::ofstream out(temporary, std::ios::trunc);
    for (const auto& host : monitored_) out << host.to_string() << "\n";
    for (const auto& host : to_notify_) {
      if (!monitored_.contains(host)) out << host.to_string() << "\n";
    }
    if (!out) {
      spdlog::warn("nsm: cannot write {}", temporary.string());
      return;
    }
  }
  std::error_code ec;
  std::filesystem::rename(temporary, hosts_file_, ec);
  if (ec) spdlog::warn("nsm: cannot replace {}: {}", hosts_file_.string(), ec.message());
}

awaitable<std::optional<AcceptStatus>> NsmProgram::call(const CallContext& context,
                                                        xdr::Decoder& in, xdr::Encoder& out) {
  switch (context.procedure) {
    case kNull:
      co_return AcceptStatus::success;
    case kStat: {
      in.string(kMaxName);
      if (!in.ok()) co_return AcceptStatus::garbage_args;
      out.u32(kStatSucc);
      out.u32(static_cast<std::uint32_t>(state_.load()));
      co_return AcceptStatus::success;
    }
    case kMon: {
      in.string(kMaxName);  // mon_name
      in.string(kMaxName);  // my_id.my_name
      in.u32();             // my_prog
      in.u32();             // my_vers
      in.u32();             // my_proc
      in.fixed_opaque(16);  // priv
      if (!in.ok()) co_return AcceptStatus::garbage_args;
      out.u32(kStatFail);
      out.u32(static_cast<std::uint32_t>(state_.load()));
      co_return AcceptStatus::success;
    }
    case kUnmon:
    case kUnmonAll:
      // Nothing is monitored for anybody: the arguments do not matter.
      out.u32(static_cast<std::uint32_t>(state_.load()));
      co_return AcceptStatus::success;
    case kNotify: {
      const std::string name(in.string(kMaxName));
      const std::uint32_t new_state = in.u32();
      if (!in.ok()) co_return AcceptStatus::garbage_args;
      nlm_.client_rebooted(name, context.client, new_state);
      co_return AcceptStatus::success;
    }
    case kSimuCrash:
    default:
      co_return AcceptStatus::proc_unavail;
  }
}

}  // namespace tidepool::nfsd
