#include "cli/internal/grammar.h"

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace tidepool::cli::internal {

void Grammar::add_top_format_options(CLI::App* command) {
  command
      ->add_option("--format", arguments_.format,
                   "table (default), json, or top: as isi's top, drawn again every second")
      ->type_name("table|json|top")
      ->check(CLI::IsMember({"table", "json", "top"}));
  command->add_option(
      "--iterations", arguments_.iterations,
      "With --format top: stop after drawing this many times (default: until stopped)");
}

void Grammar::add_statistics_commands() {
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
  add_top_format_options(system);
  CLI::App* pstat = add_command(
      *statistics, "pstat",
      "NFSv3 operations per second by procedure, with CPU, network and disk, for the cluster "
      "or one node (as isi statistics pstat)",
      [this]() -> Result<Operation> {
        std::optional<std::uint64_t> node;
        if (arguments_.node) {
          TP_ASSIGN_OR_RETURN(node, parse_id("node id", *arguments_.node));
        }
        ProtocolView view{node, arguments_.format == "top", arguments_.iterations};
        return Operation([view, format = format()](Session& session) {
          return show_protocol_statistics(session, format, view);
        });
      });
  pstat->add_option("--node", arguments_.node, "One node's figures instead of the cluster's")
      ->type_name("ID");
  add_top_format_options(pstat);
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

}  // namespace tidepool::cli::internal
