#include "cli/commands.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <ctime>
#include <functional>
#include <utility>

#include "cli/render.h"
#include "common/files.h"
#include "common/tls_identity.h"

namespace tidepool::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kNoCredentials =
    "no cluster credentials: run 'tide cluster create' or pass --workdir/--cluster and --token";

std::optional<std::string> non_empty(std::optional<std::string> value) {
  if (value && value->empty()) return std::nullopt;
  return value;
}

// Prints a reply as the server sent it (json) or rendered for people by `render`.
void print(Session& session, Format format, const Json& reply,
           const std::function<void(std::ostream&)>& render) {
  if (format == Format::json) {
    session.out() << pretty(reply) << '\n';
  } else {
    render(session.out());
  }
}

// Changes the credentials file the cluster was found through, if it was.
Status update_credentials(Session& session, const std::function<void(Credentials&)>& change) {
  if (!session.credentials_file()) return {};
  const fs::path& file = *session.credentials_file();
  TP_ASSIGN_OR_RETURN(Credentials credentials, read_credentials(file));
  change(credentials);
  return write_credentials(file, credentials);
}

// Whether two admin addresses name the same node ("127.0.0.1" is "127.0.0.1:8080").
bool same_address(const std::string& a, const std::string& b) {
  Result<AdminAddress> first = parse_admin_address(a);
  Result<AdminAddress> second = parse_admin_address(b);
  return first.ok() && second.ok() ? *first == *second : a == b;
}

// Where `cluster create` writes the credentials: no discovery, a new cluster's credentials go
// where they were asked for (--workdir, $TIDE_WORKDIR) or in ./.tidepool.
fs::path new_work_directory(const Session& session) {
  const Environment& environment = session.environment();
  return named_work_directory(session.options().workdir, environment.variable("TIDE_WORKDIR"),
                              environment.current_directory)
      .value_or(environment.current_directory / kWorkDirectoryName);
}

std::string tier_target(const std::string& name) {
  return "/v1/storagepool/tiers/" + path_segment(name);
}

std::string export_target(std::uint64_t id) { return "/v1/nfs/exports/" + std::to_string(id); }

// A setup secret as a node keeps it: the file's text without its trailing white space.
Result<std::string> read_setup_secret(const Session& session, const std::string& name) {
  const std::string path = (session.environment().current_directory / name).string();
  Result<std::string> secret = read_secret_file(path);
  if (!secret.ok()) return error(Errc::not_found, "cannot read the setup secret file " + path);
  if (secret->empty()) {
    return error(Errc::invalid_argument, "the setup secret file " + path + " is empty");
  }
  return secret;
}

}  // namespace

Session::Session(const Environment& environment, GlobalOptions options, std::ostream& out,
                 std::ostream& err)
    : environment_(environment), options_(std::move(options)), out_(out), err_(err) {}

Result<Json> Session::call(Method method, const std::string& target,
                           const std::optional<Json>& body) {
  if (!transport_) {
    TP_ASSIGN_OR_RETURN(ConnectionSettings settings, find_cluster());
    TP_ASSIGN_OR_RETURN(transport_, environment_.connect(std::move(settings)));
  }
  return call_api(*transport_, method, target, body);
}

Result<ConnectionSettings> Session::find_cluster() {
  const std::optional<fs::path> workdir = find_work_directory(
      options_.workdir, environment_.variable("TIDE_WORKDIR"), environment_.current_directory);
  std::optional<Credentials> credentials;
  if (workdir) {
    fs::path file = *workdir / kCredentialsFileName;
    Result<Credentials> read = read_credentials(file);
    if (read.ok()) {
      credentials = std::move(read).value();
      credentials_file_ = std::move(file);
    } else if (read.code() != Errc::not_found) {
      return read.status();
    }
  }

  ConnectionSettings settings;
  settings.timeout = options_.timeout;
  if (options_.cluster) {
    settings.addresses = *options_.cluster;
  } else if (auto listed = non_empty(environment_.variable("TIDE_CLUSTER"))) {
    Result<std::vector<AdminAddress>> addresses = parse_admin_address_list(*listed);
    if (!addresses.ok()) {
      return error(Errc::invalid_argument, "TIDE_CLUSTER: " + addresses.status().message());
    }
    settings.addresses = std::move(addresses).value();
  } else if (credentials) {
    for (const std::string& node : credentials->nodes) {
      Result<AdminAddress> address = parse_admin_address(node);
      if (!address.ok()) {
        return error(Errc::invalid_argument,
                     credentials_file_->string() + ": " + address.status().message());
      }
      settings.addresses.push_back(std::move(address).value());
    }
  }
  if (options_.token) {
    settings.token = *options_.token;
  } else if (auto token = non_empty(environment_.variable("TIDE_TOKEN"))) {
    settings.token = *token;
  } else if (credentials) {
    settings.token = credentials->token;
  }
  if (settings.addresses.empty() || settings.token.empty()) {
    return error(Errc::not_found, kNoCredentials);
  }

  if (credentials) {
    settings.ca_certificate = credentials->ca_certificate;
  } else if (options_.insecure) {
    err_ << "tide: warning: no credentials file, so no CA certificate: the nodes' identity is "
            "not verified\n";
  } else {
    // The token would go to whoever answers at the address.
    return error(Errc::invalid_argument,
                 "no credentials file, so no CA certificate to check the nodes' identity with: "
                 "give --workdir (the directory of the cluster's tide.json), or --insecure to "
                 "send the token unverified");
  }
  return settings;
}

