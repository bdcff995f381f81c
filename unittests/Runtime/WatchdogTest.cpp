//===- WatchdogTest.cpp - Ending a run that stopped making progress -------===//

#include "autopar/runtime/Watchdog.h"

#include "gtest/gtest.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

using namespace autopar::runtime;
using namespace std::chrono_literals;

namespace {

/// Records the message instead of ending the process.
struct Recorder {
  std::mutex mutex;
  std::string message;
  std::atomic<bool> fired{false};
  Watchdog::TimeoutHandler handler() {
    return [this](const std::string &text) {
      std::lock_guard<std::mutex> lock(mutex);
      message = text;
      fired = true;
    };
  }
  bool waitFor(std::chrono::milliseconds limit) {
    auto end = std::chrono::steady_clock::now() + limit;
    while (!fired && std::chrono::steady_clock::now() < end)
      std::this_thread::sleep_for(5ms);
    return fired;
  }
};

TEST(WatchdogTest, NamesTheStuckActivity) {
  Recorder recorder;
  Watchdog dog(0.2, 10, recorder.handler());
  Watchdog::Scope step(&dog, "step 3");
  ASSERT_TRUE(recorder.waitFor(3s));
  EXPECT_EQ(recorder.message, "timed out after 0.2 s in step 3");
}

TEST(WatchdogTest, AWaitingRankGetsTheGraceAndNamesWhatItWaitsIn) {
  Recorder recorder;
  Watchdog dog(0.2, 0.5, recorder.handler());
  auto start = std::chrono::steady_clock::now();
  Watchdog::Scope step(&dog, "step 1");
  Watchdog::Scope collective(&dog, "all_gather on axis tp", true);
  ASSERT_TRUE(recorder.waitFor(5s));
  double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  EXPECT_GE(waited, 0.7);
  EXPECT_EQ(recorder.message, "timed out after 0.2 s in step 1, waiting in "
                              "all_gather on axis tp");
}

TEST(WatchdogTest, ALoneCollectiveSaysItWaitsForOthers) {
  Recorder recorder;
  Watchdog dog(0.1, 0, recorder.handler());
  Watchdog::Scope scatter(&dog, "scatter of input 'x'", true);
  ASSERT_TRUE(recorder.waitFor(3s));
  EXPECT_EQ(recorder.message, "timed out after 0.1 s in scatter of input "
                              "'x' (waiting for other ranks)");
}

TEST(WatchdogTest, FinishedActivitiesDoNotFire) {
  Recorder recorder;
  {
    Watchdog dog(0.3, 0, recorder.handler());
    // Many short steps add up to more than the timeout; none exceeds it.
    for (int step = 0; step < 10; ++step) {
      Watchdog::Scope scope(&dog, "step");
      std::this_thread::sleep_for(50ms);
    }
    std::this_thread::sleep_for(400ms); // Idle is not a timeout either.
  }
  EXPECT_FALSE(recorder.fired);
  Watchdog::Scope none(nullptr, "no watchdog"); // A null watchdog is fine.
}

TEST(WatchdogTest, FormatsSeconds) {
  EXPECT_EQ(formatSeconds(300), "300");
  EXPECT_EQ(formatSeconds(0.5), "0.5");
}

} // namespace
