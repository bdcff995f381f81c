//===- Kernels.cpp - The kernels generated CPU code calls -----------------===//
//
// The extern "C" entry points of CpuKernels.h: unpack MLIR memref
// descriptors, check that the shapes agree, and hand views to the strided
// GEMM and convolution routines.
//
//===----------------------------------------------------------------------===//

#include "autopar/runtime/CpuKernels.h"

#include "Conv2d.h"
#include "KernelError.h"
#include "StridedGemm.h"
#include "ThreadPool.h"

#include <string>

using autopar::runtime::MemRefDescriptor;
using namespace autopar::runtime::cpu;

namespace {

/// The matrix formed by the last two dims of \p m, at batch \p batch for
/// rank 3.
template <int Rank>
MatrixView matrix(const MemRefDescriptor<float, Rank> &m, int64_t batch = 0) {
  static_assert(Rank == 2 || Rank == 3, "matrices are rank 2 or batched");
  constexpr int R = Rank - 2;
  float *base = m.aligned + m.offset + (Rank == 3 ? batch * m.strides[0] : 0);
  return {base, m.sizes[R], m.sizes[R + 1], m.strides[R], m.strides[R + 1]};
}

void checkMatmul(const char *kernel, const MatrixView &a, const MatrixView &b,
                 const MatrixView &c, const std::string &detail) {
  if (a.rows != c.rows || b.cols != c.cols || a.cols != b.rows)
    shapeMismatch(kernel, detail);
}

/// The rank-4 view of \p m with dimension \p drop fixed at \p index.
Tensor4View slice(const MemRefDescriptor<float, 5> &m, int drop,
                  int64_t index) {
  Tensor4View v;
  v.data = m.aligned + m.offset + index * m.strides[drop];
  for (int from = 0, to = 0; from < 5; ++from) {
    if (from == drop)
      continue;
    v.sizes[to] = m.sizes[from];
    v.strides[to] = m.strides[from];
    ++to;
  }
  return v;
}

Tensor4View view(const MemRefDescriptor<float, 4> &m) {
  Tensor4View v;
  v.data = m.aligned + m.offset;
  for (int i = 0; i < 4; ++i) {
    v.sizes[i] = m.sizes[i];
    v.strides[i] = m.strides[i];
  }
  return v;
}

/// C = A * B + beta * C for the matrices of rank-2 memrefs.
void matmul(MemRefDescriptor<float, 2> *a, MemRefDescriptor<float, 2> *b,
            MemRefDescriptor<float, 2> *c, float beta, const char *kernel) {
  MatrixView va = matrix(*a), vb = matrix(*b), vc = matrix(*c);
  checkMatmul(kernel, va, vb, vc,
              "A " + formatSizes(*a) + " x B " + formatSizes(*b) + " -> C " +
                  formatSizes(*c));
  gemm(va, vb, vc, beta, kernel);
}

/// C[b] = A[b] * B[b] + beta * C[b] for each batch b.
void batchMatmul(MemRefDescriptor<float, 3> *a, MemRefDescriptor<float, 3> *b,
                 MemRefDescriptor<float, 3> *c, float beta,
                 const char *kernel) {
  std::string detail = "A " + formatSizes(*a) + " x B " + formatSizes(*b) +
                       " -> C " + formatSizes(*c);
  if (a->sizes[0] != c->sizes[0] || b->sizes[0] != c->sizes[0])
    shapeMismatch(kernel, detail);
  checkMatmul(kernel, matrix(*a), matrix(*b), matrix(*c), detail);
  for (int64_t batch = 0; batch < c->sizes[0]; ++batch)
    gemm(matrix(*a, batch), matrix(*b, batch), matrix(*c, batch), beta, kernel);
}

void groupedConv(MemRefDescriptor<float, 5> *input,
                 MemRefDescriptor<float, 5> *filter,
                 MemRefDescriptor<float, 5> *output, int64_t sh, int64_t sw,
                 int64_t dh, int64_t dw, bool accumulate, const char *kernel) {
  int64_t groups = input->sizes[1];
  if (filter->sizes[0] != groups || output->sizes[1] != groups)
    shapeMismatch(kernel, "groups of input " + formatSizes(*input) +
                              ", filter " + formatSizes(*filter) + ", output " +
                              formatSizes(*output));
  // Groups write disjoint outputs. Those of depthwise-like convolutions
  // (the direct and depthwise kernels: no BLAS) are split among the kernel
  // threads, each with its own scratch buffers; wider groups run one after
  // the other, each GEMM on OpenBLAS's threads, which are not to be entered
  // from several threads at once.
  auto convolve = [&](int64_t begin, int64_t end) {
    for (int64_t g = begin; g < end; ++g)
      (accumulate ? conv2dAccumulate : conv2dOverwrite)(
          slice(*input, 1, g), slice(*filter, 0, g), slice(*output, 1, g), sh,
          sw, dh, dw, kernel);
  };
  if (filter->sizes[1] * filter->sizes[2] > DirectMaxChannelProduct) {
    convolve(0, groups);
    return;
  }
  int64_t work = output->sizes[0] * output->sizes[2] * output->sizes[3] *
                 output->sizes[4] * filter->sizes[2] * filter->sizes[3] *
                 filter->sizes[4];
  parallelFor(groups, work, convolve);
}

} // namespace

