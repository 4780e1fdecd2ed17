// How `tide` prints the cluster's replies for people (`--format table`, the default), in the
// manner of `isi`: aligned columns under a header and a dashed rule, "Key: value" blocks for
// single objects. Replies are read defensively: a missing or mistyped field prints as "-".
#pragma once

#include <cstdint>
#include <ctime>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "cli/json.h"

namespace tidepool::cli {

enum class Align { left, right };

struct Column {
  std::string title;
  Align align = Align::left;
};

class Table {
 public:
  explicit Table(std::vector<Column> columns);

  // Missing cells are empty; extra cells are dropped.
  void add_row(std::vector<std::string> cells);
  std::size_t size() const { return rows_.size(); }
  // The rule's width, in characters.
  std::size_t width() const;

  // The header, a dashed rule as wide as the table, the rows. Columns are two spaces apart and
  // as wide as their widest cell (counted in characters, not bytes); no line ends in spaces.
  void render(std::ostream& out) const;

 private:
  std::vector<std::size_t> column_widths() const;

  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;  // each as long as columns_
};

// The table, then a closing rule and "Total: N", as `isi ... list` prints them.
void render_listing(std::ostream& out, const Table& table);

// Decimal units, three significant digits from 1 kB: "512 B", "12.3 MB", "4.0 TB".
std::string human_bytes(std::uint64_t bytes);
// human_bytes per second: "12.3 MB/s"; "-" for a negative or non-finite rate.
std::string human_rate(double bytes_per_second);

// A span of time in its two largest units: "45s", "1m 5s", "2h 3m", "3d 4h".
std::string human_duration(std::uint64_t seconds);

// A JSON value as a table cell: strings as they are, null as "-", booleans "Yes"/"No", lists
// comma-separated ("-" when empty), numbers and objects as JSON.
std::string display(const Json& value);

// "map_all_uid" -> "Map All UID".
std::string field_title(const std::string& key);

// Every field of `object` on its own line, "Key: value", keys right-aligned as in `isi ... view`.
void render_view(std::ostream& out, const Json& object);

// The replies of the API, one function per kind (daemon/admin_api.md names the objects).
// The cluster's status; its jobs' running times are counted up to `now` (Unix seconds).
void render_status(std::ostream& out, const Json& status, std::time_t now);
void render_nodepools(std::ostream& out, const Json& nodepools);
void render_tiers(std::ostream& out, const Json& tiers);
void render_sysctls(std::ostream& out, const Json& sysctls);
// A sysctl's value, and a duration's also as a bare number in its unit: "1D (86400000 ms)".
std::string sysctl_value_shown(const Json& sysctl);
void render_exports(std::ostream& out, const Json& exports);
// The interfaces of the nodes of `nodes` (the cluster status's): for each node, one for the
// front end (NFS and its side protocols), one for the backend (the other nodes), one for the
// admin API — {"lnn","name","status","owners","ip_addresses"}.
Json network_interfaces(const Json& nodes);
void render_network_interfaces(std::ostream& out, const Json& interfaces);
// `tide get`: one line under a header (policy, protection level, access pattern, file); with
// `details`, as `isi get -D`, then the inode, its shard's home and mirror, its layout and the
// nodes holding each stripe unit.
void render_file(std::ostream& out, const Json& file, bool details);

// `tide locks list`, `tide nfs nlm sessions list`, `tide statistics locks`: the gathered
// reports of every node, then the nodes that did not answer, if any.
void render_locks(std::ostream& out, const Json& reply);
void render_nlm_sessions(std::ostream& out, const Json& reply);
void render_lock_statistics(std::ostream& out, const Json& reply);
// `tide statistics cache`: a row per node, then the cluster's total.
void render_cache_statistics(std::ostream& out, const Json& reply);
// GET /v1/statistics/system's reply: a row per node, then the total.
void render_system_statistics(std::ostream& out, const Json& reply);
// `statistics system --format top` in the columns of isi's: an "All" row, then each node; the
// protocols' throughput, network and disk in bytes per second with K, M, G.
void render_system_top(std::ostream& out, const Json& reply);
// One node's (or the total's) statistics object from that reply: the NFSv3 operations per
// second by procedure, then CPU, network and disk. `node`: whose they are (none: the cluster's).
void render_protocol_statistics(std::ostream& out, const Json& figures,
                                std::optional<std::uint64_t> node);
// The same as `isi statistics pstat --format top` shows it: the banner "NFS3 Operations Per
// Second", the procedures three a line, then CPU, network and disk sections.
void render_protocol_top(std::ostream& out, const Json& figures,
                         std::optional<std::uint64_t> node);
// GET /v1/filepool/policies's reply: the policies in order, then the default.
void render_policies(std::ostream& out, const Json& reply);
// GET /v1/filepool/explain/...'s reply.
void render_explanation(std::ostream& out, const Json& reply);
// GET /v1/statistics/clients's reply.
void render_client_statistics(std::ostream& out, const Json& reply);

// `tide job ...`: JOB and JOBTYPE objects and GET /v1/job/status's reply. Times, Unix seconds in
// the API, show in UTC.

// The jobs not ended, with how long each has run, counted up to `now` (Unix seconds).
void render_jobs(std::ostream& out, const Json& jobs, std::time_t now);
void render_job(std::ostream& out, const Json& job);
// The ended jobs, newest first as the server sends them.
void render_job_reports(std::ostream& out, const Json& reports);
// An ended job: as render_job, with the time each phase took.
void render_job_report(std::ostream& out, const Json& job);
void render_job_types(std::ostream& out, const Json& types);
void render_job_type(std::ostream& out, const Json& type);
// As `isi job status`: the node running jobs, the jobs not ended, the last ones ended.
void render_job_status(std::ostream& out, const Json& status);
// `tide filepool apply`: one line of what the SmartPoolsTree job that succeeded did (or, a dry
// run, would do) with its paths, then "Errors:" and its messages, if it kept any.
void render_policy_application(std::ostream& out, const Json& job);

}  // namespace tidepool::cli
