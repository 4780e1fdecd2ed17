// tp-lock-bench: the distributed lock manager's figures on loopback. Four nodes in one process,
// each with its own thread, TCP transport on its own loopback address and LockManager, the way
// four tided processes talk:
//   - uncontended grant+release per second, coordinator on the requesting node (local) and on
//     another node (remote), with 1 and with 64 requests in flight;
//   - the same through the node's lock cache, which keeps the idle lock: repeated use of a
//     resource another node coordinates;
//   - contended hand-off: two nodes take turns holding EX on one resource that a third
//     coordinates; the time from the holder's release to the waiter's grant, p50 and p99;
//   - recovery: 100,000 locks held across the cluster, one node leaves the view; the time until
//     every survivor's coordinator has rebuilt its table.
//
// Usage: tp-lock-bench [SECONDS]    (default 3 per throughput figure)
#include "lockmgr/lock_manager.h"

#include <algorithm>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <cstdio>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cluster/event_loop.h"
#include "cluster/ring.h"
#include "cluster/tcp_transport.h"
#include "lockmgr/lock_cache.h"

namespace asio = boost::asio;
using namespace tidepool;
using namespace tidepool::lockmgr;
using cluster::NodeId;
using Clock = std::chrono::steady_clock;

namespace {

constexpr NodeId kNodes = 4;

struct Node {
  explicit Node(NodeId id) : id(id) {
    loop = cluster::make_asio_event_loop(io.get_executor());
    cluster::TcpTransportOptions options;
    options.self = id;
    options.listen_address = "127.0.0.1" + std::to_string(10 + id) + ":0";
    auto started = cluster::TcpTransport::start(io.get_executor(), *loop, options);
    if (!started.ok()) {
      std::fprintf(stderr, "tp-lock-bench: %s\n", started.status().to_string().c_str());
      std::exit(1);
    }
    transport = std::move(started).value();
    LockManagerOptions lock_options;
    lock_options.self = id;
    locks = std::make_unique<LockManager>(*loop, *transport, lock_options);
    cache = std::make_unique<LockCache>(
        *loop, *locks, LockCacheOptions{},
        [](const ResourceName&, Range, Mode, std::function<void()> done) { done(); });
    thread = std::thread([this] { io.run(); });
  }
  ~Node() { stop(); }

  // Runs `task` on the node's loop and waits for it.
  template <typename Task>
  auto on_loop(Task task) {
    std::promise<decltype(task())> result;
    loop->post([&] {
      if constexpr (std::is_void_v<decltype(task())>) {
        task();
        result.set_value();
      } else {
        result.set_value(task());
      }
    });
    return result.get_future().get();
  }

  void stop() {
    if (!thread.joinable()) return;
    on_loop([this] {
      cache.reset();
      locks.reset();
      transport.reset();
    });
    work.reset();
    io.stop();
    thread.join();
    loop.reset();
  }

