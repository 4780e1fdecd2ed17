// The `tide` command tree, as CLI11 parses it. grammar.cc builds the root, its global options and
// the short command groups; each longer group (storagepool, nfs, statistics, filepool, job) is
// built in its own grammar_<group>.cc.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli/commands.h"
#include "cli/requests.h"
#include "common/status.h"

namespace tidepool::cli::internal {

// What a command does with the cluster; its errors exit 1.
using Operation = std::function<Status(Session&)>;
// Checks a command's arguments and returns its operation; its errors exit 2, before anything is
// sent.
using Command = std::function<Result<Operation>()>;

// What the command line is parsed into. Only one command runs, so commands share the fields
// they have in common.
struct Arguments {
  // Global options.
  std::optional<std::string> cluster;
  std::optional<std::string> workdir;
  std::optional<std::string> token;
  std::optional<std::string> timeout;
  bool insecure = false;
  // Commands' options and positionals.
  std::string format = "table";
  std::string name;     // of a cluster, a tier, a node pool or a job type
  std::string address;  // a node's admin address
  std::string setup_secret_file;  // --setup-secret-file of `cluster create` and `add-node`
  std::string id;       // of a node, an export or a job
  std::vector<std::string> children;
  std::vector<std::string> set_children;
  std::vector<std::string> add_children;
  std::vector<std::string> remove_children;
  std::optional<std::string> sysctl;
  bool all_sysctls = false;
  bool read_only = false;  // the flag of `nfs exports create`
  std::string path;        // of `get` and `set`
  std::string access_pattern;  // -a of `set`
  bool details = false;    // -D of `get`
  std::optional<std::string> lock_path;  // --path of `locks list`
  std::optional<std::string> lock_kind;  // --kind of `locks list`
  bool waiters = false;                  // --waiters of `locks list`
  bool flush_l1 = false;                 // --l1 of `flush`
  bool flush_l2 = false;                 // --l2 of `flush`
  bool flush_all = false;                // --all of `flush`
  bool recurse = false;                  // --recurse of `filepool apply`
  bool force = false;                    // --force of every `delete`: no confirmation
  bool no_smartfail = false;             // --no-smartfail of `cluster remove-node`
  std::optional<std::string> flush_node;  // --node of `flush`
  std::string nodes = "all";              // --nodes of `statistics system`
  std::uint32_t iterations = 0;           // --iterations of `statistics system|pstat`
  std::optional<std::string> node;        // --node of `statistics pstat`
  std::string policy;                     // NAME of `filepool policies ...`
  PolicyOptions policy_options;
  ExportOptions export_options;
  JobStartOptions job_start_options;
  JobTypeChanges job_type_changes;
};

// The `tide` command tree: CLI11 parses it, each leaf has its Command.
class Grammar {
 public:
  Grammar();
  Grammar(const Grammar&) = delete;
  Grammar& operator=(const Grammar&) = delete;

  CLI::App& app() { return app_; }
  // OneFS's filter flags, cut out of the command line before it is parsed.
  void set_filter_flags(std::vector<std::string> flags) {
    arguments_.policy_options.filter_flags = std::move(flags);
  }
  // The Command of a leaf of the tree.
  const Command& command_of(const CLI::App* leaf) const { return commands_.at(leaf); }
  Result<GlobalOptions> global_options() const;

 private:
  CLI::App* add_group(CLI::App& parent, const std::string& name, const std::string& description);
  CLI::App* add_command(CLI::App& parent, const std::string& name, const std::string& description,
                        Command command);
  void add_format_option(CLI::App* command);
  void add_force_flag(CLI::App* command);
  void add_setup_secret_option(CLI::App* command);
  // --format table|json|top and --iterations, of the statistics isi shows as top.
  void add_top_format_options(CLI::App* command);
  void add_export_options(CLI::App* command);
  Format format() const { return arguments_.format == "json" ? Format::json : Format::table; }

  void add_cluster_commands();
  void add_storagepool_commands();
  void add_network_commands();
  void add_sysctl_command();
  void add_nfs_commands();
  void add_lock_commands();
  void add_statistics_commands();
  void add_flush_command();
  void add_filepool_commands();
  void add_policy_options(CLI::App* command);
  void add_job_commands();
  void add_jobs_commands(CLI::App& job);
  void add_job_type_commands(CLI::App& job);
  void add_job_report_commands(CLI::App& job);
  void add_job_priority_and_policy(CLI::App* command, std::optional<std::string>& priority,
                                   std::optional<std::string>& policy);

  CLI::App app_;
  Arguments arguments_;
  std::map<const CLI::App*, Command> commands_;
};

}  // namespace tidepool::cli::internal
