//===- CudaAttentionTest.cpp - The fused attention kernels on a real GPU --===//
//
// _mlir_ciface_autopar_cuda_attention_{fwd,bwd}_{f32,bf16} against a
// float64 reference that materializes S x T: f32 within 1e-5 and bf16
// within 2e-2 of max |reference| (bf16 references start from the
// bf16-rounded inputs), over causal and plain attention, masks that
// broadcast ([1, 1, S, T], [B, 1, 1, T]) with -inf entries, grouped-query
// heads, odd and unequal S and T (S = 1 too), head dims 32 to 128 with
// E != D and dims that are no multiple of 16, operands viewed with strides
// ([B, S, H, D] buffers as [B, H, S, D]) and at addresses that rule out
// vector loads, and a row that sees no key (O = 0, LSE = -inf, dQ = 0).
// Outputs start as NaN, so that whatever the kernels fail to overwrite shows.
//
// The test loads libautopar_cuda.so the way autopar-run does
// (loadDeviceBackend: AUTOPAR_CUDA_RUNTIME, else ../lib beside the
// executable), in this process, and calls the entry points directly; the
// executable exports the runtime symbols the library leaves undefined.
//
// CudaAttentionTiming runs only with AUTOPAR_ATTENTION_TIMING=1 (the GPU
// round trip's `attention` part): bf16 causal forward and forward +
// backward at GPT-2 small's and a d=128 shape, one JSON line per shape
// ("attention-timing {...}").
//
//===----------------------------------------------------------------------===//

#include "autopar/runtime/CpuKernels.h"
#include "autopar/runtime/DType.h"
#include "autopar/runtime/DeviceBackend.h"

#include "CudaTestBackend.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace autopar::runtime;

namespace {

using Desc4 = MemRefDescriptor<char, 4>;
using Desc3 = MemRefDescriptor<char, 3>;
using ForwardFn = void (*)(Desc4 *, Desc4 *, Desc4 *, Desc4 *, Desc4 *, Desc3 *,
                           float, int32_t);
using BackwardFn = void (*)(Desc4 *, Desc4 *, Desc4 *, Desc4 *, Desc4 *,
                            Desc3 *, Desc4 *, Desc4 *, Desc4 *, Desc4 *, float,
                            int32_t);

constexpr double Infinity = std::numeric_limits<double>::infinity();

/// The process's GPU and the entry points: set up once (a process has one
/// CUDA device), on first use.
struct Gpu {
  std::unique_ptr<DeviceBackend> backend;
  ForwardFn forward[2] = {nullptr, nullptr};   // f32, bf16
  BackwardFn backward[2] = {nullptr, nullptr}; // f32, bf16

  static Gpu &get() {
    static Gpu gpu = open();
    return gpu;
  }

private:
  static Gpu open() {
    DeviceBackendConfig config;
    config.target.kind = TargetKind::Cuda;
    config.target.arch = "sm_90";
    Gpu gpu;
    gpu.backend = loadDeviceBackend(config, "CudaAttentionTest");
    // libautopar_cuda.so is loaded RTLD_GLOBAL, as for a program library.
    auto find = [](const char *name) {
      void *symbol = dlsym(RTLD_DEFAULT, name);
      if (!symbol)
        throw std::runtime_error(std::string("libautopar_cuda.so lacks ") +
                                 name);
      return symbol;
    };
    gpu.forward[0] = reinterpret_cast<ForwardFn>(
        find("_mlir_ciface_autopar_cuda_attention_fwd_f32"));
    gpu.forward[1] = reinterpret_cast<ForwardFn>(
        find("_mlir_ciface_autopar_cuda_attention_fwd_bf16"));
    gpu.backward[0] = reinterpret_cast<BackwardFn>(
        find("_mlir_ciface_autopar_cuda_attention_bwd_f32"));
    gpu.backward[1] = reinterpret_cast<BackwardFn>(
        find("_mlir_ciface_autopar_cuda_attention_bwd_bf16"));
    return gpu;
  }
};

} // namespace

autopar::runtime::DeviceBackend &cudaTestBackend() {
  return *Gpu::get().backend;
}

