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
//    each filter tap into an output row in place is cheaper.
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

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>

namespace autopar::runtime::cpu {

namespace {

/// The unfolded matrix is capped at this many floats (4 MiB) per band, unless
/// a single output row needs more.
constexpr int64_t ColumnBudget = int64_t(1) << 20;

/// Direct convolution pays off when C * F is at most this.
constexpr int64_t DirectMaxChannelProduct = 4;

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

/// Unfolds output rows [oy0, oy0 + rows) of image \p image into \p columns,
/// a dense [C*KH*KW, rows*OW] matrix.
AUTOPAR_MULTIVERSION void im2col(const ConvShape &s, const Tensor4View &in,
                                 const float *image, int64_t oy0, int64_t rows,
                                 float *columns) {
  int64_t cols = rows * s.ow;
  int64_t xStep = s.sw * in.strides[3];
  for (int64_t c = 0; c < s.c; ++c) {
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

  if (s.c * s.f <= DirectMaxChannelProduct) {
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
