#include "cluster/internal/raft_io.h"

#include <algorithm>
#include <cstring>

#include "cluster/internal/raft_codec.h"
#include <spdlog/spdlog.h>

namespace tidepool::cluster::internal {

RaftIo::RaftIo(EventLoop& loop, Transport& transport, RaftLog& log)
    : loop_(loop), transport_(transport), log_(log) {
  io_.version = 1;
  io_.impl = this;
  io_.init = &RaftIo::init;
  io_.close = &RaftIo::close;
  io_.load = &RaftIo::load;
  io_.start = &RaftIo::start;
  io_.bootstrap = &RaftIo::bootstrap;
  io_.recover = &RaftIo::recover;
  io_.set_term = &RaftIo::set_term;
  io_.set_vote = &RaftIo::set_vote;
  io_.send = &RaftIo::send;
  io_.append = &RaftIo::append;
  io_.truncate = &RaftIo::truncate;
  io_.snapshot_put = &RaftIo::snapshot_put;
  io_.snapshot_get = &RaftIo::snapshot_get;
  io_.time = &RaftIo::time;
  io_.random = &RaftIo::random;
}

RaftIo::~RaftIo() {
  alive_.reset();
  if (tick_timer_) loop_.cancel(*tick_timer_);
  transport_.set_receiver(Channel::raft, nullptr);
}

int RaftIo::init(raft_io* io, raft_id id, const char* address) {
  RaftIo& s = self(io);
  s.id_ = id;
  s.address_ = address;
  return 0;
}

void RaftIo::close(raft_io* io, raft_io_close_cb cb) {
  RaftIo& s = self(io);
  s.closed_ = true;
  if (s.tick_timer_) s.loop_.cancel(*s.tick_timer_);
  s.tick_timer_.reset();
  s.transport_.set_receiver(Channel::raft, nullptr);
  // Completions may queue more; run until none is left.
  while (!s.pending_.empty()) {
    auto completion = std::move(s.pending_.begin()->second);
    s.pending_.erase(s.pending_.begin());
    completion();
  }
  if (cb != nullptr) cb(io);
}

int RaftIo::load(raft_io* io, raft_term* term, raft_id* voted_for, raft_snapshot** snapshot,
                 raft_index* start_index, raft_entry** entries, std::size_t* n_entries) {
  return self(io).log_.load(term, voted_for, snapshot, start_index, entries, n_entries);
}

int RaftIo::start(raft_io* io, unsigned msecs, raft_io_tick_cb tick, raft_io_recv_cb recv) {
  RaftIo& s = self(io);
  s.tick_ms_ = msecs;
  s.tick_ = tick;
  s.recv_ = recv;
  s.transport_.set_receiver(Channel::raft, [&s](NodeId from, std::span<const std::uint8_t> b) {
    s.receive(from, b);
  });
  s.schedule_tick();
  return 0;
}

void RaftIo::schedule_tick() {
  tick_timer_ = loop_.schedule(std::chrono::milliseconds(tick_ms_), [this] {
    tick_timer_.reset();
    if (closed_) return;
    schedule_tick();
    tick_(&io_);
  });
}

void RaftIo::receive(NodeId from, std::span<const std::uint8_t> bytes) {
  if (closed_ || recv_ == nullptr) return;
  auto decoded = decode_raft_message(bytes);
  if (!decoded.ok()) {
    spdlog::warn("raft: dropped a malformed message from node {}", from);
    return;
  }
  raft_message message = *decoded;
  // The transport knows who sent it; a message claiming another sender is not trusted.
  if (message.server_id != from) {
    release_raft_message(message);
    spdlog::warn("raft: dropped a message from node {} claiming to be node {}", from,
                message.server_id);
    return;
  }
  auto& address = addresses_[from];
  message.server_address = address.c_str();
  if (message.type != RAFT_IO_APPEND_ENTRIES) {
    recv_(&io_, &message);
    return;
  }
  // canonical/raft 0.15 lets a follower go beyond what an AppendEntries proves: with extra
  // entries of an older term past the leader's, an empty AppendEntries makes it (a) commit up
  // to the leader's commit index over its own conflicting entries and (b) answer with its own
  // last index, which the leader takes as a match, so it never sends the real entries (seen
  // in the simulator: a follower stuck for good). A successful AppendEntries proves the logs
  // match up to prev_log_index + n_entries only, so both are capped there, as the Raft paper
  // says (figure 2: "commitIndex = min(leaderCommit, index of last new entry)").
  skip_compacted_entries(message.append_entries);
  raft_index proven = message.append_entries.prev_log_index + message.append_entries.n_entries;
  message.append_entries.leader_commit = std::min(message.append_entries.leader_commit, proven);
  answering_append_up_to_ = proven;
  recv_(&io_, &message);
  answering_append_up_to_.reset();
}

void RaftIo::skip_compacted_entries(raft_append_entries& message) const {
  // canonical/raft 0.15 rejects an AppendEntries whose previous entry this follower already
  // folded into its snapshot, and the leader then falls back to a snapshot that the follower
  // refuses as older than its own: the follower is stuck (seen in the simulator). Entries up
  // to the snapshot are committed, so they are the leader's too (Raft's leader completeness):
  // the message is rewritten to start at the snapshot, which is what a follower that kept
  // those entries would have checked.
  raft_index snapshot = log_.snapshot_index();
  if (snapshot == 0 || message.prev_log_index >= snapshot) return;
  raft_index covered = snapshot - message.prev_log_index;
  if (covered >= message.n_entries) {
    if (message.entries != nullptr) {
      raft_free(message.entries[0].batch);
      raft_free(message.entries);
    }
    message.entries = nullptr;
    message.n_entries = 0;
  } else {
    // The array stays the one Raft will free; only the batch's first bytes go unused.
    std::memmove(message.entries, message.entries + covered,
                 (message.n_entries - covered) * sizeof(raft_entry));
    message.n_entries -= static_cast<unsigned>(covered);
  }
  message.prev_log_index = snapshot;
  message.prev_log_term = log_.snapshot_term();
}

int RaftIo::bootstrap(raft_io* io, const raft_configuration* conf) {
  return self(io).log_.bootstrap(*conf);
}

int RaftIo::recover(raft_io*, const raft_configuration*) {
  // Forcing a configuration on a cluster that lost its majority is an operator's decision we
  // do not offer yet.
  return RAFT_INVALID;
}

int RaftIo::set_term(raft_io* io, raft_term term) { return self(io).log_.set_term(term); }

int RaftIo::set_vote(raft_io* io, raft_id server_id) { return self(io).log_.set_vote(server_id); }

int RaftIo::send(raft_io* io, raft_io_send* req, const raft_message* message,
                 raft_io_send_cb cb) {
  RaftIo& s = self(io);
  NodeId to = message->server_id;
  auto& address = s.addresses_[to];
  if (message->server_address != nullptr && address != message->server_address) {
    address = message->server_address;
    s.transport_.set_address(to, address);
  }
  raft_message capped;
  if (message->type == RAFT_IO_APPEND_ENTRIES_RESULT && s.answering_append_up_to_ &&
      message->append_entries_result.rejected == 0 &&
      message->append_entries_result.last_log_index > *s.answering_append_up_to_) {
    // The answer to an AppendEntries still being received (see receive()).
    capped = *message;
    capped.append_entries_result.last_log_index = *s.answering_append_up_to_;
    message = &capped;
  }
  xdr::Buffer frame;
  xdr::Encoder encoder(frame);
  encode_raft_message(*message, s.id_, encoder);
  s.transport_.send(to, Channel::raft, std::move(frame));
  // Raft may free the message's memory once the callback ran; it was copied into the frame.
  s.complete_later([req, cb] {
    if (cb != nullptr) cb(req, 0);
  });
  return 0;
}

int RaftIo::append(raft_io* io, raft_io_append* req, const raft_entry entries[], unsigned n,
                   raft_io_append_cb cb) {
  RaftIo& s = self(io);
  if (int rc = s.log_.append(entries, n); rc != 0) return rc;
  s.complete_later([req, cb] {
    if (cb != nullptr) cb(req, 0);
  });
  return 0;
}

int RaftIo::truncate(raft_io* io, raft_index index) { return self(io).log_.truncate(index); }

int RaftIo::snapshot_put(raft_io* io, unsigned trailing, raft_io_snapshot_put* req,
                         const raft_snapshot* snapshot, raft_io_snapshot_put_cb cb) {
  RaftIo& s = self(io);
  int rc = s.log_.put_snapshot(*snapshot, trailing);
  s.complete_later([req, cb, rc] {
    if (cb != nullptr) cb(req, rc);
  });
  return 0;
}

int RaftIo::snapshot_get(raft_io* io, raft_io_snapshot_get* req, raft_io_snapshot_get_cb cb) {
  RaftIo& s = self(io);
  raft_snapshot* snapshot = nullptr;
  int rc = s.log_.get_snapshot(&snapshot);
  s.complete_later([req, cb, snapshot, rc] { cb(req, snapshot, rc); });
  return 0;
}

// Never back: libraft measures its timeouts as differences of these times.
raft_time RaftIo::time(raft_io* io) {
  RaftIo& me = self(io);
  return me.time_.read(me.loop_.now_ms());
}

int RaftIo::random(raft_io* io, int min, int max) {
  if (max <= min) return min;
  return min + static_cast<int>(self(io).loop_.random_between(0, static_cast<std::uint64_t>(max - min)));
}

void RaftIo::complete_later(std::function<void()> completion) {
  std::uint64_t id = next_pending_++;
  pending_.emplace(id, std::move(completion));
  loop_.post([this, alive = std::weak_ptr<bool>(alive_), id] {
    if (alive.expired()) return;
    auto it = pending_.find(id);
    if (it == pending_.end()) return;
    auto run = std::move(it->second);
    pending_.erase(it);
    run();
  });
}

}  // namespace tidepool::cluster::internal
