// tp-policy-eval: how fast one shard evaluates file pool policies (issue 7's acceptance figure:
// files per second per node, over 1,000,000 files of a shard). One store on this node's disk,
// no peers:
//   - populate: N files (1,000 a directory) under /ifs/projects/pNN/{dataset,results}/dNNNNN
//     and /ifs/scratch/uNN/dNNNNN, with sizes from bytes to 256 MiB and one file in ten not
//     read for 60 to 90 days, the rest within 20 days; `--concurrency` creates in flight, so
//     group commit batches them;
//   - predicates with a column (`accessed > 30d`, `size >= 1MiB`): policy::to_sql, then
//     Store::find_files page by page, as a shard finds its candidates (SQLite 3.40 plans
//     these pages as a range scan of the inodes table by inode, not through the atime or size
//     index: see bench/README.md);
//   - a path glob (`path =~ /ifs/projects/*/dataset/**`), which has no column: a depth-first
//     walk through readdir with attributes, policy::matches() on every file, as the SmartPools
//     job walks;
//   - those predicates again by the same walk, whose counts must be find_files'.
// Prints the populate rate and a table of files/s (files of the shard over the seconds one
// evaluation took). Exit status 1 when find_files and the walk disagree or the store fails.
//
// Usage: tp-policy-eval [--files N] [--concurrency C] [--dir DIR]
//   N: files (default 1,000,000); C: creates in flight (64); DIR: where the store goes, kept
//   afterwards (default: a new directory under $TMPDIR or /tmp, removed at the end).
#include <stdlib.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "policy/filter.h"
#include "store/store.h"
#include "tiering/smartpools.h"

namespace asio = boost::asio;
using namespace tidepool;
using Steady = std::chrono::steady_clock;

namespace {

constexpr std::uint64_t kFilesPerDirectory = 1000;
constexpr std::uint64_t kProjects = 20;  // and as many scratch users
constexpr std::uint32_t kDirectoryPage = 1024;
constexpr std::uint32_t kCandidatePage = store::kMaxCandidatePage;
constexpr std::uint64_t kMaxFiles = 10'000'000;
constexpr std::int64_t kDayNs = 24LL * 3600 * 1'000'000'000;
const store::Caller kRoot{0, 0, {}};

// The store's directory when this run made it: removed on the way out, also after a failure.
std::string g_made_directory;

[[noreturn]] void fail(const std::string& what, const Status& status) {
  std::fprintf(stderr, "tp-policy-eval: %s: %s\n", what.c_str(), status.to_string().c_str());
  if (!g_made_directory.empty()) std::filesystem::remove_all(g_made_directory);
  std::exit(1);
}

double seconds_since(Steady::time_point start) {
  return std::chrono::duration<double>(Steady::now() - start).count();
}

// Runs `op` to completion on `io`.
template <typename T>
T run(asio::io_context& io, asio::awaitable<T> op) {
  auto done = asio::co_spawn(io, std::move(op), asio::use_future);
  io.restart();
  io.run();
  return done.get();
}

// A deterministic mix of the bits of `i` (splitmix64).
std::uint64_t mix(std::uint64_t i) {
  i += 0x9e3779b97f4a7c15ull;
  i = (i ^ (i >> 30)) * 0xbf58476d1ce4e5b9ull;
  i = (i ^ (i >> 27)) * 0x94d049bb133111ebull;
  return i ^ (i >> 31);
}

// What file `i` is created with: one in ten not read for 60 to 90 days, the rest within 20
// days; half of them under 64 KiB, 30 % up to 1 MiB, 20 % from 1 to 256 MiB.
store::AttributeChanges initial_attributes(std::uint64_t i, std::int64_t now_ns) {
  const std::uint64_t h = mix(i);
  store::AttributeChanges a;
  a.atime = store::SetTime::client_time;
  const bool cold = h % 10 == 0;
  const std::uint64_t seconds = (h >> 8) % (cold ? 30 * 86400 : 20 * 86400);
  a.atime_ns =
      now_ns - (cold ? 60 * kDayNs : 0) - static_cast<std::int64_t>(seconds) * 1'000'000'000;
  const std::uint64_t band = (h >> 40) % 10;
  const std::uint64_t r = h >> 20;
  a.size = band < 5   ? r % (64u << 10)
           : band < 8 ? (64u << 10) + r % (960u << 10)
                      : (1u << 20) + r % (255u << 20);
  return a;
}

// The leaf directory of directory number `d`: six in ten under a project's dataset, two in
// ten under its results, two in ten under a user's scratch.
std::vector<std::string> leaf_path(std::uint64_t d) {
  char leaf[24];
  std::snprintf(leaf, sizeof leaf, "d%05" PRIu64, d);
  const std::uint64_t kind = d % 10;
  const std::string owner = std::to_string(d / 10 % kProjects);
  if (kind < 6) return {"projects", "p" + owner, "dataset", leaf};
  if (kind < 8) return {"projects", "p" + owner, "results", leaf};
  return {"scratch", "u" + owner, leaf};
}

// Looks `name` up in `parent`, making it a directory when it is not there.
asio::awaitable<Result<store::InodeId>> directory(store::Store& store, store::InodeId parent,
                                                  std::string name) {
  auto looking = store.lookup(parent, name, kRoot);
  auto found = co_await std::move(looking);
  if (found.ok()) co_return found->object.inode;
  if (found.code() != Errc::not_found) co_return found.status();
  auto making = store.mkdir(parent, name, {}, kRoot);
  auto made = co_await std::move(making);
  if (!made.ok()) co_return made.status();
  co_return made->attributes.inode;
}

// One of `workers` coroutines making directories and files: each takes the next number until
// none is left (the io_context runs them on one thread).
struct Populate {
  store::Store& store;
  std::uint64_t files;
  std::int64_t now_ns;
  std::vector<store::InodeId> leaves;
  std::uint64_t next = 0;

