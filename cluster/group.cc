#include "cluster/group.h"

#include "cluster/internal/raft_c.h"
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "cluster/internal/config_db.h"
#include "cluster/internal/lease_keeper.h"
#include "cluster/internal/raft_io.h"
#include "cluster/internal/raft_log.h"
#include "common/fail_points.h"

namespace tidepool::cluster {

const NodeInfo* GroupView::node(NodeId id) const {
  auto it = std::lower_bound(nodes.begin(), nodes.end(), id,
                             [](const NodeInfo& n, NodeId wanted) { return n.id < wanted; });
  return it != nodes.end() && it->id == id ? &*it : nullptr;
}

bool GroupView::is_up(NodeId id) const {
  const NodeInfo* n = node(id);
  return n != nullptr && n->up;
}

std::vector<NodeId> GroupView::up_nodes() const {
  std::vector<NodeId> ids;
  for (const auto& n : nodes) {
    if (n.up) ids.push_back(n.id);
  }
  return ids;
}

std::vector<NodeId> GroupView::up_nodes_in_pool(std::string_view pool) const {
  std::vector<NodeId> ids;
  for (const auto& n : nodes) {
    if (n.up && n.pool == pool) ids.push_back(n.id);
  }
  return ids;
}

const ConfigObject* GroupView::object(std::string_view kind, std::string_view name) const {
  for (const auto& o : objects) {
    if (o.kind == kind && o.name == name) return &o;
  }
  return nullptr;
}

std::vector<ConfigObject> GroupView::objects_of(std::string_view kind) const {
  std::vector<ConfigObject> found;
  for (const auto& o : objects) {
    if (o.kind == kind) found.push_back(o);
  }
  return found;
}

Change Change::add_node(NodeInfo node) {
  Change c;
  c.kind = Kind::add_node;
  c.node = std::move(node);
  c.node.up = true;
  return c;
}

Change Change::remove_node(NodeId id) {
  Change c;
  c.kind = Kind::remove_node;
  c.node.id = id;
  return c;
}

Change Change::set_node_state(NodeId id, bool up) {
  Change c;
  c.kind = Kind::set_node_state;
  c.node.id = id;
  c.node.up = up;
  return c;
}

Change Change::create_object(std::string kind, std::string name, std::string body) {
  Change c;
  c.kind = Kind::create_object;
  c.object = ConfigObject{std::move(kind), std::move(name), std::move(body), 0};
  return c;
}

Change Change::update_object(std::string kind, std::string name, std::string body,
                             Epoch if_changed_at) {
  Change c = create_object(std::move(kind), std::move(name), std::move(body));
  c.kind = Kind::update_object;
  c.object.changed = if_changed_at;
  return c;
}

Change Change::delete_object(std::string kind, std::string name) {
  Change c = create_object(std::move(kind), std::move(name), {});
  c.kind = Kind::delete_object;
  return c;
}

namespace {

Status from_raft(int rc, std::string_view what) {
  switch (rc) {
    case 0:
      return {};
    case RAFT_NOTLEADER:
      return error(Errc::unavailable, std::string(what) + ": this node does not lead the group");
    case RAFT_LEADERSHIPLOST:
      return error(Errc::unavailable,
                   std::string(what) + ": leadership was lost; the change may or may not apply");
    case RAFT_SHUTDOWN:
    case RAFT_CANCELED:
      return error(Errc::unavailable, std::string(what) + ": the node is stopping");
    case RAFT_CANTCHANGE:
    case RAFT_BUSY:
      return error(Errc::unavailable,
                   std::string(what) + ": another membership change is in progress");
    case RAFT_NOCONNECTION:
      // A promotion Raft gave up: the new member did not catch up with the log in time.
      return error(Errc::timed_out,
                   std::string(what) + ": the node did not catch up with the group in time");
    case RAFT_NOMEM:
      return error(Errc::no_space, std::string(what) + ": out of memory");
    case RAFT_IOERR:
    case RAFT_NOSPACE:
      return error(Errc::io_error, std::string(what) + ": " + raft_strerror(rc));
    default:
      return error(Errc::internal, std::string(what) + ": " + raft_strerror(rc));
  }
}

// How many recent outcomes the leader keeps for the proposers' callbacks, which Raft runs
// right after the state machine applied their entry.
constexpr std::size_t kOutcomesKept = 256;
// Raft gives a promotion to voter up after a few election timeouts without the new member
// catching up (a node still starting, or out of reach a moment); add_node tries this often, so
// that it ends within the admin API's deadline for adding a node.
constexpr int kPromotionAttempts = 3;
// How often a member that handed on the lead looks whether the election it caused is decided.
constexpr std::chrono::milliseconds kLeaderPoll{10};

// The most one step of the leader's clock counts toward a node's silence (CountedClock): half
// of what `down_after` leaves beyond a lease and the clocks' drift, so that even two jumps the
// clock made without time passing cannot have a node recorded down while its lease runs.
std::chrono::milliseconds silence_step(const GroupOptions& options) {
  const double lease = static_cast<double>(options.lease.count()) * (1 + internal::kMaxClockDrift);
  const double left = static_cast<double>(options.down_after.count()) - lease;
  return std::chrono::milliseconds(left > 0 ? static_cast<std::int64_t>(left / 2) : 0);
}

}  // namespace

class GroupMember::Impl final : public internal::LeaseKeeper::Group {
 public:
  Impl(EventLoop& loop, Transport& transport, GroupOptions options,
       std::unique_ptr<internal::RaftLog> log, std::unique_ptr<internal::ConfigDb> db)
      : loop_(loop),
        options_(std::move(options)),
        log_(std::move(log)),
        db_(std::move(db)),
        io_(loop, transport, *log_),
        silence_clock_(loop, silence_step(options_)),
        leases_(loop, transport, options_.id,
                internal::LeaseTiming{options_.lease, options_.lease_renew}, silence_clock_,
                *this) {
    fsm_.version = 1;
    fsm_.data = this;
    fsm_.apply = &Impl::fsm_apply;
    fsm_.snapshot = &Impl::fsm_snapshot;
    fsm_.restore = &Impl::fsm_restore;
  }

