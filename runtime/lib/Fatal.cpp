//===- Fatal.cpp - Errors that end the whole run --------------------------===//

#include "autopar/runtime/Fatal.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace autopar::runtime {

namespace {

std::atomic<int64_t> errorRank{-1};

void exitWithFailure() { std::_Exit(1); }

std::atomic<void (*)()> fatalExit{exitWithFailure};

std::atomic<void (*)()> fatalCleanup{nullptr};

std::atomic<bool> reporting{false};

} // namespace

std::string errorPrefix() {
  int64_t rank = errorRank.load();
  return rank < 0 ? "autopar-run: error: "
                  : "autopar-run: error: rank " + std::to_string(rank) + ": ";
}

void setErrorRank(int64_t rank) { errorRank = rank; }

void setFatalExit(void (*exitFn)()) { fatalExit = exitFn; }

void setFatalCleanup(void (*cleanupFn)()) { fatalCleanup = cleanupFn; }

void fatalError(const std::string &message) {
  // A second fatal error (say the watchdog firing while the main thread
  // reports) waits for the first to end the process.
  if (reporting.exchange(true)) {
    for (;;)
      std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  std::fflush(stdout);
  std::fprintf(stderr, "%s%s\n", errorPrefix().c_str(), message.c_str());
  std::fflush(stderr);
  if (void (*cleanup)() = fatalCleanup.load())
    cleanup();
  fatalExit.load()();
  std::_Exit(1); // In case the handler returned after all.
}

} // namespace autopar::runtime