  asio::awaitable<Status> make_files() {
    while (next < files) {
      const std::uint64_t i = next++;
      char name[24];
      std::snprintf(name, sizeof name, "f%07" PRIu64, i);
      auto creating = store.create(leaves[i / kFilesPerDirectory], name, store::CreateMode::guarded,
                                   initial_attributes(i, now_ns), {}, kRoot);
      auto created = co_await std::move(creating);
      if (!created.ok()) co_return created.status();
    }
    co_return Status{};
  }
};

void populate(asio::io_context& io, store::Store& store, std::uint64_t files, int concurrency,
              std::int64_t now_ns) {
  const std::uint64_t directories = (files + kFilesPerDirectory - 1) / kFilesPerDirectory;
  const auto start = Steady::now();
  Populate p{store, files, now_ns, {}, 0};
  // Directories one after the other: there are a thousand times fewer of them.
  for (std::uint64_t d = 0; d < directories; ++d) {
    store::InodeId at = store::kRootInode;
    for (const std::string& name : leaf_path(d)) {
      Result<store::InodeId> inode = run(io, directory(store, at, name));
      if (!inode.ok()) fail("mkdir " + name, inode.status());
      at = *inode;
    }
    p.leaves.push_back(at);
  }
  const double directory_seconds = seconds_since(start);
  const auto files_start = Steady::now();
  std::vector<std::future<Status>> workers;
  for (int w = 0; w < concurrency; ++w) {
    workers.push_back(asio::co_spawn(io, p.make_files(), asio::use_future));
  }
  io.restart();
  io.run();
  for (auto& worker : workers) {
    if (Status s = worker.get(); !s.ok()) fail("create", s);
  }
  const double file_seconds = seconds_since(files_start);
  std::printf("populate: %" PRIu64 " directories in %.1f s; %" PRIu64
              " files in %.1f s = %.0f files/s (%d creates in flight)\n",
              directories, directory_seconds, files, file_seconds,
              static_cast<double>(files) / file_seconds, concurrency);
  std::fflush(stdout);
}

struct Count {
  std::uint64_t files = 0;
  std::uint64_t matches = 0;
  double seconds = 0;
};

// Through the shard's SQL: the predicate's candidates, page after page, among the shard's
// `files`. `filter` must compile exactly (no path or name condition), so every candidate is a
// match.
asio::awaitable<Result<Count>> by_sql(store::Store& store, policy::Filter filter,
                                      std::int64_t now, std::uint64_t files) {
  const policy::SqlPredicate sql = policy::to_sql(filter, now);
  if (!sql.exact) co_return error(Errc::invalid_argument, "the predicate does not compile exactly");
  Count count;
  count.files = files;
  store::InodeId after = 0;
  do {
    auto finding = store.find_files(sql.where, sql.values, after, kCandidatePage);
    auto page = co_await std::move(finding);
    if (!page.ok()) co_return page.status();
    count.matches += page->files.size();
    after = page->next;
  } while (after != 0);
  co_return count;
}

// Through the namespace, as the SmartPools job walks: depth-first, every regular file's facts
// against the filter.
asio::awaitable<Result<Count>> by_walk(store::Store& store, policy::Filter filter,
                                       std::int64_t now) {
  struct Frame {
    store::InodeId inode;
    std::string path;
  };
  std::vector<Frame> stack{{store::kRootInode, "/ifs"}};
  Count count;
  while (!stack.empty()) {
    const Frame frame = std::move(stack.back());
    stack.pop_back();
    std::uint64_t cookie = 0;
    std::uint64_t verifier = 0;
    for (bool eof = false; !eof;) {
      auto reading = store.readdir(frame.inode, cookie, verifier, kDirectoryPage, true, kRoot);
      auto page = co_await std::move(reading);
      if (!page.ok()) co_return page.status();
      for (const store::DirectoryEntry& e : page->entries) {
        cookie = e.cookie;
        if (e.name == "." || e.name == ".." || !e.attributes) continue;
        std::string path = frame.path + "/" + e.name;
        if (e.attributes->type == store::FileType::directory) {
          stack.push_back({e.inode, std::move(path)});
        } else if (e.attributes->type == store::FileType::regular) {
          ++count.files;
          if (policy::matches(filter, tiering::facts_of(*e.attributes, std::move(path)), now)) {
            ++count.matches;
          }
        }
      }
      verifier = page->cookie_verifier;
      eof = page->eof;
    }
  }
  co_return count;
}

struct Row {
  std::string predicate;
  std::string method;
  Count count;
};

policy::Filter parsed(const char* expression) {
  Result<policy::Filter> filter = policy::parse_expression(expression);
  if (!filter.ok()) fail(expression, filter.status());
  return *filter;
}

int usage() {
  std::fprintf(stderr, "usage: tp-policy-eval [--files N] [--concurrency C] [--dir DIR]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t files = 1'000'000;
  int concurrency = 64;
  std::string dir;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) return usage();
    const char* value = argv[++i];
    if (arg == "--files") {
      files = std::strtoull(value, nullptr, 10);
    } else if (arg == "--concurrency") {
      concurrency = std::atoi(value);
    } else if (arg == "--dir") {
      dir = value;
    } else {
      return usage();
    }
  }
  if (files == 0 || files > kMaxFiles || concurrency < 1 || concurrency > 4096) return usage();
  const bool keep = !dir.empty();
  if (dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/tp-policy-eval-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      std::fprintf(stderr, "tp-policy-eval: mkdtemp %s: %s\n", pattern.c_str(),
                   std::strerror(errno));
      return 1;
    }
    dir = pattern;
    g_made_directory = dir;
  } else if (std::filesystem::exists(dir) && !std::filesystem::is_empty(dir)) {
    std::fprintf(stderr, "tp-policy-eval: %s is not empty\n", dir.c_str());
    return 2;
  }

  store::StoreOptions options;
  options.data_dir = dir;
  Result<std::unique_ptr<store::LocalStore>> opened = store::Store::open(options);
  if (!opened.ok()) fail("open " + dir, opened.status());
  std::unique_ptr<store::LocalStore> shard = std::move(opened).value();
  asio::io_context io;

  std::printf("policy evaluation over one shard: %" PRIu64 " files, %" PRIu64
              " per directory, store in %s\n",
              files, kFilesPerDirectory, dir.c_str());
  std::fflush(stdout);
  const std::int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count();
  populate(io, *shard, files, concurrency, now_ns);
  // The policies are evaluated a little later than the files were made, as a job would.
  const std::int64_t now = now_ns / 1'000'000'000 + 60;

  const char* kAtime = "accessed > 30d";
  const char* kSize = "size >= 1MiB";
  const char* kPath = "path =~ /ifs/projects/*/dataset/**";
  std::vector<Row> rows;
  auto measure = [&](const char* expression, const char* method, auto evaluate) {
    // Each evaluation starts without the store's attribute and listing caches.
    if (Status s = run(io, shard->drop_caches()); !s.ok()) fail("drop_caches", s);
    const auto start = Steady::now();
    Result<Count> count = run(io, evaluate(parsed(expression)));
    if (!count.ok()) fail(std::string(expression) + " by " + method, count.status());
    count->seconds = seconds_since(start);
    rows.push_back({expression, method, *count});
    std::fprintf(stderr, "  %s by %s: %.1f s\n", expression, method, count->seconds);
  };
  auto sql = [&](policy::Filter filter) { return by_sql(*shard, std::move(filter), now, files); };
  auto walk = [&](policy::Filter filter) { return by_walk(*shard, std::move(filter), now); };
  measure(kAtime, "find_files (SQL)", sql);
  measure(kSize, "find_files (SQL)", sql);
  // The first walk of a process pays for its first touches of memory; this one is not counted.
  if (Result<Count> warm = run(io, walk(parsed(kPath))); !warm.ok()) fail("walk", warm.status());
  measure(kPath, "walk + matches()", walk);
  measure(kAtime, "walk + matches()", walk);
  measure(kSize, "walk + matches()", walk);

  std::printf("\n%-36s | %-18s | %9s | %9s | %8s | %10s\n", "predicate", "method", "files",
              "matches", "seconds", "files/s");
  std::printf("%s\n", std::string(36 + 18 + 9 + 9 + 8 + 10 + 15, '-').c_str());
  for (const Row& row : rows) {
    std::printf("%-36s | %-18s | %9" PRIu64 " | %9" PRIu64 " | %8.3f | %10.0f\n",
                row.predicate.c_str(), row.method.c_str(), row.count.files, row.count.matches,
                row.count.seconds, static_cast<double>(row.count.files) / row.count.seconds);
  }
  for (const char* expression : {kAtime, kSize}) {
    std::printf("SQL for %s: %s\n", expression,
                policy::to_sql(parsed(expression), now).where.c_str());
  }

  // Every walk sees every file, and finds what find_files found for the same predicate.
  int status = 0;
  for (const Row& walked : rows) {
    if (walked.count.files != files) {
      std::fprintf(stderr, "tp-policy-eval: the walk for %s saw %" PRIu64 " files of %" PRIu64 "\n",
                   walked.predicate.c_str(), walked.count.files, files);
      status = 1;
    }
    for (const Row& found : rows) {
      if (found.predicate == walked.predicate && found.method != walked.method &&
          found.method.starts_with("find_files") && found.count.matches != walked.count.matches) {
        std::fprintf(stderr,
                     "tp-policy-eval: %s: find_files found %" PRIu64 " files, the walk %" PRIu64
                     "\n",
                     walked.predicate.c_str(), found.count.matches, walked.count.matches);
        status = 1;
      }
    }
  }
  shard->close();
  shard.reset();
  if (!keep) std::filesystem::remove_all(dir);
  return status;
}
