// A shard's part in changes across shards, shipped: what a remote participant sends is what the
// shard's own participant does, and what does not decode is refused before it runs.
#include <gtest/gtest.h>

#include <boost/endian/conversion.hpp>
#include <filesystem>
#include <map>
#include <optional>

#include "store/internal/test_util.h"
#include "store/remote_store.h"

namespace tidepool::store {
namespace {

using internal::put_u32;
using internal::run_to_completion;

const Caller kRoot{0, 0, {}};
// A directory's inode on shard 1, which the tests' shard 0 only names.
constexpr InodeId kElsewhere = (InodeId{1} << kShardShift) | 7;

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
  // What the coordinator says of `id`; nullopt (and a failure) when it said nothing.
  std::optional<Outcome> outcome(TransactionId id) {
    auto said = run_to_completion(remote_->outcome(id));
    EXPECT_TRUE(said.ok()) << said.status().to_string();
    return said.ok() ? std::optional(*said) : std::nullopt;
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
  EXPECT_EQ(outcome(43), Outcome::prepared);
  ASSERT_TRUE(run_to_completion(remote_->decide(43)).ok());
  EXPECT_EQ(outcome(43), Outcome::committed);
  ASSERT_TRUE(run_to_completion(remote_->finish(43)).ok());
  EXPECT_EQ(run_to_completion(home_->lookup(kRootInode, "moved-in", kRoot)).code(),
            Errc::not_found);

  // Unknown, so aborted from now on: its coordinator's part is refused if it comes late.
  EXPECT_EQ(outcome(99), Outcome::aborted);
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
  expect_refused_at(12, 0xffffffffu);
  expect_refused_at(16, 0x10000);
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

// A list one longer than its bound is malformed, made of elements that decode: the bound, not
// the bytes left, refuses it.
TEST_F(RemoteParticipantTest, AListPastItsBoundIsMalformedAtItsBound) {
  std::vector<ShardId> participants;
  for (ShardId shard = 1; participants.size() < kMaxShards; ++shard) participants.push_back(shard);
  // Steps of one size: names of one length.
  std::vector<ShardStep> steps;
  for (char c = 'a'; steps.size() < kMaxStepsPerPart; ++c) {
    steps.push_back(entry(StepKind::add_entry, std::string("x") + c));
  }
  ASSERT_TRUE(prepare(42, 0, participants, steps).ok());
  const xdr::Buffer at_bounds = channel_->requests.at(ParticipantMethod::prepare);

  // One participant more: its count (at 12) and one more shard id after the last.
  xdr::Buffer more_participants = at_bounds;
  put_u32(more_participants, 12, kMaxShards + 1);
  const std::size_t after_participants = 16 + 4 * kMaxShards;
  const std::uint8_t shard[4] = {0, 0, 1, 1};
  more_participants.insert(more_participants.begin() + after_participants, shard, shard + 4);
  expect_malformed(ParticipantMethod::prepare, more_participants);

  // One step more: its count, then a copy of the last step.
  xdr::Buffer more_steps = at_bounds;
  const std::size_t step_bytes = (at_bounds.size() - after_participants - 4) / kMaxStepsPerPart;
  put_u32(more_steps, after_participants, kMaxStepsPerPart + 1);
  more_steps.insert(more_steps.end(), at_bounds.end() - step_bytes, at_bounds.end());
  expect_malformed(ParticipantMethod::prepare, more_steps);
}

TEST_F(RemoteParticipantTest, APartThatSaysTheImpossibleIsRefused) {
  ShardStep twice = entry(StepKind::add_entry, "x");
  twice.delta = 2;
  EXPECT_EQ(prepare(1, 0, {1}, {twice}).code(), Errc::invalid_argument);
  ShardStep no_links = twice;
  no_links.kind = StepKind::add_links;
  no_links.delta = 0;
  EXPECT_EQ(prepare(2, 0, {1}, {no_links}).code(), Errc::invalid_argument);
  const ShardStep add = entry(StepKind::add_entry, "x");
  EXPECT_EQ(prepare(3, 0, {0}, {add}).code(), Errc::invalid_argument);       // itself
  EXPECT_EQ(prepare(4, 0, {1, 1}, {add}).code(), Errc::invalid_argument);    // twice
  EXPECT_EQ(prepare(5, 1, {2}, {add}).code(), Errc::invalid_argument);       // not its to name
  EXPECT_EQ(prepare(6, 0, {1}, {add, add}).code(), Errc::invalid_argument);  // one name twice
  EXPECT_TRUE(prepare(7, 0, {1}, {add}).ok());
}

}  // namespace
}  // namespace tidepool::store
