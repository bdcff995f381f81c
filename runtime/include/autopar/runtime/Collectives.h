//===- Collectives.h - Collectives called by generated code -----*- C++ -*-===//
//
// The autopar_rt_* entry points: what the compiler lowers shard.all_reduce,
// shard.all_gather, shard.reduce_scatter, shard.all_to_all, broadcasts and
// pipeline sends/receives to. Generated code calls them through MLIR's C
// interface (llvm.emit_c_interface) with unranked memrefs (memref<*xf32>,
// made with memref.cast), so that one symbol serves every rank: each buffer
// arrives as a pointer to {int64_t rank; void *descriptor}, the descriptor
// being MLIR's strided one. Views with any strides are accepted (they are
// staged through dense buffers).
//
// `axis` is a grid axis: 0 = dp, 1 = tp, 2 = pp; `peer` and `root` are
// coordinates on that axis. They run on activeCommunicator(). Inconsistent
// arguments (a compiler bug) and communication failures end the run through
// fatalError ("autopar-run: error: rank R: autopar_rt_<name>: ..."), since
// nothing can be thrown through generated code. autopar-run exports them.
//
// docs/design/artifact.md ("Collectives") is the contract.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_COLLECTIVES_H
#define AUTOPAR_RUNTIME_COLLECTIVES_H

#include "autopar/runtime/CpuKernels.h"

#include <cstdint>

namespace autopar::runtime {

/// MLIR's unranked memref (UnrankedMemRefType in CRunnerUtils.h).
struct UnrankedMemRef {
  int64_t rank;
  void *descriptor;
};

} // namespace autopar::runtime

#define AUTOPAR_DECLARE_COLLECTIVES(SUFFIX)                                    \
  AUTOPAR_KERNEL_EXPORT void _mlir_ciface_autopar_rt_all_reduce_##SUFFIX(      \
      autopar::runtime::UnrankedMemRef *in,                                    \
      autopar::runtime::UnrankedMemRef *out, int64_t axis);                    \
  AUTOPAR_KERNEL_EXPORT void _mlir_ciface_autopar_rt_all_reduce_max_##SUFFIX(  \
      autopar::runtime::UnrankedMemRef *in,                                    \
      autopar::runtime::UnrankedMemRef *out, int64_t axis);                    \
  AUTOPAR_KERNEL_EXPORT void _mlir_ciface_autopar_rt_all_gather_##SUFFIX(      \
      autopar::runtime::UnrankedMemRef *in,                                    \
      autopar::runtime::UnrankedMemRef *out, int64_t axis, int64_t gatherDim); \
  AUTOPAR_KERNEL_EXPORT void _mlir_ciface_autopar_rt_reduce_scatter_##SUFFIX(  \
      autopar::runtime::UnrankedMemRef *in,                                    \
      autopar::runtime::UnrankedMemRef *out, int64_t axis,                     \
      int64_t scatterDim);                                                     \
  AUTOPAR_KERNEL_EXPORT void _mlir_ciface_autopar_rt_all_to_all_##SUFFIX(      \
      autopar::runtime::UnrankedMemRef *in,                                    \
      autopar::runtime::UnrankedMemRef *out, int64_t axis, int64_t splitDim,   \
      int64_t concatDim);                                                      \
  AUTOPAR_KERNEL_EXPORT void _mlir_ciface_autopar_rt_broadcast_##SUFFIX(       \
      autopar::runtime::UnrankedMemRef *buffer, int64_t axis, int64_t root);   \
  AUTOPAR_KERNEL_EXPORT void _mlir_ciface_autopar_rt_send_##SUFFIX(            \
      autopar::runtime::UnrankedMemRef *buffer, int64_t peer, int64_t axis);   \
  AUTOPAR_KERNEL_EXPORT void _mlir_ciface_autopar_rt_recv_##SUFFIX(            \
      autopar::runtime::UnrankedMemRef *buffer, int64_t peer, int64_t axis);

extern "C" {
/// This rank's coordinate on grid axis \p axis (shard.process_multi_index).
/// A plain C function: no memref, so no C-interface wrapper.
AUTOPAR_KERNEL_EXPORT int64_t autopar_rt_grid_coord(int64_t axis);

AUTOPAR_DECLARE_COLLECTIVES(f32)
AUTOPAR_DECLARE_COLLECTIVES(f64)
AUTOPAR_DECLARE_COLLECTIVES(i32)
AUTOPAR_DECLARE_COLLECTIVES(i64)
AUTOPAR_DECLARE_COLLECTIVES(bf16)
AUTOPAR_DECLARE_COLLECTIVES(f16)
} // extern "C"

#endif // AUTOPAR_RUNTIME_COLLECTIVES_H