namespace {

/// How a [B, heads, rows, width] operand lies in its buffer.
enum class Layout {
  Dense,     ///< row-major [B, heads, rows, width]
  RowMajor,  ///< a [B, rows, heads, width] buffer viewed as [B, heads, ...]
  Misaligned ///< dense, one element past a 256-byte boundary
};

/// A device buffer holding one logical [B, heads, rows, width] tensor of f32
/// or bf16, laid out as \p layout.
class DeviceTensor {
public:
  DeviceTensor(bool bf16, int64_t batch, int64_t heads, int64_t rows,
               int64_t width, Layout layout)
      : bf16(bf16), sizes{batch, heads, rows, width} {
    if (layout == Layout::RowMajor) {
      strides[0] = rows * heads * width;
      strides[1] = width;
      strides[2] = heads * width;
    } else {
      strides[0] = heads * rows * width;
      strides[1] = rows * width;
      strides[2] = width;
    }
    strides[3] = 1;
    offset = layout == Layout::Misaligned ? 1 : 0;
    elements = offset + batch * heads * rows * width;
    data = Gpu::get().backend->allocate(elements * elementSize(), "a tensor");
    // NaN everywhere: what the kernels do not write stays NaN.
    std::vector<float> nan(static_cast<size_t>(elements),
                           std::numeric_limits<float>::quiet_NaN());
    upload(nan);
  }
  ~DeviceTensor() { Gpu::get().backend->free(data); }
  DeviceTensor(const DeviceTensor &) = delete;
  DeviceTensor &operator=(const DeviceTensor &) = delete;

  size_t elementSize() const { return bf16 ? 2 : 4; }
  int64_t count() const { return sizes[0] * sizes[1] * sizes[2] * sizes[3]; }

  /// Writes the logical values (dense [B, heads, rows, width]); for bf16
  /// they are rounded, and \p values becomes what the GPU holds.
  void write(std::vector<float> &values) {
    std::vector<float> buffer(static_cast<size_t>(elements), 0.0f);
    forEach([&](int64_t logical, int64_t physical) {
      buffer[physical] = values[logical];
    });
    upload(buffer);
    if (bf16) {
      std::vector<uint16_t> bits(values.size());
      convertFromFloat32(values.data(), static_cast<int64_t>(values.size()),
                         DType::BFloat16, bits.data());
      convertToFloat32(bits.data(), DType::BFloat16,
                       static_cast<int64_t>(bits.size()), values.data());
    }
  }

  /// The logical values, dense [B, heads, rows, width].
  std::vector<float> read() const {
    std::vector<float> buffer(static_cast<size_t>(elements));
    if (bf16) {
      std::vector<uint16_t> bits(buffer.size());
      Gpu::get().backend->copyToHost(bits.data(), data, bits.size() * 2);
      convertToFloat32(bits.data(), DType::BFloat16,
                       static_cast<int64_t>(bits.size()), buffer.data());
    } else {
      Gpu::get().backend->copyToHost(buffer.data(), data, buffer.size() * 4);
    }
    std::vector<float> values(static_cast<size_t>(count()));
    forEach([&](int64_t logical, int64_t physical) {
      values[logical] = buffer[physical];
    });
    return values;
  }

  Desc4 desc() const {
    Desc4 d;
    d.allocated = d.aligned = static_cast<char *>(data);
    d.offset = offset;
    for (int i = 0; i < 4; ++i) {
      d.sizes[i] = sizes[i];
      d.strides[i] = strides[i];
    }
    return d;
  }

private:
  template <typename Fn> void forEach(Fn fn) const {
    int64_t logical = 0;
    for (int64_t b = 0; b < sizes[0]; ++b)
      for (int64_t h = 0; h < sizes[1]; ++h)
        for (int64_t i = 0; i < sizes[2]; ++i)
          for (int64_t e = 0; e < sizes[3]; ++e)
            fn(logical++,
               offset + b * strides[0] + h * strides[1] + i * strides[2] + e);
  }

  void upload(const std::vector<float> &buffer) {
    if (bf16) {
      std::vector<uint16_t> bits(buffer.size());
      convertFromFloat32(buffer.data(), static_cast<int64_t>(buffer.size()),
                         DType::BFloat16, bits.data());
      Gpu::get().backend->copyToDevice(data, bits.data(), bits.size() * 2);
    } else {
      Gpu::get().backend->copyToDevice(data, buffer.data(), buffer.size() * 4);
    }
  }