Status create_cluster(Session& session, const std::string& name, const AdminAddress& node,
                      const std::string& setup_secret_file) {
  const Environment& environment = session.environment();
  TP_ASSIGN_OR_RETURN(std::string setup_secret, read_setup_secret(session, setup_secret_file));
  const fs::path file = new_work_directory(session) / kCredentialsFileName;
  Result<Credentials> existing = read_credentials(file);
  if (existing.ok() && existing->cluster != name) {
    return error(Errc::already_exists, file.string() + " holds the credentials of cluster '" +
                                           existing->cluster + "': give another --workdir");
  }
  if (!existing.ok() && existing.code() != Errc::not_found) {
    return error(existing.code(),
                 existing.status().message() + " (not replaced: give another --workdir)");
  }

  // No CA vouches for the node yet: its certificate is self-signed. The node proves it knows
  // the setup secret for that certificate first, and only a node presenting it is sent the
  // secret; the reply carries the CA that vouches for the cluster from then on.
  ConnectionSettings settings;
  settings.addresses = {node};
  settings.timeout = session.options().timeout;
  TP_ASSIGN_OR_RETURN(std::unique_ptr<Transport> asking, environment.connect(settings));
  TP_ASSIGN_OR_RETURN(HttpReply answer, asking->send(Method::get, "/v1/node", ""));
  const Json shown = Json::parse(answer.body, nullptr, false);
  if (answer.status != 200 || !shown.is_object()) {
    return error(Errc::unavailable, node.to_string() + " did not answer as a Tidepool node");
  }
  if (const Json& cluster = field(shown, "cluster"); !cluster.is_null()) {
    return error(Errc::already_exists, node.to_string() + " is already in cluster '" +
                                           display(field(cluster, "name")) + "'");
  }
  if (field(shown, "setup_proof") != Json(setup_proof(setup_secret, answer.server_fingerprint))) {
    return error(Errc::access_denied,
                 node.to_string() +
                     " did not prove it knows the setup secret given: the secret is not that "
                     "node's, or another machine answered at its address");
  }
  settings.token = std::move(setup_secret);
  settings.pinned_fingerprint = answer.server_fingerprint;
  TP_ASSIGN_OR_RETURN(std::unique_ptr<Transport> transport, environment.connect(settings));
  TP_ASSIGN_OR_RETURN(
      Json reply, call_api(*transport, Method::post, "/v1/cluster/create", Json{{"name", name}}));

  const Json& cluster = field(reply, "cluster");
  const Json& token = field(reply, "token");
  const Json& ca_certificate = field(reply, "ca_certificate");
  if (!token.is_string() || !ca_certificate.is_string()) {
    return error(Errc::corrupt, "the node's reply to cluster create has no token or CA: " +
                                    reply.dump(-1, ' ', false, Json::error_handler_t::replace));
  }
  Credentials credentials{.cluster = name,
                          .id = field(cluster, "id"),
                          .token = token.get<std::string>(),
                          .ca_certificate = ca_certificate.get<std::string>(),
                          .nodes = {node.to_string()}};
  if (Status written = write_credentials(file, credentials); !written.ok()) {
    // Nodes keep only the token's hash: the reply is its only copy.
    session.out() << pretty(reply) << '\n';
    return error(written.code(), written.message() + " (the credentials are above: keep them)");
  }
  session.out() << "Created cluster " << name << " (id " << display(credentials.id)
                << "); credentials in " << file.string() << ".\n";
  return {};
}

