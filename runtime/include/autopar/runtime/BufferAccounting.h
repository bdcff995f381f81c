//===- BufferAccounting.h - What the generated code allocates --*- C++ -*-===//
//
// The CPU code autopar-compile generates allocates its buffers through
// `_mlir_memref_to_llvm_aligned_alloc` and frees them through
// `_mlir_memref_to_llvm_free` (MLIR's memref lowering with generic, aligned
// allocation functions), which the runtime defines: it counts the bytes
// live, so that autopar-run measures what the plan report predicts. They
// live in AutoparRuntime beside the trainer that reads the counts, which
// links them into autopar-run (exported to the generated library).
//
// A training step compiled for CPU ranks also calls `autopar_rt_step_phase`
// where each micro-batch's forward begins (phase 0) and where its backward
// begins (phase 1): the bytes allocated in between and still live when the
// backward begins are the activations the step keeps for its backward, the
// report's `memory_breakdown_bytes.activations` for a plan without pipeline
// stages (docs/distributed-training.md, "Activation memory").
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_BUFFERACCOUNTING_H
#define AUTOPAR_RUNTIME_BUFFERACCOUNTING_H

#include <cstdint>

namespace autopar::runtime {

/// What the generated code's buffers have held since the last
/// resetBufferPeaks().
struct BufferStats {
  /// Bytes allocated and not yet freed, now.
  int64_t live = 0;
  /// The most bytes live at once.
  int64_t peak = 0;
  /// The most bytes a forward allocated that were still live when its
  /// backward began (autopar_rt_step_phase), over the micro-batches.
  int64_t keptForBackward = 0;
  /// How many buffers those bytes were in (each rounded up to its
  /// alignment, 64 bytes for CPU code).
  int64_t buffersKeptForBackward = 0;
  /// How many backwards began (zero for code without phase marks).
  int64_t backwards = 0;
};

/// The counts now.
BufferStats bufferStats();

/// Starts new peaks: `peak` from the bytes live now, no forward seen.
void resetBufferPeaks();

} // namespace autopar::runtime

extern "C" {
/// MLIR's generic allocation functions (finalize-memref-to-llvm with
/// use-generic-functions), counted.
void *_mlir_memref_to_llvm_alloc(uint64_t size);
void *_mlir_memref_to_llvm_aligned_alloc(uint64_t alignment, uint64_t size);
void _mlir_memref_to_llvm_free(void *ptr);
/// Phase 0: a micro-batch's forward begins; 1: its backward begins.
void autopar_rt_step_phase(int32_t phase);
}

#endif // AUTOPAR_RUNTIME_BUFFERACCOUNTING_H
