#include "store/namespace_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <charconv>
#include <filesystem>

#include "common/callback_awaitable.h"
#include "common/files.h"
#include "store/internal/backend_links.h"

namespace tidepool::store {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

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
    if (ec != std::errc() || kept == 0 || kept > kMaxShards) {
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
asio::awaitable<Status> recover_shards(std::shared_ptr<ShardedNamespace> shards) {
  auto recovering = shards->recover();
  co_return co_await std::move(recovering);
}

StoreOptions with_pools(StoreOptions options, std::shared_ptr<PoolPeers> peers) {
  options.peers = std::move(peers);
  return options;
}

}  // namespace

NamespaceService::NamespaceService(asio::any_io_executor strand,
                                   asio::any_io_executor store_executor, StoreOptions options,
                                   cluster::NodeId self, std::uint32_t shards,
                                   std::shared_ptr<NamespaceLocks> locks, PoolsOf pools_of,
                                   LeavingOf leaving_of)
    : strand_(std::move(strand)),
      store_executor_(std::move(store_executor)),
      units_(std::make_unique<UnitStore>(options.data_dir + "/units", options.l2)),
      peers_(std::make_shared<UnitPeers>(*this)),
      unit_client_(std::make_shared<UnitClient>(peers_)),
      options_(with_pools(std::move(options), peers_)),
      self_(self),
      configured_shards_(shards),
      locks_(std::move(locks)),
      pools_of_(std::move(pools_of)),
      leaving_of_(std::move(leaving_of)),
      router_(self,
              [this](cluster::NodeId home) { return std::make_shared<Channel>(*this, home, 0); }),
      routes_(std::make_shared<Routes>()),
      retry_timer_(strand_),
      settle_timer_(strand_),
      atime_enabled_(options_.atime_enabled),
      atime_grace_period_(options_.atime_grace_period) {}

NamespaceService::~NamespaceService() { close(); }

Result<std::shared_ptr<LocalStore>> NamespaceService::open_store(ShardId shard) const {
  StoreOptions options = options_;
  options.data_dir = shard_directory(options_.data_dir, shard);
  options.shard = shard;
  TP_ASSIGN_OR_RETURN(std::shared_ptr<LocalStore> store, Store::open(options));
  store->set_atime_policy(atime_enabled_, atime_grace_period_);
  return store;
}

Status NamespaceService::open_local() {
  TP_ASSIGN_OR_RETURN(const std::uint32_t count,
                      shard_count_of(options_.data_dir, configured_shards_));
  reshape(static_cast<ShardId>(count));
  for (ShardId shard = 0; shard < shards_.size(); ++shard) {
    TP_ASSIGN_OR_RETURN(shards_[shard].store, open_store(shard));
  }
  route(nullptr, nullptr);  // which settles what the shards hold
  return {};
}

void NamespaceService::reshape(ShardId count) {
  if (shards_.size() == count) return;
  for (ShardId shard = 0; shard < shards_.size(); ++shard) {
    if (shards_[shard].store) release_store(shard);
    if (shards_[shard].copy) release_copy(shard);
  }
  std::vector<Shard> reshaped(count);
  // A shard's directory opens again only once its last store or copy is closed.
  for (ShardId shard = 0; shard < std::min<std::size_t>(count, shards_.size()); ++shard) {
    reshaped[shard].releasing = shards_[shard].releasing;
  }
  shards_ = std::move(reshaped);
  routes_->reset(count);
  namespace_.reset();
  if (count > 1) {
    namespace_ = std::make_shared<ShardedNamespace>(
        count, [routes = routes_](ShardId shard) { return routes->get(shard); }, locks_,
        options_.time_source());
  }
}

// What a crash left half done across shards; what the shards prepared stays held (refused to
// other changes) until then. A shard whose home cannot be reached leaves it for a later try.
void NamespaceService::settle() {
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
          settle_backoff_ = std::clamp(settle_backoff_ * 2, internal::kSettleRetryFirst,
                                       internal::kSettleRetryMost);
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

void NamespaceService::close_stores(std::function<void()> done) {
  std::vector<std::shared_ptr<LocalStore>> stores;
  for (const Shard& shard : shards_) {
    if (shard.store) stores.push_back(shard.store);
  }
  asio::post(blocking_, [this, stores = std::move(stores), done = std::move(done)]() mutable {
    for (const auto& store : stores) store->close();
    asio::post(strand_, std::move(done));
  });
}

void NamespaceService::close() {
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

void NamespaceService::set_atime_policy(bool enabled, std::chrono::seconds grace_period) {
  atime_enabled_ = enabled;
  atime_grace_period_ = grace_period;
  for (Shard& shard : shards_) {
    if (shard.store) shard.store->set_atime_policy(enabled, grace_period);
  }
}

namespace {

asio::awaitable<void> drop_store_caches(std::vector<std::shared_ptr<LocalStore>> stores,
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

void NamespaceService::drop_caches(std::function<void(Status)> done) {
  options_.l2->clear();
  std::vector<std::shared_ptr<LocalStore>> stores;
  for (const Shard& shard : shards_) {
    if (shard.store) stores.push_back(shard.store);
  }
  asio::co_spawn(store_executor_, drop_store_caches(std::move(stores), std::move(done)),
                 asio::detached);
}

NamespaceService::Role NamespaceService::role(ShardId shard) const {
  if (!record_ || shard >= record_->shards()) return Role::none;
  const ShardPlace& place = record_->places[shard];
  if (place.home == self_) return Role::home;
  return place.mirror == self_ ? Role::mirror : Role::none;
}

cluster::RpcEndpoint* NamespaceService::rpc() const { return cluster_ ? cluster_->rpc() : nullptr; }

std::uint64_t NamespaceService::fences() const {
  cluster::GroupMember* group = cluster_ != nullptr ? cluster_->group() : nullptr;
  return group != nullptr ? group->lease()->fences() : 0;
}

boost::asio::awaitable<Result<xdr::Buffer>> NamespaceService::call_peer(
    cluster::NodeId node, std::uint32_t method, std::shared_ptr<const xdr::Buffer> message,
    std::chrono::milliseconds deadline) {
  auto resends = std::make_shared<internal::Resends>();
  for (int attempt = 0;; ++attempt) {
    auto sending = await_callback<Result<xdr::Buffer>>([this, node, method, message, deadline,
                                                        resends](auto done) {
      boost::asio::post(strand_, [this, node, method, message, deadline, resends,
                                  done = std::move(done)]() mutable {
        cluster::RpcEndpoint* endpoint = rpc();
        if (endpoint == nullptr) {
          done(Result<xdr::Buffer>(error(Errc::unavailable, "this node is not in a cluster")));
          return;
        }
        if (Status may = resends->may_send(fences()); !may.ok()) {
          done(Result<xdr::Buffer>(may));
          return;
        }
        endpoint->call(node, method, *message, deadline, std::move(done));
      });
    });
    Result<xdr::Buffer> sent = co_await std::move(sending);
    if (sent.code() != Errc::behind || attempt == internal::kBehindRetries) co_return sent;
    boost::asio::steady_timer pause(co_await boost::asio::this_coro::executor,
                                    internal::kBehindPause);
    auto paused = pause.async_wait(boost::asio::use_awaitable);
    co_await std::move(paused);
  }
}

void NamespaceService::attach(ClusterAccess* cluster) {
  cluster_ = cluster;
  // A member must not answer from its own copy before the view says it is the home: the copy
  // may be behind the one that serves.
  if (cluster_ != nullptr && cluster_->is_member() && !record_) route(nullptr, nullptr);
}

void NamespaceService::follow(const std::optional<NamespaceRecord>& record,
                              const cluster::GroupView& view) {
  peers_->follow(view, pools_of_(view));
  record_ = record;
  if (!record) {
    spdlog::warn("the group view has no namespace record yet: NFS answers 'retry later'");
    route(nullptr, nullptr);
    return;
  }
  note_shard_copies(*record, view);
  reshape(static_cast<ShardId>(record->shards()));
  lead(*record, view);
  for (ShardId shard = 0; shard < shards_.size(); ++shard) {
    take_role(shard, role(shard), *record);
  }
  route(&*record, &view);
  hand_over(*record, view);
  note_unit_copies(view);
}

void NamespaceService::note_unit_copies(const cluster::GroupView& view) {
  // Copies are lost only with an owner (down, or removed) or gained with a shard homed here:
  // the scan of every placed file runs then, not on each of the view's many changes.
  std::set<cluster::NodeId> up;
  for (const cluster::NodeInfo& node : view.nodes) {
    if (node.up) up.insert(node.id);
  }
  std::set<ShardId> homed;
  for (ShardId shard = 0; shard < shards_.size(); ++shard) {
    if (shards_[shard].store && role(shard) == Role::home) homed.insert(shard);
  }
  if (up == noted_up_ && homed == noted_homes_) return;
  noted_up_ = std::move(up);
  noted_homes_ = std::move(homed);
  for (const ShardId shard : noted_homes_) shards_[shard].store->note_protection();
}

void NamespaceService::note_shard_copies(const NamespaceRecord& record,
                                         const cluster::GroupView& view) {
  std::uint64_t fewest = IntegrityCounters::kNotSeen;
  for (const ShardPlace& place : record.places) {
    const std::uint64_t copies =
        (view.is_up(place.home) ? 1 : 0) +
        (place.mirror != 0 && place.mirror_in_step && view.is_up(place.mirror) ? 1 : 0);
    fewest = std::min(fewest, copies);
  }
  // A new namespace has one copy until its first mirror's is taken: that is not a loss.
  every_shard_protected_ = every_shard_protected_ || fewest >= 2;
  if (every_shard_protected_)
    IntegrityCounters::lower(options_.integrity->shard_copies_low_water, fewest);
}

// Once a shard asked to be handed over is served here no more, its in-step mirror takes it.
void NamespaceService::hand_over(const NamespaceRecord& record, const cluster::GroupView& view) {
  for (ShardId shard = 0; shard < shards_.size(); ++shard) {
    const ShardPlace& place = record.places[shard];
    if (place.home != self_ || !place.handing_over || !place.mirror_in_step ||
        !view.is_up(place.mirror) || !shards_[shard].store || shards_[shard].routed_to != 0) {
      continue;
    }
    propose(
        handed_over(record, shard, view, leaving_of_(view)),
        "handing shard " + std::to_string(shard) + " over to node " + std::to_string(place.mirror));
    return;
  }
}

void NamespaceService::route(const NamespaceRecord* record, const cluster::GroupView* view) {
  // Outside any cluster, this node serves every shard it opened; a member, only what the view
  // says it is the home of.
  const bool member = cluster_ != nullptr && cluster_->is_member();
  bool moved = false;
  for (ShardId shard = 0; shard < shards_.size(); ++shard) {
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
      routes_->set(shard, ShardAccess{state.store, std::shared_ptr<ShardParticipant>(
                                                       state.store, &state.store->participant())});
    } else {
      auto channel = std::make_shared<Channel>(*this, home, shard);
      routes_->set(shard, ShardAccess{std::shared_ptr<Store>(make_remote_store(channel)),
                                      make_remote_participant(channel), false});
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

void NamespaceService::lead(const NamespaceRecord& record, const cluster::GroupView& view) {
  if (cluster_ == nullptr || cluster_->group() == nullptr || !cluster_->group()->is_leader()) {
    return;
  }
  std::optional<NamespaceRecord> next = plan_namespace(record, view, leaving_of_(view));
  if (!next) return;
  std::string why;
  for (ShardId shard = 0; shard < record.shards(); ++shard) {
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

void NamespaceService::propose(const NamespaceRecord& next, const std::string& why) {
  cluster::GroupClient* client = cluster_ ? cluster_->client() : nullptr;
  if (proposing_ || client == nullptr) return;
  proposing_ = true;
  spdlog::info("namespace: {}", why);
  client->propose(namespace_update(next), internal::kProposalDeadline,
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
                                           ? internal::kRaceRetry
                                           : std::chrono::milliseconds(internal::kRetryAfter));
                  });
}

void NamespaceService::take_role(ShardId shard, Role role, const NamespaceRecord& record) {
  Shard& state = shards_[shard];
  if (state.store && role != Role::home) release_store(shard);
  if (state.copy && role != Role::mirror) release_copy(shard);
  if (role == Role::home && !state.store) open_when_released(shard, role);
  if (role == Role::mirror && !state.copy) open_when_released(shard, role);
  if (role == Role::home && state.store) keep_mirror_in_step(shard, record);
}

void NamespaceService::keep_mirror_in_step(ShardId shard, const NamespaceRecord& record) {
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
  std::shared_ptr<LocalStore> store = state.store;
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
          follow_again_after(copied.ok() ? 0s : internal::kRetryAfter);
        });
      });
}

void NamespaceService::release_store(ShardId shard) {
  Shard& state = shards_[shard];
  std::shared_ptr<LocalStore> store = std::move(state.store);
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

void NamespaceService::release_copy(ShardId shard) {
  Shard& state = shards_[shard];
  std::shared_ptr<ShardCopy> copy = std::move(state.copy);
  state.releasing = copy;
  asio::post(blocking_, [copy = std::move(copy)]() mutable {
    copy->close();
    copy.reset();
  });
}

void NamespaceService::open_when_released(ShardId shard, Role role) {
  Shard& state = shards_[shard];
  if (!state.releasing.expired()) {
    follow_again_after(internal::kReleasePoll);
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
    follow_again_after(internal::kRetryAfter);
  };
  if (role == Role::home) {
    auto opened = open_store(shard);
    if (!opened.ok()) return not_opened(opened.status(), "to serve it");
    state.store = std::move(opened).value();
    spdlog::info("namespace: serving this node's copy of shard {} as its home", shard);
  } else {
    auto opened = ShardCopy::open(shard_directory(options_.data_dir, shard));
    if (!opened.ok()) return not_opened(opened.status(), "as its mirror");
    state.copy = std::move(opened).value();
    spdlog::info("namespace: keeping this node's copy of shard {} as its mirror", shard);
  }
  follow_again_after(0s);
}

void NamespaceService::follow_again_after(std::chrono::milliseconds delay) {
  retry_timer_.expires_after(delay);
  retry_timer_.async_wait([this, alive = alive_](const boost::system::error_code& ec) {
    if (ec || !*alive || cluster_ == nullptr || cluster_->group() == nullptr) return;
    const cluster::GroupView& view = cluster_->group()->view();
    follow(namespace_of(view), view);
  });
}

bool NamespaceService::data_is_local(InodeId inode) const {
  const ShardId shard = shard_of(inode);
  if (!routes_->is_local(shard)) return false;
  const std::shared_ptr<LocalStore> store = routes_->local_store(shard);
  return store && !store->data_in_node_pool(inode);
}

std::shared_ptr<Store> NamespaceService::served() const {
  if (namespace_) return namespace_;
  if (shards_.empty()) return nullptr;
  return shards_[0].store;
}

Result<xdr::Buffer> NamespaceService::send_to_mirror(cluster::NodeId mirror, MirrorMethod method,
                                                     std::shared_ptr<const xdr::Buffer> message,
                                                     std::shared_ptr<internal::Resends> resends) {
  return internal::wait_on_strand<Result<xdr::Buffer>>(
      strand_, internal::kMirrorCallDeadline + 1s,
      [this, mirror, method, message = std::move(message),
       resends = std::move(resends)](std::function<void(Result<xdr::Buffer>)> done) {
        cluster::RpcEndpoint* rpc = this->rpc();
        if (rpc == nullptr) {
          done(error(Errc::unavailable, "this node is not in a cluster"));
          return;
        }
        if (Status may = resends->may_send(fences()); !may.ok()) {
          done(may);
          return;
        }
        rpc->call(mirror, internal::kMirrorMethodBase + static_cast<std::uint32_t>(method),
                  *message, internal::kMirrorCallDeadline, std::move(done));
      });
}

Status NamespaceService::drop_mirror(ShardId shard, cluster::NodeId mirror) {
  // The record holds every shard's place: a change to another shard's since this node read it
  // fails the update, and the next try reads the record again once the view has it.
  Status dropped;
  for (int attempt = 0; attempt < internal::kDropAttempts; ++attempt) {
    if (attempt > 0) options_.time_source().sleep_for(internal::kDropRetryPause);
    dropped = try_drop_mirror(shard, mirror);
    if (dropped.code() != Errc::precondition_failed) break;
  }
  return dropped;
}

Status NamespaceService::try_drop_mirror(ShardId shard, cluster::NodeId mirror) {
  return internal::wait_on_strand<Status>(
      strand_, internal::kProposalDeadline + 1s,
      [this, shard, mirror](std::function<void(Status)> done) {
        cluster::GroupClient* client = cluster_ ? cluster_->client() : nullptr;
        if (client == nullptr) {
          done(error(Errc::unavailable, "this node is not in a cluster"));
          return;
        }
        std::optional<NamespaceRecord> record = namespace_of(cluster_->group()->view());
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
        client->propose(namespace_update(next), internal::kProposalDeadline,
                        [alive = alive_, forget_mirror, done = std::move(done)](Status outcome) {
                          if (outcome.ok() && *alive) forget_mirror();
                          done(outcome);
                        });
      });
}

}  // namespace tidepool::store
