#include "common/clock.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace tidepool {
namespace {

using namespace std::chrono_literals;

const std::chrono::system_clock::time_point kStart{std::chrono::seconds(1'700'000'000)};

TEST(FakeClock, StandsStillAtItsStartTime) {
  FakeClock clock(kStart);
  auto steady = clock.steady_now();
  EXPECT_EQ(clock.now(), kStart);
  EXPECT_EQ(clock.now(), kStart);
  EXPECT_EQ(clock.steady_now(), steady);
}

TEST(FakeClock, AdvanceMovesWallAndMonotonicTimeTogether) {
  FakeClock clock(kStart);
  auto steady = clock.steady_now();
  clock.advance(90s);
  clock.advance(5ms);
  EXPECT_EQ(clock.now(), kStart + 90s + 5ms);
  EXPECT_EQ(clock.steady_now(), steady + 90s + 5ms);
}

TEST(FakeClock, SetJumpsTheWallClockOnly) {
  FakeClock clock(kStart);
  auto steady = clock.steady_now();
  clock.set(kStart - 24h);
  EXPECT_EQ(clock.now(), kStart - 24h);
  EXPECT_EQ(clock.steady_now(), steady);
}

TEST(FakeClock, ConcurrentAdvancesAreAllCounted) {
  FakeClock clock(kStart);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&clock] {
      for (int i = 0; i < 1000; ++i) clock.advance(1ms);
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(clock.now(), kStart + 4s);
}

TEST(FakeClock, ASleepMovesTimeToItsEndAtOnce) {
  FakeClock clock(kStart);
  const auto steady = clock.steady_now();
  const auto real_before = std::chrono::steady_clock::now();
  clock.sleep_for(1h);
  clock.sleep_until(steady + 30min);  // already past: no move
  EXPECT_EQ(clock.steady_now(), steady + 1h);
  EXPECT_EQ(clock.now(), kStart + 1h);
  EXPECT_LT(std::chrono::steady_clock::now() - real_before, 10s);
}

TEST(RealClock, SleepsOnTheMonotonicClock) {
  Clock& clock = real_clock();
  const auto before = std::chrono::steady_clock::now();
  clock.sleep_for(20ms);
  EXPECT_GE(std::chrono::steady_clock::now() - before, 20ms);
}

TEST(RealClock, FollowsTheSystemClocks) {
  Clock& clock = real_clock();
  auto wall_before = std::chrono::system_clock::now();
  auto steady_before = std::chrono::steady_clock::now();
  auto wall = clock.now();
  auto steady = clock.steady_now();
  EXPECT_LE(wall_before, wall);
  EXPECT_LE(steady_before, steady);
  EXPECT_LE(steady, std::chrono::steady_clock::now());
}

TEST(RealClock, IsOneInstancePerProcess) { EXPECT_EQ(&real_clock(), &real_clock()); }

}  // namespace
}  // namespace tidepool
