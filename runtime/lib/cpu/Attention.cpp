//===- Attention.cpp - Fused attention (FlashAttention-2) on the CPU ------===//
//
// The extern "C" attention entry points of CpuKernels.h: softmax(scale * Q K^T
// + mask) V and its gradients, computed tile by tile with FlashAttention-2's
// online softmax, so that no S x T matrix ever exists. Besides the operands,
// a call uses a few hundred KiB of per-thread scratch for the tiles.
//
// This file checks and unpacks the operands and picks an instruction set;
// the tile loops are in AttentionTiles.inc. All tile products there have one
// shape, C[r][0:n] (+)= sum_p A(r, p) * B[p][0:n] with B and C row-major and
// n a whole number of vectors (head dims are zero-padded to HeadPad in
// scratch), and go through one register-blocked micro-kernel; exp is a
// vectorizable polynomial (libm's expf is a scalar call per score, which
// would cost as much as the products).
//
// Instruction sets. The runtime is built for baseline x86-64. The
// micro-kernel's register blocking and vector width differ between AVX-512
// (32 registers of 16 floats), AVX2 (16 of 8) and SSE2 (16 of 4), which
// GCC's target_clones (Multiversion.h) cannot express, so AttentionTiles.inc
// is compiled once per ISA under '#pragma GCC target' with its own
// parameters, and the entry points pick one with __builtin_cpu_supports.
//
//===----------------------------------------------------------------------===//

#include "autopar/runtime/CpuKernels.h"

#include "KernelError.h"
#include "Scratch.h"
#include "ThreadPool.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

using autopar::runtime::MemRefDescriptor;
using namespace autopar::runtime::cpu;

