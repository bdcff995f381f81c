//===- TrainProgress.h - autopar-run --train per step ----------*- C++ -*-===//
//
// On a terminal, one line rewritten in place (step/N, loss, time per step,
// ETA), so that a long run does not scroll its banner away; otherwise (a
// log file, a pipe, a test) one line per step in a fixed format that
// scripts parse:
//
//   step 3/8  loss 1.234567  lr 1.000e-02  grad-norm 0.1234  1.23 ms
//       4878.0 samples/s          (one line, cut here)
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_TRAINPROGRESS_H
#define AUTOPAR_RUNTIME_TRAINPROGRESS_H

#include <cstdint>
#include <cstdio>
#include <string>

namespace autopar::runtime {

/// Prints training progress to a stream.
class TrainProgress {
public:
  /// \p interactive: rewrite one line (a terminal) rather than print one
  /// line per step. A null \p out prints nothing (the ranks but the first
  /// of a data-parallel run). \p lastStep: the step (1-based) the run ends at.
  TrainProgress(std::FILE *out, bool interactive, int64_t lastStep);

  /// Whether \p out is a terminal.
  static bool isTerminal(std::FILE *out);

  /// Reports step \p step (1-based), which took \p seconds.
  void step(int64_t step, float loss, float lr, float gradNorm, double seconds,
            double samplesPerSecond);
  /// Prints a line of its own (e.g. "wrote checkpoint ..."), without
  /// breaking the progress line.
  void message(const std::string &line);
  /// Ends the progress line, if one is shown.
  void finish();

private:
  std::FILE *out;
  bool interactive;
  int64_t lastStep;
  double totalSeconds = 0;
  int64_t stepsDone = 0;
  bool lineOpen = false;
};

/// "1h02m03s", "4m05s", "6s".
std::string formatDuration(double seconds);

} // namespace autopar::runtime

#endif // AUTOPAR_RUNTIME_TRAINPROGRESS_H
