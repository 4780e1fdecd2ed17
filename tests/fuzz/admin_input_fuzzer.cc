// libFuzzer target: what administrators and other nodes hand a node as text. The first byte
// picks the reader, the rest is its input:
//   - the TOML configuration (parse_config);
//   - admin API JSON bodies and their validators (exports, file pool policies and the default
//     policy, job starts, job type settings, job states, lock filters);
//   - configuration objects as the group view holds them (exports, policies, jobs, sysctls,
//     tiers, lost nodes), read back by what every node derives from them;
//   - the JSON reports nodes send each other, summed as `tide statistics` does.
// Each must refuse what is malformed with an error, never crash, hang or allocate without
// bound; an export that validates must read back from its stored form unchanged.
#include <spdlog/spdlog.h>

#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "common/config.h"
#include "daemon/activity.h"
#include "daemon/admin/export_json.h"
#include "daemon/admin/policy_json.h"
#include "daemon/cache_reports.h"
#include "daemon/config_objects.h"
#include "daemon/filepool.h"
#include "daemon/jobs.h"
#include "daemon/lock_reports.h"
#include "daemon/report_sums.h"

namespace {

using namespace tidepool;
using namespace tidepool::daemon;
using nlohmann::json;

// Two nodes in two pools: what policies and tiers may name.
cluster::GroupView base_view() {
  cluster::GroupView view;
  view.epoch = 7;
  view.nodes.push_back({1, "node-1", "127.0.0.1:7100", "127.0.0.1", "127.0.0.1:8080", "f800", true});
  view.nodes.push_back({2, "node-2", "127.0.0.2:7100", "127.0.0.2", "127.0.0.2:8080", "h500", true});
  return view;
}

void read_objects(const cluster::GroupView& view) {
  NodeConfig config;
  config.data_dir = "/nonexistent";
  (void)exports_of(view);
  (void)policies_of(view);
  (void)jobs_of(view);
  (void)atime_policy(view, config);
  (void)transfer_limit_percent(view);
  (void)repair_delay(view);
  (void)cross_shard_decide_pause(view);
  (void)nlm_grant_reply_pause(view);
  (void)fail_point_switched_on(view, "ignore_leases");
  (void)lost_nodes_of(view);
}

void export_round_trip(const json& body) {
  Result<ExportConfig> made = admin::export_from_json(body, ExportConfig{});
  if (!made.ok()) return;
  Result<ExportConfig> stored = decode_export(encode_export(*made));
  if (!stored.ok() || !(*stored == *made)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t reader = data[0] % 13;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (reader == 0) {
    (void)parse_config(text, "fuzz.toml");
    return 0;
  }
  cluster::GroupView view = base_view();
  if (reader <= 5) {
    // A stored object's body, of the kind the reader picks.
    static constexpr std::pair<std::string_view, std::string_view> kObjects[] = {
        {kExportKind, "1"}, {kFilepoolKind, kPoliciesName}, {kJobKind, "3"},
        {kSysctlKind, "efs.bam.atime_enabled"}, {kClusterKind, kLostNodesName}};
    const auto& [kind, name] = kObjects[reader - 1];
    view.objects.push_back({std::string(kind), std::string(name), std::string(text), 5});
    if (reader == 1) (void)decode_export(text);
    read_objects(view);
    return 0;
  }
  const json body = json::parse(text, nullptr, false);
  if (body.is_discarded()) return 0;
  switch (reader) {
    case 6:
      export_round_trip(body);
      break;
    case 7:
      (void)admin::policy_from_json(body, policy::Policy{}, view);
      (void)admin::defaults_from_json(body, policy::Defaults{}, view);
      break;
    case 8:
      (void)start_request_from_json(body);
      (void)wanted_state_from_json(body);
      break;
    case 9:
      (void)job_type_settings_from_json(body, tiering::JobTypeSettings{});
      break;
    case 10:
      (void)LocksFilter::from_json(body);
      break;
    case 11:
      (void)cache_statistics_total(body);
      (void)system_statistics_total(body);
      break;
    default: {
      json sum = json::object();
      add_counters(sum, body);
      add_counters(sum, body);
      break;
    }
  }
  return 0;
}
