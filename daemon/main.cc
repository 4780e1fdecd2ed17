// tided: one Tidepool node. Reads its configuration, opens the store and serves NFS until
// SIGTERM or SIGINT.
#include <fcntl.h>
#include <malloc.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <array>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cache/coherent_store.h"
#include "cache/directory_locks.h"
#include "cache/layout_locks.h"
#include "common/config.h"
#include "common/fail_points.h"
#include "common/log.h"
#include "common/thread_name.h"
#include "daemon/activity.h"
#include "daemon/admin_api.h"
#include "daemon/cache_reports.h"
#include "daemon/config_objects.h"
#include "daemon/filepool.h"
#include "daemon/http.h"
#include "daemon/job_engine.h"
#include "daemon/membership.h"
#include "daemon/metrics.h"
#include "nfsd/server.h"
#include "store/namespace_service.h"
#include "store/store.h"

namespace {

using namespace tidepool;
namespace asio = boost::asio;

// An io_context whose queued handlers can be destroyed before any context is: one left queued
// on a client context may hold the backend's strand (a shipped call's reply), so destroying the
// contexts one by one, each with its own queue, would reach into a context already gone (ASan
// saw it at a node's stop).
class IoContext : public asio::io_context {
 public:
  using asio::execution_context::shutdown;
  using asio::io_context::io_context;
};

struct Options {
  std::string config_path;
  std::string pid_file;
  std::string log_file;
  bool daemonize = false;
};

constexpr const char* kUsage =
    "usage: tided --config FILE [--daemonize] [--pid-file FILE] [--log-file FILE]\n"
    "       tided --print-default-config\n";

// Each shard keeps up to 1024 data files open, two descriptors each (data and checksums),
// beside its databases, the pack and every client's socket: more than the soft limit many
// systems start a daemon with (1024). The hard limit is what the administrator allows.
void raise_open_file_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) {
    spdlog::warn("cannot raise the open file limit to {}: {}", limit.rlim_max,
                 std::strerror(errno));
  }
}

[[noreturn]] void refuse(const std::string& reason) {
  std::fprintf(stderr, "tided: %s\n", reason.c_str());
  std::exit(1);
}

Options parse_arguments(int argc, char** argv) {
  Options o;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) refuse(a + " needs a value\n" + kUsage);
      return args[++i];
    };
    if (a == "--config") {
      o.config_path = value();
    } else if (a == "--pid-file") {
      o.pid_file = value();
    } else if (a == "--log-file") {
      o.log_file = value();
    } else if (a == "--daemonize") {
      o.daemonize = true;
    } else if (a == "--print-default-config") {
      std::cout << config_reference();
      std::exit(0);
    } else if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      std::exit(0);
    } else {
      refuse("unknown argument '" + a + "'\n" + kUsage);
    }
  }
  if (o.config_path.empty()) refuse(std::string("--config is required\n") + kUsage);
  return o;
}

