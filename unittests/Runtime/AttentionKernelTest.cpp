//===- AttentionKernelTest.cpp - Fused attention against references -------===//
//
// The CPU attention kernels (FlashAttention-2) against a naive
// double-precision implementation that forms the full S x T score matrix:
// causal and not, every mask broadcast shape, -inf mask entries and fully
// masked rows, grouped-query heads, sizes that are not multiples of the
// 64-wide tiles, head dims 32 to 128 with E != D, and views with
// non-contiguous strides. Outputs start as NaN: the kernels overwrite them
// and must not read them. The backward is also checked against central
// differences of the reference forward, which does not share its formulas.
//
// DISABLED_TimeFusedAgainstUnfused times both against the unfused algorithm
// (two GEMMs through the runtime's BLAS and a softmax pass); run it with
// OPENBLAS_NUM_THREADS=1 and --gtest_also_run_disabled_tests.
//
//===----------------------------------------------------------------------===//

#include "autopar/runtime/CpuBlas.h"
#include "autopar/runtime/CpuKernels.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

using autopar::runtime::MemRefDescriptor;

namespace {

constexpr double Inf = std::numeric_limits<double>::infinity();
constexpr int32_t Causal = 1, HasMask = 2;

/// How a test tensor is laid out in its storage.
template <int R> struct Layout {
  std::array<int, R> order; // Dimensions from outermost to innermost in memory.
  int64_t pad = 0;          // Extra elements after each inner extent.
  int64_t step = 1;         // Stride of the innermost dimension.
  int64_t offset = 0;       // Elements before the first one.
};

/// A float tensor of rank R in its own storage, seen through a descriptor.
template <int R> struct TestTensor {
  std::vector<float> storage;
  MemRefDescriptor<float, R> desc;

  TestTensor(const std::array<int64_t, R> &sizes, const Layout<R> &layout) {
    int64_t stride = layout.step;
    int64_t last = 0;
    for (int j = R - 1; j >= 0; --j) {
      int d = layout.order[j];
      desc.sizes[d] = sizes[d];
      desc.strides[d] = stride;
      last += (sizes[d] > 0 ? sizes[d] - 1 : 0) * stride;
      stride = stride * sizes[d] + layout.pad;
    }
    // NaN everywhere, gaps included: outputs must be written before read.
    storage.assign(static_cast<size_t>(layout.offset + last + 1),
                   std::numeric_limits<float>::quiet_NaN());
    desc.allocated = storage.data();
    desc.aligned = storage.data();
    desc.offset = layout.offset;
  }

  TestTensor(const TestTensor &other)
      : storage(other.storage), desc(other.desc) {
    desc.allocated = storage.data();
    desc.aligned = storage.data();
  }

  int64_t count() const {
    int64_t n = 1;
    for (int d = 0; d < R; ++d)
      n *= desc.sizes[d];
    return n;
  }

  /// The multi-index of the \p flat-th element in row-major order.
  std::array<int64_t, R> index(int64_t flat) const {
    std::array<int64_t, R> idx;
    for (int d = R - 1; d >= 0; --d) {
      idx[d] = flat % desc.sizes[d];
      flat /= desc.sizes[d];
    }
    return idx;
  }

  float &at(const std::array<int64_t, R> &idx) {
    int64_t position = desc.offset;
    for (int d = 0; d < R; ++d)
      position += idx[d] * desc.strides[d];
    return storage[static_cast<size_t>(position)];
  }
  float at(const std::array<int64_t, R> &idx) const {
    return const_cast<TestTensor *>(this)->at(idx);
  }

  /// Uniform values in [-range, range) from a small LCG: deterministic.
  void randomize(uint32_t seed, float range = 1.0f) {
    for (int64_t f = 0; f < count(); ++f) {
      seed = seed * 1664525u + 1013904223u;
      at(index(f)) =
          (static_cast<float>(seed >> 8) / 8388608.0f - 1.0f) * range;
    }
  }
};

using T4 = TestTensor<4>;
using T3 = TestTensor<3>;

const Layout<4> Dense = {{0, 1, 2, 3}};
/// [B, H, S, D] seen in a [B, S, H, D] buffer (heads interleaved, as a
/// projection's output is), with an offset.
const Layout<4> HeadsInterleaved = {{0, 2, 1, 3}, 0, 1, 3};
/// Each matrix column-major, padded.
const Layout<4> Transposed = {{0, 1, 3, 2}, 2, 1, 1};
/// Every other element innermost, padded rows.
const Layout<4> Strided = {{0, 1, 2, 3}, 3, 2, 5};

enum class MaskShape { None, Full, SharedST, BatchKeys, HeadQueries };

std::string maskName(MaskShape m) {
  switch (m) {
  case MaskShape::None:
    return "none";
  case MaskShape::Full:
    return "[B,H,S,T]";
  case MaskShape::SharedST:
    return "[1,1,S,T]";
  case MaskShape::BatchKeys:
    return "[B,1,1,T]";
  case MaskShape::HeadQueries:
    return "[1,H,S,1]";
  }
  return "?";
}

struct Case {
  int64_t b, h, hkv, s, t, d, e;
  bool causal;
  MaskShape mask;
  double negInfFraction; // Of the mask entries.
  const Layout<4> *qkvLayout;
  const Layout<4> *outLayout;
  float scale;
  const Layout<4> *maskLayout = &Dense;

