#include "cluster/group_client.h"

#include <optional>

#include "cluster/internal/config_db.h"
#include "common/xdr.h"

namespace tidepool::cluster {

namespace {
constexpr std::chrono::milliseconds kLeaderPoll{20};
}  // namespace

class GroupClient::Impl : public std::enable_shared_from_this<Impl> {
 public:
  Impl(EventLoop& loop, GroupMember& member, RpcEndpoint& rpc)
      : loop_(loop), member_(member), rpc_(rpc) {}

  // The leader's side: proposals forwarded to it, and read indexes. Both answer with the
  // leader's applied index, which the caller then waits to reach.
  void serve() {
    std::weak_ptr<Impl> weak = weak_from_this();
    rpc_.handle(kProposeMethod, [weak](NodeId, std::span<const std::uint8_t> request,
                                       RpcEndpoint::Reply reply) {
      auto self = weak.lock();
      if (!self) return reply(stopping());
      Result<Change> change = internal::decode_change(request);
      if (!change.ok()) return reply(change.status());
      self->apply_here(*change, [weak, reply](Status outcome) {
        auto self = weak.lock();
        if (!outcome.ok()) return reply(outcome);
        reply(self ? self->applied_index() : Result<xdr::Buffer>(stopping()));
      });
    });
    rpc_.handle(kReadIndexMethod, [weak](NodeId, std::span<const std::uint8_t>,
                                         RpcEndpoint::Reply reply) {
      auto self = weak.lock();
      if (!self) return reply(stopping());
      if (!self->member_.is_leader()) {
        return reply(error(Errc::unavailable, "this node does not lead the group"));
      }
      reply(self->applied_index());
    });
    rpc_.handle(kTransferLeadershipMethod,
                [weak](NodeId, std::span<const std::uint8_t> request, RpcEndpoint::Reply reply) {
                  auto self = weak.lock();
                  if (!self) return reply(stopping());
                  xdr::Decoder in(request);
                  const NodeId to = in.u64();
                  if (!in.ok() || in.remaining() != 0) {
                    return reply(error(Errc::invalid_argument, "malformed leadership transfer"));
                  }
                  self->member_.transfer_leadership(to, [reply](Status outcome) {
                    if (!outcome.ok()) return reply(outcome);
                    reply(xdr::Buffer{});
                  });
                });
  }

  std::uint64_t give_up_at(std::chrono::milliseconds deadline) const {
    return loop_.now_ms() + static_cast<std::uint64_t>(deadline.count());
  }

  // The deadline of a call made now (at least 1 ms).
  std::chrono::milliseconds left_until(std::uint64_t give_up_at) const {
    const std::uint64_t now = loop_.now_ms();
    return std::chrono::milliseconds(give_up_at > now ? give_up_at - now : 1);
  }

  // Applies `change` through the leader, or with none, only catches up with it. Waits for a
  // leader to be known until `give_up_at`.
  void through_leader(std::optional<Change> change, std::uint64_t give_up_at,
                      GroupMember::Done done) {
    // The leader cannot take itself out of the group; the next one does.
    if (change && change->kind == Change::Kind::remove_node && change->node.id != 0 &&
        change->node.id == member_.leader()) {
      std::weak_ptr<Impl> weak = weak_from_this();
      return transfer(
          0, give_up_at,
          [weak, change = std::move(change), give_up_at, done = std::move(done)](Status s) mutable {
            auto self = weak.lock();
            if (!self) return done(stopping());
            if (!s.ok()) return done(std::move(s));
            self->through_leader(std::move(change), give_up_at, std::move(done));
          });
    }
    if (member_.is_leader()) {
      if (!change) return done(Status::success());
      return apply_here(*change, std::move(done));
    }
    const NodeId leader = member_.leader();
    if (leader == 0 || leader == member_.id()) {
      if (loop_.now_ms() >= give_up_at) {
        return done(error(Errc::unavailable, "no leader: the group has no quorum"));
      }
      return retry(std::move(change), give_up_at, std::move(done));
    }
    xdr::Buffer request;
    if (change) {
      xdr::Encoder out(request);
      internal::encode_change(*change, out);
    }
    const std::chrono::milliseconds left = left_until(give_up_at);
    std::weak_ptr<Impl> weak = weak_from_this();
    rpc_.call(leader, change ? kProposeMethod : kReadIndexMethod, request, left,
              [weak, change = std::move(change), give_up_at,
               done = std::move(done)](Result<xdr::Buffer> reply) mutable {
                auto self = weak.lock();
                if (!self) return done(stopping());
                // The leader fences calls from a node behind its epoch: this node has yet to
                // receive changes Raft is bringing it. Asking again once they arrived is safe,
                // as the leader refused before doing anything.
                if (reply.code() == Errc::behind &&
                    self->loop_.now_ms() < give_up_at) {
                  return self->retry(std::move(change), give_up_at, std::move(done));
                }
                if (!reply.ok()) return done(reply.status());
                // A node removed is out of the log: it never applies its own removal.
                if (change && change->kind == Change::Kind::remove_node &&
                    change->node.id == self->member_.id()) {
                  return done(Status::success());
                }
                xdr::Decoder in(*reply);
                const std::uint64_t applied_at_leader = in.u64();
                if (!in.ok()) return done(error(Errc::internal, "malformed reply of the leader"));
                self->wait_until_applied(applied_at_leader, give_up_at, std::move(done));
              });
  }

