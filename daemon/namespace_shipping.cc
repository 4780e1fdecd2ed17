#include "daemon/namespace_shipping.h"

#include <spdlog/spdlog.h>

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

// Backend RPC methods 100 + StoreMethod carry shipped store operations; 400 + MirrorMethod,
// what a home sends its mirror, each message led by its shard's number (200 + MirrorMethod
// carried them without: a node of either kind answers the other's as unknown).
constexpr std::uint32_t kStoreMethodBase = 100;
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
// After a whole copy or a change to the record failed, the next attempt waits this long.
constexpr auto kRetryAfter = 1s;
constexpr auto kReleasePoll = 20ms;
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
asio::awaitable<Status> recover_shards(std::shared_ptr<store::LocalShards> shards) {
  auto recovering = shards->recover();
  co_return co_await std::move(recovering);
}

bool is_whole_copy(store::MirrorMethod method) {
  return method == store::MirrorMethod::copy_begin ||
         method == store::MirrorMethod::copy_database ||
         method == store::MirrorMethod::copy_data || method == store::MirrorMethod::copy_end;
}

}  // namespace

class NamespaceShipping::Channel final : public store::ShardChannel {
 public:
  Channel(NamespaceShipping& shipping, cluster::NodeId home) : shipping_(shipping), home_(home) {}