  std::string describe() const {
    char text[256];
    std::snprintf(text, sizeof text,
                  "B%lld H%lld Hkv%lld S%lld T%lld D%lld E%lld %s mask %s "
                  "-inf %.2f",
                  (long long)b, (long long)h, (long long)hkv, (long long)s,
                  (long long)t, (long long)d, (long long)e,
                  causal ? "causal" : "full", maskName(mask).c_str(),
                  negInfFraction);
    return text;
  }
};

/// The operands of one case, with random inputs.
struct Problem {
  Case c;
  T4 q, k, v, mask, o, dO;
  T3 lse;

  explicit Problem(const Case &cs, uint32_t seed)
      : c(cs), q({cs.b, cs.h, cs.s, cs.d}, *cs.qkvLayout),
        k({cs.b, cs.hkv, cs.t, cs.d}, *cs.qkvLayout),
        v({cs.b, cs.hkv, cs.t, cs.e}, *cs.qkvLayout),
        mask(maskSizes(cs), *cs.maskLayout),
        o({cs.b, cs.h, cs.s, cs.e}, *cs.outLayout),
        dO({cs.b, cs.h, cs.s, cs.e}, *cs.qkvLayout),
        lse({cs.b, cs.h, cs.s}, {{0, 1, 2}}) {
    q.randomize(seed + 1, 2.0f);
    k.randomize(seed + 2, 2.0f);
    v.randomize(seed + 3);
    dO.randomize(seed + 4);
    if (cs.mask == MaskShape::None) {
      // A dummy the kernels must not read.
      mask.desc.aligned = mask.desc.allocated = nullptr;
      for (int d = 0; d < 4; ++d)
        mask.desc.sizes[d] = 7;
    } else {
      mask.randomize(seed + 5, 2.0f);
      uint32_t r = seed + 6;
      for (int64_t f = 0; f < mask.count(); ++f) {
        r = r * 1664525u + 1013904223u;
        if ((r >> 8) < cs.negInfFraction * 16777216.0)
          mask.at(mask.index(f)) = -std::numeric_limits<float>::infinity();
      }
    }
  }

  static std::array<int64_t, 4> maskSizes(const Case &c) {
    switch (c.mask) {
    case MaskShape::None:
      return {1, 1, 1, 1};
    case MaskShape::Full:
      return {c.b, c.h, c.s, c.t};
    case MaskShape::SharedST:
      return {1, 1, c.s, c.t};
    case MaskShape::BatchKeys:
      return {c.b, 1, 1, c.t};
    case MaskShape::HeadQueries:
      return {1, c.h, c.s, 1};
    }
    return {};
  }

  int32_t flags() const {
    return (c.causal ? Causal : 0) | (c.mask != MaskShape::None ? HasMask : 0);
  }

  double maskAt(int64_t b, int64_t h, int64_t i, int64_t j) const {
    if (c.mask == MaskShape::None)
      return 0.0;
    const auto &s = mask.desc.sizes;
    return mask.at({s[0] == 1 ? 0 : b, s[1] == 1 ? 0 : h, s[2] == 1 ? 0 : i,
                    s[3] == 1 ? 0 : j});
  }

  void forward() {
    _mlir_ciface_autopar_cpu_attention_fwd_f32(&q.desc, &k.desc, &v.desc,
                                               &mask.desc, &o.desc, &lse.desc,
                                               c.scale, flags());
  }
};

/// The reference in double: P (B*H*S*T), O (B*H*S*E), LSE (B*H*S), computed
/// from \p qv, \p kv, \p vv (flat [B,H,S,D], [B,Hkv,T,D], [B,Hkv,T,E]).
struct Reference {
  std::vector<double> p, o, lse;
};

Reference referenceForward(const Problem &pr, const std::vector<double> &qv,
                           const std::vector<double> &kv,
                           const std::vector<double> &vv) {
  const Case &c = pr.c;
  Reference ref;
  ref.p.assign(c.b * c.h * c.s * c.t, 0.0);
  ref.o.assign(c.b * c.h * c.s * c.e, 0.0);
  ref.lse.assign(c.b * c.h * c.s, -Inf);
  const int64_t g = c.h / c.hkv;
  std::vector<double> scores(c.t);
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t h = 0; h < c.h; ++h)
      for (int64_t i = 0; i < c.s; ++i) {
        const int64_t kvh = h / g, row = (b * c.h + h) * c.s + i;
        double mx = -Inf;
        for (int64_t j = 0; j < c.t; ++j) {
          double s = -Inf;
          if (!c.causal || j <= i) {
            double dot = 0;
            for (int64_t d = 0; d < c.d; ++d)
              dot += qv[row * c.d + d] *
                     kv[((b * c.hkv + kvh) * c.t + j) * c.d + d];
            s = c.scale * dot + pr.maskAt(b, h, i, j);
          }
          scores[j] = s;
          mx = std::max(mx, s);
        }
        if (mx == -Inf)
          continue; // No visible key: O = 0, LSE = -inf, P = 0.
        double sum = 0;
        for (int64_t j = 0; j < c.t; ++j)
          sum += std::exp(scores[j] - mx);
        ref.lse[row] = mx + std::log(sum);
        for (int64_t j = 0; j < c.t; ++j) {
          double p = std::exp(scores[j] - mx) / sum;
          ref.p[row * c.t + j] = p;
          for (int64_t e = 0; e < c.e; ++e)
            ref.o[row * c.e + e] +=
                p * vv[((b * c.hkv + kvh) * c.t + j) * c.e + e];
        }
      }
  return ref;
}

