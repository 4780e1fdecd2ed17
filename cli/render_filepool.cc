#include "cli/render.h"

#include <string>

#include "cli/internal/render_parts.h"

namespace tidepool::cli {

using internal::render_fields;

void render_policies(std::ostream& out, const Json& reply) {
  Table table({{"Order", Align::right},
               {"Name", Align::left},
               {"Filter", Align::left},
               {"Storage Target", Align::left},
               {"Protection", Align::left},
               {"Access Pattern", Align::left}});
  // An action a policy leaves unset comes from the default policy.
  auto action = [](const Json& value) { return value.is_null() ? "(default)" : display(value); };
  for (const Json& p : as_list(field(reply, "policies"))) {
    table.add_row({display(field(p, "apply_order")), display(field(p, "name")),
                   display(field(p, "filter")), action(field(p, "storage_target")),
                   action(field(p, "protection")), action(field(p, "access_pattern"))});
  }
  const Json& d = field(reply, "default");
  table.add_row({"-", "default", "every other file", display(field(d, "storage_target")),
                 display(field(d, "protection")), display(field(d, "access_pattern"))});
  table.render(out);
}

void render_explanation(std::ostream& out, const Json& reply) {
  auto from = [&](const char* action) {
    const Json& a = field(reply, action);
    return display(field(a, "value")) + " (from " + display(field(a, "from")) + ")";
  };
  const Json& filter = field(reply, "filter");
  render_fields(out,
                {{"Path", display(field(reply, "path"))},
                 {"Policy", display(field(reply, "policy"))},
                 {"Filter", filter.is_string() ? filter.get<std::string>() : "every file"},
                 {"Storage Target", from("storage_target")},
                 {"Protection", from("protection")},
                 {"Access Pattern", from("access_pattern")}},
                Align::left);
}

}  // namespace tidepool::cli
