#include "daemon/job_engine.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include "common/callback_awaitable.h"
#include "daemon/config_objects.h"
#include "daemon/filepool.h"
#include "daemon/jobs.h"
#include "store/namespace_record.h"
#include "tiering/smartpools.h"

namespace tidepool::daemon {
namespace {

namespace asio = boost::asio;
using tiering::Job;
using tiering::JobState;

constexpr std::chrono::milliseconds kProposeDeadline{5000};
constexpr std::chrono::seconds kLastProtectRetry{3600};
constexpr std::chrono::seconds kMaxReturnDelay{600};

}  // namespace

JobEngine::JobEngine(asio::any_io_executor strand, Membership& membership, store::Store& store,
                     JobEngineOptions options)
    : strand_(std::move(strand)),
      membership_(membership),
      store_(store),
      options_(options),
      ticker_(strand_) {}

JobEngine::~JobEngine() { stop(); }

void JobEngine::start() { tick(); }

void JobEngine::view_changed() { plan_soon(); }

void JobEngine::stop() {
  stopped_ = true;
  ticker_.cancel();
  if (running_) running_->stopping = true;
}

void JobEngine::tick() {
  if (stopped_) return;
  ticker_.expires_after(options_.tick);
  ticker_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopped_) return;
    plan_soon();
    tick();
  });
}

bool JobEngine::leading() const {
  cluster::GroupMember* group = membership_.group();
  return !stopped_ && group != nullptr && group->is_leader();
}

std::int64_t JobEngine::unix_now() const {
  return std::chrono::duration_cast<std::chrono::seconds>(
             clock().now().time_since_epoch())
      .count();
}

void JobEngine::plan_soon() {
  if (stopped_) return;
  if (planning_) {
    plan_again_ = true;
    return;
  }
  planning_ = true;
  asio::co_spawn(strand_, plan_until_settled(), asio::detached);
}

asio::awaitable<void> JobEngine::plan_until_settled() {
  do {
    plan_again_ = false;
    auto planning = plan();
    co_await std::move(planning);
  } while (plan_again_ && !stopped_);
  planning_ = false;
}

asio::awaitable<Status> JobEngine::propose(cluster::Change change) {
  cluster::GroupClient* client = membership_.client();
  if (client == nullptr) co_return error(Errc::unavailable, "this node is not a member");
  auto proposing = await_callback<Status>([client, change = std::move(change)](auto done) {
    client->propose(change, kProposeDeadline, done);
  });
  co_return co_await std::move(proposing);
}

asio::awaitable<void> JobEngine::start_due_schedules(std::int64_t now) {
  if (!counting_since_) counting_since_ = now;
  for (const tiering::JobTypeSpec& spec : tiering::job_types()) {
    if (!leading()) co_return;
    const StoredJobType type = job_type_of(membership_.group()->view(), spec);
    const tiering::JobTypeView settled = tiering::settle(spec, type.settings);
    const std::int64_t since =
        type.settings.last_scheduled != 0 ? type.settings.last_scheduled : *counting_since_;
    if (!tiering::schedule_due(settled, since, now)) continue;
    tiering::JobTypeSettings marked = type.settings;
    marked.last_scheduled = now;
    auto marking = propose(job_type_update(type, marked));
    if (const Status s = co_await std::move(marking); !s.ok() || !leading()) continue;
    const std::vector<StoredJob> jobs = jobs_of(membership_.group()->view());
    auto job = tiering::start_job({.type = std::string(spec.name)}, settled, plain_jobs(jobs),
                                  next_job_id(jobs), now);
    if (!job.ok()) {
      spdlog::info("jobs: the scheduled start of {} is skipped: {}", spec.name,
                   job.status().message());
      continue;
    }
    auto creating = propose(job_create(*job));
    const Status created = co_await std::move(creating);
    if (created.ok()) {
      spdlog::info("jobs: {}[{}] started by its schedule", spec.name, job->id);
    } else {
      spdlog::warn("jobs: the scheduled start of {} failed: {}", spec.name, created.message());
    }
  }
}

