//===- Watchdog.cpp - End a run that stopped making progress --------------===//

#include "autopar/runtime/Watchdog.h"

#include "autopar/runtime/Fatal.h"

#include <algorithm>
#include <cstdio>

namespace autopar::runtime {

std::string formatSeconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", seconds);
  return text;
}

Watchdog::Watchdog(double timeoutSeconds, double graceSeconds,
                   TimeoutHandler handler)
    : timeout(timeoutSeconds), grace(graceSeconds),
      onTimeout(handler ? std::move(handler) : [](const std::string &message) {
        fatalError(message);
      }) {
  activities.reserve(8);
  thread = std::thread([this] { watch(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  wake.notify_all();
  thread.join();
}

Watchdog::Scope::Scope(Watchdog *dog, std::string what, bool waiting)
    : dog(dog) {
  if (!dog)
    return;
  std::lock_guard<std::mutex> lock(dog->mutex);
  dog->activities.push_back({std::move(what), waiting, Clock::now()});
  if (dog->activities.size() == 1)
    dog->wake.notify_all(); // A new deadline.
}

Watchdog::Scope::~Scope() {
  if (!dog)
    return;
  std::lock_guard<std::mutex> lock(dog->mutex);
  dog->activities.pop_back();
}

void Watchdog::watch() {
  std::unique_lock<std::mutex> lock(mutex);
  while (!stopping) {
    if (activities.empty()) {
      wake.wait(lock);
      continue;
    }
    double allowed = timeout + (activities.back().waiting ? grace : 0.0);
    Clock::time_point deadline =
        activities.front().start + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(allowed));
    if (Clock::now() < deadline) {
      // Activities come and go far more often than deadlines pass: look
      // again at the deadline or a little later, whichever is first.
      wake.wait_until(
          lock,
          std::min(deadline, Clock::now() + std::chrono::milliseconds(100)));
      continue;
    }
    std::string message = "timed out after " + formatSeconds(timeout) +
                          " s in " + activities.front().what;
    if (activities.size() > 1)
      message += (activities.back().waiting ? ", waiting in " : ", in ") +
                 activities.back().what;
    else if (activities.back().waiting)
      message += " (waiting for other ranks)";
    lock.unlock();
    onTimeout(message);
    return;
  }
}

} // namespace autopar::runtime