  bool bf16;
  int64_t sizes[4], strides[4], offset = 0, elements = 0;
  void *data = nullptr;
};

/// Plain f32 device memory (the mask, LSE).
class DeviceFloats {
public:
  explicit DeviceFloats(const std::vector<float> &values)
      : count(values.size()) {
    data =
        Gpu::get().backend->allocate(std::max<size_t>(count, 1) * 4, "floats");
    if (count)
      Gpu::get().backend->copyToDevice(data, values.data(), count * 4);
  }
  ~DeviceFloats() { Gpu::get().backend->free(data); }
  DeviceFloats(const DeviceFloats &) = delete;
  DeviceFloats &operator=(const DeviceFloats &) = delete;
  std::vector<float> read() const {
    std::vector<float> values(count);
    Gpu::get().backend->copyToHost(values.data(), data, count * 4);
    return values;
  }
  char *pointer() const { return static_cast<char *>(data); }

private:
  size_t count;
  void *data = nullptr;
};

enum class MaskKind {
  None,
  Queries, ///< [1, 1, S, T]: random values and -inf entries
  Padding  ///< [B, 1, 1, T]: the last keys of later batches -inf
};

struct Case {
  const char *name;
  int64_t B, H, Hkv, S, T, D, E;
  bool causal;
  MaskKind mask;
  /// With MaskKind::Queries: a row whose keys are all masked.
  bool maskedRow;
  Layout layout;
  /// Inputs are uniform in [-amplitude, amplitude]; scale = 2 / sqrt(D).
  float amplitude;
};

std::ostream &operator<<(std::ostream &os, const Case &c) {
  return os << c.name;
}

/// Everything the float64 reference computes, dense.
struct Reference {
  std::vector<double> out, lse, dq, dk, dv;
};

/// The ABI's semantics, materializing S x T per (b, h).
Reference reference(const Case &c, const std::vector<float> &q,
                    const std::vector<float> &k, const std::vector<float> &v,
                    const std::vector<float> &mask,
                    const std::vector<int64_t> &maskStrides,
                    const std::vector<float> &dout, double scale) {
  const int64_t B = c.B, H = c.H, S = c.S, T = c.T, D = c.D, E = c.E;
  const int64_t group = c.H / c.Hkv;
  Reference r;
  r.out.assign(B * H * S * E, 0.0);
  r.lse.assign(B * H * S, -Infinity);
  r.dq.assign(B * H * S * D, 0.0);
  r.dk.assign(B * c.Hkv * T * D, 0.0);
  r.dv.assign(B * c.Hkv * T * E, 0.0);
  std::vector<double> s(S * T), p(S * T), dp(S * T);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      int64_t hk = h / group;
      const float *qh = &q[(b * H + h) * S * D];
      const float *kh = &k[(b * c.Hkv + hk) * T * D];
      const float *vh = &v[(b * c.Hkv + hk) * T * E];
      const float *doh = &dout[(b * H + h) * S * E];
      for (int64_t i = 0; i < S; ++i) {
        double rowMax = -Infinity;
        for (int64_t j = 0; j < T; ++j) {
          double x = -Infinity;
          if (!(c.causal && j > i)) {
            double dot = 0;
            for (int64_t d = 0; d < D; ++d)
              dot += double(qh[i * D + d]) * double(kh[j * D + d]);
            x = scale * dot;
            if (c.mask != MaskKind::None)
              x += mask[b * maskStrides[0] + h * maskStrides[1] +
                        i * maskStrides[2] + j * maskStrides[3]];
          }
          s[i * T + j] = x;
          rowMax = std::max(rowMax, x);
        }
        double sum = 0;
        for (int64_t j = 0; j < T; ++j) {
          p[i * T + j] =
              rowMax == -Infinity ? 0.0 : std::exp(s[i * T + j] - rowMax);
          sum += p[i * T + j];
        }
        for (int64_t j = 0; j < T; ++j)
          p[i * T + j] = sum > 0 ? p[i * T + j] / sum : 0.0;
        if (sum > 0)
          r.lse[(b * H + h) * S + i] = rowMax + std::log(sum);
        double *o = &r.out[((b * H + h) * S + i) * E];
        for (int64_t j = 0; j < T; ++j)
          for (int64_t e = 0; e < E; ++e)
            o[e] += p[i * T + j] * double(vh[j * E + e]);
        // Backward.
        double drow = 0;
        for (int64_t e = 0; e < E; ++e)
          drow += double(doh[i * E + e]) * o[e];
        double *dqi = &r.dq[((b * H + h) * S + i) * D];
        for (int64_t j = 0; j < T; ++j) {
          double pij = p[i * T + j];
          if (pij == 0.0)
            continue;
          double dpij = 0;
          for (int64_t e = 0; e < E; ++e)
            dpij += double(doh[i * E + e]) * double(vh[j * E + e]);
          double ds = pij * (dpij - drow);
          double *dkj = &r.dk[((b * c.Hkv + hk) * T + j) * D];
          double *dvj = &r.dv[((b * c.Hkv + hk) * T + j) * E];
          for (int64_t d = 0; d < D; ++d) {
            dqi[d] += scale * ds * double(kh[j * D + d]);
            dkj[d] += scale * ds * double(qh[i * D + d]);
          }
          for (int64_t e = 0; e < E; ++e)
            dvj[e] += pij * double(doh[i * E + e]);
        }
      }
    }
  return r;
}