  Status init() {
    int rc = raft_init(&raft_, io_.io(), &fsm_, options_.id, options_.address.c_str());
    if (rc != 0) return from_raft(rc, "raft init");
    initialised_ = true;
    raft_.data = this;
    raft_set_heartbeat_timeout(&raft_, static_cast<unsigned>(options_.heartbeat.count()));
    raft_set_election_timeout(&raft_, static_cast<unsigned>(options_.election_timeout.count()));
    raft_set_snapshot_threshold(&raft_, options_.snapshot_threshold);
    raft_set_snapshot_trailing(&raft_, options_.snapshot_trailing);
    // libraft waits this long for a lost snapshot install before it tries again; its default
    // (30 s) would leave a restarted node serving an old view that long.
    raft_set_install_snapshot_timeout(
        &raft_, static_cast<unsigned>(options_.install_snapshot_timeout.count()));
    raft_set_pre_vote(&raft_, true);
    return {};
  }

  ~Impl() {
    if (watch_timer_) loop_.cancel(*watch_timer_);
    closing_ = true;
    alive_.reset();
    // Finishes inside the call: our I/O completes every pending request at once, and pending
    // proposals fail with `unavailable`.
    if (initialised_) raft_close(&raft_, [](raft*) {});
  }

  Status bootstrap(const NodeInfo& self) {
    raft_configuration conf;
    raft_configuration_init(&conf);
    int rc = raft_configuration_add(&conf, options_.id, options_.address.c_str(), RAFT_VOTER);
    if (rc == 0) rc = raft_bootstrap(&raft_, &conf);
    raft_configuration_close(&conf);
    if (rc == RAFT_CANTBOOTSTRAP) {
      return error(Errc::already_exists, "this node already belongs to a cluster");
    }
    if (rc != 0) return from_raft(rc, "bootstrap");
    self_ = self;
    return {};
  }

