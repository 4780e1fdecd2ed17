#include "nfsd/server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/endian/conversion.hpp>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <thread>

#include "common/xdr.h"

namespace tidepool::nfsd {
namespace {

namespace asio = boost::asio;
using Bytes = std::vector<std::uint8_t>;

constexpr std::uint32_t kNfsProgram = 100003;
constexpr std::uint32_t kMountProgram = 100005;
constexpr std::uint32_t kMnt = 1;
constexpr std::uint32_t kDump = 2;
constexpr std::uint32_t kExport = 5;
constexpr std::uint32_t kGetattr = 1;
constexpr std::uint32_t kMkdir = 9;
constexpr std::uint32_t kReaddirplus = 17;
constexpr std::uint32_t kOk = 0;
constexpr std::uint32_t kNoent = 2;
constexpr std::uint32_t kStale = 70;

// A blocking ONC RPC client on one TCP connection, calling as root with AUTH_SYS.
class RpcClient {
 public:
  explicit RpcClient(std::uint16_t port) : socket_(io_) {
    socket_.connect({asio::ip::address_v4::loopback(), port});
  }

  // The results of an accepted call; empty (and a test failure) for any other reply.
  Bytes call(std::uint32_t program, std::uint32_t procedure, const xdr::Buffer& arguments) {
    xdr::Buffer message;
    xdr::Encoder e(message);
    e.u32(0);  // the record mark, set below
    e.u32(++xid_);
    e.u32(0);  // CALL
    e.u32(2);
    e.u32(program);
    e.u32(3);
    e.u32(procedure);
    xdr::Buffer credential;
    xdr::Encoder c(credential);
    c.u32(0);
    c.string("test");
    c.u32(0);
    c.u32(0);
    c.u32(0);
    e.u32(1);  // AUTH_SYS
    e.opaque(credential);
    e.u32(0);  // AUTH_NONE verifier
    e.u32(0);
    message.insert(message.end(), arguments.begin(), arguments.end());
    boost::endian::store_big_u32(message.data(),
                                 0x80000000u | static_cast<std::uint32_t>(message.size() - 4));
    asio::write(socket_, asio::buffer(message.data(), message.size()));

    Bytes reply;
    for (bool last = false; !last;) {
      std::uint8_t mark[4];
      asio::read(socket_, asio::buffer(mark));
      std::uint32_t word = boost::endian::load_big_u32(mark);
      last = (word & 0x80000000u) != 0;
      std::size_t at = reply.size();
      reply.resize(at + (word & 0x7fffffffu));
      asio::read(socket_, asio::buffer(reply.data() + at, reply.size() - at));
    }
    xdr::Decoder d(reply);
    bool accepted = d.u32() == xid_ && d.u32() == 1 && d.u32() == 0;
    d.u32();
    d.opaque(400);
    accepted = accepted && d.u32() == 0 && d.ok();
    if (!accepted) {
      ADD_FAILURE() << "call " << program << "/" << procedure << " not accepted";
      return {};
    }
    auto results = d.rest();
    return Bytes(results.begin(), results.end());
  }