  // Hands the lead to `to` (any voter with 0) through the leader, waiting for one until
  // `give_up_at`.
  void transfer(NodeId to, std::uint64_t give_up_at, GroupMember::Done done) {
    if (member_.is_leader()) return member_.transfer_leadership(to, std::move(done));
    const NodeId leader = member_.leader();
    if (to != 0 && leader == to) return done(Status::success());
    if (leader == 0 || leader == member_.id()) {
      if (loop_.now_ms() >= give_up_at) {
        return done(error(Errc::unavailable, "no leader: the group has no quorum"));
      }
      return after_a_while(std::move(done), [to, give_up_at](Impl& self, GroupMember::Done done) {
        self.transfer(to, give_up_at, std::move(done));
      });
    }
    xdr::Buffer request;
    xdr::Encoder out(request);
    out.u64(to);
    const std::chrono::milliseconds left = left_until(give_up_at);
    rpc_.call(leader, kTransferLeadershipMethod, request, left,
              [done = std::move(done)](Result<xdr::Buffer> reply) { done(reply.status()); });
  }

 private:
  static Status stopping() { return error(Errc::unavailable, "the node is stopping"); }

  xdr::Buffer applied_index() const {
    xdr::Buffer body;
    xdr::Encoder out(body);
    out.u64(member_.applied());
    return body;
  }

  // Runs `step` on the loop a little later, unless this client is gone by then.
  template <typename Step>
  void after_a_while(GroupMember::Done done, Step step) {
    std::weak_ptr<Impl> weak = weak_from_this();
    loop_.schedule(kLeaderPoll, [weak, done = std::move(done), step = std::move(step)]() mutable {
      if (auto self = weak.lock()) {
        step(*self, std::move(done));
      } else {
        done(stopping());
      }
    });
  }

  void retry(std::optional<Change> change, std::uint64_t give_up_at, GroupMember::Done done) {
    after_a_while(std::move(done), [change = std::move(change), give_up_at](
                                       Impl& self, GroupMember::Done done) mutable {
      self.through_leader(std::move(change), give_up_at, std::move(done));
    });
  }

  void apply_here(const Change& change, GroupMember::Done done) {
    switch (change.kind) {
      case Change::Kind::add_node:
        return member_.add_node(change.node, std::move(done));
      case Change::Kind::remove_node:
        return member_.remove_node(change.node.id, std::move(done));
      default:
        return member_.propose(change, std::move(done));
    }
  }

  void wait_until_applied(std::uint64_t index, std::uint64_t give_up_at, GroupMember::Done done) {
    if (member_.applied() >= index) return done(Status::success());
    if (loop_.now_ms() >= give_up_at) {
      return done(error(Errc::timed_out,
                        "the change was applied by the leader but not yet on this node"));
    }
    after_a_while(std::move(done), [index, give_up_at](Impl& self, GroupMember::Done done) {
      self.wait_until_applied(index, give_up_at, std::move(done));
    });
  }

  EventLoop& loop_;
  GroupMember& member_;
  RpcEndpoint& rpc_;
};

GroupClient::GroupClient(EventLoop& loop, GroupMember& member, RpcEndpoint& rpc)
    : impl_(std::make_shared<Impl>(loop, member, rpc)) {
  impl_->serve();
}

GroupClient::~GroupClient() = default;

void GroupClient::propose(const Change& change, std::chrono::milliseconds deadline,
                          GroupMember::Done done) {
  impl_->through_leader(change, impl_->give_up_at(deadline), std::move(done));
}

void GroupClient::add_node(const NodeInfo& node, std::chrono::milliseconds deadline,
                           GroupMember::Done done) {
  propose(Change::add_node(node), deadline, std::move(done));
}

void GroupClient::catch_up(std::chrono::milliseconds deadline, GroupMember::Done done) {
  impl_->through_leader(std::nullopt, impl_->give_up_at(deadline), std::move(done));
}

void GroupClient::remove_node(NodeId node, std::chrono::milliseconds deadline,
                              GroupMember::Done done) {
  propose(Change::remove_node(node), deadline, std::move(done));
}

void GroupClient::transfer_leadership(NodeId to, std::chrono::milliseconds deadline,
                                      GroupMember::Done done) {
  impl_->transfer(to, impl_->give_up_at(deadline), std::move(done));
}

}  // namespace tidepool::cluster