/// max |got - want| <= tolerance * max |want| over the finite entries of
/// \p want; an infinite entry must be matched exactly and NaN never passes.
void expectClose(const std::vector<float> &got, const std::vector<double> &want,
                 double tolerance, const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double largest = 0;
  for (double w : want)
    if (std::isfinite(w))
      largest = std::max(largest, std::fabs(w));
  // Inputs are O(1), so every result's natural scale is at least 0.1: a
  // reference that is 0 by cancellation (one query under causal masking
  // has dQ = dK = 0) is compared on that scale, not on rounding noise.
  double bound = tolerance * std::max(largest, 0.1);
  double worst = 0;
  size_t worstAt = 0;
  int failures = 0;
  for (size_t i = 0; i < got.size() && failures < 5; ++i) {
    if (!std::isfinite(want[i])) {
      if (double(got[i]) != want[i]) {
        ADD_FAILURE() << what << " element " << i << ": " << got[i]
                      << ", expected " << want[i];
        ++failures;
      }
      continue;
    }
    double error = std::fabs(double(got[i]) - want[i]);
    if (!(error <= bound)) { // NaN fails too
      ADD_FAILURE() << what << " element " << i << ": " << got[i]
                    << ", expected " << want[i] << " (max |reference| "
                    << largest << ", tolerance " << tolerance << ")";
      ++failures;
    }
    if (!(error <= worst)) {
      worst = error;
      worstAt = i;
    }
  }
  std::printf("  %-4s max error %.3g of max |reference| %.3g (%.2e relative, "
              "at %zu)\n",
              what.c_str(), worst, largest,
              largest > 0 ? worst / largest : worst, worstAt);
}

std::vector<float> uniform(size_t count, float amplitude, std::mt19937 &rng) {
  std::uniform_real_distribution<float> dist(-amplitude, amplitude);
  std::vector<float> values(count);
  for (float &v : values)
    v = dist(rng);
  return values;
}

class CudaAttentionTest
    : public ::testing::TestWithParam<std::tuple<Case, bool>> {};

