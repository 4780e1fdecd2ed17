#include "tiering/smartpools.h"

#include <algorithm>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace tidepool::tiering {
namespace {

namespace asio = boost::asio;
using asio::awaitable;

constexpr std::string_view kScanPhase = "scan";
// A move that fails for a transient reason stops runs up to this one; later runs note it.
constexpr std::uint32_t kRunsBeforeAFailedMoveIsNoted = 3;

std::int64_t whole_seconds(std::int64_t ns) {
  constexpr std::int64_t kNs = 1'000'000'000;
  return ns / kNs - (ns % kNs < 0 ? 1 : 0);
}

std::string child_path(const std::string& directory, const std::string& name) {
  return directory + "/" + name;
}

// One run of a job: the walk, its pace and its saves.
class Walk {
 public:
  Walk(store::Store& store, Job& job, RunHooks hooks, RunOptions options)
      : store_(store),
        job_(job),
        hooks_(std::move(hooks)),
        options_(options),
        clock_(options.clock ? *options.clock : real_clock()),
        now_(std::chrono::duration_cast<std::chrono::seconds>(
                 clock_.now().time_since_epoch())
                 .count()),
        policies_(hooks_.policies()),
        run_start_(clock_.steady_now()),
        last_save_(run_start_) {
    if (job_.phases.empty() || job_.phases.back().name != kScanPhase) {
      job_.phases.push_back({std::string(kScanPhase), 0});
    }
    job_.phase = std::string(kScanPhase);
  }

  awaitable<Status> run() {
    auto working = job_.type == kFilePolicyJob ? go_through_candidates() : walk();
    const Status worked = co_await std::move(working);
    account_time();
    co_return worked;
  }

 private:
  // FilePolicy: each policy's filter, compiled to SQL, finds its candidates in the shard's
  // database (Store::find_files, rather than by a walk); a candidate is worked on when that
  // policy is the first to match it — a file an earlier policy matches was worked on as that
  // one's candidate. Files no policy matches are the default policy's, and not visited.
  awaitable<Status> go_through_candidates() {
    Checkpoint& at = job_.checkpoint;
    find_policy_taken_up(at);
    while (at.policy < policies_.policies.size()) {
      const policy::Policy& policy = policies_.policies[at.policy];
      at.policy_name = policy.name;
      const policy::SqlPredicate sql = policy::to_sql(policy.filter, now_);
      auto finding = store_.find_files(sql.where, sql.values, at.after, options_.page_entries);
      Result<store::CandidatePage> page = co_await std::move(finding);
      if (!page.ok()) {
        TP_CO_RETURN_IF_ERROR(noted("policy " + policy.name, page.status()));
        page = store::CandidatePage{};
      }
      for (const store::Candidate& candidate : page->files) {
        const policy::Resolution wanted = policy::resolve(
            policies_, facts_of(candidate.attributes, candidate.path), now_);
        const bool first_match = wanted.policy == policy.name;
        if (first_match) {
          auto applying = apply(candidate.attributes, candidate.path, wanted);
          TP_CO_RETURN_IF_ERROR(co_await std::move(applying));
        }
        // Counted once done, as the checkpoint moves past it.
        ++job_.checkpoint.progress.files_scanned;
        if (first_match) ++job_.checkpoint.progress.files_matched;
        at.after = candidate.attributes.inode;
        TP_CO_RETURN_IF_ERROR(co_await pace());
      }
      if (page->next == 0) {
        ++at.policy;
        at.after = 0;
      } else {
        at.after = page->next;  // past files passed over, or a window with none
      }
    }
    co_return Status{};
  }

  // A run taken up from a checkpoint goes on with the policy it names; when the list changed
  // meanwhile, with that policy where it is now, or, when it is gone, from the first again.
  void find_policy_taken_up(Checkpoint& at) {
    const std::vector<policy::Policy>& list = policies_.policies;
    if (at.policy_name.empty() ||
        (at.policy < list.size() && list[at.policy].name == at.policy_name)) {
      return;
    }
    const auto found = std::find_if(list.begin(), list.end(), [&](const policy::Policy& p) {
      return p.name == at.policy_name;
    });
    if (found != list.end()) {
      at.policy = static_cast<std::uint32_t>(found - list.begin());
      return;
    }
    note_error(job_,
               "the policies changed while the job ran: it went through them from the first again");
    at.policy = 0;
    at.after = 0;
  }

