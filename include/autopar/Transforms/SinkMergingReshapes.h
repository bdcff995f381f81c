//===- SinkMergingReshapes.h - Keep merged dims apart through ops -*- C++ -*-//
//
// See autopar-sink-merging-reshapes in Passes.td.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_TRANSFORMS_SINKMERGINGRESHAPES_H
#define AUTOPAR_TRANSFORMS_SINKMERGINGRESHAPES_H

namespace mlir::func {
class FuncOp;
} // namespace mlir::func

namespace autopar {

/// Moves every reshape of `func` that merges or splits dims of size > 1
/// across the linalg ops it feeds or is fed by, so that those ops iterate
/// over the dims apart (torch's attention: [batch * heads, seq, d] becomes
/// [batch, heads, seq, d]). Contractions without batch dims, convolutions
/// and pools are left as they are.
void sinkMergingReshapes(mlir::func::FuncOp func);

} // namespace autopar

#endif // AUTOPAR_TRANSFORMS_SINKMERGINGRESHAPES_H
