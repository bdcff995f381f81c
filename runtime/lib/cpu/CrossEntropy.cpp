//===- CrossEntropy.cpp - Fused softmax cross-entropy on CPU --------------===//
//
// docs/design/cross-entropy.md. Each row of logits is read twice while it
// is in cache (its maximum, then the sum of exponentials, each a loop the
// compiler vectorizes), the sum accumulated in double; the gradient reads
// the row once and writes its gradient, the probabilities recomputed from
// lse. Nothing but the outputs is written.
//
//===----------------------------------------------------------------------===//

#include "autopar/runtime/CpuKernels.h"

#include "KernelError.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <string>
#include <utility>

using autopar::runtime::MemRefDescriptor;
using namespace autopar::runtime::cpu;

namespace {

/// Ends the run unless every [N] operand has the logits' N and d_logits (if
/// any) their [N, C].
using Row = std::pair<const char *, const MemRefDescriptor<float, 1> *>;

void checkSizes(const char *kernel, const MemRefDescriptor<float, 2> &logits,
                const MemRefDescriptor<int64_t, 1> &labels,
                std::initializer_list<Row> rows,
                const MemRefDescriptor<float, 2> *dLogits) {
  bool agree = labels.sizes[0] == logits.sizes[0];
  for (const Row &r : rows)
    agree &= r.second->sizes[0] == logits.sizes[0];
  if (dLogits)
    agree &= dLogits->sizes[0] == logits.sizes[0] &&
             dLogits->sizes[1] == logits.sizes[1];
  if (agree)
    return;
  std::string detail =
      "logits " + formatSizes(logits) + ", labels " + formatSizes(labels);
  for (const Row &r : rows)
    detail += std::string(", ") + r.first + " " + formatSizes(*r.second);
  if (dLogits)
    detail += ", d_logits " + formatSizes(*dLogits);
  shapeMismatch(kernel, detail);
}

} // namespace

extern "C" {

AUTOPAR_KERNEL_EXPORT void _mlir_ciface_autopar_cpu_cross_entropy_fwd_f32(
    MemRefDescriptor<float, 2> *logits, MemRefDescriptor<int64_t, 1> *labels,
    MemRefDescriptor<float, 1> *nll, MemRefDescriptor<float, 1> *lse,
    int64_t ignoreIndex) {
  checkSizes("autopar_cpu_cross_entropy_fwd_f32", *logits, *labels,
             {{"nll", nll}, {"lse", lse}}, nullptr);
  const int64_t rows = logits->sizes[0], classes = logits->sizes[1];
  const int64_t cs = logits->strides[1];
  for (int64_t n = 0; n < rows; ++n) {
    const float *x = logits->aligned + logits->offset + n * logits->strides[0];
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t c = 0; c < classes; ++c)
      m = std::max(m, x[c * cs]);
    double sum = 0.0;
    for (int64_t c = 0; c < classes; ++c)
      sum += std::exp(x[c * cs] - m);
    float l = static_cast<float>(std::log(sum)) + m;
    int64_t label = labels->aligned[labels->offset + n * labels->strides[0]];
    float loss = 0.0f;
    if (label != ignoreIndex)
      loss = label >= 0 && label < classes ? l - x[label * cs] : l;
    lse->aligned[lse->offset + n * lse->strides[0]] = l;
    nll->aligned[nll->offset + n * nll->strides[0]] = loss;
  }
}

AUTOPAR_KERNEL_EXPORT void _mlir_ciface_autopar_cpu_cross_entropy_bwd_f32(
    MemRefDescriptor<float, 2> *logits, MemRefDescriptor<int64_t, 1> *labels,
    MemRefDescriptor<float, 1> *lse, MemRefDescriptor<float, 1> *dNll,
    MemRefDescriptor<float, 2> *dLogits, int64_t ignoreIndex) {
  checkSizes("autopar_cpu_cross_entropy_bwd_f32", *logits, *labels,
             {{"lse", lse}, {"d_nll", dNll}}, dLogits);
  const int64_t rows = logits->sizes[0], classes = logits->sizes[1];
  const int64_t cs = logits->strides[1], ds = dLogits->strides[1];
  for (int64_t n = 0; n < rows; ++n) {
    const float *x = logits->aligned + logits->offset + n * logits->strides[0];
    float *d = dLogits->aligned + dLogits->offset + n * dLogits->strides[0];
    int64_t label = labels->aligned[labels->offset + n * labels->strides[0]];
    if (label == ignoreIndex) {
      for (int64_t c = 0; c < classes; ++c)
        d[c * ds] = 0.0f;
      continue;
    }
    const float l = lse->aligned[lse->offset + n * lse->strides[0]];
    const float g = dNll->aligned[dNll->offset + n * dNll->strides[0]];
    for (int64_t c = 0; c < classes; ++c)
      d[c * ds] = g * std::exp(x[c * cs] - l);
    if (label >= 0 && label < classes)
      d[label * ds] -= g;
  }
}

} // extern "C"
