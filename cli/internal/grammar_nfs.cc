#include "cli/internal/grammar.h"

#include <cstdint>

namespace tidepool::cli::internal {

void Grammar::add_export_options(CLI::App* command) {
  ExportOptions& options = arguments_.export_options;
  command
      ->add_option("--clients", options.clients,
                   "Clients allowed: IPv4 addresses, CIDRs or *; repeat the option or "
                   "separate with commas")
      ->type_name("CLIENT")
      ->allow_extra_args(false);
  command
      ->add_option("--secure", options.secure,
                   "Only calls from privileged source ports (below 1024), as knfsd; false for "
                   "clients that cannot bind one (default true)")
      ->type_name("true|false");
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

  CLI::App* remove =
      add_command(*exports, "delete", "Stop exporting a directory", [this]() -> Result<Operation> {
        TP_ASSIGN_OR_RETURN(std::uint64_t id, parse_id("export id", arguments_.id));
        return Operation([id, force = arguments_.force](Session& session) {
          TP_RETURN_IF_ERROR(confirm_delete(session, "export " + std::to_string(id), force));
          return delete_export(session, id);
        });
      });
  remove->add_option("ID", arguments_.id, "The export's id")->required();
  add_force_flag(remove);

  CLI::App* nlm = add_group(*nfs, "nlm", "NFS advisory locking (NLM)");
  CLI::App* sessions = add_group(*nlm, "sessions", "The clients that lock through each node");
  add_format_option(add_command(
      *sessions, "list", "List NLM clients: where they lock through, what they hold and wait for",
      [this]() -> Result<Operation> {
        return Operation(
            [format = format()](Session& session) { return list_nlm_sessions(session, format); });
      }));
}

}  // namespace tidepool::cli::internal
