#include "store/remote_store.h"

#include <gtest/gtest.h>

#include "store/internal/test_util.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/endian/conversion.hpp>
#include <filesystem>
#include <functional>
#include <map>
#include <random>

namespace tidepool::store {
namespace {

namespace asio = boost::asio;

const Caller kAlice{1000, 1000, {}};
const Caller kBob{1001, 1001, {2000, 2001}};

using internal::put_u32;
using internal::run_to_completion;

template <typename T>
T run(asio::awaitable<T> op) {
  return run_to_completion(std::move(op));
}

// Ships to a home store in this process. Keeps the last request of each method, and lets a
// test rewrite requests on their way out and replies on their way back.
class HomeChannel final : public ShardChannel {
 public:
  explicit HomeChannel(Store& home) : home_(home) {}

  awaitable<Result<xdr::Buffer>> call(StoreMethod method, xdr::Buffer request) override {
    if (tamper_request) tamper_request(request);
    requests[method] = request;
    auto op = serve_store_call(home_, static_cast<std::uint32_t>(method), request);
    auto reply = co_await std::move(op);
    if (reply.ok() && tamper_reply) tamper_reply(*reply);
    co_return std::move(reply);
  }

  std::function<void(xdr::Buffer&)> tamper_request;
  std::function<void(xdr::Buffer&)> tamper_reply;
  std::map<StoreMethod, xdr::Buffer> requests;

 private:
  Store& home_;
};

class RemoteStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = internal::fresh_test_directory("tidepool-remote-store-test");
    StoreOptions options;
    options.data_dir = dir_.string();
    options.threads = 2;
    auto opened = Store::open(options);
    ASSERT_TRUE(opened.ok()) << opened.status().to_string();
    home_ = std::move(opened).value();
    channel_ = std::make_shared<HomeChannel>(*home_);
    remote_ = make_remote_store(channel_);
  }
  void TearDown() override {
    remote_.reset();
    home_.reset();
    std::filesystem::remove_all(dir_);
  }

  Result<xdr::Buffer> serve(StoreMethod method, std::span<const std::uint8_t> request) {
    return run(serve_store_call(*home_, static_cast<std::uint32_t>(method), request));
  }

  // The request the remote store sent last for `method`.
  xdr::Buffer sent(StoreMethod method) { return channel_->requests.at(method); }

  void expect_malformed(StoreMethod method, std::span<const std::uint8_t> request) {
    auto served = serve(method, request);
    EXPECT_EQ(served.code(), Errc::invalid_argument)
        << "method " << static_cast<int>(method) << ", " << request.size() << " bytes";
    EXPECT_EQ(served.status().message().rfind("malformed ", 0), 0u) << served.status().message();
  }

  InodeId make_file(const std::string& name) {
    auto made = run(remote_->create(kRootInode, name, CreateMode::guarded, {}, {}, kAlice));
    EXPECT_TRUE(made.ok()) << made.status().to_string();
    return made.ok() ? made->attributes.inode : 0;
  }

  std::filesystem::path dir_;
  std::unique_ptr<Store> home_;
  std::shared_ptr<HomeChannel> channel_;
  std::unique_ptr<Store> remote_;
};

TEST_F(RemoteStoreTest, EveryTruncatedRequestIsMalformed) {
  InodeId file = make_file("f");
  ASSERT_TRUE(run(remote_->getattr(file)).ok());
  ASSERT_TRUE(run(remote_->lookup(kRootInode, "f", kBob)).ok());
  std::vector<std::uint8_t> data(13, 7);
  ASSERT_TRUE(run(remote_->write(file, 3, data, Stability::file_sync, kAlice)).ok());
  AttributeChanges initial;
  initial.mode = 0600;
  initial.size = 0;
  initial.mtime = SetTime::client_time;
  initial.mtime_ns = 5;
  CreateVerifier verifier{1, 2, 3, 4, 5, 6, 7, 8};
  ASSERT_TRUE(
      run(remote_->create(kRootInode, "new", CreateMode::exclusive, initial, verifier, kBob)).ok());
  ASSERT_TRUE(run(remote_->readdir(kRootInode, 0, 0, 10, true, kBob)).ok());

  for (StoreMethod method : {StoreMethod::getattr, StoreMethod::lookup, StoreMethod::write,
                             StoreMethod::create, StoreMethod::readdir}) {
    xdr::Buffer request = sent(method);
    for (std::size_t length = 0; length < request.size(); ++length) {
      expect_malformed(method, std::span(request).first(length));
    }
    request.resize(request.size() + 4, 0);
    expect_malformed(method, request);
  }
}

