// The backend protocol of the namespace as this node sends it (namespace_service.h): the
// method numbers and deadlines, and the links that carry a home's calls — store operations and
// parts of changes across shards to a shard's home (Channel), changes to the shard's mirror
// (MirrorLink), and unit messages to the nodes of a pool (UnitPeers) — with the routes the
// front end's threads take to each shard (Routes). Internal to the service: its classes are
// its own, declared in namespace_service.h.
#pragma once

#include <spdlog/spdlog.h>

#include <array>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <vector>

#include "common/callback_awaitable.h"
#include "store/namespace_service.h"
#include "store/remote_store.h"

namespace tidepool::store {
namespace internal {

namespace asio = boost::asio;
using namespace std::chrono_literals;

// Backend RPC methods, each message led by its shard's number: kStoreMethodBase (500, in
// remote_store.h) + StoreMethod, shipped store operations; 600 + ParticipantMethod, a shard's part
// in changes across shards; 400 + MirrorMethod, what a home sends its mirror. (100 + StoreMethod
// and 200 + MirrorMethod carried them without the shard's number: a node of either kind answers
// the other's as unknown.)
inline constexpr std::uint32_t kParticipantMethodBase = 600;
inline constexpr std::uint32_t kMirrorMethodBase = 400;
// 300 + UnitMethod: a home's messages to the nodes holding the units of files placed in pools.
inline constexpr std::uint32_t kUnitMethodBase = 300;
inline constexpr std::chrono::milliseconds kUnitCallDeadline{5'000};
// Long enough for a 1 MiB write under load; a home that died is given up on after this, and the
// client hears NFS3ERR_JUKEBOX and retries.
inline constexpr std::chrono::milliseconds kShippedCallDeadline{5'000};
// A move copies the whole file before it answers: a 100 GiB file at 100 MB/s takes 17 minutes.
inline constexpr std::chrono::milliseconds kShippedMoveDeadline{60 * 60'000};
// A mirror that takes longer than this for one change is given up on: the home goes on alone.
inline constexpr std::chrono::milliseconds kMirrorCallDeadline{5'000};
inline constexpr std::chrono::milliseconds kProposalDeadline{5'000};
// Dropping a mirror from the record is tried this many times, this far apart, while other
// shards' changes to the record get there first.
inline constexpr int kDropAttempts = 10;
inline constexpr std::chrono::milliseconds kDropRetryPause{50};
// After a whole copy or a change to the record failed, the next attempt waits this long.
inline constexpr auto kRetryAfter = 1s;
inline constexpr std::chrono::milliseconds kRaceRetry{50};
inline constexpr auto kReleasePoll = 20ms;
// A recovery that left a change unsettled (a shard it needed out of reach) runs again after
// this, doubling up to the most.
inline constexpr std::chrono::milliseconds kSettleRetryFirst{500};
inline constexpr std::chrono::milliseconds kSettleRetryMost{30'000};
// A node answers `behind` to a caller whose view is older than its own: the caller's catches
// up within a heartbeat or two, so it asks again this often, this many times.
inline constexpr auto kBehindPause = 20ms;
inline constexpr int kBehindRetries = 100;

// The sends of one request that `behind` answers bring. Once this node was fenced since the
// first (it applied a change that had it down), the request is not sent again: what it was
// sent under — the node's locks, its place as a shard's home — may have gone to another node
// meanwhile, and the request would land after what that node did since. On the strand.
class Resends {
 public:
  // Ok when the request may go now; `fences`: the node's count of fences now (Lease::fences).
  Status may_send(std::uint64_t fences) {
    if (!first_) first_ = fences;
    if (*first_ == fences) return {};
    return error(Errc::fenced,
                 "this node was fenced since the request was first sent: it is not sent again");
  }

 private:
  std::optional<std::uint64_t> first_;
};

// Runs `start(done)` on the strand: what `done` is given.
template <typename T>
std::future<T> start_on_strand(const asio::any_io_executor& strand,
                               std::function<void(std::function<void(T)>)> start) {
  auto promise = std::make_shared<std::promise<T>>();
  std::future<T> outcome = promise->get_future();
  asio::post(strand, [start = std::move(start), promise] {
    start([promise](T answer) { promise->set_value(std::move(answer)); });
  });
  return outcome;
}

// The same, blocking the calling thread (a store thread, never the strand) until `done` ran or
// `deadline` passed.
template <typename T>
T wait_on_strand(const asio::any_io_executor& strand, std::chrono::milliseconds deadline,
                 std::function<void(std::function<void(T)>)> start) {
  std::future<T> outcome = start_on_strand<T>(strand, std::move(start));
  if (outcome.wait_for(deadline) != std::future_status::ready) {
    return error(Errc::timed_out, "no answer from the cluster in time");
  }
  return outcome.get();
}

// A shipped message: the shard's number, then `request`.
inline xdr::Buffer shard_message(ShardId shard, std::span<const std::uint8_t> request) {
  xdr::Buffer message;
  message.reserve(4 + request.size());
  xdr::Encoder out(message);
  out.u32(shard);
  message.insert(message.end(), request.begin(), request.end());
  return message;
}

inline bool is_whole_copy(MirrorMethod method) {
  return method == MirrorMethod::copy_begin || method == MirrorMethod::copy_database ||
         method == MirrorMethod::copy_data || method == MirrorMethod::copy_end;
}

}  // namespace internal

// Ships store calls to a shard's home (which runs them on the namespace it serves) and the
// calls of the shard's part in changes across shards (which it runs on the shard). Each
// message leads with the shard's number: the home refuses a shard it is not the home of, so a
// call is never forwarded back and forth.
class NamespaceService::Channel final : public ShardChannel, public ParticipantChannel {
 public:
  Channel(NamespaceService& service, cluster::NodeId home, ShardId shard)
      : service_(service), home_(home), shard_(shard) {}

  boost::asio::awaitable<Result<xdr::Buffer>> call(StoreMethod method,
                                                   xdr::Buffer request) override {
    auto sent = send(kStoreMethodBase + static_cast<std::uint32_t>(method), std::move(request),
                     method == StoreMethod::migrate ? internal::kShippedMoveDeadline
                                                    : internal::kShippedCallDeadline);
    co_return co_await std::move(sent);
  }

  boost::asio::awaitable<Result<xdr::Buffer>> call(ParticipantMethod method,
                                                   xdr::Buffer request) override {
    auto sent = send(internal::kParticipantMethodBase + static_cast<std::uint32_t>(method),
                     std::move(request), internal::kShippedCallDeadline);
    co_return co_await std::move(sent);
  }

 private:
  boost::asio::awaitable<Result<xdr::Buffer>> send(std::uint32_t method, xdr::Buffer request,
                                                   std::chrono::milliseconds deadline) {
    // The one copy of the request (a write's data) every attempt sends.
    auto calling = service_.call_peer(
        home_, method,
        std::make_shared<const xdr::Buffer>(internal::shard_message(shard_, request)), deadline);
    co_return co_await std::move(calling);
  }

  NamespaceService& service_;
  const cluster::NodeId home_;
  const ShardId shard_;
};

// Where each shard is reached from this node, for the front end's threads: this node's own
// store while it serves the shard, the namespace at its home through a channel otherwise, or
// nowhere (unavailable).
class NamespaceService::Routes {
 public:
  void reset(ShardId count) {
    std::lock_guard lock(mutex_);
    routes_.assign(count, std::nullopt);
    for (auto& local : local_) local.store(false, std::memory_order_relaxed);
  }
  // A local `access` is to this node's own store of the shard (a LocalStore).
  void set(ShardId shard, std::optional<ShardAccess> access) {
    std::lock_guard lock(mutex_);
    if (shard >= routes_.size()) return;
    local_[shard].store(access && access->local, std::memory_order_relaxed);
    routes_[shard] = std::move(access);
  }
  // This node's own store of the shard while it serves it, else null.
  std::shared_ptr<LocalStore> local_store(ShardId shard) const {
    std::lock_guard lock(mutex_);
    if (shard >= routes_.size() || !routes_[shard] || !routes_[shard]->local) return nullptr;
    return std::static_pointer_cast<LocalStore>(routes_[shard]->store);
  }
  Result<ShardAccess> get(ShardId shard) const {
    std::lock_guard lock(mutex_);
    if (shard >= routes_.size() || !routes_[shard]) {
      return error(Errc::unavailable,
                   "shard " + std::to_string(shard) + "'s home is down or not ready");
    }
    return *routes_[shard];
  }
  // Whether this node serves the shard now; without the lock, for every read's cache.
  bool is_local(ShardId shard) const {
    return shard < local_.size() && local_[shard].load(std::memory_order_relaxed);
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::optional<ShardAccess>> routes_;  // guarded by mutex_
  std::array<std::atomic<bool>, kMaxShards> local_{};
};

// This node's part in one shard, on the strand.
struct NamespaceService::Shard {
  std::shared_ptr<LocalStore> store;        // while this node is its home
  std::shared_ptr<ShardCopy> copy;          // while this node is its mirror
  std::weak_ptr<void> releasing;            // the store or copy last released, until it is gone
  cluster::NodeId mirroring_to = 0;         // the mirror the store was last told to keep in step
  std::shared_ptr<MirrorLink> mirror_link;  // the store's link to it (null: none)
  bool mirror_copy_running = false;
  bool mirror_copied = false;     // the last whole copy to mirroring_to completed
  cluster::NodeId routed_to = 0;  // the home the front end reaches it at (0: none)
};

// The home's store sends its mirror's messages through this. A change the mirror did not take
// must not be acknowledged while the cluster still counts on that mirror — it could be
// promoted without it — so the link first has the mirror dropped from the namespace record,
// and from then on sends nothing: the leader names a new mirror, which gets a whole copy.
// Each shard has its link; its messages carry the shard's number first.
class NamespaceService::MirrorLink final : public MirrorTarget {
 public:
  MirrorLink(NamespaceService& service, cluster::NodeId mirror, ShardId shard)
      : service_(service), mirror_(mirror), shard_(shard) {}

  Status call(MirrorMethod method, std::span<const std::uint8_t> request) override {
    if (dropped_.load()) return {};
    Status sent = send(method, request).status();
    // A home fenced meanwhile did not reach the mirror: the mirror missed nothing it was sent.
    if (sent.ok() || sent.code() == Errc::fenced || internal::is_whole_copy(method)) return sent;
    std::lock_guard lock(dropping_);
    if (dropped_.load()) return {};
    spdlog::warn("mirror node {} did not take a change ({}): the namespace goes on without it",
                 mirror_, sent.to_string());
    if (Status dropped = service_.drop_mirror(shard_, mirror_); !dropped.ok()) {
      return error(Errc::unavailable,
                   "the mirror did not take a change and could not be "
                   "dropped from the namespace: " +
                       dropped.message());
    }
    dropped_.store(true);
    return {};
  }

  Result<xdr::Buffer> fetch(MirrorMethod method, std::span<const std::uint8_t> request) override {
    if (dropped_.load()) return error(Errc::unavailable, "the mirror was dropped");
    return send(method, request);
  }

  // Whether the link stopped sending: the mirror missed a change, and needs a whole copy.
  bool dropped() const { return dropped_.load(); }

 private:
  Result<xdr::Buffer> send(MirrorMethod method, std::span<const std::uint8_t> request) {
    // The message's one copy of the request (a write's data): every attempt sends it.
    auto message = std::make_shared<const xdr::Buffer>(internal::shard_message(shard_, request));
    auto resends = std::make_shared<internal::Resends>();
    Result<xdr::Buffer> sent = service_.send_to_mirror(mirror_, method, message, resends);
    for (int attempt = 0;
         sent.status().code() == Errc::behind && attempt < internal::kBehindRetries; ++attempt) {
      service_.options_.time_source().sleep_for(internal::kBehindPause);
      sent = service_.send_to_mirror(mirror_, method, message, resends);
    }
    return sent;
  }

  NamespaceService& service_;
  const cluster::NodeId mirror_;
  const ShardId shard_;
  std::mutex dropping_;
  std::atomic<bool> dropped_ = false;
};

// The nodes of each pool as the last view followed has them, less those lost (down past the
// repair delay: new files and restripes leave them out), and calls to their units: this
// node's own answered here, the others' over backend RPC.
class NamespaceService::UnitPeers final : public PoolPeers {
 public:
  explicit UnitPeers(NamespaceService& service) : service_(service) {}

  std::vector<cluster::NodeId> nodes_of(const std::string& pool) override {
    std::lock_guard lock(mutex_);
    auto found = pools_.find(pool);
    return found == pools_.end() ? std::vector<cluster::NodeId>{} : found->second;
  }
  std::size_t nodes_left_out(const std::string& pool) override {
    std::lock_guard lock(mutex_);
    auto found = left_out_.find(pool);
    return found == left_out_.end() ? 0 : found->second;
  }

  Result<xdr::Buffer> call(cluster::NodeId node, UnitMethod method,
                           std::span<const std::uint8_t> request) override {
    const auto number = static_cast<std::uint32_t>(method);
    if (node == service_.self_) return service_.units_->serve(number, request);
    auto resends = std::make_shared<internal::Resends>();
    return asked_again_while_behind(node, number, request, resends,
                                    send(node, number, request, resends));
  }

  // The other nodes' calls go out together; this node's own are served meanwhile.
  std::vector<Result<xdr::Buffer>> call_each(std::span<const UnitCall> calls) override {
    const auto deadline =
        std::chrono::steady_clock::now() + internal::kUnitCallDeadline + std::chrono::seconds(1);
    std::vector<std::shared_ptr<internal::Resends>> resends(calls.size());
    std::vector<std::future<Result<xdr::Buffer>>> sent(calls.size());
    for (std::size_t k = 0; k < calls.size(); ++k) {
      if (calls[k].node == service_.self_) continue;
      resends[k] = std::make_shared<internal::Resends>();
      sent[k] = start_send(calls[k].node, static_cast<std::uint32_t>(calls[k].method),
                           calls[k].request, resends[k]);
    }
    std::vector<Result<xdr::Buffer>> answers;
    answers.reserve(calls.size());
    for (std::size_t k = 0; k < calls.size(); ++k) {
      const auto number = static_cast<std::uint32_t>(calls[k].method);
      if (!sent[k].valid()) {
        answers.push_back(service_.units_->serve(number, calls[k].request));
        continue;
      }
      answers.push_back(asked_again_while_behind(calls[k].node, number, calls[k].request,
                                                 resends[k], answer_by(sent[k], deadline)));
    }
    return answers;
  }

  boost::asio::awaitable<Result<xdr::Buffer>> call_async(cluster::NodeId node, UnitMethod method,
                                                         xdr::Buffer request) override {
    const auto number = static_cast<std::uint32_t>(method);
    if (node == service_.self_) {
      // This node's own units: their disk I/O runs on the blocking pool.
      auto serving = boost::asio::co_spawn(
          service_.blocking_,
          [this, number, request = std::move(request)]() -> boost::asio::awaitable<Result<xdr::Buffer>> {
            co_return service_.units_->serve(number, request);
          },
          boost::asio::use_awaitable);
      co_return co_await std::move(serving);
    }
    auto calling =
        service_.call_peer(node, internal::kUnitMethodBase + number,
                           std::make_shared<const xdr::Buffer>(std::move(request)),
                           internal::kUnitCallDeadline);
    co_return co_await std::move(calling);
  }

  bool is_up(cluster::NodeId node) override {
    std::lock_guard lock(mutex_);
    return up_.contains(node);
  }
  bool is_removed(cluster::NodeId node) override {
    std::lock_guard lock(mutex_);
    return !members_.empty() && !members_.contains(node);
  }

  // `pools`: the nodes of each pool that file data is placed on.
  void follow(const cluster::GroupView& view,
              std::map<std::string, std::vector<cluster::NodeId>> pools) {
    std::map<std::string, std::size_t> left_out;
    std::set<cluster::NodeId> up;
    std::set<cluster::NodeId> members;
    for (const cluster::NodeInfo& node : view.nodes) {
      members.insert(node.id);
      if (node.up) up.insert(node.id);
      ++left_out[node.pool];
    }
    for (auto& [pool, count] : left_out) {
      if (auto placed = pools.find(pool); placed != pools.end()) count -= placed->second.size();
    }
    std::lock_guard lock(mutex_);
    pools_ = std::move(pools);
    left_out_ = std::move(left_out);
    up_ = std::move(up);
    members_ = std::move(members);
  }

 private:
  Result<xdr::Buffer> send(cluster::NodeId node, std::uint32_t method,
                           std::span<const std::uint8_t> request,
                           std::shared_ptr<internal::Resends> resends) {
    std::future<Result<xdr::Buffer>> sent = start_send(node, method, request, std::move(resends));
    return answer_by(sent, std::chrono::steady_clock::now() + internal::kUnitCallDeadline +
                               std::chrono::seconds(1));
  }

  std::future<Result<xdr::Buffer>> start_send(cluster::NodeId node, std::uint32_t method,
                                              std::span<const std::uint8_t> request,
                                              std::shared_ptr<internal::Resends> resends) {
    // The caller's bytes may be gone when a late answer arrives: the strand works on its own.
    return internal::start_on_strand<Result<xdr::Buffer>>(
        service_.strand_, [this, node, method, resends = std::move(resends),
                           body = std::vector<std::uint8_t>(request.begin(), request.end())](
                              std::function<void(Result<xdr::Buffer>)> done) {
          cluster::RpcEndpoint* rpc = service_.rpc();
          if (rpc == nullptr) {
            done(error(Errc::unavailable, "this node is not in a cluster"));
            return;
          }
          if (Status may = resends->may_send(service_.fences()); !may.ok()) {
            done(may);
            return;
          }
          rpc->call(node, internal::kUnitMethodBase + method, body, internal::kUnitCallDeadline,
                    std::move(done));
        });
  }

  static Result<xdr::Buffer> answer_by(std::future<Result<xdr::Buffer>>& sent,
                                       std::chrono::steady_clock::time_point deadline) {
    if (sent.wait_until(deadline) != std::future_status::ready) {
      return error(Errc::timed_out, "no answer from the cluster in time");
    }
    return sent.get();
  }

  // A node whose view is ahead of this one's answers `behind`: asked again until this node's
  // catches up.
  Result<xdr::Buffer> asked_again_while_behind(cluster::NodeId node, std::uint32_t method,
                                               std::span<const std::uint8_t> request,
                                               const std::shared_ptr<internal::Resends>& resends,
                                               Result<xdr::Buffer> sent) {
    for (int attempt = 0;
         sent.status().code() == Errc::behind && attempt < internal::kBehindRetries; ++attempt) {
      service_.options_.time_source().sleep_for(internal::kBehindPause);
      sent = send(node, method, request, resends);
    }
    return sent;
  }

  NamespaceService& service_;
  std::mutex mutex_;
  std::map<std::string, std::vector<cluster::NodeId>> pools_;  // guarded by mutex_
  std::map<std::string, std::size_t> left_out_;                // guarded by mutex_
  std::set<cluster::NodeId> up_;                               // guarded by mutex_
  std::set<cluster::NodeId> members_;  // guarded by mutex_; empty until a view is followed
};

}  // namespace tidepool::store