// Has the credentials file list `address` among the nodes `tide` asks, unless it does.
Status remember_node(Session& session, const std::string& address) {
  return update_credentials(session, [&](Credentials& credentials) {
    std::vector<std::string>& nodes = credentials.nodes;
    if (std::none_of(nodes.begin(), nodes.end(),
                     [&](const std::string& known) { return same_address(known, address); })) {
      nodes.push_back(address);
    }
  });
}

Status add_node(Session& session, const AdminAddress& address,
                const std::string& setup_secret_file) {
  TP_ASSIGN_OR_RETURN(std::string setup_secret, read_setup_secret(session, setup_secret_file));
  TP_ASSIGN_OR_RETURN(Json node, session.call(Method::post, "/v1/cluster/nodes",
                                              Json{{"address", address.to_string()},
                                                   {"setup_secret", std::move(setup_secret)}}));
  session.out() << "Added node " << display(field(node, "id")) << " (" << address.to_string()
                << ").\n";
  return remember_node(session, address.to_string());
}

Status remove_node(Session& session, std::uint64_t id, NodeRemoval how) {
  // The node's admin address is needed afterwards, when the cluster no longer lists it.
  TP_ASSIGN_OR_RETURN(Json status, session.call(Method::get, "/v1/cluster"));
  std::optional<std::string> removed_address;
  std::vector<std::string> other_addresses;
  for (const Json& node : as_list(field(status, "nodes"))) {
    const Json& address = field(node, "admin_address");
    if (!address.is_string()) continue;
    if (field(node, "id") == Json(id)) {
      removed_address = address.get<std::string>();
    } else {
      other_addresses.push_back(address.get<std::string>());
    }
  }
  const std::string node = "/v1/cluster/nodes/" + std::to_string(id);
  if (how == NodeRemoval::smartfail) {
    TP_RETURN_IF_ERROR(session.call(Method::post, node + "/smartfail").status());
    session.out() << "Node " << id
                  << " is being SmartFailed: what it holds is copied to the other nodes first "
                     "(FlexProtect, see 'tide job jobs list'); it leaves the cluster then.\n";
  } else {
    TP_RETURN_IF_ERROR(session.call(Method::delete_, node).status());
    session.out() << "Removed node " << id << ".\n";
  }
  if (!removed_address) return {};
  // A node on its way out may keep running: `tide` must stop asking it first.
  return update_credentials(session, [&](Credentials& credentials) {
    std::vector<std::string>& known = credentials.nodes;
    std::erase_if(known,
                  [&](const std::string& node) { return same_address(node, *removed_address); });
    if (known.empty()) known = other_addresses;
  });
}

Status stopfail_node(Session& session, std::uint64_t id) {
  TP_RETURN_IF_ERROR(
      session.call(Method::post, "/v1/cluster/nodes/" + std::to_string(id) + "/stopfail").status());
  session.out() << "Node " << id
                << " is SmartFailed no more: it stays in the cluster, and FlexProtect spreads "
                   "files over it again.\n";
  // The SmartFail had `tide` stop asking it.
  TP_ASSIGN_OR_RETURN(Json status, session.call(Method::get, "/v1/cluster"));
  for (const Json& node : as_list(field(status, "nodes"))) {
    const Json& address = field(node, "admin_address");
    if (field(node, "id") == Json(id) && address.is_string()) {
      return remember_node(session, address.get<std::string>());
    }
  }
  return {};
}

Status replace_node(Session& session, std::uint64_t old, const AdminAddress& address,
                    const std::string& setup_secret_file) {
  TP_ASSIGN_OR_RETURN(Json status, session.call(Method::get, "/v1/cluster"));
  const Json& nodes = as_list(field(status, "nodes"));
  const auto replaced = std::find_if(nodes.begin(), nodes.end(), [old](const Json& node) {
    return field(node, "id") == Json(old);
  });
  if (replaced == nodes.end()) {
    return error(Errc::not_found, "no node " + std::to_string(old) + " in the cluster");
  }
  if (field(*replaced, "smartfailing") == Json(true)) {
    return error(Errc::already_exists, "node " + std::to_string(old) +
                                           " is being SmartFailed already: add the new node "
                                           "with 'tide cluster add-node'");
  }
  const Json& state = field(*replaced, "state");
  const bool down = state == Json("down") || state == Json("lost");
  TP_RETURN_IF_ERROR(add_node(session, address, setup_secret_file));
  // A new node in another pool takes nobody's place: the old one stays until the administrator
  // says otherwise.
  TP_ASSIGN_OR_RETURN(Json now, session.call(Method::get, "/v1/cluster"));
  for (const Json& node : as_list(field(now, "nodes"))) {
    const Json& at = field(node, "admin_address");
    if (!at.is_string() || !same_address(at.get<std::string>(), address.to_string())) continue;
    if (field(node, "pool") != field(*replaced, "pool")) {
      return error(Errc::invalid_argument,
                   "the new node is in node pool " + display(field(node, "pool")) +
                       ", not in node " + std::to_string(old) + "'s " +
                       display(field(*replaced, "pool")) + ": node " + std::to_string(old) +
                       " is left as it is (set the pool in the new node's node.toml, or remove "
                       "node " +
                       std::to_string(old) + " with 'tide cluster remove-node')");
    }
  }
  if (down) {
    session.out() << "Node " << old
                  << " is down: it is removed at once, and what it held is copied again from the "
                     "other copies (FlexProtect).\n";
  }
  return remove_node(session, old, down ? NodeRemoval::at_once : NodeRemoval::smartfail);
}