  Status start() {
    int rc = raft_start(&raft_);
    if (rc != 0) return from_raft(rc, std::string("start: ") + raft_errmsg(&raft_));
    schedule_watch();
    leases_.start();
    return {};
  }

  void propose(const Change& change, Done done) {
    if (change.kind != Change::Kind::set_node_state || change.node.up) {
      return propose_now(change, std::move(done));
    }
    once_lease_gone(change.node.id, std::move(done),
                    [this, change](Done then) { propose_now(change, std::move(then)); });
  }

  // Runs `then` once `node` holds no lease: at once when the view has it down (it got none
  // since), else `down_after` after it stops getting them — as if silent since now. Anything
  // that hands on what a node holds goes through here.
  void once_lease_gone(NodeId node, Done done, std::function<void(Done)> then) {
    // Down, with no change recording it up under way: it got no lease since it went down.
    if (!is_leader() || (!view().is_up(node) && !in_flight_.contains(node))) {
      return then(std::move(done));
    }
    const std::uint64_t revocation = next_revocation_++;
    revoked_[node].insert(revocation);
    spdlog::info("group view: node {} gets no more leases; going on in {} ms", node,
                 options_.down_after.count());
    loop_.schedule(options_.down_after, [this, alive = std::weak_ptr<bool>(alive_), node,
                                         revocation, term = raft_.current_term,
                                         done = std::move(done),
                                         then = std::move(then)]() mutable {
      if (alive.expired()) return;
      // A leader that lost the lead meanwhile forgot what it revoked: it may have granted since.
      if (!is_leader() || raft_.current_term != term) {
        end_revocation(node, revocation);
        return done(not_leader_status());
      }
      then([this, node, revocation, done = std::move(done)](Status s) {
        end_revocation(node, revocation);
        done(std::move(s));
      });
    });
  }

  // Ends this revocation only: another, of a later term, may be under way for the node.
  void end_revocation(NodeId node, std::uint64_t revocation) {
    auto it = revoked_.find(node);
    if (it == revoked_.end()) return;
    it->second.erase(revocation);
    if (it->second.empty()) revoked_.erase(it);
  }

  void propose_now(const Change& change, Done done) {
    xdr::Buffer encoded;
    xdr::Encoder encoder(encoded);
    internal::encode_change(change, encoder);
    if (raft_state(&raft_) != RAFT_LEADER) {
      report_later(std::move(done), not_leader_status());
      return;
    }
    auto* proposal = new Proposal{{}, this, std::move(done)};
    proposal->request.data = proposal;
    raft_buffer buffer{raft_malloc(encoded.size()), encoded.size()};
    if (buffer.base == nullptr) {
      report_later(std::move(proposal->done), error(Errc::no_space, "out of memory"));
      delete proposal;
      return;
    }
    std::memcpy(buffer.base, encoded.data(), encoded.size());
    int rc = raft_apply(&raft_, &proposal->request, &buffer, 1, &Impl::applied_cb);
    if (rc != 0) {
      raft_free(buffer.base);
      report_later(std::move(proposal->done), from_raft(rc, "propose"));
      delete proposal;
    }
  }

  void add_node(const NodeInfo& node, Done done) {
    propose(Change::add_node(node), [this, node, done = std::move(done)](Status s) mutable {
      if (!s.ok()) return done(std::move(s));
      change_membership(MembershipStep::add, node.id, node.backend_address,
                        [this, id = node.id, done = std::move(done)](Status s) mutable {
                          if (!s.ok()) return done(std::move(s));
                          promote(id, kPromotionAttempts, std::move(done));
                        });
    });
  }

