#include "tests/process/conformance_fixture.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <random>
#include <sstream>

namespace tidepool::test {
namespace {

// Stops the shared server after the last test.
class ServerEnvironment : public ::testing::Environment {
 public:
  void TearDown() override;
};

ServerUnderTest* g_server = nullptr;

// Registered before main() so that gtest runs its TearDown after the tests.
[[maybe_unused]] ::testing::Environment* const g_environment =
    ::testing::AddGlobalTestEnvironment(new ServerEnvironment);

bool parse_external(const char* spec, ServerUnderTest* s) {
  // ADDR:NFS:MOUNT:PMAP:PATH
  std::istringstream in(spec);
  std::string addr, nfs, mount, pmap, path;
  if (!std::getline(in, addr, ':') || !std::getline(in, nfs, ':') ||
      !std::getline(in, mount, ':') || !std::getline(in, pmap, ':') ||
      !std::getline(in, path)) {
    return false;
  }
  s->endpoint.address = addr;
  s->endpoint.nfs_port = static_cast<uint16_t>(std::stoi(nfs));
  s->endpoint.mount_port = static_cast<uint16_t>(std::stoi(mount));
  s->endpoint.portmap_port = static_cast<uint16_t>(std::stoi(pmap));
  s->export_path = path;
  return true;
}

// Makes <root>/name if it is not there yet.
void ensure_dir(NfsClient& c, const FileHandle& root, const std::string& name) {
  auto l = c.lookup(root, name);
  if (l.status == NFS3_OK) return;
  auto r = c.mkdir(root, name, Sattr::with_mode(0755));
  EXPECT_EQ(r.status, NFS3_OK) << "MKDIR " << name;
}

void start_server(ServerUnderTest* s) {
  if (const char* ext = std::getenv("TIDEPOOL_TEST_SERVER")) {
    if (!parse_external(ext, s)) {
      s->error = "TIDEPOOL_TEST_SERVER must be ADDR:NFS:MOUNT:PMAP:PATH";
      return;
    }
    s->is_tided = false;
  } else {
    NodeOptions opts;
    ExportSpec ifs{.path = "/ifs"};
    ifs.root_squash = false;
    ExportSpec ro{.path = "/ifs/ro"};
    ro.read_only = true;
    ro.root_squash = false;
    ExportSpec priv{.path = "/ifs/private"};
    priv.clients = {"192.0.2.0/24"};
    opts.exports = {ifs, ro, priv};
    s->node = std::make_unique<TidedNode>(opts);
    if (!s->node->start(&s->error)) return;
    s->endpoint = s->node->endpoint();
    s->export_path = "/ifs";
  }
  s->ro_export_path = s->export_path + "/ro";
  s->denied_export_path = s->export_path + "/private";
  s->root = mount_root(s->endpoint, s->export_path);
  if (s->root.empty()) {
    s->error = "cannot mount " + s->export_path;
    return;
  }
  NfsClient c(s->endpoint);
  if (!c.connected()) {
    s->error = "cannot connect to NFS: " + c.error();
    return;
  }
  ensure_dir(c, s->root, "ro");
  ensure_dir(c, s->root, "private");
  s->ro_root = mount_root(s->endpoint, s->ro_export_path);
  if (s->ro_root.empty()) s->error = "cannot mount " + s->ro_export_path;
}

void ServerEnvironment::TearDown() {
  if (g_server == nullptr || !g_server->node) return;
  // A clean exit on SIGTERM is part of the contract, which the node's destructor checks: heap
  // corruption done by an earlier test often shows only here.
  g_server->node.reset();
}

}  // namespace

ServerUnderTest& ConformanceTest::server() {
  if (g_server == nullptr) {
    g_server = new ServerUnderTest;  // lives until exit; stopped by the env
    start_server(g_server);
  }
  return *g_server;
}

void ConformanceTest::SetUpTestSuite() { server(); }

void ConformanceTest::SetUp() {
  ServerUnderTest& s = server();
  ASSERT_TRUE(s.error.empty()) << "server not usable: " << s.error;
  nfs_ = std::make_unique<NfsClient>(s.endpoint);
  ASSERT_TRUE(nfs_->connected()) << nfs_->error();
}

void ConformanceTest::TearDown() {
  ServerUnderTest& s = server();
  if (s.node && s.error.empty() && !s.node->running()) {
    ADD_FAILURE() << "tided exited during this test ("
                  << s.node->exit_description() << "); log tail:\n"
                  << s.node->log_tail();
    std::string error;
    if (!s.node->start(&error)) s.error = "restart failed: " + error;
  } else if (s.node && HasFailure()) {
    std::cout << "--- tided log tail (" << s.node->log_path() << ") ---\n"
              << s.node->log_tail(1500) << "\n---\n";
  }
}

std::string ConformanceTest::unique_name(std::string_view hint) {
  static std::atomic<uint32_t> counter{0};
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info != nullptr ? info->name() : "test";
  name += "." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  if (!hint.empty()) name += "." + std::string(hint);
  return name;
}

FileHandle ConformanceTest::make_test_dir(uint32_t mode) {
  FileHandle dir = nfs().make_dir(root(), unique_name(), mode);
  if (mode != 0755 && !dir.empty()) {
    // The server may apply a umask-like policy; set the mode explicitly.
    auto r = nfs().setattr(dir, Sattr::with_mode(mode));
    EXPECT_EQ(r.status, NFS3_OK);
  }
  return dir;
}

ConformanceTest::RoDir ConformanceTest::make_ro_test_dir() {
  RoDir out;
  out.name = unique_name();
  auto ro_parent = nfs().lookup(root(), "ro");
  EXPECT_EQ(ro_parent.status, NFS3_OK);
  out.rw = nfs().make_dir(ro_parent.fh, out.name, 0777);
  auto r = nfs().setattr(out.rw, Sattr::with_mode(0777));
  EXPECT_EQ(r.status, NFS3_OK);
  auto l = nfs().lookup(server().ro_root, out.name);
  EXPECT_EQ(l.status, NFS3_OK) << "LOOKUP through the read-only export";
  out.ro = l.fh;
  return out;
}

std::unique_ptr<NfsClient> ConformanceTest::connect_as(Credentials creds) {
  auto c = std::make_unique<NfsClient>(endpoint(), std::move(creds));
  EXPECT_TRUE(c->connected()) << c->error();
  return c;
}

std::string long_name(size_t len, char c) { return std::string(len, c); }

std::string random_bytes(size_t len, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string out(len, '\0');
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    uint64_t v = rng();
    std::memcpy(out.data() + i, &v, 8);
  }
  uint64_t v = rng();
  std::memcpy(out.data() + i, &v, len - i);
  return out;
}

FileHandle forge(const FileHandle& fh) {
  FileHandle out = fh;
  if (!out.empty()) out.back() = static_cast<char>(out.back() ^ 0x01);
  return out;
}

}  // namespace tidepool::test
