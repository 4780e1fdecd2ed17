#include "lockmgr/internal/requester.h"

#include <algorithm>
#include <utility>

namespace tidepool::lockmgr::internal {

Requester::Requester(cluster::EventLoop& loop, Send send, cluster::NodeId self,
                     std::uint64_t first_sequence, Timing timing, LockStatistics& counters)
    : loop_(loop),
      send_(std::move(send)),
      self_(self),
      next_sequence_(first_sequence),
      timing_(timing),
      counters_(counters) {}

Requester::~Requester() { loop_.cancel(pump_timer_); }

cluster::NodeId Requester::coordinator_of(const ResourceName& resource) const {
  return ring_.owner(cluster::Ring::key_of(static_cast<std::uint64_t>(resource.kind), resource.id));
}

LockId Requester::lock(const LockSpec& spec, Completion done, BlockingHandler on_blocking,
                       LostHandler on_lost) {
  const LockId id{self_, next_sequence_++};
  Entry& entry = entries_[id];
  entry.spec = spec;
  entry.done = std::move(done);
  entry.on_blocking = std::move(on_blocking);
  entry.on_lost = std::move(on_lost);
  entry.since_ms = loop_.now_ms();
  entry.deadline_ms = spec.timeout.count() == 0 ? 0 : entry.since_ms + spec.timeout.count();
  counters_.requests++;
  begin(id, entry, Doing::locking);
  return id;
}

Status Requester::convert(LockId id, const ConvertSpec& spec, Completion done) {
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.unwanted) return error(Errc::not_found, "no such lock");
  Entry& entry = it->second;
  if (!entry.granted || entry.doing != Doing::nothing) {
    return error(Errc::precondition_failed, "the lock is not granted, or busy");
  }
  entry.conversion = spec;
  entry.done = std::move(done);
  entry.deadline_ms = spec.timeout.count() == 0 ? 0 : loop_.now_ms() + spec.timeout.count();
  begin(id, entry, Doing::converting);
  return {};
}

Status Requester::release(LockId id, std::optional<LockValue> value,
                          std::function<void()> released) {
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.unwanted) return error(Errc::not_found, "no such lock");
  Entry& entry = it->second;
  if (released) entry.released.push_back(std::move(released));
  if (entry.doing == Doing::releasing) return {};
  Completion pending = std::move(entry.done);
  entry.done = nullptr;
  entry.release_value = value;
  begin(id, entry, Doing::releasing);
  if (pending) pending(outcome(id, entry, Refusal::cancelled));
  return {};
}

Status Requester::cancel(LockId id) {
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.unwanted) return error(Errc::not_found, "no such lock");
  Entry& entry = it->second;
  if (entry.doing != Doing::locking && entry.doing != Doing::converting) {
    return error(Errc::precondition_failed, "nothing to cancel");
  }
  entry.cancelled = entry.doing;
  begin(id, entry, Doing::cancelling);
  return {};
}

void Requester::begin(LockId id, Entry& entry, Doing doing) {
  entry.doing = doing;
  entry.op++;
  entry.answered = false;
  entry.call_started_us = loop_.now_us();
  in_flight_.insert(id);
  send_call(id, entry);
  keep_pumping();
}

void Requester::send_call(LockId id, Entry& entry) {
  const std::uint64_t now = loop_.now_ms();
  entry.next_send_ms = now + (entry.answered ? timing_.poll : timing_.retransmit).count();
  // Out of the view (or before the first) the node takes no locks: a coordinator would drop
  // them at its next view change while the node went on believing in them.
  if (!member_ || ring_.empty()) return;
  const cluster::NodeId to =
      entry.unwanted ? entry.coordinator : coordinator_of(entry.spec.resource);
  // Timeouts travel as what is left of them; one already past asks for a prompt refusal.
  const std::uint64_t timeout =
      entry.deadline_ms == 0
          ? 0
          : std::max<std::uint64_t>(1, entry.deadline_ms - std::min(now, entry.deadline_ms));
  LockMessage message{epoch_, entry.op, ReportAck{}};
  switch (entry.doing) {
    case Doing::locking:
      message.body =
          LockCall{{id, entry.spec.resource, entry.spec.mode, entry.spec.range, entry.spec.try_only,
                    entry.spec.expandable, timeout, entry.spec.owner}};
      break;
    case Doing::converting:
      message.body = ConvertCall{id, entry.conversion.mode, entry.conversion.try_only, timeout,
                                 entry.conversion.value};
      break;
    case Doing::releasing:
      message.body = ReleaseCall{id, entry.release_value};
      break;
    case Doing::cancelling:
      message.body = CancelCall{id};
      break;
    case Doing::nothing:
      return;
  }
  send_(to, message);
}