template <int R> std::vector<double> flat(const TestTensor<R> &t) {
  std::vector<double> out(t.count());
  for (int64_t f = 0; f < t.count(); ++f)
    out[f] = t.at(t.index(f));
  return out;
}

/// The worst error of \p got against \p ref, relative to max |ref| (or
/// \p minScale if larger): +inf
/// for a NaN or an infinity that does not match exactly.
struct Comparison {
  double worst = 0;
  int64_t element = -1;
  double got = 0, want = 0;
};

template <int R>
Comparison compare(const TestTensor<R> &got, const std::vector<double> &ref,
                   double minScale = 0) {
  double scale = minScale;
  for (double r : ref)
    if (std::isfinite(r))
      scale = std::max(scale, std::abs(r));
  Comparison c;
  for (int64_t f = 0; f < got.count(); ++f) {
    double g = got.at(got.index(f)), r = ref[f];
    double error = std::isinf(r)   ? (g == r ? 0.0 : Inf)
                   : std::isnan(g) ? Inf
                                   : std::abs(g - r) / (scale + 1e-30);
    if (error > c.worst || (std::isinf(error) && c.element < 0))
      c = {error, f, g, r};
  }
  return c;
}

/// Every element of \p got within \p relTol * max(max |ref|, \p minScale)
/// of \p ref.
template <int R>
void expectClose(const TestTensor<R> &got, const std::vector<double> &ref,
                 const std::string &what, double minScale = 0,
                 double relTol = 1e-5) {
  Comparison c = compare(got, ref, minScale);
  EXPECT_LE(c.worst, relTol) << what << " element " << c.element << ": got "
                             << c.got << ", expected " << c.want;
}

struct Gradients {
  std::vector<double> dq, dk, dv;
  // The largest sum of |terms| of a dQ or dK element: dS = P * (dP - D)
  // cancels, exactly so with a single visible key, leaving float rounding
  // of the size of the terms, not of the result.
  double dqTerms = 0, dkTerms = 0;
};

/// The reference backward formulas from the reference P and O.
Gradients referenceBackward(const Problem &pr, const Reference &ref,
                            const std::vector<double> &qv,
                            const std::vector<double> &kv,
                            const std::vector<double> &vv,
                            const std::vector<double> &dov) {
  const Case &c = pr.c;
  Gradients gr;
  gr.dq.assign(c.b * c.h * c.s * c.d, 0.0);
  gr.dk.assign(c.b * c.hkv * c.t * c.d, 0.0);
  gr.dv.assign(c.b * c.hkv * c.t * c.e, 0.0);
  std::vector<double> dqTerms(gr.dq.size()), dkTerms(gr.dk.size());
  const int64_t g = c.h / c.hkv;
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t h = 0; h < c.h; ++h)
      for (int64_t i = 0; i < c.s; ++i) {
        const int64_t row = (b * c.h + h) * c.s + i,
                      kvBase = (b * c.hkv + h / g) * c.t;
        double delta = 0;
        for (int64_t e = 0; e < c.e; ++e)
          delta += dov[row * c.e + e] * ref.o[row * c.e + e];
        for (int64_t j = 0; j < c.t; ++j) {
          double p = ref.p[row * c.t + j], dp = 0;
          for (int64_t e = 0; e < c.e; ++e) {
            dp += dov[row * c.e + e] * vv[(kvBase + j) * c.e + e];
            gr.dv[(kvBase + j) * c.e + e] += p * dov[row * c.e + e];
          }
          double ds = p * (dp - delta);
          double dsTerms =
              std::abs(c.scale) * p * (std::abs(dp) + std::abs(delta));
          for (int64_t d = 0; d < c.d; ++d) {
            const double k = kv[(kvBase + j) * c.d + d], q = qv[row * c.d + d];
            gr.dq[row * c.d + d] += c.scale * ds * k;
            gr.dk[(kvBase + j) * c.d + d] += c.scale * ds * q;
            dqTerms[row * c.d + d] += dsTerms * std::abs(k);
            dkTerms[(kvBase + j) * c.d + d] += dsTerms * std::abs(q);
          }
        }
      }
  for (double t : dqTerms)
    gr.dqTerms = std::max(gr.dqTerms, t);
  for (double t : dkTerms)
    gr.dkTerms = std::max(gr.dkTerms, t);
  return gr;
}

/// The kernel backward of \p pr (after its forward), into fresh outputs.
struct KernelGradients {
  T4 dq, dk, dv;
  explicit KernelGradients(Problem &pr)
      : dq({pr.c.b, pr.c.h, pr.c.s, pr.c.d}, *pr.c.outLayout),
        dk({pr.c.b, pr.c.hkv, pr.c.t, pr.c.d}, *pr.c.outLayout),
        dv({pr.c.b, pr.c.hkv, pr.c.t, pr.c.e}, *pr.c.outLayout) {
    run(pr);
  }
  void run(Problem &pr) {
    _mlir_ciface_autopar_cpu_attention_bwd_f32(
        &pr.q.desc, &pr.k.desc, &pr.v.desc, &pr.mask.desc, &pr.o.desc,
        &pr.lse.desc, &pr.dO.desc, &dq.desc, &dk.desc, &dv.desc, pr.c.scale,
        pr.flags());
  }
};

/// dQ and dK within 1e-5 of max |ref|, or of a tenth of their largest
/// term where they cancel to less.
void expectGradientsClose(const KernelGradients &got, const Gradients &want) {
  expectClose(got.dq, want.dq, "dQ", 0.1 * want.dqTerms);
  expectClose(got.dk, want.dk, "dK", 0.1 * want.dkTerms);
}