TEST_F(RemoteStoreTest, LyingLengthsAndCountsAreMalformed) {
  InodeId file = make_file("f");
  ASSERT_TRUE(run(remote_->lookup(kRootInode, "f", kBob)).ok());
  std::vector<std::uint8_t> data(13, 7);
  ASSERT_TRUE(run(remote_->write(file, 0, data, Stability::unstable, kAlice)).ok());
  std::vector<std::uint8_t> into(8);
  ASSERT_TRUE(run(remote_->read(file, 0, into, kAlice)).ok());
  ASSERT_TRUE(run(remote_->readdir(kRootInode, 0, 0, 10, false, kAlice)).ok());

  // lookup: directory, name (at 8), then the caller's uid, gid and groups (at 24).
  for (std::uint32_t name_length : {0xffffffffu, 256u, 200u}) {
    xdr::Buffer lookup = sent(StoreMethod::lookup);
    put_u32(lookup, 8, name_length);
    expect_malformed(StoreMethod::lookup, lookup);
  }
  for (std::uint32_t groups : {0xffffffffu, 17u, 3u}) {
    xdr::Buffer lookup = sent(StoreMethod::lookup);
    put_u32(lookup, 24, groups);
    expect_malformed(StoreMethod::lookup, lookup);
  }
  // write: inode, offset, then the data (at 16).
  for (std::uint32_t data_length : {0xffffffffu, (4u << 20) + 1, 100u}) {
    xdr::Buffer write = sent(StoreMethod::write);
    put_u32(write, 16, data_length);
    expect_malformed(StoreMethod::write, write);
  }
  // read: inode, offset, then the count (at 16).
  xdr::Buffer read = sent(StoreMethod::read);
  put_u32(read, 16, (4u << 20) + 1);
  expect_malformed(StoreMethod::read, read);
  // readdir: directory, cookie, cookie verifier, then the entry count (at 24).
  xdr::Buffer readdir = sent(StoreMethod::readdir);
  put_u32(readdir, 24, 4097);
  expect_malformed(StoreMethod::readdir, readdir);
}

TEST_F(RemoteStoreTest, EnumsAndBooleansOutOfRangeAreMalformed) {
  InodeId file = make_file("f");
  std::vector<std::uint8_t> data(5, 7);
  ASSERT_TRUE(run(remote_->write(file, 0, data, Stability::unstable, kAlice)).ok());
  ASSERT_TRUE(run(remote_->mknod(kRootInode, "fifo", FileType::fifo, 0, 0, {}, kAlice)).ok());
  ASSERT_TRUE(run(remote_->create(kRootInode, "new", CreateMode::guarded, {}, {}, kAlice)).ok());
  ASSERT_TRUE(run(remote_->setattr(file, {}, kAlice, std::nullopt)).ok());
  ASSERT_TRUE(run(remote_->readdir(kRootInode, 0, 0, 10, false, kAlice)).ok());

  const auto expect_refused_at = [&](StoreMethod method, std::size_t at, std::uint32_t value) {
    xdr::Buffer request = sent(method);
    put_u32(request, at, value);
    expect_malformed(method, request);
  };
  expect_refused_at(StoreMethod::write, 20 + 8, 3);  // stability, after 5 bytes of data
  expect_refused_at(StoreMethod::mknod, 16, 0);      // file type, after the name "fifo"
  expect_refused_at(StoreMethod::mknod, 16, 8);
  expect_refused_at(StoreMethod::create, 16, 3);   // create mode, after the name "new"
  expect_refused_at(StoreMethod::setattr, 24, 3);  // atime's SetTime, after four absent options
  expect_refused_at(StoreMethod::readdir, 28, 2);  // with_attributes
}

