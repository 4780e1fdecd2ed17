#include "cli/internal/grammar.h"

#include <string>
#include <vector>

namespace tidepool::cli::internal {

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

  CLI::App* remove =
      add_command(*tiers, "delete", "Delete a tier", [this]() -> Result<Operation> {
        TP_RETURN_IF_ERROR(check_name("tier name", arguments_.name));
        return Operation([name = arguments_.name, force = arguments_.force](Session& session) {
          TP_RETURN_IF_ERROR(confirm_delete(session, "tier '" + name + "'", force));
          return delete_tier(session, name);
        });
      });
  remove->add_option("NAME", arguments_.name, "The tier's name")->required();
  add_force_flag(remove);
}

}  // namespace tidepool::cli::internal