namespace {

constexpr int64_t Br = 64;      // queries per tile
constexpr int64_t Bc = 64;      // keys per tile
constexpr int64_t HeadPad = 16; // head dims are padded to this in scratch
constexpr float Inf = std::numeric_limits<float>::infinity();

int64_t roundUp(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

/// A rank-4 operand: element (i0, i1, i2, i3) at
/// data[i0 * s[0] + i1 * s[1] + i2 * s[2] + i3 * s[3]].
struct View4 {
  float *data = nullptr;
  int64_t s[4] = {0, 0, 0, 0};

  float *row(int64_t i0, int64_t i1, int64_t i2) const {
    return data + i0 * s[0] + i1 * s[1] + i2 * s[2];
  }
};

View4 view(const MemRefDescriptor<float, 4> &m) {
  View4 v;
  v.data = m.aligned + m.offset;
  for (int d = 0; d < 4; ++d)
    v.s[d] = m.strides[d];
  return v;
}

/// The additive mask as a full [B, H, S, T] view: broadcast dims get stride 0.
View4 broadcastView(const MemRefDescriptor<float, 4> &m) {
  View4 v = view(m);
  for (int d = 0; d < 4; ++d)
    if (m.sizes[d] == 1)
      v.s[d] = 0;
  return v;
}

/// Everything a kernel body needs, unpacked from the descriptors.
struct Problem {
  int64_t batch, heads, kvHeads, s, t, d, e;
  int64_t group; // Query heads per key/value head.
  float scale;
  bool causal, hasMask;
  View4 q, k, v, mask, o, dO, dQ, dK, dV;
  float *lse;
  int64_t lseStride[3];

  float *lseAt(int64_t b, int64_t h, int64_t i) const {
    return lse + b * lseStride[0] + h * lseStride[1] + i * lseStride[2];
  }
};

/// Tile buffers carved from the calling thread's attention scratch, each
/// 64-byte aligned.
class TileScratch {
public:
  /// Room for buffers of the given sizes, in floats, in that order.
  explicit TileScratch(std::initializer_list<int64_t> counts) {
    size_t total = 0;
    for (int64_t c : counts)
      total += static_cast<size_t>(roundUp(c, Align));
    next = scratch(ScratchSlot::AttentionTiles, total);
    end = next + total;
  }
  /// The next buffer; \p count must be the next size given to the
  /// constructor.
  float *take(int64_t count) {
    float *p = next;
    next += roundUp(count, Align);
    if (next > end)
      kernelFatal("attention", "tile scratch overrun (a bug in Attention)");
    return p;
  }

private:
  static constexpr int64_t Align = 16; // floats
  float *next, *end;
};

//===----------------------------------------------------------------------===//
// One instance of the tile loops per instruction set
//===----------------------------------------------------------------------===//

// The micro-kernel keeps RowBlock x ColVecs vectors of C in registers:
// AVX-512 6 x 4 zmm (24 of 32 registers; per step 4 loads and 6 broadcasts
// feed 24 FMAs), AVX2 2 x 4 ymm and SSE2 2 x 4 xmm (8 of 16 registers,
// leaving room for the B vectors and the broadcast). Measured on a Xeon with
// two AVX-512 FMA units at S = T = 2048, D = 64, these run at about 90% of
// the FMA peak; 4 x 4 zmm was 5% slower, 3 x 4 ymm spills.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) &&         \
    defined(__ELF__)
#define AUTOPAR_ATTENTION_DISPATCH 1

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")
namespace avx512 {
constexpr int VecBytes = 64, RowBlock = 6, ColVecs = 4;
#include "AttentionTiles.inc"
} // namespace avx512
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace avx2 {
constexpr int VecBytes = 32, RowBlock = 2, ColVecs = 4;
#include "AttentionTiles.inc"
} // namespace avx2
#pragma GCC pop_options
#endif

namespace baseline {
constexpr int VecBytes = 16, RowBlock = 2, ColVecs = 4;
#include "AttentionTiles.inc"
} // namespace baseline

using KernelBody = void (*)(const Problem &);

struct Implementation {
  KernelBody forward, backward;
};

/// Instruction sets, from the least capable up.
enum class Isa { Baseline, Avx2, Avx512 };

Isa detectIsa() {
#ifdef AUTOPAR_ATTENTION_DISPATCH
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
    return Isa::Baseline;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq"))
    return Isa::Avx512;
  return Isa::Avx2;
#endif
  return Isa::Baseline;
}

/// The best instance for this CPU. AUTOPAR_TEST_ATTENTION_ISA (avx2 or
/// baseline) caps the choice, so that tests reach every instance on one
/// machine; read on every call, so that a test can change it.
Implementation implementation() {
  static const Isa best = detectIsa();
  Isa isa = best;
  if (const char *cap = std::getenv("AUTOPAR_TEST_ATTENTION_ISA")) {
    if (std::strcmp(cap, "baseline") == 0)
      isa = Isa::Baseline;
    else if (std::strcmp(cap, "avx2") == 0)
      isa = std::min(isa, Isa::Avx2);
  }
  switch (isa) {
#ifdef AUTOPAR_ATTENTION_DISPATCH
  case Isa::Avx512:
    return {avx512::forward, avx512::backward};
  case Isa::Avx2:
    return {avx2::forward, avx2::backward};
#endif
  default:
    return {baseline::forward, baseline::backward};
  }
}

//===----------------------------------------------------------------------===//
// Argument checks
//===----------------------------------------------------------------------===//

constexpr int32_t CausalFlag = 1, MaskFlag = 2;

/// The operands of either kernel; the gradients are null for the forward.
struct Operands {
  MemRefDescriptor<float, 4> *q, *k, *v, *mask, *o;
  MemRefDescriptor<float, 3> *lse;
  MemRefDescriptor<float, 4> *dO = nullptr, *dQ = nullptr, *dK = nullptr,
                             *dV = nullptr;
};

/// Checks that the operands' sizes agree with each other and the flags, and
/// unpacks them; ends the run through kernelFatal otherwise.
Problem unpack(const char *kernel, const Operands &ops, float scale,
               int32_t flags) {
  if (flags & ~(CausalFlag | MaskFlag))
    kernelFatal(kernel, "unknown flags " + std::to_string(flags) +
                            " (bit 0: causal, bit 1: mask); the generated "
                            "program is inconsistent, which is a compiler bug");
  const bool hasMask = flags & MaskFlag;
  const int64_t batch = ops.q->sizes[0], heads = ops.q->sizes[1],
                s = ops.q->sizes[2], d = ops.q->sizes[3];
  const int64_t kvHeads = ops.k->sizes[1], t = ops.k->sizes[2],
                e = ops.v->sizes[3];

  auto fail = [&](const std::string &what) {
    std::string all = "Q " + formatSizes(*ops.q) + ", K " +
                      formatSizes(*ops.k) + ", V " + formatSizes(*ops.v);
    if (hasMask)
      all += ", mask " + formatSizes(*ops.mask);
    all += ", O " + formatSizes(*ops.o) + ", LSE " + formatSizes(*ops.lse);
    if (ops.dO)
      all += ", dO " + formatSizes(*ops.dO) + ", dQ " + formatSizes(*ops.dQ) +
             ", dK " + formatSizes(*ops.dK) + ", dV " + formatSizes(*ops.dV);
    shapeMismatch(kernel, what + " (" + all + ")");
  };
  auto expect = [&](const char *name, const int64_t *sizes,
                    std::initializer_list<int64_t> want) {
    int i = 0;
    for (int64_t w : want) {
      if (sizes[i] != w) {
        std::string text = std::string(name) + " must be [";
        int j = 0;
        for (int64_t x : want)
          text += std::to_string(x) + (++j < int(want.size()) ? ", " : "]");
        fail(text);
      }
      ++i;
    }
  };

  for (const auto *m :
       {ops.q, ops.k, ops.v, ops.o, ops.dO, ops.dQ, ops.dK, ops.dV})
    if (m)
      for (int i = 0; i < 4; ++i)
        if (m->sizes[i] < 0)
          fail("negative size");
  if (kvHeads < 1 || heads % kvHeads != 0)
    fail("the query heads (" + std::to_string(heads) +
         ") must be a multiple of the key/value heads (" +
         std::to_string(kvHeads) + ")");
  expect("K", ops.k->sizes, {batch, kvHeads, t, d});
  expect("V", ops.v->sizes, {batch, kvHeads, t, e});
  expect("O", ops.o->sizes, {batch, heads, s, e});
  expect("LSE", ops.lse->sizes, {batch, heads, s});
  if (hasMask) {
    const int64_t full[4] = {batch, heads, s, t};
    for (int i = 0; i < 4; ++i)
      if (ops.mask->sizes[i] != full[i] && ops.mask->sizes[i] != 1)
        fail("each mask dim must be 1 or the full size [" +
             std::to_string(batch) + ", " + std::to_string(heads) + ", " +
             std::to_string(s) + ", " + std::to_string(t) + "]");
  }
  if (ops.dO) {
    expect("dO", ops.dO->sizes, {batch, heads, s, e});
    expect("dQ", ops.dQ->sizes, {batch, heads, s, d});
    expect("dK", ops.dK->sizes, {batch, kvHeads, t, d});
    expect("dV", ops.dV->sizes, {batch, kvHeads, t, e});
  }

  Problem p;
  p.batch = batch;
  p.heads = heads;
  p.kvHeads = kvHeads;
  p.s = s;
  p.t = t;
  p.d = d;
  p.e = e;
  p.group = heads / kvHeads;
  p.scale = scale;
  p.causal = flags & CausalFlag;
  p.hasMask = hasMask;
  p.q = view(*ops.q);
  p.k = view(*ops.k);
  p.v = view(*ops.v);
  if (hasMask)
    p.mask = broadcastView(*ops.mask);
  p.o = view(*ops.o);
  p.lse = ops.lse->aligned + ops.lse->offset;
  for (int i = 0; i < 3; ++i)
    p.lseStride[i] = ops.lse->strides[i];
  if (ops.dO) {
    p.dO = view(*ops.dO);
    p.dQ = view(*ops.dQ);
    p.dK = view(*ops.dK);
    p.dV = view(*ops.dV);
  }
  return p;
}

} // namespace

extern "C" {

AUTOPAR_KERNEL_EXPORT void _mlir_ciface_autopar_cpu_attention_fwd_f32(
    MemRefDescriptor<float, 4> *q, MemRefDescriptor<float, 4> *k,
    MemRefDescriptor<float, 4> *v, MemRefDescriptor<float, 4> *mask,
    MemRefDescriptor<float, 4> *out, MemRefDescriptor<float, 3> *lse,
    float scale, int32_t flags) {
  implementation().forward(unpack("autopar_cpu_attention_fwd_f32",
                                  {q, k, v, mask, out, lse}, scale, flags));
}

AUTOPAR_KERNEL_EXPORT void _mlir_ciface_autopar_cpu_attention_bwd_f32(
    MemRefDescriptor<float, 4> *q, MemRefDescriptor<float, 4> *k,
    MemRefDescriptor<float, 4> *v, MemRefDescriptor<float, 4> *mask,
    MemRefDescriptor<float, 4> *out, MemRefDescriptor<float, 3> *lse,
    MemRefDescriptor<float, 4> *dout, MemRefDescriptor<float, 4> *dq,
    MemRefDescriptor<float, 4> *dk, MemRefDescriptor<float, 4> *dv, float scale,
    int32_t flags) {
  implementation().backward(unpack("autopar_cpu_attention_bwd_f32",
                                   {q, k, v, mask, out, lse, dout, dq, dk, dv},
                                   scale, flags));
}

} // extern "C"