TEST_F(RemoteStoreTest, UnknownMethodsAreNotSupported) {
  const xdr::Buffer some_bytes(8, 0);
  for (std::uint32_t method : {0u, kLastStoreMethod + 1, 0xffffffffu}) {
    EXPECT_EQ(run(serve_store_call(*home_, method, {})).code(), Errc::not_supported);
    EXPECT_EQ(run(serve_store_call(*home_, method, some_bytes)).code(), Errc::not_supported);
  }
}

TEST_F(RemoteStoreTest, AMalformedReplyIsAnIoError) {
  InodeId file = make_file("f");
  ASSERT_TRUE(run(remote_->getattr(file)).ok());
  const std::size_t full = serve(StoreMethod::getattr, sent(StoreMethod::getattr))->size();
  for (std::size_t length = 0; length <= full + 4; length += 4) {
    if (length == full) continue;
    channel_->tamper_reply = [length](xdr::Buffer& reply) { reply.resize(length, 0); };
    auto a = run(remote_->getattr(file));
    EXPECT_EQ(a.code(), Errc::io_error) << length << " bytes";
    EXPECT_EQ(a.status().message(), "malformed reply from the shard's home");
  }
}

TEST_F(RemoteStoreTest, AReadReplyWithMoreBytesThanAskedForIsAnIoError) {
  InodeId file = make_file("f");
  std::vector<std::uint8_t> data(100, 7);
  ASSERT_TRUE(run(remote_->write(file, 0, data, Stability::unstable, kAlice)).ok());
  channel_->tamper_request = [](xdr::Buffer& request) { put_u32(request, 16, 100); };
  std::vector<std::uint8_t> into(10);
  EXPECT_EQ(run(remote_->read(file, 0, into, kAlice)).code(), Errc::io_error);
  EXPECT_EQ(run(remote_->read_pieces(file, 0, 10, kAlice)).code(), Errc::io_error);
}

TEST_F(RemoteStoreTest, ErrorsFromTheHomeArriveWithCodeAndMessage) {
  make_file("f");
  auto local = run(home_->lookup(kRootInode, "missing", kAlice));
  auto shipped = run(remote_->lookup(kRootInode, "missing", kAlice));
  EXPECT_EQ(shipped.code(), Errc::not_found);
  EXPECT_FALSE(shipped.status().message().empty());
  EXPECT_EQ(shipped.status().message(), local.status().message());
  auto not_a_directory = run(remote_->rmdir(kRootInode, "f", kAlice));
  EXPECT_EQ(not_a_directory.code(), Errc::not_a_directory);
  EXPECT_EQ(not_a_directory.status().message(),
            run(home_->rmdir(kRootInode, "f", kAlice)).status().message());
}

TEST_F(RemoteStoreTest, ANameTooLongIsRefusedBeforeItIsShipped) {
  auto found = run(remote_->lookup(kRootInode, std::string(kMaxNameBytes + 1, 'n'), kAlice));
  EXPECT_EQ(found.code(), Errc::name_too_long);
  EXPECT_EQ(channel_->requests.count(StoreMethod::lookup), 0u);
}

TEST_F(RemoteStoreTest, AMebibyteFileReadsBackThroughTheRemoteStore) {
  InodeId file = make_file("big");
  std::mt19937 rng(11);
  std::vector<std::uint8_t> data(1 << 20);
  for (auto& b : data) b = static_cast<std::uint8_t>(rng());
  ASSERT_TRUE(run(home_->write(file, 0, data, Stability::file_sync, kAlice)).ok());
  std::vector<std::uint8_t> got(data.size() + 4096);
  auto r = run(remote_->read(file, 0, got, kAlice));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->count, data.size());
  EXPECT_TRUE(r->eof);
  got.resize(r->count);
  EXPECT_EQ(got, data);

  // Left in the reply message, which the result keeps.
  auto pieces = run(remote_->read_pieces(file, 4096, 1 << 20, kAlice));
  ASSERT_TRUE(pieces.ok()) << pieces.status().to_string();
  EXPECT_EQ(pieces->result.count, data.size() - 4096);
  EXPECT_TRUE(pieces->result.eof);
  ASSERT_EQ(pieces->pieces.size(), 1u);
  ASSERT_TRUE(pieces->keep);
  EXPECT_TRUE(std::equal(pieces->pieces[0].begin(), pieces->pieces[0].end(), data.begin() + 4096,
                         data.end()));
}

