#include "cli/render.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <ctime>
#include <limits>
#include <sstream>
#include <string>

namespace tidepool::cli {
namespace {

std::string rendered(const Table& table) {
  std::ostringstream out;
  table.render(out);
  return out.str();
}

template <typename Render>
std::string rendered(Render render, const Json& json) {
  std::ostringstream out;
  render(out, json);
  return out.str();
}

Json sample_status(Json jobs) {
  Json status = Json::parse(R"({
    "name": "tidepool", "id": "c0ffee", "epoch": 7, "leader": 1, "health": "degraded",
    "namespace": {"home": 1, "state": "serving", "mirror": 2, "mirror_state": "down"},
    "nodes": [
      {"id": 1, "name": "node1", "pool": "f800", "state": "up",
       "frontend_address": "127.0.0.1", "backend_address": "127.0.0.1:7100",
       "admin_address": "127.0.0.1:8080",
       "stats": {"in_bytes_per_second": 12345678, "out_bytes_per_second": 1000,
                 "used_bytes": 1200000000, "size_bytes": 4000000000}},
      {"id": 2, "name": "node2", "pool": "f800", "state": "down",
       "frontend_address": "127.0.0.2", "backend_address": "127.0.0.2:7100",
       "admin_address": "127.0.0.2:8080", "stats": null}
    ],
    "nodepools": [{"name": "f800", "nodes": [1, 2], "tier": "hot"}],
    "tiers": [{"name": "hot", "children": ["f800"]}]
  })");
  status["jobs"] = std::move(jobs);
  return status;
}

// A JOB as daemon/admin_api.md shapes it: SmartPools, started 2024-05-01T22:00:05Z.
Json sample_job() {
  return Json::parse(R"({
    "id": 3, "type": "SmartPools", "state": "running", "priority": 6, "policy": "LOW",
    "paths": [], "dry_run": false, "created": 1714600800, "started": 1714600805, "ended": null,
    "coordinator": 1, "runs": 1, "phase": "scan", "phases": [{"name": "scan", "seconds": 65}],
    "progress": {"files_scanned": 1200, "directories_scanned": 40, "files_matched": 300,
                 "patterns_set": 12, "files_moved": 250, "bytes_moved": 1234567890,
                 "files_resumed": 1, "files_misplaced": 38, "errors": 0},
    "errors": [], "reason": null})");
}

// The same job, ended with two errors after two phases.
Json sample_report() {
  Json job = sample_job();
  job["state"] = "failed";
  job["ended"] = 1714600905;
  job["coordinator"] = nullptr;
  job["runs"] = 2;
  job["phase"] = "apply";
  job["phases"] = Json::parse(R"([{"name": "scan", "seconds": 65}, {"name": "apply",
                                   "seconds": 35}])");
  job["progress"]["errors"] = 2;
  job["errors"] = {"/ifs/a: permission denied", "/ifs/b: no space"};
  job["reason"] = "too many errors";
  return job;
}

// A second job, queued and not started yet.
Json sample_waiting_job() {
  Json waiting = sample_job();
  waiting["id"] = 4;
  waiting["type"] = "SmartPoolsTree";
  waiting["state"] = "waiting";
  waiting["priority"] = 5;
  waiting["policy"] = "OFF_HOURS";
  waiting["started"] = nullptr;
  waiting["phase"] = "";
  return waiting;
}

// 65 seconds after sample_job() started.
constexpr std::time_t kSampleNow = 1714600805 + 65;

std::string rendered_status(const Json& status) {
  std::ostringstream out;
  render_status(out, status, kSampleNow);
  return out.str();
}

TEST(Table, ColumnsAreAsWideAsTheirWidestCellAndTwoSpacesApart) {
  Table table({{"Name"}, {"Size", Align::right}, {"Tier"}});
  table.add_row({"f800", "12.3 MB", "hot"});
  table.add_row({"a200-archive", "4 B", ""});
  EXPECT_EQ(rendered(table),
            "Name             Size  Tier\n"
            "---------------------------\n"
            "f800          12.3 MB  hot\n"
            "a200-archive      4 B\n");
  EXPECT_EQ(table.width(), 27u);
}