extern "C" {

AUTOPAR_KERNEL_EXPORT void
_mlir_ciface_autopar_cpu_matmul_f32(MemRefDescriptor<float, 2> *a,
                                    MemRefDescriptor<float, 2> *b,
                                    MemRefDescriptor<float, 2> *c) {
  matmul(a, b, c, 1.0f, "autopar_cpu_matmul_f32");
}

AUTOPAR_KERNEL_EXPORT void
_mlir_ciface_autopar_cpu_matmul_overwrite_f32(MemRefDescriptor<float, 2> *a,
                                              MemRefDescriptor<float, 2> *b,
                                              MemRefDescriptor<float, 2> *c) {
  matmul(a, b, c, 0.0f, "autopar_cpu_matmul_overwrite_f32");
}

AUTOPAR_KERNEL_EXPORT void
_mlir_ciface_autopar_cpu_batch_matmul_f32(MemRefDescriptor<float, 3> *a,
                                          MemRefDescriptor<float, 3> *b,
                                          MemRefDescriptor<float, 3> *c) {
  batchMatmul(a, b, c, 1.0f, "autopar_cpu_batch_matmul_f32");
}

AUTOPAR_KERNEL_EXPORT void _mlir_ciface_autopar_cpu_batch_matmul_overwrite_f32(
    MemRefDescriptor<float, 3> *a, MemRefDescriptor<float, 3> *b,
    MemRefDescriptor<float, 3> *c) {
  batchMatmul(a, b, c, 0.0f, "autopar_cpu_batch_matmul_overwrite_f32");
}

AUTOPAR_KERNEL_EXPORT void _mlir_ciface_autopar_cpu_conv2d_nchw_f32(
    MemRefDescriptor<float, 4> *input, MemRefDescriptor<float, 4> *filter,
    MemRefDescriptor<float, 4> *output, int64_t sh, int64_t sw, int64_t dh,
    int64_t dw) {
  conv2dAccumulate(view(*input), view(*filter), view(*output), sh, sw, dh, dw,
                   "autopar_cpu_conv2d_nchw_f32");
}

AUTOPAR_KERNEL_EXPORT void _mlir_ciface_autopar_cpu_conv2d_nchw_overwrite_f32(
    MemRefDescriptor<float, 4> *input, MemRefDescriptor<float, 4> *filter,
    MemRefDescriptor<float, 4> *output, int64_t sh, int64_t sw, int64_t dh,
    int64_t dw) {
  conv2dOverwrite(view(*input), view(*filter), view(*output), sh, sw, dh, dw,
                  "autopar_cpu_conv2d_nchw_overwrite_f32");
}

AUTOPAR_KERNEL_EXPORT void _mlir_ciface_autopar_cpu_conv2d_ngchw_f32(
    MemRefDescriptor<float, 5> *input, MemRefDescriptor<float, 5> *filter,
    MemRefDescriptor<float, 5> *output, int64_t sh, int64_t sw, int64_t dh,
    int64_t dw) {
  groupedConv(input, filter, output, sh, sw, dh, dw, /*accumulate=*/true,
              "autopar_cpu_conv2d_ngchw_f32");
}

AUTOPAR_KERNEL_EXPORT void _mlir_ciface_autopar_cpu_conv2d_ngchw_overwrite_f32(
    MemRefDescriptor<float, 5> *input, MemRefDescriptor<float, 5> *filter,
    MemRefDescriptor<float, 5> *output, int64_t sh, int64_t sw, int64_t dh,
    int64_t dw) {
  groupedConv(input, filter, output, sh, sw, dh, dw, /*accumulate=*/false,
              "autopar_cpu_conv2d_ngchw_overwrite_f32");
}

/// Runs \p loop(context, first, last) over ranges covering [0, iterations)
/// on the kernel threads: the outlined parallel loops of generated code
/// (autopar-parallel-loop-calls), each iteration about \p work elements.
AUTOPAR_KERNEL_EXPORT void
autopar_cpu_parallel_for(void (*loop)(void *, int64_t, int64_t), void *context,
                         int64_t iterations, int64_t work) {
  parallelFor(iterations, work,
              [&](int64_t first, int64_t last) { loop(context, first, last); });
}

} // extern "C"