  awaitable<Status> walk() {
    Checkpoint& at = job_.checkpoint;
    while (!at.frames.empty() || !at.roots_left.empty()) {
      if (at.frames.empty()) {
        auto starting = start_root(at.roots_left.front());
        TP_CO_RETURN_IF_ERROR(co_await std::move(starting));
        continue;
      }
      auto listing = list_next_page();
      TP_CO_RETURN_IF_ERROR(co_await std::move(listing));
    }
    co_return Status{};
  }

  // Takes the next root off the list: its directory goes on the stack; a root that is a file
  // is worked on at once.
  awaitable<Status> start_root(std::string root) {
    auto resolving = resolve(root);
    Result<store::Attributes> found = co_await std::move(resolving);
    std::vector<std::string>& roots = job_.checkpoint.roots_left;
    if (!found.ok()) {
      Status failed = found.status();
      if (failed.code() == Errc::not_found) {
        note_error(job_, root + ": " + failed.message());  // a path the job was given
      } else {
        TP_CO_RETURN_IF_ERROR(noted(root, failed));
      }
      roots.erase(roots.begin());
      co_return Status{};
    }
    if (found->type == store::FileType::directory) {
      ++job_.checkpoint.progress.directories_scanned;
      job_.checkpoint.frames.push_back({found->inode, root, 0, 0});
      roots.erase(roots.begin());
      co_return Status{};
    }
    auto working = work_on(*found, root);
    TP_CO_RETURN_IF_ERROR(co_await std::move(working));
    roots.erase(roots.begin());
    co_return co_await pace();
  }

  awaitable<Result<store::Attributes>> resolve(const std::string& path) {
    auto getting = store_.getattr(store::kRootInode);
    Result<store::Attributes> at = co_await std::move(getting);
    std::size_t start = 5;  // after "/ifs/"
    while (at.ok() && start <= path.size()) {
      std::size_t end = path.find('/', start);
      if (end == std::string::npos) end = path.size();
      auto looking = store_.lookup(at->inode, path.substr(start, end - start), kRoot);
      Result<store::LookupResult> found = co_await std::move(looking);
      if (found.ok()) {
        at = found->object;
      } else {
        at = found.status();
      }
      start = end + 1;
    }
    co_return at;
  }

  // Lists the deepest open directory on from its cookie. A subdirectory met is opened at once
  // (its parent's cookie stays just past it), so the stack only ever grows by depth.
  awaitable<Status> list_next_page() {
    const WalkFrame frame = job_.checkpoint.frames.back();
    auto reading = store_.readdir(frame.inode, frame.cookie, frame.cookie_verifier,
                                  options_.page_entries, true, kRoot);
    Result<store::DirectoryPage> page = co_await std::move(reading);
    if (!page.ok() && page.status().code() == Errc::bad_cookie) {
      // The directory changed under a saved cookie: list it again from the start.
      job_.checkpoint.frames.back().cookie = 0;
      job_.checkpoint.frames.back().cookie_verifier = 0;
      co_return Status{};
    }
    if (!page.ok()) {
      const Status failed = noted(frame.path, page.status());
      if (failed.ok()) job_.checkpoint.frames.pop_back();
      co_return failed;
    }
    // A cookie moves past an entry only once the entry is done and counted, so the checkpoint
    // is whole wherever the run stops.
    for (const store::DirectoryEntry& entry : page->entries) {
      auto pass = [&] {
        job_.checkpoint.frames.back().cookie = entry.cookie;
        job_.checkpoint.frames.back().cookie_verifier = page->cookie_verifier;
      };
      if (entry.name == "." || entry.name == "..") {
        pass();
        continue;
      }
      const std::string path = child_path(frame.path, entry.name);
      if (!entry.attributes) {
        note_error(job_, path + ": no attributes in its directory's listing");
        pass();
        continue;
      }
      if (entry.attributes->type == store::FileType::directory) {
        pass();
        ++job_.checkpoint.progress.directories_scanned;
        job_.checkpoint.frames.push_back({entry.inode, path, 0, 0});
        co_return co_await pace();
      }
      auto working = work_on(*entry.attributes, path);
      TP_CO_RETURN_IF_ERROR(co_await std::move(working));
      pass();
      TP_CO_RETURN_IF_ERROR(co_await pace());
    }
    if (page->eof || page->entries.empty()) job_.checkpoint.frames.pop_back();
    co_return co_await pace();
  }