float invSqrt(int64_t d) { return 1.0f / std::sqrt(static_cast<float>(d)); }

std::vector<Case> cases() {
  const auto none = MaskShape::None;
  std::vector<Case> list = {
      // Single tiles, odd sizes.
      {2, 4, 4, 37, 53, 32, 32, false, none, 0, &Dense, &Dense, invSqrt(32)},
      {2, 4, 4, 37, 53, 32, 32, true, none, 0, &Dense, &Dense, invSqrt(32)},
      {1, 2, 2, 1, 53, 64, 64, false, none, 0, &Dense, &Dense, invSqrt(64)},
      {1, 2, 2, 1, 1, 64, 64, true, none, 0, &Dense, &Dense, 0.5f},
      {1, 2, 1, 53, 37, 32, 32, true, none, 0, &Dense, &Dense, 1.0f},
      // Several tiles each way, GQA; causal with S > T and S < T.
      {1, 8, 2, 130, 200, 64, 64, false, none, 0, &Dense, &Dense, invSqrt(64)},
      {1, 8, 2, 130, 200, 64, 64, true, none, 0, &Dense, &Dense, invSqrt(64)},
      {1, 8, 2, 200, 130, 64, 64, true, none, 0, &Dense, &Dense, invSqrt(64)},
      {2, 2, 2, 128, 128, 32, 32, true, none, 0, &Dense, &Dense, 1.0f},
      // Head dims: 128, E != D, dims not a multiple of 16.
      {1, 2, 2, 70, 129, 128, 128, true, none, 0, &Dense, &Dense, invSqrt(128)},
      {2, 2, 1, 37, 90, 64, 48, false, none, 0, &Dense, &Dense, invSqrt(64)},
      {1, 3, 1, 67, 66, 24, 40, true, none, 0, &Dense, &Dense, invSqrt(24)},
      {1, 2, 2, 29, 71, 5, 3, false, none, 0, &Dense, &Dense, 0.7f},
      // Masks: every broadcast shape, with and without -inf entries.
      {2, 4, 2, 37, 53, 32, 32, false, MaskShape::SharedST, 0, &Dense, &Dense,
       invSqrt(32)},
      {2, 4, 2, 70, 90, 64, 64, false, MaskShape::BatchKeys, 0.3, &Dense,
       &Dense, invSqrt(64)},
      {2, 4, 4, 70, 90, 64, 32, true, MaskShape::Full, 0.2, &Dense, &Dense,
       invSqrt(64)},
      {2, 2, 1, 66, 130, 32, 32, false, MaskShape::Full, 0.5, &Dense, &Dense,
       invSqrt(32)},
      {1, 4, 2, 70, 65, 32, 32, true, MaskShape::HeadQueries, 0.1, &Dense,
       &Dense, invSqrt(32)},
      {2, 2, 2, 100, 100, 64, 64, true, MaskShape::SharedST, 0.1, &Dense,
       &Dense, invSqrt(64)},
      // Non-contiguous operands and outputs.
      {2, 4, 2, 70, 90, 64, 64, true, MaskShape::BatchKeys, 0.1,
       &HeadsInterleaved, &HeadsInterleaved, invSqrt(64)},
      {1, 4, 4, 37, 75, 32, 48, false, MaskShape::Full, 0.1, &Transposed,
       &Strided, invSqrt(32)},
      {1, 2, 1, 75, 37, 16, 16, true, none, 0, &Strided, &Transposed, 1.0f},
      // Masks stored transposed and strided.
      {2, 2, 2, 70, 90, 32, 32, true, MaskShape::Full, 0.1, &Dense, &Dense,
       invSqrt(32), &Transposed},
      {1, 2, 1, 70, 90, 32, 32, false, MaskShape::SharedST, 0.1, &Dense, &Dense,
       invSqrt(32), &Strided},
  };
  return list;
}

TEST(AttentionKernelTest, ForwardMatchesReference) {
  uint32_t seed = 1;
  for (const Case &c : cases()) {
    SCOPED_TRACE(c.describe());
    Problem pr(c, seed += 10);
    pr.forward();
    Reference ref = referenceForward(pr, flat(pr.q), flat(pr.k), flat(pr.v));
    expectClose(pr.o, ref.o, "O");
    expectClose(pr.lse, ref.lse, "LSE");
  }
}

TEST(AttentionKernelTest, BackwardMatchesReference) {
  uint32_t seed = 1000;
  for (const Case &c : cases()) {
    SCOPED_TRACE(c.describe());
    Problem pr(c, seed += 10);
    pr.forward();
    KernelGradients got(pr);
    std::vector<double> qv = flat(pr.q), kv = flat(pr.k), vv = flat(pr.v);
    Reference ref = referenceForward(pr, qv, kv, vv);
    Gradients want = referenceBackward(pr, ref, qv, kv, vv, flat(pr.dO));
    expectGradientsClose(got, want);
    expectClose(got.dv, want.dv, "dV");
  }
}