void Requester::receive(cluster::NodeId from, const LockMessage& message) {
  if (message.epoch != epoch_) {
    counters_.stale_dropped++;
    return;
  }
  if (std::holds_alternative<ReportAck>(message.body)) {
    unacked_reports_.erase(from);
    return;
  }
  if (const auto* blocking = std::get_if<Blocking>(&message.body)) {
    auto it = entries_.find(blocking->holder);
    if (it == entries_.end()) {
      // A lock this node does not know stands in somebody's way: one it let go of, granted
      // again by a late copy of its call. Release it.
      if (blocking->holder.node == self_) release_unwanted(blocking->holder, from, 0);
      return;
    }
    // The node is alive and has the lock, or is about to learn it has: it answers, whatever it
    // then does with the callback.
    send_(from, LockMessage{epoch_, 0, BlockingAck{blocking->holder}});
    if (!it->second.granted || it->second.unwanted) return;
    Entry& entry = it->second;
    if (entry.warned == entry.mode || !entry.on_blocking) return;
    // Sent for a stronger mode the lock held before a conversion down: the mode it holds now
    // is not in the way, and the callback must not stand for a later one that is.
    if (compatible(entry.mode, blocking->wanted) || !entry.range.overlaps(blocking->range)) return;
    entry.warned = entry.mode;
    counters_.callbacks_received++;
    BlockingHandler handler = entry.on_blocking;
    handler(blocking->holder, blocking->wanted, blocking->range);
    return;
  }
  const std::optional<LockId> id = lock_of(message);
  if (!id || id->node != self_) return;
  auto it = entries_.find(*id);
  if (it == entries_.end()) {
    if (std::holds_alternative<Granted>(message.body) ||
        std::holds_alternative<Queued>(message.body)) {
      release_unwanted(*id, from, message.op);
    }
    return;
  }
  on_answer(*id, it->second, message);
}

void Requester::on_answer(LockId id, Entry& entry, const LockMessage& message) {
  if (message.op != entry.op || entry.doing == Doing::nothing) {
    counters_.stale_dropped++;
    return;
  }
  if (entry.call_started_us) {
    counters_.round_trips.record(loop_.now_us() - *entry.call_started_us);
    entry.call_started_us.reset();
  }
  const Doing doing = entry.doing == Doing::cancelling ? entry.cancelled : entry.doing;
  if (const auto* granted = std::get_if<Granted>(&message.body)) {
    if (entry.doing == Doing::releasing) return;
    const bool conversion_withdrawn = entry.doing == Doing::cancelling &&
                                      doing == Doing::converting &&
                                      granted->mode != entry.conversion.mode;
    if (entry.mode != granted->mode) entry.warned.reset();
    entry.granted = true;
    entry.mode = granted->mode;
    entry.range = granted->range;
    entry.value = granted->value;
    if (conversion_withdrawn) return finish(id, entry, Refusal::cancelled);
    if (doing == Doing::converting) {
      counters_.conversions++;
    } else {
      counters_.grants++;
    }
    return finish(id, entry, std::nullopt);
  }
  if (const auto* queued = std::get_if<Queued>(&message.body)) {
    if (entry.doing != Doing::locking && entry.doing != Doing::converting) return;
    entry.position = queued->position;
    entry.answered = true;
    entry.next_send_ms = loop_.now_ms() + timing_.poll.count();
    return;
  }
  if (const auto* refused = std::get_if<Refused>(&message.body)) {
    if (entry.doing == Doing::releasing) return;
    return finish(id, entry, refused->reason, refused->in_the_way);
  }
  // Released: the coordinator no longer has the lock.
  if (entry.doing == Doing::releasing) return released(id);
  entry.granted = false;
  finish(id, entry, Refusal::cancelled);
}