TEST(Table, WidthsCountCharactersNotBytes) {
  Table table({{"Name"}, {"Note"}});
  table.add_row({"caf\u00e9s", "x"});
  EXPECT_EQ(rendered(table),
            "Name   Note\n"
            "-----------\n"
            "caf\u00e9s  x\n");
}

TEST(Table, MissingCellsAreEmptyAndExtraCellsDropped) {
  Table table({{"A"}, {"B"}});
  table.add_row({"1"});
  table.add_row({"1", "2", "3"});
  EXPECT_EQ(rendered(table), "A  B\n----\n1\n1  2\n");
}

TEST(Table, ListingEndsWithARuleAndTheTotal) {
  Table table({{"Name"}});
  table.add_row({"hot"});
  std::ostringstream out;
  render_listing(out, table);
  EXPECT_EQ(out.str(), "Name\n----\nhot\n----\nTotal: 1\n");
}

TEST(HumanBytes, DecimalUnitsWithOneDecimal) {
  EXPECT_EQ(human_bytes(0), "0 B");
  EXPECT_EQ(human_bytes(999), "999 B");
  EXPECT_EQ(human_bytes(1000), "1.0 kB");
  EXPECT_EQ(human_bytes(1536), "1.5 kB");
  EXPECT_EQ(human_bytes(999'949), "999.9 kB");
  EXPECT_EQ(human_bytes(999'950), "1.0 MB");  // not "1000.0 kB"
  EXPECT_EQ(human_bytes(12'345'678), "12.3 MB");
  EXPECT_EQ(human_bytes(4'000'000'000'000), "4.0 TB");
  EXPECT_EQ(human_bytes(std::numeric_limits<std::uint64_t>::max()), "18.4 EB");
}

TEST(HumanBytes, RatesArePerSecondAndNonsenseIsADash) {
  EXPECT_EQ(human_rate(12.3e6), "12.3 MB/s");
  EXPECT_EQ(human_rate(0), "0 B/s");
  EXPECT_EQ(human_rate(-1), "-");
  EXPECT_EQ(human_rate(std::numeric_limits<double>::quiet_NaN()), "-");
}

TEST(Display, ValuesAsCells) {
  EXPECT_EQ(display(Json()), "-");
  EXPECT_EQ(display(Json("hot")), "hot");
  EXPECT_EQ(display(Json(true)), "Yes");
  EXPECT_EQ(display(Json(false)), "No");
  EXPECT_EQ(display(Json(65534)), "65534");
  EXPECT_EQ(display(Json::array({"10.0.0.0/8", "127.0.0.1"})), "10.0.0.0/8,127.0.0.1");
}

TEST(Display, FieldTitlesAreWordsWithIdsInCapitals) {
  EXPECT_EQ(field_title("map_all_uid"), "Map All UID");
  EXPECT_EQ(field_title("id"), "ID");
  EXPECT_EQ(field_title("read_only"), "Read Only");
  EXPECT_EQ(field_title("tier"), "Tier");
}

TEST(View, KeysAreRightAlignedInTheServersOrder) {
  EXPECT_EQ(rendered(render_view, Json::parse(R"({"name": "hot", "children": ["f800", "h500"]})")),
            "    Name: hot\n"
            "Children: f800,h500\n");
}

TEST(File, TheIfsInodeLineListsEachNodeHoldingDataFirstWithTheCopyOffsetAndBytesItHolds) {
  const auto ifs_inode = [](const char* units, std::uint64_t size) {
    std::ostringstream out;
    render_file(out,
                Json{{"path", "/ifs/f"},
                     {"type", "file"},
                     {"size", size},
                     {"layout", {{"pool", "f800"}, {"stripe_unit", std::uint64_t{131072}}}},
                     {"stripe_units", Json::parse(units)}},
                true);
    const std::string text = out.str();
    const std::size_t at = text.find("IFS inode:");
    return at == std::string::npos ? text : text.substr(at, text.find('\n', at) - at);
  };
  // Node 2 holds the second copy of unit 0 and the first of units 1-2; node 3 the second of
  // units 1-2, the last of them short.
  EXPECT_EQ(ifs_inode(R"([{"first": 0, "count": 1, "nodes": [1, 2]},
                          {"first": 1, "count": 2, "nodes": [2, 3]}])",
                      300000),
            "IFS inode:        [ 1,0,0:131072, 2,1,0:300000, 3,1,131072:168928 ]");
  EXPECT_EQ(ifs_inode(R"([{"first": 0, "count": 1, "nodes": [4, 5]}])", 10),
            "IFS inode:        [ 4,0,0:10, 5,1,0:10 ]");
  EXPECT_EQ(ifs_inode("[]", 0), "IFS inode:        [ ]");
}

TEST(Status, ShowsTheClusterThenNodesPoolsTiersAndJobs) {
  EXPECT_EQ(rendered_status(sample_status(Json::array())),
            "Cluster Name:     tidepool\n"
            "Cluster Health:   degraded\n"
            "Cluster ID:       c0ffee\n"
            "Epoch:            7\n"
            "Leader:           1\n"
            "Namespace Home:   node 1 (serving)\n"
            "Namespace Mirror: node 2 (down)\n"
            "\n"
            "Nodes:\n"
            "ID  Name   Pool  State  Throughput In  Throughput Out  Used / Size\n"
            "----------------------------------------------------------------------------\n"
            " 1  node1  f800  up         12.3 MB/s        1.0 kB/s  1.2 GB / 4.0 GB (30%)\n"
            " 2  node2  f800  down               -               -  -\n"
            "\n"
            "Node Pools:\n"
            "Name  Nodes  Tier\n"
            "-----------------\n"
            "f800  1,2    hot\n"
            "\n"
            "Tiers:\n"
            "Name  Children\n"
            "--------------\n"
            "hot   f800\n"
            "\n"
            "Jobs:\n"
            "No running jobs.\n");
}

TEST(Status, ANamespaceOfSeveralShardsListsWhereEachLives) {
  Json status = sample_status(Json::array());
  status["namespace"]["shards"] = Json::parse(R"([
      {"id": 0, "home": 1, "state": "serving", "mirror": 2, "mirror_state": "down"},
      {"id": 1, "home": null, "state": "unknown", "mirror": null, "mirror_state": "none"}])");
  const std::string text = rendered_status(status);
  EXPECT_NE(text.find("Shards:\n"
                      "Shard  Home              Mirror\n"
                      "--------------------------------------\n"
                      "    0  node 1 (serving)  node 2 (down)\n"
                      "    1  - (unknown)       - (none)\n"
                      "\nNode Pools:"),
            std::string::npos)
      << text;
  status["namespace"]["shards"].erase(1);
  EXPECT_EQ(rendered_status(status).find("Shards:"), std::string::npos) << "one is the namespace";
}

TEST(Status, JobsNotEndedAreRowsAsJobJobsListShowsThem) {
  const std::string text =
      rendered_status(sample_status(Json::array({sample_job(), sample_waiting_job()})));
  EXPECT_EQ(text.substr(text.find("Jobs:\n")),
            "Jobs:\n"
            "ID  Type            State    Impact     Pri  Phase  Running Time\n"
            "----------------------------------------------------------------\n"
            " 3  SmartPools      running  LOW          6  scan          1m 5s\n"
            " 4  SmartPoolsTree  waiting  OFF_HOURS    5  -                 -\n");
}

TEST(Status, ByteCountsMayComeAsAnyKindOfNumber) {
  Json status = sample_status(Json::array());
  status["nodes"][0]["stats"]["used_bytes"] = 1.2e9;
  status["nodes"][0]["stats"]["size_bytes"] = -4;
  status["nodes"][1]["stats"] = Json{{"used_bytes", 2.0e9}, {"size_bytes", 4000000000}};
  const std::string text = rendered_status(status);
  EXPECT_NE(text.find("1.0 kB/s  -\n"), std::string::npos) << text;
  EXPECT_NE(text.find("-  2.0 GB / 4.0 GB (50%)\n"), std::string::npos) << text;
}

TEST(Status, AReplyOfTheWrongShapePrintsDashesInsteadOfFailing) {
  const std::string text = rendered_status(Json::parse(R"({"nodes": [7, {"id": "x"}]})"));
  EXPECT_NE(text.find("Cluster Name:     -\n"), std::string::npos) << text;
  EXPECT_NE(text.find("No running jobs."), std::string::npos) << text;
  EXPECT_NO_THROW(rendered_status(Json::array()));
  EXPECT_NO_THROW(rendered(render_exports, Json("not a list")));
}

TEST(Listings, ExportsShowOneRowEach) {
  EXPECT_EQ(rendered(render_exports, Json::parse(R"([
      {"id": 1, "path": "/ifs", "clients": ["*"], "read_only": false, "secure": true,
       "root_squash": true, "map_all_uid": null, "map_all_gid": null, "anon_uid": 65534,
       "anon_gid": 65534},
      {"id": 12, "path": "/ifs/data", "clients": ["10.0.0.0/8", "127.0.0.1"],
       "read_only": true, "secure": false, "root_squash": false, "map_all_uid": 1000,
       "map_all_gid": 100, "anon_uid": 65534, "anon_gid": 65534}])")),
            "ID  Path       Clients               Read Only  Secure  Root Squash  Map All\n"
            "-----------------------------------------------------------------------------\n"
            " 1  /ifs       *                     No         Yes     Yes          -\n"
            "12  /ifs/data  10.0.0.0/8,127.0.0.1  Yes        No      No           1000:100\n"
            "-----------------------------------------------------------------------------\n"
            "Total: 2\n");
}

TEST(Listings, LocksShowModeStateAgeAndWhoTheyAreFor) {
  const std::string text = rendered(render_locks, Json::parse(R"({
      "locks": [
        {"node": 1, "kind": "advisory", "file": 42, "start": 0, "end": null, "state": "granted",
         "mode": "EX", "requested": "EX", "holder": "nfs client a", "age_ms": 1500},
        {"node": 3, "kind": "advisory", "file": 42, "start": 10, "end": 20, "state": "waiting",
         "mode": null, "requested": "PR", "holder": "nfs client b", "age_ms": 61000}],
      "unlisted": 0, "unreachable": [2]})"));
  EXPECT_NE(text.find("1  advisory    42  [0, EOF)  EX    granted   1.5s  nfs client a"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("3  advisory    42  [10, 20)  (PR)  waiting  1m01s  nfs client b"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("Total: 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("Not answering, left out: nodes 2\n"), std::string::npos) << text;
}

TEST(Listings, LockStatisticsShowRoundTripsInMicroseconds) {
  const std::string text = rendered(render_lock_statistics, Json::parse(R"({
      "statistics": [{"node": 1, "requests": 5, "grants": 4, "conversions": 0, "refusals": 1,
                      "callbacks_sent": 2, "round_trip_mean_us": 81.4, "round_trip_p99_us": 119,
                      "coordinated_locks": 3}],
      "unreachable": []})"));
  EXPECT_NE(text.find("81 us"), std::string::npos) << text;
  EXPECT_NE(text.find("119 us"), std::string::npos) << text;
  EXPECT_EQ(text.find("Not answering"), std::string::npos) << text;
  EXPECT_NO_THROW(rendered(render_nlm_sessions, Json("not an object")));
}

TEST(Listings, CacheStatisticsShowARowPerNodeThenTheTotal) {
  const std::string text = rendered(render_cache_statistics, Json::parse(R"({
      "statistics": [{"node": 2,
                      "l1": {"budget_bytes": 1000000, "cached_bytes": 500000,
                             "data": {"accessed_bytes": 64000000, "hit_percent": 94.12,
                                      "prefetched_bytes": 60000000,
                                      "prefetch_used_bytes": 59000000,
                                      "prefetch_wasted_bytes": 0},
                             "metadata": {"hit_percent": 99.5},
                             "coherence_invalidations": 3},
                      "l2": {"budget_bytes": 4000000, "cached_bytes": 2000000,
                             "data": {"read_bytes": 0, "hit_percent": null},
                             "metadata": {"hit_percent": null}}}],
      "total": {"l1": {"data": {"accessed_bytes": 64000000, "hit_percent": 94.12}}},
      "unreachable": [3]})"));
  EXPECT_NE(
      text.find("    2  500.0 kB / 1.0 MB  64.0 MB   94.1%     60.0 MB  59.0 MB     0 B  "
                "      99.5%              3  2.0 MB / 4.0 MB      0 B       -            -\n"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("Total              - / -  64.0 MB   94.1%           -"), std::string::npos)
      << text;
  EXPECT_NE(text.find("Not answering, left out: nodes 3\n"), std::string::npos) << text;
}

TEST(Listings, SystemStatisticsShowARowPerNodeThenTheTotal) {
  const std::string text = rendered(render_system_statistics, Json::parse(R"({
      "statistics": [{"node": 1, "cpu_percent": 12.34,
                      "nfs": {"ops_per_second": 1500, "in_bytes_per_second": 2000,
                              "out_bytes_per_second": 3000000},
                      "network": {"in_bytes_per_second": 2500, "out_bytes_per_second": 3000100},
                      "disk": {"read_bytes_per_second": 0, "write_bytes_per_second": 4096}}],
      "total": {"cpu_percent": 12.34, "nfs": {"ops_per_second": 1500}},
      "unreachable": [2]})"));
  EXPECT_NE(text.find("    1  12.3%       1500  2.0 kB/s  3.0 MB/s  2.5 kB/s  3.0 MB/s      0 B/s"
                      "    4.1 kB/s\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("Total  12.3%       1500         -"), std::string::npos) << text;
  EXPECT_NE(text.find("Not answering, left out: nodes 2\n"), std::string::npos) << text;
  EXPECT_NO_THROW(rendered(render_system_statistics, Json("not an object")));
}

TEST(Listings, ProtocolStatisticsShowEveryProcedureThenCpuNetworkAndDisk) {
  std::ostringstream out;
  render_protocol_statistics(out, Json::parse(R"({
      "cpu_percent": 50.0,
      "nfs": {"procedures": {"access": 1, "commit": 0, "getattr": 250, "read": 7}},
      "network": {"in_bytes_per_second": 1000}, "disk": {}})"),
                             3);
  EXPECT_EQ(out.str(),
            "NFSv3 operations per second, node 3:\n"
            "  access               1/s    commit               0/s    getattr            250/s\n"
            "  read                 7/s\n"
            "CPU:         50.0%\n"
            "Network In:  1.0 kB/s\n"
            "Network Out: -\n"
            "Disk Read:   -\n"
            "Disk Write:  -\n");
}

TEST(Listings, ClientStatisticsShowCallsBytesAndLatencies) {
  const std::string text = rendered(render_client_statistics, Json::parse(R"({
      "clients": [{"node": 1, "client": "10.0.0.7", "calls": 42, "in_bytes": 4200,
                   "out_bytes": 1200000, "latency_average_us": 180.4,
                   "latency_max_us": 2500.0}],
      "unreachable": []})"));
  EXPECT_NE(text.find("   1  10.0.0.7     42  4.2 kB  1.2 MB       180 us       2.5 ms\n"),
            std::string::npos)
      << text;
}

TEST(Listings, SysctlsShowValueDefaultAndDescription) {
  EXPECT_EQ(rendered(render_sysctls, Json::parse(R"([
      {"name": "efs.bam.atime_enabled", "value": "true", "default": "true",
       "description": "Update atime on read"}])")),
            "Name                   Value  Default  Description\n"
            "-----------------------------------------------------------\n"
            "efs.bam.atime_enabled  true   true     Update atime on read\n"
            "-----------------------------------------------------------\n"
            "Total: 1\n");
}

TEST(Listings, AnEmptyListIsAHeaderAndATotalOfZero) {
  EXPECT_EQ(rendered(render_tiers, Json::array()),
            "Name  Children\n--------------\n--------------\nTotal: 0\n");
}

TEST(HumanDuration, TheTwoLargestUnits) {
  EXPECT_EQ(human_duration(0), "0s");
  EXPECT_EQ(human_duration(59), "59s");
  EXPECT_EQ(human_duration(65), "1m 5s");
  EXPECT_EQ(human_duration(3600), "1h 0m");
  EXPECT_EQ(human_duration(2 * 3600 + 3 * 60 + 59), "2h 3m");
  EXPECT_EQ(human_duration(3 * 86400 + 4 * 3600 + 5), "3d 4h");
}

TEST(Jobs, ListShowsHowLongEachHasRunUpToNow) {
  std::ostringstream out;
  render_jobs(out, Json::array({sample_job(), sample_waiting_job()}), kSampleNow);
  EXPECT_EQ(out.str(),
            "ID  Type            State    Impact     Pri  Phase  Running Time\n"
            "----------------------------------------------------------------\n"
            " 3  SmartPools      running  LOW          6  scan          1m 5s\n"
            " 4  SmartPoolsTree  waiting  OFF_HOURS    5  -                 -\n"
            "----------------------------------------------------------------\n"
            "Total: 2\n");
}

TEST(Jobs, ViewShowsEveryFieldWithTimesInUtc) {
  EXPECT_EQ(rendered(render_job, sample_job()),
            "                 ID: 3\n"
            "               Type: SmartPools\n"
            "              State: running\n"
            "             Policy: LOW\n"
            "           Priority: 6\n"
            "              Paths: -\n"
            "            Dry Run: No\n"
            "            Created: 2024-05-01T22:00:00Z\n"
            "            Started: 2024-05-01T22:00:05Z\n"
            "              Ended: -\n"
            "        Coordinator: 1\n"
            "               Runs: 1\n"
            "              Phase: scan\n"
            "      Files Scanned: 1200\n"
            "Directories Scanned: 40\n"
            "      Files Matched: 300\n"
            "       Patterns Set: 12\n"
            "        Files Moved: 250\n"
            "        Bytes Moved: 1.2 GB\n"
            "      Files Resumed: 1\n"
            "    Files Misplaced: 38\n"
            "             Errors: 0\n"
            "             Reason: -\n");
}

TEST(Jobs, ReportViewAddsThePhasesAndTheFirstErrors) {
  const std::string text = rendered(render_job_report, sample_report());
  EXPECT_NE(text.find("              Ended: 2024-05-01T22:01:45Z\n"
                      "        Coordinator: -\n"
                      "               Runs: 2\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.substr(text.find("             Errors:")),
            "             Errors: 2\n"
            "             Reason: too many errors\n"
            "\n"
            "Phases:\n"
            "Phase  Seconds\n"
            "--------------\n"
            "scan        65\n"
            "apply       35\n"
            "\n"
            "First errors:\n"
            "  /ifs/a: permission denied\n"
            "  /ifs/b: no space\n");
}

TEST(Jobs, ReportsListShowsWhenEachEndedAndItsCounters) {
  const std::string rule(94, '-');
  EXPECT_EQ(rendered(render_job_reports, Json::array({sample_report()})),
            "ID  Type        State   Ended                 Files Scanned  Matched  Moved  "
            "Misplaced  Errors\n" +
                rule + "\n" +
                " 3  SmartPools  failed  2024-05-01T22:01:45Z           1200      300    250  "
                "       38       2\n" +
                rule + "\nTotal: 1\n");
}

const char* const kJobTypes = R"([
    {"name": "SmartPools", "description": "Apply the file pool policies to every file",
     "schedule": "every day at 22:00", "priority": 6, "policy": "LOW", "enabled": true,
     "next_run": 1714600800},
    {"name": "SmartPoolsTree", "description": "Apply the file pool policies under paths",
     "schedule": null, "priority": 5, "policy": "MEDIUM", "enabled": true, "next_run": null}])";

TEST(Jobs, TypesListShowsTheScheduleAndNextRunOrADash) {
  EXPECT_EQ(rendered(render_job_types, Json::parse(kJobTypes)),
            "ID              Pri  Policy  Enabled  Schedule            Next Run\n"
            "------------------------------------------------------------------------------\n"
            "SmartPools        6  LOW     Yes      every day at 22:00  2024-05-01T22:00:00Z\n"
            "SmartPoolsTree    5  MEDIUM  Yes      -                   -\n"
            "------------------------------------------------------------------------------\n"
            "Total: 2\n");
}

TEST(Jobs, TypeViewShowsItsSettings) {
  EXPECT_EQ(rendered(render_job_type, Json::parse(kJobTypes)[0]),
            "         ID: SmartPools\n"
            "Description: Apply the file pool policies to every file\n"
            "    Enabled: Yes\n"
            "     Policy: LOW\n"
            "   Schedule: every day at 22:00\n"
            "   Priority: 6\n"
            "   Next Run: 2024-05-01T22:00:00Z\n");
}

TEST(Jobs, StatusNamesTheCoordinatorThenTheActiveAndTheRecentJobs) {
  Json status{{"coordinator", 1},
              {"active", Json::array({sample_job()})},
              {"recent", Json::array({sample_report()})}};
  EXPECT_EQ(rendered(render_job_status, status),
            "The job engine is running on node 1.\n"
            "\n"
            "ID  Type        State    Impact  Pri  Phase\n"
            "-------------------------------------------\n"
            " 3  SmartPools  running  LOW       6  scan\n"
            "\n"
            "Recent job results:\n"
            "Time                  Job            Event\n"
            "-------------------------------------------\n"
            "2024-05-01T22:01:45Z  SmartPools[3]  failed\n");
}

TEST(Jobs, StatusWithoutALeaderOrJobsSaysSo) {
  EXPECT_EQ(rendered(render_job_status,
                     Json::parse(R"({"coordinator": null, "active": [], "recent": []})")),
            "No node is running jobs (no leader).\n"
            "\n"
            "No running or queued jobs.\n"
            "\n"
            "No recent job results.\n");
}

// sample_job() as `tide filepool apply /ifs/data` finds it when it has ended; a dry run moves
// nothing.
Json sample_application(bool dry_run) {
  Json job = sample_job();
  job["type"] = "SmartPoolsTree";
  job["state"] = "succeeded";
  job["paths"] = {"/ifs/data"};
  job["dry_run"] = dry_run;
  job["progress"] = Json::parse(R"({"files_scanned": 120, "directories_scanned": 4,
      "files_matched": 30, "patterns_set": 12, "files_moved": 5, "bytes_moved": 1200000000,
      "files_misplaced": 18, "errors": 0})");
  if (dry_run) {
    job["progress"]["files_moved"] = 0;
    job["progress"]["bytes_moved"] = 0;
  }
  return job;
}

TEST(PolicyApplication, SaysWhatTheJobDidInOneLine) {
  EXPECT_EQ(rendered(render_policy_application, sample_application(false)),
            "Applied the file pool policies to 120 files under /ifs/data: 30 matched a policy, "
            "12 access patterns set, 5 files moved (1.2 GB), 18 misplaced.\n");
}

TEST(PolicyApplication, ADryRunSaysWhatItWouldDo) {
  EXPECT_EQ(rendered(render_policy_application, sample_application(true)),
            "Dry run over 120 files under /ifs/data: 30 match a policy, 12 access patterns would "
            "be set, 18 would move or stay misplaced.\n");
}

TEST(PolicyApplication, OneFileIsOneFileAndErrorsFollowOneALine) {
  Json job = sample_application(false);
  job["paths"] = {"/ifs/data/a.bin"};
  job["progress"] = Json::parse(R"({"files_scanned": 1, "files_matched": 1, "patterns_set": 1,
      "files_moved": 1, "bytes_moved": 4096, "files_misplaced": 0, "errors": 2})");
  job["errors"] = {"/ifs/data/a.bin: permission denied", "/ifs/data/a.bin: no space"};
  EXPECT_EQ(rendered(render_policy_application, job),
            "Applied the file pool policies to 1 file under /ifs/data/a.bin: 1 matched a policy, "
            "1 access pattern set, 1 file moved (4.1 kB), 0 misplaced.\n"
            "Errors:\n"
            "  /ifs/data/a.bin: permission denied\n"
            "  /ifs/data/a.bin: no space\n");
}

TEST(Jobs, RepliesOfTheWrongShapePrintDashesInsteadOfFailing) {
  std::ostringstream out;
  EXPECT_NO_THROW(render_jobs(out, Json::parse(R"([7, {"started": "soon"}])"), 0));
  EXPECT_NE(out.str().find("Total: 2"), std::string::npos) << out.str();
  EXPECT_NO_THROW(rendered(render_job, Json("not a job")));
  EXPECT_NO_THROW(rendered(render_job_report, Json::parse(R"({"phases": 3, "errors": "x"})")));
  EXPECT_NO_THROW(rendered(render_job_status, Json::array()));
  EXPECT_NO_THROW(rendered(render_job_types, Json("not a list")));
  EXPECT_NO_THROW(rendered(render_policy_application, Json::parse(R"({"progress": [1]})")));
}

}  // namespace
}  // namespace tidepool::cli
