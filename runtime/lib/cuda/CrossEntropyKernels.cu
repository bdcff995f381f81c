//===- CrossEntropyKernels.cu - Fused softmax cross-entropy ---------------===//
//
// The kernels behind _mlir_ciface_autopar_cuda_cross_entropy_{fwd,bwd}_
// {f32,bf16} (CudaCrossEntropy.cpp launches them; CrossEntropyParams.h is
// their parameter). Compiled by nvcc into a fatbin that libautopar_cuda.so
// embeds and loads with the driver API: no CUDA runtime calls here.
//
// A block per row of logits. Forward: each thread keeps a running maximum
// and a sum rescaled to it (the online softmax) over its strided classes,
// so the row is read once; the block merges the threads' pairs, and thread
// 0 writes lse and nll. Backward: each thread writes
// d_nll * (exp(x - lse) - [c == label]) for its classes, so the row is read
// once and its gradient written once, in the logits' type. Arithmetic in
// f32 with the accurate expf (the kernels are bound by memory, not by the
// exponentials); reads are coalesced (consecutive threads, consecutive
// classes).
//
//===----------------------------------------------------------------------===//

#include "CrossEntropyParams.h"

#include <cuda_bf16.h>

#include <stdint.h>

using namespace autopar::runtime::cuda::cross_entropy;

namespace {

using bf16 = __nv_bfloat16;

__device__ __forceinline__ float negativeInfinity() {
  return __int_as_float(0xff800000u);
}

__device__ __forceinline__ float toFloat(float v) { return v; }
__device__ __forceinline__ float toFloat(bf16 v) { return __bfloat162float(v); }

template <typename T> __device__ __forceinline__ T fromFloat(float v);
template <> __device__ __forceinline__ float fromFloat<float>(float v) {
  return v;
}
template <> __device__ __forceinline__ bf16 fromFloat<bf16>(float v) {
  return __float2bfloat16_rn(v);
}

/// (m, s) with s = sum exp(x - m) over what it has seen; m = -inf: nothing.
struct Running {
  float m, s;
};

__device__ __forceinline__ Running merge(Running a, Running b) {
  float m = fmaxf(a.m, b.m);
  if (m == negativeInfinity())
    return {m, 0.0f};
  float s = (a.m == negativeInfinity() ? 0.0f : a.s * expf(a.m - m)) +
            (b.m == negativeInfinity() ? 0.0f : b.s * expf(b.m - m));
  return {m, s};
}

template <typename T> __device__ void forward(const Params &p) {
  const int64_t row = blockIdx.x;
  const T *x = static_cast<const T *>(p.logits) + row * p.logitsRowStride;
  Running r{negativeInfinity(), 0.0f};
  for (int64_t c = threadIdx.x; c < p.classes; c += Threads) {
    float v = toFloat(x[c]);
    if (v > r.m) {
      r.s = (r.m == negativeInfinity() ? 0.0f : r.s * expf(r.m - v)) + 1.0f;
      r.m = v;
    } else if (v != negativeInfinity()) {
      r.s += expf(v - r.m);
    }
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    Running other{__shfl_xor_sync(0xffffffffu, r.m, offset),
                  __shfl_xor_sync(0xffffffffu, r.s, offset)};
    r = merge(r, other);
  }
  __shared__ Running warps[Threads / 32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0)
    warps[warp] = r;
  __syncthreads();
  if (threadIdx.x != 0)
    return;
  Running total = warps[0];
  for (int w = 1; w < Threads / 32; ++w)
    total = merge(total, warps[w]);
  float lse = total.m + logf(total.s);
  int64_t label = p.labels[row * p.labelsStride];
  float nll = 0.0f;
  if (label != p.ignoreIndex)
    nll = label >= 0 && label < p.classes ? lse - toFloat(x[label]) : lse;
  p.lse[row * p.lseStride] = lse;
  p.nll[row * p.nllStride] = nll;
}

template <typename T> __device__ void backward(const Params &p) {
  const int64_t row = blockIdx.x;
  const T *x = static_cast<const T *>(p.logits) + row * p.logitsRowStride;
  T *d = static_cast<T *>(p.dLogits) + row * p.dLogitsRowStride;
  const int64_t label = p.labels[row * p.labelsStride];
  if (label == p.ignoreIndex) {
    for (int64_t c = threadIdx.x; c < p.classes; c += Threads)
      d[c] = fromFloat<T>(0.0f);
    return;
  }
  const float lse = p.lse[row * p.lseStride];
  const float g = p.dNll[row * p.dNllStride];
  for (int64_t c = threadIdx.x; c < p.classes; c += Threads) {
    float grad = g * expf(toFloat(x[c]) - lse);
    if (c == label)
      grad -= g;
    d[c] = fromFloat<T>(grad);
  }
}

} // namespace

extern "C" __global__ void __launch_bounds__(Threads)
    autopar_cross_entropy_fwd_f32(Params p) {
  forward<float>(p);
}
extern "C" __global__ void __launch_bounds__(Threads)
    autopar_cross_entropy_fwd_bf16(Params p) {
  forward<bf16>(p);
}
extern "C" __global__ void __launch_bounds__(Threads)
    autopar_cross_entropy_bwd_f32(Params p) {
  backward<float>(p);
}
extern "C" __global__ void __launch_bounds__(Threads)
    autopar_cross_entropy_bwd_bf16(Params p) {
  backward<bf16>(p);
}