void Requester::release_unwanted(LockId id, cluster::NodeId coordinator, std::uint64_t op) {
  Entry& unwanted = entries_[id];
  unwanted.unwanted = true;
  unwanted.coordinator = coordinator;
  // Past any operation the coordinator may have seen: the node no longer knows which it was.
  unwanted.op = std::max(op, std::uint64_t{1} << 32);
  counters_.unwanted_released++;
  begin(id, unwanted, Doing::releasing);
}

LockResult Requester::outcome(LockId id, const Entry& entry, std::optional<Refusal> refused) {
  return {refused,
          LockGrant{id, entry.granted ? entry.mode : Mode::null, entry.range, entry.value}};
}

void Requester::finish(LockId id, Entry& entry, std::optional<Refusal> refused,
                       std::optional<Conflict> in_the_way) {
  LockResult result = outcome(id, entry, refused);
  result.in_the_way = in_the_way;
  Completion done = std::move(entry.done);
  entry.done = nullptr;
  entry.doing = Doing::nothing;
  entry.cancelled = Doing::nothing;
  entry.answered = false;
  entry.position = 0;
  entry.deadline_ms = 0;
  in_flight_.erase(id);
  if (refused) counters_.refusals++;
  if (!entry.granted) forget(id);
  if (done) done(result);
}

void Requester::forget(LockId id) {
  entries_.erase(id);
  in_flight_.erase(id);
}

void Requester::released(LockId id) {
  std::vector<std::function<void()>> waiting = std::move(entries_.at(id).released);
  forget(id);
  for (auto& done : waiting) done();
}

void Requester::set_view(cluster::Epoch epoch, const std::vector<cluster::NodeId>& up_nodes) {
  if (epoch <= epoch_) return;
  epoch_ = epoch;
  ring_ = cluster::Ring(up_nodes);
  member_ = std::find(up_nodes.begin(), up_nodes.end(), self_) != up_nodes.end();
  if (!member_) return fence();
  // A release or cancel in flight is done: the lock is left out of the report, so the new
  // coordinator never has it.
  std::vector<std::pair<Completion, LockResult>> completions;
  std::vector<std::vector<std::function<void()>>> released_early;
  std::vector<LockId> ids;
  ids.reserve(entries_.size());
  for (const auto& entry : entries_) ids.push_back(entry.first);
  std::sort(ids.begin(), ids.end());
  for (const LockId& id : ids) {
    Entry& entry = entries_.at(id);
    const Doing doing = entry.doing == Doing::cancelling ? entry.cancelled : entry.doing;
    // The old coordinator may have applied a conversion the node never heard of; from now on
    // the lock is only trusted for what both modes protect.
    if (doing == Doing::converting)
      entry.mode = protected_by_both(entry.mode, entry.conversion.mode);
    if (entry.doing == Doing::releasing) {
      released_early.push_back(std::move(entry.released));
      forget(id);
    } else if (entry.doing == Doing::cancelling) {
      completions.emplace_back(std::move(entry.done), outcome(id, entry, Refusal::cancelled));
      entry.done = nullptr;
      entry.doing = entry.cancelled = Doing::nothing;
      entry.position = 0;
      if (entry.granted) {
        in_flight_.erase(id);
      } else {
        forget(id);
      }
    } else {
      entry.answered = false;
    }
  }
  report(up_nodes);
  keep_pumping();
  for (auto& [done, result] : completions) {
    if (done) done(result);
  }
  for (auto& waiting : released_early) {
    for (auto& done : waiting) done();
  }
}

void Requester::fence() {
  counters_.fenced++;
  std::vector<std::pair<LostHandler, LockId>> lost;
  std::vector<std::pair<Completion, LockResult>> completions;
  std::vector<std::function<void()>> released;
  for (auto& [id, entry] : entries_) {
    if (entry.unwanted) continue;
    if (entry.doing == Doing::releasing) {
      for (auto& done : entry.released) released.push_back(std::move(done));
      continue;
    }
    if (entry.granted) {
      counters_.locks_lost++;
      if (entry.on_lost) lost.emplace_back(std::move(entry.on_lost), id);
    }
    entry.granted = false;
    if (entry.done) {
      completions.emplace_back(std::move(entry.done), outcome(id, entry, Refusal::cancelled));
    }
  }
  entries_.clear();
  in_flight_.clear();
  unacked_reports_.clear();
  // Users learn of their lost locks before any completion, so a conversion's refusal finds
  // its lock already gone.
  for (auto& [on_lost, id] : lost) on_lost(id);
  for (auto& [done, result] : completions) done(result);
  for (auto& done : released) done();
}