  void remove_node(NodeId node, Done done) {
    if (node == options_.id) {
      report_later(std::move(done), error(Errc::invalid_argument,
                                       "a node cannot remove itself; ask another member"));
      return;
    }
    once_lease_gone(node, std::move(done), [this, node](Done done) {
      change_membership(MembershipStep::remove, node, {},
                        [this, node, done = std::move(done)](Status s) mutable {
                          if (!s.ok()) return done(std::move(s));
                          propose(Change::remove_node(node), [done = std::move(done)](Status s) {
                            // Already gone from the view: the repeat of a removal succeeds.
                            done(s.code() == Errc::not_found ? Status{} : std::move(s));
                          });
                        });
    });
  }

  void transfer_leadership(NodeId to, Done done) {
    if (!is_leader()) return report_later(std::move(done), not_leader_status());
    if (to == options_.id) return report_later(std::move(done), Status{});
    auto* transfer = new Transfer{{}, this, std::move(done)};
    transfer->request.data = transfer;
    if (int rc = raft_transfer(&raft_, &transfer->request, to, &Impl::transfer_cb); rc != 0) {
      report_later(std::move(transfer->done),
                   rc == RAFT_BADID || rc == RAFT_NOTFOUND
                       ? error(Errc::invalid_argument,
                               to != 0 ? "node " + std::to_string(to) +
                                             " is not a voting member that could lead"
                                       : std::string("no voting member could lead instead"))
                       : from_raft(rc, "leadership transfer"));
      delete transfer;
    }
  }

  void on_applied(std::function<void(const AppliedChange&)> observer) {
    observers_.push_back(std::move(observer));
  }

  NodeId id() const { return options_.id; }
  bool is_leader() const override { return raft_state(const_cast<raft*>(&raft_)) == RAFT_LEADER; }
  NodeId leader() const override {
    raft_id id = 0;
    const char* address = nullptr;
    raft_leader(const_cast<raft*>(&raft_), &id, &address);
    return id;
  }
  Epoch epoch() const { return db_->epoch(); }
  std::uint64_t applied() const override { return db_->applied(); }
  std::uint64_t digest() const { return db_->digest(); }
  const GroupView& view() { return db_->view(); }
  std::shared_ptr<const Lease> lease() const { return leases_.lease(); }

  // internal::LeaseKeeper::Group
  std::uint64_t term() const override { return raft_.current_term; }
  std::vector<NodeId> voters() const override {
    std::vector<NodeId> ids;
    for (unsigned i = 0; i < raft_.configuration.n; ++i) {
      if (raft_.configuration.servers[i].role == RAFT_VOTER) {
        ids.push_back(raft_.configuration.servers[i].id);
      }
    }
    return ids;
  }
  std::optional<std::uint64_t> grantable(NodeId node) override {
    // Until it applied everything earlier leaders committed, the leader's view may still miss
    // a change that took the node.
    if (caught_up_term_ != raft_.current_term) return std::nullopt;
    if (!view().is_up(node) || revoked_.contains(node) || in_flight_.contains(node)) {
      return std::nullopt;
    }
    auto up = recorded_up_at_.find(node);
    return up != recorded_up_at_.end() ? up->second : applied();
  }

 private:
  struct Proposal {
    struct raft_apply request;
    Impl* member;
    Done done;
  };
  struct Barrier {
    struct raft_barrier request;
    Impl* member;
    std::uint64_t term;
  };
  struct Transfer {
    struct raft_transfer request;
    Impl* member;
    Done done;
  };
  enum class MembershipStep { add, assign_voter, remove };
  struct MembershipChange {
    raft_change request;
    Impl* member;
    MembershipStep step;
    Done done;
  };

  Status not_leader_status() const {
    NodeId known = leader();
    return error(Errc::unavailable,
                 known != 0 ? "not the leader; node " + std::to_string(known) + " leads the group"
                            : "not the leader, and no leader is known (no majority?)");
  }

