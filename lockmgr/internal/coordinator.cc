#include "lockmgr/internal/coordinator.h"

#include <algorithm>
#include <tuple>

namespace tidepool::lockmgr::internal {
namespace {

template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

LockId subject(const Notice& notice) {
  return std::visit(Overloaded{[](const Blocking& b) { return b.holder; },
                               [](const auto& answer) { return answer.id; }},
                    notice);
}

}  // namespace

Coordinator::Coordinator(cluster::EventLoop& loop, Send send, Limits limits,
                         LockStatistics& counters)
    : loop_(loop), send_(std::move(send)), limits_(limits), counters_(counters) {}

Coordinator::~Coordinator() {
  loop_.cancel(expiry_timer_);
  loop_.cancel(remind_timer_);
}

void Coordinator::set_view(cluster::Epoch epoch, const std::vector<cluster::NodeId>& up_nodes) {
  if (epoch <= epoch_) return;
  epoch_ = epoch;
  table_ = LockTable();
  ops_.clear();
  tombstones_.clear();
  burials_.clear();
  reports_.clear();
  reported_.clear();
  held_back_.clear();
  unacknowledged_.clear();
  reported_unresponsive_.clear();
  waiting_for_ = std::set<cluster::NodeId>(up_nodes.begin(), up_nodes.end());
  recovery_started_ms_ = loop_.now_ms();
  counters_.recoveries++;
  complete_.clear();
  loop_.cancel(expiry_timer_);
  loop_.cancel(remind_timer_);
  expiry_timer_ = remind_timer_ = 0;
  expiry_at_ = 0;
  if (waiting_for_.empty()) finish_recovery();
}

void Coordinator::receive(cluster::NodeId from, const LockMessage& message) {
  if (message.epoch != epoch_) {
    counters_.stale_dropped++;
    return;
  }
  if (const auto* report = std::get_if<Report>(&message.body)) {
    take_report(from, *report);
    return;
  }
  if (!to_coordinator(message)) return;
  // An acknowledged callback grants nothing; dropping it would report its holder unresponsive.
  if (!std::holds_alternative<BlockingAck>(message.body) && limits_.may_coordinate &&
      !limits_.may_coordinate()) {
    counters_.unleased_dropped++;
    return;
  }
  if (recovering()) {
    if (held_back_.size() < limits_.max_held_back) held_back_.emplace_back(from, message);
    return;
  }
  serve(from, message);
  remind_while_contended();
}

void Coordinator::serve(cluster::NodeId from, const LockMessage& message) {
  const LockId id = *lock_of(message);
  // A node only speaks for its own locks.
  if (id.node != from) return;
  if (std::holds_alternative<BlockingAck>(message.body)) {
    unacknowledged_.erase(id);
    return;
  }
  auto applied = ops_.find(id);
  const bool known = table_.find(id).has_value();
  if (known && applied != ops_.end() && message.op <= applied->second) {
    if (message.op == applied->second) {
      answer_current_state(id);
    } else {
      counters_.stale_dropped++;
    }
    return;
  }
  std::vector<Notice> notices;
  const std::uint64_t now = loop_.now_ms();
  auto deadline = [now](std::uint64_t timeout_ms) {
    return timeout_ms == 0 ? 0 : now + timeout_ms;
  };
  // A call for a lock the table does not have: it is gone, or this call overtook the one that
  // asks for it, which the tombstone then answers when it comes.
  auto released = [&] {
    if (answer_from_tombstone(id, message.op)) return;
    bury(id, message.op, std::nullopt);
    send_(id.node, LockMessage{epoch_, message.op, Released{id}});
  };
  if (const auto* call = std::get_if<LockCall>(&message.body)) {
    if (known) {
      ops_[id] = message.op;
      answer_current_state(id);
      return;
    }
    if (answer_from_tombstone(id, message.op)) return;
    LockRequest request = call->request;
    request.deadline_ms = deadline(request.deadline_ms);
    if (!table_.request(request, notices).ok()) return;
    ops_[id] = message.op;
    expire_by(request.deadline_ms);
  } else if (const auto* call = std::get_if<ConvertCall>(&message.body)) {
    if (!known) return released();
    ops_[id] = message.op;
    Status converted = table_.convert(id, call->mode, call->try_only, deadline(call->timeout_ms),
                                      call->value, notices);
    if (!converted.ok()) return answer_current_state(id);
    expire_by(deadline(call->timeout_ms));
  } else if (const auto* call = std::get_if<ReleaseCall>(&message.body)) {
    if (known && !table_.release(id, call->value, notices).ok()) {
      // A value the holder may not set is dropped; the release itself always succeeds.
      (void)table_.release(id, std::nullopt, notices);
    }
    ops_.erase(id);
    if (known) bury(id, message.op, std::nullopt);
    released();
  } else {
    if (!known) return released();
    ops_[id] = message.op;
    if (!table_.cancel(id, notices).ok()) return answer_current_state(id);
  }
  publish(notices);
}

void Coordinator::answer_current_state(LockId id) {
  auto lock = table_.find(id);
  if (!lock) return;
  const std::uint64_t op = ops_.contains(id) ? ops_.at(id) : 0;
  if (lock->state == LockState::granted) {
    send_(id.node, LockMessage{epoch_, op, Granted{id, lock->granted, lock->range, lock->value}});
  } else {
    send_(id.node, LockMessage{epoch_, op, Queued{id, lock->position}});
  }
}

void Coordinator::publish(const std::vector<Notice>& notices) {
  for (const Notice& notice : notices) {
    const LockId id = subject(notice);
    if (std::holds_alternative<Blocking>(notice)) {
      counters_.callbacks_sent++;
      const std::uint64_t now = loop_.now_ms();
      unacknowledged_.try_emplace(id, Unacknowledged{now, now}).first->second.last_sent_ms = now;
      send_(id.node, LockMessage{epoch_, 0, std::get<Blocking>(notice)});
      continue;
    }
    auto op = ops_.find(id);
    send_(id.node,
          LockMessage{epoch_, op == ops_.end() ? 0 : op->second,
                      std::visit([](const auto& n) { return LockMessage::Body(n); }, notice)});
  }
  for (const Notice& notice : notices) {
    const auto* refused = std::get_if<Refused>(&notice);
    if (refused != nullptr && !table_.find(refused->id) && ops_.contains(refused->id)) {
      bury(refused->id, ops_.at(refused->id), refused->reason);
      ops_.erase(refused->id);
    }
  }
}

bool Coordinator::answer_from_tombstone(LockId id, std::uint64_t op) {
  auto tombstone = tombstones_.find(id);
  if (tombstone == tombstones_.end() || op > tombstone->second.op) return false;
  if (tombstone->second.refusal && op == tombstone->second.op) {
    send_(id.node, LockMessage{epoch_, op, Refused{id, *tombstone->second.refusal}});
  } else {
    send_(id.node, LockMessage{epoch_, op, Released{id}});
  }
  return true;
}

void Coordinator::bury(LockId id, std::uint64_t op, std::optional<Refusal> refusal) {
  const std::uint64_t now = loop_.now_ms();
  tombstones_[id] = Tombstone{op, refusal, now};
  burials_.emplace_back(now, id);
  while (!burials_.empty() && (burials_.size() > limits_.max_tombstones ||
                               burials_.front().first + limits_.tombstone_lifetime.count() < now)) {
    auto [when, buried] = burials_.front();
    burials_.pop_front();
    auto tombstone = tombstones_.find(buried);
    if (tombstone != tombstones_.end() && tombstone->second.buried_ms == when) {
      tombstones_.erase(tombstone);
    }
  }
}

void Coordinator::take_report(cluster::NodeId from, const Report& report) {
  const bool expected = waiting_for_.contains(from);
  if (!expected && !complete_.contains(from)) return;  // not up in this view: its locks are gone
  if (expected) {
    ReportParts& parts = reports_[from];
    if (parts.received.empty()) parts.received.assign(report.parts, false);
    if (report.parts != parts.received.size() || parts.received[report.part]) return;
    parts.received[report.part] = true;
    parts.count++;
    for (LockRecord record : report.records) {
      if (record.id.node != from) continue;
      if (record.deadline_ms != 0) record.deadline_ms += loop_.now_ms();
      reported_.push_back(record);
    }
    if (parts.count < parts.received.size()) return;
    waiting_for_.erase(from);
    complete_.insert(from);
  }
  send_(from, LockMessage{epoch_, 0, ReportAck{}});
  if (expected && waiting_for_.empty()) finish_recovery();
}

void Coordinator::finish_recovery() {
  // Queued locks whose node never learned their position go last, in a fixed order.
  std::sort(reported_.begin(), reported_.end(), [](const LockRecord& a, const LockRecord& b) {
    auto key = [](const LockRecord& r) {
      const bool unplaced = r.state != LockState::granted && r.position == 0;
      return std::tuple(unplaced, r.resource, r.state, r.position, r.id);
    };
    return key(a) < key(b);
  });
  for (const LockRecord& record : reported_) {
    if (!table_.adopt(record).ok()) {
      counters_.conflicting_reports++;
      continue;
    }
    ops_[record.id] = record.op;
  }
  reported_.clear();
  reports_.clear();
  counters_.last_recovery_ms = loop_.now_ms() - recovery_started_ms_;
  std::vector<Notice> notices;
  table_.settle(notices);
  publish(notices);
  auto held_back = std::move(held_back_);
  held_back_.clear();
  for (const auto& [from, message] : held_back) serve(from, message);
  std::vector<Notice> expired;
  expire_by(table_.expire(loop_.now_ms(), expired));
  publish(expired);
  remind_while_contended();
}

void Coordinator::expire_by(std::uint64_t deadline_ms) {
  if (deadline_ms == 0 || (expiry_at_ != 0 && expiry_at_ <= deadline_ms)) return;
  loop_.cancel(expiry_timer_);
  expiry_at_ = deadline_ms;
  const std::uint64_t now = loop_.now_ms();
  expiry_timer_ =
      loop_.schedule(std::chrono::milliseconds(deadline_ms > now ? deadline_ms - now : 0), [this] {
        expiry_at_ = 0;
        expiry_timer_ = 0;
        std::vector<Notice> notices;
        const std::uint64_t next = table_.expire(loop_.now_ms(), notices);
        publish(notices);
        expire_by(next);
        remind_while_contended();
      });
}

void Coordinator::remind_while_contended() {
  if (!table_.contended() || remind_timer_ != 0) return;
  remind_timer_ = loop_.schedule(limits_.remind, [this] {
    remind_timer_ = 0;
    std::vector<Notice> reminders;
    table_.remind(reminders);
    publish(reminders);
    check_callback_deadlines();
    remind_while_contended();
  });
}

void Coordinator::check_callback_deadlines() {
  const std::uint64_t now = loop_.now_ms();
  const auto deadline = static_cast<std::uint64_t>(limits_.callback_deadline.count());
  // A holder no longer reminded is in nobody's way any more (a try-only request's one callback,
  // a waiter that went): its silence proves nothing.
  const auto reminded = static_cast<std::uint64_t>(2 * limits_.remind.count());
  for (auto it = unacknowledged_.begin(); it != unacknowledged_.end();) {
    const LockId holder = it->first;
    const Unacknowledged sent = it->second;
    if (!table_.find(holder) || now - sent.last_sent_ms > reminded) {
      it = unacknowledged_.erase(it);
      continue;
    }
    if (now - sent.first_sent_ms < deadline) {
      ++it;
      continue;
    }
    it = unacknowledged_.erase(it);
    if (reported_unresponsive_.insert(holder.node).second && limits_.unresponsive) {
      counters_.unresponsive_reported++;
      limits_.unresponsive(holder.node);
    }
  }
}

}  // namespace tidepool::lockmgr::internal
