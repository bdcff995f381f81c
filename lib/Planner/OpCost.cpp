//===- OpCost.cpp - FLOPs and bytes of structured ops ---------------------===//
//
// FLOPs come from the iteration domain: a contraction or convolution does 2
// per point (one multiply, one add; element-type casts in its body ride along
// for free in GEMM kernels), any other linalg op one per arith/math op of its
// body per point. Bytes are what the op reads and writes at the IR's element
// types: all inputs, the inits whose value the body reads, the results.
// Reshapes, contiguous slices and constants move nothing at run time
// (bufferization turns them into views or into data in the binary).
//
//===----------------------------------------------------------------------===//

#include "autopar/Planner/OpCost.h"
#include "autopar/Dialect/AutoparOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinTypes.h"

#include <algorithm>

using namespace mlir;
using namespace autopar;

namespace {

double elementBytes(Type type) {
  if (auto complex = dyn_cast<ComplexType>(type))
    return 2 * elementBytes(complex.getElementType());
  if (type.isIndex())
    return 8;
  if (type.isIntOrFloat())
    return double((type.getIntOrFloatBitWidth() + 7) / 8);
  return 8; // pointers, opaque handles
}

/// Elements of a static shape; a dynamic dim counts as 1 (this is a lower
/// bound: the planner only costs static shapes).
double numElements(ArrayRef<int64_t> shape) {
  double n = 1;
  for (int64_t d : shape)
    if (!ShapedType::isDynamic(d))
      n *= double(d);
  return n;
}

/// Bytes of a value: the whole tensor (or memref), or one scalar.
double valueBytes(Value v) {
  Type type = v.getType();
  if (auto shaped = dyn_cast<ShapedType>(type)) {
    if (!shaped.hasRank())
      return elementBytes(shaped.getElementType());
    return numElements(shaped.getShape()) *
           elementBytes(shaped.getElementType());
  }
  return elementBytes(type);
}

double resultBytes(Operation *op) {
  double bytes = 0;
  for (Value r : op->getResults())
    bytes += valueBytes(r);
  return bytes;
}

/// Any op: reads every operand, writes every result.
OpCost bytesOnly(Operation *op) {
  OpCost cost;
  for (Value v : op->getOperands())
    cost.bytesRead += valueBytes(v);
  cost.bytesWritten = resultBytes(op);
  return cost;
}

OpCost freeOp() {
  OpCost cost;
  cost.executes = false;
  return cost;
}

/// Arithmetic ops in a linalg body, each one FLOP per iteration point.
double bodyOps(linalg::LinalgOp op) {
  double count = 0;
  op.getBlock()->walk([&](Operation *inner) {
    if (isa<arith::ConstantOp>(inner))
      return;
    StringRef dialect =
        inner->getDialect() ? inner->getDialect()->getNamespace() : StringRef();
    if (dialect == "arith" || dialect == "math")
      ++count;
  });
  return count;
}

bool bodyMultiplies(linalg::LinalgOp op) {
  bool found = false;
  op.getBlock()->walk([&](Operation *inner) {
    if (isa<arith::MulFOp, arith::MulIOp>(inner))
      found = true;
  });
  return found;
}

double product(ArrayRef<int64_t> ranges, ArrayRef<unsigned> dims) {
  double n = 1;
  for (unsigned d : dims)
    if (!ShapedType::isDynamic(ranges[d]))
      n *= double(ranges[d]);
  return n;
}

OpCost linalgCost(linalg::LinalgOp op) {
  OpCost cost;
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  double points = numElements(ranges);

  for (OpOperand *in : op.getDpsInputOperands())
    cost.bytesRead += valueBytes(in->get());
  for (OpOperand &init : op.getDpsInitsMutable())
    if (op.payloadUsesValueFromOperand(&init))
      cost.bytesRead += valueBytes(init.get());
  cost.bytesWritten = resultBytes(op);

  if (linalg::isaContractionOpInterface(op)) {
    cost.flops = 2 * points;
    cost.kind = ComputeKind::Gemm;
    if (FailureOr<linalg::ContractionDimensions> dims =
            linalg::inferContractionDims(op);
        succeeded(dims))
      cost.minDim =
          std::min({product(ranges, dims->m), product(ranges, dims->n),
                    product(ranges, dims->k)});
    return cost;
  }
  // Pooling ops also satisfy the convolution interface; they multiply
  // nothing and are counted like any other body below.
  if (linalg::isaConvolutionOpInterface(op) && bodyMultiplies(op)) {
    cost.flops = 2 * points;
    FailureOr<linalg::ConvolutionDimensions> dims =
        linalg::inferConvolutionDims(op);
    // As an implicit GEMM: M = batch * output pixels, N = output channels,
    // K = input channels * filter taps. Depthwise convolutions (no channel
    // reduction) are no GEMM: CUDA-core kernels, memory-bound.
    if (succeeded(dims) && !dims->outputChannel.empty() &&
        !dims->inputChannel.empty()) {
      cost.kind = ComputeKind::Gemm;
      double m =
          product(ranges, dims->batch) * product(ranges, dims->outputImage);
      double n = product(ranges, dims->outputChannel);
      double k = product(ranges, dims->inputChannel) *
                 product(ranges, dims->filterLoop);
      cost.minDim = std::min({m, n, k});
    }
    return cost;
  }
  cost.flops = points * bodyOps(op);
  return cost;
}

/// A slice is a view (no copy) when it is one contiguous block of the
/// source: unit strides, and every dim outside the innermost partial one
/// taken with size 1.
bool isContiguousSlice(tensor::ExtractSliceOp op) {
  RankedTensorType source = op.getSourceType();
  if (!source.hasStaticShape())
    return false;
  ArrayRef<int64_t> sizes = op.getStaticSizes();
  ArrayRef<int64_t> strides = op.getStaticStrides();
  if (llvm::any_of(strides, [](int64_t s) { return s != 1; }) ||
      llvm::any_of(sizes, ShapedType::isDynamic))
    return false;
  int64_t d = source.getRank() - 1;
  while (d >= 0 && sizes[d] == source.getDimSize(d))
    --d;
  // Dims 0..d-1 (outside the partial dim d) must be single rows.
  for (int64_t i = 0; i < d; ++i)
    if (sizes[i] != 1)
      return false;
  return true;
}

} // namespace