TEST_P(CudaAttentionTest, MatchesFloat64Reference) {
  const Case &c = std::get<0>(GetParam());
  const bool bf16 = std::get<1>(GetParam());
  const double tolerance = bf16 ? 2e-2 : 1e-5;
  Gpu &gpu = Gpu::get();
  std::mt19937 rng(1234);
  const float scale = 2.0f / std::sqrt(float(c.D));

  std::vector<float> q = uniform(c.B * c.H * c.S * c.D, c.amplitude, rng);
  std::vector<float> k = uniform(c.B * c.Hkv * c.T * c.D, c.amplitude, rng);
  std::vector<float> v = uniform(c.B * c.Hkv * c.T * c.E, c.amplitude, rng);
  std::vector<float> dout = uniform(c.B * c.H * c.S * c.E, 1.0f, rng);

  // The mask, in its own layout: [1, 1, S, T] dense, or [B, 1, 1, T] with
  // rows padded to T + 3 (a mask may have any strides).
  std::vector<float> mask;
  std::vector<int64_t> maskSizes = {1, 1, 1, 1}, maskStrides = {0, 0, 0, 0};
  const float minusInf = -std::numeric_limits<float>::infinity();
  if (c.mask == MaskKind::Queries) {
    maskSizes = {1, 1, c.S, c.T};
    maskStrides = {0, 0, c.T, 1};
    mask = uniform(c.S * c.T, 1.5f, rng);
    std::uniform_int_distribution<int> coin(0, 6);
    for (float &m : mask)
      if (coin(rng) == 0)
        m = minusInf;
    if (c.maskedRow)
      std::fill_n(mask.begin() + (c.S / 2) * c.T, c.T, minusInf);
  } else if (c.mask == MaskKind::Padding) {
    maskSizes = {c.B, 1, 1, c.T};
    maskStrides = {c.T + 3, 0, 0, 1};
    mask.assign(c.B * (c.T + 3), 0.0f);
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t j = 0; j < c.T; ++j)
        mask[b * (c.T + 3) + j] =
            j >= c.T - 5 * b ? minusInf : 0.25f * float(j % 3);
  }
  int32_t flags = (c.causal ? 1 : 0) | (c.mask != MaskKind::None ? 2 : 0);

  DeviceTensor dq_(bf16, c.B, c.H, c.S, c.D, c.layout),
      dk_(bf16, c.B, c.Hkv, c.T, c.D, c.layout),
      dv_(bf16, c.B, c.Hkv, c.T, c.E, c.layout);
  DeviceTensor qd(bf16, c.B, c.H, c.S, c.D, c.layout),
      kd(bf16, c.B, c.Hkv, c.T, c.D, c.layout),
      vd(bf16, c.B, c.Hkv, c.T, c.E, c.layout),
      outd(bf16, c.B, c.H, c.S, c.E, c.layout),
      doutd(bf16, c.B, c.H, c.S, c.E, c.layout);
  qd.write(q);
  kd.write(k);
  vd.write(v);
  doutd.write(dout);
  DeviceFloats maskd(mask.empty() ? std::vector<float>{0.0f} : mask);
  DeviceFloats lsed(std::vector<float>(
      c.B * c.H * c.S, std::numeric_limits<float>::quiet_NaN()));

  Desc4 dq = dq_.desc(), dk = dk_.desc(), dv = dv_.desc(), qv = qd.desc(),
        kv = kd.desc(), vv = vd.desc(), out = outd.desc(), dov = doutd.desc();
  Desc4 maskDesc{maskd.pointer(), maskd.pointer(), 0, {}, {}};
  for (int i = 0; i < 4; ++i) {
    maskDesc.sizes[i] = maskSizes[i];
    maskDesc.strides[i] = maskStrides[i];
  }
  Desc3 lse{
      lsed.pointer(), lsed.pointer(), 0, {c.B, c.H, c.S}, {c.H * c.S, c.S, 1}};

  gpu.forward[bf16](&qv, &kv, &vv, &maskDesc, &out, &lse, scale, flags);
  gpu.backward[bf16](&qv, &kv, &vv, &maskDesc, &out, &lse, &dov, &dq, &dk, &dv,
                     scale, flags);
  gpu.backend->synchronize();

  Reference want = reference(c, q, k, v, mask, maskStrides, dout, scale);
  std::printf("%s %s:\n", c.name, bf16 ? "bf16" : "f32");
  std::vector<float> gotOut = outd.read(), gotLse = lsed.read(),
                     gotDq = dq_.read();
  expectClose(gotOut, want.out, tolerance, "O");
  expectClose(gotLse, want.lse, tolerance, "LSE");
  expectClose(gotDq, want.dq, tolerance, "dQ");
  expectClose(dk_.read(), want.dk, tolerance, "dK");
  expectClose(dv_.read(), want.dv, tolerance, "dV");
  if (c.maskedRow) {
    // The row without a visible key: exactly zero, LSE -inf.
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t h = 0; h < c.H; ++h) {
        int64_t row = (b * c.H + h) * c.S + c.S / 2;
        EXPECT_EQ(gotLse[row], minusInf);
        for (int64_t e = 0; e < c.E; ++e)
          EXPECT_EQ(gotOut[row * c.E + e], 0.0f);
        for (int64_t d = 0; d < c.D; ++d)
          EXPECT_EQ(gotDq[row * c.D + d], 0.0f);
      }
  }
}

