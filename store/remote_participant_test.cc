// A shard's part in changes across shards, shipped: what a remote participant sends is what the
// shard's own participant does, and what does not decode is refused before it runs.
#include <gtest/gtest.h>

#include <boost/endian/conversion.hpp>
#include <filesystem>
#include <map>

#include "store/internal/test_util.h"
#include "store/remote_store.h"

namespace tidepool::store {
namespace {

using internal::run_to_completion;

const Caller kRoot{0, 0, {}};
// A directory's inode on shard 1, which the tests' shard 0 only names.
constexpr InodeId kElsewhere = (InodeId{1} << kShardShift) | 7;

void put_u32(xdr::Buffer& buffer, std::size_t at, std::uint32_t value) {
  boost::endian::store_big_u32(buffer.data() + at, value);
}

// Carries calls to a participant in this process, keeping the last request of each method.
class LoopbackChannel final : public ParticipantChannel {
 public:
  explicit LoopbackChannel(ShardParticipant& participant) : participant_(participant) {}

  awaitable<Result<xdr::Buffer>> call(ParticipantMethod method, xdr::Buffer request) override {
    requests[method] = request;
    auto served = serve_participant_call(participant_, static_cast<std::uint32_t>(method), request);
    co_return co_await std::move(served);
  }

  std::map<ParticipantMethod, xdr::Buffer> requests;

 private:
  ShardParticipant& participant_;
};

ShardStep entry(StepKind kind, const std::string& name) {
  ShardStep step;
  step.kind = kind;
  step.directory = kRootInode;
  step.name = name;
  step.inode = kElsewhere;
  step.delta = kind == StepKind::add_entry ? 1 : -1;
  return step;
}

class RemoteParticipantTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = internal::fresh_test_directory("tidepool-remote-participant-test");
    StoreOptions options;
    options.data_dir = dir_.string();
    options.threads = 1;
    auto opened = Store::open(options);
    ASSERT_TRUE(opened.ok()) << opened.status().to_string();
    home_ = std::move(opened).value();
    channel_ = std::make_shared<LoopbackChannel>(home_->participant());
    remote_ = make_remote_participant(channel_);
  }
  void TearDown() override {
    remote_.reset();
    home_.reset();
    std::filesystem::remove_all(dir_);
  }

  Status prepare(TransactionId id, ShardId coordinator, std::vector<ShardId> participants,
                 std::vector<ShardStep> steps) {
    return run_to_completion(remote_->prepare(TransactionPart{
                                 id, coordinator, std::move(participants), std::move(steps)}))
        .status();
  }
  Status create(const std::string& name) {
    return run_to_completion(
               home_->create(kRootInode, name, CreateMode::guarded, {}, CreateVerifier{}, kRoot))
        .status();
  }
  void expect_malformed(ParticipantMethod method, std::span<const std::uint8_t> request) {
    auto served = run_to_completion(
        serve_participant_call(home_->participant(), static_cast<std::uint32_t>(method), request));
    EXPECT_EQ(served.code(), Errc::invalid_argument)
        << "method " << static_cast<int>(method) << ", " << request.size() << " bytes";
    EXPECT_EQ(served.status().message().rfind("malformed ", 0), 0u) << served.status().message();
  }

  std::filesystem::path dir_;
  std::unique_ptr<LocalStore> home_;
  std::shared_ptr<LoopbackChannel> channel_;
  std::unique_ptr<ShardParticipant> remote_;
};

TEST_F(RemoteParticipantTest, APartPreparedFromAfarIsHeldThenCommittedOnTheShard) {
  ASSERT_TRUE(prepare(42, 1, {}, {entry(StepKind::add_entry, "moved-in")}).ok());
  EXPECT_EQ(create("moved-in").code(), Errc::unavailable);  // held by the part

  auto pending = run_to_completion(remote_->pending());
  ASSERT_TRUE(pending.ok()) << pending.status().to_string();
  ASSERT_EQ(pending->size(), 1u);
  EXPECT_EQ(pending->front().id, 42u);
  EXPECT_EQ(pending->front().coordinator, 1);
  EXPECT_FALSE(pending->front().decided);

  ASSERT_TRUE(run_to_completion(remote_->commit(42)).ok());
  auto found = run_to_completion(home_->lookup(kRootInode, "moved-in", kRoot));
  ASSERT_TRUE(found.ok()) << found.status().to_string();
  EXPECT_TRUE(found->object_elsewhere);
  EXPECT_EQ(found->object.inode, kElsewhere);
  EXPECT_TRUE(run_to_completion(remote_->pending())->empty());
}