void Requester::report(const std::vector<cluster::NodeId>& up_nodes) {
  const std::uint64_t now = loop_.now_ms();
  std::map<cluster::NodeId, std::vector<LockRecord>> records;
  for (cluster::NodeId node : up_nodes) records[node];
  for (const HeldLock& lock : held()) {
    LockRecord record = lock.record;
    if (record.deadline_ms != 0) record.deadline_ms = std::max(now + 1, record.deadline_ms) - now;
    records[coordinator_of(record.resource)].push_back(record);
  }
  unacked_reports_.clear();
  for (auto& [node, mine] : records) {
    const std::size_t parts =
        std::max<std::size_t>(1, (mine.size() + kMaxReportRecords - 1) / kMaxReportRecords);
    std::vector<LockMessage>& messages = unacked_reports_[node];
    for (std::size_t part = 0; part < parts; ++part) {
      Report report;
      auto first = mine.begin() + static_cast<std::ptrdiff_t>(part * kMaxReportRecords);
      auto last = mine.begin() + static_cast<std::ptrdiff_t>(
                                     std::min(mine.size(), (part + 1) * kMaxReportRecords));
      report.records.assign(first, last);
      report.part = static_cast<std::uint32_t>(part);
      report.parts = static_cast<std::uint32_t>(parts);
      messages.push_back(LockMessage{epoch_, 0, std::move(report)});
    }
    for (const LockMessage& message : messages) send_(node, message);
  }
}

std::vector<HeldLock> Requester::held() const {
  std::vector<HeldLock> locks;
  for (const auto& [id, entry] : entries_) {
    if (entry.unwanted || entry.doing == Doing::releasing) continue;
    const Doing doing = entry.doing == Doing::cancelling ? entry.cancelled : entry.doing;
    LockRecord record;
    record.id = id;
    record.resource = entry.spec.resource;
    record.value = entry.value;
    record.deadline_ms = doing == Doing::nothing ? 0 : entry.deadline_ms;
    record.position = entry.position;
    record.op = entry.op;
    record.owner = entry.spec.owner;
    if (doing == Doing::locking) {
      record.state = LockState::waiting;
      record.range = entry.spec.range;
      record.requested = entry.spec.mode;
    } else {
      const bool converting = doing == Doing::converting && entry.conversion.mode != entry.mode;
      record.state = converting ? LockState::converting : LockState::granted;
      record.range = entry.range;
      record.granted = entry.mode;
      record.requested = converting ? entry.conversion.mode : entry.mode;
    }
    locks.push_back(HeldLock{record, entry.spec.holder, entry.since_ms});
  }
  std::sort(locks.begin(), locks.end(),
            [](const HeldLock& a, const HeldLock& b) { return a.record.id < b.record.id; });
  return locks;
}

bool Requester::settled() const {
  if (!unacked_reports_.empty()) return false;
  return std::all_of(in_flight_.begin(), in_flight_.end(), [this](const LockId& id) {
    const Entry& entry = entries_.at(id);
    return entry.answered && (entry.doing == Doing::locking || entry.doing == Doing::converting);
  });
}

void Requester::pump() {
  pump_timer_ = 0;
  const std::uint64_t now = loop_.now_ms();
  for (const LockId& id : in_flight_) {
    Entry& entry = entries_.at(id);
    if (now < entry.next_send_ms) continue;
    counters_.retransmissions++;
    send_call(id, entry);
  }
  for (const auto& [node, messages] : unacked_reports_) {
    for (const LockMessage& message : messages) send_(node, message);
  }
  keep_pumping();
}

void Requester::keep_pumping() {
  if (pump_timer_ != 0 || (in_flight_.empty() && unacked_reports_.empty())) return;
  pump_timer_ = loop_.schedule(timing_.retransmit, [this] { pump(); });
}

}  // namespace tidepool::lockmgr::internal