TEST(AttentionKernelTest, EveryInstructionSetMatchesReference) {
  // The kernels are compiled for AVX-512, AVX2 and SSE2 and pick the best
  // the CPU has; AUTOPAR_TEST_ATTENTION_ISA caps that choice. (On a CPU
  // without AVX-512 "avx512" runs the AVX2 code again.)
  std::vector<Case> all = cases();
  const Case subset[] = {all[1], all[6], all[11], all[12], all[15], all[20]};
  for (const char *isa : {"avx512", "avx2", "baseline"}) {
    ASSERT_EQ(setenv("AUTOPAR_TEST_ATTENTION_ISA", isa, 1), 0);
    uint32_t seed = 5000;
    for (const Case &c : subset) {
      SCOPED_TRACE(std::string(isa) + " " + c.describe());
      Problem pr(c, seed += 10);
      pr.forward();
      KernelGradients got(pr);
      std::vector<double> qv = flat(pr.q), kv = flat(pr.k), vv = flat(pr.v);
      Reference ref = referenceForward(pr, qv, kv, vv);
      Gradients want = referenceBackward(pr, ref, qv, kv, vv, flat(pr.dO));
      expectClose(pr.o, ref.o, "O");
      expectClose(pr.lse, ref.lse, "LSE");
      expectGradientsClose(got, want);
      expectClose(got.dv, want.dv, "dV");
    }
  }
  unsetenv("AUTOPAR_TEST_ATTENTION_ISA");
}

TEST(AttentionKernelTest, ThreadsGiveTheSameBits) {
  // (batch, head) pairs are split among the kernel threads, each computed
  // whole by one: any thread count stores the same floats.
  uint32_t seed = 7000;
  for (const Case &c : cases()) {
    SCOPED_TRACE(c.describe());
    std::vector<double> results[2];
    for (int run = 0; run < 2; ++run) {
      autopar::runtime::setKernelThreads(run == 0 ? 1 : 3);
      Problem pr(c, seed);
      pr.forward();
      KernelGradients got(pr);
      for (const std::vector<double> &part :
           {flat(pr.o), flat(pr.lse), flat(got.dq), flat(got.dk), flat(got.dv)})
        results[run].insert(results[run].end(), part.begin(), part.end());
    }
    autopar::runtime::setKernelThreads(1);
    seed += 10;
    ASSERT_EQ(results[0].size(), results[1].size());
    for (size_t i = 0; i < results[0].size(); ++i)
      ASSERT_EQ(std::memcmp(&results[0][i], &results[1][i], sizeof(double)), 0)
          << "value " << i << ": " << results[0][i] << " vs " << results[1][i];
  }
}

TEST(AttentionKernelTest, FullyMaskedRowsGiveZerosAndNoNaN) {
  // Row 3 of every (b, h) is fully masked in the [B,H,S,T] mask, and in a
  // [B,1,1,T] mask batch 1 masks every key; with T = 0 no row sees a key.
  Case full = {
      2,   2,      1,      70,         80, 32, 32, false, MaskShape::Full,
      0.0, &Dense, &Dense, invSqrt(32)};
  Case keys = {
      2,   2,      1,      20,         80, 32, 32, true, MaskShape::BatchKeys,
      0.0, &Dense, &Dense, invSqrt(32)};
  Case empty = {
      1,   2,      2,      20,         0, 32, 32, false, MaskShape::None,
      0.0, &Dense, &Dense, invSqrt(32)};
  const float minusInf = -std::numeric_limits<float>::infinity();
  for (int which = 0; which < 3; ++which) {
    const Case &c = which == 0 ? full : which == 1 ? keys : empty;
    SCOPED_TRACE(c.describe());
    Problem pr(c, 77);
    std::vector<std::array<int64_t, 3>> dead; // (b, h, i) rows.
    for (int64_t b = 0; b < c.b; ++b)
      for (int64_t h = 0; h < c.h; ++h)
        for (int64_t i = 0; i < c.s; ++i)
          if (which == 2 || (which == 0 && i == 3) || (which == 1 && b == 1))
            dead.push_back({b, h, i});
    if (which == 0)
      for (int64_t b = 0; b < c.b; ++b)
        for (int64_t h = 0; h < c.h; ++h)
          for (int64_t j = 0; j < c.t; ++j)
            pr.mask.at({b, h, 3, j}) = minusInf;
    if (which == 1)
      for (int64_t j = 0; j < c.t; ++j)
        pr.mask.at({1, 0, 0, j}) = minusInf;
    pr.forward();
    KernelGradients got(pr);
    for (const auto &[b, h, i] : dead) {
      EXPECT_EQ(pr.lse.at({b, h, i}), minusInf) << b << "," << h << "," << i;
      for (int64_t e = 0; e < c.e; ++e)
        EXPECT_EQ(pr.o.at({b, h, i, e}), 0.0f);
      for (int64_t d = 0; d < c.d; ++d)
        EXPECT_EQ(got.dq.at({b, h, i, d}), 0.0f);
    }
    // No NaN anywhere, and everything still matches the reference.
    std::vector<double> qv = flat(pr.q), kv = flat(pr.k), vv = flat(pr.v);
    Reference ref = referenceForward(pr, qv, kv, vv);
    Gradients want = referenceBackward(pr, ref, qv, kv, vv, flat(pr.dO));
    expectClose(pr.o, ref.o, "O");
    expectClose(pr.lse, ref.lse, "LSE");
    expectGradientsClose(got, want);
    expectClose(got.dv, want.dv, "dV");
    if (which == 1) { // Batch 1's keys are seen by no query.
      for (int64_t j = 0; j < c.t; ++j)
        for (int64_t d = 0; d < c.d; ++d)
          EXPECT_EQ(got.dk.at({1, 0, j, d}), 0.0f);
    }
  }
}

