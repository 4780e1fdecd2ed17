#include "cluster/rpc.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "cluster/sim.h"

namespace tidepool::cluster {
namespace {

using namespace std::chrono_literals;

xdr::Buffer text(const std::string& s) { return xdr::Buffer(s.begin(), s.end()); }
std::string text_of(const xdr::Buffer& b) { return std::string(b.begin(), b.end()); }

constexpr std::uint32_t kEcho = 1;
constexpr std::uint32_t kHold = 2;

class RpcTest : public ::testing::Test {
 protected:
  RpcTest()
      : a_(world_.loop(1), world_.transport(1), [this] { return epoch_a_; }),
        b_(world_.loop(2), world_.transport(2), [this] { return epoch_b_; }) {
    b_.handle(kEcho, [this](NodeId from, std::span<const std::uint8_t> request,
                            RpcEndpoint::Reply reply) {
      ++served_;
      reply(text("from " + std::to_string(from) + ": " +
                 std::string(request.begin(), request.end())));
    });
    b_.handle(kHold, [this](NodeId, std::span<const std::uint8_t> request,
                            RpcEndpoint::Reply reply) {
      held_.emplace_back(std::string(request.begin(), request.end()), std::move(reply));
    });
  }

  std::optional<Result<xdr::Buffer>> call(std::uint32_t method, const std::string& body,
                                          std::chrono::milliseconds deadline = 1000ms) {
    std::optional<Result<xdr::Buffer>> result;
    xdr::Buffer request = text(body);
    a_.call(2, method, request, deadline, [&](Result<xdr::Buffer> r) { result = std::move(r); });
    world_.run_until([&] { return result.has_value(); }, world_.now_ms() + 5000);
    return result;
  }

  SimWorld world_{42};
  Epoch epoch_a_ = 7;
  Epoch epoch_b_ = 7;
  RpcEndpoint a_;
  RpcEndpoint b_;
  std::vector<std::pair<std::string, RpcEndpoint::Reply>> held_;
  int served_ = 0;  // echo calls b_ served
};

TEST_F(RpcTest, ACallGetsItsReplyAndTheCalleeKnowsTheCaller) {
  auto result = call(kEcho, "ping");
  ASSERT_TRUE(result && result->ok());
  EXPECT_EQ(text_of(**result), "from 1: ping");
}

TEST_F(RpcTest, ManyCallsInFlightGetTheirOwnRepliesInAnyOrder) {
  std::map<int, std::string> replies;
  for (int i = 0; i < 64; ++i) {
    xdr::Buffer request = text(std::to_string(i));
    a_.call(2, kHold, request, 5000ms, [&replies, i](Result<xdr::Buffer> r) {
      replies[i] = r.ok() ? text_of(*r) : r.status().to_string();
    });
  }
  ASSERT_TRUE(world_.run_until([&] { return held_.size() == 64; }, 5000));
  for (auto it = held_.rbegin(); it != held_.rend(); ++it) it->second(text("re " + it->first));
  ASSERT_TRUE(world_.run_until([&] { return replies.size() == 64; }, 10000));
  for (int i = 0; i < 64; ++i) EXPECT_EQ(replies[i], "re " + std::to_string(i));
}

TEST_F(RpcTest, ACallToAnUnreachableNodeTimesOutAtItsDeadline) {
  world_.partition({{1}, {2}});
  std::uint64_t start = world_.now_ms();
  auto result = call(kEcho, "anyone?", 300ms);
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->code(), Errc::timed_out);
  EXPECT_EQ(world_.now_ms() - start, 300u);
}

TEST_F(RpcTest, CallsToANodeRecordedDownEndAtOnceAndCallsToOthersGoOn) {
  world_.partition({{1}, {2}});
  std::vector<Result<xdr::Buffer>> to_2;
  for (int i = 0; i < 3; ++i) {
    a_.call(2, kEcho, text("lost"), 5000ms,
            [&to_2](Result<xdr::Buffer> r) { to_2.push_back(std::move(r)); });
  }
  // A call of the same endpoint to another node (nobody answers at 3) is left alone.
  std::optional<Result<xdr::Buffer>> to_3;
  a_.call(3, kEcho, text("elsewhere"), 5000ms,
          [&to_3](Result<xdr::Buffer> r) { to_3 = std::move(r); });
  world_.run_until(world_.now_ms() + 100);
  const std::uint64_t abandoned_at = world_.now_ms();
  a_.abandon_calls_to(2, "the group recorded it down");
  ASSERT_EQ(to_2.size(), 3u);
  for (const Result<xdr::Buffer>& r : to_2) {
    EXPECT_EQ(r.code(), Errc::timed_out);
    EXPECT_NE(r.status().message().find("recorded it down"), std::string::npos);
  }
  EXPECT_EQ(world_.now_ms(), abandoned_at);
  EXPECT_FALSE(to_3.has_value()) << "the call to node 3 goes on";
  // Their deadlines pass without answering them twice; the other call ends at its own.
  world_.run_until(world_.now_ms() + 6000);
  EXPECT_EQ(to_2.size(), 3u);
  ASSERT_TRUE(to_3.has_value());
  EXPECT_EQ(to_3->code(), Errc::timed_out);
  EXPECT_EQ(to_3->status().message().find("recorded it down"), std::string::npos);
}

TEST_F(RpcTest, ARequestFromAnOlderEpochIsRefusedUnrun) {
  epoch_b_ = 8;
  int runs = 0;
  b_.handle(kEcho, [&runs](NodeId, std::span<const std::uint8_t>, RpcEndpoint::Reply reply) {
    runs++;
    reply(xdr::Buffer{});
  });
  auto result = call(kEcho, "stale");
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->code(), Errc::behind);
  EXPECT_NE(result->status().message().find("epoch 7"), std::string::npos);
  EXPECT_EQ(runs, 0);
  epoch_a_ = 9;  // a newer caller is served
  result = call(kEcho, "fresh");
  ASSERT_TRUE(result.has_value());
  EXPECT_TRUE(result->ok());
  EXPECT_EQ(runs, 1);
}

