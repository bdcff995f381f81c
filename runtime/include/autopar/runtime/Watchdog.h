//===- Watchdog.h - End a run that stopped making progress ------*- C++ -*-===//
//
// In a multi-rank run, a rank that hangs (or dies without the launcher
// noticing) leaves the others blocked in a collective forever. Every rank
// therefore runs a watchdog thread: the main thread marks what it is doing
// (step 3, the all_gather on axis tp inside it, the scatter of input x) with
// Scopes, and if the outermost one has not finished within the timeout, the
// watchdog reports
//
//   autopar-run: error: rank R: timed out after T s in step 3, waiting in
//   all_gather on axis tp
//
// through fatalError, which under MPI calls MPI_Abort and so ends every rank.
//
// A rank that is blocked waiting for peers gets `grace` seconds more than one
// that is busy itself, so that when one rank hangs in its own code, it is the
// one that reports, and the message names the culprit rather than a victim.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_WATCHDOG_H
#define AUTOPAR_RUNTIME_WATCHDOG_H

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace autopar::runtime {

class Watchdog {
public:
  /// Called on the watchdog thread with "timed out after T s in ..."; must
  /// not return (fatalError by default).
  using TimeoutHandler = std::function<void(const std::string &)>;

  /// Starts the watchdog thread. \p timeoutSeconds > 0.
  Watchdog(double timeoutSeconds, double graceSeconds = 1.0,
           TimeoutHandler onTimeout = {});
  ~Watchdog();
  Watchdog(const Watchdog &) = delete;
  Watchdog &operator=(const Watchdog &) = delete;

  double getTimeout() const { return timeout; }

  /// Times an activity while it lives. Scopes nest (a collective inside a
  /// step); the clock runs from the start of the outermost. \p waiting marks
  /// an activity that waits for other ranks (a collective). A null watchdog
  /// makes a Scope that does nothing.
  class Scope {
  public:
    Scope(Watchdog *dog, std::string what, bool waiting = false);
    ~Scope();
    Scope(const Scope &) = delete;
    Scope &operator=(const Scope &) = delete;

  private:
    Watchdog *dog;
  };

private:
  using Clock = std::chrono::steady_clock;
  struct Activity {
    std::string what;
    bool waiting;
    Clock::time_point start;
  };

  void watch();

  double timeout, grace;
  TimeoutHandler onTimeout;
  std::mutex mutex;
  std::condition_variable wake;
  std::vector<Activity> activities;
  bool stopping = false;
  std::thread thread;
};

/// "2", "0.5", "300": how messages show a number of seconds.
std::string formatSeconds(double seconds);

} // namespace autopar::runtime

#endif // AUTOPAR_RUNTIME_WATCHDOG_H
