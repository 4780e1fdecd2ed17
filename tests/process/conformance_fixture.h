// The fixture of the conformance tests: one server per test binary, each test
// in a fresh directory of its own under the export.
//
// The server is a tided started by this process on its own loopback address
// with these exports:
//   /ifs          read-write, clients 127.0.0.0/8, no root squash
//   /ifs/ro       read-only,  clients 127.0.0.0/8, no root squash
//   /ifs/private  read-write, clients 192.0.2.0/24 only (refuses us)
// The directories ro/ and private/ are made through /ifs before the tests.
//
// To compare with a peer server, TIDEPOOL_TEST_SERVER=ADDR:NFS:MOUNT:PMAP:PATH
// points the suite at an external server instead; it must export PATH
// read-write without root squash, PATH/ro read-only and PATH/private to other
// clients only. Tests that control the process (restart) skip themselves
// then, and tided-specific values (FSINFO sizes) are not checked.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>

#include "tests/process/cluster.h"
#include "tests/process/nfs_client.h"

namespace tidepool::test {

struct ServerUnderTest {
  Endpoint endpoint;
  std::string export_path;
  std::string ro_export_path;
  std::string denied_export_path;
  bool is_tided = true;
  std::unique_ptr<TidedNode> node;  // null for an external server
  FileHandle root;                  // of export_path
  FileHandle ro_root;               // of ro_export_path
  std::string error;                // why it is not usable, if it is not
};

class ConformanceTest : public ::testing::Test {
 protected:
  // Starts the server on first use (once per test binary).
  static void SetUpTestSuite();
  void SetUp() override;
  void TearDown() override;

  static ServerUnderTest& server();
  static const Endpoint& endpoint() { return server().endpoint; }
  static bool is_tided() { return server().is_tided; }

  // Root handle of the read-write export, and a uid 0 client.
  const FileHandle& root() const { return server().root; }
  NfsClient& nfs() { return *nfs_; }

  // A name unique to this test (test name, PID, counter) with `hint`.
  std::string unique_name(std::string_view hint = "");
  // A fresh directory for this test under the export root.
  FileHandle make_test_dir(uint32_t mode = 0755);
  // A fresh directory under <export>/ro, as seen through the read-write
  // export and through the read-only one.
  struct RoDir {
    FileHandle rw;
    FileHandle ro;
    std::string name;
  };
  RoDir make_ro_test_dir();
  // A client with another AUTH_SYS identity.
  std::unique_ptr<NfsClient> connect_as(Credentials creds);

 private:
  std::unique_ptr<NfsClient> nfs_;
};

// A name of `len` bytes (e.g. 256 for NAMETOOLONG).
std::string long_name(size_t len, char c = 'n');

// Deterministic pseudo-random bytes.
std::string random_bytes(size_t len, uint64_t seed);

// A handle that is valid except for one flipped bit in its last byte (where
// a MAC, if any, lives).
FileHandle forge(const FileHandle& fh);

}  // namespace tidepool::test