TEST_F(RemoteStoreTest, AFilesLayoutComesFromTheHome) {
  InodeId file = make_file("laid-out");
  auto layout = run(remote_->layout(file));
  ASSERT_TRUE(layout.ok()) << layout.status().to_string();
  EXPECT_EQ(layout->pool, kWithShard);
  EXPECT_EQ(layout->stripe_unit, 128u << 10);
  EXPECT_EQ(layout->protection, kDefaultProtection);
  EXPECT_EQ(layout->access_pattern, "concurrency");
  EXPECT_EQ(run(remote_->layout(kRootInode)).code(), Errc::invalid_argument);
}

TEST_F(RemoteStoreTest, AFilesAccessPatternIsSetAtTheHome) {
  InodeId file = make_file("streamed");
  auto set = run(remote_->set_access_pattern(file, "streaming"));
  ASSERT_TRUE(set.ok()) << set.status().to_string();
  EXPECT_EQ(set->access_pattern, "streaming");
  EXPECT_EQ(run(home_->layout(file))->access_pattern, "streaming");
  auto unknown = run(remote_->set_access_pattern(file, "sequential"));
  EXPECT_EQ(unknown.code(), Errc::invalid_argument);
  EXPECT_EQ(unknown.status().message(),
            "unknown access pattern 'sequential' (random, concurrency or streaming)");
  EXPECT_EQ(run(remote_->set_access_pattern(kRootInode, "random")).code(), Errc::invalid_argument);
  EXPECT_EQ(run(home_->layout(file))->access_pattern, "streaming");
}

TEST_F(RemoteStoreTest, ReadsRecordedElsewhereMoveAtimesAtTheHomeInMessagesOfBoundedSize) {
  home_->set_atime_policy(true, std::chrono::seconds(60));
  const InodeId file = make_file("read-elsewhere");
  AttributeChanges long_ago;
  long_ago.atime = SetTime::client_time;
  long_ago.atime_ns = 1'000'000'000;  // 1970
  ASSERT_TRUE(run(home_->setattr(file, long_ago, kAlice, std::nullopt)).ok());
  // Many files named, the same twice, one gone, a directory: one atime moves.
  std::vector<InodeId> inodes(kMaxRecordedReads + 10, kRootInode);
  inodes[7] = file;
  inodes.back() = file;
  inodes[8] = file + 1000;
  auto recorded = run(remote_->record_reads(inodes));
  ASSERT_TRUE(recorded.ok()) << recorded.status().to_string();
  EXPECT_EQ(*recorded, 1u);
  EXPECT_GT(run(home_->getattr(file))->atime_ns, long_ago.atime_ns);
  // The last message held the rest: its count says 10.
  xdr::Buffer last = sent(StoreMethod::record_reads);
  EXPECT_EQ(last.size(), 4u + 10 * 8);
  put_u32(last, 0, kMaxRecordedReads + 1);
  expect_malformed(StoreMethod::record_reads, last);
  put_u32(last, 0, 11);
  expect_malformed(StoreMethod::record_reads, last);
}

TEST_F(RemoteStoreTest, TheWriteVerifierFollowsTheHomeAndDiffersPerInitiator) {
  auto verifier = serve(StoreMethod::write_verifier, {});
  ASSERT_TRUE(verifier.ok());
  xdr::Decoder in(*verifier);
  EXPECT_EQ(in.u64(), home_->write_verifier());
  EXPECT_EQ(in.remaining(), 0u);

  InodeId file = make_file("f");
  auto other = make_remote_store(channel_);
  ASSERT_TRUE(run(remote_->commit(file, {})).ok());
  ASSERT_TRUE(run(other->commit(file, {})).ok());
  EXPECT_NE(remote_->write_verifier(), other->write_verifier());
}

TEST_F(RemoteStoreTest, AClosedRemoteStoreIsUnavailable) {
  InodeId file = make_file("f");
  remote_->close();
  EXPECT_EQ(run(remote_->getattr(file)).code(), Errc::unavailable);
  EXPECT_TRUE(run(home_->getattr(file)).ok());
}

}  // namespace
}  // namespace tidepool::store