  // Reports a result from outside Raft's own call stack: Raft's callbacks run inside its
  // message handling, where a continuation that calls back into Raft (add_node's next step)
  // would change state Raft is still using. While closing, Raft only reports failures, which
  // are reported at once, before the member is gone.
  void finish(Done done, Status status) {
    if (closing_) {
      done(std::move(status));
      return;
    }
    report_later(std::move(done), std::move(status));
  }

  // A result the caller sees on a later turn of the loop. If the member is destroyed first,
  // the continuation learns it is stopping instead of touching it.
  void report_later(Done done, Status status) {
    loop_.post([alive = std::weak_ptr<bool>(alive_), done = std::move(done),
                status = std::move(status)]() mutable {
      if (alive.expired()) status = error(Errc::unavailable, "the node is stopping");
      done(std::move(status));
    });
  }

  static void applied_cb(struct raft_apply* request, int status, void* result) {
    auto* proposal = static_cast<Proposal*>(request->data);
    Impl& self = *proposal->member;
    Status outcome = from_raft(status, "propose");
    if (status == 0) {
      auto position = reinterpret_cast<std::uintptr_t>(result);
      auto it = self.outcomes_.find(position);
      outcome = it != self.outcomes_.end() ? it->second : Status{};
    }
    Done done = std::move(proposal->done);
    delete proposal;
    self.finish(std::move(done), std::move(outcome));
  }

  // A new leader learns that it applied every change of earlier terms once an entry of its own
  // term is applied.
  void catch_up_as_leader() {
    if (barrier_pending_ || caught_up_term_ == raft_.current_term) return;
    auto* barrier = new Barrier{{}, this, raft_.current_term};
    barrier->request.data = barrier;
    if (raft_barrier(&raft_, &barrier->request, &Impl::barrier_cb) != 0) {
      delete barrier;
      return;
    }
    barrier_pending_ = true;
  }

  static void barrier_cb(struct raft_barrier* request, int status) {
    auto* barrier = static_cast<Barrier*>(request->data);
    Impl& self = *barrier->member;
    self.barrier_pending_ = false;
    if (status == 0) self.caught_up_term_ = barrier->term;
    delete barrier;
  }

  // Makes the added node a voter; a promotion Raft gave up is tried again, `attempts` in all.
  void promote(NodeId node, int attempts, Done done) {
    change_membership(MembershipStep::assign_voter, node, {},
                      [this, node, attempts, done = std::move(done)](Status s) mutable {
                        // While closing, Raft's callbacks run with the member going away.
                        if (s.code() != Errc::timed_out || attempts <= 1 || closing_) {
                          return done(std::move(s));
                        }
                        spdlog::warn(
                            "group: node {} did not catch up in time to become a voter; "
                            "trying again",
                            node);
                        promote(node, attempts - 1, std::move(done));
                      });
  }

  void change_membership(MembershipStep step, NodeId node, const std::string& address,
                         Done done) {
    if (raft_state(&raft_) != RAFT_LEADER) {
      report_later(std::move(done), not_leader_status());
      return;
    }
    auto* change = new MembershipChange{{}, this, step, std::move(done)};
    change->request.data = change;
    int rc = 0;
    switch (step) {
      case MembershipStep::add:
        rc = raft_add(&raft_, &change->request, node, address.c_str(), &Impl::membership_cb);
        break;
      case MembershipStep::assign_voter:
        rc = raft_assign(&raft_, &change->request, node, RAFT_VOTER, &Impl::membership_cb);
        break;
      case MembershipStep::remove:
        rc = raft_remove(&raft_, &change->request, node, &Impl::membership_cb);
        break;
    }
    // Repeats of a step that already happened succeed, so add and remove can be retried.
    bool already = (step == MembershipStep::add && rc == RAFT_DUPLICATEID) ||
                   (step == MembershipStep::assign_voter && rc == RAFT_BADROLE) ||
                   (step == MembershipStep::remove && rc == RAFT_BADID);
    if (rc != 0) {
      report_later(std::move(change->done),
                already ? Status{} : from_raft(rc, "membership change"));
      delete change;
    }
  }

