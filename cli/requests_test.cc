#include "cli/requests.h"

#include <gtest/gtest.h>

namespace tidepool::cli {
namespace {

using namespace std::chrono_literals;

// The message of the invalid_argument error `result` must carry.
template <typename T>
std::string error_of(const Result<T>& result) {
  if (result.ok()) return "no error";
  EXPECT_EQ(result.code(), Errc::invalid_argument);
  return result.status().message();
}

TEST(ExportBody, CreateSendsOnlyTheFieldsGivenInTheApisOrder) {
  ExportOptions options{.path = "/ifs/data",
                        .clients = {"10.0.0.0/8,127.0.0.1", "192.168.1.7"},
                        .read_only = "true",
                        .secure = "false",
                        .root_squash = "false",
                        .anon_gid = "100"};
  Result<Json> body = export_create_body(options);
  ASSERT_TRUE(body.ok()) << body.status().to_string();
  EXPECT_EQ(body->dump(),
            R"({"path":"/ifs/data","clients":["10.0.0.0/8","127.0.0.1","192.168.1.7"],)"
            R"("read_only":true,"secure":false,"root_squash":false,"anon_gid":100})");
}

TEST(ExportBody, CreateNeedsAnAbsolutePath) {
  EXPECT_EQ(error_of(export_create_body({})), "an export needs a path");
  EXPECT_EQ(error_of(export_create_body({.path = "ifs/data"})),
            "export path: expected an absolute path such as /ifs/data, got 'ifs/data'");
}

TEST(ExportBody, MapAllWithoutAGidLeavesTheGidToTheServersDefault) {
  Result<Json> body = export_create_body({.path = "/ifs", .map_all = "1000"});
  ASSERT_TRUE(body.ok());
  EXPECT_EQ(body->dump(), R"({"path":"/ifs","map_all_uid":1000,"map_all_gid":null})");
  body = export_create_body({.path = "/ifs", .map_all = "1000:100"});
  ASSERT_TRUE(body.ok());
  EXPECT_EQ(body->dump(), R"({"path":"/ifs","map_all_uid":1000,"map_all_gid":100})");
}

TEST(ExportBody, BadValuesAreErrorsNamingTheOptionAndTheValue) {
  const std::string map_all_expected =
      "expected UID or UID:GID (numbers from 0 to 4294967295), got ";
  EXPECT_EQ(error_of(export_create_body({.path = "/ifs", .map_all = "abc"})),
            "--map-all: " + map_all_expected + "'abc'");
  EXPECT_EQ(error_of(export_create_body({.path = "/ifs", .map_all = "1000:"})),
            "--map-all: " + map_all_expected + "'1000:'");
  EXPECT_EQ(error_of(export_create_body({.path = "/ifs", .map_all = "4294967296"})),
            "--map-all: " + map_all_expected + "'4294967296'");
  EXPECT_EQ(error_of(export_create_body({.path = "/ifs", .map_all = "-1"})),
            "--map-all: " + map_all_expected + "'-1'");
  EXPECT_EQ(error_of(export_create_body({.path = "/ifs", .root_squash = "maybe"})),
            "--root-squash: expected true or false, got 'maybe'");
  EXPECT_EQ(error_of(export_create_body({.path = "/ifs", .read_only = "yes"})),
            "--read-only: expected true or false, got 'yes'");
  EXPECT_EQ(error_of(export_create_body({.path = "/ifs", .anon_uid = "65534x"})),
            "--anon-uid: expected a number from 0 to 4294967295, got '65534x'");
  EXPECT_EQ(error_of(export_create_body({.path = "/ifs", .clients = {",,"}})),
            "--clients: expected at least one client");
}

TEST(ExportBody, ModifySendsTheChangesAndClearingMapAllSendsNulls) {
  Result<Json> body = export_modify_body({.read_only = "false", .clear_map_all = true});
  ASSERT_TRUE(body.ok());
  EXPECT_EQ(body->dump(), R"({"read_only":false,"map_all_uid":null,"map_all_gid":null})");
}

TEST(ExportBody, ModifyNeedsAChangeAndNoContradiction) {
  EXPECT_EQ(error_of(export_modify_body({})), "nothing to modify: give at least one option");
  EXPECT_EQ(error_of(export_modify_body({.map_all = "1", .clear_map_all = true})),
            "--map-all and --clear-map-all exclude each other");
}

TEST(LocksTarget, FiltersBecomeQueryParametersWithThePathEncoded) {
  EXPECT_EQ(*locks_target(std::nullopt, std::nullopt, false), "/v1/locks");
  EXPECT_EQ(*locks_target("/ifs/data set/f", "advisory", true),
            "/v1/locks?path=%2Fifs%2Fdata%20set%2Ff&kind=advisory&waiters=true");
  EXPECT_EQ(error_of(locks_target("data/f", std::nullopt, false)),
            "--path must be absolute and under /ifs: data/f");
  EXPECT_EQ(error_of(locks_target(std::nullopt, "exclusive", false)),
            "--kind must be data, attributes, advisory, share or directory: exclusive");
}

TEST(TierBody, NameAndChildren) {
  Result<Json> body = tier_create_body("hot-tier", {"f800", "h500"});
  ASSERT_TRUE(body.ok());
  EXPECT_EQ(body->dump(), R"({"name":"hot-tier","children":["f800","h500"]})");
  body = tier_create_body("cold", {});
  ASSERT_TRUE(body.ok());
  EXPECT_EQ(body->dump(), R"({"name":"cold","children":[]})");
}

TEST(TierBody, NamesAreCheckedAsTheApiDefinesThem) {
  const std::string rule = "expected 1-63 characters of A-Z a-z 0-9 - _, got ";
  EXPECT_EQ(error_of(tier_create_body("hot tier", {})), "tier name: " + rule + "'hot tier'");
  EXPECT_EQ(error_of(tier_create_body(std::string(64, 'a'), {})),
            "tier name: " + rule + "'" + std::string(64, 'a') + "'");
  EXPECT_TRUE(tier_create_body(std::string(63, 'a'), {}).ok());
  EXPECT_EQ(error_of(tier_create_body("hot", {"f800", "f/800"})),
            "node pool name: " + rule + "'f/800'");
  EXPECT_EQ(error_of(tier_create_body("hot", {"f800", "f800"})), "node pool 'f800' is named twice");
}

TEST(Lists, RepeatedAndCommaSeparatedValuesInOrder) {
  EXPECT_EQ(split_lists({"a,b", "c", ",d,,"}), (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_EQ(split_lists({""}), std::vector<std::string>{});
  EXPECT_EQ(split_lists({}), std::vector<std::string>{});
}

TEST(ChildrenChange, SetReplacesAddAppendsRemoveTakesOut) {
  const std::vector<std::string> current{"a", "b"};
  using List = std::vector<std::string>;
  EXPECT_EQ(*apply_children_change(current, ChildrenChange::set, {"c"}), List{"c"});
  EXPECT_EQ(*apply_children_change(current, ChildrenChange::set, {}), List{});
  EXPECT_EQ(*apply_children_change(current, ChildrenChange::add, {"b", "c"}),
            (List{"a", "b", "c"}));
  EXPECT_EQ(*apply_children_change(current, ChildrenChange::remove, {"a"}), List{"b"});
}

TEST(ChildrenChange, RemovingAPoolThatIsNotAChildIsAnError) {
  EXPECT_EQ(error_of(apply_children_change({"a"}, ChildrenChange::remove, {"x"})),
            "node pool 'x' is not a child");
}

TEST(Values, Ids) {
  EXPECT_EQ(*parse_id("export id", "12"), 12u);
  EXPECT_EQ(error_of(parse_id("export id", "0")),
            "export id: expected a number from 1 up, got '0'");
  EXPECT_EQ(error_of(parse_id("node id", "two")),
            "node id: expected a number from 1 up, got 'two'");
}

TEST(Values, Timeouts) {
  EXPECT_EQ(*parse_timeout("30"), 30s);
  EXPECT_EQ(*parse_timeout("0.5"), 500ms);
  EXPECT_EQ(error_of(parse_timeout("0")),
            "--timeout: expected seconds from 0.001 to 86400, got '0'");
  EXPECT_FALSE(parse_timeout("1e9").ok());
  EXPECT_FALSE(parse_timeout("nan").ok());
}

TEST(Values, SysctlNameOrAssignment) {
  Result<SysctlArgument> read = parse_sysctl_argument("efs.bam.atime_enabled");
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->name, "efs.bam.atime_enabled");
  EXPECT_FALSE(read->value.has_value());
  Result<SysctlArgument> write = parse_sysctl_argument("efs.bam.atime_grace_period=7D");
  ASSERT_TRUE(write.ok());
  EXPECT_EQ(write->name, "efs.bam.atime_grace_period");
  EXPECT_EQ(write->value, "7D");
  EXPECT_EQ(parse_sysctl_argument("a.b=x=y")->value, "x=y");
  EXPECT_EQ(error_of(parse_sysctl_argument("=7D")),
            "sysctl: expected NAME or NAME=VALUE, NAME such as efs.bam.atime_enabled, got '=7D'");
  EXPECT_FALSE(parse_sysctl_argument("a/b").ok());
}

TEST(JobStartBody, SendsTheTypeAndOnlyTheOptionsGiven) {
  Result<Json> body = job_start_body("SmartPools", {});
  ASSERT_TRUE(body.ok()) << body.status().to_string();
  EXPECT_EQ(body->dump(), R"({"type":"SmartPools"})");
  body = job_start_body(
      "SmartPoolsTree",
      {.priority = "3", .policy = "off_hours", .paths = {"/ifs/data", "/ifs"}, .dry_run = true});
  ASSERT_TRUE(body.ok()) << body.status().to_string();
  EXPECT_EQ(body->dump(), R"({"type":"SmartPoolsTree","priority":3,"policy":"OFF_HOURS",)"
                          R"("paths":["/ifs/data","/ifs"],"dry_run":true})");
}

TEST(JobStartBody, PriorityFrom1To10AndOneOfTheFourImpactPolicies) {
  EXPECT_TRUE(job_start_body("SmartPools", {.priority = "1"}).ok());
  EXPECT_TRUE(job_start_body("SmartPools", {.priority = "10"}).ok());
  EXPECT_EQ(error_of(job_start_body("SmartPools", {.priority = "0"})),
            "--priority: expected a number from 1 to 10, got '0'");
  EXPECT_EQ(error_of(job_start_body("SmartPools", {.priority = "11"})),
            "--priority: expected a number from 1 to 10, got '11'");
  EXPECT_EQ(error_of(job_start_body("SmartPools", {.priority = "high"})),
            "--priority: expected a number from 1 to 10, got 'high'");
  EXPECT_EQ(error_of(job_start_body("SmartPools", {.policy = "FAST"})),
            "--policy: expected LOW, MEDIUM, HIGH or OFF_HOURS, got 'FAST'");
  EXPECT_EQ(error_of(job_start_body("Smart Pools", {})),
            "job type: expected 1-63 characters of A-Z a-z 0-9 - _, got 'Smart Pools'");
}

TEST(JobStartBody, EveryPathIsAbsoluteUnderIfs) {
  const std::string expected = "--paths: expected an absolute path under /ifs, got ";
  EXPECT_EQ(error_of(job_start_body("SmartPoolsTree", {.paths = {"/ifs/a", "data/b"}})),
            expected + "'data/b'");
  EXPECT_EQ(error_of(job_start_body("SmartPoolsTree", {.paths = {"/ifsdata"}})),
            expected + "'/ifsdata'");
  EXPECT_EQ(error_of(job_start_body("SmartPoolsTree", {.paths = {"/etc"}})), expected + "'/etc'");
}

TEST(JobTypeBody, ModifySendsOnlyTheChangesAndClearingTheScheduleSendsEmpty) {
  Result<Json> body = job_type_modify_body({.schedule = "every Sunday at 23:00", .priority = "2"});
  ASSERT_TRUE(body.ok()) << body.status().to_string();
  EXPECT_EQ(body->dump(), R"({"schedule":"every Sunday at 23:00","priority":2})");
  body = job_type_modify_body({.clear_schedule = true, .policy = "high", .enabled = "false"});
  ASSERT_TRUE(body.ok()) << body.status().to_string();
  EXPECT_EQ(body->dump(), R"({"schedule":"","policy":"HIGH","enabled":false})");
}

TEST(JobTypeBody, ModifyNeedsAChangeAndNoContradiction) {
  EXPECT_EQ(error_of(job_type_modify_body({})),
            "nothing to modify: give --schedule, --clear-schedule, --priority, --policy or "
            "--enabled");
  EXPECT_EQ(error_of(job_type_modify_body({.schedule = "every hour", .clear_schedule = true})),
            "give --schedule or --clear-schedule, not both");
  EXPECT_EQ(error_of(job_type_modify_body({.schedule = ""})),
            "--schedule: expected a schedule such as 'every day at 22:00', got ''");
  EXPECT_EQ(error_of(job_type_modify_body({.enabled = "yes"})),
            "--enabled: expected true or false, got 'yes'");
  EXPECT_EQ(error_of(job_type_modify_body({.priority = "0"})),
            "--priority: expected a number from 1 to 10, got '0'");
}

}  // namespace
}  // namespace tidepool::cli