TEST_F(RemoteParticipantTest, AnAbortedPartLeavesTheShardAsItWas) {
  ASSERT_TRUE(prepare(44, 1, {}, {entry(StepKind::add_entry, "other")}).ok());
  ASSERT_TRUE(run_to_completion(remote_->abort(44)).ok());
  EXPECT_TRUE(create("other").ok());
}

TEST_F(RemoteParticipantTest, TheCoordinatorsCallsDecideAndTellOutcomes) {
  ASSERT_TRUE(prepare(42, 1, {}, {entry(StepKind::add_entry, "moved-in")}).ok());
  ASSERT_TRUE(run_to_completion(remote_->commit(42)).ok());
  ASSERT_TRUE(prepare(43, 0, {1}, {entry(StepKind::remove_entry, "moved-in")}).ok());
  EXPECT_EQ(*run_to_completion(remote_->outcome(43)), Outcome::prepared);
  ASSERT_TRUE(run_to_completion(remote_->decide(43)).ok());
  EXPECT_EQ(*run_to_completion(remote_->outcome(43)), Outcome::committed);
  ASSERT_TRUE(run_to_completion(remote_->finish(43)).ok());
  EXPECT_EQ(run_to_completion(home_->lookup(kRootInode, "moved-in", kRoot)).code(),
            Errc::not_found);

  // Unknown, so aborted from now on: its coordinator's part is refused if it comes late.
  EXPECT_EQ(*run_to_completion(remote_->outcome(99)), Outcome::aborted);
  EXPECT_EQ(prepare(99, 0, {1}, {entry(StepKind::add_entry, "late")}).code(), Errc::unavailable);
  // The shard's errors come back with their code.
  EXPECT_EQ(run_to_completion(remote_->decide(77)).code(), Errc::precondition_failed);
}

TEST_F(RemoteParticipantTest, MalformedRequestsAreRefusedBeforeTheyRun) {
  ASSERT_TRUE(prepare(42, 0, {1}, {entry(StepKind::add_entry, "x")}).ok());
  ASSERT_TRUE(run_to_completion(remote_->outcome(42)).ok());
  const xdr::Buffer prepared = channel_->requests.at(ParticipantMethod::prepare);

  for (std::size_t length = 0; length < prepared.size(); ++length) {
    expect_malformed(ParticipantMethod::prepare, std::span(prepared).first(length));
  }
  xdr::Buffer longer = prepared;
  longer.resize(longer.size() + 4, 0);
  expect_malformed(ParticipantMethod::prepare, longer);
  xdr::Buffer outcome = channel_->requests.at(ParticipantMethod::outcome);
  expect_malformed(ParticipantMethod::outcome, std::span(outcome).first(4));

  // id (8 bytes), coordinator (at 8), the participants' count (at 12) and the one participant
  // (at 16), the steps' count (at 20), then the first step's kind (at 24).
  const auto expect_refused_at = [&](std::size_t at, std::uint32_t value) {
    xdr::Buffer request = prepared;
    put_u32(request, at, value);
    expect_malformed(ParticipantMethod::prepare, request);
  };
  expect_refused_at(8, 0x10000);  // a shard id above 16 bits
  expect_refused_at(12, kMaxShards + 1);
  expect_refused_at(12, 0xffffffffu);
  expect_refused_at(16, 0x10000);
  expect_refused_at(20, kMaxStepsPerPart + 1);
  expect_refused_at(20, 0xffffffffu);
  expect_refused_at(24, 0);  // step kinds
  expect_refused_at(24, static_cast<std::uint32_t>(StepKind::set_parent) + 1);

  const xdr::Buffer some_bytes(8, 0);
  for (std::uint32_t method : {0u, kLastParticipantMethod + 1, 0xffffffffu}) {
    EXPECT_EQ(
        run_to_completion(serve_participant_call(home_->participant(), method, some_bytes)).code(),
        Errc::not_supported);
  }
}

}  // namespace
}  // namespace tidepool::store
