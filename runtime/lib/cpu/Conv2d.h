//===- Conv2d.h - 2-D convolution on strided views --------------*- C++ -*-===//

#ifndef AUTOPAR_RUNTIME_CPU_CONV2D_H
#define AUTOPAR_RUNTIME_CPU_CONV2D_H

#include <cstdint>

namespace autopar::runtime::cpu {

/// Direct convolution (or the depthwise kernels), not im2col + GEMM, when
/// C * F is at most this: no BLAS call.
constexpr int64_t DirectMaxChannelProduct = 4;

/// A rank-4 float view: element (i0..i3) is data[sum_k ik * strides[k]].
struct Tensor4View {
  float *data;
  int64_t sizes[4];
  int64_t strides[4];
};

/// O[n,f,y,x] += sum_{c,ky,kx} I[n,c,y*sh+ky*dh,x*sw+kx*dw] * F[f,c,ky,kx] for
/// an already padded input I [N,C,H,W], filter F [F,C,KH,KW] and output
/// O [N,F,OH,OW]. Checks that the sizes agree and that every window lies
/// inside I; on a mismatch, reports it through kernelFatal naming \p kernel.
void conv2dAccumulate(const Tensor4View &input, const Tensor4View &filter,
                      const Tensor4View &output, int64_t sh, int64_t sw,
                      int64_t dh, int64_t dw, const char *kernel);

/// As conv2dAccumulate, but O = the sum: O's old values are not read (the
/// zero fill before a convolution is not needed).
void conv2dOverwrite(const Tensor4View &input, const Tensor4View &filter,
                     const Tensor4View &output, int64_t sh, int64_t sw,
                     int64_t dh, int64_t dw, const char *kernel);

} // namespace autopar::runtime::cpu

#endif // AUTOPAR_RUNTIME_CPU_CONV2D_H
