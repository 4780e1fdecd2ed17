#include "cli/tide.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>
#include <exception>
#include <functional>
#include <map>
#include <thread>
#include <utility>

#include "cli/commands.h"
#include "cli/https_transport.h"
#include "cli/requests.h"

namespace tidepool::cli {
namespace {

namespace fs = std::filesystem;

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
  // Commands' options and positionals.
  std::string format = "table";
  std::string name;     // of a cluster, a tier, a node pool or a job type
  std::string address;  // a node's admin address
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
  std::optional<std::string> flush_node;  // --node of `flush`
  std::string nodes = "all";              // --nodes of `statistics system`
  std::uint32_t iterations = 0;           // --iterations of `statistics system --format top`
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
  void add_export_options(CLI::App* command);
  Format format() const { return arguments_.format == "json" ? Format::json : Format::table; }

  void add_cluster_commands();
  void add_storagepool_commands();
  void add_sysctl_command();
  void add_nfs_commands();
  void add_lock_commands();
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

Grammar::Grammar() : app_("Administer a Tidepool cluster through its admin API.", "tide") {
  app_.require_subcommand(1);
  // Global options may also follow the command words; subcommands inherit this.
  app_.fallthrough();
  app_.add_option("--cluster", arguments_.cluster,
                  "Admin addresses of nodes, HOST[:PORT] (port 8080) separated by commas, tried "
                  "in order (default: $TIDE_CLUSTER, else the credentials' nodes)")
      ->type_name("ADDR[,ADDR...]");
  app_.add_option("--workdir", arguments_.workdir,
                  "Directory of the credentials file tide.json (default: $TIDE_WORKDIR, else the "
                  "first .tidepool in the current directory or its parents)")
      ->type_name("DIR");
  app_.add_option("--token", arguments_.token,
                  "Bearer token (default: $TIDE_TOKEN, else the credentials' token)")
      ->type_name("TOKEN");
  app_.add_option("--timeout", arguments_.timeout,
                  "Seconds a request may take, connecting included, and that 'filepool apply' "
                  "waits for its job (default 30)")
      ->type_name("SECONDS");
  add_cluster_commands();
  add_format_option(add_command(app_, "status",
                                "Show the cluster: health, nodes, node pools, tiers and jobs",
                                [this]() -> Result<Operation> {
                                  return Operation([format = format()](Session& session) {
                                    return show_status(session, format);
                                  });
                                }));
  CLI::App* get = add_command(
      app_, "get", "Show a file's protection policy and access pattern; -D adds its layout",
      [this]() -> Result<Operation> {
        TP_ASSIGN_OR_RETURN(std::string target, namespace_target(arguments_.path));
        return Operation(
            [target, details = arguments_.details, format = format()](Session& session) {
              return get_file(session, target, details, format);
            });
      });
  get->add_option("PATH", arguments_.path, "Absolute path under /ifs")->required();
  get->add_flag("-D,--details", arguments_.details,
                "Also the inode, its shard's home and mirror, and each stripe unit's nodes");
  add_format_option(get);
  CLI::App* set = add_command(
      app_, "set", "Set how a file's reads prefetch (its access pattern)",
      [this]() -> Result<Operation> {
        TP_ASSIGN_OR_RETURN(std::string target, namespace_target(arguments_.path));
        return Operation([target, changes = Json{{"access_pattern", arguments_.access_pattern}},
                          format = format()](Session& session) {
          return set_file(session, target, changes, format);
        });
      });
  set->add_option("-a,--access-pattern", arguments_.access_pattern,
                  "random (no prefetch), concurrency (moderate, the default) or streaming "
                  "(aggressive)")
      ->check(CLI::IsMember({"random", "concurrency", "streaming"}))
      ->required();
  set->add_option("PATH", arguments_.path, "Absolute path of a regular file under /ifs")
      ->required();
  add_format_option(set);
  add_storagepool_commands();
  add_sysctl_command();
  add_nfs_commands();
  add_lock_commands();
  add_flush_command();
  add_filepool_commands();
  add_job_commands();
}

Result<GlobalOptions> Grammar::global_options() const {
  GlobalOptions options;
  if (arguments_.cluster) {
    Result<std::vector<AdminAddress>> addresses = parse_admin_address_list(*arguments_.cluster);
    if (!addresses.ok()) {
      return error(Errc::invalid_argument, "--cluster: " + addresses.status().message());
    }
    options.cluster = std::move(addresses).value();
  }
  options.workdir = arguments_.workdir;
  options.token = arguments_.token;
  if (arguments_.timeout) {
    TP_ASSIGN_OR_RETURN(options.timeout, parse_timeout(*arguments_.timeout));
  }
  return options;
}

CLI::App* Grammar::add_group(CLI::App& parent, const std::string& name,
                             const std::string& description) {
  CLI::App* group = parent.add_subcommand(name, description);
  group->require_subcommand(1);
  return group;
}

CLI::App* Grammar::add_command(CLI::App& parent, const std::string& name,
                               const std::string& description, Command command) {
  CLI::App* leaf = parent.add_subcommand(name, description);
  commands_.emplace(leaf, std::move(command));
  return leaf;
}

void Grammar::add_format_option(CLI::App* command) {
  command->add_option("--format", arguments_.format, "table (default) or json")
      ->type_name("table|json")
      ->check(CLI::IsMember({"table", "json"}));
}

void Grammar::add_export_options(CLI::App* command) {
  ExportOptions& options = arguments_.export_options;
  command
      ->add_option("--clients", options.clients,
                   "Clients allowed: IPv4 addresses, CIDRs or *; repeat the option or "
                   "separate with commas")
      ->type_name("CLIENT")
      ->allow_extra_args(false);
  command
      ->add_option("--root-squash", options.root_squash,
                   "Requests from uid 0 run as the anonymous uid and gid")
      ->type_name("true|false");
  command
      ->add_option("--map-all", options.map_all,
                   "Every request runs as this uid and gid (GID defaults to the anonymous gid)")
      ->type_name("UID[:GID]");
  command->add_option("--anon-uid", options.anon_uid, "The anonymous uid")->type_name("UID");
  command->add_option("--anon-gid", options.anon_gid, "The anonymous gid")->type_name("GID");
}

void Grammar::add_cluster_commands() {
  CLI::App* cluster = add_group(app_, "cluster", "Create the cluster and change its members");

  CLI::App* create = add_command(
      *cluster, "create", "Make a node the first member of a new cluster and save the credentials",
      [this]() -> Result<Operation> {
        TP_RETURN_IF_ERROR(check_name("cluster name", arguments_.name));
        TP_ASSIGN_OR_RETURN(AdminAddress node, parse_admin_address(arguments_.address));
        return Operation([name = arguments_.name, node](Session& session) {
          return create_cluster(session, name, node);
        });
      });
  create->add_option("NAME", arguments_.name, "The cluster's name")->required();
  create->add_option("--node", arguments_.address, "The node's admin address, HOST[:PORT]")
      ->type_name("ADDR")
      ->required();
  create->footer(
      "The credentials (tide.json) go to --workdir DIR, else $TIDE_WORKDIR, else ./.tidepool. "
      "An existing tide.json of another cluster is never replaced.");

  add_command(
      *cluster, "add-node", "Add a node to the cluster",
      [this]() -> Result<Operation> {
        TP_ASSIGN_OR_RETURN(AdminAddress address, parse_admin_address(arguments_.address));
        return Operation([address](Session& session) { return add_node(session, address); });
      })
      ->add_option("ADDR", arguments_.address, "The new node's admin address, HOST[:PORT]")
      ->required();

  add_command(*cluster, "remove-node", "Remove a node from the cluster",
              [this]() -> Result<Operation> {
                TP_ASSIGN_OR_RETURN(std::uint64_t id, parse_id("node id", arguments_.id));
                return Operation([id](Session& session) { return remove_node(session, id); });
              })
      ->add_option("ID", arguments_.id, "The node's id")
      ->required();
}

void Grammar::add_storagepool_commands() {
  CLI::App* storagepool = add_group(app_, "storagepool", "Node pools and tiers");

  CLI::App* nodepools =
      add_group(*storagepool, "nodepools", "Node pools: the nodes that name the same pool");
  add_format_option(
      add_command(*nodepools, "list", "List the node pools", [this]() -> Result<Operation> {
        return Operation(
            [format = format()](Session& session) { return list_nodepools(session, format); });
      }));
  CLI::App* view_pool =
      add_command(*nodepools, "view", "Show a node pool", [this]() -> Result<Operation> {
        TP_RETURN_IF_ERROR(check_name("node pool name", arguments_.name));
        return Operation([name = arguments_.name, format = format()](Session& session) {
          return view_nodepool(session, name, format);
        });
      });
  view_pool->add_option("NAME", arguments_.name, "The node pool's name")->required();
  add_format_option(view_pool);

  CLI::App* tiers = add_group(*storagepool, "tiers", "Tiers: named sets of node pools");
  CLI::App* create = add_command(*tiers, "create", "Create a tier", [this]() -> Result<Operation> {
    TP_ASSIGN_OR_RETURN(Json body,
                        tier_create_body(arguments_.name, split_lists(arguments_.children)));
    return Operation([body](Session& session) { return create_tier(session, body); });
  });
  create->add_option("NAME", arguments_.name, "The tier's name")->required();
  create
      ->add_option("--children", arguments_.children,
                   "Node pools of the tier; repeat the option or separate with commas")
      ->type_name("POOL")
      ->allow_extra_args(false);

  add_format_option(add_command(*tiers, "list", "List the tiers", [this]() -> Result<Operation> {
    return Operation([format = format()](Session& session) { return list_tiers(session, format); });
  }));

  CLI::App* view = add_command(*tiers, "view", "Show a tier", [this]() -> Result<Operation> {
    TP_RETURN_IF_ERROR(check_name("tier name", arguments_.name));
    return Operation([name = arguments_.name, format = format()](Session& session) {
      return view_tier(session, name, format);
    });
  });
  view->add_option("NAME", arguments_.name, "The tier's name")->required();
  add_format_option(view);

  CLI::App* modify =
      add_command(*tiers, "modify", "Change a tier's node pools", [this]() -> Result<Operation> {
        TP_RETURN_IF_ERROR(check_name("tier name", arguments_.name));
        // The parser let exactly one of the options through, and a given option holds at least
        // one value ('' included).
        ChildrenChange change = ChildrenChange::remove;
        const std::vector<std::string>* values = &arguments_.remove_children;
        if (!arguments_.set_children.empty()) {
          change = ChildrenChange::set;
          values = &arguments_.set_children;
        } else if (!arguments_.add_children.empty()) {
          change = ChildrenChange::add;
          values = &arguments_.add_children;
        }
        std::vector<std::string> pools = split_lists(*values);
        TP_RETURN_IF_ERROR(check_children(pools));
        return Operation([name = arguments_.name, change, pools](Session& session) {
          return modify_tier(session, name, change, pools);
        });
      });
  modify->add_option("NAME", arguments_.name, "The tier's name")->required();
  CLI::Option_group* changes = modify->add_option_group("children", "How the node pools change");
  changes
      ->add_option("--set-children", arguments_.set_children,
                   "Replace the node pools (comma-separated; '' for none)")
      ->type_name("POOL,...")
      ->allow_extra_args(false);
  changes->add_option("--add-children", arguments_.add_children, "Add node pools (comma-separated)")
      ->type_name("POOL,...")
      ->allow_extra_args(false);
  changes
      ->add_option("--remove-children", arguments_.remove_children,
                   "Remove node pools (comma-separated)")
      ->type_name("POOL,...")
      ->allow_extra_args(false);
  changes->require_option(1);

  add_command(*tiers, "delete", "Delete a tier",
              [this]() -> Result<Operation> {
                TP_RETURN_IF_ERROR(check_name("tier name", arguments_.name));
                return Operation([name = arguments_.name](Session& session) {
                  return delete_tier(session, name);
                });
              })
      ->add_option("NAME", arguments_.name, "The tier's name")
      ->required();
}

void Grammar::add_sysctl_command() {
  CLI::App* sysctl = add_command(
      app_, "sysctl", "Show or set cluster-wide tunables", [this]() -> Result<Operation> {
        if (arguments_.all_sysctls) {
          if (arguments_.sysctl) {
            return error(Errc::invalid_argument, "give NAME[=VALUE] or -a, not both");
          }
          return Operation(
              [format = format()](Session& session) { return list_sysctls(session, format); });
        }
        if (!arguments_.sysctl) {
          return error(Errc::invalid_argument, "expected NAME, NAME=VALUE or -a");
        }
        TP_ASSIGN_OR_RETURN(SysctlArgument argument, parse_sysctl_argument(*arguments_.sysctl));
        return Operation([argument](Session& session) {
          return argument.value ? set_sysctl(session, argument.name, *argument.value)
                                : show_sysctl(session, argument.name);
        });
      });
  sysctl->add_option("NAME[=VALUE]", arguments_.sysctl,
                     "Print a tunable (NAME), or set it (NAME=VALUE)");
  sysctl->add_flag("-a,--all", arguments_.all_sysctls, "List every tunable");
  add_format_option(sysctl);
}

void Grammar::add_lock_commands() {
  CLI::App* locks = add_group(app_, "locks", "The cluster's locks");
  CLI::App* list = add_command(
      *locks, "list", "List the locks every node holds and waits for",
      [this]() -> Result<Operation> {
        TP_ASSIGN_OR_RETURN(
            std::string target,
            locks_target(arguments_.lock_path, arguments_.lock_kind, arguments_.waiters));
        return Operation([target, format = format()](Session& session) {
          return list_locks(session, target, format);
        });
      });
  list->add_option("--path", arguments_.lock_path, "Only the locks on this file, under /ifs")
      ->type_name("PATH");
  list->add_option("--kind", arguments_.lock_kind,
                   "Only locks of this kind: data, attributes, advisory (NLM byte ranges), "
                   "share (NLM share reservations) or directory (held across changes between "
                   "shards)")
      ->type_name("KIND");
  list->add_flag("--waiters", arguments_.waiters, "Only requests and conversions still waiting");
  add_format_option(list);

  CLI::App* statistics = add_group(app_, "statistics", "Counters of the cluster's services");
  add_format_option(add_command(
      *statistics, "cache",
      "Each node's and the cluster's caches: L1 and L2, data and metadata, bytes read and hit, "
      "prefetch used and wasted, coherence invalidations",
      [this]() -> Result<Operation> {
        return Operation([format = format()](Session& session) {
          return show_cache_statistics(session, format);
        });
      }));
  CLI::App* system = add_command(
      *statistics, "system",
      "Each node's activity per second: CPU, NFS operations and bytes, network and disk; "
      "--format top shows it again every second",
      [this]() -> Result<Operation> {
        std::vector<std::uint64_t> nodes;
        if (arguments_.nodes != "all") {
          for (std::string_view rest = arguments_.nodes; !rest.empty();) {
            const std::size_t comma = rest.find(',');
            TP_ASSIGN_OR_RETURN(std::uint64_t id, parse_id("node id", rest.substr(0, comma)));
            nodes.push_back(id);
            rest = comma == std::string_view::npos ? "" : rest.substr(comma + 1);
          }
        }
        SystemView view{nodes, arguments_.format == "top", arguments_.iterations};
        return Operation([view, format = format()](Session& session) {
          return show_system_statistics(session, format, view);
        });
      });
  system->add_option("--nodes", arguments_.nodes, "all (default) or node ids: 1,3")
      ->type_name("all|IDS");
  system
      ->add_option("--format", arguments_.format,
                   "table (default), json, or top: the table again every second")
      ->type_name("table|json|top")
      ->check(CLI::IsMember({"table", "json", "top"}));
  system->add_option("--iterations", arguments_.iterations,
                     "With --format top: stop after this many tables (default: until stopped)");
  CLI::App* pstat = add_command(
      *statistics, "pstat",
      "NFSv3 operations per second by procedure, with CPU, network and disk, for the cluster "
      "or one node (as isi statistics pstat)",
      [this]() -> Result<Operation> {
        std::optional<std::uint64_t> node;
        if (arguments_.node) {
          TP_ASSIGN_OR_RETURN(node, parse_id("node id", *arguments_.node));
        }
        return Operation([node, format = format()](Session& session) {
          return show_protocol_statistics(session, format, node);
        });
      });
  pstat->add_option("--node", arguments_.node, "One node's figures instead of the cluster's")
      ->type_name("ID");
  add_format_option(pstat);
  add_format_option(
      add_command(*statistics, "client",
                  "The NFS clients of each node: calls, bytes in and out, average and slowest call",
                  [this]() -> Result<Operation> {
                    return Operation([format = format()](Session& session) {
                      return show_client_statistics(session, format);
                    });
                  }));
  add_format_option(add_command(
      *statistics, "locks",
      "Each node's lock manager: grants, conversions, callbacks sent, request round trips",
      [this]() -> Result<Operation> {
        return Operation([format = format()](Session& session) {
          return show_lock_statistics(session, format);
        });
      }));
}

void Grammar::add_flush_command() {
  CLI::App* flush = add_command(
      app_, "flush", "Empty the nodes' caches, L1 and L2 unless one is named, as isi_flush does",
      [this]() -> Result<Operation> {
        if (arguments_.flush_all && arguments_.flush_node) {
          return error(Errc::invalid_argument, "give --node or --all, not both");
        }
        Json body{{"l1", arguments_.flush_l1}, {"l2", arguments_.flush_l2}};
        if (arguments_.flush_node) {
          TP_ASSIGN_OR_RETURN(body["node"], parse_id("node id", *arguments_.flush_node));
        }
        return Operation([body](Session& session) { return flush_caches(session, body); });
      });
  flush->add_flag("--l1", arguments_.flush_l1,
                  "The L1 caches: blocks and attributes of other nodes' files");
  flush->add_flag("--l2", arguments_.flush_l2,
                  "The L2 caches: the page cache and attribute caches of each node's own copy");
  flush->add_option("--node", arguments_.flush_node, "Only this node")->type_name("ID");
  flush->add_flag("--all", arguments_.flush_all, "Every node (the default)");
}

void Grammar::add_policy_options(CLI::App* command) {
  PolicyOptions& options = arguments_.policy_options;
  command
      ->add_option("--data-storage-target", options.storage_target,
                   "Node pool or tier the files' data goes to, or anywhere")
      ->type_name("TARGET");
  command->add_option("--set-requested-protection", options.protection, "Copies of every unit")
      ->type_name("2x|3x")
      ->check(CLI::IsMember({"2x", "3x"}));
  command->add_option("--data-access-pattern", options.access_pattern, "How reads prefetch")
      ->type_name("random|concurrency|streaming")
      ->check(CLI::IsMember({"random", "concurrency", "streaming"}));
}

void Grammar::add_filepool_commands() {
  CLI::App* filepool = add_group(app_, "filepool", "File pool policies: where files live");
  CLI::App* policies = add_group(*filepool, "policies",
                                 "The policies, tried in order; the first that matches a file "
                                 "applies, and the default policy fills in what it leaves unset");
  const std::string filter_help =
      "Which files: an expression such as 'accessed > 30d and size >= 1GiB' (or OneFS's "
      "--begin-filter ... --end-filter flags instead)";
  CLI::App* create = add_command(
      *policies, "create", "Add a policy (last, or at --apply-order)",
      [this]() -> Result<Operation> {
        const PolicyOptions& options = arguments_.policy_options;
        if (!options.filter && options.filter_flags.empty()) {
          return error(Errc::invalid_argument,
                       "a policy needs a filter: --filter or --begin-filter ... --end-filter");
        }
        TP_ASSIGN_OR_RETURN(Json body, policy_body(options, arguments_.policy));
        return Operation([body](Session& session) { return create_policy(session, body); });
      });
  create->add_option("NAME", arguments_.policy, "The policy's name")->required();
  create->add_option("--filter", arguments_.policy_options.filter, filter_help)->type_name("EXPR");
  create->add_option("--apply-order", arguments_.policy_options.apply_order,
                     "Its place in the list, from 1 (default: last)");
  add_policy_options(create);

  add_format_option(add_command(*policies, "list", "List the policies, in the order they apply",
                                [this]() -> Result<Operation> {
                                  return Operation([format = format()](Session& session) {
                                    return list_policies(session, format);
                                  });
                                }));
  CLI::App* view = add_command(
      *policies, "view", "Show a policy ('default' too)", [this]() -> Result<Operation> {
        return Operation([name = arguments_.policy, format = format()](Session& session) {
          return view_policy(session, name, format);
        });
      });
  view->add_option("NAME", arguments_.policy, "The policy's name")->required();
  add_format_option(view);

  CLI::App* modify = add_command(
      *policies, "modify", "Change a policy's filter, actions or place",
      [this]() -> Result<Operation> {
        TP_ASSIGN_OR_RETURN(Json body, policy_body(arguments_.policy_options, std::nullopt));
        return Operation([name = arguments_.policy, body](Session& session) {
          return modify_policy(session, name, body);
        });
      });
  modify->add_option("NAME", arguments_.policy, "The policy's name")->required();
  modify->add_option("--filter", arguments_.policy_options.filter, filter_help)->type_name("EXPR");
  modify->add_option("--apply-order", arguments_.policy_options.apply_order,
                     "Move it to this place in the list, from 1");
  add_policy_options(modify);
  modify->add_flag("--clear-data-storage-target", arguments_.policy_options.clear_storage_target,
                   "Take the storage target from the default policy again");
  modify->add_flag("--clear-requested-protection", arguments_.policy_options.clear_protection,
                   "Take the protection from the default policy again");
  modify->add_flag("--clear-data-access-pattern", arguments_.policy_options.clear_access_pattern,
                   "Take the access pattern from the default policy again");

  add_command(*policies, "delete", "Remove a policy (the default policy stays)",
              [this]() -> Result<Operation> {
                return Operation([name = arguments_.policy](Session& session) {
                  return delete_policy(session, name);
                });
              })
      ->add_option("NAME", arguments_.policy, "The policy's name")
      ->required();

  CLI::App* default_policy = add_group(*filepool, "default-policy",
                                       "The actions of files no policy matches, and of what a "
                                       "matching policy leaves unset");
  add_format_option(add_command(*default_policy, "view", "Show the default policy",
                                [this]() -> Result<Operation> {
                                  return Operation([format = format()](Session& session) {
                                    return view_policy(session, "default", format);
                                  });
                                }));
  add_policy_options(add_command(
      *default_policy, "modify", "Change the default policy's actions",
      [this]() -> Result<Operation> {
        TP_ASSIGN_OR_RETURN(Json body, policy_body(arguments_.policy_options, std::nullopt));
        if (body.contains("filter_flags")) {
          return error(Errc::invalid_argument, "the default policy matches every file: no filter");
        }
        return Operation(
            [body](Session& session) { return modify_policy(session, "default", body); });
      }));

  CLI::App* explain = add_command(
      *filepool, "explain", "Which policy applies to a file now, and where each action comes from",
      [this]() -> Result<Operation> {
        TP_ASSIGN_OR_RETURN(std::string target, namespace_target(arguments_.path));
        target.replace(0, std::string_view("/v1/namespace").size(), "/v1/filepool/explain");
        return Operation([target, format = format()](Session& session) {
          return explain_policy(session, target, format);
        });
      });
  explain->add_option("PATH", arguments_.path, "Absolute path under /ifs")->required();
  add_format_option(explain);

  CLI::App* apply = add_command(
      *filepool, "apply",
      "Apply the policies now to a file, or with --recurse to every file under a directory: a "
      "SmartPoolsTree job, waited for",
      [this]() -> Result<Operation> {
        TP_ASSIGN_OR_RETURN(std::string target, namespace_target(arguments_.path));
        // HIGH: someone waits for the job, so it works without a rate limit.
        TP_ASSIGN_OR_RETURN(
            Json job,
            job_start_body("SmartPoolsTree", {.policy = "HIGH",
                                              .paths = {arguments_.path},
                                              .dry_run = arguments_.job_start_options.dry_run}));
        PolicyApplication application{arguments_.path, target, arguments_.recurse, job};
        return Operation(
            [application](Session& session) { return apply_policies(session, application); });
      });
  apply->add_option("PATH", arguments_.path, "A file, or with --recurse a directory, under /ifs")
      ->required();
  apply->add_flag("--recurse", arguments_.recurse, "Every file under the directory PATH");
  apply->add_flag("--dry-run", arguments_.job_start_options.dry_run,
                  "Count what would change; change nothing");
}

void Grammar::add_nfs_commands() {
  CLI::App* nfs = add_group(app_, "nfs", "NFS settings");
  CLI::App* exports = add_group(*nfs, "exports", "NFS exports: what clients may mount");

  CLI::App* create =
      add_command(*exports, "create", "Export a directory", [this]() -> Result<Operation> {
        ExportOptions options = arguments_.export_options;
        if (arguments_.read_only) options.read_only = "true";
        TP_ASSIGN_OR_RETURN(Json body, export_create_body(options));
        return Operation([body](Session& session) { return create_export(session, body); });
      });
  create->add_option("PATH", arguments_.export_options.path, "The directory, /ifs or under it")
      ->required();
  create->add_flag("--read-only", arguments_.read_only, "Clients may only read");
  add_export_options(create);

  add_format_option(
      add_command(*exports, "list", "List the exports", [this]() -> Result<Operation> {
        return Operation(
            [format = format()](Session& session) { return list_exports(session, format); });
      }));

  CLI::App* view = add_command(*exports, "view", "Show an export", [this]() -> Result<Operation> {
    TP_ASSIGN_OR_RETURN(std::uint64_t id, parse_id("export id", arguments_.id));
    return Operation(
        [id, format = format()](Session& session) { return view_export(session, id, format); });
  });
  view->add_option("ID", arguments_.id, "The export's id")->required();
  add_format_option(view);

  CLI::App* modify =
      add_command(*exports, "modify", "Change an export", [this]() -> Result<Operation> {
        TP_ASSIGN_OR_RETURN(std::uint64_t id, parse_id("export id", arguments_.id));
        TP_ASSIGN_OR_RETURN(Json body, export_modify_body(arguments_.export_options));
        return Operation([id, body](Session& session) { return modify_export(session, id, body); });
      });
  modify->add_option("ID", arguments_.id, "The export's id")->required();
  modify->add_option("--path", arguments_.export_options.path, "The directory, /ifs or under it")
      ->type_name("PATH");
  modify->add_option("--read-only", arguments_.export_options.read_only, "Clients may only read")
      ->type_name("true|false");
  modify->add_flag("--clear-map-all", arguments_.export_options.clear_map_all,
                   "Stop mapping every request to one uid and gid");
  add_export_options(modify);

  add_command(*exports, "delete", "Stop exporting a directory",
              [this]() -> Result<Operation> {
                TP_ASSIGN_OR_RETURN(std::uint64_t id, parse_id("export id", arguments_.id));
                return Operation([id](Session& session) { return delete_export(session, id); });
              })
      ->add_option("ID", arguments_.id, "The export's id")
      ->required();

  CLI::App* nlm = add_group(*nfs, "nlm", "NFS advisory locking (NLM)");
  CLI::App* sessions = add_group(*nlm, "sessions", "The clients that lock through each node");
  add_format_option(add_command(
      *sessions, "list", "List NLM clients: where they lock through, what they hold and wait for",
      [this]() -> Result<Operation> {
        return Operation(
            [format = format()](Session& session) { return list_nlm_sessions(session, format); });
      }));
}

void Grammar::add_job_commands() {
  CLI::App* job = add_group(app_, "job", "The job engine: jobs, their types and reports");
  add_jobs_commands(*job);
  add_job_type_commands(*job);
  add_job_report_commands(*job);
  add_format_option(add_command(*job, "status",
                                "The node running jobs, the jobs not ended and the last ones ended",
                                [this]() -> Result<Operation> {
                                  return Operation([format = format()](Session& session) {
                                    return show_job_status(session, format);
                                  });
                                }));
}

void Grammar::add_job_priority_and_policy(CLI::App* command, std::optional<std::string>& priority,
                                          std::optional<std::string>& policy) {
  command->add_option("--priority", priority, "1 (runs first) to 10")->type_name("1-10");
  command
      ->add_option("--policy", policy,
                   "Impact policy: how hard it may work (OFF_HOURS: not Monday-Friday "
                   "08:00-18:00 UTC)")
      ->type_name("LOW|MEDIUM|HIGH|OFF_HOURS");
}

void Grammar::add_jobs_commands(CLI::App& job) {
  CLI::App* jobs = add_group(job, "jobs", "Jobs: started by hand or by their type's schedule");
  JobStartOptions& options = arguments_.job_start_options;
  CLI::App* start = add_command(*jobs, "start", "Start a job now", [this]() -> Result<Operation> {
    TP_ASSIGN_OR_RETURN(Json body, job_start_body(arguments_.name, arguments_.job_start_options));
    return Operation([body](Session& session) { return start_job(session, body); });
  });
  start->add_option("TYPE", arguments_.name, "The job's type (see 'tide job types list')")
      ->required();
  add_job_priority_and_policy(start, options.priority, options.policy);
  start->add_option("--paths", options.paths, "Paths under /ifs to work on (SmartPoolsTree)")
      ->type_name("PATH");
  start->add_flag("--dry-run", options.dry_run, "Count what the job would change; change nothing");

  add_format_option(
      add_command(*jobs, "list", "List the jobs not ended", [this]() -> Result<Operation> {
        return Operation(
            [format = format()](Session& session) { return list_jobs(session, format); });
      }));
  CLI::App* view = add_command(*jobs, "view", "Show a job", [this]() -> Result<Operation> {
    TP_ASSIGN_OR_RETURN(std::uint64_t id, parse_id("job id", arguments_.id));
    return Operation(
        [id, format = format()](Session& session) { return view_job(session, id, format); });
  });
  view->add_option("ID", arguments_.id, "The job's id")->required();
  add_format_option(view);

  struct Change {
    const char* name;
    const char* description;
    JobChange change;
  };
  for (const Change& change :
       {Change{"pause", "Pause a job not ended", JobChange::pause},
        Change{"resume", "Resume a paused job: it runs again when its turn comes",
               JobChange::resume},
        Change{"cancel", "Cancel a job not ended", JobChange::cancel}}) {
    add_command(*jobs, change.name, change.description,
                [this, change = change.change]() -> Result<Operation> {
                  TP_ASSIGN_OR_RETURN(std::uint64_t id, parse_id("job id", arguments_.id));
                  return Operation(
                      [id, change](Session& session) { return change_job(session, id, change); });
                })
        ->add_option("ID", arguments_.id, "The job's id")
        ->required();
  }
}

void Grammar::add_job_type_commands(CLI::App& job) {
  CLI::App* types = add_group(job, "types", "Job types: their schedule, priority and policy");
  add_format_option(
      add_command(*types, "list", "List the job types", [this]() -> Result<Operation> {
        return Operation(
            [format = format()](Session& session) { return list_job_types(session, format); });
      }));
  CLI::App* view = add_command(*types, "view", "Show a job type", [this]() -> Result<Operation> {
    TP_RETURN_IF_ERROR(check_name("job type", arguments_.name));
    return Operation([name = arguments_.name, format = format()](Session& session) {
      return view_job_type(session, name, format);
    });
  });
  view->add_option("NAME", arguments_.name, "The type's name")->required();
  add_format_option(view);

  JobTypeChanges& changes = arguments_.job_type_changes;
  CLI::App* modify = add_command(
      *types, "modify", "Change a job type's schedule, priority, policy or whether it is enabled",
      [this]() -> Result<Operation> {
        TP_RETURN_IF_ERROR(check_name("job type", arguments_.name));
        TP_ASSIGN_OR_RETURN(Json body, job_type_modify_body(arguments_.job_type_changes));
        return Operation([name = arguments_.name, body](Session& session) {
          return modify_job_type(session, name, body);
        });
      });
  modify->add_option("NAME", arguments_.name, "The type's name")->required();
  modify
      ->add_option("--schedule", changes.schedule,
                   "When it starts, in UTC: 'every day at 22:00', 'every Sunday at 23:00', "
                   "'every 6 hours', ...")
      ->type_name("TEXT");
  modify->add_flag("--clear-schedule", changes.clear_schedule, "Start it by hand only");
  add_job_priority_and_policy(modify, changes.priority, changes.policy);
  modify->add_option("--enabled", changes.enabled, "Whether its schedule starts it")
      ->type_name("true|false");
}

void Grammar::add_job_report_commands(CLI::App& job) {
  CLI::App* reports = add_group(job, "reports", "What ended jobs did (the last 50)");
  add_format_option(add_command(
      *reports, "list", "List the ended jobs, newest first", [this]() -> Result<Operation> {
        return Operation(
            [format = format()](Session& session) { return list_job_reports(session, format); });
      }));
  CLI::App* view = add_command(
      *reports, "view", "Show an ended job and its phases", [this]() -> Result<Operation> {
        TP_ASSIGN_OR_RETURN(std::uint64_t id, parse_id("job id", arguments_.id));
        return Operation([id, format = format()](Session& session) {
          return view_job_report(session, id, format);
        });
      });
  view->add_option("ID", arguments_.id, "The job's id")->required();
  add_format_option(view);
}

// The deepest command the parser selected (the root when none was).
CLI::App* selected_command(CLI::App& root) {
  CLI::App* app = &root;
  while (!app->get_subcommands().empty()) app = app->get_subcommands().front();
  return app;
}

// "tide storagepool tiers"
std::string command_path(const CLI::App* app) {
  std::string path;
  for (; app != nullptr; app = app->get_parent()) {
    path = path.empty() ? app->get_name() : app->get_name() + " " + path;
  }
  return path;
}

std::string quoted_list(const std::vector<std::string>& words) {
  std::string text;
  for (const std::string& word : words) text += (text.empty() ? "'" : " '") + word + "'";
  return text;
}

// What a parse error says, in one line that names what was expected.
std::string describe_parse_error(CLI::App& root, const CLI::ParseError& e) {
  CLI::App* command = selected_command(root);
  const std::vector<std::string> leftover = root.remaining(true);
  // Option groups are nameless subcommands: not commands.
  const std::function<bool(const CLI::App*)> named = [](const CLI::App* app) {
    return !app->get_name().empty();
  };
  const std::vector<const CLI::App*> choices =
      static_cast<const CLI::App*>(command)->get_subcommands(named);
  if (!choices.empty() && dynamic_cast<const CLI::RequiredError*>(&e) != nullptr) {
    // A command group without its command.
    std::string expected;
    for (const CLI::App* choice : choices) {
      expected += (expected.empty() ? "" : ", ") + choice->get_name();
    }
    auto word = std::find_if(leftover.begin(), leftover.end(),
                             [](const std::string& arg) { return !arg.starts_with('-'); });
    std::string problem = word == leftover.end()
                              ? "missing command after '" + command_path(command) + "'"
                              : "unknown command '" + command_path(command) + " " + *word + "'";
    return problem + "; expected one of: " + expected;
  }
  if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
    return "unexpected " + std::string(leftover.size() > 1 ? "arguments " : "argument ") +
           quoted_list(leftover) + " for '" + command_path(command) + "'";
  }
  return e.what();
}

std::string usage_line(const CLI::App* command, const std::string& problem) {
  return "tide: " + problem + " (see '" + command_path(command) + " --help')";
}

int run(std::vector<std::string> args, std::ostream& out, std::ostream& err,
        const Environment& environment) {
  Grammar grammar;
  CLI::App& app = grammar.app();
  std::vector<std::string> filter_flags;
  if (Status taken = take_filter_flags(args, filter_flags); !taken.ok()) {
    err << usage_line(&app, taken.message()) << '\n';
    return kExitUsage;
  }
  grammar.set_filter_flags(std::move(filter_flags));
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments last first
  try {
    app.parse(args);
  } catch (const CLI::Success& help) {
    return app.exit(help, out, err);
  } catch (const CLI::ParseError& e) {
    err << usage_line(selected_command(app), describe_parse_error(app, e)) << '\n';
    return kExitUsage;
  }
  Result<GlobalOptions> options = grammar.global_options();
  if (!options.ok()) {
    err << usage_line(&app, options.status().message()) << '\n';
    return kExitUsage;
  }
  CLI::App* command = selected_command(app);
  Result<Operation> operation = grammar.command_of(command)();
  if (!operation.ok()) {
    err << usage_line(command, operation.status().message()) << '\n';
    return kExitUsage;
  }
  Session session(environment, std::move(options).value(), out, err);
  if (Status status = (*operation)(session); !status.ok()) {
    err << "tide: " << status.message() << '\n';
    // A directory where the command takes a file: the command line is wrong, and nothing
    // changed. The admin API never answers with is_a_directory, so only a command's own check
    // says it.
    return status.code() == Errc::is_a_directory ? kExitUsage : kExitFailure;
  }
  return kExitSuccess;
}

}  // namespace

Environment process_environment() {
  std::error_code ec;
  fs::path current_directory = fs::current_path(ec);
  return Environment{
      .variable = [](const std::string& name) -> std::optional<std::string> {
        const char* value = std::getenv(name.c_str());
        if (value == nullptr) return std::nullopt;
        return std::string(value);
      },
      .current_directory = ec ? fs::path(".") : std::move(current_directory),
      .connect = make_https_transport,
      .clock = &real_clock(),
      .sleep = [](std::chrono::milliseconds duration) { std::this_thread::sleep_for(duration); },
  };
}

int run_tide(std::vector<std::string> args, std::ostream& out, std::ostream& err) {
  return run_tide(std::move(args), out, err, process_environment());
}

int run_tide(std::vector<std::string> args, std::ostream& out, std::ostream& err,
             const Environment& environment) {
  // The boundary: CLI11, nlohmann::json and the standard library report by exception, and
  // none may end the process with a stack trace.
  try {
    return run(std::move(args), out, err, environment);
  } catch (const std::exception& e) {
    err << "tide: unexpected error: " << e.what() << '\n';
  } catch (...) {
    err << "tide: unexpected error\n";
  }
  return kExitFailure;
}

}  // namespace tidepool::cli