Status transfer_leadership(Session& session, std::optional<std::uint64_t> id) {
  const Json body = id ? Json{{"node", *id}} : Json::object();
  TP_ASSIGN_OR_RETURN(Json reply, session.call(Method::post, "/v1/cluster/leader", body));
  session.out() << "Node " << display(field(reply, "leader")) << " leads the cluster.\n";
  return {};
}

Status rotate_token(Session& session) {
  TP_ASSIGN_OR_RETURN(Json reply, session.call(Method::post, "/v1/cluster/token"));
  const Json& token = field(reply, "token");
  if (!token.is_string()) {
    return error(Errc::corrupt, "the node's reply to token rotate has no token: " +
                                    reply.dump(-1, ' ', false, Json::error_handler_t::replace));
  }
  const std::string rotated = token.get<std::string>();
  const std::optional<fs::path>& file = session.credentials_file();
  const Status kept =
      update_credentials(session, [&](Credentials& credentials) { credentials.token = rotated; });
  if (!file || !kept.ok()) {
    // Nodes keep only the token's hash: this is its only copy.
    session.out() << "New token: " << rotated << '\n';
  }
  if (!kept.ok()) {
    return error(kept.code(), "the token was rotated but " + kept.message() +
                                  ": keep the new token above, the old one is refused");
  }
  session.out() << "Rotated the cluster's token; "
                << (file ? "the new one is in " + file->string() + ", " : std::string())
                << "the old one is refused from now on.\n";
  return {};
}

Status show_status(Session& session, Format format) {
  TP_ASSIGN_OR_RETURN(Json status, session.call(Method::get, "/v1/cluster"));
  print(session, format, status,
        [&](std::ostream& out) { render_status(out, status, std::time(nullptr)); });
  return {};
}

Status list_network_interfaces(Session& session, Format format) {
  TP_ASSIGN_OR_RETURN(Json status, session.call(Method::get, "/v1/cluster"));
  const Json interfaces{{"interfaces", network_interfaces(field(status, "nodes"))}};
  print(session, format, interfaces, [&](std::ostream& out) {
    render_network_interfaces(out, field(interfaces, "interfaces"));
  });
  return {};
}

Status get_file(Session& session, const std::string& target, bool details, Format format) {
  TP_ASSIGN_OR_RETURN(Json file, session.call(Method::get, target));
  print(session, format, file, [&](std::ostream& out) { render_file(out, file, details); });
  return {};
}

Status set_file(Session& session, const std::string& target, const Json& changes, Format format) {
  TP_ASSIGN_OR_RETURN(Json file, session.call(Method::put, target, changes));
  print(session, format, file, [&](std::ostream& out) { render_file(out, file, false); });
  return {};
}

Status list_nodepools(Session& session, Format format) {
  TP_ASSIGN_OR_RETURN(Json reply, session.call(Method::get, "/v1/storagepool/nodepools"));
  print(session, format, reply,
        [&](std::ostream& out) { render_nodepools(out, field(reply, "nodepools")); });
  return {};
}

Status view_nodepool(Session& session, const std::string& name, Format format) {
  TP_ASSIGN_OR_RETURN(Json nodepool,
                      session.call(Method::get, "/v1/storagepool/nodepools/" + path_segment(name)));
  print(session, format, nodepool, [&](std::ostream& out) { render_view(out, nodepool); });
  return {};
}

Status create_tier(Session& session, const Json& body) {
  TP_RETURN_IF_ERROR(session.call(Method::post, "/v1/storagepool/tiers", body).status());
  session.out() << "Created tier " << display(field(body, "name")) << ".\n";
  return {};
}

Status list_tiers(Session& session, Format format) {
  TP_ASSIGN_OR_RETURN(Json reply, session.call(Method::get, "/v1/storagepool/tiers"));
  print(session, format, reply,
        [&](std::ostream& out) { render_tiers(out, field(reply, "tiers")); });
  return {};
}

