//===- Memory.cpp - Bytes of training state per rank ----------------------===//
//
// Per parameter, with AdamW (two states; SGD with momentum has one, plain SGD
// none) (Rajbhandari et al., "ZeRO: Memory Optimizations
// Toward Training Trillion Parameter Models", SC 2020, sec. 3.1: 2 + 2 + K
// bytes with K = 12 under mixed precision):
//   mixed precision (bf16, fp16): 2 (parameter) + 2 (gradient)
//                                 + 12 (fp32 master copy, momentum, variance)
//   fp32 and tf32 (stored fp32):  4 + 4 + 8 (momentum, variance; the
//                                 parameters are their own master copy)
// ZeRO stage s divides over dp: s >= 1 the optimizer states, s >= 2 also the
// gradients, s >= 3 also the parameters (same paper, sec. 5).
//
//===----------------------------------------------------------------------===//

#include "autopar/Planner/CostModel.h"

#include <algorithm>

using namespace autopar;

namespace {

bool isMixed(Precision p) {
  return p == Precision::BF16 || p == Precision::FP16;
}

} // namespace

double autopar::activationElementBytes(Precision p) {
  // tf32 is an fp32 storage format; only the tensor cores truncate it.
  return isMixed(p) ? 2 : 4;
}

double autopar::inferenceParameterBytes(double parameters, Precision p) {
  return parameters * activationElementBytes(p);
}

TrainingStateBytes autopar::trainingStateBytes(double parameters, Precision p,
                                               int64_t dp, int zeroStage,
                                               int statesPerParameter) {
  TrainingStateBytes state;
  double weight = activationElementBytes(p);
  state.parameters = parameters * weight;
  state.gradients = parameters * weight;
  // fp32 states, and under mixed precision the fp32 master copy.
  state.optimizerStates =
      parameters * 4 * (statesPerParameter + (isMixed(p) ? 1 : 0));

  double shards = double(std::max<int64_t>(1, dp));
  if (zeroStage >= 1)
    state.optimizerStates /= shards;
  if (zeroStage >= 2)
    state.gradients /= shards;
  if (zeroStage >= 3)
    state.parameters /= shards;
  return state;
}
