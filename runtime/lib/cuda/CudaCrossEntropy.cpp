//===- CudaCrossEntropy.cpp - Fused cross-entropy on the rank's GPU -------===//
//
// The entry points _mlir_ciface_autopar_cuda_cross_entropy_{fwd,bwd}_
// {f32,bf16} (CudaKernels.h has the contract): they check the operands
// against the ABI and launch one kernel (a block per row) on the rank's
// compute stream, returning before it is done. The kernels
// (CrossEntropyKernels.cu) are an nvcc fatbin embedded in this library and
// loaded once per device through the ModuleCache, as attention's are.
//
//===----------------------------------------------------------------------===//

#include "autopar/runtime/cuda/CudaKernels.h"

#include "CrossEntropyParams.h"
#include "CudaDevice.h"

#include "autopar/runtime/Error.h"

#include <climits>
#include <exception>
#include <initializer_list>
#include <string>
#include <utility>

namespace autopar::runtime::cuda {
/// The cross-entropy kernels' fatbin (generated from CrossEntropyKernels.cu).
extern const unsigned char CrossEntropyKernelImage[];
extern const size_t CrossEntropyKernelImageSize;
} // namespace autopar::runtime::cuda

using namespace autopar::runtime;
using namespace autopar::runtime::cuda;
namespace xent = autopar::runtime::cuda::cross_entropy;

namespace {

using Desc2 = MemRefDescriptor<char, 2>;
using Desc1 = MemRefDescriptor<char, 1>;

template <int Rank>
std::string sizesOf(const MemRefDescriptor<char, Rank> *desc) {
  std::string text = "[";
  for (int i = 0; i < Rank; ++i)
    text += (i ? ", " : "") + std::to_string(desc->sizes[i]);
  return text + "]";
}

/// Throws unless the operands agree on [N, C] and [N] and the classes are
/// contiguous.
void checkOperands(
    const Desc2 *logits, const Desc1 *labels,
    std::initializer_list<std::pair<const char *, const Desc1 *>> rows,
    const Desc2 *dLogits) {
  std::string operands =
      "logits " + sizesOf(logits) + ", labels " + sizesOf(labels);
  for (auto [name, desc] : rows)
    operands += std::string(", ") + name + " " + sizesOf(desc);
  if (dLogits)
    operands += ", d_logits " + sizesOf(dLogits);
  const int64_t n = logits->sizes[0], c = logits->sizes[1];
  bool agree = labels->sizes[0] == n;
  for (auto [name, desc] : rows)
    agree = agree && desc->sizes[0] == n;
  if (dLogits)
    agree = agree && dLogits->sizes[0] == n && dLogits->sizes[1] == c;
  if (!agree)
    throw Error("operand sizes disagree (" + operands +
                "); the generated program is inconsistent, which is a "
                "compiler bug");
  for (const Desc2 *desc : {logits, dLogits})
    if (desc && desc->sizes[1] > 1 && desc->strides[1] != 1)
      throw Error("the classes must be contiguous (innermost stride 1, not " +
                  std::to_string(desc->strides[1]) + "; operands: " + operands +
                  ")");
  if (n > INT32_MAX)
    throw Error("more rows than a grid holds (operands: " + operands + ")");
}

template <typename T> T *elements(const MemRefDescriptor<char, 1> *desc) {
  return reinterpret_cast<T *>(desc->aligned) + desc->offset;
}

/// The parameters both kernels read: the logits, the labels, the sizes.
xent::Params rowParams(size_t elementSize, const Desc2 *logits,
                       const Desc1 *labels, int64_t ignoreIndex) {
  xent::Params p{};
  p.logits = logits->aligned + logits->offset * elementSize;
  p.logitsRowStride = logits->strides[0];
  p.labels = elements<int64_t>(labels);
  p.labelsStride = labels->strides[0];
  p.rows = logits->sizes[0];
  p.classes = logits->sizes[1];
  p.ignoreIndex = ignoreIndex;
  return p;
}

void launch(const char *entry, const char *kernel, xent::Params &p) {
  CudaDevice &device = deviceFor(entry);
  CUmodule module =
      device.modules().load(CrossEntropyKernelImage, /*jit=*/false);
  if (!module)
    device.modules().checkLoaded("libautopar_cuda.so's cross-entropy kernels");
  if (p.rows == 0)
    return;
  CUfunction function = device.modules().function(module, kernel);
  void *arguments[] = {&p};
  AUTOPAR_CU(cuLaunchKernel, function, static_cast<unsigned>(p.rows), 1, 1,
             static_cast<unsigned>(xent::Threads), 1, 1, 0, device.stream(),
             arguments, nullptr);
}

void forwardEntry(const char *entry, const char *kernel, size_t elementSize,
                  Desc2 *logits, Desc1 *labels, Desc1 *nll, Desc1 *lse,
                  int64_t ignoreIndex) {
  try {
    checkOperands(logits, labels, {{"nll", nll}, {"lse", lse}}, nullptr);
    xent::Params p = rowParams(elementSize, logits, labels, ignoreIndex);
    p.nll = elements<float>(nll);
    p.nllStride = nll->strides[0];
    p.lse = elements<float>(lse);
    p.lseStride = lse->strides[0];
    launch(entry, kernel, p);
  } catch (const std::exception &error) {
    entryFatal(entry, error.what());
  }
}

void backwardEntry(const char *entry, const char *kernel, size_t elementSize,
                   Desc2 *logits, Desc1 *labels, Desc1 *lse, Desc1 *dNll,
                   Desc2 *dLogits, int64_t ignoreIndex) {
  try {
    checkOperands(logits, labels, {{"lse", lse}, {"d_nll", dNll}}, dLogits);
    xent::Params p = rowParams(elementSize, logits, labels, ignoreIndex);
    p.lse = elements<float>(lse);
    p.lseStride = lse->strides[0];
    p.dNll = elements<float>(dNll);
    p.dNllStride = dNll->strides[0];
    p.dLogits = dLogits->aligned + dLogits->offset * elementSize;
    p.dLogitsRowStride = dLogits->strides[0];
    launch(entry, kernel, p);
  } catch (const std::exception &error) {
    entryFatal(entry, error.what());
  }
}

} // namespace

#define AUTOPAR_DEFINE_CUDA_CROSS_ENTROPY(TYPE, SIZE)                          \
  void _mlir_ciface_autopar_cuda_cross_entropy_fwd_##TYPE(                     \
      Desc2 *logits, Desc1 *labels, Desc1 *nll, Desc1 *lse,                    \
      int64_t ignoreIndex) {                                                   \
    forwardEntry("autopar_cuda_cross_entropy_fwd_" #TYPE,                      \
                 "autopar_cross_entropy_fwd_" #TYPE, SIZE, logits, labels,     \
                 nll, lse, ignoreIndex);                                       \
  }                                                                            \
  void _mlir_ciface_autopar_cuda_cross_entropy_bwd_##TYPE(                     \
      Desc2 *logits, Desc1 *labels, Desc1 *lse, Desc1 *dNll, Desc2 *dLogits,   \
      int64_t ignoreIndex) {                                                   \
    backwardEntry("autopar_cuda_cross_entropy_bwd_" #TYPE,                     \
                  "autopar_cross_entropy_bwd_" #TYPE, SIZE, logits, labels,    \
                  lse, dNll, dLogits, ignoreIndex);                            \
  }

extern "C" {
AUTOPAR_DEFINE_CUDA_CROSS_ENTROPY(f32, 4)
AUTOPAR_DEFINE_CUDA_CROSS_ENTROPY(bf16, 2)
} // extern "C"