// clang-format off
const Case Cases[] = {
  // name                   B  H Hkv   S    T    D    E  causal mask              row    layout              amp
  {"plain",                 2, 3, 3,  37,  53,  64,  64, false, MaskKind::None,    false, Layout::Dense,      1.0f},
  {"causal",                2, 3, 3,  37,  53,  64,  64, true,  MaskKind::None,    false, Layout::Dense,      1.0f},
  {"causalMoreQueries",     1, 2, 2,  53,  37,  32,  32, true,  MaskKind::None,    false, Layout::Dense,      1.0f},
  {"gqaCausalQueryMask",    2, 8, 2,  70,  70,  64,  64, true,  MaskKind::Queries, true,  Layout::Dense,      1.0f},
  {"paddingMaskD128",       2, 2, 2,  53,  53, 128, 128, false, MaskKind::Padding, false, Layout::Dense,      1.0f},
  {"valueDimSmaller",       1, 4, 2,  37,  53,  64,  32, true,  MaskKind::None,    false, Layout::Dense,      1.0f},
  {"valueDimLarger",        1, 4, 4,  37,  53,  32, 128, false, MaskKind::Queries, false, Layout::Dense,      1.0f},
  {"headDimsNotOf16",       1, 2, 1,  29,  45,  72,  40, true,  MaskKind::Queries, true,  Layout::Dense,      1.0f},
  {"smallestHeadDim",       1, 2, 2,  37,  53,   8,   8, false, MaskKind::None,    false, Layout::Dense,      2.0f},
  {"oneQuery",              2, 4, 4,   1,  53,  64,  64, false, MaskKind::Padding, false, Layout::Dense,      1.0f},
  {"oneQueryCausal",        2, 4, 2,   1,  53,  64,  64, true,  MaskKind::None,    false, Layout::Dense,      1.0f},
  {"stridedViews",          2, 4, 2,  37,  53,  64,  64, true,  MaskKind::None,    false, Layout::RowMajor,   1.0f},
  {"misalignedViews",       1, 2, 2,  37,  53,  64,  64, false, MaskKind::Queries, true,  Layout::Misaligned, 1.0f},
  {"manyTilesD128",         1, 2, 1, 300, 260, 128, 128, true,  MaskKind::None,    false, Layout::Dense,      1.5f},
  {"manyTilesD32",          1, 1, 1, 200, 200,  32,  32, false, MaskKind::Queries, false, Layout::RowMajor,   1.5f},
  {"manyTilesUnmasked",     1, 2, 2, 150, 200,  64,  64, false, MaskKind::None,    false, Layout::Dense,      1.5f},
  {"manyTilesCausalGqa",    1, 4, 2, 300, 300,  64,  64, true,  MaskKind::None,    false, Layout::RowMajor,   1.5f},
};
// clang-format on

INSTANTIATE_TEST_SUITE_P(
    Cases, CudaAttentionTest,
    ::testing::Combine(::testing::ValuesIn(Cases), ::testing::Bool()),
    [](const ::testing::TestParamInfo<std::tuple<Case, bool>> &info) {
      return std::string(std::get<0>(info.param).name) +
             (std::get<1>(info.param) ? "_bf16" : "_f32");
    });

/// Descriptors of the right rank but no memory: only the checks may run.
Desc4 shapeOnly(int64_t b, int64_t h, int64_t s, int64_t d) {
  return Desc4{nullptr, nullptr, 0, {b, h, s, d}, {h * s * d, s * d, d, 1}};
}

TEST(CudaAttentionDeathTest, RejectsUnsupportedHeadDims) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Desc4 q = shapeOnly(1, 2, 5, 20), k = shapeOnly(1, 2, 7, 20),
        v = shapeOnly(1, 2, 7, 16), out = shapeOnly(1, 2, 5, 16),
        mask = shapeOnly(1, 1, 1, 1);
  Desc3 lse{nullptr, nullptr, 0, {1, 2, 5}, {10, 5, 1}};
  EXPECT_DEATH(Gpu::get().forward[1](&q, &k, &v, &mask, &out, &lse, 1.0f, 0),
               "autopar_cuda_attention_fwd_bf16: head dims D = 20 and E = 16 "
               "are not supported");
}