  // Brings one file to what its policy asks for (FlexProtect: to its pool's nodes); counts it
  // once that is done.
  awaitable<Status> work_on(const store::Attributes& attributes, const std::string& path) {
    if (job_.type == kFlexProtectJob) {
      if (attributes.type == store::FileType::regular) {
        auto protecting = protect(attributes.inode, path);
        TP_CO_RETURN_IF_ERROR(co_await std::move(protecting));
      }
      ++job_.checkpoint.progress.files_scanned;
      co_return Status{};
    }
    const policy::Resolution wanted = policy::resolve(policies_, facts_of(attributes, path), now_);
    if (attributes.type == store::FileType::regular) {
      auto applying = apply(attributes, path, wanted);
      TP_CO_RETURN_IF_ERROR(co_await std::move(applying));
    }
    Progress& progress = job_.checkpoint.progress;
    ++progress.files_scanned;
    if (wanted.policy != policy::kDefaultPolicy) ++progress.files_matched;
    co_return Status{};
  }

  awaitable<Status> apply(const store::Attributes& attributes, const std::string& path,
                          const policy::Resolution& wanted) {
    const store::InodeId inode = attributes.inode;
    auto reading = store_.layout(inode);
    Result<store::Layout> layout = co_await std::move(reading);
    if (!layout.ok()) co_return noted(path, layout.status());
    const std::optional<std::string> destination =
        hooks_.pool_for(wanted.storage_target, layout->pool);
    const bool in_place = destination == layout->pool;
    bool misplaced = !in_place || layout->protection != wanted.protection;
    // A move to another pool, or a restripe within its pool to another protection.
    const bool movable = destination && *destination != store::kWithShard;
    bool moved = false;
    store::Move move;
    if (misplaced && movable && !job_.dry_run) {
      const std::uint64_t pace = budget_of(job_.impact, now_).bytes_per_second;
      auto moving = store_.migrate(inode, *destination, wanted.protection, pace);
      Result<store::Move> placed = co_await std::move(moving);
      // A node lost mid-move (the file's shard home, an owner) stops the run, which is taken
      // up again from its checkpoint, and the move from its watermark, once the group has
      // handed on what the node held. A file that still cannot move after a few runs (a node
      // of either pool down for good) stays, noted; the walk goes on.
      if (placed.ok()) {
        moved = true;
        misplaced = false;
        move = *placed;
      } else if (is_transient(placed.code()) && job_.runs < kRunsBeforeAFailedMoveIsNoted) {
        co_return placed.status();
      } else if (placed.code() != Errc::not_found && placed.code() != Errc::stale) {
        note_error(job_, path + ": not moved: " + placed.status().message());
      }
    } else if (!layout->moving_to.empty() && !job_.dry_run) {
      // A move a crash cut short, to where the file is no longer to go: asking the file to
      // stay where it is gives the move up (its writes stop going to both copies), and may
      // restripe it over the nodes its pool places on now.
      const std::uint64_t pace = budget_of(job_.impact, now_).bytes_per_second;
      auto staying = store_.migrate(inode, layout->pool, layout->protection, pace);
      if (Result<store::Move> stayed = co_await std::move(staying); !stayed.ok()) {
        co_return noted(path, stayed.status());
      }
    }
    const bool pattern_differs = layout->access_pattern != wanted.access_pattern;
    if (pattern_differs && !job_.dry_run) {
      auto setting = store_.set_access_pattern(inode, wanted.access_pattern);
      Result<store::Layout> set = co_await std::move(setting);
      if (!set.ok()) co_return noted(path, set.status());
    }
    Progress& progress = job_.checkpoint.progress;
    if (misplaced) ++progress.files_misplaced;
    if (moved) {
      ++progress.files_moved;
      progress.bytes_moved += move.bytes_copied;
      if (move.resumed_at > 0) ++progress.files_resumed;
    }
    if (pattern_differs) ++progress.patterns_set;
    co_return Status{};
  }

