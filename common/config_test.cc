#include "common/config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

namespace tidepool {
namespace {

using namespace std::chrono_literals;

NodeConfig defaults_with_data_dir(std::string data_dir) {
  NodeConfig config;
  config.data_dir = std::move(data_dir);
  config.backend_address = "127.0.0.1:7100";
  config.admin_address = "127.0.0.1:8080";
  return config;
}

NodeConfig parse_ok(std::string_view text) {
  Result<NodeConfig> config = parse_config(text, "node.toml");
  EXPECT_TRUE(config.ok()) << config.status().to_string();
  return config.ok() ? *config : NodeConfig{};
}

// The message of the error parse_config must return.
std::string parse_error(std::string_view text) {
  Result<NodeConfig> config = parse_config(text, "node.toml");
  if (config.ok()) return "parsed without error";
  EXPECT_EQ(config.code(), Errc::invalid_argument);
  return config.status().message();
}

// A valid file with `extra` appended, so that errors land on known lines (extra starts on line 3).
std::string with_data_dir(std::string_view extra) {
  return "[node]\ndata_dir = \"/d\"\n" + std::string(extra);
}

TEST(Config, OnlyDataDirGivesTheDefaults) {
  const NodeConfig config = parse_ok("[node]\ndata_dir = \"/srv/tp\"\n");
  EXPECT_EQ(config, defaults_with_data_dir("/srv/tp"));
  EXPECT_EQ(config.node_id, 1u);
  EXPECT_EQ(config.ram_budget_bytes, 1ull << 30);
  EXPECT_FALSE(config.l2_budget_bytes.has_value());
  EXPECT_EQ(config.nfs_port, 2049);
  EXPECT_EQ(config.atime_grace_period, 24h);
  EXPECT_TRUE(config.exports.empty()) << "nothing is exported until the administrator says so";
}

TEST(Config, AnExportTableGivesTheExportsDefaults) {
  const NodeConfig config = parse_ok(with_data_dir("[[exports]]\npath = \"/ifs\"\n"));
  ASSERT_EQ(config.exports.size(), 1u);
  EXPECT_EQ(config.exports[0].path, "/ifs");
  EXPECT_EQ(config.exports[0].clients, std::vector<std::string>{"*"});
  EXPECT_TRUE(config.exports[0].secure);
  EXPECT_TRUE(config.exports[0].root_squash);
  EXPECT_FALSE(config.exports[0].map_all_uid.has_value());
}

TEST(Config, TheL2TakesAQuarterOfTheMemoryUpTo4GiB) {
  EXPECT_EQ(default_l2_budget(8ull << 30), 2ull << 30);
  EXPECT_EQ(default_l2_budget(24ull << 30), 4ull << 30);
}

TEST(Config, ReferenceTextParsesToTheDefaults) {
  EXPECT_EQ(parse_ok(config_reference()), defaults_with_data_dir("/var/lib/tidepool"));
}

TEST(Config, ReferenceTextMentionsTheKeysItLeavesUnset) {
  const std::string reference = config_reference();
  EXPECT_NE(reference.find("# map_all_uid = "), std::string::npos);
  EXPECT_NE(reference.find("# map_all_gid = "), std::string::npos);
}

TEST(Config, EveryKeyIsParsed) {
  const NodeConfig config = parse_ok(R"(
[node]
id = 7
data_dir = "/srv/node7"
pool = "h500"
ram_budget = "256MiB"

[cluster]
name = "lab-2"
backend_address = "10.1.2.3:17100"
admin_address = "10.1.2.4:18080"
backend_tls = false
setup_secret_file = "/etc/tidepool/setup-secret"

[frontend]
address = "10.1.2.3"
nfs_port = 12049
mount_port = 12048
portmap_port = 0
register_with_rpcbind = false
io_threads = 8
max_record_size = "4MiB"
max_calls_per_connection = 128

[nfs]
read_size_max = "512KiB"
read_size_preferred = "64KiB"
write_size_max = "256KiB"
write_size_preferred = 131072
duplicate_request_cache_entries = 1000
nlm_grace_period = "5s"

[store]
threads = 16
stripe_unit = "1MiB"

[jobs]
checkpoint_interval = "1s"
retry_after = "2m"

[sysctl]
"efs.bam.atime_enabled" = false
"efs.bam.atime_grace_period" = "2W"

[log]
level = "debug"
file = "/var/log/tided.log"

[[exports]]
path = "/ifs/data"
clients = ["127.0.0.1", "10.0.0.0/8"]
read_only = true
secure = false
root_squash = false
anon_uid = 1000
anon_gid = 1001

[[exports]]
path = "/ifs/scratch"
map_all_uid = 500
map_all_gid = 501
)");
  NodeConfig expected;
  expected.node_id = 7;
  expected.data_dir = "/srv/node7";
  expected.pool = "h500";
  expected.ram_budget_bytes = 256u << 20;
  expected.cluster_name = "lab-2";
  expected.backend_address = "10.1.2.3:17100";
  expected.admin_address = "10.1.2.4:18080";
  expected.backend_tls = false;
  expected.setup_secret_file = "/etc/tidepool/setup-secret";
  expected.frontend_address = "10.1.2.3";
  expected.nfs_port = 12049;
  expected.mount_port = 12048;
  expected.portmap_port = 0;
  expected.register_with_rpcbind = false;
  expected.io_threads = 8;
  expected.max_record_bytes = 4u << 20;
  expected.max_calls_per_connection = 128;
  expected.read_size_max = 512u << 10;
  expected.read_size_preferred = 64u << 10;
  expected.write_size_max = 256u << 10;
  expected.write_size_preferred = 128u << 10;
  expected.duplicate_request_cache_entries = 1000;
  expected.nlm_grace_period = std::chrono::seconds(5);
  expected.store_threads = 16;
  expected.stripe_unit_bytes = 1u << 20;
  expected.job_checkpoint_interval = 1s;
  expected.job_retry_after = 2min;
  expected.atime_enabled = false;
  expected.atime_grace_period = 14 * 24h;
  expected.log_level = "debug";
  expected.log_file = "/var/log/tided.log";
  expected.exports = {
      ExportConfig{.path = "/ifs/data",
                   .clients = {"127.0.0.1", "10.0.0.0/8"},
                   .read_only = true,
                   .secure = false,
                   .root_squash = false,
                   .anon_uid = 1000,
                   .anon_gid = 1001},
      ExportConfig{.path = "/ifs/scratch", .map_all_uid = 500, .map_all_gid = 501},
  };
  EXPECT_EQ(config, expected);
}

TEST(Config, UnknownKeyIsNamedWithItsLine) {
  EXPECT_EQ(parse_error(with_data_dir("\n[frontend]\nnfs_prot = 2049\n")),
            "node.toml:5: unknown key 'frontend.nfs_prot'");
  EXPECT_EQ(parse_error(with_data_dir("colour = 1\n")), "node.toml:3: unknown key 'node.colour'");
  EXPECT_EQ(parse_error(with_data_dir("[[exports]]\npath = \"/ifs\"\nro = true\n")),
            "node.toml:5: unknown key 'exports[0].ro'");
}

TEST(Config, UnknownTableOrTopLevelKeyIsAnError) {
  EXPECT_EQ(parse_error(with_data_dir("[nfsd]\nthreads = 1\n")),
            "node.toml:3: unknown table 'nfsd'");
  EXPECT_EQ(parse_error("verbose = true\n" + with_data_dir("")),
            "node.toml:1: unknown key 'verbose'");
}

TEST(Config, KnownSectionThatIsNotATableIsAnError) {
  EXPECT_EQ(parse_error("log = \"debug\"\n" + with_data_dir("")),
            "node.toml:1: 'log' must be a table");
}

TEST(Config, OutOfRangeOrMistypedIntegerNamesKeyAndRange) {
  EXPECT_EQ(parse_error("\n\n[node]\nid = 0\ndata_dir = \"/d\"\n"),
            "node.toml:4: 'node.id' must be an integer in 1..65535");
  EXPECT_EQ(parse_error(with_data_dir("id = 65536\n")),
            "node.toml:3: 'node.id' must be an integer in 1..65535");
  EXPECT_EQ(parse_error(with_data_dir("id = \"7\"\n")),
            "node.toml:3: 'node.id' must be an integer in 1..65535");
  EXPECT_EQ(parse_error(with_data_dir("id = 7.0\n")),
            "node.toml:3: 'node.id' must be an integer in 1..65535");
  EXPECT_EQ(parse_error(with_data_dir("[frontend]\nio_threads = 65\n")),
            "node.toml:4: 'frontend.io_threads' must be an integer in 1..64");
  EXPECT_EQ(parse_error(with_data_dir("[frontend]\nnfs_port = 70000\n")),
            "node.toml:4: 'frontend.nfs_port' must be an integer in 1..65535");
  EXPECT_EQ(parse_error(with_data_dir("[store]\nthreads = 0\n")),
            "node.toml:4: 'store.threads' must be an integer in 1..64");
}

TEST(Config, MistypedBooleanAndStringAreErrors) {
  EXPECT_EQ(parse_error(with_data_dir("[frontend]\nregister_with_rpcbind = \"yes\"\n")),
            "node.toml:4: 'frontend.register_with_rpcbind' must be true or false");
  EXPECT_EQ(parse_error(with_data_dir("pool = 3\n")), "node.toml:3: 'node.pool' must be a string");
}

TEST(Config, SyntaxErrorGivesLineAndColumn) {
  const std::string message = parse_error(with_data_dir("\n[frontend]\nnfs_port = 20x49\n"));
  EXPECT_TRUE(message.starts_with("node.toml:5:")) << message;
  EXPECT_EQ(parse_error("[node]\n[node]\n"),
            "node.toml:2:1: Error while parsing table header: cannot redefine existing table "
            "'node'");
}

TEST(Config, DataDirIsRequired) {
  EXPECT_EQ(parse_error(""), "node.toml: 'node.data_dir' is required");
  EXPECT_EQ(parse_error("\n[node]\nid = 2\n"), "node.toml:2: 'node.data_dir' is required");
  EXPECT_EQ(parse_error("[node]\ndata_dir = \"\"\n"),
            "node.toml:2: 'node.data_dir': '' is not a directory");
}

TEST(Config, FrontendAddressMustBeAnIpv4Literal) {
  EXPECT_EQ(parse_error(with_data_dir("[frontend]\naddress = \"localhost\"\n")),
            "node.toml:4: 'frontend.address': 'localhost' is not an IPv4 address");
  EXPECT_EQ(parse_error(with_data_dir("[frontend]\naddress = \"::1\"\n")),
            "node.toml:4: 'frontend.address': '::1' is not an IPv4 address");
}

TEST(Config, ClusterAddressesDefaultToTheFrontendAddressAndAreValidated) {
  const NodeConfig config = parse_ok(with_data_dir("[frontend]\naddress = \"127.0.0.3\"\n"));
  EXPECT_EQ(config.backend_address, "127.0.0.3:7100");
  EXPECT_EQ(config.admin_address, "127.0.0.3:8080");
  EXPECT_EQ(parse_error(with_data_dir("[cluster]\nbackend_address = \"127.0.0.3\"\n")),
            "node.toml:4: 'cluster.backend_address': '127.0.0.3' is not an IPv4 address:port");
  EXPECT_EQ(parse_error(with_data_dir("[cluster]\nadmin_address = \"127.0.0.3:0\"\n")),
            "node.toml:4: 'cluster.admin_address': '127.0.0.3:0' is not an IPv4 address:port");
  EXPECT_EQ(parse_error(with_data_dir("[cluster]\nname = \"a b\"\n")),
            "node.toml:4: 'cluster.name': 'a b' is not a cluster name (1-63 of A-Z a-z 0-9 - _)");
}

TEST(Config, LogLevelMustBeKnown) {
  EXPECT_EQ(parse_error(with_data_dir("[log]\nlevel = \"verbose\"\n")),
            "node.toml:4: 'log.level': 'verbose' is not a log level (trace, debug, info, warn, "
            "error, critical or off)");
}

TEST(Config, TheCreatePauseOfFaultInjectionTestsIsAtMostAnHour) {
  const std::string node = "[node]\ndata_dir = \"/srv/tp\"\n[debug]\n";
  EXPECT_EQ(parse_ok(node + "cluster_create_pause = \"90s\"\n").cluster_create_pause,
            std::chrono::seconds(90));
  EXPECT_NE(parse_error(node + "cluster_create_pause = \"2h\"\n").find("at most 1h"),
            std::string::npos);
  EXPECT_NE(parse_error(node + "create_pause = \"1s\"\n").find("create_pause"), std::string::npos);
}

TEST(Config, SysctlNamesMustBeQuoted) {
  EXPECT_EQ(parse_error(with_data_dir("[sysctl]\nefs.bam.atime_enabled = false\n")),
            "node.toml:4: 'sysctl.efs': quote sysctl names, e.g. \"efs.bam.atime_enabled\" = true");
  EXPECT_EQ(parse_error(with_data_dir("[sysctl]\n\"efs.bam.atime\" = false\n")),
            "node.toml:4: unknown key 'sysctl.efs.bam.atime'");
}

TEST(Config, SizesAcceptIntegersAndStringsWithinTheirRange) {
  EXPECT_EQ(parse_ok(with_data_dir("ram_budget = 2147483648\n")).ram_budget_bytes, 2ull << 30);
  EXPECT_EQ(parse_ok(with_data_dir("ram_budget = \"2GiB\"\n")).ram_budget_bytes, 2ull << 30);
  EXPECT_EQ(parse_ok(with_data_dir("ram_budget = \"2GB\"\n")).ram_budget_bytes, 2'000'000'000u);
  EXPECT_EQ(parse_error(with_data_dir("ram_budget = \"lots\"\n")),
            "node.toml:3: 'node.ram_budget': 'lots' is not a size such as 4096, 128KiB, 1MiB, "
            "2GiB or 1TB");
  EXPECT_EQ(parse_error(with_data_dir("ram_budget = -1\n")),
            "node.toml:3: 'node.ram_budget' must be a size in 1MiB..1PiB");
  EXPECT_EQ(parse_ok(with_data_dir("l2_budget = \"6GiB\"\n")).l2_budget_bytes, 6ull << 30);
  EXPECT_EQ(parse_ok(with_data_dir("l2_budget = 0\n")).l2_budget_bytes, 0u);
  EXPECT_EQ(parse_error(with_data_dir("l2_budget = -1\n")),
            "node.toml:3: 'node.l2_budget' must be a size in 0..1PiB");
  EXPECT_EQ(parse_error(with_data_dir("l2_budget = \"8MiB\"\n")),
            "node.toml:3: 'node.l2_budget' must be 0 (no L2) or at least 64MiB");
  EXPECT_EQ(parse_error(with_data_dir("[frontend]\nmax_record_size = \"128MiB\"\n")),
            "node.toml:4: 'frontend.max_record_size' must be a size in 64KiB..64MiB");
  EXPECT_EQ(parse_error(with_data_dir("[nfs]\nread_size_max = \"2MiB\"\n")),
            "node.toml:4: 'nfs.read_size_max' must be a size in 4KiB..1MiB");
}

TEST(Config, StripeUnitMustBeAPowerOfTwo) {
  EXPECT_EQ(parse_ok(with_data_dir("[store]\nstripe_unit = \"16MiB\"\n")).stripe_unit_bytes,
            16u << 20);
  EXPECT_EQ(parse_error(with_data_dir("[store]\nstripe_unit = \"96KiB\"\n")),
            "node.toml:4: 'store.stripe_unit' must be a power of two");
  EXPECT_EQ(parse_error(with_data_dir("[store]\nstripe_unit = \"2KiB\"\n")),
            "node.toml:4: 'store.stripe_unit' must be a size in 4KiB..16MiB");
}

TEST(Config, PreferredTransferSizeMayNotExceedTheMaximum) {
  EXPECT_EQ(parse_error(with_data_dir("[nfs]\nread_size_preferred = \"256KiB\"\n"
                                      "read_size_max = \"128KiB\"\n")),
            "node.toml:4: 'nfs.read_size_preferred' (256KiB) must not exceed 'nfs.read_size_max' "
            "(128KiB)");
  // Only the maximum is set: the error points at it.
  EXPECT_EQ(parse_error(with_data_dir("[nfs]\nwrite_size_max = \"256KiB\"\n")),
            "node.toml:4: 'nfs.write_size_preferred' (512KiB) must not exceed "
            "'nfs.write_size_max' (256KiB)");
}

TEST(Config, RecordSizeMustHoldTheLargestTransferAndItsHeaders) {
  EXPECT_EQ(parse_error(with_data_dir("[frontend]\nmax_record_size = \"1MiB\"\n")),
            "node.toml:4: 'nfs.read_size_max' (1MiB) plus 4KiB of headers must not exceed "
            "'frontend.max_record_size' (1MiB)");
  const NodeConfig config =
      parse_ok(with_data_dir("[frontend]\nmax_record_size = \"64KiB\"\n"
                             "[nfs]\nread_size_max = \"32KiB\"\nread_size_preferred = \"32KiB\"\n"
                             "write_size_max = \"32KiB\"\nwrite_size_preferred = \"32KiB\"\n"));
  EXPECT_EQ(config.max_record_bytes, 64u << 10);
}

TEST(Config, DurationsAcceptBareNumbersInTheirKeysUnitAndStrings) {
  const auto grace = [](std::string_view value) {
    return parse_ok(with_data_dir(
                        "[sysctl]\n\"efs.bam.atime_grace_period\" = " + std::string(value) + "\n"))
        .atime_grace_period;
  };
  // A bare number is milliseconds for this OneFS key, as OneFS takes it; seconds elsewhere.
  EXPECT_EQ(grace("86400000"), 24h);
  EXPECT_EQ(grace("90000"), 90s);
  EXPECT_EQ(grace("\"12h\""), 12h);
  EXPECT_EQ(grace("0"), 0s);
  EXPECT_EQ(parse_ok(with_data_dir("[nfs]\nnlm_grace_period = 90\n")).nlm_grace_period, 90s);
  EXPECT_EQ(parse_error(with_data_dir("[jobs]\ncheckpoint_interval = 0\n")),
            "node.toml:4: 'jobs.checkpoint_interval' must be 1s to 1h");
  EXPECT_EQ(parse_error(with_data_dir("[jobs]\nretry_after = \"2h\"\n")),
            "node.toml:4: 'jobs.retry_after' must be 1s to 1h");
  EXPECT_EQ(parse_error(with_data_dir("[sysctl]\n\"efs.bam.atime_grace_period\" = 1500\n")),
            "node.toml:4: 'sysctl.efs.bam.atime_grace_period': '1500' counts milliseconds and "
            "must be whole seconds, such as 86400000 for one day");
  EXPECT_EQ(parse_error(with_data_dir("[sysctl]\n\"efs.bam.atime_grace_period\" = "
                                      "9000000000000000000\n")),
            "node.toml:4: 'sysctl.efs.bam.atime_grace_period' must be at most 52W");
  EXPECT_EQ(parse_error(with_data_dir("[sysctl]\n\"efs.bam.atime_grace_period\" = \"1y\"\n")),
            "node.toml:4: 'sysctl.efs.bam.atime_grace_period': '1y' is not a duration such as "
            "90s, 5m, 12h, 1D or 2W");
  EXPECT_EQ(parse_error(with_data_dir("[sysctl]\n\"efs.bam.atime_grace_period\" = -5\n")),
            "node.toml:4: 'sysctl.efs.bam.atime_grace_period' must be a duration such as 90s, 5m, "
            "12h, 1D or 2W");
}

TEST(ParseSize, AcceptsBinaryAndDecimalUnits) {
  const std::pair<std::string_view, std::uint64_t> cases[] = {
      {"4096", 4096},
      {"0", 0},
      {"512B", 512},
      {"128KiB", 128ull << 10},
      {"128K", 128ull << 10},
      {"128 KiB", 128ull << 10},
      {"128kib", 128ull << 10},
      {"1MiB", 1ull << 20},
      {"1M", 1ull << 20},
      {"2GiB", 2ull << 30},
      {"2G", 2ull << 30},
      {"1TiB", 1ull << 40},
      {"1T", 1ull << 40},
      {"1KB", 1000},
      {"3MB", 3'000'000},
      {"2GB", 2'000'000'000},
      {"1TB", 1'000'000'000'000},
  };
  for (const auto& [text, bytes] : cases) {
    Result<std::uint64_t> size = parse_size(text);
    ASSERT_TRUE(size.ok()) << text << ": " << size.status().to_string();
    EXPECT_EQ(*size, bytes) << text;
  }
}

TEST(ParseSize, RejectsGarbageNegativesAndOverflow) {
  for (std::string_view text : {"", "KiB", "-1", "1.5MiB", "12XB", "1 MiB extra", " 1",
                                "16777216TiB", "99999999999999999999"}) {
    Result<std::uint64_t> size = parse_size(text);
    EXPECT_EQ(size.code(), Errc::invalid_argument) << text;
  }
  EXPECT_EQ(parse_size("12XB").status().message(),
            "'12XB' is not a size such as 4096, 128KiB, 1MiB, 2GiB or 1TB");
}

TEST(ParseDuration, AcceptsSecondsMinutesHoursDaysAndWeeks) {
  const std::pair<std::string_view, std::chrono::seconds> cases[] = {
      {"90", 90s}, {"90s", 90s}, {"5m", 5min}, {"12h", 12h}, {"1D", 24h},
      {"1d", 24h}, {"2W", 336h}, {"2w", 336h}, {"0s", 0s},
  };
  for (const auto& [text, seconds] : cases) {
    Result<std::chrono::seconds> duration = parse_duration(text);
    ASSERT_TRUE(duration.ok()) << text << ": " << duration.status().to_string();
    EXPECT_EQ(*duration, seconds) << text;
  }
}

TEST(ParseDuration, ABareNumberInMillisecondsIsOneFsStyleAndWholeSeconds) {
  EXPECT_EQ(parse_duration("86400000", BareNumber::milliseconds).value(), 24h);
  EXPECT_EQ(parse_duration("0", BareNumber::milliseconds).value(), 0s);
  EXPECT_EQ(parse_duration("7D", BareNumber::milliseconds).value(), 168h) << "suffixes still work";
  EXPECT_EQ(parse_duration("90s", BareNumber::milliseconds).value(), 90s);
  EXPECT_EQ(parse_duration("86400000ms").value(), 24h) << "as tide prints it, whatever the key";
  EXPECT_EQ(parse_duration("1500", BareNumber::milliseconds).status().message(),
            "'1500' counts milliseconds and must be whole seconds, such as 86400000 for one day");
}

TEST(ParseDuration, RejectsGarbageAmbiguousUnitsAndOverflow) {
  for (std::string_view text :
       {"", "s", "-5s", "1.5h", "5M", "1y", "5 minutes", "99999999999999999w"}) {
    EXPECT_EQ(parse_duration(text).code(), Errc::invalid_argument) << text;
  }
}

TEST(ConfigExports, ClientsAreValidated) {
  EXPECT_EQ(parse_error(with_data_dir("[[exports]]\npath = \"/ifs/a\"\n"
                                      "[[exports]]\npath = \"/ifs/b\"\n"
                                      "clients = [\"10.0.0.0/33\"]\n")),
            "node.toml:7: 'exports[1].clients[0]': '10.0.0.0/33' is not an IPv4 address or CIDR");
  for (std::string_view client : {"10.0.0", "10.0.0.256", "host.example", "10.0.0.0/",
                                  "10.0.0.0/-1", "10.0.0.0/008", "010.0.0.1", "*/8", "::1"}) {
    EXPECT_NE(parse_error(with_data_dir("[[exports]]\npath = \"/ifs\"\nclients = [\"" +
                                        std::string(client) + "\"]\n")),
              "parsed without error")
        << client;
  }
  const NodeConfig config = parse_ok(with_data_dir(
      "[[exports]]\npath = \"/ifs\"\nclients = [\"*\", \"0.0.0.0/0\", \"192.168.1.7/32\"]\n"));
  EXPECT_EQ(config.exports[0].clients,
            (std::vector<std::string>{"*", "0.0.0.0/0", "192.168.1.7/32"}));
}

TEST(ConfigExports, ClientsMustBeANonEmptyListOfStrings) {
  EXPECT_EQ(parse_error(with_data_dir("[[exports]]\npath = \"/ifs\"\nclients = []\n")),
            "node.toml:5: 'exports[0].clients' must be a non-empty array of strings");
  EXPECT_EQ(parse_error(with_data_dir("[[exports]]\npath = \"/ifs\"\nclients = \"*\"\n")),
            "node.toml:5: 'exports[0].clients' must be a non-empty array of strings");
  EXPECT_EQ(parse_error(with_data_dir("[[exports]]\npath = \"/ifs\"\nclients = [1]\n")),
            "node.toml:5: 'exports[0].clients[0]' must be a string");
}

TEST(ConfigExports, PathMustBeIfsOrACanonicalPathUnderIt) {
  for (std::string_view path : {"/ifs", "/ifs/data", "/ifs/a/b.c/..d"}) {
    EXPECT_EQ(parse_ok(with_data_dir("[[exports]]\npath = \"" + std::string(path) + "\"\n"))
                  .exports[0]
                  .path,
              path);
  }
  for (std::string_view path : {"", "/", "ifs", "/ifs/", "/ifsx", "/data", "/ifs//a", "/ifs/a/",
                                "/ifs/../etc", "/ifs/a/..", "/ifs/./a"}) {
    EXPECT_EQ(parse_error(with_data_dir("[[exports]]\npath = \"" + std::string(path) + "\"\n")),
              "node.toml:4: 'exports[0].path': '" + std::string(path) +
                  "' is not /ifs or a path under it without empty, '.' or '..' components");
  }
}

TEST(ConfigExports, PathIsRequired) {
  EXPECT_EQ(parse_error(with_data_dir("[[exports]]\nread_only = true\n")),
            "node.toml:3: 'exports[0].path' is required");
}

TEST(ConfigExports, DuplicatePathsAreAnError) {
  EXPECT_EQ(parse_error(with_data_dir("[[exports]]\npath = \"/ifs/a\"\n"
                                      "[[exports]]\npath = \"/ifs/b\"\n"
                                      "[[exports]]\npath = \"/ifs/a\"\n")),
            "node.toml:8: 'exports[2].path': '/ifs/a' is already exported by exports[0]");
}

TEST(ConfigExports, MapAllGidDefaultsToAnonGid) {
  const NodeConfig config =
      parse_ok(with_data_dir("[[exports]]\npath = \"/ifs\"\nmap_all_uid = 0\nanon_gid = 100\n"));
  EXPECT_EQ(config.exports[0].map_all_uid, 0u);
  EXPECT_EQ(config.exports[0].map_all_gid, 100u);
}

TEST(ConfigExports, MapAllGidWithoutMapAllUidIsAnError) {
  EXPECT_EQ(parse_error(with_data_dir("[[exports]]\npath = \"/ifs\"\nmap_all_gid = 5\n")),
            "node.toml:5: 'exports[0].map_all_gid' is only meaningful with map_all_uid");
}

TEST(ConfigExports, IdsMustFitIn32Bits) {
  EXPECT_EQ(parse_error(with_data_dir("[[exports]]\npath = \"/ifs\"\nanon_uid = 4294967296\n")),
            "node.toml:5: 'exports[0].anon_uid' must be an integer in 0..4294967295");
}

TEST(ConfigExports, EmptyArrayExportsNothing) {
  EXPECT_TRUE(parse_ok("exports = []\n[node]\ndata_dir = \"/d\"\n").exports.empty());
}

TEST(ConfigExports, ValidateExportAppliesTheFileRules) {
  EXPECT_TRUE(validate_export(ExportConfig{.path = "/ifs/data", .clients = {"10.0.0.0/8"}}).ok());
  EXPECT_EQ(validate_export(ExportConfig{.path = "/data"}).message(),
            "path '/data' is not /ifs or a path under it without empty, '.' or '..' components");
  EXPECT_EQ(validate_export(ExportConfig{.path = "/ifs", .clients = {"10.0.0.0/33"}}).message(),
            "client '10.0.0.0/33' is not an IPv4 address, a CIDR or '*'");
  EXPECT_EQ(validate_export(ExportConfig{.path = "/ifs", .clients = {}}).message(),
            "clients must not be empty");
  EXPECT_EQ(validate_export(ExportConfig{.path = "/ifs", .map_all_gid = 5}).message(),
            "map_all_gid is only meaningful with map_all_uid");
}

TEST(ConfigExports, MustBeAnArrayOfTables) {
  EXPECT_EQ(parse_error("exports = \"/ifs\"\n" + with_data_dir("")),
            "node.toml:1: 'exports' must be an array of tables ([[exports]])");
}

class ConfigFile : public ::testing::Test {
 protected:
  void TearDown() override { std::filesystem::remove(path_); }
  // ctest runs tests as parallel processes, so each needs a file of its own.
  const std::string path_ = testing::TempDir() + "tidepool_config_test." +
                            std::to_string(::getpid()) + ".toml";
};

TEST_F(ConfigFile, IsParsedWithItsPathAsTheSourceName) {
  std::ofstream(path_) << "[node]\ndata_dir = \"/d\"\nid = 0\n";
  Result<NodeConfig> config = load_config_file(path_);
  EXPECT_EQ(config.status().message(), path_ + ":3: 'node.id' must be an integer in 1..65535");
  std::ofstream(path_) << "[node]\ndata_dir = \"/d\"\n";
  config = load_config_file(path_);
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  EXPECT_EQ(*config, defaults_with_data_dir("/d"));
}

TEST_F(ConfigFile, MissingFileIsNotFoundNamingThePath) {
  Result<NodeConfig> config = load_config_file(path_ + ".missing");
  EXPECT_EQ(config.code(), Errc::not_found);
  EXPECT_NE(config.status().message().find(path_ + ".missing"), std::string::npos);
}

TEST_F(ConfigFile, UnreadableFileIsAnIoErrorNamingThePath) {
  Result<NodeConfig> config = load_config_file(testing::TempDir());
  EXPECT_EQ(config.code(), Errc::io_error);
  EXPECT_NE(config.status().message().find(testing::TempDir()), std::string::npos);
}

}  // namespace
}  // namespace tidepool