TEST(CudaAttentionDeathTest, RejectsInconsistentShapes) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Desc4 q = shapeOnly(1, 2, 5, 64), k = shapeOnly(1, 2, 7, 32),
        v = shapeOnly(1, 2, 7, 64), out = shapeOnly(1, 2, 5, 64),
        mask = shapeOnly(1, 1, 1, 1);
  Desc3 lse{nullptr, nullptr, 0, {1, 2, 5}, {10, 5, 1}};
  EXPECT_DEATH(Gpu::get().forward[0](&q, &k, &v, &mask, &out, &lse, 1.0f, 1),
               "autopar_cuda_attention_fwd_f32: k is \\[1, 2, 7, 32\\], "
               "expected \\[B, Hkv, T, D\\]");
  // Rows must be contiguous.
  Desc4 strided = shapeOnly(1, 2, 7, 64);
  strided.strides[3] = 2;
  EXPECT_DEATH(
      Gpu::get().forward[0](&q, &strided, &v, &mask, &out, &lse, 1.0f, 0),
      "innermost stride 2");
}

/// The round trip's timing: bf16 causal attention at training shapes.
TEST(CudaAttentionTiming, Bf16Causal) {
  const char *enabled = std::getenv("AUTOPAR_ATTENTION_TIMING");
  if (!enabled || !*enabled || std::strcmp(enabled, "0") == 0)
    GTEST_SKIP() << "set AUTOPAR_ATTENTION_TIMING=1 to time the kernels";
  Gpu &gpu = Gpu::get();
  struct Shape {
    int64_t B, H, S, D;
  };
  const int iterations = 20;
  for (Shape shape : {Shape{8, 12, 1024, 64}, Shape{4, 16, 2048, 128}}) {
    std::mt19937 rng(7);
    const int64_t B = shape.B, H = shape.H, S = shape.S, D = shape.D;
    DeviceTensor q(true, B, H, S, D, Layout::Dense),
        k(true, B, H, S, D, Layout::Dense), v(true, B, H, S, D, Layout::Dense),
        out(true, B, H, S, D, Layout::Dense),
        dout(true, B, H, S, D, Layout::Dense),
        dq(true, B, H, S, D, Layout::Dense),
        dk(true, B, H, S, D, Layout::Dense),
        dv(true, B, H, S, D, Layout::Dense);
    for (DeviceTensor *t : {&q, &k, &v, &dout}) {
      std::vector<float> values = uniform(B * H * S * D, 1.0f, rng);
      t->write(values);
    }
    DeviceFloats lseBuffer(std::vector<float>(B * H * S, 0.0f));
    Desc4 qd = q.desc(), kd = k.desc(), vd = v.desc(), od = out.desc(),
          dod = dout.desc(), dqd = dq.desc(), dkd = dk.desc(), dvd = dv.desc();
    Desc4 mask = shapeOnly(1, 1, 1, 1);
    Desc3 lse{
        lseBuffer.pointer(), lseBuffer.pointer(), 0, {B, H, S}, {H * S, S, 1}};
    const float scale = 1.0f / std::sqrt(float(D));
    auto forward = [&] {
      gpu.forward[1](&qd, &kd, &vd, &mask, &od, &lse, scale, 1);
    };
    auto backward = [&] {
      gpu.backward[1](&qd, &kd, &vd, &mask, &od, &lse, &dod, &dqd, &dkd, &dvd,
                      scale, 1);
    };
    auto time = [&](auto body) {
      for (int i = 0; i < 3; ++i)
        body();
      gpu.backend->synchronize();
      auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < iterations; ++i)
        body();
      gpu.backend->synchronize();
      std::chrono::duration<double, std::milli> elapsed =
          std::chrono::steady_clock::now() - start;
      return elapsed.count() / iterations;
    };
    double forwardMs = time(forward);
    double bothMs = time([&] {
      forward();
      backward();
    });
    // Causal: half of S x T.
    double forwardFlops = 4.0 * B * H * S * S * D / 2;
    double bothFlops = forwardFlops * 3.5;
    std::printf("attention-timing {\"dtype\": \"bf16\", \"causal\": true, "
                "\"B\": %lld, \"H\": %lld, \"S\": %lld, \"D\": %lld, "
                "\"fwd_ms\": %.4f, \"fwd_tflops\": %.2f, "
                "\"fwdbwd_ms\": %.4f, \"fwdbwd_tflops\": %.2f}\n",
                (long long)B, (long long)H, (long long)S, (long long)D,
                forwardMs, forwardFlops / forwardMs * 1e-9, bothMs,
                bothFlops / bothMs * 1e-9);
    std::fflush(stdout);
    std::vector<float> o = out.read();
    for (float x : o)
      ASSERT_TRUE(std::isfinite(x)) << "non-finite output at the timed shape";
  }
}

} // namespace
