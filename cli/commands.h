// What each `tide` command does with the cluster, once its arguments have been checked. Every
// function prints its result to the session's output and returns the error that stops it.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "cli/admin_client.h"
#include "cli/credentials.h"
#include "cli/json.h"
#include "cli/requests.h"
#include "cli/tide.h"
#include "common/status.h"

namespace tidepool::cli {

enum class Format { table, json };

// The options every command takes (before or after the command words).
struct GlobalOptions {
  std::optional<std::vector<AdminAddress>> cluster;  // --cluster
  std::optional<std::string> workdir;                // --workdir
  std::optional<std::string> token;                  // --token
  std::chrono::milliseconds timeout{30'000};         // --timeout
  bool insecure = false;                             // --insecure
};

// One run of `tide`: where output goes, and the cluster, found on first use from the options,
// the environment and the credentials file.
class Session {
 public:
  Session(const Environment& environment, GlobalOptions options, std::ostream& out,
          std::ostream& err);

  std::ostream& out() { return out_; }
  const GlobalOptions& options() const { return options_; }
  const Environment& environment() const { return environment_; }

  // One call of the cluster's admin API.
  Result<Json> call(Method method, const std::string& target,
                    const std::optional<Json>& body = std::nullopt);

  // The credentials file the cluster was found through, if it was (call() first).
  const std::optional<std::filesystem::path>& credentials_file() const { return credentials_file_; }

 private:
  Result<ConnectionSettings> find_cluster();