  // Raft calls back once this node stopped leading (the target asked for votes in a later
  // term), when it gives up (an election timeout without that), or when it closes.
  static void transfer_cb(struct raft_transfer* request) {
    auto* transfer = static_cast<Transfer*>(request->data);
    Impl& self = *transfer->member;
    const NodeId target = request->id;
    Done done = std::move(transfer->done);
    delete transfer;
    if (self.closing_) return done(error(Errc::unavailable, "the node is stopping"));
    self.await_leader(
        target,
        self.loop_.now_ms() + static_cast<std::uint64_t>(self.options_.election_timeout.count()),
        std::move(done));
  }

  // Whether `target` won the election it started, once one is known to lead.
  void await_leader(NodeId target, std::uint64_t give_up_at, Done done) {
    loop_.schedule(kLeaderPoll, [this, alive = std::weak_ptr<bool>(alive_), target, give_up_at,
                                 done = std::move(done)]() mutable {
      if (alive.expired()) return done(error(Errc::unavailable, "the node is stopping"));
      const NodeId now = leader();
      if (now == 0 && loop_.now_ms() < give_up_at) {
        return await_leader(target, give_up_at, std::move(done));
      }
      if (now == target) return done(Status{});
      done(error(Errc::timed_out, "leadership transfer: node " + std::to_string(target) +
                                      " did not take the lead in time"));
    });
  }

  static void membership_cb(raft_change* request, int status) {
    auto* change = static_cast<MembershipChange*>(request->data);
    Impl& self = *change->member;
    Done done = std::move(change->done);
    delete change;
    self.finish(std::move(done), from_raft(status, "membership change"));
  }

  static int fsm_apply(raft_fsm* fsm, const raft_buffer* buffer, void** result) {
    Impl& self = *static_cast<Impl*>(fsm->data);
    std::span<const std::uint8_t> bytes(static_cast<const std::uint8_t*>(buffer->base),
                                        buffer->len);
    Change change;
    Status outcome;
    if (Status s = self.db_->apply(bytes, change, outcome); !s.ok()) {
      // A node whose own database fails cannot follow the log any more; stopping is the
      // only way to keep it from diverging. The others carry on without it.
      spdlog::critical("group view: cannot apply change {}: {}; stopping",
                       self.db_->applied() + 1, s.to_string());
      std::abort();
    }
    std::uint64_t position = self.db_->applied();
    self.outcomes_[position] = outcome;
    if (self.outcomes_.size() > kOutcomesKept) self.outcomes_.erase(self.outcomes_.begin());
    *result = reinterpret_cast<void*>(static_cast<std::uintptr_t>(position));
    AppliedChange applied{change, outcome, self.db_->epoch(), position, self.db_->digest()};
    self.leases_follow(applied);
    for (const auto& observer : self.observers_) observer(applied);
    return 0;
  }

  static int fsm_snapshot(raft_fsm* fsm, raft_buffer* bufs[], unsigned* n_bufs) {
    Impl& self = *static_cast<Impl*>(fsm->data);
    xdr::Buffer state = self.db_->snapshot();
    auto* buffers = static_cast<raft_buffer*>(raft_malloc(sizeof(raft_buffer)));
    void* base = raft_malloc(state.empty() ? 1 : state.size());
    if (buffers == nullptr || base == nullptr) {
      raft_free(buffers);
      raft_free(base);
      return RAFT_NOMEM;
    }
    std::memcpy(base, state.data(), state.size());
    buffers[0] = raft_buffer{base, state.size()};
    *bufs = buffers;
    *n_bufs = 1;
    return 0;
  }

