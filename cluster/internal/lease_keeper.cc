#include "cluster/internal/lease_keeper.h"

#include <spdlog/spdlog.h>

#include "common/xdr.h"

namespace tidepool::cluster::internal {

namespace {

enum class Message : std::uint32_t {
  request = 1,    // sequence
  confirm = 2,    // round, term: "are you still in this term, or before it?"
  confirmed = 3,  // round, term, yes
  grant = 4,      // sequence, required_applied
};

std::size_t words_of(Message kind) {
  switch (kind) {
    case Message::request: return 1;
    case Message::confirm: return 2;
    case Message::confirmed: return 3;
    case Message::grant: return 2;
  }
  return 0;
}

}  // namespace

LeaseKeeper::LeaseKeeper(EventLoop& loop, Transport& transport, NodeId self, LeaseTiming timing,
                         CountedClock& silence_clock, Group& group)
    : loop_(loop),
      transport_(transport),
      self_(self),
      timing_(timing),
      silence_clock_(silence_clock),
      group_(group),
      lease_(std::make_shared<Lease>(loop)) {}

LeaseKeeper::~LeaseKeeper() {
  if (request_timer_) loop_.cancel(*request_timer_);
  if (round_) loop_.cancel(round_->deadline);
  transport_.set_receiver(Channel::lease, nullptr);
  lease_->detach();
}

void LeaseKeeper::start() {
  transport_.set_receiver(Channel::lease, [this](NodeId from, xdr::Buffer& message) {
    receive(from, message);
  });
  schedule_request();
}

std::optional<std::uint64_t> LeaseKeeper::last_heard(NodeId node) const {
  auto it = heard_.find(node);
  if (it == heard_.end()) return std::nullopt;
  return it->second;
}

void LeaseKeeper::changes_applied() {
  if (!waiting_ || group_.applied() < waiting_->required_applied) return;
  extend_lease(waiting_->asked_ms);
  waiting_.reset();
}

void LeaseKeeper::fence() {
  lease_->fence();
  waiting_.reset();
  // A grant still on its way answers a request made before what was taken: it must not count.
  sent_.clear();
}

void LeaseKeeper::schedule_request() {
  request_timer_ = loop_.schedule(timing_.renew, [this] {
    request_timer_.reset();
    request();
    schedule_request();
  });
}

void LeaseKeeper::request() {
  const std::uint64_t now = lease_->now_ms();
  // A request older than a lease can no longer extend it.
  while (!sent_.empty() && sent_.begin()->second + timing_.lease.count() <= now) {
    sent_.erase(sent_.begin());
  }
  const NodeId leader = group_.leader();
  if (leader == 0) return;
  const std::uint64_t sequence = next_sequence_++;
  sent_[sequence] = now;
  if (leader == self_) {
    on_request(self_, sequence);
  } else {
    send(leader, {static_cast<std::uint64_t>(Message::request), sequence});
  }
}

void LeaseKeeper::send(NodeId to, const std::vector<std::uint64_t>& words) {
  xdr::Buffer message;
  xdr::Encoder out(message);
  out.u32(static_cast<std::uint32_t>(words[0]));
  for (std::size_t i = 1; i < words.size(); ++i) out.u64(words[i]);
  transport_.send(to, Channel::lease, std::move(message));
}

void LeaseKeeper::receive(NodeId from, std::span<const std::uint8_t> bytes) {
  xdr::Decoder in(bytes);
  const auto kind = static_cast<Message>(in.u32());
  const std::size_t count = words_of(kind);
  std::uint64_t words[3] = {};
  for (std::size_t i = 0; i < count; ++i) words[i] = in.u64();
  if (count == 0 || !in.ok() || in.remaining() != 0) {
    spdlog::warn("lease: dropped a malformed message from node {}", from);
    return;
  }
  switch (kind) {
    case Message::request: return on_request(from, words[0]);
    case Message::confirm: return on_confirm(from, words[0], words[1]);
    case Message::confirmed: return on_confirmed(from, words[0], words[1], words[2] != 0);
    case Message::grant: return on_grant(words[0], words[1]);
  }
}

void LeaseKeeper::on_request(NodeId from, std::uint64_t sequence) {
  if (!group_.is_leader()) return;
  // What was heard while leading an earlier term says nothing of this one.
  if (group_.term() != leading_term_) {
    heard_.clear();
    pending_.clear();
    leading_term_ = group_.term();
  }
  heard_[from] = silence_clock_.now_ms();
  pending_[from] = sequence;
  if (!round_) begin_round();
}

void LeaseKeeper::begin_round() {
  Round round;
  round.id = next_round_++;
  round.term = group_.term();
  round.requests = std::move(pending_);
  pending_.clear();
  round.confirmed.insert(self_);
  round.deadline = loop_.schedule(timing_.lease, [this, id = round.id] {
    if (!round_ || round_->id != id) return;
    // Confirmations lost or a majority out of reach: these requesters ask again.
    round_.reset();
    if (!pending_.empty() && group_.is_leader()) begin_round();
  });
  round_ = std::move(round);
  for (NodeId voter : group_.voters()) {
    if (voter != self_) {
      send(voter, {static_cast<std::uint64_t>(Message::confirm), round_->id, round_->term});
    }
  }
  end_round();
}

void LeaseKeeper::on_confirm(NodeId from, std::uint64_t round, std::uint64_t term) {
  // Said on the loop that also casts this node's votes: a yes comes before any vote this node
  // gives in a later term, so a leader of a later term is elected only after it.
  const bool yes = group_.term() <= term;
  send(from, {static_cast<std::uint64_t>(Message::confirmed), round, term, yes ? 1u : 0u});
}

void LeaseKeeper::on_confirmed(NodeId from, std::uint64_t round, std::uint64_t term, bool yes) {
  if (!round_ || round_->id != round || round_->term != term || !yes) return;
  round_->confirmed.insert(from);
  end_round();
}

void LeaseKeeper::end_round() {
  const std::vector<NodeId> voters = group_.voters();
  std::size_t confirmed = 0;
  for (NodeId voter : voters) confirmed += round_->confirmed.contains(voter) ? 1 : 0;
  if (confirmed < voters.size() / 2 + 1) return;
  Round done = std::move(*round_);
  round_.reset();
  loop_.cancel(done.deadline);
  if (!group_.is_leader() || group_.term() != done.term) return;
  for (const auto& [node, sequence] : done.requests) {
    std::optional<std::uint64_t> required = group_.grantable(node);
    if (!required) continue;
    if (node == self_) {
      on_grant(sequence, *required);
    } else {
      send(node, {static_cast<std::uint64_t>(Message::grant), sequence, *required});
    }
  }
  if (!pending_.empty()) begin_round();
}

void LeaseKeeper::on_grant(std::uint64_t sequence, std::uint64_t required_applied) {
  auto sent = sent_.find(sequence);
  if (sent == sent_.end()) return;
  if (group_.applied() >= required_applied) {
    extend_lease(sent->second);
  } else {
    waiting_ = WaitingGrant{sent->second, required_applied};
  }
}

void LeaseKeeper::extend_lease(std::uint64_t asked_ms) {
  lease_->extend(asked_ms, asked_ms + static_cast<std::uint64_t>(timing_.lease.count()));
}

}  // namespace tidepool::cluster::internal
