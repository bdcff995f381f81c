//===- Conv2d.cpp - 2-D convolution on strided views ----------------------===//
//
// Two strategies:
//  - im2col + GEMM: for each image, unfold the input windows of a band of
//    output rows into a dense [C*KH*KW, rows*OW] matrix and multiply the
//    filter [F, C*KH*KW] by it into the output band. Banding bounds the
//    scratch memory and keeps the unfolded matrix closer to cache. A 1x1,
//    stride-1 convolution needs no unfolding: the input already is that
//    matrix.
//  - direct: for very few input and output channels (depthwise convolutions
//    above all), a GEMM with M = F tiny wastes the unfolding; accumulating
//    each filter tap into an output row in place is cheaper. The square
//    depthwise filters of MobileNet, EfficientNet and ConvNeXt (3x3, 5x5,
//    7x7, stride 1 or 2) have kernels of their own that sum all taps of an
//    output element in a register.
//  - per output position: when the kernel covers more positions than the
//    output has (a filter gradient: the kernel is the output gradient's
//    whole image, the output a filter's 3x3), im2col's GEMMs would have
//    N = OH*OW tiny and repack the large filter once per image. Instead the
//    input windows of every image at a group of output positions form a
//    dense [positions*N, C*KH*KW] matrix, and one GEMM with the filter
//    gives those positions for every image and output channel.
//
//===----------------------------------------------------------------------===//

#include "Conv2d.h"

#include "KernelError.h"
#include "Multiversion.h"
#include "Scratch.h"
#include "StridedGemm.h"
#include "ThreadPool.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>

