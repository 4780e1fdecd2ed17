// tp-backend-rpc: backend RPC figures on loopback, beside iperf3 on the same loopback in the
// same run. Two nodes in one process, each with its own thread and TCP transport on its own
// loopback address, the way two tided processes talk: round trips per second with 1 and with
// 64 calls in flight (64-byte requests, empty replies), and MB/s for 1 MiB requests with 8 in
// flight, with mutual TLS and without. iperf3 (one stream, the same seconds) is the ceiling the
// ratio is taken against; it is skipped with a note if iperf3 is not installed.
//
// Usage: tp-backend-rpc [SECONDS]    (default 3 per figure)
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "cluster/event_loop.h"
#include "cluster/rpc.h"
#include "cluster/tcp_transport.h"
#include "cluster/tls.h"

namespace asio = boost::asio;
namespace fs = std::filesystem;
using namespace tidepool;
using namespace tidepool::cluster;

namespace {

constexpr std::uint32_t kMethod = 1;

// One node: a thread running its io_context, an event loop, a transport and an endpoint.
struct Node {
  Node(NodeId id, const std::string& address, std::optional<TlsFiles> tls) {
    loop = make_asio_event_loop(io.get_executor());
    TcpTransportOptions options;
    options.self = id;
    options.listen_address = address;
    options.tls = std::move(tls);
    auto started = TcpTransport::start(io.get_executor(), *loop, options);
    if (!started.ok()) {
      std::fprintf(stderr, "tp-backend-rpc: %s\n", started.status().to_string().c_str());
      std::exit(1);
    }
    transport = std::move(started).value();
    rpc = std::make_unique<RpcEndpoint>(*loop, *transport, [] { return Epoch{1}; });
    thread = std::thread([this] { io.run(); });
  }
  ~Node() {
    std::promise<void> done;
    asio::post(io, [&] {
      rpc.reset();
      transport.reset();
      done.set_value();
    });
    done.get_future().wait();
    work.reset();
    io.stop();
    thread.join();
    loop.reset();
  }
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  std::unique_ptr<EventLoop> loop;
  std::unique_ptr<TcpTransport> transport;
  std::unique_ptr<RpcEndpoint> rpc;
  std::thread thread;
};

struct Figure {
  double calls_per_second;
  double megabytes_per_second;
};

// Keeps `in_flight` calls of `request_bytes` going from `client` to node 2 for `seconds`.
Figure measure(Node& client, std::size_t in_flight, std::size_t request_bytes, double seconds) {
  struct Run {
    Node* client;
    xdr::Buffer request;
    std::chrono::steady_clock::time_point end;
    std::uint64_t completed = 0;
    std::uint64_t failed = 0;
    std::size_t outstanding = 0;
    std::promise<void> finished;
    void issue() {
      outstanding++;
      client->rpc->call(2, kMethod, request, std::chrono::seconds(10),
                        [this](Result<xdr::Buffer> reply) {
                          outstanding--;
                          reply.ok() ? completed++ : failed++;
                          if (std::chrono::steady_clock::now() < end) {
                            issue();
                          } else if (outstanding == 0) {
                            finished.set_value();
                          }
                        });
    }
  } run;
  run.client = &client;
  run.request.assign(request_bytes, 0x5a);
  auto start = std::chrono::steady_clock::now();
  run.end = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                        std::chrono::duration<double>(seconds));
  client.loop->post([&] {
    for (std::size_t i = 0; i < in_flight; ++i) run.issue();
  });
  run.finished.get_future().wait();
  double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (run.failed != 0) std::fprintf(stderr, "  (%llu calls failed)\n", (unsigned long long)run.failed);
  double rate = static_cast<double>(run.completed) / elapsed;
  return {rate, rate * static_cast<double>(request_bytes) / 1e6};
}

// iperf3's loopback throughput in MB/s, one stream, or a negative value if it cannot run.
double iperf3_megabytes_per_second(double seconds) {
  if (std::system("command -v iperf3 >/dev/null 2>&1") != 0) return -1;
  std::string port = std::to_string(5201 + (::getpid() % 1000));
  std::string server = "iperf3 -s -1 -B 127.0.0.103 -p " + port + " >/dev/null 2>&1 &";
  if (std::system(server.c_str()) != 0) return -1;
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  std::string client = "iperf3 -c 127.0.0.103 -p " + port + " -t " +
                       std::to_string(static_cast<int>(seconds)) +
                       " -f m 2>/dev/null | awk '/receiver/ {print $7, $8}'";
  FILE* out = ::popen(client.c_str(), "r");
  if (out == nullptr) return -1;
  double value = -1;
  char unit[32] = {};
  if (std::fscanf(out, "%lf %31s", &value, unit) != 2) value = -1;
  ::pclose(out);
  if (value < 0) return -1;
  // iperf3 -f m prints Mbits/sec (or Gbits/sec when it prefers).
  double megabits = std::string(unit).starts_with("Gbits") ? value * 1000 : value;
  return megabits / 8;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = argc > 1 ? std::atof(argv[1]) : 3;
  if (seconds <= 0) {
    std::fprintf(stderr, "usage: tp-backend-rpc [SECONDS]\n");
    return 2;
  }
  fs::path dir = fs::temp_directory_path() / ("tp-backend-rpc-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string ca = (dir / "ca.crt").string(), ca_key = (dir / "ca.key").string();
  auto tls_for = [&](const std::string& name) {
    std::string cert = (dir / (name + ".crt")).string(), key = (dir / (name + ".key")).string();
    if (!issue_certificate(ca, ca_key, name, cert, key).ok()) std::exit(1);
    return TlsFiles{ca, cert, key};
  };
  if (!create_certificate_authority("bench", ca, ca_key).ok()) return 1;
  TlsFiles tls1 = tls_for("node-1"), tls2 = tls_for("node-2");

  double iperf = iperf3_megabytes_per_second(seconds);
  std::printf("%-6s %16s %16s %16s %12s\n", "tls", "rtt/s @1", "rtt/s @64", "MB/s 1MiB@8",
              "vs iperf3");
  for (bool tls : {false, true}) {
    Figure one, many, bulk;
    {
      Node server(2, "127.0.0.102:0", tls ? std::optional(tls2) : std::nullopt);
      Node client(1, "127.0.0.101:0", tls ? std::optional(tls1) : std::nullopt);
      server.rpc->handle(kMethod, [](NodeId, std::span<const std::uint8_t>,
                                     RpcEndpoint::Reply reply) { reply(xdr::Buffer{}); });
      std::promise<void> ready;
      client.loop->post([&] {
        client.transport->set_address(2, server.transport->local_address());
        ready.set_value();
      });
      ready.get_future().wait();
      measure(client, 1, 64, 0.5);  // connect and warm up
      one = measure(client, 1, 64, seconds);
      many = measure(client, 64, 64, seconds);
      bulk = measure(client, 8, 1 << 20, seconds);
    }
    std::printf("%-6s %16.0f %16.0f %16.0f %12s\n", tls ? "on" : "off", one.calls_per_second,
                many.calls_per_second, bulk.megabytes_per_second,
                iperf > 0 ? (std::to_string(bulk.megabytes_per_second / iperf).substr(0, 4) + "x")
                                .c_str()
                          : "n/a");
  }
  if (iperf > 0) {
    std::printf("iperf3 loopback, one stream: %.0f MB/s\n", iperf);
  } else {
    std::printf("iperf3 not available: no ratio\n");
  }
  fs::remove_all(dir);
  return 0;
}