  NodeId id;
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  std::unique_ptr<cluster::EventLoop> loop;
  std::unique_ptr<cluster::TcpTransport> transport;
  std::unique_ptr<LockManager> locks;
  std::unique_ptr<LockCache> cache;
  std::thread thread;
};

// Resource ids whose coordinator, among `up`, is `coordinator`.
std::vector<std::uint64_t> resources_coordinated_by(NodeId coordinator,
                                                    const std::vector<NodeId>& up,
                                                    std::size_t count, std::uint64_t first) {
  cluster::Ring ring(up);
  std::vector<std::uint64_t> ids;
  for (std::uint64_t id = first; ids.size() < count; ++id) {
    if (ring.owner(cluster::Ring::key_of(static_cast<std::uint64_t>(ResourceKind::data), id)) ==
        coordinator) {
      ids.push_back(id);
    }
  }
  return ids;
}

// Keeps `in_flight` lock+release cycles going from `node` on distinct resources for `seconds`;
// returns cycles per second.
double cycles_per_second(Node& node, const std::vector<std::uint64_t>& resources, double seconds) {
  struct Run {
    Node* node;
    Clock::time_point end;
    std::uint64_t completed = 0;
    std::size_t outstanding = 0;
    std::promise<void> finished;
    void cycle(std::uint64_t resource) {
      outstanding++;
      LockSpec spec{{ResourceKind::data, resource}, Mode::exclusive};
      node->locks->lock(spec, [this, resource](const LockResult& result) {
        outstanding--;
        if (!result.granted()) std::abort();
        (void)node->locks->release(result.lock.id);
        completed++;
        if (Clock::now() < end) {
          cycle(resource);
        } else if (outstanding == 0) {
          finished.set_value();
        }
      });
    }
  } run;
  run.node = &node;
  const auto start = Clock::now();
  run.end =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  node.loop->post([&] {
    for (std::uint64_t resource : resources) run.cycle(resource);
  });
  run.finished.get_future().wait();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  return static_cast<double>(run.completed) / elapsed;
}

// Acquire+release cycles per second through the node's lock cache on one resource, once the
// first acquisition brought the lock.
double cached_cycles_per_second(Node& node, std::uint64_t resource, double seconds) {
  const ResourceName name{ResourceKind::data, resource};
  std::promise<LockId> first;
  node.on_loop([&] {
    node.cache->acquire(name, Mode::exclusive, {0, 4096},
                        [&first](Result<CachedLock> lock) { first.set_value(lock->id); });
  });
  const LockId id = first.get_future().get();
  node.on_loop([&] { node.cache->release(id); });
  return node.on_loop([&] {
    const auto start = Clock::now();
    const auto end =
        start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    std::uint64_t cycles = 0;
    for (Clock::time_point now = start; now < end; now = Clock::now()) {
      for (int i = 0; i < 1024; ++i, ++cycles) {
        LockId held{};
        node.cache->acquire(name, Mode::exclusive, {0, 4096},
                            [&held](Result<CachedLock> lock) { held = lock->id; });
        node.cache->release(held);
      }
    }
    return static_cast<double>(cycles) /
           std::chrono::duration<double>(Clock::now() - start).count();
  });
}

// Two nodes take turns holding EX on one resource; returns hand-off times in microseconds.
std::vector<double> hand_offs(Node& first, Node& second, std::uint64_t resource, int count) {
  struct Turns {
    Node* nodes[2];
    std::uint64_t resource;
    int remaining;
    std::atomic<std::int64_t> released_at{0};
    std::vector<double> latencies;  // written by whichever node is granted, one at a time
    std::promise<void> finished;

    void want(int who) {
      Node* node = nodes[who];
      LockSpec spec{{ResourceKind::data, resource}, Mode::exclusive};
      auto id = std::make_shared<LockId>();
      *id = node->locks->lock(
          spec,
          [this, who](const LockResult& result) {
            if (!result.granted()) std::abort();
            const std::int64_t released = released_at.exchange(0);
            if (released != 0) {
              latencies.push_back(
                  static_cast<double>(Clock::now().time_since_epoch().count() - released) / 1000.0);
            }
            if (--remaining == 0) return finished.set_value();
            // The other node asks next; this one gives way when told to.
            nodes[1 - who]->loop->post([this, who] { want(1 - who); });
          },
          [this, node, id](LockId, Mode, Range) {
            released_at = Clock::now().time_since_epoch().count();
            (void)node->locks->release(*id);
          });
    }
  } turns;
  turns.nodes[0] = &first;
  turns.nodes[1] = &second;
  turns.resource = resource;
  turns.remaining = count;
  first.loop->post([&] { turns.want(0); });
  turns.finished.get_future().wait();
  return turns.latencies;
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[std::min(values.size() - 1, static_cast<std::size_t>(p * values.size()))];
}

// Every node takes `per_node` PR locks on resources of its own; returns once all are granted.
void hold_many(std::vector<std::unique_ptr<Node>>& nodes, std::uint64_t per_node) {
  for (auto& node : nodes) {
    std::promise<void> all;
    std::uint64_t granted = 0;
    node->loop->post([&] {
      for (std::uint64_t i = 0; i < per_node; ++i) {
        LockSpec spec{{ResourceKind::data, 1'000'000 * node->id + i}, Mode::protected_read};
        node->locks->lock(spec, [&](const LockResult& result) {
          if (!result.granted()) std::abort();
          if (++granted == per_node) all.set_value();
        });
      }
    });
    all.get_future().wait();
  }
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 3;
  if (seconds <= 0) {
    std::fprintf(stderr, "usage: tp-lock-bench [SECONDS]\n");
    return 2;
  }
  std::vector<std::unique_ptr<Node>> nodes;
  std::vector<NodeId> up;
  for (NodeId id = 1; id <= kNodes; ++id) {
    nodes.push_back(std::make_unique<Node>(id));
    up.push_back(id);
  }
  for (auto& node : nodes) {
    node->on_loop([&] {
      for (auto& peer : nodes) {
        if (peer->id != node->id) {
          node->transport->set_address(peer->id, peer->transport->local_address());
        }
      }
      node->locks->set_view(1, up);
    });
  }
  Node& one = *nodes[0];
  const auto local1 = resources_coordinated_by(1, up, 1, 1);
  const auto local64 = resources_coordinated_by(1, up, 64, 1);
  const auto remote1 = resources_coordinated_by(2, up, 1, 1);
  const auto remote64 = resources_coordinated_by(2, up, 64, 1);
  cycles_per_second(one, remote64, 0.5);  // connect and warm up

  std::printf("uncontended lock+release cycles per second (4 nodes, loopback TCP)\n");
  std::printf("  %-32s %12.0f\n", "local coordinator, 1 in flight",
              cycles_per_second(one, local1, seconds));
  std::printf("  %-32s %12.0f\n", "local coordinator, 64 in flight",
              cycles_per_second(one, local64, seconds));
  std::printf("  %-32s %12.0f\n", "remote coordinator, 1 in flight",
              cycles_per_second(one, remote1, seconds));
  std::printf("  %-32s %12.0f\n", "remote coordinator, 64 in flight",
              cycles_per_second(one, remote64, seconds));
  const auto cached = resources_coordinated_by(2, up, 1, 1'000'000).front();
  std::printf("  %-32s %12.0f\n", "remote coordinator, lock cached",
              cached_cycles_per_second(one, cached, seconds));

  const auto contended = resources_coordinated_by(2, up, 1, 5'000'000).front();
  auto latencies = hand_offs(*nodes[0], *nodes[2], contended, 2000);
  std::printf("contended EX hand-off between nodes 1 and 3 (coordinator node 2), %zu hand-offs\n",
              latencies.size());
  std::printf("  release to grant: p50 %.0f us, p99 %.0f us\n", percentile(latencies, 0.5),
              percentile(latencies, 0.99));

  constexpr std::uint64_t kHeld = 100'000;
  hold_many(nodes, kHeld / kNodes);
  nodes.back()->stop();
  const std::vector<NodeId> survivors(up.begin(), up.end() - 1);
  const auto start = Clock::now();
  for (NodeId id : survivors)
    nodes[id - 1]->on_loop([&] { nodes[id - 1]->locks->set_view(2, survivors); });
  for (bool done = false; !done;) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    done = true;
    for (NodeId id : survivors) {
      done = done && nodes[id - 1]->on_loop([&] {
        return !nodes[id - 1]->locks->recovering() && nodes[id - 1]->locks->settled();
      });
    }
  }
  const double recovery_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  std::uint64_t rebuilt = 0;
  for (NodeId id : survivors) {
    rebuilt += nodes[id - 1]->on_loop(
        [&] { return nodes[id - 1]->locks->statistics().coordinated_locks; });
  }
  std::printf(
      "recovery: %llu locks held on %llu nodes, node %llu leaves: %.1f ms until the %llu "
      "survivors' tables (%llu locks) are rebuilt\n",
      static_cast<unsigned long long>(kHeld), static_cast<unsigned long long>(kNodes),
      static_cast<unsigned long long>(kNodes), recovery_ms,
      static_cast<unsigned long long>(survivors.size()), static_cast<unsigned long long>(rebuilt));
  return 0;
}