asio::awaitable<void> JobEngine::keep_protection(std::int64_t now) {
  const auto steady_now = clock().steady_now();
  const std::chrono::seconds delay = repair_delay(membership_.group()->view());
  // A new leader counts anew: a node back must be placed on again well before weeks pass.
  const std::chrono::seconds return_delay = std::min(delay, kMaxReturnDelay);
  std::map<cluster::NodeId, NodeState> states;
  std::set<cluster::NodeId> down_past_delay;
  std::set<cluster::NodeId> up_past_delay;
  for (const cluster::NodeInfo& node : membership_.group()->view().nodes) {
    NodeState state{node.up, steady_now};
    if (auto seen = node_states_.find(node.id);
        seen != node_states_.end() && seen->second.up == node.up) {
      state = seen->second;
    }
    states.emplace(node.id, state);
    if (steady_now - state.since >= (node.up ? return_delay : delay)) {
      (node.up ? up_past_delay : down_past_delay).insert(node.id);
    }
  }
  node_states_ = std::move(states);
  const LostNodes lost = lost_nodes_of(membership_.group()->view());
  if (const std::optional<LostNodes> next =
          plan_lost_nodes(lost, membership_.group()->view(), down_past_delay, up_past_delay)) {
    auto marking = propose(lost_nodes_update(*next));
    if (const Status s = co_await std::move(marking); !s.ok()) {
      spdlog::warn("jobs: the lost nodes could not be marked: {}", s.message());
      co_return;
    }
    if (next->nodes != lost.nodes) {
      std::string names;
      for (const cluster::NodeId node : next->nodes) {
        names += (names.empty() ? "" : ", ") + std::to_string(node);
      }
      spdlog::info("jobs: nodes lost (down past the repair delay of {} s): {}", delay.count(),
                   names.empty() ? std::string("none") : names);
    }
    if (!leading()) co_return;
  }
  const LostNodes marked = lost_nodes_of(membership_.group()->view());
  if (marked.protected_generation >= marked.generation) {
    protecting_.reset();
    auto removing = remove_smartfailed(marked);
    co_await std::move(removing);
    co_return;
  }
  const std::vector<StoredJob> jobs = jobs_of(membership_.group()->view());
  if (protecting_) {
    const auto ran = std::ranges::find_if(
        jobs, [this](const StoredJob& stored) { return stored.job.id == protecting_->job; });
    if (ran != jobs.end() && !tiering::ended(ran->job.state)) co_return;
    const tiering::Progress* progress = ran != jobs.end() ? &ran->job.checkpoint.progress : nullptr;
    const bool whole = progress != nullptr && ran->job.state == JobState::succeeded &&
                       progress->files_misplaced == 0 && progress->errors == 0;
    const Protecting ended = *protecting_;
    protecting_.reset();
    if (!whole) {
      protection_left_undone_ = {ended.generation, membership_.group()->view().up_nodes()};
      protect_retry_at_ = steady_now + protect_backoff_;
      spdlog::info("jobs: FlexProtect[{}] left files it could not restripe: it runs again in {} s",
                   ended.job, protect_backoff_.count());
      protect_backoff_ = std::min(2 * protect_backoff_, kLastProtectRetry);
      co_return;
    }
    protect_backoff_ = kFirstProtectRetry;
    protection_left_undone_.reset();
    LostNodes done = marked;
    done.protected_generation = ended.generation;
    auto noting = propose(lost_nodes_update(done));
    if (const Status s = co_await std::move(noting); !s.ok()) {
      spdlog::warn("jobs: what FlexProtect[{}] protected could not be noted: {}", ended.job,
                   s.message());
    }
    co_return;
  }
  if (steady_now < protect_retry_at_ &&
      protection_left_undone_ ==
          ProtectionLeftUndone{marked.generation, membership_.group()->view().up_nodes()}) {
    co_return;
  }
  const tiering::JobTypeSpec& spec = *tiering::find_job_type(tiering::kFlexProtectJob);
  const tiering::JobTypeView type =
      tiering::settle(spec, job_type_of(membership_.group()->view(), spec).settings);
  // One under way (started by hand, or by a leader before) ends first: it may have passed
  // files by.
  auto job = tiering::start_job({.type = std::string(spec.name)}, type, plain_jobs(jobs),
                                next_job_id(jobs), now);
  if (!job.ok()) co_return;
  auto creating = propose(job_create(*job));
  if (const Status s = co_await std::move(creating); !s.ok()) {
    spdlog::warn("jobs: {} could not be started: {}", spec.name, s.message());
    co_return;
  }
  spdlog::info("jobs: {}[{}] started: the nodes file data is placed on changed", spec.name,
               job->id);
  protecting_ = Protecting{job->id, marked.generation};
}

