//===- Scratch.h - Reusable per-thread kernel buffers -----------*- C++ -*-===//
//
// im2col and operand packing need large temporary buffers on every call.
// Allocating them each time would hand the kernel fresh, unfaulted pages on
// every call (glibc returns big blocks to the OS); keeping one buffer per
// purpose per thread makes the steady state allocation-free.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CPU_SCRATCH_H
#define AUTOPAR_RUNTIME_CPU_SCRATCH_H

#include <cstddef>

namespace autopar::runtime::cpu {

/// What a scratch buffer is for; buffers of different slots never alias.
enum class ScratchSlot {
  GemmA,
  GemmB,
  GemmC,
  ConvFilter,
  ConvColumns,
  ConvOutput,
  AttentionTiles,
  Count,
};

/// A buffer of at least \p count floats for \p slot on the calling thread,
/// 64-byte aligned, with unspecified contents. Valid until the next call with
/// the same slot on the same thread. Exits via kernelFatal if out of memory.
float *scratch(ScratchSlot slot, size_t count);

} // namespace autopar::runtime::cpu

#endif // AUTOPAR_RUNTIME_CPU_SCRATCH_H