  // Restripes the file over the nodes its pool places data on now, when they are not the ones
  // its data is placed over.
  awaitable<Status> protect(store::InodeId inode, const std::string& path) {
    auto reading = store_.layout(inode);
    Result<store::Layout> layout = co_await std::move(reading);
    if (!layout.ok()) co_return noted(path, layout.status());
    if (layout->pool == store::kWithShard || placed_as_wanted(*layout)) co_return Status{};
    Progress& progress = job_.checkpoint.progress;
    ++progress.files_matched;
    if (job_.dry_run) {
      ++progress.files_misplaced;
      co_return Status{};
    }
    const std::uint64_t pace = budget_of(job_.impact, now_).bytes_per_second;
    auto restriping = store_.migrate(inode, layout->pool, layout->protection, pace);
    Result<store::Move> restriped = co_await std::move(restriping);
    if (restriped.code() == Errc::not_found || restriped.code() == Errc::stale) co_return Status{};
    if (!restriped.ok()) {
      // A file that cannot be restriped now (a node it needs down) stays, noted.
      ++progress.files_misplaced;
      note_error(job_, path + ": not restriped: " + restriped.status().message());
      co_return Status{};
    }
    // The home places over the nodes its own view has: one a change has not reached yet may
    // leave the file as it was.
    if (!placed_as_wanted(restriped->layout)) {
      ++progress.files_misplaced;
      co_return Status{};
    }
    ++progress.files_moved;
    progress.bytes_moved += restriped->bytes_copied;
    if (restriped->resumed_at > 0) ++progress.files_resumed;
    co_return Status{};
  }

  bool placed_as_wanted(const store::Layout& layout) const {
    return layout.moving_to.empty() &&
           store::same_nodes(layout.nodes, hooks_.placed_nodes(layout.pool));
  }

  // What a failure on one file or directory does to the run: a transient one stops it (it is
  // taken up again from its checkpoint later); a file removed meanwhile is passed over; any other
  // is noted in the job, and the walk goes on.
  Status noted(const std::string& path, const Status& failure) {
    if (is_transient(failure.code())) return failure;
    if (failure.code() != Errc::not_found && failure.code() != Errc::stale) {
      note_error(job_, path + ": " + failure.message());
    }
    return {};
  }

  // Between files: stop if asked, keep to the impact policy's rate, save when it is time.
  awaitable<Status> pace() {
    if (hooks_.stopping()) co_return error(Errc::unavailable, "the job was stopped");
    ++worked_;
    // Moved bytes keep to the budget inside each move (Store::migrate); files, here.
    const Budget budget = budget_of(job_.impact, now_);
    if (budget.files_per_second > 0) {
      const auto due = run_start_ + std::chrono::microseconds(worked_ * 1'000'000 /
                                                              budget.files_per_second);
      if (const auto ahead = due - clock_.steady_now(); ahead > std::chrono::milliseconds(5)) {
        asio::steady_timer timer(co_await asio::this_coro::executor, ahead);
        auto waiting = timer.async_wait(asio::use_awaitable);
        co_await std::move(waiting);
      }
    }
    if (clock_.steady_now() - last_save_ < options_.save_every) co_return Status{};
    account_time();
    auto saving = hooks_.save(job_);
    co_return co_await std::move(saving);
  }

  // Adds the time since the last account to the phase's.
  void account_time() {
    const auto now = clock_.steady_now();
    job_.phases.back().seconds += std::chrono::duration_cast<std::chrono::seconds>(
                                      now - last_save_ + carried_)
                                      .count();
    carried_ = (now - last_save_ + carried_) % std::chrono::seconds(1);
    last_save_ = now;
  }

  static inline const store::Caller kRoot{0, 0, {}};

  store::Store& store_;
  Job& job_;
  RunHooks hooks_;
  const RunOptions options_;
  const Clock& clock_;
  const std::int64_t now_;  // Unix seconds the policies are evaluated at
  const policy::PolicySet policies_;
  const std::chrono::steady_clock::time_point run_start_;
  std::chrono::steady_clock::time_point last_save_;
  std::chrono::steady_clock::duration carried_{0};  // under a second not yet in the phase's time
  std::uint64_t worked_ = 0;  // entries this run went through
};

}  // namespace

policy::FileFacts facts_of(const store::Attributes& attributes, std::string path) {
  policy::FileFacts facts;
  facts.path = std::move(path);
  facts.size = attributes.size;
  facts.atime = whole_seconds(attributes.atime_ns);
  facts.mtime = whole_seconds(attributes.mtime_ns);
  facts.ctime = whole_seconds(attributes.ctime_ns);
  facts.birth = whole_seconds(attributes.birth_ns);
  facts.type = policy::type_name(static_cast<unsigned>(attributes.type));
  facts.uid = attributes.uid;
  return facts;
}

awaitable<Status> run_smartpools(store::Store& store, Job& job, RunHooks hooks,
                                 RunOptions options) {
  Walk walk(store, job, std::move(hooks), options);
  auto running = walk.run();
  co_return co_await std::move(running);
}

}  // namespace tidepool::tiering