asio::awaitable<void> JobEngine::remove_smartfailed(const LostNodes& protected_nodes) {
  for (const cluster::NodeId node : protected_nodes.smartfailing) {
    const cluster::GroupView& view = membership_.group()->view();
    if (view.node(node) == nullptr) continue;
    const std::optional<store::NamespaceRecord> record = store::namespace_of(view);
    if (!record) co_return;
    const bool holds_a_shard =
        std::ranges::any_of(record->places, [node](const store::ShardPlace& place) {
          return place.home == node || place.mirror == node;
        });
    if (holds_a_shard) continue;
    if (!protected_nodes.leaving.contains(node)) {
      // Over the record as read: a stopfail written since makes this fail, and the next tick
      // finds the node SmartFailed no more.
      LostNodes deciding = protected_nodes;
      deciding.leaving.insert(node);
      auto marking = propose(lost_nodes_update(deciding));
      if (const Status s = co_await std::move(marking); !s.ok()) {
        spdlog::info("jobs: node {}'s removal waits: the lost nodes' record changed ({})", node,
                     s.message());
        co_return;
      }
    }
    spdlog::info(
        "jobs: node {} is SmartFailed: what it held has its copies on other nodes; it "
        "leaves the cluster",
        node);
    auto removing = propose(cluster::Change::remove_node(node));
    if (const Status s = co_await std::move(removing); !s.ok()) {
      spdlog::warn("jobs: node {} could not be removed after its SmartFail: {}", node, s.message());
    }
    co_return;
  }
}

asio::awaitable<void> JobEngine::plan() {
  if (!leading()) {
    counting_since_.reset();
    node_states_.clear();
    protecting_.reset();
    if (running_) running_->stopping = true;
    co_return;
  }
  const std::int64_t now = unix_now();
  auto scheduling = start_due_schedules(now);
  co_await std::move(scheduling);
  if (!leading()) co_return;
  auto protecting = keep_protection(now);
  co_await std::move(protecting);
  if (!leading()) co_return;

  const std::vector<StoredJob> jobs = jobs_of(membership_.group()->view());
  const std::optional<std::uint64_t> chosen = tiering::job_to_run(plain_jobs(jobs), now);
  if (running_ && running_->id != chosen) running_->stopping = true;
  // A job marked running that is not to run now waits: a job of higher priority came, it is
  // outside its impact policy's hours, or its coordinator is gone and it is not first.
  for (const StoredJob& stored : jobs) {
    if (stored.job.state != JobState::running || stored.job.id == chosen) continue;
    Job waiting = stored.job;
    waiting.state = JobState::waiting;
    waiting.coordinator = 0;
    auto proposing = propose(job_update(stored, waiting));
    if (const Status s = co_await std::move(proposing); !s.ok() || !leading()) co_return;
    spdlog::info("jobs: {}[{}] waits for its turn", stored.job.type, stored.job.id);
  }
  for (const std::uint64_t id : jobs_past_history(jobs)) {
    auto deleting =
        propose(cluster::Change::delete_object(std::string(kJobKind), job_object_name(id)));
    if (const Status s = co_await std::move(deleting); !s.ok() || !leading()) co_return;
  }
  if (!chosen || running_) co_return;  // nothing to run, or a run here is still under way
  if (retry_at_ && clock().steady_now() < *retry_at_) co_return;
  const std::optional<StoredJob> stored = job_of(membership_.group()->view(), *chosen);
  if (!stored) co_return;
  Job next = stored->job;
  next.state = JobState::running;
  next.coordinator = membership_.self().id;
  ++next.runs;
  if (next.started == 0) next.started = now;
  auto taking = propose(job_update(*stored, next));
  if (const Status s = co_await std::move(taking); !s.ok() || !leading() || running_) co_return;
  running_ = std::make_shared<Run>(Run{next.id, false});
  spdlog::info("jobs: {}[{}] runs here (run {})", next.type, next.id, next.runs);
  asio::co_spawn(strand_, run(next.id, running_), asio::detached);
}

asio::awaitable<Status> JobEngine::save(const Job& job, const Run& state) {
  if (stopped_ || state.stopping) co_return error(Errc::unavailable, "the run was stopped");
  const std::optional<StoredJob> stored = job_of(membership_.group()->view(), job.id);
  if (!stored || stored->job.state != JobState::running ||
      stored->job.coordinator != membership_.self().id) {
    co_return error(Errc::precondition_failed, "the job was paused, cancelled or taken over");
  }
  auto proposing = propose(job_update(*stored, job));
  co_return co_await std::move(proposing);
}

// A run that stopped (paused, cancelled, made to wait, or cut off by a transient error) keeps
// what it did since its last save, unless another run of the job began meanwhile: its
// checkpoint is whole wherever it stopped (tiering/smartpools.h).
asio::awaitable<void> JobEngine::keep_progress(const Job& job) {
  const std::optional<StoredJob> stored = job_of(membership_.group()->view(), job.id);
  if (!stored || stored->job.runs != job.runs || stored->job.state == JobState::succeeded ||
      stored->job.state == JobState::failed) {
    co_return;
  }
  Job kept = stored->job;
  kept.checkpoint = job.checkpoint;
  kept.phases = job.phases;
  kept.errors = job.errors;
  auto proposing = propose(job_update(*stored, kept));
  if (const Status s = co_await std::move(proposing); !s.ok()) {
    spdlog::info("jobs: job {} takes up from its last checkpoint: {}", job.id, s.message());
  }
}