 private:
  asio::io_context io_;
  asio::ip::tcp::socket socket_;
  std::uint32_t xid_ = 0;
};

struct Mounted {
  std::uint32_t status;
  Bytes handle;
};

Mounted mount(RpcClient& client, std::string_view path) {
  xdr::Buffer args;
  xdr::Encoder(args).string(path);
  Bytes results = client.call(kMountProgram, kMnt, args);
  xdr::Decoder d(results);
  Mounted m{d.u32(), {}};
  if (m.status == kOk) {
    auto handle = d.opaque(64);
    m.handle.assign(handle.begin(), handle.end());
  }
  if (!d.ok()) ADD_FAILURE() << "bad MNT reply";
  return m;
}

std::vector<std::string> export_paths(RpcClient& client) {
  Bytes results = client.call(kMountProgram, kExport, {});
  xdr::Decoder d(results);
  std::vector<std::string> paths;
  while (d.ok() && d.boolean()) {
    paths.emplace_back(d.string(1024));
    while (d.ok() && d.boolean()) d.string(1024);
  }
  if (!d.ok()) ADD_FAILURE() << "bad EXPORT reply";
  return paths;
}

// The paths DUMP lists as mounted (all by this client).
std::vector<std::string> mounted_paths(RpcClient& client) {
  Bytes results = client.call(kMountProgram, kDump, {});
  xdr::Decoder d(results);
  std::vector<std::string> paths;
  while (d.ok() && d.boolean()) {
    d.string(1024);
    paths.emplace_back(d.string(1024));
  }
  if (!d.ok()) ADD_FAILURE() << "bad DUMP reply";
  return paths;
}

// The NFS status of a call on `handle` with `rest` as its further arguments.
std::uint32_t nfs_status(RpcClient& client, std::uint32_t procedure, const Bytes& handle,
                         const std::function<void(xdr::Encoder&)>& rest = {}) {
  xdr::Buffer args;
  xdr::Encoder e(args);
  e.opaque(handle);
  if (rest) rest(e);
  Bytes results = client.call(kNfsProgram, procedure, args);
  xdr::Decoder d(results);
  std::uint32_t status = d.u32();
  return d.ok() ? status : ~0u;
}

std::uint32_t getattr(RpcClient& client, const Bytes& handle) {
  return nfs_status(client, kGetattr, handle);
}

std::uint32_t mkdir(RpcClient& client, const Bytes& directory, std::string_view name) {
  return nfs_status(client, kMkdir, directory, [name](xdr::Encoder& e) {
    e.string(name);
    for (int i = 0; i < 6; ++i) e.u32(0);  // sattr3: change nothing
  });
}

std::uint32_t readdirplus(RpcClient& client, const Bytes& directory) {
  return nfs_status(client, kReaddirplus, directory, [](xdr::Encoder& e) {
    e.u64(0);  // cookie
    e.u64(0);  // cookie verifier
    e.u32(4096);
    e.u32(32768);
  });
}

ExportConfig exported(std::string path) {
  ExportConfig e;
  e.path = std::move(path);
  e.secure = false;  // RpcClient connects from an unprivileged port
  e.root_squash = false;
  return e;
}

// A whole NfsServer in this process, on a free loopback port, with its calls on two threads.
class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string dir =
        (std::filesystem::temp_directory_path() / "tp_nfsd_server_test.XXXXXX").string();
    ASSERT_NE(::mkdtemp(dir.data()), nullptr);
    dir_ = dir;
    store::StoreOptions options;
    options.data_dir = dir_;
    options.threads = 2;
    auto store = store::Store::open(options);
    ASSERT_TRUE(store.ok()) << store.status().message();
    store_ = std::move(store).value();

    NodeConfig config;
    config.data_dir = dir_;
    config.portmap_port = 0;
    config.register_with_rpcbind = false;
    config.exports = {exported("/ifs")};
    // Another process may take the port between the probe and the bind: try a few.
    for (int attempt = 0; attempt < 10 && !server_; ++attempt) {
      asio::ip::tcp::acceptor probe(first_, {asio::ip::address_v4::loopback(), 0});
      port_ = probe.local_endpoint().port();
      probe.close();
      config.nfs_port = port_;
      config.mount_port = port_;
      auto started = NfsServer::start({&first_, &second_}, config, *store_);
      if (started.ok()) server_ = std::move(started).value();
    }
    ASSERT_TRUE(server_);
    for (asio::io_context* context : {&first_, &second_}) {
      threads_.emplace_back([context] { context->run(); });
    }
  }

  void TearDown() override {
    if (server_) server_->stop();
    work_.clear();
    first_.stop();
    second_.stop();
    for (auto& t : threads_) t.join();
    server_.reset();
    if (store_) store_->close();
    std::filesystem::remove_all(dir_);
  }

  // Connections alternate between two io_contexts of one thread each, as in tided.
  asio::io_context first_{1};
  asio::io_context second_{1};
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> work_{
      asio::make_work_guard(first_), asio::make_work_guard(second_)};
  std::string dir_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<NfsServer> server_;
  std::uint16_t port_ = 0;
  std::vector<std::thread> threads_;
};

