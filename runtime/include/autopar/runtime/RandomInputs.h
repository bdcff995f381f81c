//===- RandomInputs.h - Reproducible random input tensors -------*- C++ -*-===//
//
// Without --inputs, autopar-run draws inputs at random so that an artifact can
// be timed without preparing data. The values depend only on the seed, the
// input's name and its element index (not on the platform's <random>), so a run
// is reproducible anywhere; autopar-run also writes them out.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_RANDOMINPUTS_H
#define AUTOPAR_RUNTIME_RANDOMINPUTS_H

#include "autopar/runtime/DType.h"

#include <cstdint>
#include <string>

namespace autopar::runtime {

/// The ranges random inputs are drawn from. Integers default to [0, 10) so
/// that index inputs (token ids, class labels) stay in range for any plausible
/// vocabulary; per-input ranges are a planned extension.
struct RandomInputPolicy {
  /// Floating-point values: uniform in [floatLow, floatHigh).
  float floatLow = -1.0f;
  float floatHigh = 1.0f;
  /// Integer values: uniform in [intLow, intHigh). Bools are 0 or 1.
  int64_t intLow = 0;
  int64_t intHigh = 10;
};

/// Fills \p numElements elements of \p dtype at \p data with values determined
/// by \p seed and \p name.
void fillRandom(DType dtype, int64_t numElements, void *data, uint64_t seed,
                const std::string &name, const RandomInputPolicy &policy = {});

} // namespace autopar::runtime

#endif // AUTOPAR_RUNTIME_RANDOMINPUTS_H