  const Environment& environment_;
  const GlobalOptions options_;
  std::ostream& out_;
  std::ostream& err_;
  std::unique_ptr<Transport> transport_;  // set by the first call()
  std::optional<std::filesystem::path> credentials_file_;
};

// tide network interfaces list: each node's front-end, backend and admin addresses, as
// `isi network interfaces list` shows a node's ports.
Status list_network_interfaces(Session& session, Format format);

// isi's confirmation before a delete: none with `force`; on a terminal, the user answers
// "yes"; from a script (standard input not a terminal), refused — pass --force. `what` names
// what would be deleted ("tier 'hot'").
Status confirm_delete(Session& session, const std::string& what, bool force);

// tide cluster ...
// Each with the node's setup secret, read from `setup_secret_file`.
Status create_cluster(Session& session, const std::string& name, const AdminAddress& node,
                      const std::string& setup_secret_file);
Status add_node(Session& session, const AdminAddress& address,
                const std::string& setup_secret_file);
// How `tide cluster remove-node` takes a node out: SmartFail (its data copied to the other nodes
// first, then removed by the cluster), or at once.
enum class NodeRemoval { smartfail, at_once };
Status remove_node(Session& session, std::uint64_t id, NodeRemoval how);
// `tide cluster stopfail ID`: calls off the SmartFail of node `id`, which stays in the cluster.
Status stopfail_node(Session& session, std::uint64_t id);
// `tide cluster replace-node OLD ADDR`: adds the node at `address`, then SmartFails node `old`
// if it is up, or removes it at once if it is down (its data is protected again from the other
// copies, the new node's included).
Status replace_node(Session& session, std::uint64_t old, const AdminAddress& address,
                    const std::string& setup_secret_file);
// `tide cluster transfer-leadership [ID]`: to node `id`, or with none to any other voter.
Status transfer_leadership(Session& session, std::optional<std::uint64_t> id);
Status rotate_token(Session& session);
// tide status
Status show_status(Session& session, Format format);
// `tide get [-D] PATH`; `target` from namespace_target(PATH).
Status get_file(Session& session, const std::string& target, bool details, Format format);
// `tide set -a PATTERN PATH`: changes the file and shows it as `tide get` does.
Status set_file(Session& session, const std::string& target, const Json& changes, Format format);
// tide storagepool ...
Status list_nodepools(Session& session, Format format);
Status view_nodepool(Session& session, const std::string& name, Format format);
Status create_tier(Session& session, const Json& body);
Status list_tiers(Session& session, Format format);
Status view_tier(Session& session, const std::string& name, Format format);
Status modify_tier(Session& session, const std::string& name, ChildrenChange change,
                   const std::vector<std::string>& pools);
Status delete_tier(Session& session, const std::string& name);
// tide sysctl ...
Status show_sysctl(Session& session, const std::string& name);
Status set_sysctl(Session& session, const std::string& name, const std::string& value);
Status list_sysctls(Session& session, Format format);
// tide nfs exports ...
Status create_export(Session& session, const Json& body);
Status list_exports(Session& session, Format format);
Status view_export(Session& session, std::uint64_t id, Format format);
Status modify_export(Session& session, std::uint64_t id, const Json& body);
Status delete_export(Session& session, std::uint64_t id);

// tide locks list; `target` from locks_target().
Status list_locks(Session& session, const std::string& target, Format format);
// tide nfs nlm sessions list
Status list_nlm_sessions(Session& session, Format format);
// tide statistics locks
Status show_lock_statistics(Session& session, Format format);
// tide statistics cache
Status show_cache_statistics(Session& session, Format format);
// What `tide statistics system` shows: the nodes listed (all when empty), once or, with
// `refresh`, again every second, `iterations` times (0: until the process is stopped).
struct SystemView {
  std::vector<std::uint64_t> nodes;
  bool refresh = false;
  std::uint32_t iterations = 0;
};
Status show_system_statistics(Session& session, Format format, const SystemView& view);
// tide statistics pstat: the cluster's total, or `node`'s figures; `refresh` as top does.
struct ProtocolView {
  std::optional<std::uint64_t> node;
  bool refresh = false;
  std::uint32_t iterations = 0;
};
Status show_protocol_statistics(Session& session, Format format, const ProtocolView& view);
// tide statistics client
Status show_client_statistics(Session& session, Format format);
// tide filepool policies ...; `name` "default" is the default policy.
Status create_policy(Session& session, const Json& body);
Status list_policies(Session& session, Format format);
Status view_policy(Session& session, const std::string& name, Format format);
Status modify_policy(Session& session, const std::string& name, const Json& body);
Status delete_policy(Session& session, const std::string& name);
// tide filepool explain PATH; `target` is /v1/filepool/explain/ifs/...
Status explain_policy(Session& session, const std::string& target, Format format);
// `tide filepool apply [--recurse] [--dry-run] PATH`.
struct PolicyApplication {
  std::string path;      // absolute, under /ifs
  std::string target;    // namespace_target(path)
  bool recurse = false;  // without it a directory is refused
  Json job;              // the SmartPoolsTree job's job_start_body()
};
// Starts the job and waits for it to end, polling it until the session's timeout, then says
// what it did. A directory without `recurse` is refused, before anything starts, with
// Errc::is_a_directory: `tide` exits 2 for it, as for a usage error.
Status apply_policies(Session& session, const PolicyApplication& application);
// tide flush; `body` as POST /v1/cache/flush takes it.
Status flush_caches(Session& session, const Json& body);

// tide job jobs ...; `body` from job_start_body().
Status start_job(Session& session, const Json& body);
Status list_jobs(Session& session, Format format);
Status view_job(Session& session, std::uint64_t id, Format format);
// `tide job jobs pause|resume|cancel ID`: the state the job is asked to go to.
enum class JobChange { pause, resume, cancel };
Status change_job(Session& session, std::uint64_t id, JobChange change);
// tide job types ...; `body` from job_type_modify_body().
Status list_job_types(Session& session, Format format);
Status view_job_type(Session& session, const std::string& name, Format format);
Status modify_job_type(Session& session, const std::string& name, const Json& body);
// tide job reports ...
Status list_job_reports(Session& session, Format format);
Status view_job_report(Session& session, std::uint64_t id, Format format);
// tide job status
Status show_job_status(Session& session, Format format);

}  // namespace tidepool::cli
