//===- CrashReport.cpp - A last word when generated code crashes ----------===//
//
// Only async-signal-safe calls happen in the handler: the message is built
// with plain character copies into static storage and written with write(2).
//
//===----------------------------------------------------------------------===//

#include "autopar/runtime/CrashReport.h"

#include "autopar/runtime/Fatal.h"

#include <csignal>
#include <cstring>
#include <unistd.h>

namespace autopar::runtime {

namespace {

char prefix[512];
volatile std::sig_atomic_t currentStep = 0;

/// An alternate stack, so that a stack overflow can still be reported.
alignas(16) char alternateStack[64 * 1024];

size_t append(char *buffer, size_t used, size_t capacity, const char *text) {
  while (*text && used + 1 < capacity)
    buffer[used++] = *text++;
  return used;
}

void report(int signal) {
  char message[768];
  size_t used = append(message, 0, sizeof(message), prefix);
  const char *name = signal == SIGSEGV  ? "SIGSEGV"
                     : signal == SIGBUS ? "SIGBUS"
                     : signal == SIGFPE ? "SIGFPE"
                     : signal == SIGILL ? "SIGILL"
                                        : "a signal";
  used = append(message, used, sizeof(message), name);
  used = append(message, used, sizeof(message), ")");
  long step = currentStep;
  if (step > 0) {
    char digits[24];
    size_t count = 0;
    for (; step > 0 && count < sizeof(digits); step /= 10)
      digits[count++] = static_cast<char>('0' + step % 10);
    used = append(message, used, sizeof(message), " in step ");
    while (count > 0 && used + 1 < sizeof(message))
      message[used++] = digits[--count];
  } else {
    used = append(message, used, sizeof(message), " while loading");
  }
  used = append(message, used, sizeof(message),
                "; this is a bug in the compiled program, please report it "
                "with the artifact\n");
  ssize_t ignored = write(STDERR_FILENO, message, used);
  (void)ignored;
  // Default action: the usual exit status and core dump.
  std::signal(signal, SIG_DFL);
  raise(signal);
}

} // namespace

void installCrashReport(const std::string &what) {
  std::string text = errorPrefix() + what + " crashed (";
  std::strncpy(prefix, text.c_str(), sizeof(prefix) - 1);

  stack_t stack{};
  stack.ss_sp = alternateStack;
  stack.ss_size = sizeof(alternateStack);
  sigaltstack(&stack, nullptr);

  struct sigaction action {};
  action.sa_handler = report;
  action.sa_flags = SA_ONSTACK | SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  for (int signal : {SIGSEGV, SIGBUS, SIGFPE, SIGILL})
    sigaction(signal, &action, nullptr);
}

void removeCrashReport() {
  for (int signal : {SIGSEGV, SIGBUS, SIGFPE, SIGILL})
    std::signal(signal, SIG_DFL);
}

void setCrashReportStep(int64_t step) {
  currentStep = static_cast<std::sig_atomic_t>(step);
}

} // namespace autopar::runtime
