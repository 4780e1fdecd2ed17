// canonical/raft's I/O interface implemented over our own parts: time and timers from an
// EventLoop, messages over a Transport (so Raft traffic shares the backend's transport and,
// in tests, the simulated network), and storage in a RaftLog. No libuv: the same Raft runs in
// the daemon and, deterministically, in the simulator.
//
// Completions Raft must see asynchronously are posted to the loop; closing runs the ones still
// pending at once, as Raft requires every request's callback before the close callback.
// Not thread-safe: lives on its EventLoop.
#pragma once

#include "cluster/internal/raft_c.h"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "cluster/event_loop.h"
#include "cluster/internal/raft_log.h"
#include "cluster/transport.h"

namespace tidepool::cluster::internal {

class RaftIo {
 public:
  RaftIo(EventLoop& loop, Transport& transport, RaftLog& log);
  ~RaftIo();
  RaftIo(const RaftIo&) = delete;
  RaftIo& operator=(const RaftIo&) = delete;

  raft_io* io() { return &io_; }

 private:
  static RaftIo& self(raft_io* io) { return *static_cast<RaftIo*>(io->impl); }
  static int init(raft_io* io, raft_id id, const char* address);
  static void close(raft_io* io, raft_io_close_cb cb);
  static int load(raft_io* io, raft_term* term, raft_id* voted_for, raft_snapshot** snapshot,
                  raft_index* start_index, raft_entry** entries, std::size_t* n_entries);
  static int start(raft_io* io, unsigned msecs, raft_io_tick_cb tick, raft_io_recv_cb recv);
  static int bootstrap(raft_io* io, const raft_configuration* conf);
  static int recover(raft_io* io, const raft_configuration* conf);
  static int set_term(raft_io* io, raft_term term);
  static int set_vote(raft_io* io, raft_id server_id);
  static int send(raft_io* io, raft_io_send* req, const raft_message* message,
                  raft_io_send_cb cb);
  static int append(raft_io* io, raft_io_append* req, const raft_entry entries[], unsigned n,
                    raft_io_append_cb cb);
  static int truncate(raft_io* io, raft_index index);
  static int snapshot_put(raft_io* io, unsigned trailing, raft_io_snapshot_put* req,
                          const raft_snapshot* snapshot, raft_io_snapshot_put_cb cb);
  static int snapshot_get(raft_io* io, raft_io_snapshot_get* req, raft_io_snapshot_get_cb cb);
  static raft_time time(raft_io* io);
  static int random(raft_io* io, int min, int max);

  void complete_later(std::function<void()> completion);
  void schedule_tick();
  void receive(NodeId from, std::span<const std::uint8_t> bytes);
  void skip_compacted_entries(raft_append_entries& message) const;

  raft_io io_{};
  EventLoop& loop_;
  ForwardReadings time_;
  Transport& transport_;
  RaftLog& log_;
  // Completions posted to the loop check it before touching this object.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  NodeId id_ = 0;
  std::string address_;
  unsigned tick_ms_ = 0;
  raft_io_tick_cb tick_ = nullptr;
  raft_io_recv_cb recv_ = nullptr;
  std::optional<EventLoop::TimerId> tick_timer_;
  bool closed_ = false;
  // While Raft handles an AppendEntries: the last index it proves the logs share.
  std::optional<raft_index> answering_append_up_to_;
  // Completions posted but not yet run, by sequence number, so close() can run them in order.
  std::map<std::uint64_t, std::function<void()>> pending_;
  std::uint64_t next_pending_ = 0;
  // Addresses of the servers Raft has named; Raft keeps pointers into these strings.
  std::map<NodeId, std::string> addresses_;
};

}  // namespace tidepool::cluster::internal