TEST_F(ServerTest, AddedExportsMountAtOnceAndRemovedOnesGoStale) {
  RpcClient client(port_);
  Mounted ifs = mount(client, "/ifs");
  ASSERT_EQ(ifs.status, kOk);
  ASSERT_EQ(mkdir(client, ifs.handle, "a"), kOk);
  ASSERT_EQ(mkdir(client, ifs.handle, "b"), kOk);

  server_->set_exports({exported("/ifs/a")});
  EXPECT_EQ(export_paths(client), std::vector<std::string>{"/ifs/a"});
  EXPECT_EQ(getattr(client, ifs.handle), kStale);
  EXPECT_EQ(mount(client, "/ifs/b").status, kNoent);
  Mounted a = mount(client, "/ifs/a");
  ASSERT_EQ(a.status, kOk);

  server_->set_exports({exported("/ifs/a"), exported("/ifs/b")});
  EXPECT_EQ(export_paths(client), (std::vector<std::string>{"/ifs/a", "/ifs/b"}));
  Mounted b = mount(client, "/ifs/b");
  ASSERT_EQ(b.status, kOk);
  EXPECT_EQ(getattr(client, b.handle), kOk);
  EXPECT_EQ(getattr(client, a.handle), kOk);  // its path did not change, nor did its id

  EXPECT_EQ(mounted_paths(client), (std::vector<std::string>{"/ifs/a", "/ifs/b"}));  // not /ifs

  server_->set_exports({exported("/ifs/a")});
  EXPECT_EQ(getattr(client, b.handle), kStale);
  EXPECT_EQ(readdirplus(client, b.handle), kStale);
  EXPECT_EQ(getattr(client, a.handle), kOk);
  EXPECT_EQ(readdirplus(client, a.handle), kOk);
  EXPECT_EQ(mounted_paths(client), std::vector<std::string>{"/ifs/a"});
}

// Calls on several connections and io threads while another thread keeps adding and removing
// /ifs/b. Each call sees one table or the other; the ASan build catches one freed under a call.
TEST_F(ServerTest, ExportsReplacedUnderRunningCalls) {
  Bytes a;
  Bytes b;
  {
    RpcClient client(port_);
    Mounted ifs = mount(client, "/ifs");
    ASSERT_EQ(ifs.status, kOk);
    ASSERT_EQ(mkdir(client, ifs.handle, "a"), kOk);
    ASSERT_EQ(mkdir(client, ifs.handle, "b"), kOk);
    server_->set_exports({exported("/ifs/a"), exported("/ifs/b")});
    Mounted ma = mount(client, "/ifs/a");
    Mounted mb = mount(client, "/ifs/b");
    ASSERT_EQ(ma.status, kOk);
    ASSERT_EQ(mb.status, kOk);
    a = ma.handle;
    b = mb.handle;
  }
  std::atomic<bool> done{false};
  std::atomic<int> calls{0};
  std::atomic<int> wrong{0};
  auto check = [&wrong](bool ok) {
    if (!ok) wrong.fetch_add(1);
  };
  std::vector<std::thread> clients;
  for (int i = 0; i < 3; ++i) {
    clients.emplace_back([&, i] {
      try {
        RpcClient client(port_);
        while (!done.load()) {
          std::uint32_t s = i == 0 ? mount(client, "/ifs/b").status : getattr(client, b);
          check(s == kOk || s == (i == 0 ? kNoent : kStale));
          check(readdirplus(client, a) == kOk);
          s = readdirplus(client, b);
          check(s == kOk || s == kStale);
          calls.fetch_add(3);
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
        done = true;
      }
    });
  }
  const std::vector<ExportConfig> both{exported("/ifs/a"), exported("/ifs/b")};
  const std::vector<ExportConfig> only_a{exported("/ifs/a")};
  for (int i = 0; (i < 300 || calls.load() < 1500) && !done.load(); ++i) {
    server_->set_exports(i % 2 == 0 ? only_a : both);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  done = true;
  for (auto& t : clients) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace tidepool::nfsd
