//===- TrainProgress.cpp - What autopar-run --train prints per step -------===//

#include "autopar/runtime/TrainProgress.h"

#include <cmath>
#include <unistd.h>

namespace autopar::runtime {

TrainProgress::TrainProgress(std::FILE *out, bool interactive, int64_t lastStep)
    : out(out), interactive(interactive), lastStep(lastStep) {}

bool TrainProgress::isTerminal(std::FILE *out) {
  return out && ::isatty(::fileno(out)) == 1;
}

std::string formatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0)
    return "?";
  long long total = static_cast<long long>(std::llround(seconds));
  char text[48];
  if (total >= 3600)
    std::snprintf(text, sizeof(text), "%lldh%02lldm%02llds", total / 3600,
                  total / 60 % 60, total % 60);
  else if (total >= 60)
    std::snprintf(text, sizeof(text), "%lldm%02llds", total / 60, total % 60);
  else
    std::snprintf(text, sizeof(text), "%llds", total);
  return text;
}

void TrainProgress::step(int64_t step, float loss, float lr, float gradNorm,
                         double seconds, double samplesPerSecond) {
  totalSeconds += seconds;
  ++stepsDone;
  if (!out)
    return;
  if (!interactive) {
    std::fprintf(out,
                 "step %lld/%lld  loss %.6f  lr %.3e  grad-norm %.4f  %.2f ms  "
                 "%.1f samples/s\n",
                 static_cast<long long>(step), static_cast<long long>(lastStep),
                 loss, lr, gradNorm, seconds * 1e3, samplesPerSecond);
    std::fflush(out);
    return;
  }
  // The mean step time of this run so far predicts the rest.
  double eta = totalSeconds / static_cast<double>(stepsDone) *
               static_cast<double>(lastStep - step);
  // \r returns to the line's start, \033[K clears what a longer line left.
  std::fprintf(out,
               "\rstep %lld/%lld  loss %.6f  lr %.3e  %.2f ms/step  ETA %s"
               "\033[K",
               static_cast<long long>(step), static_cast<long long>(lastStep),
               loss, lr, totalSeconds / stepsDone * 1e3,
               formatDuration(eta).c_str());
  (void)gradNorm; // On a terminal, the line stays short.
  lineOpen = true;
  std::fflush(out);
}

void TrainProgress::message(const std::string &line) {
  if (!out)
    return;
  if (lineOpen)
    std::fputs("\r\033[K", out);
  std::fprintf(out, "%s\n", line.c_str());
  lineOpen = false;
  std::fflush(out);
}

void TrainProgress::finish() {
  if (lineOpen)
    std::fputc('\n', out);
  lineOpen = false;
  std::fflush(out);
}

} // namespace autopar::runtime