TEST(AttentionKernelTest, BackwardMatchesFiniteDifferences) {
  // d sum(O * W) / d{Q,K,V} by central differences of the double reference
  // forward, against the kernel backward with dO = W. GQA (2 query heads per
  // kv head), causal, a mask with one -inf entry, two tiles each way.
  Case c = {1,   4,      2,      70,  70, 3, 2, true, MaskShape::Full,
            0.0, &Dense, &Dense, 0.8f};
  Problem pr(c, 4242);
  pr.mask.at({0, 1, 3, 2}) = -std::numeric_limits<float>::infinity();
  pr.forward();
  KernelGradients got(pr);
  std::vector<double> qv = flat(pr.q), kv = flat(pr.k), vv = flat(pr.v),
                      w = flat(pr.dO);
  auto objective = [&] {
    Reference r = referenceForward(pr, qv, kv, vv);
    double sum = 0;
    for (size_t n = 0; n < r.o.size(); ++n)
      sum += r.o[n] * w[n];
    return sum;
  };
  auto differences = [&](std::vector<double> &x) {
    std::vector<double> grad(x.size());
    const double step = 1e-5;
    for (size_t n = 0; n < x.size(); ++n) {
      double saved = x[n];
      x[n] = saved + step;
      double up = objective();
      x[n] = saved - step;
      double down = objective();
      x[n] = saved;
      grad[n] = (up - down) / (2 * step);
    }
    return grad;
  };
  expectClose(got.dq, differences(qv), "dQ");
  expectClose(got.dk, differences(kv), "dK");
  expectClose(got.dv, differences(vv), "dV");
}

TEST(AttentionKernelTest, TestsCanFail) {
  // The comparison catches wrong results: V perturbed after the forward, a
  // NaN, a finite LSE where -inf is expected.
  Case c = {1, 2,      2,      37,         53, 32, 32, false, MaskShape::None,
            0, &Dense, &Dense, invSqrt(32)};
  Problem pr(c, 5);
  pr.forward();
  Reference ref = referenceForward(pr, flat(pr.q), flat(pr.k), flat(pr.v));
  EXPECT_LE(compare(pr.o, ref.o).worst, 1e-5);
  std::vector<double> off = ref.o;
  off[5] += 1e-4;
  EXPECT_GT(compare(pr.o, off).worst, 1e-5);
  pr.v.at({0, 1, 7, 3}) += 1e-3f;
  Reference moved = referenceForward(pr, flat(pr.q), flat(pr.k), flat(pr.v));
  EXPECT_GT(compare(pr.o, moved.o).worst, 1e-5);
  pr.o.at({0, 0, 2, 2}) = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(compare(pr.o, ref.o).worst, Inf);
  ref.lse[3] = -Inf;
  EXPECT_EQ(compare(pr.lse, ref.lse).worst, Inf);
}

// The log-sum-exp merge: attention over the first keys, merged with the
// attention over the rest, is the attention over all of them (what ring
// attention computes block by block). In batch 1 the mask hides every key of
// the first part, so those rows merge an empty part (lse -inf) with a full one.
TEST(AttentionKernelTest, MergingKeyPartsGivesTheWholeAttention) {
  const int64_t b = 2, h = 4, hkv = 2, s = 19, t = 45, d = 32, e = 24;
  const int64_t split = 17;
  T4 q({b, h, s, d}, Dense), k({b, hkv, t, d}, Dense), v({b, hkv, t, e}, Dense);
  T4 mask({b, 1, 1, t}, Dense);
  q.randomize(11, 2.0f);
  k.randomize(12, 2.0f);
  v.randomize(13);
  mask.randomize(14);
  for (int64_t j = 0; j < split; ++j)
    mask.at({1, 0, 0, j}) = -std::numeric_limits<float>::infinity();
  auto run = [&](int64_t first, int64_t count, T4 &out, T3 &lse) {
    // Views of the keys [first, first + count) of k, v and the mask.
    MemRefDescriptor<float, 4> kv = k.desc, vv = v.desc, mv = mask.desc;
    for (MemRefDescriptor<float, 4> *view : {&kv, &vv, &mv}) {
      view->offset += first * view->strides[view == &mv ? 3 : 2];
      view->sizes[view == &mv ? 3 : 2] = count;
    }
    _mlir_ciface_autopar_cpu_attention_fwd_f32(
        &q.desc, &kv, &vv, &mv, &out.desc, &lse.desc, 0.3f, HasMask);
  };
  T4 whole({b, h, s, e}, Dense), first({b, h, s, e}, Dense),
      second({b, h, s, e}, Dense);
  T3 wholeLse({b, h, s}, {{0, 1, 2}}), firstLse({b, h, s}, {{0, 1, 2}}),
      secondLse({b, h, s}, {{0, 1, 2}});
  run(0, t, whole, wholeLse);
  run(0, split, first, firstLse);
  run(split, t - split, second, secondLse);
  EXPECT_EQ(firstLse.at({1, 0, 0}), -std::numeric_limits<float>::infinity());
  _mlir_ciface_autopar_cpu_attention_merge_f32(&first.desc, &firstLse.desc,
                                               &second.desc, &secondLse.desc);
  double worst = 0;
  for (int64_t f = 0; f < whole.count(); ++f)
    worst = std::max(worst, std::abs(double(first.at(first.index(f))) -
                                     whole.at(whole.index(f))));
  EXPECT_LT(worst, 1e-5);
  for (int64_t f = 0; f < wholeLse.count(); ++f)
    EXPECT_NEAR(firstLse.at(firstLse.index(f)), wholeLse.at(wholeLse.index(f)),
                1e-5);
  // The merge is not the identity: the first part alone differs.
  EXPECT_GT(std::abs(double(second.at({0, 0, 0, 0})) - whole.at({0, 0, 0, 0})),
            1e-3);
}