  static int fsm_restore(raft_fsm* fsm, raft_buffer* buffer) {
    Impl& self = *static_cast<Impl*>(fsm->data);
    Status s = self.db_->restore({static_cast<const std::uint8_t*>(buffer->base), buffer->len});
    if (!s.ok()) {
      spdlog::error("group view: cannot restore a snapshot: {}", s.to_string());
      return RAFT_CORRUPT;
    }
    // On success the buffer is ours to free.
    raft_free(buffer->base);
    // What the snapshot skipped is unknown: a node must catch up with all of it.
    self.recorded_up_at_.clear();
    if (!self.view().is_up(self.options_.id)) self.leases_.fence();
    self.leases_.changes_applied();
    return 0;
  }

  // A change that records a node up is what that node must have applied before it relies on
  // a lease; one that takes this node out takes its lease.
  void leases_follow(const AppliedChange& applied) {
    const Change& change = applied.change;
    const bool about_a_node = change.kind == Change::Kind::add_node ||
                              change.kind == Change::Kind::set_node_state ||
                              change.kind == Change::Kind::remove_node;
    if (applied.outcome.ok() && about_a_node) {
      if (view().is_up(change.node.id)) {
        recorded_up_at_[change.node.id] = applied.applied;
      } else if (change.node.id == options_.id) {
        leases_.fence();
      }
    }
    leases_.changes_applied();
  }

  void schedule_watch() {
    watch_timer_ = loop_.schedule(options_.heartbeat, [this] {
      watch_timer_.reset();
      watch();
      schedule_watch();
    });
  }

  // The leader's duties beyond Raft: register itself after bootstrap, and record nodes down
  // when silent and up when heard from again.
  void watch() {
    // revoked_ is left alone here: each revocation ends when its own timer fires, whatever
    // became of the lead. One begun in a new term before this tick saw the term is still
    // counted on by its timer, and forgetting it would grant the node leases meanwhile.
    if (!is_leader()) {
      leading_since_.reset();
      return;
    }
    std::uint64_t now = silence_clock_.now_ms();
    // Led since the start of this term: a lead lost and won back between two ticks counts anew.
    if (!leading_since_ || leading_term_ != raft_.current_term) {
      leading_since_ = now;
      leading_term_ = raft_.current_term;
    }
    catch_up_as_leader();
    const GroupView& current = view();
    if (self_ && current.node(options_.id) == nullptr && !in_flight_.contains(options_.id)) {
      in_flight_.insert(options_.id);
      propose(Change::add_node(*self_), [this](Status) { in_flight_.erase(options_.id); });
      return;
    }
    // Until it has led for a while the leader has not heard from everyone yet.
    bool settled = now - *leading_since_ >= static_cast<std::uint64_t>(options_.down_after.count());
    std::vector<std::pair<NodeId, bool>> flips;
    for (const NodeInfo& node : current.nodes) {
      if (revoked_.contains(node.id)) continue;  // recorded down when its lease has run out
      bool heard;
      if (node.id == options_.id) {
        heard = true;
      } else {
        auto last = leases_.last_heard(node.id);
        const std::chrono::milliseconds silence =
            fail_points::switched_on(fail_points::kRecordDownWhileLeaseRuns) ? options_.heartbeat
                                                                             : options_.down_after;
        heard = last && now - *last < static_cast<std::uint64_t>(silence.count());
      }
      if (heard != node.up && (heard || settled)) flips.emplace_back(node.id, heard);
    }
    for (const auto& [node, up] : flips) {
      if (in_flight_.contains(node)) continue;
      in_flight_.insert(node);
      spdlog::info("group view: recording node {} {}", node, up ? "up" : "down");
      propose_now(Change::set_node_state(node, up),
                  [this, flipped = node](Status) { in_flight_.erase(flipped); });
    }
  }

