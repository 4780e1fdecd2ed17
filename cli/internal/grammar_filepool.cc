#include "cli/internal/grammar.h"

#include <optional>
#include <string>
#include <string_view>

namespace tidepool::cli::internal {

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

  CLI::App* remove = add_command(
      *policies, "delete", "Remove a policy (the default policy stays)",
      [this]() -> Result<Operation> {
        return Operation([name = arguments_.policy, force = arguments_.force](Session& session) {
          TP_RETURN_IF_ERROR(confirm_delete(session, "policy '" + name + "'", force));
          return delete_policy(session, name);
        });
      });
  remove->add_option("NAME", arguments_.policy, "The policy's name")->required();
  add_force_flag(remove);

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

}  // namespace tidepool::cli::internal