OpCost autopar::getOpCost(Operation *op) {
  if (op->hasTrait<OpTrait::IsTerminator>())
    return freeOp();
  if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp, tensor::EmptyOp,
          tensor::CastOp, tensor::ReshapeOp, tensor::DimOp, tensor::RankOp,
          arith::ConstantOp>(op))
    return freeOp();
  if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op))
    return linalgCost(linalgOp);
  if (auto attention = dyn_cast<AttentionOp>(op)) {
    // One FlashAttention kernel, as priceFusedAttention prices the pattern
    // it replaces: both products (halved under the causal mask, whose
    // upper tiles the kernel skips), reads of Q, K, V and the mask, the
    // output and its statistics written.
    auto query = cast<ShapedType>(attention.getQuery().getType());
    auto key = cast<ShapedType>(attention.getKey().getType());
    auto value = cast<ShapedType>(attention.getValue().getType());
    double products = double(query.getDimSize(0)) * query.getDimSize(1) *
                      query.getDimSize(2) * key.getDimSize(2) *
                      (query.getDimSize(3) + value.getDimSize(3));
    OpCost cost;
    cost.kind = ComputeKind::Attention;
    cost.flops = 2 * products / (attention.getCausal() ? 2 : 1);
    cost.minDim = double(key.getDimSize(2));
    for (Value v : {attention.getQuery(), attention.getKey(),
                    attention.getValue(), attention.getMask()})
      if (v)
        cost.bytesRead += valueBytes(v);
    cost.bytesWritten =
        valueBytes(op->getResult(0)) + valueBytes(op->getResult(1));
    return cost;
  }
  if (auto ce = dyn_cast<SoftmaxCrossEntropyOp>(op)) {
    // One pass over the logits (docs/design/cross-entropy.md): per element
    // a max, a subtraction, an exponential, a sum and the label's compare;
    // the inits are only written.
    OpCost cost;
    cost.bytesRead = valueBytes(ce.getLogits()) + valueBytes(ce.getLabels());
    cost.bytesWritten =
        valueBytes(op->getResult(0)) + valueBytes(op->getResult(1));
    cost.flops =
        5 * double(cast<ShapedType>(ce.getLogits().getType()).getNumElements());
    return cost;
  }

  // Data movement: bytes only.
  if (auto slice = dyn_cast<tensor::ExtractSliceOp>(op)) {
    if (isContiguousSlice(slice))
      return freeOp();
    OpCost cost;
    cost.bytesRead = cost.bytesWritten = valueBytes(slice.getResult());
    return cost;
  }
  if (auto insert = dyn_cast<tensor::InsertSliceOp>(op)) {
    // Copies the source into the destination's buffer; the rest of the
    // destination stays in place.
    OpCost cost;
    cost.bytesRead = cost.bytesWritten = valueBytes(insert.getSource());
    return cost;
  }
  if (auto pad = dyn_cast<tensor::PadOp>(op)) {
    OpCost cost;
    cost.bytesRead = valueBytes(pad.getSource());
    cost.bytesWritten = valueBytes(pad.getResult());
    return cost;
  }
  // tensor.concat and anything else: read all operands, write all results.
  // This is conservative for ops that could work in place.
  return bytesOnly(op);
}
