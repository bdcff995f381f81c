//===- AttentionMerge.cpp - Combining partial attentions ------------------===//
//
// The log-sum-exp merge (docs/design/attention.md): attention over keys
// split in two parts, each computed alone as (out_k, lse_k), is
//
//   lse = log(exp(lse_1) + exp(lse_2))
//   out = exp(lse_1 - lse) * out_1 + exp(lse_2 - lse) * out_2
//
// which is what ring (context-parallel) attention does with each block of
// keys it receives. A part with no visible key (lse = -inf) contributes
// nothing; both empty stay out = 0, lse = -inf.
//
//===----------------------------------------------------------------------===//

#include "autopar/runtime/CpuKernels.h"

#include "KernelError.h"

#include <cmath>
#include <limits>
#include <string>

using autopar::runtime::MemRefDescriptor;
using namespace autopar::runtime::cpu;

extern "C" {

AUTOPAR_KERNEL_EXPORT void _mlir_ciface_autopar_cpu_attention_merge_f32(
    MemRefDescriptor<float, 4> *out, MemRefDescriptor<float, 3> *lse,
    MemRefDescriptor<float, 4> *partOut, MemRefDescriptor<float, 3> *partLse) {
  const char *kernel = "autopar_cpu_attention_merge_f32";
  bool agree = true;
  for (int d = 0; d < 4; ++d)
    agree &= out->sizes[d] == partOut->sizes[d];
  for (int d = 0; d < 3; ++d)
    agree &=
        lse->sizes[d] == partLse->sizes[d] && lse->sizes[d] == out->sizes[d];
  if (!agree)
    shapeMismatch(kernel, "out " + formatSizes(*out) + ", lse " +
                              formatSizes(*lse) + ", part out " +
                              formatSizes(*partOut) + ", part lse " +
                              formatSizes(*partLse));
  const float negInf = -std::numeric_limits<float>::infinity();
  for (int64_t b = 0; b < out->sizes[0]; ++b)
    for (int64_t h = 0; h < out->sizes[1]; ++h)
      for (int64_t i = 0; i < out->sizes[2]; ++i) {
        float &l1 = lse->aligned[lse->offset + b * lse->strides[0] +
                                 h * lse->strides[1] + i * lse->strides[2]];
        float l2 =
            partLse->aligned[partLse->offset + b * partLse->strides[0] +
                             h * partLse->strides[1] + i * partLse->strides[2]];
        if (l2 == negInf)
          continue; // The part saw no key: nothing to add.
        float m = std::max(l1, l2);
        float w1 = l1 == negInf ? 0.0f : std::exp(l1 - m);
        float w2 = std::exp(l2 - m);
        float sum = w1 + w2;
        float *o = out->aligned + out->offset + b * out->strides[0] +
                   h * out->strides[1] + i * out->strides[2];
        const float *p = partOut->aligned + partOut->offset +
                         b * partOut->strides[0] + h * partOut->strides[1] +
                         i * partOut->strides[2];
        for (int64_t e = 0; e < out->sizes[3]; ++e) {
          float previous = w1 == 0 ? 0.0f : o[e * out->strides[3]];
          o[e * out->strides[3]] =
              (w1 * previous + w2 * p[e * partOut->strides[3]]) / sum;
        }
        l1 = m + std::log(sum);
      }
}

} // extern "C"
