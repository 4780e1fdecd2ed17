// Sysctls through the admin API of a one-node cluster.
#include <gtest/gtest.h>

#include "daemon/admin/test_node.h"
#include "daemon/config_objects.h"

namespace tidepool::daemon::admin::testing {
namespace {

class SysctlRoutesTest : public OneNodeClusterTest {};

TEST_F(SysctlRoutesTest, EverySysctlIsListedWithItsDefault) {
  const json list = json_of(node_.call("GET", "/v1/sysctl"))["sysctls"];
  ASSERT_EQ(list.size(), sysctl_specs().size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    EXPECT_EQ(list[i]["name"], sysctl_specs()[i].name);
    EXPECT_EQ(list[i]["value"], list[i]["default"]);
  }
  EXPECT_EQ(
      json_of(node_.call("GET", "/v1/sysctl/efs.bam.atime_grace_period")),
      (json{{"name", "efs.bam.atime_grace_period"},
            {"value", "1D"},
            {"default", "1D"},
            {"description", std::string(find_sysctl("efs.bam.atime_grace_period")->description)},
            {"unit", "ms"},
            {"value_in_unit", "86400000"}}));
}

TEST_F(SysctlRoutesTest, OneFsKeysTakeABareNumberInOneFsUnitAndShowItBothWays) {
  for (const json& one_day : {json("86400000"), json(86400000)}) {
    const HttpResponse set =
        node_.call("PUT", "/v1/sysctl/efs.bam.atime_grace_period", json{{"value", one_day}});
    EXPECT_EQ(set.status, 200u) << set.body;
    const json shown = json_of(node_.call("GET", "/v1/sysctl/efs.bam.atime_grace_period"));
    EXPECT_EQ(shown["value"], "1D") << one_day;
    EXPECT_EQ(shown["value_in_unit"], "86400000");
  }
  const HttpResponse not_whole =
      node_.call("PUT", "/v1/sysctl/efs.bam.atime_grace_period", json{{"value", "1500"}});
  EXPECT_EQ(not_whole.status, 400u);
  EXPECT_EQ(error_of(not_whole),
            "efs.bam.atime_grace_period: '1500' counts milliseconds and must be whole seconds, "
            "such as 86400000 for one day");
  // Tidepool's own durations count seconds.
  EXPECT_EQ(json_of(node_.call("PUT", "/v1/sysctl/efs.flexprotect.repair_delay",
                               json{{"value", "3600"}}))["value"],
            "1h");
}

TEST_F(SysctlRoutesTest, AValueSetIsKeptInCanonicalForm) {
  const HttpResponse set =
      node_.call("PUT", "/v1/sysctl/efs.bam.atime_grace_period", json{{"value", "168h"}});
  EXPECT_EQ(set.status, 200u) << set.body;
  EXPECT_EQ(json_of(set)["value"], "1W");
  EXPECT_EQ(json_of(node_.call("GET", "/v1/sysctl/efs.bam.atime_grace_period"))["value"], "1W");
  const HttpResponse flag =
      node_.call("PUT", "/v1/sysctl/efs.bam.atime_enabled", json{{"value", false}});
  EXPECT_EQ(json_of(flag)["value"], "false");
  EXPECT_EQ(json_of(node_.call("GET", "/v1/sysctl/efs.bam.atime_enabled"))["default"], "true");
}

TEST_F(SysctlRoutesTest, AnUnknownSysctlOrABadValueIsRefused) {
  for (const char* method : {"GET", "PUT"}) {
    const HttpResponse missing = node_.call(method, "/v1/sysctl/efs.none", json{{"value", "1"}});
    EXPECT_EQ(missing.status, 404u) << method;
    EXPECT_EQ(error_of(missing), "no sysctl 'efs.none'");
  }
  const HttpResponse bad =
      node_.call("PUT", "/v1/sysctl/efs.smartpools.transfer_limit", json{{"value", "101"}});
  EXPECT_EQ(bad.status, 400u);
  EXPECT_EQ(error_of(bad), "efs.smartpools.transfer_limit must be a percentage from 1 to 100");
  EXPECT_EQ(
      node_.call("PUT", "/v1/sysctl/efs.bam.atime_enabled", json{{"value", json::array()}}).status,
      400u);
  EXPECT_EQ(json_of(node_.call("GET", "/v1/sysctl/efs.smartpools.transfer_limit"))["value"], "90");
}

}  // namespace
}  // namespace tidepool::daemon::admin::testing