Status view_tier(Session& session, const std::string& name, Format format) {
  TP_ASSIGN_OR_RETURN(Json tier, session.call(Method::get, tier_target(name)));
  print(session, format, tier, [&](std::ostream& out) { render_view(out, tier); });
  return {};
}

Status modify_tier(Session& session, const std::string& name, ChildrenChange change,
                   const std::vector<std::string>& pools) {
  TP_ASSIGN_OR_RETURN(Json tier, session.call(Method::get, tier_target(name)));
  std::vector<std::string> current;
  for (const Json& child : as_list(field(tier, "children"))) {
    if (!child.is_string()) {
      return error(Errc::corrupt,
                   "the cluster lists a child of tier " + name + " that is not a name");
    }
    current.push_back(child.get<std::string>());
  }
  Result<std::vector<std::string>> children = apply_children_change(current, change, pools);
  if (!children.ok()) {
    return error(children.code(), "tier " + name + ": " + children.status().message());
  }
  TP_RETURN_IF_ERROR(
      session.call(Method::put, tier_target(name), Json{{"children", *children}}).status());
  session.out() << "Modified tier " << name << ".\n";
  return {};
}

Status delete_tier(Session& session, const std::string& name) {
  TP_RETURN_IF_ERROR(session.call(Method::delete_, tier_target(name)).status());
  session.out() << "Deleted tier " << name << ".\n";
  return {};
}