TEST_F(RpcTest, UnknownMethodsAndHandlerErrorsComeBackAsErrors) {
  auto unknown = call(99, "?");
  ASSERT_TRUE(unknown.has_value());
  EXPECT_EQ(unknown->code(), Errc::not_supported);
  b_.handle(kEcho, [](NodeId, std::span<const std::uint8_t>, RpcEndpoint::Reply reply) {
    reply(error(Errc::not_found, "no such tier"));
  });
  auto failed = call(kEcho, "x");
  ASSERT_TRUE(failed.has_value());
  EXPECT_EQ(failed->code(), Errc::not_found);
  EXPECT_EQ(failed->status().message(), "no such tier");
}

TEST_F(RpcTest, LostAndDuplicatedMessagesNeverAnswerACallTwice) {
  SimFaults faults;
  faults.loss = 0.2;
  faults.duplicate = 0.5;
  world_.set_faults(faults);
  int answered = 0, ok = 0;
  for (int i = 0; i < 200; ++i) {
    xdr::Buffer request = text(std::to_string(i));
    a_.call(2, kEcho, request, 500ms, [&](Result<xdr::Buffer> r) {
      answered++;
      if (r.ok()) ok++;
    });
  }
  world_.run_until(world_.now_ms() + 2000);
  EXPECT_EQ(answered, 200);
  EXPECT_GT(ok, 100);
  EXPECT_LT(ok, 200);
}

// A message carries its trailer after the body: kind (1 call, 2 reply), id, epoch, method.
xdr::Buffer with_trailer(const std::string& body, std::uint32_t kind, std::uint64_t id,
                         std::uint32_t method) {
  xdr::Buffer message = text(body);
  xdr::Encoder out(message);
  out.u32(kind);
  out.u64(id);
  out.u64(7);
  out.u32(method);
  return message;
}

// Dropped: neither served nor answered, and the endpoint goes on serving (a reply nobody waits
// for, as after its deadline, is not malformed but goes the same way).
TEST_F(RpcTest, MalformedMessagesAreDropped) {
  const xdr::Buffer well_formed = with_trailer("ping", 1, 900, kEcho);
  const xdr::Buffer malformed[] = {
      xdr::Buffer(well_formed.end() - 23, well_formed.end()),  // shorter than a trailer
      with_trailer("ping", 3, 901, kEcho),                     // neither a call nor a reply
      with_trailer("", 2, 902, 0),                             // a reply nobody waits for
  };
  const std::uint64_t sent_before = world_.messages_sent();
  for (const xdr::Buffer& message : malformed) world_.transport(1).send(2, Channel::rpc, message);
  world_.run_until(world_.now_ms() + 100);
  EXPECT_EQ(served_, 0) << "a malformed message was served";
  EXPECT_EQ(world_.messages_sent(), sent_before + std::size(malformed)) << "and answered";

  // The same message whole is served, and answered.
  world_.transport(1).send(2, Channel::rpc, well_formed);
  world_.run_until(world_.now_ms() + 100);
  EXPECT_EQ(served_, 1);
  EXPECT_EQ(world_.messages_sent(), sent_before + std::size(malformed) + 2);
  auto result = call(kEcho, "after garbage");
  ASSERT_TRUE(result && result->ok());
}

}  // namespace
}  // namespace tidepool::cluster