  EventLoop& loop_;
  GroupOptions options_;
  std::unique_ptr<internal::RaftLog> log_;
  std::unique_ptr<internal::ConfigDb> db_;
  internal::RaftIo io_;
  internal::CountedClock silence_clock_;
  internal::LeaseKeeper leases_;
  raft raft_{};
  raft_fsm fsm_{};
  bool initialised_ = false;
  bool closing_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  std::optional<NodeInfo> self_;  // set by bootstrap until the view has it
  std::optional<EventLoop::TimerId> watch_timer_;
  std::optional<std::uint64_t> leading_since_;
  std::uint64_t leading_term_ = 0;
  std::set<NodeId> in_flight_;  // nodes with a proposal about them under way
  // Nodes that get no lease, being recorded down or removed: the revocations under way.
  std::map<NodeId, std::set<std::uint64_t>> revoked_;
  std::uint64_t next_revocation_ = 1;
  std::map<NodeId, std::uint64_t> recorded_up_at_;  // node -> the change that recorded it up
  std::uint64_t caught_up_term_ = 0;  // the term in which this leader applied all before it
  bool barrier_pending_ = false;
  std::map<std::uint64_t, Status> outcomes_;
  std::vector<std::function<void(const AppliedChange&)>> observers_;
};

Result<std::unique_ptr<GroupMember>> GroupMember::open(EventLoop& loop, Transport& transport,
                                                       GroupOptions options) {
  if (options.id == 0) return error(Errc::invalid_argument, "node id must not be 0");
  if (options.heartbeat.count() <= 0 || options.election_timeout <= options.heartbeat) {
    return error(Errc::invalid_argument, "the election timeout must exceed the heartbeat");
  }
  if (options.lease_renew.count() <= 0 || options.lease <= options.lease_renew ||
      static_cast<double>(options.lease.count()) * (1 + internal::kMaxClockDrift) >=
          static_cast<double>(options.down_after.count())) {
    return error(Errc::invalid_argument,
                 "a lease must outlast its renewal and, with the clocks' drift, end before "
                 "down_after");
  }
  if (silence_step(options) < options.heartbeat) {
    return error(Errc::invalid_argument,
                 "down_after must outlast a lease, with the clocks' drift, by two heartbeats");
  }
  TP_ASSIGN_OR_RETURN(auto log, internal::RaftLog::open(options.raft_log_path));
  TP_ASSIGN_OR_RETURN(auto db, internal::ConfigDb::open(options.config_db_path));
  auto impl = std::make_unique<Impl>(loop, transport, std::move(options), std::move(log),
                                     std::move(db));
  TP_RETURN_IF_ERROR(impl->init());
  return std::unique_ptr<GroupMember>(new GroupMember(std::move(impl)));
}

GroupMember::GroupMember(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GroupMember::~GroupMember() = default;

Status GroupMember::bootstrap(const NodeInfo& self) { return impl_->bootstrap(self); }
Status GroupMember::start() { return impl_->start(); }
void GroupMember::propose(const Change& change, Done done) {
  impl_->propose(change, std::move(done));
}
void GroupMember::add_node(const NodeInfo& node, Done done) {
  impl_->add_node(node, std::move(done));
}
void GroupMember::remove_node(NodeId node, Done done) { impl_->remove_node(node, std::move(done)); }
void GroupMember::transfer_leadership(NodeId to, Done done) {
  impl_->transfer_leadership(to, std::move(done));
}
void GroupMember::on_applied(std::function<void(const AppliedChange&)> observer) {
  impl_->on_applied(std::move(observer));
}
NodeId GroupMember::id() const { return impl_->id(); }
bool GroupMember::is_leader() const { return impl_->is_leader(); }
NodeId GroupMember::leader() const { return impl_->leader(); }
Epoch GroupMember::epoch() const { return impl_->epoch(); }
std::uint64_t GroupMember::applied() const { return impl_->applied(); }
std::uint64_t GroupMember::digest() const { return impl_->digest(); }
const GroupView& GroupMember::view() { return impl_->view(); }
std::shared_ptr<const Lease> GroupMember::lease() const { return impl_->lease(); }

}  // namespace tidepool::cluster
