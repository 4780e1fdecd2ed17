#include "daemon/namespace_shipping.h"

#include <spdlog/spdlog.h>

#include <array>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <charconv>
#include <chrono>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "common/callback_awaitable.h"
#include "daemon/files.h"
#include "daemon/membership.h"

namespace tidepool::daemon {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

// Backend RPC methods, each message led by its shard's number: 500 + StoreMethod, shipped store
// operations; 600 + ParticipantMethod, a shard's part in changes across shards; 400 +
// MirrorMethod, what a home sends its mirror. (100 + StoreMethod and 200 + MirrorMethod carried
// them without the shard's number: a node of either kind answers the other's as unknown.)
constexpr std::uint32_t kStoreMethodBase = 500;
constexpr std::uint32_t kParticipantMethodBase = 600;
constexpr std::uint32_t kMirrorMethodBase = 400;
// 300 + UnitMethod: a home's messages to the nodes holding the units of files placed in pools.
constexpr std::uint32_t kUnitMethodBase = 300;
constexpr std::chrono::milliseconds kUnitCallDeadline{5'000};
// Long enough for a 1 MiB write under load; a home that died is given up on after this, and the
// client hears NFS3ERR_JUKEBOX and retries.
constexpr std::chrono::milliseconds kShippedCallDeadline{5'000};
// A move copies the whole file before it answers: a 100 GiB file at 100 MB/s takes 17 minutes.
constexpr std::chrono::milliseconds kShippedMoveDeadline{60 * 60'000};
// A mirror that takes longer than this for one change is given up on: the home goes on alone.
constexpr std::chrono::milliseconds kMirrorCallDeadline{5'000};
constexpr std::chrono::milliseconds kProposalDeadline{5'000};
// Dropping a mirror from the record is tried this many times, this far apart, while other
// shards' changes to the record get there first.
constexpr int kDropAttempts = 10;
constexpr std::chrono::milliseconds kDropRetryPause{50};
// After a whole copy or a change to the record failed, the next attempt waits this long.
constexpr auto kRetryAfter = 1s;
constexpr std::chrono::milliseconds kRaceRetry{50};
constexpr auto kReleasePoll = 20ms;
// A recovery that left a change unsettled (a shard it needed out of reach) runs again after
// this, doubling up to the most.
constexpr std::chrono::milliseconds kSettleRetryFirst{500};
constexpr std::chrono::milliseconds kSettleRetryMost{30'000};
// A node answers `behind` to a caller whose view is older than its own: the caller's catches
// up within a heartbeat or two, so it asks again this often, this many times.
constexpr auto kBehindPause = 20ms;
constexpr int kBehindRetries = 100;

asio::awaitable<Result<xdr::Buffer>> run_shipped(std::shared_ptr<store::Store> local,
                                                 std::uint32_t method,
                                                 std::vector<std::uint8_t> request) {
  auto served = store::serve_store_call(*local, method, request);
  co_return co_await std::move(served);
}

// Runs `start(done)` on the strand and blocks the calling thread (a store thread, never the
// strand) until `done` ran or `deadline` passed.
template <typename T>
T wait_on_strand(const asio::any_io_executor& strand, std::chrono::milliseconds deadline,
                 std::function<void(std::function<void(T)>)> start) {
  auto promise = std::make_shared<std::promise<T>>();
  std::future<T> outcome = promise->get_future();
  asio::post(strand, [start = std::move(start), promise] {
    start([promise](T answer) { promise->set_value(std::move(answer)); });
  });
  if (outcome.wait_for(deadline) != std::future_status::ready) {
    return error(Errc::timed_out, "no answer from the cluster in time");
  }
  return outcome.get();
}

// A shipped message: the shard's number, then `request`.
xdr::Buffer shard_message(store::ShardId shard, std::span<const std::uint8_t> request) {
  xdr::Buffer message;
  message.reserve(4 + request.size());
  xdr::Encoder out(message);
  out.u32(shard);
  message.insert(message.end(), request.begin(), request.end());
  return message;
}

// namespace-shards in a data directory: how many shards this node's copy of the namespace has.
std::string shard_count_path(const std::string& data_dir) { return data_dir + "/namespace-shards"; }

Status keep_shard_count(const std::string& data_dir, std::uint32_t shards) {
  std::error_code ec;
  std::filesystem::create_directories(data_dir, ec);
  return write_file(shard_count_path(data_dir), std::to_string(shards) + "\n", 0644);
}

// As many shards as the copy had when it was last opened (a node outside any cluster, or one
// that restarts), or `configured` for a new one.
Result<std::uint32_t> shard_count_of(const std::string& data_dir, std::uint32_t configured) {
  const std::string path = shard_count_path(data_dir);
  if (Result<std::string> text = read_file(path); text.ok()) {
    std::uint32_t kept = 0;
    const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), kept);
    if (ec != std::errc() || kept == 0 || kept > store::kMaxShards) {
      return error(Errc::corrupt, path + " does not hold a number of shards (1..256)");
    }
    if (kept != configured) {
      spdlog::warn("store.shards is {}, but this node's copy of the namespace has {}: {} it is",
                   configured, kept, kept);
    }
    return kept;
  }
  TP_RETURN_IF_ERROR(keep_shard_count(data_dir, configured));
  return configured;
}

// Held by the coroutine: the shards may be released while it runs.
asio::awaitable<Status> recover_shards(std::shared_ptr<store::ShardedNamespace> shards) {
  auto recovering = shards->recover();
  co_return co_await std::move(recovering);
}

bool is_whole_copy(store::MirrorMethod method) {
  return method == store::MirrorMethod::copy_begin ||
         method == store::MirrorMethod::copy_database ||
         method == store::MirrorMethod::copy_data || method == store::MirrorMethod::copy_end;
}

}  // namespace

// Ships store calls to a shard's home (which runs them on the namespace it serves) and the
// calls of the shard's part in changes across shards (which it runs on the shard). Each
// message leads with the shard's number: the home refuses a shard it is not the home of, so a
// call is never forwarded back and forth.
class NamespaceShipping::Channel final : public store::ShardChannel,
                                         public store::ParticipantChannel {
 public:
  Channel(NamespaceShipping& shipping, cluster::NodeId home, store::ShardId shard)
      : shipping_(shipping), home_(home), shard_(shard) {}

  asio::awaitable<Result<xdr::Buffer>> call(store::StoreMethod method,
                                            xdr::Buffer request) override {
    auto sent =
        send(kStoreMethodBase + static_cast<std::uint32_t>(method), std::move(request),
             method == store::StoreMethod::migrate ? kShippedMoveDeadline : kShippedCallDeadline);
    co_return co_await std::move(sent);
  }

  asio::awaitable<Result<xdr::Buffer>> call(store::ParticipantMethod method,
                                            xdr::Buffer request) override {
    auto sent = send(kParticipantMethodBase + static_cast<std::uint32_t>(method),
                     std::move(request), kShippedCallDeadline);
    co_return co_await std::move(sent);
  }

 private:
  asio::awaitable<Result<xdr::Buffer>> send(std::uint32_t method, xdr::Buffer request,
                                            std::chrono::milliseconds deadline) {
    // The one copy of the request (a write's data) every attempt sends.
    auto message = std::make_shared<xdr::Buffer>(shard_message(shard_, request));
    for (int attempt = 0;; ++attempt) {
      auto start = [this, method, message, deadline](auto done) mutable {
        asio::post(shipping_.strand_, [this, method, message, deadline,
                                       done = std::move(done)]() mutable {
          cluster::RpcEndpoint* rpc = shipping_.rpc();
          if (rpc == nullptr) {
            done(Result<xdr::Buffer>(error(Errc::unavailable, "this node is not in a cluster")));
            return;
          }
          rpc->call(home_, method, *message, deadline, std::move(done));
        });
      };
      auto sent = await_callback<Result<xdr::Buffer>>(std::move(start));
      Result<xdr::Buffer> reply = co_await std::move(sent);
      if (reply.code() != Errc::behind || attempt == kBehindRetries) co_return reply;
      asio::steady_timer pause(co_await asio::this_coro::executor, kBehindPause);
      auto paused = pause.async_wait(asio::use_awaitable);
      co_await std::move(paused);
    }
  }

  NamespaceShipping& shipping_;
  const cluster::NodeId home_;
  const store::ShardId shard_;
};

// Where each shard is reached from this node, for the front end's threads: this node's own
// store while it serves the shard, the namespace at its home through a channel otherwise, or
// nowhere (unavailable).
class NamespaceShipping::Routes {
 public:
  void reset(store::ShardId count) {
    std::lock_guard lock(mutex_);
    routes_.assign(count, std::nullopt);
    for (auto& local : local_) local.store(false, std::memory_order_relaxed);
  }
  void set(store::ShardId shard, std::optional<store::ShardAccess> access) {
    std::lock_guard lock(mutex_);
    if (shard >= routes_.size()) return;
    local_[shard].store(access && access->local, std::memory_order_relaxed);
    routes_[shard] = std::move(access);
  }
  Result<store::ShardAccess> get(store::ShardId shard) const {
    std::lock_guard lock(mutex_);
    if (shard >= routes_.size() || !routes_[shard]) {
      return error(Errc::unavailable,
                   "shard " + std::to_string(shard) + "'s home is down or not ready");
    }
    return *routes_[shard];
  }
  // Whether this node serves the shard now; without the lock, for every read's cache.
  bool is_local(store::ShardId shard) const {
    return shard < local_.size() && local_[shard].load(std::memory_order_relaxed);
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::optional<store::ShardAccess>> routes_;  // guarded by mutex_
  std::array<std::atomic<bool>, store::kMaxShards> local_{};
};

// This node's part in one shard, on the strand.
struct NamespaceShipping::Shard {
  std::shared_ptr<store::LocalStore> store;  // while this node is its home
  std::shared_ptr<store::ShardCopy> copy;    // while this node is its mirror
  std::weak_ptr<void> releasing;             // the store or copy last released, until it is gone
  cluster::NodeId mirroring_to = 0;          // the mirror the store was last told to keep in step
  std::shared_ptr<MirrorLink> mirror_link;   // the store's link to it (null: none)
  bool mirror_copy_running = false;
  bool mirror_copied = false;     // the last whole copy to mirroring_to completed
  cluster::NodeId routed_to = 0;  // the home the front end reaches it at (0: none)
};

// The home's store sends its mirror's messages through this. A change the mirror did not take
// must not be acknowledged while the cluster still counts on that mirror — it could be
// promoted without it — so the link first has the mirror dropped from the namespace record,
// and from then on sends nothing: the leader names a new mirror, which gets a whole copy.
// Each shard has its link; its messages carry the shard's number first.
class NamespaceShipping::MirrorLink final : public store::MirrorTarget {
 public:
  MirrorLink(NamespaceShipping& shipping, cluster::NodeId mirror, store::ShardId shard)
      : shipping_(shipping), mirror_(mirror), shard_(shard) {}

  Status call(store::MirrorMethod method, std::span<const std::uint8_t> request) override {
    if (dropped_.load()) return {};
    Status sent = send(method, request).status();
    if (sent.ok() || is_whole_copy(method)) return sent;
    std::lock_guard lock(dropping_);
    if (dropped_.load()) return {};
    spdlog::warn("mirror node {} did not take a change ({}): the namespace goes on without it",
                 mirror_, sent.to_string());
    if (Status dropped = shipping_.drop_mirror(shard_, mirror_); !dropped.ok()) {
      return error(Errc::unavailable, "the mirror did not take a change and could not be "
                                      "dropped from the namespace: " + dropped.message());
    }
    dropped_.store(true);
    return {};
  }

  Result<xdr::Buffer> fetch(store::MirrorMethod method,
                            std::span<const std::uint8_t> request) override {
    if (dropped_.load()) return error(Errc::unavailable, "the mirror was dropped");
    return send(method, request);
  }

  // Whether the link stopped sending: the mirror missed a change, and needs a whole copy.
  bool dropped() const { return dropped_.load(); }

 private:
  Result<xdr::Buffer> send(store::MirrorMethod method, std::span<const std::uint8_t> request) {
    // The message's one copy of the request (a write's data): every attempt sends it.
    auto message = std::make_shared<const xdr::Buffer>(shard_message(shard_, request));
    Result<xdr::Buffer> sent = shipping_.send_to_mirror(mirror_, method, message);
    for (int attempt = 0; sent.status().code() == Errc::behind && attempt < kBehindRetries;
         ++attempt) {
      std::this_thread::sleep_for(kBehindPause);
      sent = shipping_.send_to_mirror(mirror_, method, message);
    }
    return sent;
  }

  NamespaceShipping& shipping_;
  const cluster::NodeId mirror_;
  const store::ShardId shard_;
  std::mutex dropping_;
  std::atomic<bool> dropped_ = false;
};

// The nodes of each pool as the last view followed has them, less those lost (down past the
// repair delay: new files and restripes leave them out), and calls to their units: this
// node's own answered here, the others' over backend RPC.
class NamespaceShipping::UnitPeers final : public store::PoolPeers {
 public:
  explicit UnitPeers(NamespaceShipping& shipping) : shipping_(shipping) {}

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

  Result<xdr::Buffer> call(cluster::NodeId node, store::UnitMethod method,
                           std::span<const std::uint8_t> request) override {
    const auto number = static_cast<std::uint32_t>(method);
    if (node == shipping_.self_) return shipping_.units_->serve(number, request);
    Result<xdr::Buffer> sent = send(node, number, request);
    for (int attempt = 0; sent.status().code() == Errc::behind && attempt < kBehindRetries;
         ++attempt) {
      std::this_thread::sleep_for(kBehindPause);
      sent = send(node, number, request);
    }
    return sent;
  }

  bool is_up(cluster::NodeId node) override {
    std::lock_guard lock(mutex_);
    return up_.contains(node);
  }

  void follow(const cluster::GroupView& view) {
    std::map<std::string, std::vector<cluster::NodeId>> pools = pool_nodes(view);
    std::map<std::string, std::size_t> left_out;
    std::set<cluster::NodeId> up;
    for (const cluster::NodeInfo& node : view.nodes) {
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
  }

 private:
  Result<xdr::Buffer> send(cluster::NodeId node, std::uint32_t method,
                           std::span<const std::uint8_t> request) {
    // The caller's bytes may be gone when a late answer arrives: the strand works on its own.
    return wait_on_strand<Result<xdr::Buffer>>(
        shipping_.strand_, kUnitCallDeadline + 1s,
        [this, node, method, body = std::vector<std::uint8_t>(request.begin(), request.end())](
            std::function<void(Result<xdr::Buffer>)> done) {
          cluster::RpcEndpoint* rpc = shipping_.rpc();
          if (rpc == nullptr) {
            done(error(Errc::unavailable, "this node is not in a cluster"));
            return;
          }
          rpc->call(node, kUnitMethodBase + method, body, kUnitCallDeadline, std::move(done));
        });
  }

  NamespaceShipping& shipping_;
  std::mutex mutex_;
  std::map<std::string, std::vector<cluster::NodeId>> pools_;  // guarded by mutex_
  std::map<std::string, std::size_t> left_out_;                // guarded by mutex_
  std::set<cluster::NodeId> up_;                               // guarded by mutex_
};

namespace {

store::StoreOptions with_pools(store::StoreOptions options, std::shared_ptr<store::PoolPeers> peers,
                               std::shared_ptr<store::NewFilePlacement> placement) {
  options.peers = std::move(peers);
  options.placement = std::move(placement);
  return options;
}

}  // namespace

NamespaceShipping::NamespaceShipping(asio::any_io_executor strand,
                                     asio::any_io_executor store_executor,
                                     store::StoreOptions options, cluster::NodeId self,
                                     std::uint32_t shards,
                                     std::shared_ptr<store::NamespaceLocks> locks)
    : strand_(std::move(strand)),
      store_executor_(std::move(store_executor)),
      units_(std::make_unique<store::UnitStore>(options.data_dir + "/units", options.l2,
                                                options.reads)),
      peers_(std::make_shared<UnitPeers>(*this)),
      placement_(std::make_shared<PolicyPlacement>()),
      options_(with_pools(std::move(options), peers_, placement_)),
      self_(self),
      configured_shards_(shards),
      locks_(std::move(locks)),
      router_(self,
              [this](cluster::NodeId home) { return std::make_shared<Channel>(*this, home, 0); }),
      routes_(std::make_shared<Routes>()),
      retry_timer_(strand_),
      settle_timer_(strand_),
      atime_enabled_(options_.atime_enabled),
      atime_grace_period_(options_.atime_grace_period) {}

NamespaceShipping::~NamespaceShipping() { close(); }

Result<std::shared_ptr<store::LocalStore>> NamespaceShipping::open_store(
    store::ShardId shard) const {
  store::StoreOptions options = options_;
  options.data_dir = store::shard_directory(options_.data_dir, shard);
  options.shard = shard;
  TP_ASSIGN_OR_RETURN(std::shared_ptr<store::LocalStore> store, store::Store::open(options));
  store->set_atime_policy(atime_enabled_, atime_grace_period_);
  return store;
}

Status NamespaceShipping::open_local() {
  TP_ASSIGN_OR_RETURN(const std::uint32_t count,
                      shard_count_of(options_.data_dir, configured_shards_));
  reshape(static_cast<store::ShardId>(count));
  for (store::ShardId shard = 0; shard < shards_.size(); ++shard) {
    TP_ASSIGN_OR_RETURN(shards_[shard].store, open_store(shard));
  }
  route(nullptr, nullptr);  // which settles what the shards hold
  return {};
}

void NamespaceShipping::reshape(store::ShardId count) {
  if (shards_.size() == count) return;
  for (store::ShardId shard = 0; shard < shards_.size(); ++shard) {
    if (shards_[shard].store) release_store(shard);
    if (shards_[shard].copy) release_copy(shard);
  }
  std::vector<Shard> reshaped(count);
  // A shard's directory opens again only once its last store or copy is closed.
  for (store::ShardId shard = 0; shard < std::min<std::size_t>(count, shards_.size()); ++shard) {
    reshaped[shard].releasing = shards_[shard].releasing;
  }
  shards_ = std::move(reshaped);
  routes_->reset(count);
  namespace_.reset();
  if (count > 1) {
    namespace_ = std::make_shared<store::ShardedNamespace>(
        count, [routes = routes_](store::ShardId shard) { return routes->get(shard); }, locks_);
  }
}

// What a crash left half done across shards; what the shards prepared stays held (refused to
// other changes) until then. A shard whose home cannot be reached leaves it for a later try.
void NamespaceShipping::settle() {
  if (!namespace_) return;
  if (settling_) {
    settle_again_ = true;
    return;
  }
  settling_ = true;
  settle_again_ = false;
  settle_timer_.cancel();
  asio::co_spawn(
      store_executor_, recover_shards(namespace_),
      [this, alive = alive_](std::exception_ptr failure, Status recovered) {
        if (failure) recovered = error(Errc::internal, "recovery threw");
        asio::post(strand_, [this, alive, recovered] {
          if (!*alive) return;
          settling_ = false;
          if (recovered.ok()) settle_backoff_ = 0ms;
          // A shard moved while it ran: what failed may go through now.
          if (settle_again_) return settle();
          if (recovered.ok()) return;
          settle_backoff_ = std::clamp(settle_backoff_ * 2, kSettleRetryFirst, kSettleRetryMost);
          spdlog::warn(
              "namespace: changes across shards left to settle ({}); trying again in {} ms",
              recovered.to_string(), settle_backoff_.count());
          settle_timer_.expires_after(settle_backoff_);
          settle_timer_.async_wait([this, alive](const boost::system::error_code& ec) {
            if (!ec && *alive) settle();
          });
        });
      });
}

void NamespaceShipping::close() {
  *alive_ = false;
  router_.set_home(0);
  routes_->reset(0);
  for (Shard& shard : shards_) {
    if (shard.store) shard.store->close();
    if (shard.copy) shard.copy->close();
  }
  shards_.clear();
  namespace_.reset();
  blocking_.join();
}

void NamespaceShipping::set_atime_policy(bool enabled, std::chrono::seconds grace_period) {
  atime_enabled_ = enabled;
  atime_grace_period_ = grace_period;
  for (Shard& shard : shards_) {
    if (shard.store) shard.store->set_atime_policy(enabled, grace_period);
  }
}

namespace {

asio::awaitable<void> drop_store_caches(std::vector<std::shared_ptr<store::LocalStore>> stores,
                                        std::function<void(Status)> done) {
  for (const auto& store : stores) {
    auto dropping = store->drop_caches();
    if (Status dropped = co_await std::move(dropping); !dropped.ok()) {
      done(dropped);
      co_return;
    }
  }
  done({});
}

}  // namespace

store::L2Usage NamespaceShipping::l2_usage() const {
  if (!options_.l2) return {};
  return {options_.l2->statistics().bytes, options_.l2->capacity()};
}

void NamespaceShipping::drop_caches(std::function<void(Status)> done) {
  units_->clear_l2();
  std::vector<std::shared_ptr<store::LocalStore>> stores;
  for (const Shard& shard : shards_) {
    if (shard.store) stores.push_back(shard.store);
  }
  asio::co_spawn(store_executor_, drop_store_caches(std::move(stores), std::move(done)),
                 asio::detached);
}

NamespaceShipping::Role NamespaceShipping::role(store::ShardId shard) const {
  if (!record_ || shard >= record_->shards()) return Role::none;
  const ShardPlace& place = record_->places[shard];
  if (place.home == self_) return Role::home;
  return place.mirror == self_ ? Role::mirror : Role::none;
}

cluster::RpcEndpoint* NamespaceShipping::rpc() const {
  return membership_ ? membership_->rpc() : nullptr;
}

void NamespaceShipping::attach(Membership* membership) {
  membership_ = membership;
  // A member must not answer from its own copy before the view says it is the home: the copy
  // may be behind the one that serves.
  if (membership_ != nullptr && membership_->identity() && !record_) route(nullptr, nullptr);
}

void NamespaceShipping::follow(const std::optional<NamespaceRecord>& record,
                               const cluster::GroupView& view) {
  peers_->follow(view);
  placement_->follow(view);
  record_ = record;
  if (!record) {
    spdlog::warn("the group view has no namespace record yet: NFS answers 'retry later'");
    route(nullptr, nullptr);
    return;
  }
  reshape(static_cast<store::ShardId>(record->shards()));
  lead(*record, view);
  for (store::ShardId shard = 0; shard < shards_.size(); ++shard) {
    take_role(shard, role(shard), *record);
  }
  route(&*record, &view);
  hand_over(*record, view);
}

// Once a shard asked to be handed over is served here no more, its in-step mirror takes it.
void NamespaceShipping::hand_over(const NamespaceRecord& record, const cluster::GroupView& view) {
  for (store::ShardId shard = 0; shard < shards_.size(); ++shard) {
    const ShardPlace& place = record.places[shard];
    if (place.home != self_ || !place.handing_over || !place.mirror_in_step ||
        !view.is_up(place.mirror) || !shards_[shard].store || shards_[shard].routed_to != 0) {
      continue;
    }
    propose(handed_over(record, shard, view), "handing shard " + std::to_string(shard) +
                                                  " over to node " + std::to_string(place.mirror));
    return;
  }
}

void NamespaceShipping::route(const NamespaceRecord* record, const cluster::GroupView* view) {
  // Outside any cluster, this node serves every shard it opened; a member, only what the view
  // says it is the home of.
  const bool member = membership_ != nullptr && membership_->identity().has_value();
  bool moved = false;
  for (store::ShardId shard = 0; shard < shards_.size(); ++shard) {
    Shard& state = shards_[shard];
    cluster::NodeId home = 0;
    if (record != nullptr) {
      const ShardPlace& place = record->places[shard];
      home = view->is_up(place.home) ? place.home : 0;
      // While the record promises an in-step mirror this store is not feeding (the home
      // restarted, and says otherwise only once the record changed), what it acknowledged
      // could be lost if the mirror were promoted: it serves nothing until then. Nor while
      // it hands the shard over: its mirror serves it next.
      if (home == self_ && (!state.store || (place.handing_over && place.mirror_in_step) ||
                            (place.mirror != 0 && place.mirror_in_step &&
                             !(state.mirroring_to == place.mirror && state.mirror_copied)))) {
        home = 0;
      }
    } else if (!member && state.store) {
      home = self_;
    }
    if (home == state.routed_to) continue;
    moved = true;
    if (home == 0) {
      spdlog::warn("shard {}'s home is down or not ready: NFS answers 'retry later'", shard);
    } else {
      spdlog::info("shard {}'s home is node {}{}", shard, home,
                   home == self_ ? " (this node)" : "");
    }
    state.routed_to = home;
    if (home == 0) {
      routes_->set(shard, std::nullopt);
    } else if (home == self_) {
      routes_->set(shard,
                   store::ShardAccess{state.store, std::shared_ptr<store::ShardParticipant>(
                                                       state.store, &state.store->participant())});
    } else {
      auto channel = std::make_shared<Channel>(*this, home, shard);
      routes_->set(shard, store::ShardAccess{
                              std::shared_ptr<store::Store>(store::make_remote_store(channel)),
                              store::make_remote_participant(channel), false});
    }
  }
  if (shards_.size() == 1) {
    const cluster::NodeId home = shards_[0].routed_to;
    router_.set_home(home, home == self_ ? shards_[0].store : nullptr);
  } else {
    router_.set_home(record != nullptr || !member ? self_ : 0, namespace_);
  }
  if (moved) settle();
}

void NamespaceShipping::lead(const NamespaceRecord& record, const cluster::GroupView& view) {
  if (membership_ == nullptr || membership_->group() == nullptr ||
      !membership_->group()->is_leader()) {
    return;
  }
  std::optional<NamespaceRecord> next = plan_namespace(record, view);
  if (!next) return;
  std::string why;
  for (store::ShardId shard = 0; shard < record.shards(); ++shard) {
    const ShardPlace& was = record.places[shard];
    const ShardPlace& will = next->places[shard];
    if (was == will) continue;
    if (!why.empty()) why += "; ";
    why += "shard " + std::to_string(shard) + ": home " + std::to_string(will.home) + ", mirror " +
           std::to_string(will.mirror);
    if (will.home != was.home) {
      why += " (its home is down: mirror promoted)";
    }
  }
  propose(*next, why);
}

void NamespaceShipping::propose(const NamespaceRecord& next, const std::string& why) {
  cluster::GroupClient* client = membership_ ? membership_->client() : nullptr;
  if (proposing_ || client == nullptr) return;
  proposing_ = true;
  spdlog::info("namespace: {}", why);
  client->propose(namespace_update(next), kProposalDeadline,
                  [this, alive = alive_](Status outcome) {
                    if (!*alive) return;
                    proposing_ = false;
                    if (!outcome.ok()) {
                      spdlog::info("namespace: the change was not made ({}); trying again",
                                   outcome.to_string());
                    }
                    // The view that has the change may have been followed while this was
                    // still under way. A change another node made first is in a view that
                    // is at most a heartbeat away: the next try is soon.
                    follow_again_after(outcome.ok() ? 0ms
                                       : outcome.code() == Errc::precondition_failed
                                           ? kRaceRetry
                                           : std::chrono::milliseconds(kRetryAfter));
                  });
}

void NamespaceShipping::take_role(store::ShardId shard, Role role, const NamespaceRecord& record) {
  Shard& state = shards_[shard];
  if (state.store && role != Role::home) release_store(shard);
  if (state.copy && role != Role::mirror) release_copy(shard);
  if (role == Role::home && !state.store) open_when_released(shard, role);
  if (role == Role::mirror && !state.copy) open_when_released(shard, role);
  if (role == Role::home && state.store) keep_mirror_in_step(shard, record);
}

void NamespaceShipping::keep_mirror_in_step(store::ShardId shard, const NamespaceRecord& record) {
  Shard& state = shards_[shard];
  if (state.mirror_copy_running) return;  // when it ends, the record is looked at again
  // A mirror the link dropped missed changes: named again, it gets a whole copy anew, even
  // when this node never saw the record without it.
  if (state.mirror_link && state.mirror_link->dropped()) {
    state.mirror_link.reset();
    state.mirroring_to = 0;
    state.mirror_copied = false;
  }
  const ShardPlace& place = record.places[shard];
  const cluster::NodeId wanted = place.mirror;
  if (wanted == state.mirroring_to) {
    if (wanted != 0 && state.mirror_copied && !place.mirror_in_step) {
      NamespaceRecord next = record;
      next.places[shard].mirror_in_step = true;
      propose(next, "shard " + std::to_string(shard) + "'s mirror, node " + std::to_string(wanted) +
                        ", holds a whole copy");
    }
    return;
  }
  // Handing over, the in-step mirror holds all this node acknowledged (a home that restarted
  // served nothing since): it takes the shard as it is.
  if (place.handing_over && place.mirror_in_step) return;
  // A whole copy starts by discarding the mirror's old one: the record must stop promising an
  // in-step mirror first.
  if (place.mirror_in_step) {
    NamespaceRecord next = record;
    next.places[shard].mirror_in_step = false;
    propose(next, "copying shard " + std::to_string(shard) + " to its mirror anew");
    return;
  }
  state.mirror_copy_running = true;
  state.mirroring_to = wanted;
  state.mirror_copied = false;
  std::shared_ptr<store::LocalStore> store = state.store;
  std::shared_ptr<MirrorLink> link;
  if (wanted != 0) link = std::make_shared<MirrorLink>(*this, wanted, shard);
  state.mirror_link = link;
  asio::co_spawn(
      store_executor_, store->mirror_to(std::move(link)),
      [this, alive = alive_, store, wanted, shard](std::exception_ptr failure, Status copied) {
        if (failure) copied = error(Errc::internal, "the whole copy threw");
        asio::post(strand_, [this, alive, store, wanted, shard, copied] {
          if (!*alive || shard >= shards_.size()) return;
          Shard& state = shards_[shard];
          if (state.store != store) return;
          state.mirror_copy_running = false;
          if (state.mirroring_to != wanted) return;
          state.mirror_copied = copied.ok();
          if (!copied.ok()) {
            spdlog::warn(
                "namespace: no whole copy of shard {} for mirror node {} ({}); trying "
                "again",
                shard, wanted, copied.to_string());
            state.mirroring_to = 0;
          }
          follow_again_after(copied.ok() ? 0s : kRetryAfter);
        });
      });
}

void NamespaceShipping::release_store(store::ShardId shard) {
  Shard& state = shards_[shard];
  std::shared_ptr<store::LocalStore> store = std::move(state.store);
  state.mirror_link.reset();
  state.mirroring_to = 0;
  state.mirror_copied = false;
  state.mirror_copy_running = false;
  state.releasing = store;
  if (state.routed_to == self_) {
    state.routed_to = 0;
    routes_->set(shard, std::nullopt);
    if (shards_.size() == 1) router_.set_home(0);
  }
  // Closing waits for the store's queued work, which may wait on the strand.
  asio::post(blocking_, [store = std::move(store)]() mutable {
    store->close();
    store.reset();
  });
}

void NamespaceShipping::release_copy(store::ShardId shard) {
  Shard& state = shards_[shard];
  std::shared_ptr<store::ShardCopy> copy = std::move(state.copy);
  state.releasing = copy;
  asio::post(blocking_, [copy = std::move(copy)]() mutable {
    copy->close();
    copy.reset();
  });
}

void NamespaceShipping::open_when_released(store::ShardId shard, Role role) {
  Shard& state = shards_[shard];
  if (!state.releasing.expired()) {
    follow_again_after(kReleasePoll);
    return;
  }
  if (Status kept = keep_shard_count(options_.data_dir, record_->shards()); !kept.ok()) {
    spdlog::error("namespace: {}", kept.to_string());
    return;
  }
  // A copy that does not open now is tried again shortly.
  auto not_opened = [this, shard](const Status& status, const char* as) {
    spdlog::error("namespace: cannot open this node's copy of shard {} {} ({}); trying again",
                  shard, as, status.to_string());
    follow_again_after(kRetryAfter);
  };
  if (role == Role::home) {
    auto opened = open_store(shard);
    if (!opened.ok()) return not_opened(opened.status(), "to serve it");
    state.store = std::move(opened).value();
    spdlog::info("namespace: serving this node's copy of shard {} as its home", shard);
  } else {
    auto opened = store::ShardCopy::open(store::shard_directory(options_.data_dir, shard));
    if (!opened.ok()) return not_opened(opened.status(), "as its mirror");
    state.copy = std::move(opened).value();
    spdlog::info("namespace: keeping this node's copy of shard {} as its mirror", shard);
  }
  follow_again_after(0s);
}

void NamespaceShipping::follow_again_after(std::chrono::milliseconds delay) {
  retry_timer_.expires_after(delay);
  retry_timer_.async_wait([this, alive = alive_](const boost::system::error_code& ec) {
    if (ec || !*alive || membership_ == nullptr || membership_->group() == nullptr) return;
    const cluster::GroupView& view = membership_->group()->view();
    follow(namespace_of(view), view);
  });
}

bool NamespaceShipping::data_is_local(store::InodeId inode) const {
  return routes_->is_local(store::shard_of(inode));
}

std::shared_ptr<store::Store> NamespaceShipping::served() const {
  if (namespace_) return namespace_;
  if (shards_.empty()) return nullptr;
  return shards_[0].store;
}

Result<xdr::Buffer> NamespaceShipping::send_to_mirror(cluster::NodeId mirror,
                                                      store::MirrorMethod method,
                                                      std::shared_ptr<const xdr::Buffer> message) {
  return wait_on_strand<Result<xdr::Buffer>>(
      strand_, kMirrorCallDeadline + 1s,
      [this, mirror, method,
       message = std::move(message)](std::function<void(Result<xdr::Buffer>)> done) {
        cluster::RpcEndpoint* rpc = this->rpc();
        if (rpc == nullptr) {
          done(error(Errc::unavailable, "this node is not in a cluster"));
          return;
        }
        rpc->call(mirror, kMirrorMethodBase + static_cast<std::uint32_t>(method), *message,
                  kMirrorCallDeadline, std::move(done));
      });
}

Status NamespaceShipping::drop_mirror(store::ShardId shard, cluster::NodeId mirror) {
  // The record holds every shard's place: a change to another shard's since this node read it
  // fails the update, and the next try reads the record again once the view has it.
  Status dropped;
  for (int attempt = 0; attempt < kDropAttempts; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(kDropRetryPause);
    dropped = try_drop_mirror(shard, mirror);
    if (dropped.code() != Errc::precondition_failed) break;
  }
  return dropped;
}

Status NamespaceShipping::try_drop_mirror(store::ShardId shard, cluster::NodeId mirror) {
  return wait_on_strand<Status>(
      strand_, kProposalDeadline + 1s, [this, shard, mirror](std::function<void(Status)> done) {
        cluster::GroupClient* client = membership_ ? membership_->client() : nullptr;
        if (client == nullptr) {
          done(error(Errc::unavailable, "this node is not in a cluster"));
          return;
        }
        std::optional<NamespaceRecord> record = namespace_of(membership_->group()->view());
        if (!record || shard >= record->shards() || record->places[shard].home != self_) {
          done(error(Errc::unavailable,
                     "this node is no longer shard " + std::to_string(shard) + "'s home"));
          return;
        }
        // From here the mirror no longer counts as in step with this store, whatever record
        // the strand follows next: named again, it gets a whole copy anew.
        auto forget_mirror = [this, shard, mirror] {
          if (shard >= shards_.size() || shards_[shard].mirroring_to != mirror) return;
          shards_[shard].mirroring_to = 0;
          shards_[shard].mirror_copied = false;
        };
        if (record->places[shard].mirror != mirror) {
          forget_mirror();
          done(Status{});
          return;
        }
        NamespaceRecord next = *record;
        next.places[shard] = ShardPlace{self_, 0, false};
        client->propose(namespace_update(next), kProposalDeadline,
                        [alive = alive_, forget_mirror, done = std::move(done)](Status outcome) {
                          if (outcome.ok() && *alive) forget_mirror();
                          done(outcome);
                        });
      });
}

namespace {

// The shard a shipped message is for, and the message after its number.
struct ShardMessage {
  store::ShardId shard = 0;
  std::span<const std::uint8_t> body;
};
std::optional<ShardMessage> shard_message_of(std::span<const std::uint8_t> request) {
  xdr::Decoder in(request);
  const std::uint32_t shard = in.u32();
  if (!in.ok() || shard >= store::kMaxShards) return std::nullopt;
  return ShardMessage{static_cast<store::ShardId>(shard), in.rest()};
}

// Runs a shipped call on the store's threads and replies on the strand.
template <typename Run>
void run_and_reply(const asio::any_io_executor& store_executor, asio::any_io_executor strand,
                   Run run, cluster::RpcEndpoint::Reply reply) {
  asio::co_spawn(store_executor, std::move(run),
                 [strand = std::move(strand), reply](std::exception_ptr failure,
                                                     Result<xdr::Buffer> result) mutable {
                   if (failure) result = error(Errc::internal, "a shipped operation threw");
                   // Moved, not copied: a read's reply holds its data.
                   asio::post(strand,
                              [reply = std::move(reply), result = std::move(result)]() mutable {
                                reply(std::move(result));
                              });
                 });
}

asio::awaitable<Result<xdr::Buffer>> run_participant_call(std::shared_ptr<store::LocalStore> store,
                                                          std::uint32_t method,
                                                          std::vector<std::uint8_t> request) {
  auto served = store::serve_participant_call(store->participant(), method, request);
  co_return co_await std::move(served);
}

}  // namespace

void NamespaceShipping::serve(cluster::RpcEndpoint& rpc) {
  // A shipped call for a shard this node does not serve: the caller is behind (or ahead) of
  // this node's view, and retries later.
  auto served_shard = [this](std::span<const std::uint8_t> request,
                             cluster::RpcEndpoint::Reply& reply) -> std::optional<ShardMessage> {
    std::optional<ShardMessage> message = shard_message_of(request);
    if (!message) {
      reply(error(Errc::invalid_argument, "a shipped call for no shard"));
    } else if (message->shard >= shards_.size() || shards_[message->shard].routed_to != self_) {
      reply(error(Errc::unavailable, "node " + std::to_string(self_) + " is not shard " +
                                         std::to_string(message->shard) + "'s home"));
      message.reset();
    }
    return message;
  };
  for (std::uint32_t method = 1; method <= store::kLastStoreMethod; ++method) {
    rpc.handle(kStoreMethodBase + method,
               [this, method, served_shard](cluster::NodeId, std::span<const std::uint8_t> request,
                                            cluster::RpcEndpoint::Reply reply) {
                 std::optional<ShardMessage> message = served_shard(request, reply);
                 if (!message) return;
                 // A write or commit (of one inode of the shard) answers the shard's own write
                 // verifier. The namespace's would fold in what this node last heard of the
                 // other shards' — which the caller's fold feeds back, each changing the other
                 // on every exchange, and clients would resend their writes without end.
                 const auto called = static_cast<store::StoreMethod>(method);
                 const bool own_verifier = called == store::StoreMethod::write ||
                                           called == store::StoreMethod::commit ||
                                           called == store::StoreMethod::write_verifier;
                 run_and_reply(
                     store_executor_, strand_,
                     run_shipped(
                         own_verifier ? shards_[message->shard].store : served(), method,
                         std::vector<std::uint8_t>(message->body.begin(), message->body.end())),
                     std::move(reply));
               });
  }
  for (std::uint32_t method = 1; method <= store::kLastParticipantMethod; ++method) {
    rpc.handle(kParticipantMethodBase + method,
               [this, method, served_shard](cluster::NodeId, std::span<const std::uint8_t> request,
                                            cluster::RpcEndpoint::Reply reply) {
                 std::optional<ShardMessage> message = served_shard(request, reply);
                 if (!message) return;
                 run_and_reply(store_executor_, strand_,
                               run_participant_call(shards_[message->shard].store, method,
                                                    std::vector<std::uint8_t>(message->body.begin(),
                                                                              message->body.end())),
                               std::move(reply));
               });
  }
  for (std::uint32_t method = 1; method <= store::kLastUnitMethod; ++method) {
    rpc.handle(kUnitMethodBase + method, [this, method](cluster::NodeId,
                                                        std::span<const std::uint8_t> request,
                                                        cluster::RpcEndpoint::Reply reply) {
      asio::post(blocking_, [this, method, strand = strand_, reply,
                             body = std::vector<std::uint8_t>(request.begin(), request.end())] {
        Result<xdr::Buffer> answer = units_->serve(method, body);
        asio::post(strand, [reply, answer = std::move(answer)]() mutable {
          reply(std::move(answer));
        });
      });
    });
  }
  for (std::uint32_t method = 1; method <= store::kLastMirrorMethod; ++method) {
    rpc.handle(kMirrorMethodBase + method, [this, method](cluster::NodeId from,
                                                          std::span<const std::uint8_t> request,
                                                          cluster::RpcEndpoint::Reply reply) {
      std::optional<ShardMessage> message = shard_message_of(request);
      if (!message) {
        reply(error(Errc::invalid_argument, "a mirror message for no shard of the namespace"));
        return;
      }
      const store::ShardId shard = message->shard;
      // Only the home the view names may change the copy: a deposed one must not.
      if (role(shard) != Role::mirror || !shards_[shard].copy ||
          from != record_->places[shard].home) {
        reply(error(Errc::unavailable, "node " + std::to_string(self_) + " is not shard " +
                                           std::to_string(shard) + "'s mirror for node " +
                                           std::to_string(from)));
        return;
      }
      asio::post(blocking_, [copy = shards_[shard].copy, method, strand = strand_, reply,
                             body = std::vector<std::uint8_t>(message->body.begin(),
                                                              message->body.end())] {
        Result<xdr::Buffer> answer = xdr::Buffer{};
        if (method == static_cast<std::uint32_t>(store::MirrorMethod::read)) {
          answer = copy->read(body);
        } else if (Status applied = copy->apply(method, body); !applied.ok()) {
          answer = applied;
        }
        asio::post(strand, [reply, answer = std::move(answer)]() mutable {
          reply(std::move(answer));
        });
      });
    });
  }
}

}  // namespace tidepool::daemon