TEST(AttentionKernelDeathTest, MergingPartsOfOtherShapesExitsWithAMessage) {
  T4 out({1, 2, 3, 4}, Dense), part({1, 2, 5, 4}, Dense);
  T3 lse({1, 2, 3}, {{0, 1, 2}}), partLse({1, 2, 5}, {{0, 1, 2}});
  EXPECT_DEATH(_mlir_ciface_autopar_cpu_attention_merge_f32(
                   &out.desc, &lse.desc, &part.desc, &partLse.desc),
               "autopar_cpu_attention_merge_f32: operand sizes do not agree: "
               "out \\[1, 2, 3, 4\\], lse \\[1, 2, 3\\], part out "
               "\\[1, 2, 5, 4\\]");
}

TEST(AttentionKernelDeathTest, MismatchedShapesExitWithAMessage) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Case c = {1, 4,      2,      5,   6, 8, 8, false, MaskShape::Full,
            0, &Dense, &Dense, 1.0f};
  {
    Problem pr(c, 1);
    pr.k.desc.sizes[3] = 4; // K's head dim differs from Q's.
    EXPECT_EXIT(
        pr.forward(), ::testing::ExitedWithCode(1),
        "autopar-run: error: autopar_cpu_attention_fwd_f32: operand sizes "
        "do not agree: K must be \\[1, 2, 6, 8\\] \\(Q \\[1, 4, 5, 8\\], "
        "K \\[1, 2, 6, 4\\], V \\[1, 2, 6, 8\\], mask \\[1, 4, 5, 6\\], "
        "O \\[1, 4, 5, 8\\], LSE \\[1, 4, 5\\]\\)");
  }
  {
    Problem pr(c, 2);
    pr.k.desc.sizes[1] = pr.v.desc.sizes[1] = 3; // 4 heads, 3 kv heads.
    EXPECT_EXIT(
        pr.forward(), ::testing::ExitedWithCode(1),
        "autopar_cpu_attention_fwd_f32: operand sizes do not agree: the "
        "query heads \\(4\\) must be a multiple of the key/value heads "
        "\\(3\\)");
  }
  {
    Problem pr(c, 3);
    pr.mask.desc.sizes[2] = 2; // Neither S = 5 nor 1.
    EXPECT_EXIT(
        pr.forward(), ::testing::ExitedWithCode(1),
        "autopar_cpu_attention_fwd_f32: operand sizes do not agree: each "
        "mask dim must be 1 or the full size \\[1, 4, 5, 6\\]");
  }
  {
    Problem pr(c, 4);
    pr.lse.desc.sizes[2] = 6;
    EXPECT_EXIT(
        pr.forward(), ::testing::ExitedWithCode(1),
        "autopar_cpu_attention_fwd_f32: operand sizes do not agree: LSE "
        "must be \\[1, 4, 5\\]");
  }
  {
    Problem pr(c, 5);
    pr.forward();
    T4 dq({1, 4, 5, 8}, Dense), dk({1, 2, 6, 8}, Dense),
        dv({1, 2, 5, 8}, Dense); // T = 6, not 5.
    EXPECT_EXIT(_mlir_ciface_autopar_cpu_attention_bwd_f32(
                    &pr.q.desc, &pr.k.desc, &pr.v.desc, &pr.mask.desc,
                    &pr.o.desc, &pr.lse.desc, &pr.dO.desc, &dq.desc, &dk.desc,
                    &dv.desc, 1.0f, pr.flags()),
                ::testing::ExitedWithCode(1),
                "autopar_cpu_attention_bwd_f32: operand sizes do not agree: dV "
                "must be \\[1, 2, 6, 8\\] .*dV \\[1, 2, 5, 8\\]\\)");
  }
  {
    Problem pr(c, 6);
    EXPECT_EXIT(_mlir_ciface_autopar_cpu_attention_fwd_f32(
                    &pr.q.desc, &pr.k.desc, &pr.v.desc, &pr.mask.desc,
                    &pr.o.desc, &pr.lse.desc, 1.0f, 4),
                ::testing::ExitedWithCode(1),
                "autopar_cpu_attention_fwd_f32: unknown flags 4");
  }
}

//===----------------------------------------------------------------------===//
// Timing against the unfused algorithm
//===----------------------------------------------------------------------===//

MemRefDescriptor<float, 3> matrices(float *data, int64_t batch, int64_t rows,
                                    int64_t cols, bool transpose = false) {
  // A dense [batch, rows, cols] buffer, or its per-batch transpose.
  MemRefDescriptor<float, 3> m{
      data, data, 0, {batch, rows, cols}, {rows * cols, cols, 1}};
  if (transpose) {
    std::swap(m.sizes[1], m.sizes[2]);
    std::swap(m.strides[1], m.strides[2]);
  }
  return m;
}

/// Attention as the unfused program computes it: batch GEMM through the
/// runtime's BLAS kernel, a softmax pass over the materialized [S, T]
/// scores, another GEMM; the backward from the saved P.
struct Unfused {
  int64_t bh, s, t, d;
  float scale;
  std::vector<float> p, dp, lse;

  Unfused(int64_t bh, int64_t s, int64_t t, int64_t d, float scale)
      : bh(bh), s(s), t(t), d(d), scale(scale), p(bh * s * t), dp(bh * s * t),
        lse(bh * s) {}