  asio::awaitable<Result<xdr::Buffer>> call(store::StoreMethod method,
                                            xdr::Buffer request) override {
    for (int attempt = 0;; ++attempt) {
      auto start = [this, method, &request](auto done) mutable {
        asio::post(shipping_.strand_, [this, method, request, done = std::move(done)]() mutable {
          cluster::RpcEndpoint* rpc = shipping_.rpc();
          if (rpc == nullptr) {
            done(Result<xdr::Buffer>(error(Errc::unavailable, "this node is not in a cluster")));
            return;
          }
          rpc->call(home_, kStoreMethodBase + static_cast<std::uint32_t>(method), request,
                    method == store::StoreMethod::migrate ? kShippedMoveDeadline
                                                          : kShippedCallDeadline,
                    std::move(done));
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

 private:
  NamespaceShipping& shipping_;
  const cluster::NodeId home_;
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
    if (Status dropped = shipping_.drop_mirror(mirror_); !dropped.ok()) {
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

 private:
  Result<xdr::Buffer> send(store::MirrorMethod method, std::span<const std::uint8_t> request) {
    // The message's one copy of the request (a write's data): every attempt sends it.
    auto message = std::make_shared<xdr::Buffer>();
    message->reserve(4 + request.size());
    xdr::Encoder out(*message);
    out.u32(shard_);
    message->insert(message->end(), request.begin(), request.end());
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

// The nodes of each pool as the last view followed has them, and calls to their units: this
// node's own answered here, the others' over backend RPC.
class NamespaceShipping::UnitPeers final : public store::PoolPeers {
 public:
  explicit UnitPeers(NamespaceShipping& shipping) : shipping_(shipping) {}

  std::vector<cluster::NodeId> nodes_of(const std::string& pool) override {
    std::lock_guard lock(mutex_);
    auto found = pools_.find(pool);
    return found == pools_.end() ? std::vector<cluster::NodeId>{} : found->second;
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
    std::map<std::string, std::vector<cluster::NodeId>> pools;
    std::set<cluster::NodeId> up;
    for (const cluster::NodeInfo& node : view.nodes) {
      pools[node.pool].push_back(node.id);
      if (node.up) up.insert(node.id);
    }
    std::lock_guard lock(mutex_);
    pools_ = std::move(pools);
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
              [this](cluster::NodeId home) { return std::make_shared<Channel>(*this, home); }),
      release_timer_(strand_),
      retry_timer_(strand_),
      atime_enabled_(options_.atime_enabled),
      atime_grace_period_(options_.atime_grace_period) {}

NamespaceShipping::~NamespaceShipping() { close(); }

Status NamespaceShipping::open_local() {
  TP_ASSIGN_OR_RETURN(const std::uint32_t shards,
                      shard_count_of(options_.data_dir, configured_shards_));
  TP_ASSIGN_OR_RETURN(
      local_, store::LocalShards::open(options_, static_cast<store::ShardId>(shards), locks_));
  router_.set_home(self_, local_->served());
  settle_after_open();
  return {};
}

// What a crash of the last home left half done across shards; what the shards prepared stays
// held (refused to other changes) until then.
void NamespaceShipping::settle_after_open() {
  asio::co_spawn(store_executor_, recover_shards(local_),
                 [](std::exception_ptr failure, Status recovered) {
                   if (failure) recovered = error(Errc::internal, "recovery threw");
                   if (!recovered.ok()) {
                     spdlog::warn("namespace: changes across shards left to settle: {}",
                                  recovered.to_string());
                   }
                 });
}

void NamespaceShipping::close() {
  *alive_ = false;
  router_.set_home(0);
  if (local_) local_->close();
  if (copies_) {
    for (auto& copy : *copies_) copy->close();
  }
  local_.reset();
  copies_.reset();
  blocking_.join();
}

void NamespaceShipping::set_atime_policy(bool enabled, std::chrono::seconds grace_period) {
  atime_enabled_ = enabled;
  atime_grace_period_ = grace_period;
  if (local_) local_->set_atime_policy(enabled, grace_period);
}

namespace {

asio::awaitable<void> drop_store_caches(std::shared_ptr<store::LocalShards> store,
                                        std::function<void(Status)> done) {
  auto dropping = store->drop_caches();
  done(co_await std::move(dropping));
}

}  // namespace

store::L2Usage NamespaceShipping::l2_usage() const {
  if (!options_.l2) return {};
  return {options_.l2->statistics().bytes, options_.l2->capacity()};
}

void NamespaceShipping::drop_caches(std::function<void(Status)> done) {
  units_->clear_l2();
  if (!local_) return done({});
  asio::co_spawn(store_executor_, drop_store_caches(local_, std::move(done)), asio::detached);
}

NamespaceShipping::Role NamespaceShipping::role() const {
  if (!record_) return Role::none;
  if (record_->home == self_) return Role::home;
  return record_->mirror == self_ ? Role::mirror : Role::none;
}

cluster::RpcEndpoint* NamespaceShipping::rpc() const {
  return membership_ ? membership_->rpc() : nullptr;
}

void NamespaceShipping::attach(Membership* membership) {
  membership_ = membership;
  // A member must not answer from its own copy before the view says it is the home: the copy
  // may be behind the one that serves.
  if (membership_ != nullptr && membership_->identity() && !record_) router_.set_home(0);
}

void NamespaceShipping::follow(const std::optional<NamespaceRecord>& record,
                               const cluster::GroupView& view) {
  peers_->follow(view);
  placement_->follow(view);
  record_ = record;
  if (!record) {
    spdlog::warn("the group view has no namespace record yet: NFS answers 'retry later'");
    router_.set_home(0);
    return;
  }
  lead(*record, view);
  take_role(role(), *record);

  cluster::NodeId home = view.is_up(record->home) ? record->home : 0;
  // While the record promises an in-step mirror this store is not feeding (the home restarted,
  // and says otherwise only once the record changed), what it acknowledged could be lost if
  // the mirror were promoted: it serves nothing until then.
  if (home == self_ && record->mirror != 0 && record->mirror_in_step &&
      !(mirroring_to_ == record->mirror && mirror_copied_)) {
    home = 0;
  }
  if (home != router_.home()) {
    if (home == 0) {
      spdlog::warn("the namespace's home is down or not ready: NFS answers 'retry later'");
    } else {
      spdlog::info("the namespace's home is node {}{}", home, home == self_ ? " (this node)" : "");
    }
  }
  router_.set_home(home, home == self_ && local_ ? local_->served() : nullptr);
}

void NamespaceShipping::lead(const NamespaceRecord& record, const cluster::GroupView& view) {
  if (membership_ == nullptr || membership_->group() == nullptr ||
      !membership_->group()->is_leader()) {
    return;
  }
  std::optional<NamespaceRecord> next = plan_namespace(record, view);
  if (!next) return;
  if (next->home != record.home) {
    propose(*next, "the home is down: promoting its mirror");
  } else {
    propose(*next, "naming a mirror for the namespace");
  }
}

void NamespaceShipping::propose(const NamespaceRecord& next, const char* why) {
  cluster::GroupClient* client = membership_ ? membership_->client() : nullptr;
  if (proposing_ || client == nullptr) return;
  proposing_ = true;
  spdlog::info("namespace: {} (home {}, mirror {}{})", why, next.home, next.mirror,
               next.mirror_in_step ? ", in step" : "");
  client->propose(namespace_update(next), kProposalDeadline,
                  [this, alive = alive_](Status outcome) {
                    if (!*alive) return;
                    proposing_ = false;
                    if (!outcome.ok()) {
                      spdlog::info("namespace: the change was not made ({}); trying again",
                                   outcome.to_string());
                    }
                    // The view that has the change may have been followed while this was
                    // still under way.
                    follow_again_after(outcome.ok() ? 0s : kRetryAfter);
                  });
}

void NamespaceShipping::take_role(Role role, const NamespaceRecord& record) {
  // A copy opened with another number of shards than the record's (a node's own, before it
  // joined) is not this namespace's.
  if (local_ && (role != Role::home || local_->count() != record.shards)) release_local();
  if (role != Role::mirror && copies_) release_copy();
  if (role == Role::home && !local_) open_when_released(role);
  if (role == Role::mirror && !copies_) open_when_released(role);
  if (role == Role::home && local_) keep_mirror_in_step(record);
}

void NamespaceShipping::keep_mirror_in_step(const NamespaceRecord& record) {
  if (mirror_copy_running_) return;  // when it ends, the record is looked at again
  const cluster::NodeId wanted = record.mirror;
  if (wanted == mirroring_to_) {
    if (wanted != 0 && mirror_copied_ && !record.mirror_in_step) {
      NamespaceRecord next = record;
      next.mirror_in_step = true;
      propose(next, "the mirror holds a whole copy");
    }
    return;
  }
  // A whole copy starts by discarding the mirror's old one: the record must stop promising an
  // in-step mirror first.
  if (record.mirror_in_step) {
    NamespaceRecord next = record;
    next.mirror_in_step = false;
    propose(next, "copying the namespace to its mirror anew");
    return;
  }
  mirror_copy_running_ = true;
  mirroring_to_ = wanted;
  mirror_copied_ = false;
  std::shared_ptr<store::LocalShards> store = local_;
  auto link = [this, wanted](store::ShardId shard) -> std::shared_ptr<store::MirrorTarget> {
    if (wanted == 0) return nullptr;
    return std::make_shared<MirrorLink>(*this, wanted, shard);
  };
  asio::co_spawn(
      store_executor_, store->mirror_to(std::move(link)),
      [this, alive = alive_, store, wanted](std::exception_ptr failure, Status copied) {
        if (failure) copied = error(Errc::internal, "the whole copy threw");
        asio::post(strand_, [this, alive, store, wanted, copied] {
          if (!*alive) return;
          mirror_copy_running_ = false;
          if (local_ != store || mirroring_to_ != wanted) return;
          mirror_copied_ = copied.ok();
          if (!copied.ok()) {
            spdlog::warn("namespace: no whole copy for mirror node {} ({}); trying again",
                         wanted, copied.to_string());
            mirroring_to_ = 0;
          }
          follow_again_after(copied.ok() ? 0s : kRetryAfter);
        });
      });
}

void NamespaceShipping::release_local() {
  std::shared_ptr<store::LocalShards> store = std::move(local_);
  router_.set_home(0);
  mirroring_to_ = 0;
  mirror_copied_ = false;
  releasing_ = store;
  // Closing waits for the store's queued work, which may wait on the strand.
  asio::post(blocking_, [store = std::move(store)]() mutable {
    store->close();
    store.reset();
  });
}

void NamespaceShipping::release_copy() {
  std::shared_ptr<Copies> copies = std::move(copies_);
  releasing_ = copies;
  asio::post(blocking_, [copies = std::move(copies)]() mutable {
    for (auto& copy : *copies) copy->close();
    copies.reset();
  });
}

void NamespaceShipping::open_when_released(Role role) {
  if (!releasing_.expired()) {
    release_timer_.expires_after(kReleasePoll);
    release_timer_.async_wait([this, alive = alive_, role](const boost::system::error_code& ec) {
      if (!ec && *alive) open_when_released(role);
    });
    return;
  }
  if (role != this->role()) return;
  const auto shards = static_cast<store::ShardId>(record_->shards);
  if (Status kept = keep_shard_count(options_.data_dir, shards); !kept.ok()) {
    spdlog::error("namespace: {}", kept.to_string());
    return;
  }
  if (role == Role::home && !local_) {
    auto opened = store::LocalShards::open(options_, shards, locks_);
    if (!opened.ok()) {
      spdlog::error("namespace: cannot open this node's copy to serve it: {}",
                    opened.status().to_string());
      return;
    }
    local_ = std::move(opened).value();
    local_->set_atime_policy(atime_enabled_, atime_grace_period_);
    spdlog::info("namespace: serving this node's copy ({} shards) as the home", shards);
    settle_after_open();
  } else if (role == Role::mirror && !copies_) {
    auto copies = std::make_shared<Copies>();
    for (store::ShardId shard = 0; shard < shards; ++shard) {
      auto opened = store::ShardCopy::open(store::shard_directory(options_.data_dir, shard));
      if (!opened.ok()) {
        spdlog::error("namespace: cannot open this node's copy of shard {} as the mirror: {}",
                      shard, opened.status().to_string());
        return;
      }
      copies->push_back(std::move(opened).value());
    }
    copies_ = std::move(copies);
    spdlog::info("namespace: keeping this node's copy ({} shards) as the mirror", shards);
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

Status NamespaceShipping::drop_mirror(cluster::NodeId mirror) {
  return wait_on_strand<Status>(
      strand_, kProposalDeadline + 1s, [this, mirror](std::function<void(Status)> done) {
        cluster::GroupClient* client = membership_ ? membership_->client() : nullptr;
        if (client == nullptr) {
          done(error(Errc::unavailable, "this node is not in a cluster"));
          return;
        }
        std::optional<NamespaceRecord> record = namespace_of(membership_->group()->view());
        if (!record || record->home != self_) {
          done(error(Errc::unavailable, "this node is no longer the namespace's home"));
          return;
        }
        if (record->mirror != mirror) {
          done(Status{});
          return;
        }
        NamespaceRecord next = *record;
        next.mirror = 0;
        next.mirror_in_step = false;
        client->propose(namespace_update(next), kProposalDeadline, std::move(done));
      });
}

void NamespaceShipping::serve(cluster::RpcEndpoint& rpc) {
  for (std::uint32_t method = 1; method <= store::kLastStoreMethod; ++method) {
    rpc.handle(kStoreMethodBase + method, [this, method](cluster::NodeId,
                                                         std::span<const std::uint8_t> request,
                                                         cluster::RpcEndpoint::Reply reply) {
      // A node that thinks we are the home while we do not is behind: it retries later.
      if (router_.home() != self_ || !local_) {
        reply(error(Errc::unavailable, "node " + std::to_string(self_) +
                                           " is not the namespace's home"));
        return;
      }
      asio::co_spawn(store_executor_,
                     run_shipped(local_->served(), method,
                                 std::vector<std::uint8_t>(request.begin(), request.end())),
                     [strand = strand_, reply](std::exception_ptr failure,
                                               Result<xdr::Buffer> result) mutable {
                       if (failure) result = error(Errc::internal, "a shipped operation threw");
                       // Moved, not copied: a read's reply holds its data.
                       asio::post(strand,
                                  [reply = std::move(reply), result = std::move(result)]() mutable {
                                    reply(std::move(result));
                                  });
                     });
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
      // Only the home the view names may change the copy: a deposed one must not.
      if (role() != Role::mirror || !copies_ || from != record_->home) {
        reply(error(Errc::unavailable, "node " + std::to_string(self_) +
                                           " is not the namespace's mirror for node " +
                                           std::to_string(from)));
        return;
      }
      xdr::Decoder in(request);
      const std::uint32_t shard = in.u32();
      if (!in.ok() || shard >= copies_->size()) {
        reply(error(Errc::invalid_argument, "a mirror message for no shard of the namespace"));
        return;
      }
      const std::span<const std::uint8_t> message = in.rest();
      asio::post(blocking_, [copies = copies_, shard, method, strand = strand_, reply,
                             body = std::vector<std::uint8_t>(message.begin(), message.end())] {
        store::ShardCopy& copy = *(*copies)[shard];
        Result<xdr::Buffer> answer = xdr::Buffer{};
        if (method == static_cast<std::uint32_t>(store::MirrorMethod::read)) {
          answer = copy.read(body);
        } else if (Status applied = copy.apply(method, body); !applied.ok()) {
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
