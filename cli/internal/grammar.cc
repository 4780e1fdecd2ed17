#include "cli/internal/grammar.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tidepool::cli::internal {

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
  app_.add_flag("--insecure", arguments_.insecure,
                "Talk to nodes whose certificate cannot be checked, for want of the cluster's CA "
                "certificate (no credentials file): anyone on the path could take the token");
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
  add_network_commands();
  add_sysctl_command();
  add_nfs_commands();
  add_lock_commands();
  add_statistics_commands();
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
  options.insecure = arguments_.insecure;
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

void Grammar::add_force_flag(CLI::App* command) {
  command->add_flag("-f,--force", arguments_.force,
                    "Do not ask for confirmation (which a script, not on a terminal, cannot "
                    "give)");
}

void Grammar::add_setup_secret_option(CLI::App* command) {
  command
      ->add_option("--setup-secret-file", arguments_.setup_secret_file,
                   "A copy of the node's setup secret: the file its cluster.setup_secret_file "
                   "names, by default DATA_DIR/setup-secret on the node")
      ->type_name("FILE")
      ->required();
}

void Grammar::add_cluster_commands() {
  CLI::App* cluster = add_group(app_, "cluster", "Create the cluster and change its members");

  CLI::App* create = add_command(
      *cluster, "create", "Make a node the first member of a new cluster and save the credentials",
      [this]() -> Result<Operation> {
        TP_RETURN_IF_ERROR(check_name("cluster name", arguments_.name));
        TP_ASSIGN_OR_RETURN(AdminAddress node, parse_admin_address(arguments_.address));
        return Operation([name = arguments_.name, node,
                          secret_file = arguments_.setup_secret_file](Session& session) {
          return create_cluster(session, name, node, secret_file);
        });
      });
  create->add_option("NAME", arguments_.name, "The cluster's name")->required();
  create->add_option("--node", arguments_.address, "The node's admin address, HOST[:PORT]")
      ->type_name("ADDR")
      ->required();
  add_setup_secret_option(create);
  create->footer(
      "The credentials (tide.json) go to --workdir DIR, else $TIDE_WORKDIR, else ./.tidepool. "
      "An existing tide.json of another cluster is never replaced.");

  CLI::App* add = add_command(
      *cluster, "add-node", "Add a node to the cluster",
      [this]() -> Result<Operation> {
        TP_ASSIGN_OR_RETURN(AdminAddress address, parse_admin_address(arguments_.address));
        return Operation([address, secret_file = arguments_.setup_secret_file](Session& session) {
          return add_node(session, address, secret_file);
        });
      });
  add->add_option("ADDR", arguments_.address, "The new node's admin address, HOST[:PORT]")
      ->required();
  add_setup_secret_option(add);

  CLI::App* remove = add_command(
      *cluster, "remove-node",
      "Remove a node from the cluster: SmartFail it (its data is copied to the other nodes "
      "first), or with --no-smartfail at once",
      [this]() -> Result<Operation> {
        TP_ASSIGN_OR_RETURN(std::uint64_t id, parse_id("node id", arguments_.id));
        const NodeRemoval how =
            arguments_.no_smartfail ? NodeRemoval::at_once : NodeRemoval::smartfail;
        return Operation([id, how](Session& session) { return remove_node(session, id, how); });
      });
  remove->add_option("ID", arguments_.id, "The node's id")->required();
  remove->add_flag("--no-smartfail", arguments_.no_smartfail,
                   "Remove it at once, without copying its data elsewhere first (for a node "
                   "gone for good: its data is protected again from the other copies)");

  CLI::App* replace = add_command(
      *cluster, "replace-node",
      "Put a new node in an old one's place: add the new node, then SmartFail the old one (or "
      "remove it at once if it is down: its data is rebuilt from the other copies)",
      [this]() -> Result<Operation> {
        TP_ASSIGN_OR_RETURN(std::uint64_t id, parse_id("node id", arguments_.id));
        TP_ASSIGN_OR_RETURN(AdminAddress address, parse_admin_address(arguments_.address));
        return Operation(
            [id, address, secret_file = arguments_.setup_secret_file](Session& session) {
              return replace_node(session, id, address, secret_file);
            });
      });
  replace->add_option("OLD", arguments_.id, "The id of the node replaced")->required();
  replace->add_option("ADDR", arguments_.address, "The new node's admin address, HOST[:PORT]")
      ->required();
  add_setup_secret_option(replace);
  replace->footer("Give the new node the old one's pool (pool in its node.toml).");

  add_command(*cluster, "smartfail",
              "Take a node out of the cluster after copying everything it holds to the other "
              "nodes (a FlexProtect job); it serves until then",
              [this]() -> Result<Operation> {
                TP_ASSIGN_OR_RETURN(std::uint64_t id, parse_id("node id", arguments_.id));
                return Operation([id](Session& session) {
                  return remove_node(session, id, NodeRemoval::smartfail);
                });
              })
      ->add_option("ID", arguments_.id, "The node's id")
      ->required();

  add_command(*cluster, "stopfail",
              "Call off a node's SmartFail: it stays in the cluster and data is placed on it "
              "again (refused once its removal is decided)",
              [this]() -> Result<Operation> {
                TP_ASSIGN_OR_RETURN(std::uint64_t id, parse_id("node id", arguments_.id));
                return Operation([id](Session& session) { return stopfail_node(session, id); });
              })
      ->add_option("ID", arguments_.id, "The node's id")
      ->required();

  add_command(
      *cluster, "transfer-leadership",
      "Hand the lead of the cluster's group, and with it the job engine, to another "
      "node (before maintenance of the leader)",
      [this]() -> Result<Operation> {
        std::optional<std::uint64_t> id;
        if (!arguments_.id.empty()) {
          TP_ASSIGN_OR_RETURN(id, parse_id("node id", arguments_.id));
        }
        return Operation([id](Session& session) { return transfer_leadership(session, id); });
      })
      ->add_option("ID", arguments_.id, "The node to lead; any other voting node if none");

  CLI::App* token = add_group(*cluster, "token", "The admin API's bearer token");
  add_command(*token, "rotate",
              "Replace the token: every node refuses the old one from now on; the new one goes "
              "to the credentials file",
              []() -> Result<Operation> { return Operation(rotate_token); });
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
  sysctl->footer(
      "Durations are 90s, 5m, 12h, 1D, 2W, or a bare number in the tunable's unit: "
      "milliseconds for efs.bam.atime_grace_period, as OneFS takes it (86400000 is one day), "
      "seconds for efs.flexprotect.repair_delay and debug.fail_point.cross_shard_decide. "
      "efs.smartpools.transfer_limit is a percentage; the others are true or false. "
      "`tide sysctl -a` lists every tunable with its unit.");
  add_format_option(sysctl);
}

void Grammar::add_network_commands() {
  CLI::App* network = add_group(app_, "network", "The nodes' network interfaces");
  CLI::App* interfaces = add_group(*network, "interfaces", "Each node's addresses");
  add_format_option(add_command(
      *interfaces, "list",
      "List each node's front-end (NFS), backend (node to node) and admin interfaces",
      [this]() -> Result<Operation> {
        return Operation([format = format()](Session& session) {
          return list_network_interfaces(session, format);
        });
      }));
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

}  // namespace tidepool::cli::internal