  void forward(float *q, float *k, float *v, float *o) {
    auto mq = matrices(q, bh, s, d), mkT = matrices(k, bh, t, d, true),
         mp = matrices(p.data(), bh, s, t), mv = matrices(v, bh, t, d),
         mo = matrices(o, bh, s, d);
    _mlir_ciface_autopar_cpu_batch_matmul_overwrite_f32(&mq, &mkT, &mp);
    for (int64_t r = 0; r < bh * s; ++r) {
      float *row = p.data() + r * t, mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < t; ++j)
        mx = std::max(mx, row[j] *= scale);
      for (int64_t j = 0; j < t; ++j)
        sum += row[j] = std::exp(row[j] - mx);
      for (int64_t j = 0; j < t; ++j)
        row[j] /= sum;
      lse[r] = mx + std::log(sum);
    }
    _mlir_ciface_autopar_cpu_batch_matmul_overwrite_f32(&mp, &mv, &mo);
  }

  void backward(float *q, float *k, float *v, float *o, float *dO, float *dq,
                float *dk, float *dv) {
    auto mq = matrices(q, bh, s, d), mk = matrices(k, bh, t, d),
         mvT = matrices(v, bh, t, d, true), mdo = matrices(dO, bh, s, d),
         mpT = matrices(p.data(), bh, s, t, true),
         mds = matrices(dp.data(), bh, s, t),
         mdsT = matrices(dp.data(), bh, s, t, true),
         mdq = matrices(dq, bh, s, d), mdk = matrices(dk, bh, t, d),
         mdv = matrices(dv, bh, t, d);
    _mlir_ciface_autopar_cpu_batch_matmul_overwrite_f32(&mpT, &mdo, &mdv);
    _mlir_ciface_autopar_cpu_batch_matmul_overwrite_f32(&mdo, &mvT, &mds);
    for (int64_t r = 0; r < bh * s; ++r) {
      float delta = 0;
      for (int64_t e = 0; e < d; ++e)
        delta += dO[r * d + e] * o[r * d + e];
      float *prow = p.data() + r * t, *row = dp.data() + r * t;
      for (int64_t j = 0; j < t; ++j)
        row[j] = prow[j] * (row[j] - delta) * scale;
    }
    _mlir_ciface_autopar_cpu_batch_matmul_overwrite_f32(&mds, &mk, &mdq);
    _mlir_ciface_autopar_cpu_batch_matmul_overwrite_f32(&mdsT, &mq, &mdk);
  }
};

template <typename F> double bestSeconds(F &&f, int repeats) {
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    auto start = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(
                              std::chrono::steady_clock::now() - start)
                              .count());
  }
  return best;
}

double maxDiff(const T4 &a, const float *b) {
  double worst = 0;
  for (int64_t f = 0; f < a.count(); ++f)
    worst = std::max(worst, (double)std::abs(a.at(a.index(f)) - b[f]));
  return worst;
}

TEST(AttentionKernelTest, DISABLED_TimeFusedAgainstUnfused) {
  std::printf("BLAS: %s\n", autopar::runtime::describeBlas().c_str());
  for (int64_t s : {512, 2048}) {
    const int64_t heads = 8, d = 64;
    Case c = {1,     heads,           heads, s,      s,      d,         d,
              false, MaskShape::None, 0,     &Dense, &Dense, invSqrt(d)};
    Problem pr(c, 9);
    double fwd = bestSeconds([&] { pr.forward(); }, 7);
    KernelGradients g(pr);
    double bwd = bestSeconds([&] { g.run(pr); }, 7);

    Unfused u(heads, s, s, d, c.scale);
    std::vector<float> o(heads * s * d), dq(o.size()), dk(o.size()),
        dv(o.size());
    float *q = pr.q.storage.data(), *k = pr.k.storage.data(),
          *v = pr.v.storage.data(), *dO = pr.dO.storage.data();
    double ufwd = bestSeconds([&] { u.forward(q, k, v, o.data()); }, 3);
    double ubwd = bestSeconds(
        [&] {
          u.backward(q, k, v, o.data(), dO, dq.data(), dk.data(), dv.data());
        },
        3);
    std::printf("S=T=%lld H=%lld D=E=%lld: forward fused %.1f ms, unfused %.1f "
                "ms (%.2fx); backward fused %.1f ms, unfused %.1f ms (%.2fx)\n",
                (long long)s, (long long)heads, (long long)d, fwd * 1e3,
                ufwd * 1e3, ufwd / fwd, bwd * 1e3, ubwd * 1e3, ubwd / bwd);
    std::printf("  max |fused - unfused|: O %.2g dQ %.2g dK %.2g dV %.2g\n",
                maxDiff(pr.o, o.data()), maxDiff(g.dq, dq.data()),
                maxDiff(g.dk, dk.data()), maxDiff(g.dv, dv.data()));
    Case causal = c;
    causal.causal = true;
    Problem pc(causal, 9);
    double cfwd = bestSeconds([&] { pc.forward(); }, 7);
    KernelGradients gc(pc);
    double cbwd = bestSeconds([&] { gc.run(pc); }, 7);
    std::printf("  causal, fused only (it skips the key tiles above the "
                "diagonal): forward %.1f ms, backward %.1f ms\n",
                cfwd * 1e3, cbwd * 1e3);
    // Unfused scratch: P and dP, [H, S, T] each; fused: tiles only.
    std::printf("  unfused [S, T] buffers: %.0f MiB\n",
                2.0 * heads * s * s * 4 / (1 << 20));
  }
}

} // namespace