asio::awaitable<std::set<std::string>> JobEngine::full_pools(const cluster::GroupView& view,
                                                             std::set<std::string> known) {
  constexpr std::chrono::milliseconds kStatsDeadline{1000};
  std::map<std::string, PoolUsage> usage;
  std::set<std::string> unanswered;
  for (const cluster::NodeInfo& node : view.nodes) {
    if (!node.up || stopped_) continue;
    auto asking = membership_.stats_of(node.id, kStatsDeadline);
    const Result<NodeStats> stats = co_await std::move(asking);
    if (!stats.ok()) {
      unanswered.insert(node.pool);
      continue;
    }
    usage[node.pool].used_bytes += stats->used_bytes;
    usage[node.pool].size_bytes += stats->size_bytes;
  }
  const std::uint32_t limit = transfer_limit_percent(view);
  std::set<std::string> full = pools_past_limit(usage, limit);
  // A pool found full stays so until every one of its nodes has answered again.
  for (const std::string& pool : known) {
    if (unanswered.contains(pool)) full.insert(pool);
  }
  for (const std::string& pool : full) {
    if (known.contains(pool)) continue;
    spdlog::warn("jobs: node pool {} is past its transfer limit ({}% full): it receives no "
                 "moved data",
                 pool, limit);
  }
  for (const std::string& pool : known) {
    if (!full.contains(pool)) spdlog::info("jobs: node pool {} receives moved data again", pool);
  }
  co_return full;
}

asio::awaitable<Status> JobEngine::save_measuring(const tiering::Job& job, const Run& state,
                                                  std::set<std::string>& full) {
  // A copy: the view may change while the nodes are asked.
  const cluster::GroupView view = membership_.group()->view();
  auto measuring = full_pools(view, full);
  full = co_await std::move(measuring);
  auto saving = save(job, state);
  co_return co_await std::move(saving);
}

asio::awaitable<void> JobEngine::run(std::uint64_t id, std::shared_ptr<Run> state) {
  // A run works to the policies and tiers as they were when it started, and sends nothing to
  // a pool past its transfer limit, measured again at every save.
  const cluster::GroupView view = membership_.group()->view();
  auto measuring = full_pools(view, {});
  std::set<std::string> full = co_await std::move(measuring);
  if (stopped_) co_return;
  const std::optional<StoredJob> stored = job_of(view, id);
  Status done = error(Errc::not_found, "the job is gone");
  Job job;
  if (stored) {
    job = stored->job;
    tiering::RunHooks hooks;
    hooks.policies = [&view] { return policies_of(view).set; };
    hooks.placed_nodes = [placed = pool_nodes(view)](const std::string& pool) {
      const auto found = placed.find(pool);
      return found == placed.end() ? std::vector<std::uint64_t>{} : found->second;
    };
    hooks.pool_for = [&view, &full](const std::string& target,
                                    const std::string& pool) -> std::optional<std::string> {
      std::optional<std::string> to = pool_for(view, target, pool);
      if (to && *to != pool && full.contains(*to)) return std::nullopt;
      return to;
    };
    hooks.save = [this, state, &full](const Job& j) { return save_measuring(j, *state, full); };
    hooks.stopping = [state] { return state->stopping; };
    tiering::RunOptions run_options;
    run_options.save_every = options_.save_every;
    auto running = tiering::run_smartpools(store_, job, std::move(hooks), run_options);
    done = co_await std::move(running);
  }
  if (stopped_) co_return;
  if (done.ok()) {
    tiering::end_job(job, JobState::succeeded, "", unix_now());
    auto saving = save(job, *state);
    done = co_await std::move(saving);
    if (stopped_) co_return;
    if (done.ok()) {
      const tiering::Progress& p = job.checkpoint.progress;
      spdlog::info("jobs: {}[{}] succeeded: {} files scanned, {} matched, {} patterns set, {} misplaced, "
                   "{} errors",
                   job.type, job.id, p.files_scanned, p.files_matched, p.patterns_set,
                   p.files_misplaced, p.errors);
    }
  }
  if (!done.ok() && stored) {
    auto keeping = keep_progress(job);
    co_await std::move(keeping);
    if (stopped_) co_return;
  }
  if (!done.ok()) {
    spdlog::info("jobs: the run of job {} stopped: {}", id, done.message());
    if (is_transient(done.code()) && !state->stopping) {
      retry_at_ = clock().steady_now() + options_.retry_after;
    }
  }
  if (running_ == state) running_.reset();
  plan_soon();
}

}  // namespace tidepool::daemon