namespace autopar::runtime::cpu {

namespace {

/// The unfolded matrix is capped at this many floats (4 MiB) per band, unless
/// a single output row needs more.
constexpr int64_t ColumnBudget = int64_t(1) << 20;

std::string formatSizes(const Tensor4View &v) {
  std::string text = "[";
  for (int i = 0; i < 4; ++i)
    text += std::to_string(v.sizes[i]) + (i < 3 ? ", " : "]");
  return text;
}

/// If dims [first, 4) of \p v can be addressed as one dimension, its stride.
std::optional<int64_t> collapsedStride(const Tensor4View &v, int first) {
  std::optional<int64_t> stride;
  int64_t extent = 1;
  for (int d = 3; d >= first; --d) {
    if (v.sizes[d] == 1)
      continue; // Any stride works for a dimension of size one.
    if (!stride) {
      stride = v.strides[d];
      extent = v.sizes[d];
    } else if (v.strides[d] == *stride * extent) {
      extent *= v.sizes[d];
    } else {
      return std::nullopt;
    }
  }
  return stride.value_or(1);
}

struct ConvShape {
  int64_t n, c, h, w, f, kh, kw, oh, ow, sh, sw, dh, dw;
};

/// Unfolds channels [c0, c1) of output rows [oy0, oy0 + rows) of image
/// \p image into their rows of \p columns, a dense [C*KH*KW, rows*OW]
/// matrix.
AUTOPAR_MULTIVERSION void im2colChannels(const ConvShape &s,
                                         const Tensor4View &in,
                                         const float *image, int64_t oy0,
                                         int64_t rows, float *columns,
                                         int64_t c0, int64_t c1) {
  int64_t cols = rows * s.ow;
  int64_t xStep = s.sw * in.strides[3];
  for (int64_t c = c0; c < c1; ++c) {
    for (int64_t ky = 0; ky < s.kh; ++ky) {
      for (int64_t kx = 0; kx < s.kw; ++kx) {
        float *dst = columns + ((c * s.kh + ky) * s.kw + kx) * cols;
        const float *tap = image + c * in.strides[1] +
                           ky * s.dh * in.strides[2] +
                           kx * s.dw * in.strides[3];
        for (int64_t r = 0; r < rows; ++r, dst += s.ow) {
          const float *src = tap + (oy0 + r) * s.sh * in.strides[2];
          if (xStep == 1) {
            std::memcpy(dst, src, static_cast<size_t>(s.ow) * sizeof(float));
          } else {
            for (int64_t x = 0; x < s.ow; ++x)
              dst[x] = src[x * xStep];
          }
        }
      }
    }
  }
}

/// Unfolds output rows [oy0, oy0 + rows) of image \p image into \p columns,
/// a dense [C*KH*KW, rows*OW] matrix, the channels split among the kernel
/// threads (each writes its own rows).
void im2col(const ConvShape &s, const Tensor4View &in, const float *image,
            int64_t oy0, int64_t rows, float *columns) {
  parallelFor(s.c, s.kh * s.kw * rows * s.ow, [&](int64_t c0, int64_t c1) {
    im2colChannels(s, in, image, oy0, rows, columns, c0, c1);
  });
}

/// The filter as a [F, C*KH*KW] matrix: a view if its last three dims
/// collapse, else a dense copy.
MatrixView filterMatrix(const ConvShape &s, const Tensor4View &filter) {
  int64_t taps = s.c * s.kh * s.kw;
  if (std::optional<int64_t> stride = collapsedStride(filter, 1))
    return {filter.data, s.f, taps, filter.strides[0], *stride};
  float *dense =
      scratch(ScratchSlot::ConvFilter, static_cast<size_t>(s.f * taps));
  for (int64_t f = 0; f < s.f; ++f)
    for (int64_t c = 0; c < s.c; ++c)
      for (int64_t ky = 0; ky < s.kh; ++ky)
        for (int64_t kx = 0; kx < s.kw; ++kx)
          dense[((f * s.c + c) * s.kh + ky) * s.kw + kx] =
              filter.data[f * filter.strides[0] + c * filter.strides[1] +
                          ky * filter.strides[2] + kx * filter.strides[3]];
  return {dense, s.f, taps, taps, 1};
}

void convIm2col(const ConvShape &s, const Tensor4View &in,
                const Tensor4View &filter, const Tensor4View &out, float beta,
                const char *kernel) {
  MatrixView weights = filterMatrix(s, filter);
  int64_t taps = weights.cols;
  std::optional<int64_t> outStride = collapsedStride(out, 2);
  std::optional<int64_t> inStride = collapsedStride(in, 2);
  bool pointwise = s.kh == 1 && s.kw == 1 && s.sh == 1 && s.sw == 1 &&
                   s.oh == s.h && s.ow == s.w && inStride && outStride;
  // Output rows per band: as many as the budget allows when the output rows
  // form one matrix dimension, else one row at a time.
  int64_t bandRows = 1;
  if (outStride)
    bandRows = std::clamp<int64_t>(
        ColumnBudget / std::max<int64_t>(taps * s.ow, 1), 1, s.oh);

  for (int64_t n = 0; n < s.n; ++n) {
    const float *image = in.data + n * in.strides[0];
    float *result = out.data + n * out.strides[0];
    if (pointwise) {
      MatrixView pixels{const_cast<float *>(image), s.c, s.h * s.w,
                        in.strides[1], *inStride};
      MatrixView o{result, s.f, s.oh * s.ow, out.strides[1], *outStride};
      gemm(weights, pixels, o, beta, kernel);
      continue;
    }
    for (int64_t oy0 = 0; oy0 < s.oh; oy0 += bandRows) {
      int64_t rows = std::min(bandRows, s.oh - oy0);
      int64_t cols = rows * s.ow;
      float *columns =
          scratch(ScratchSlot::ConvColumns, static_cast<size_t>(taps * cols));
      im2col(s, in, image, oy0, rows, columns);
      float *band = result + oy0 * out.strides[2];
      MatrixView o =
          outStride
              ? MatrixView{band, s.f, cols, out.strides[1], *outStride}
              : MatrixView{band, s.f, cols, out.strides[1], out.strides[3]};
      // Each band's GEMM sums every tap: beta applies to each once.
      gemm(weights, {columns, taps, cols, cols, 1}, o, beta, kernel);
    }
  }
}

void convPerPosition(const ConvShape &s, const Tensor4View &in,
                     const Tensor4View &filter, const Tensor4View &out,
                     float beta, const char *kernel) {
  MatrixView weights = filterMatrix(s, filter);
  int64_t taps = weights.cols;
  // Positions per GEMM: as many as the budget allows, so that few input
  // images (rows) still make a GEMM of useful height.
  int64_t positions = s.oh * s.ow;
  int64_t group = std::clamp<int64_t>(
      ColumnBudget / std::max<int64_t>(s.n * taps, 1), 1, positions);
  float *windows = scratch(ScratchSlot::ConvColumns,
                           static_cast<size_t>(group * s.n * taps));
  float *result =
      scratch(ScratchSlot::ConvOutput, static_cast<size_t>(group * s.n * s.f));
  int64_t xStep = s.dw * in.strides[3];
  for (int64_t first = 0; first < positions; first += group) {
    int64_t count = std::min(group, positions - first);
    // Row (p, n): image n's window at position first + p.
    for (int64_t p = 0; p < count; ++p) {
      int64_t oy = (first + p) / s.ow, ox = (first + p) % s.ow;
      for (int64_t n = 0; n < s.n; ++n) {
        float *row = windows + (p * s.n + n) * taps;
        for (int64_t c = 0; c < s.c; ++c)
          for (int64_t ky = 0; ky < s.kh; ++ky) {
            const float *i = in.data + n * in.strides[0] + c * in.strides[1] +
                             (oy * s.sh + ky * s.dh) * in.strides[2] +
                             ox * s.sw * in.strides[3];
            float *to = row + (c * s.kh + ky) * s.kw;
            // Rows are short (an image's width): a loop beats memcpy calls.
            if (xStep == 1)
              for (int64_t kx = 0; kx < s.kw; ++kx)
                to[kx] = i[kx];
            else
              for (int64_t kx = 0; kx < s.kw; ++kx)
                to[kx] = i[kx * xStep];
          }
      }
    }
    int64_t rows = count * s.n;
    gemm({windows, rows, taps, taps, 1}, weights.transposed(),
         {result, rows, s.f, s.f, 1}, 0.0f, kernel);
    for (int64_t p = 0; p < count; ++p) {
      int64_t oy = (first + p) / s.ow, ox = (first + p) % s.ow;
      for (int64_t n = 0; n < s.n; ++n) {
        const float *from = result + (p * s.n + n) * s.f;
        float *o = out.data + n * out.strides[0] + oy * out.strides[2] +
                   ox * out.strides[3];
        for (int64_t f = 0; f < s.f; ++f)
          o[f * out.strides[1]] =
              from[f] + (beta != 0.0f ? o[f * out.strides[1]] : 0.0f);
      }
    }
  }
}

/// o[x] += sum_kx w[kx * wStride] * i[x * xStep + kx * tapStep], x < ow, for
/// a contiguous output row. Output rows are short (a feature map's width), so
/// each pass over one costs nearly as much in loop overhead as in arithmetic:
/// three taps are added per pass. XStep, when non-zero, is xStep as a
/// constant, which lets stride-2 gathers vectorize.
template <int64_t XStep>
[[gnu::always_inline]] inline void
addFilterRow(float *__restrict o, const float *__restrict i, const float *w,
             int64_t wStride, int64_t kw, int64_t tapStep, int64_t ow,
             int64_t xStep) {
  if (XStep != 0)
    xStep = XStep;
  int64_t kx = 0;
  for (; kx + 3 <= kw; kx += 3) {
    float w0 = w[kx * wStride], w1 = w[(kx + 1) * wStride],
          w2 = w[(kx + 2) * wStride];
    const float *i0 = i + kx * tapStep, *i1 = i0 + tapStep, *i2 = i1 + tapStep;
    for (int64_t x = 0; x < ow; ++x)
      o[x] += w0 * i0[x * xStep] + w1 * i1[x * xStep] + w2 * i2[x * xStep];
  }
  for (; kx < kw; ++kx) {
    float w0 = w[kx * wStride];
    const float *i0 = i + kx * tapStep;
    for (int64_t x = 0; x < ow; ++x)
      o[x] += w0 * i0[x * xStep];
  }
}

AUTOPAR_MULTIVERSION void convDirect(const ConvShape &s, const Tensor4View &in,
                                     const Tensor4View &filter,
                                     const Tensor4View &out) {
  int64_t xStep = s.sw * in.strides[3];
  int64_t tapStep = s.dw * in.strides[3];
  int64_t outX = out.strides[3];
  for (int64_t n = 0; n < s.n; ++n) {
    for (int64_t f = 0; f < s.f; ++f) {
      for (int64_t oy = 0; oy < s.oh; ++oy) {
        // One output row stays in L1 while every tap is added into it.
        float *o = out.data + n * out.strides[0] + f * out.strides[1] +
                   oy * out.strides[2];
        for (int64_t c = 0; c < s.c; ++c) {
          for (int64_t ky = 0; ky < s.kh; ++ky) {
            const float *i = in.data + n * in.strides[0] + c * in.strides[1] +
                             (oy * s.sh + ky * s.dh) * in.strides[2];
            const float *w = filter.data + f * filter.strides[0] +
                             c * filter.strides[1] + ky * filter.strides[2];
            int64_t wStride = filter.strides[3];
            if (outX == 1 && xStep == 1)
              addFilterRow<1>(o, i, w, wStride, s.kw, tapStep, s.ow, xStep);
            else if (outX == 1 && xStep == 2)
              addFilterRow<2>(o, i, w, wStride, s.kw, tapStep, s.ow, xStep);
            else if (outX == 1)
              addFilterRow<0>(o, i, w, wStride, s.kw, tapStep, s.ow, xStep);
            else
              for (int64_t kx = 0; kx < s.kw; ++kx)
                for (int64_t x = 0; x < s.ow; ++x)
                  o[x * outX] += w[kx * wStride] * i[x * xStep + kx * tapStep];
          }
        }
      }
    }
  }
}

/// Sum of a KxK depthwise filter \p w over the window at \p at: rows \p row
/// apart. With P = 1 the window's columns are consecutive; with P = 2 (a
/// stride-2 convolution) the input was split into its even and odd columns,
/// \p phase floats apart, so column kx is at phase kx % 2, offset kx / 2,
/// and consecutive outputs again read consecutive floats.
template <int K, int P>
[[gnu::always_inline]] inline float depthwiseTaps(const float *__restrict at,
                                                  int64_t row, int64_t phase,
                                                  const float *w) {
  float acc = 0.0f;
#pragma GCC unroll 7
  for (int ky = 0; ky < K; ++ky)
#pragma GCC unroll 7
    for (int kx = 0; kx < K; ++kx)
      acc += w[ky * K + kx] * at[ky * row + (kx % P) * phase + kx / P];
  return acc;
}

/// One image plane of a depthwise convolution (one input and one output
/// channel) with a KxK filter `w` (dense), rows \p sh apart, no dilation,
/// row by row: every tap of an output element is summed in a register and
/// the element stored once. K and P are constants, so the taps unroll and
/// the loop over x vectorizes.
template <int K, int P, bool Accumulate>
[[gnu::always_inline]] inline void
depthwiseRows(const float *__restrict in, int64_t row, int64_t phase,
              const float *w, float *__restrict out, int64_t outRow, int64_t oh,
              int64_t ow, int64_t sh) {
  for (int64_t oy = 0; oy < oh; ++oy) {
    const float *top = in + oy * sh * row;
    float *o = out + oy * outRow;
    for (int64_t x = 0; x < ow; ++x) {
      float acc = depthwiseTaps<K, P>(top + x, row, phase, w);
      o[x] = Accumulate ? o[x] + acc : acc;
    }
  }
}

/// As depthwiseRows for a narrow plane (MobileNet's 7x7 and 14x14 maps),
/// where most of a row would be the vector loop's scalar remainder: output
/// (oy, x) is the window at oy * sh * row + x = q for q = oy * rowStep + x,
/// so one contiguous loop over q computes every row, plus rowStep - ow
/// positions between rows that are dropped. Each of those windows lies
/// between two real ones, so every read is inside the input.
template <int K, int P, bool Accumulate>
[[gnu::always_inline]] inline void
depthwiseWide(const float *__restrict in, int64_t row, int64_t phase,
              const float *w, float *__restrict out, int64_t outRow, int64_t oh,
              int64_t ow, int64_t sh, float *__restrict wide) {
  int64_t rowStep = sh * row;
  int64_t count = (oh - 1) * rowStep + ow;
  for (int64_t q = 0; q < count; ++q)
    wide[q] = depthwiseTaps<K, P>(in + q, row, phase, w);
  for (int64_t oy = 0; oy < oh; ++oy) {
    const float *from = wide + oy * rowStep;
    float *o = out + oy * outRow;
    for (int64_t x = 0; x < ow; ++x)
      o[x] = Accumulate ? o[x] + from[x] : from[x];
  }
}

/// Vector width the cost estimate assumes (AVX2: 8 floats).
constexpr int64_t DepthwiseLanes = 8;

/// Whether depthwiseWide computes the plane in fewer vector and scalar
/// iterations than depthwiseRows: rows pay ow % lanes scalar iterations
/// each, the wide loop computes rowStep - ow dropped positions per row.
bool depthwiseWidePays(int64_t rowStep, int64_t oh, int64_t ow) {
  int64_t rows = oh * (ow / DepthwiseLanes + ow % DepthwiseLanes);
  int64_t count = (oh - 1) * rowStep + ow;
  int64_t wide = count / DepthwiseLanes + count % DepthwiseLanes;
  return wide < rows;
}

/// Whether depthwiseConv handles \p s on these views.
bool hasDepthwiseKernel(const ConvShape &s, const Tensor4View &in,
                        const Tensor4View &out) {
  return s.c == 1 && s.f == 1 && s.kh == s.kw &&
         (s.kh == 3 || s.kh == 5 || s.kh == 7) && (s.sw == 1 || s.sw == 2) &&
         s.dh == 1 && s.dw == 1 && in.strides[3] == 1 && out.strides[3] == 1;
}

/// One image of depthwiseConv with a KxK filter, stride-2 columns split
/// (P = 2) or not. Inlined into depthwiseConv's clones, so it is compiled for
/// each of them.
template <int K, int P>
[[gnu::always_inline]] inline void
depthwiseImage(const ConvShape &s, const float *in, int64_t row, int64_t phase,
               const float *w, float *out, int64_t outRow, bool accumulate,
               float *wide) {
  if (wide && accumulate)
    depthwiseWide<K, P, true>(in, row, phase, w, out, outRow, s.oh, s.ow, s.sh,
                              wide);
  else if (wide)
    depthwiseWide<K, P, false>(in, row, phase, w, out, outRow, s.oh, s.ow, s.sh,
                               wide);
  else if (accumulate)
    depthwiseRows<K, P, true>(in, row, phase, w, out, outRow, s.oh, s.ow, s.sh);
  else
    depthwiseRows<K, P, false>(in, row, phase, w, out, outRow, s.oh, s.ow,
                               s.sh);
}

/// depthwiseImage for a KxK filter, P chosen by the stride across.
template <int K>
[[gnu::always_inline]] inline void
depthwiseImageOfSize(const ConvShape &s, const float *in, int64_t row,
                     int64_t phase, const float *w, float *out, int64_t outRow,
                     bool accumulate, float *wide) {
  if (s.sw == 2)
    depthwiseImage<K, 2>(s, in, row, phase, w, out, outRow, accumulate, wide);
  else
    depthwiseImage<K, 1>(s, in, row, phase, w, out, outRow, accumulate, wide);
}

/// Copies the rows of an image plane into \p to as its even columns, then
/// its odd columns: [H, half] each, half = ceil(W / 2).
[[gnu::always_inline]] inline void splitColumns(const float *__restrict in,
                                                int64_t inRow, int64_t h,
                                                int64_t w, float *__restrict to,
                                                int64_t half) {
  float *odd = to + h * half;
  for (int64_t y = 0; y < h; ++y) {
    const float *from = in + y * inRow;
    for (int64_t x = 0; x < w / 2; ++x) {
      to[y * half + x] = from[2 * x];
      odd[y * half + x] = from[2 * x + 1];
    }
    if (w % 2)
      to[y * half + w / 2] = from[w - 1];
  }
}

/// The depthwise convolutions of MobileNet, EfficientNet and ConvNeXt
/// (3x3, 5x5 and 7x7, stride 1 or 2), where hasDepthwiseKernel holds. A
/// stride-2 plane is first split into its even and odd columns, so that
/// vector lanes read consecutive floats rather than gathering every other
/// one.
AUTOPAR_MULTIVERSION void depthwiseConv(const ConvShape &s,
                                        const Tensor4View &in,
                                        const Tensor4View &filter,
                                        const Tensor4View &out,
                                        bool accumulate) {
  float w[7 * 7];
  for (int64_t ky = 0; ky < s.kh; ++ky)
    for (int64_t kx = 0; kx < s.kw; ++kx)
      w[ky * s.kw + kx] =
          filter.data[ky * filter.strides[2] + kx * filter.strides[3]];
  bool split = s.sw == 2;
  int64_t half = (s.w + 1) / 2;
  int64_t row = split ? half : in.strides[2];
  int64_t phase = split ? s.h * half : 0;
  float *columns =
      split ? scratch(ScratchSlot::ConvColumns, static_cast<size_t>(2 * phase))
            : nullptr;
  float *wide = nullptr;
  if (depthwiseWidePays(s.sh * row, s.oh, s.ow))
    wide = scratch(ScratchSlot::ConvOutput,
                   static_cast<size_t>((s.oh - 1) * s.sh * row + s.ow));
  int64_t outRow = out.strides[2];
  for (int64_t n = 0; n < s.n; ++n) {
    const float *image = in.data + n * in.strides[0];
    float *result = out.data + n * out.strides[0];
    if (split) {
      splitColumns(image, in.strides[2], s.h, s.w, columns, half);
      image = columns;
    }
    // Direct calls, not pointers: the templates must inline into this clone.
    if (s.kh == 3)
      depthwiseImageOfSize<3>(s, image, row, phase, w, result, outRow,
                              accumulate, wide);
    else if (s.kh == 5)
      depthwiseImageOfSize<5>(s, image, row, phase, w, result, outRow,
                              accumulate, wide);
    else
      depthwiseImageOfSize<7>(s, image, row, phase, w, result, outRow,
                              accumulate, wide);
  }
}

} // namespace

namespace {

/// Sets every element of \p v to zero.
void zero(const Tensor4View &v) {
  for (int64_t a = 0; a < v.sizes[0]; ++a)
    for (int64_t b = 0; b < v.sizes[1]; ++b)
      for (int64_t c = 0; c < v.sizes[2]; ++c) {
        float *row =
            v.data + a * v.strides[0] + b * v.strides[1] + c * v.strides[2];
        for (int64_t d = 0; d < v.sizes[3]; ++d)
          row[d * v.strides[3]] = 0.0f;
      }
}

void conv2d(const Tensor4View &input, const Tensor4View &filter,
            const Tensor4View &output, int64_t sh, int64_t sw, int64_t dh,
            int64_t dw, bool accumulate, const char *kernel) {
  ConvShape s{input.sizes[0],
              input.sizes[1],
              input.sizes[2],
              input.sizes[3],
              filter.sizes[0],
              filter.sizes[2],
              filter.sizes[3],
              output.sizes[2],
              output.sizes[3],
              sh,
              sw,
              dh,
              dw};
  auto mismatch = [&](const std::string &what) {
    kernelFatal(kernel, what + " (input " + formatSizes(input) + ", filter " +
                            formatSizes(filter) + ", output " +
                            formatSizes(output) + ", strides " +
                            std::to_string(sh) + "x" + std::to_string(sw) +
                            ", dilations " + std::to_string(dh) + "x" +
                            std::to_string(dw) +
                            "); the generated program is inconsistent, "
                            "which is a compiler bug");
  };
  if (sh < 1 || sw < 1 || dh < 1 || dw < 1)
    mismatch("strides and dilations must be positive");
  if (filter.sizes[1] != s.c || output.sizes[0] != s.n ||
      output.sizes[1] != s.f)
    mismatch("sizes do not agree");
  if (s.n == 0 || s.f == 0 || s.oh == 0 || s.ow == 0 || s.c == 0 || s.kh == 0 ||
      s.kw == 0) {
    // No output, or an empty sum: nothing to add.
    if (!accumulate)
      zero(output);
    return;
  }
  if ((s.oh - 1) * sh + (s.kh - 1) * dh >= s.h ||
      (s.ow - 1) * sw + (s.kw - 1) * dw >= s.w)
    mismatch("windows reach outside the (padded) input");

  if (hasDepthwiseKernel(s, input, output)) {
    depthwiseConv(s, input, filter, output, accumulate);
  } else if (s.c * s.f <= DirectMaxChannelProduct) {
    // The direct loops add each tap into the output row.
    if (!accumulate)
      zero(output);
    convDirect(s, input, filter, output);
  } else if (s.kh * s.kw > s.oh * s.ow) {
    convPerPosition(s, input, filter, output, accumulate ? 1.0f : 0.0f, kernel);
  } else {
    convIm2col(s, input, filter, output, accumulate ? 1.0f : 0.0f, kernel);
  }
}

} // namespace

void conv2dAccumulate(const Tensor4View &input, const Tensor4View &filter,
                      const Tensor4View &output, int64_t sh, int64_t sw,
                      int64_t dh, int64_t dw, const char *kernel) {
  conv2d(input, filter, output, sh, sw, dh, dw, /*accumulate=*/true, kernel);
}

void conv2dOverwrite(const Tensor4View &input, const Tensor4View &filter,
                     const Tensor4View &output, int64_t sh, int64_t sw,
                     int64_t dh, int64_t dw, const char *kernel) {
  conv2d(input, filter, output, sh, sw, dh, dw, /*accumulate=*/false, kernel);
}

} // namespace autopar::runtime::cpu