daemon::NodeStats local_stats(const NodeConfig& config, const daemon::ActivityRates& rates) {
  daemon::NodeStats stats;
  stats.in_bytes_per_second = rates.nfs_in_per_second();
  stats.out_bytes_per_second = rates.nfs_out_per_second();
  struct statvfs vfs;
  if (::statvfs(config.data_dir.c_str(), &vfs) == 0) {
    stats.size_bytes = static_cast<std::uint64_t>(vfs.f_blocks) * vfs.f_frsize;
    stats.used_bytes = static_cast<std::uint64_t>(vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize;
  }
  return stats;
}

daemon::ActivityTotals activity_totals(const nfsd::NfsServer& server,
                                       const daemon::Membership& membership) {
  daemon::ActivityTotals totals;
  totals.at = std::chrono::steady_clock::now();
  const nfsd::NfsServer::Traffic traffic = server.traffic();
  totals.nfs_bytes_in = traffic.bytes_received;
  totals.nfs_bytes_out = traffic.bytes_sent;
  totals.calls = server.calls().calls();
  totals.nfs3_calls = server.calls().nfs3_calls();
  const cluster::TcpTransport::Stats backend = membership.transport_stats();
  totals.backend_bytes_in = backend.bytes_received;
  totals.backend_bytes_out = backend.bytes_sent;
  daemon::read_process_totals(totals);
  return totals;
}

// Fail point kLeakAtExit. The block's address goes to the log, so the compiler cannot drop the
// allocation nobody frees; this frame is gone when the leak check at exit reads the stacks.
[[gnu::noinline]] void leak_a_block() {
  const auto* block = new std::array<char, 4096>{};
  spdlog::warn("fail point {}: leaving a block of {} bytes at {} unfreed", fail_points::kLeakAtExit,
               block->size(), static_cast<const void*>(block));
}

// Runs the node until a stop signal. `report` is called once: with an empty string when the
// node serves, or with the reason it could not start.
int serve(const NodeConfig& config, const std::function<void(const std::string&)>& report) {
  store::StoreOptions store_options;
  store_options.data_dir = config.data_dir;
  store_options.threads = config.store_threads;
  store_options.stripe_unit_bytes = config.stripe_unit_bytes;
  const std::uint64_t l2_bytes = config.l2_budget_bytes.value_or(
      default_l2_budget(static_cast<std::uint64_t>(::sysconf(_SC_PHYS_PAGES)) *
                        static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE))));
  store_options.l2 = store::L2::make(l2_bytes);
  store_options.atime_enabled = config.atime_enabled;
  store_options.atime_grace_period = config.atime_grace_period;
  // Client connections are spread over io_threads io_contexts of one thread each
  // (nfsd/internal/rpc_transport.h); the first also runs the operations other nodes ship here.
  std::vector<std::unique_ptr<IoContext>> client_contexts;
  std::vector<asio::io_context*> contexts;
  using WorkGuard = asio::executor_work_guard<asio::io_context::executor_type>;
  std::vector<WorkGuard> client_work;
  for (std::uint32_t i = 0; i < config.io_threads; ++i) {
    client_contexts.push_back(std::make_unique<IoContext>(1));
    contexts.push_back(client_contexts.back().get());
    client_work.push_back(asio::make_work_guard(*client_contexts.back()));
  }
  asio::io_context& io = *contexts.front();
  // Caught from here on: a SIGTERM that comes while the node starts, as soon as its ports
  // answer, waits in the set for the handler below and stops the node as any other would.
  asio::signal_set signals(io, SIGTERM, SIGINT);
  // The cluster side — group view, backend transport, admin API — runs on one thread of its
  // own, all of it on one strand, so client load never delays heartbeats.
  IoContext backend_io(1);
  auto backend_work = asio::make_work_guard(backend_io);
  auto strand = asio::make_strand(backend_io);
  // Held across renames between shards: the cluster's once its lock manager runs.
  auto directory_locks = std::make_shared<cache::DirectoryLocks>();
  // Taken by the shards' homes around a change of a file's layout, which nodes cache.
  auto layout_locks = std::make_shared<cache::LayoutLocks>();
  store_options.layout_locks = layout_locks;
  // Where new files' data goes, as the file pool policies of the view say.
  auto placement = std::make_shared<daemon::PolicyPlacement>();
  store_options.placement = placement;
  store::NamespaceService shipping(strand, io.get_executor(), store_options, config.node_id,
                                   config.namespace_shards, directory_locks, daemon::pool_nodes,
                                   daemon::smartfailing_nodes);
  if (Status opened = shipping.open_local(); !opened.ok()) {
    report(opened.message());
    return 1;
  }
  cache::CacheOptions cache_options;
  cache_options.l1_bytes = config.ram_budget_bytes;
  cache_options.block_bytes = config.stripe_unit_bytes;
  cache::CoherentStore cache(
      shipping.store(), [&shipping](store::InodeId inode) { return shipping.data_is_local(inode); },
      cache_options, shipping.unit_client());
  cache.set_atime_policy(config.atime_enabled, config.atime_grace_period);
  auto server = nfsd::NfsServer::start(contexts, config, cache);
  if (!server.ok()) {
    report(server.status().message());
    return 1;
  }

  daemon::ActivityRates rates;
  // Set once the membership is open; the hooks run on the strand only after that.
  std::unique_ptr<daemon::JobEngine> jobs;
  daemon::Membership::Hooks hooks;
  hooks.view_changed = [&](const cluster::GroupView& view) {
    std::vector<ExportConfig> exports;
    for (auto& [id, entry] : daemon::exports_of(view)) exports.push_back(std::move(entry));
    (*server)->set_exports(std::move(exports));
    const daemon::AtimePolicy atime = daemon::atime_policy(view, config);
    shipping.set_atime_policy(atime.enabled, atime.grace_period);
    cache.set_atime_policy(atime.enabled, atime.grace_period);
    fail_points::set_pause(fail_points::kCrossShardDecide, daemon::cross_shard_decide_pause(view));
    fail_points::set_pause(fail_points::kNlmGrantReply, daemon::nlm_grant_reply_pause(view));
    fail_points::set_pause(fail_points::kAddNodeAfterJoin, daemon::add_node_after_join_pause(view));
    for (const std::string_view name :
         {fail_points::kIgnoreLeases, fail_points::kKeepWhatCallbacksDrop,
          fail_points::kLeakAtExit}) {
      fail_points::set_switch(name, daemon::fail_point_switched_on(view, name));
    }
    const std::optional<store::NamespaceRecord> record = store::namespace_of(view);
    if (record) {
      if (Status s = (*server)->set_handle_key(record->handle_key); !s.ok()) {
        spdlog::error("cannot take the cluster's file handle key: {}", s.message());
      }
    }
    placement->follow(view);
    shipping.follow(record, view);
    if (jobs) jobs->view_changed();
  };
  hooks.local_stats = [&] { return local_stats(config, rates); };
  hooks.serve_rpc = [&](cluster::RpcEndpoint& rpc) { shipping.serve(rpc); };
  hooks.nlm_locks_lost = [&] { (*server)->nlm_locks_lost(); };
  hooks.lease = [&](std::shared_ptr<const cluster::Lease> lease) {
    (*server)->set_lease(std::move(lease));
  };
  hooks.advisory_locks = [&](std::shared_ptr<lockmgr::AdvisoryLocks> locks) {
    (*server)->set_advisory_locks(locks);
  };
  hooks.lock_manager = [&](cluster::EventLoop* loop, lockmgr::LockManager* manager) {
    cache.attach(loop, manager);
    directory_locks->attach(loop, manager);
    layout_locks->attach(loop, manager);
  };
  hooks.nlm_sessions = [&](std::function<void(std::vector<nfsd::NlmSession>)> done) {
    (*server)->nlm_sessions(std::move(done));
  };
  hooks.system_statistics = [&] { return rates.report(config.node_id); };
  hooks.client_statistics = [&] {
    return daemon::client_statistics_report(config.node_id, (*server)->calls().clients());
  };
  hooks.cache_statistics = [&] {
    return daemon::cache_statistics_report(config.node_id, cache.statistics(), cache.l1_budget(),
                                           shipping.reads(), shipping.l2_usage());
  };
  hooks.flush_cache = [&](bool l1, bool l2, std::function<void(Status)> done) {
    if (l1) cache.flush();
    if (!l2) return done({});
    shipping.drop_caches(std::move(done));
  };
  hooks.removed = [&](const std::string&) {
    (*server)->stop();
    if (jobs) jobs->stop();
    shipping.attach(nullptr);
  };
  fail_points::set_pause(fail_points::kClusterCreateRecords, config.cluster_create_pause);
  auto membership = daemon::Membership::open(strand, config, std::move(hooks));
  if (!membership.ok()) {
    report(membership.status().message());
    return 1;
  }
  daemon::JobEngineOptions job_options;
  job_options.save_every = config.job_checkpoint_interval;
  job_options.retry_after = config.job_retry_after;
  jobs = std::make_unique<daemon::JobEngine>(strand, **membership, cache, job_options);
  asio::post(strand, [&] {
    shipping.attach(membership->get());
    jobs->start();
  });
  std::unique_ptr<daemon::HttpsServer> admin;
  auto metrics = [&] {
    return daemon::render_metrics(**membership, **server, local_stats(config, rates),
                                  shipping.integrity(), cache.statistics(), shipping.reads());
  };
  daemon::AdminApi api(strand, **membership, cache, metrics, [&] {
    if (Status s = admin->set_certificate((*membership)->admin_certificate()); !s.ok()) {
      spdlog::error("admin API keeps its old certificate: {}", s.message());
    }
  });
  auto admin_started = daemon::HttpsServer::start(
      strand, config.admin_address, (*membership)->admin_certificate(),
      [&api](daemon::HttpRequest request) { return api.handle(std::move(request)); });
  if (!admin_started.ok()) {
    report(admin_started.status().message());
    return 1;
  }
  admin = std::move(admin_started).value();

  asio::steady_timer sampler(strand);
  std::function<void()> sample_every_second = [&] {
    sampler.expires_after(std::chrono::seconds(1));
    sampler.async_wait([&](const boost::system::error_code& ec) {
      if (ec) return;
      rates.sample(activity_totals(**server, **membership));
      sample_every_second();
    });
  };
  sample_every_second();

  signals.async_wait([&](const boost::system::error_code& ec, int signal) {
    if (ec) return;
    spdlog::info("signal {}: stopping", signal);
    (*server)->stop();
    asio::post(strand, [&] {
      sampler.cancel();
      jobs->stop();
      admin.reset();
      // A shard's last flush goes to its mirror over the backend: the cluster side stays
      // until it went (closed after, the flush waited 12 s for a backend gone, then failed).
      shipping.close_stores([&] {
        shipping.attach(nullptr);
        membership->reset();
        backend_work.reset();
        backend_io.stop();
      });
    });
    client_work.clear();
    for (asio::io_context* context : contexts) context->stop();
  });
  spdlog::info("node {} serving NFSv3 on {} (nfs {}, mount {}, portmap {}), admin API on {}",
               config.node_id, config.frontend_address, config.nfs_port, config.mount_port,
               config.portmap_port, config.admin_address);
  report("");
  std::thread backend([&backend_io] {
    name_this_thread("backend");
    backend_io.run();
  });
  // The first client context runs on the main thread, which keeps the process's name.
  std::vector<std::thread> threads;
  for (std::size_t i = 1; i < contexts.size(); ++i) {
    threads.emplace_back([context = contexts[i], i] {
      name_this_thread("nfs-io-" + std::to_string(i));
      context->run();
    });
  }
  io.run();
  for (auto& t : threads) t.join();
  backend.join();
  server->reset();
  shipping.close();
  // What is left queued goes while every context is still whole (IoContext).
  backend_io.shutdown();
  for (const auto& context : client_contexts) context->shutdown();
  if (fail_points::switched_on(fail_points::kLeakAtExit)) leak_a_block();
  spdlog::info("stopped");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // READ replies and WRITE records are up to 1 MiB each. Left to glibc's defaults they are
  // mmapped and unmapped per call, and every page faults in again; kept on the heap they are
  // reused (measured: warm sequential reads spent a tenth of their time in page faults).
  mallopt(M_MMAP_THRESHOLD, 8 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  Options options = parse_arguments(argc, argv);
  auto config = load_config_file(options.config_path);
  if (!config.ok()) refuse(config.status().message());
  if (!options.log_file.empty()) config->log_file = options.log_file;
  if (Status s = init_logging(config->log_level, config->log_file); !s.ok()) refuse(s.message());
  raise_open_file_limit();

  auto write_pid_file = [&]() {
    if (options.pid_file.empty()) return;
    std::ofstream(options.pid_file) << ::getpid() << "\n";
  };

  if (!options.daemonize) {
    return serve(*config, [&](const std::string& reason) {
      if (!reason.empty()) refuse(reason);
      write_pid_file();
    });
  }

  // The parent waits for the child to start serving (or to fail) so the caller sees the reason
  // and the exit status; threads start only in the child.
  int ready[2];
  if (::pipe(ready) != 0) refuse("pipe() failed");
  pid_t child = ::fork();
  if (child < 0) refuse("fork() failed");
  if (child > 0) {
    ::close(ready[1]);
    std::string message;
    char buffer[512];
    ssize_t n;
    while ((n = ::read(ready[0], buffer, sizeof buffer)) > 0) message.append(buffer, n);
    if (message == "ok") return 0;
    refuse(message.empty() ? "the daemon exited during start-up" : message);
  }
  ::close(ready[0]);
  ::setsid();
  int null = ::open("/dev/null", O_RDWR);
  if (null >= 0) {
    ::dup2(null, STDIN_FILENO);
    ::dup2(null, STDOUT_FILENO);
    if (!config->log_file.empty()) ::dup2(null, STDERR_FILENO);
  }
  return serve(*config, [&](const std::string& reason) {
    if (reason.empty()) write_pid_file();
    std::string message = reason.empty() ? "ok" : reason;
    (void)!::write(ready[1], message.data(), message.size());
    ::close(ready[1]);
  });
}