Status confirm_delete(Session& session, const std::string& what, bool force) {
  if (force) return {};
  const auto& ask = session.environment().ask;
  const std::optional<std::string> answer =
      ask ? ask("Are you sure you want to delete " + what + "? (yes/[no]): ") : std::nullopt;
  if (!answer) {
    return error(Errc::invalid_argument, "not deleting " + what +
                                             " without confirmation: standard input is not a "
                                             "terminal; pass --force");
  }
  std::string said;
  for (const char c : *answer) {
    if (!std::isspace(static_cast<unsigned char>(c))) {
      said += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  if (said != "yes" && said != "y") {
    return error(Errc::invalid_argument, "not deleting " + what + ": not confirmed");
  }
  return {};
}

Status show_sysctl(Session& session, const std::string& name) {
  TP_ASSIGN_OR_RETURN(Json sysctl, session.call(Method::get, "/v1/sysctl/" + path_segment(name)));
  session.out() << name << " = " << sysctl_value_shown(sysctl) << '\n';
  return {};
}

Status set_sysctl(Session& session, const std::string& name, const std::string& value) {
  TP_ASSIGN_OR_RETURN(Json sysctl, session.call(Method::put, "/v1/sysctl/" + path_segment(name),
                                                Json{{"value", value}}));
  session.out() << name << " = " << sysctl_value_shown(sysctl) << '\n';
  return {};
}

Status list_sysctls(Session& session, Format format) {
  TP_ASSIGN_OR_RETURN(Json reply, session.call(Method::get, "/v1/sysctl"));
  print(session, format, reply,
        [&](std::ostream& out) { render_sysctls(out, field(reply, "sysctls")); });
  return {};
}

Status create_export(Session& session, const Json& body) {
  TP_ASSIGN_OR_RETURN(Json created, session.call(Method::post, "/v1/nfs/exports", body));
  session.out() << "Created export " << display(field(created, "id")) << " ("
                << display(field(body, "path")) << ").\n";
  return {};
}

Status list_exports(Session& session, Format format) {
  TP_ASSIGN_OR_RETURN(Json reply, session.call(Method::get, "/v1/nfs/exports"));
  print(session, format, reply,
        [&](std::ostream& out) { render_exports(out, field(reply, "exports")); });
  return {};
}

Status view_export(Session& session, std::uint64_t id, Format format) {
  TP_ASSIGN_OR_RETURN(Json entry, session.call(Method::get, export_target(id)));
  print(session, format, entry, [&](std::ostream& out) { render_view(out, entry); });
  return {};
}

Status modify_export(Session& session, std::uint64_t id, const Json& body) {
  TP_RETURN_IF_ERROR(session.call(Method::put, export_target(id), body).status());
  session.out() << "Modified export " << id << ".\n";
  return {};
}

Status delete_export(Session& session, std::uint64_t id) {
  TP_RETURN_IF_ERROR(session.call(Method::delete_, export_target(id)).status());
  session.out() << "Deleted export " << id << ".\n";
  return {};
}

Status list_locks(Session& session, const std::string& target, Format format) {
  TP_ASSIGN_OR_RETURN(Json reply, session.call(Method::get, target));
  print(session, format, reply, [&](std::ostream& out) { render_locks(out, reply); });
  return {};
}

Status list_nlm_sessions(Session& session, Format format) {
  TP_ASSIGN_OR_RETURN(Json reply, session.call(Method::get, "/v1/nfs/nlm/sessions"));
  print(session, format, reply, [&](std::ostream& out) { render_nlm_sessions(out, reply); });
  return {};
}

Status show_lock_statistics(Session& session, Format format) {
  TP_ASSIGN_OR_RETURN(Json reply, session.call(Method::get, "/v1/statistics/locks"));
  print(session, format, reply, [&](std::ostream& out) { render_lock_statistics(out, reply); });
  return {};
}

Status show_cache_statistics(Session& session, Format format) {
  TP_ASSIGN_OR_RETURN(Json reply, session.call(Method::get, "/v1/statistics/cache"));
  print(session, format, reply, [&](std::ostream& out) { render_cache_statistics(out, reply); });
  return {};
}

namespace {

// The reply with only the nodes in `nodes` (all when empty) left in its "statistics".
Json only_nodes(Json reply, const std::vector<std::uint64_t>& nodes) {
  if (nodes.empty()) return reply;
  Json kept = Json::array();
  for (const Json& node : as_list(field(reply, "statistics"))) {
    const Json& id = field(node, "node");
    if (id.is_number_unsigned() &&
        std::find(nodes.begin(), nodes.end(), id.get<std::uint64_t>()) != nodes.end()) {
      kept.push_back(node);
    }
  }
  reply["statistics"] = std::move(kept);
  reply.erase("total");
  return reply;
}

// As top does when `refresh`: `show` drawn again every second, `iterations` times (0: until
// stopped), each time on a cleared screen once its figures came (clear_screen). Once otherwise.
Status as_top(Session& session, bool refresh, std::uint32_t iterations,
              const std::function<Status()>& show) {
  for (std::uint32_t shown = 0;;) {
    TP_RETURN_IF_ERROR(show());
    session.out().flush();
    if (!refresh || ++shown == iterations) return {};
    session.environment().sleep(std::chrono::seconds(1));
  }
}

void clear_screen(Session& session) { session.out() << "\x1b[H\x1b[2J"; }

}  // namespace

Status show_system_statistics(Session& session, Format format, const SystemView& view) {
  return as_top(session, view.refresh, view.iterations, [&]() -> Status {
    TP_ASSIGN_OR_RETURN(Json reply, session.call(Method::get, "/v1/statistics/system"));
    reply = only_nodes(std::move(reply), view.nodes);
    if (view.refresh) clear_screen(session);
    print(session, format, reply, [&](std::ostream& out) {
      if (view.refresh) {
        render_system_top(out, reply);
      } else {
        render_system_statistics(out, reply);
      }
    });
    return {};
  });
}

Status show_protocol_statistics(Session& session, Format format, const ProtocolView& view) {
  return as_top(session, view.refresh, view.iterations, [&]() -> Status {
    TP_ASSIGN_OR_RETURN(Json reply, session.call(Method::get, "/v1/statistics/system"));
    Json figures = field(reply, "total");
    if (view.node) {
      reply = only_nodes(std::move(reply), {*view.node});
      if (as_list(field(reply, "statistics")).empty()) {
        return error(Errc::not_found, "node " + std::to_string(*view.node) +
                                          " did not answer or is not in the cluster");
      }
      figures = as_list(field(reply, "statistics")).front();
    }
    if (view.refresh) clear_screen(session);
    print(session, format, figures, [&](std::ostream& out) {
      if (view.refresh) {
        render_protocol_top(out, figures, view.node);
      } else {
        render_protocol_statistics(out, figures, view.node);
      }
    });
    return {};
  });
}

Status show_client_statistics(Session& session, Format format) {
  TP_ASSIGN_OR_RETURN(Json reply, session.call(Method::get, "/v1/statistics/clients"));
  print(session, format, reply, [&](std::ostream& out) { render_client_statistics(out, reply); });
  return {};
}

namespace {

std::string policy_target(const std::string& name) {
  return "/v1/filepool/policies/" + path_segment(name);
}

}  // namespace

Status create_policy(Session& session, const Json& body) {
  TP_ASSIGN_OR_RETURN(Json created, session.call(Method::post, "/v1/filepool/policies", body));
  session.out() << "Created file pool policy " << display(field(created, "name"))
                << " (apply order " << display(field(created, "apply_order")) << ").\n";
  return {};
}

Status list_policies(Session& session, Format format) {
  TP_ASSIGN_OR_RETURN(Json reply, session.call(Method::get, "/v1/filepool/policies"));
  print(session, format, reply, [&](std::ostream& out) { render_policies(out, reply); });
  return {};
}

Status view_policy(Session& session, const std::string& name, Format format) {
  TP_ASSIGN_OR_RETURN(Json entry, session.call(Method::get, policy_target(name)));
  print(session, format, entry, [&](std::ostream& out) { render_view(out, entry); });
  return {};
}

Status modify_policy(Session& session, const std::string& name, const Json& body) {
  TP_RETURN_IF_ERROR(session.call(Method::put, policy_target(name), body).status());
  session.out() << "Modified file pool policy " << name << ".\n";
  return {};
}

Status delete_policy(Session& session, const std::string& name) {
  TP_RETURN_IF_ERROR(session.call(Method::delete_, policy_target(name)).status());
  session.out() << "Deleted file pool policy " << name << ".\n";
  return {};
}

Status explain_policy(Session& session, const std::string& target, Format format) {
  TP_ASSIGN_OR_RETURN(Json reply, session.call(Method::get, target));
  print(session, format, reply, [&](std::ostream& out) { render_explanation(out, reply); });
  return {};
}

namespace {

constexpr std::chrono::milliseconds kJobPollInterval{200};

std::string job_target(std::uint64_t id) { return "/v1/job/jobs/" + std::to_string(id); }

bool has_ended(const Json& job) {
  const Json& state = field(job, "state");
  return state == "succeeded" || state == "failed" || state == "cancelled";
}

std::string how_to_follow(std::uint64_t id) {
  return "follow it with 'tide job jobs view " + std::to_string(id) + "'";
}

// "30s", "0.5s".
std::string seconds_text(std::chrono::milliseconds duration) {
  char text[32];
  std::snprintf(text, sizeof text, "%gs", static_cast<double>(duration.count()) / 1000);
  return text;
}

// The job `started` (as POST /v1/job/jobs replied) once it has ended, asked for every
// kJobPollInterval until the session's timeout.
Result<Json> wait_for_job(Session& session, Json started) {
  const Json& id_field = field(started, "id");
  if (!id_field.is_number_unsigned()) {
    return error(Errc::corrupt, "the cluster's reply to the job's start has no id");
  }
  const std::uint64_t id = id_field.get<std::uint64_t>();
  const Environment& environment = session.environment();
  const std::chrono::milliseconds timeout = session.options().timeout;
  const auto deadline = environment.clock->steady_now() + timeout;
  Json job = std::move(started);
  while (!has_ended(job)) {
    if (environment.clock->steady_now() + kJobPollInterval > deadline) {
      return error(Errc::timed_out, "job [" + std::to_string(id) + "] has not ended after " +
                                        seconds_text(timeout) + " (it is " +
                                        display(field(job, "state")) + "): " + how_to_follow(id));
    }
    environment.sleep(kJobPollInterval);
    Result<Json> polled = session.call(Method::get, job_target(id));
    if (!polled.ok()) {
      return error(polled.code(), "job [" + std::to_string(id) +
                                      "] started, but asking how it goes failed: " +
                                      polled.status().message() + "; " + how_to_follow(id));
    }
    job = std::move(polled).value();
  }
  return job;
}

}  // namespace

Status apply_policies(Session& session, const PolicyApplication& application) {
  if (!application.recurse) {
    // The job walks whatever it is given: a directory means every file under it.
    TP_ASSIGN_OR_RETURN(Json file, session.call(Method::get, application.target));
    if (field(file, "type") == "directory") {
      return error(Errc::is_a_directory,
                   application.path +
                       " is a directory: --recurse applies the policies to every file under it");
    }
  }
  TP_ASSIGN_OR_RETURN(Json started, session.call(Method::post, "/v1/job/jobs", application.job));
  TP_ASSIGN_OR_RETURN(Json job, wait_for_job(session, std::move(started)));
  const std::string id = display(field(job, "id"));
  const std::string state = display(field(job, "state"));
  // The codes only make `tide` exit 1: the messages say what happened.
  if (state != "succeeded") {
    const Json& reason = field(job, "reason");
    return error(Errc::io_error, "job [" + id + "] " + state +
                                     (reason.is_null() ? "" : ": " + display(reason)) +
                                     " (see 'tide job reports view " + id + "')");
  }
  render_policy_application(session.out(), job);
  if (!as_list(field(job, "errors")).empty()) {
    const Json& count = field(field(job, "progress"), "errors");
    return error(Errc::io_error, "job [" + id + "] ended with " + display(count) +
                                     (count == Json(1) ? " error" : " errors"));
  }
  return {};
}

Status flush_caches(Session& session, const Json& body) {
  TP_ASSIGN_OR_RETURN(Json reply, session.call(Method::post, "/v1/cache/flush", body));
  std::vector<std::string> nodes;
  for (const Json& node : as_list(field(reply, "flushed")))
    nodes.push_back(display(field(node, "node")));
  std::string levels = body.value("l1", false) == body.value("l2", false) ? "L1 and L2"
                       : body.value("l1", false)                          ? "L1"
                                                                          : "L2";
  session.out() << "Flushed " << levels << " on node" << (nodes.size() == 1 ? " " : "s ");
  for (std::size_t i = 0; i < nodes.size(); ++i) session.out() << (i > 0 ? ", " : "") << nodes[i];
  session.out() << ".\n";
  const Json& unreachable = field(reply, "unreachable");
  if (!as_list(unreachable).empty()) {
    return error(Errc::unavailable, "nodes not answering, not flushed: " + display(unreachable));
  }
  return {};
}

namespace {

std::string job_type_target(const std::string& name) {
  return "/v1/job/types/" + path_segment(name);
}

// The state the API is asked for, and the word that says it was reached.
std::pair<const char*, const char*> requested_state(JobChange change) {
  switch (change) {
    case JobChange::pause:
      return {"paused", "Paused"};
    case JobChange::resume:
      return {"running", "Resumed"};
    case JobChange::cancel:
      break;
  }
  return {"cancelled", "Cancelled"};
}

}  // namespace

Status start_job(Session& session, const Json& body) {
  TP_ASSIGN_OR_RETURN(Json job, session.call(Method::post, "/v1/job/jobs", body));
  // OneFS's words, which scripts written for `isi job jobs start` look for.
  session.out() << "Started job [" << display(field(job, "id")) << "]\n";
  return {};
}

Status list_jobs(Session& session, Format format) {
  TP_ASSIGN_OR_RETURN(Json reply, session.call(Method::get, "/v1/job/jobs"));
  print(session, format, reply,
        [&](std::ostream& out) { render_jobs(out, field(reply, "jobs"), std::time(nullptr)); });
  return {};
}

Status view_job(Session& session, std::uint64_t id, Format format) {
  TP_ASSIGN_OR_RETURN(Json job, session.call(Method::get, job_target(id)));
  print(session, format, job, [&](std::ostream& out) { render_job(out, job); });
  return {};
}

Status change_job(Session& session, std::uint64_t id, JobChange change) {
  const auto [state, done] = requested_state(change);
  TP_RETURN_IF_ERROR(session.call(Method::put, job_target(id), Json{{"state", state}}).status());
  session.out() << done << " job [" << id << "]\n";
  return {};
}

Status list_job_types(Session& session, Format format) {
  TP_ASSIGN_OR_RETURN(Json reply, session.call(Method::get, "/v1/job/types"));
  print(session, format, reply,
        [&](std::ostream& out) { render_job_types(out, field(reply, "types")); });
  return {};
}

Status view_job_type(Session& session, const std::string& name, Format format) {
  TP_ASSIGN_OR_RETURN(Json type, session.call(Method::get, job_type_target(name)));
  print(session, format, type, [&](std::ostream& out) { render_job_type(out, type); });
  return {};
}

Status modify_job_type(Session& session, const std::string& name, const Json& body) {
  TP_RETURN_IF_ERROR(session.call(Method::put, job_type_target(name), body).status());
  session.out() << "Modified job type " << name << ".\n";
  return {};
}

Status list_job_reports(Session& session, Format format) {
  TP_ASSIGN_OR_RETURN(Json reply, session.call(Method::get, "/v1/job/reports"));
  print(session, format, reply,
        [&](std::ostream& out) { render_job_reports(out, field(reply, "reports")); });
  return {};
}

Status view_job_report(Session& session, std::uint64_t id, Format format) {
  TP_ASSIGN_OR_RETURN(Json job, session.call(Method::get, "/v1/job/reports/" + std::to_string(id)));
  print(session, format, job, [&](std::ostream& out) { render_job_report(out, job); });
  return {};
}

Status show_job_status(Session& session, Format format) {
  TP_ASSIGN_OR_RETURN(Json status, session.call(Method::get, "/v1/job/status"));
  print(session, format, status, [&](std::ostream& out) { render_job_status(out, status); });
  return {};
}

}  // namespace tidepool::cli
