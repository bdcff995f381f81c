//===- CrossEntropyParams.h - What the cross-entropy kernels get -*- C++
//-*-===//
//
// Shared by the host side (CudaCrossEntropy.cpp) and the kernels
// (CrossEntropyKernels.cu, compiled by nvcc into the embedded fatbin): the
// one by-value parameter of both kernels and their block size. Plain types
// only: both sides must agree byte for byte.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CUDA_CROSSENTROPYPARAMS_H
#define AUTOPAR_RUNTIME_CUDA_CROSSENTROPYPARAMS_H

#include <stdint.h>

namespace autopar::runtime::cuda::cross_entropy {

/// Threads of a block; a block walks one row of logits.
constexpr int Threads = 256;

/// The parameter of both kernels (passed by value). Strides in elements;
/// the logits' and their gradient's classes are contiguous.
struct Params {
  const void *logits;
  int64_t logitsRowStride;
  const int64_t *labels;
  int64_t labelsStride;
  /// The forward's outputs; the backward reads lse.
  float *nll;
  int64_t nllStride;
  float *lse;
  int64_t lseStride;
  /// The backward's: the gradient of nll, and the logits' gradient.
  const float *dNll;
  int64_t dNllStride;
  void *dLogits;
  int64_t dLogitsRowStride;
  int64_t rows, classes, ignoreIndex;
};

} // namespace autopar::runtime::cuda::cross_entropy

#endif // AUTOPAR_RUNTIME_CUDA_CROSSENTROPYPARAMS_H
