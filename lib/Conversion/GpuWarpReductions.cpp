//===- GpuWarpReductions.cpp - one warp per reduced row -------------------===//
//
// See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "ReductionCombiner.h"
#include "autopar/Conversion/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Utils/Utils.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/TypeSwitch.h"

namespace autopar {
#define GEN_PASS_DEF_GPUWARPREDUCTIONS
#include "autopar/Conversion/Passes.h.inc"
} // namespace autopar

using namespace mlir;
using autopar::Combiner;
using autopar::combinerKind;
using autopar::combineWith;
using autopar::matchCombiner;

namespace {

/// Threads of a warp on every NVIDIA GPU autopar targets; also the width of
/// the shuffles.
constexpr int64_t kWarpSize = 32;

/// The generic's number of leading parallel dims when its loops are parallel
/// dims followed by reduction dims only, and its one output is indexed by the
/// parallel dims in order.
std::optional<unsigned> rowDims(linalg::GenericOp op) {
  SmallVector<utils::IteratorType> kinds = op.getIteratorTypesArray();
  unsigned parallel = 0;
  while (parallel < kinds.size() && linalg::isParallelIterator(kinds[parallel]))
    ++parallel;
  if (parallel == kinds.size())
    return std::nullopt;
  for (unsigned i = parallel; i < kinds.size(); ++i)
    if (!linalg::isReductionIterator(kinds[i]))
      return std::nullopt;
  AffineMap outMap = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  if (outMap.getNumResults() != parallel)
    return std::nullopt;
  for (unsigned i = 0; i < parallel; ++i)
    if (outMap.getResult(i) != getAffineDimExpr(i, op.getContext()))
      return std::nullopt;
  return parallel;
}

struct GpuWarpReductionsPass
    : autopar::impl::GpuWarpReductionsBase<GpuWarpReductionsPass> {
  using Base::Base;

  /// Whether `op` qualifies (Passes.td); fills the pieces of the rewrite.
  bool qualifies(linalg::GenericOp op, Combiner &combiner, unsigned &rows,
                 SmallVector<int64_t> &ranges) {
    if (!op.hasPureBufferSemantics() || op.getNumDpsInits() != 1)
      return false;
    std::optional<unsigned> parallel = rowDims(op);
    std::optional<Combiner> combine = matchCombiner(op);
    if (!parallel || !combine)
      return false;
    auto outType =
        dyn_cast<MemRefType>(op.getDpsInitOperand(0)->get().getType());
    if (!outType || !outType.getElementType().isF32())
      return false;
    for (Operation &inner : op.getRegion().front().without_terminator())
      if (!isa<linalg::IndexOp>(inner) && !isMemoryEffectFree(&inner))
        return false;
    ranges = op.getStaticLoopRanges();
    int64_t reduced = 1;
    for (auto [i, size] : llvm::enumerate(ranges)) {
      if (ShapedType::isDynamic(size))
        return false;
      if (i >= *parallel)
        reduced *= size;
    }
    if (reduced < minReductionSize)
      return false;
    combiner = *combine;
    rows = *parallel;
    return true;
  }

  void rewrite(IRRewriter &rewriter, linalg::GenericOp op,
               const Combiner &combiner, unsigned rows,
               ArrayRef<int64_t> ranges) {
    Location loc = op.getLoc();
    rewriter.setInsertionPoint(op);
    auto index = [&](OpBuilder &b, int64_t v) -> Value {
      return arith::ConstantIndexOp::create(b, loc, v);
    };
    int64_t reduced = 1;
    for (int64_t size : ranges.drop_front(rows))
      reduced *= size;
    SmallVector<Value> lower(rows + 1, index(rewriter, 0));
    SmallVector<Value> upper, steps(rows + 1, index(rewriter, 1));
    for (int64_t size : ranges.take_front(rows))
      upper.push_back(index(rewriter, size));
    upper.push_back(index(rewriter, kWarpSize));
    Value output = op.getDpsInitOperand(0)->get();
    Block &body = op.getRegion().front();
    Type elementType = cast<MemRefType>(output.getType()).getElementType();
    arith::AtomicRMWKind kind = *combinerKind(combiner.op);

    scf::ParallelOp::create(
        rewriter, loc, lower, upper, steps,
        [&](OpBuilder &b, Location loc, ValueRange ivs) {
          Value lane = ivs.back();
          ValueRange row = ivs.drop_back();
          Value identity = arith::ConstantOp::create(
              b, loc, arith::getIdentityValueAttr(kind, elementType, b, loc));
          auto laneLoop = scf::ForOp::create(
              b, loc, lane, index(b, reduced), index(b, kWarpSize),
              ValueRange{identity},
              [&](OpBuilder &b, Location loc, Value k, ValueRange carried) {
                // The reduction dims of linear index k, the last fastest.
                SmallVector<Value> loops(row.begin(), row.end());
                SmallVector<Value> reductionIvs(ranges.size() - rows);
                Value rest = k;
                for (size_t j = reductionIvs.size(); j-- > 0;) {
                  if (j == 0) {
                    reductionIvs[j] = rest;
                    break;
                  }
                  Value size = index(b, ranges[rows + j]);
                  reductionIvs[j] = arith::RemUIOp::create(b, loc, rest, size);
                  rest = arith::DivUIOp::create(b, loc, rest, size);
                }
                loops.append(reductionIvs);
                IRMapping map;
                for (OpOperand *input : op.getDpsInputOperands()) {
                  BlockArgument arg =
                      body.getArgument(input->getOperandNumber());
                  Value source = input->get();
                  if (!isa<MemRefType>(source.getType())) {
                    map.map(arg, source);
                    continue;
                  }
                  AffineMap indexing = op.getMatchingIndexingMap(input);
                  SmallVector<Value> indices;
                  for (AffineExpr expr : indexing.getResults())
                    indices.push_back(affine::AffineApplyOp::create(
                        b, loc, AffineMap::get(indexing.getNumDims(), 0, expr),
                        loops));
                  map.map(arg, memref::LoadOp::create(b, loc, source, indices));
                }
                for (Operation &inner : body.without_terminator()) {
                  if (&inner == combiner.op)
                    continue;
                  if (auto dim = dyn_cast<linalg::IndexOp>(inner)) {
                    map.map(dim.getResult(), loops[dim.getDim()]);
                    continue;
                  }
                  b.clone(inner, map);
                }
                Value next = combineWith(b, combiner, carried[0],
                                         map.lookupOrDefault(combiner.mapped));
                scf::YieldOp::create(b, loc, next);
              });
          // A butterfly over the warp: after log2(32) exchanges every lane
          // holds the combination of all 32 partial results.
          Value partial = laneLoop.getResult(0);
          for (int64_t offset = kWarpSize / 2; offset >= 1; offset /= 2) {
            auto shuffle = gpu::ShuffleOp::create(
                b, loc, partial, static_cast<int32_t>(offset),
                static_cast<int32_t>(kWarpSize), gpu::ShuffleMode::XOR);
            partial =
                combineWith(b, combiner, partial, shuffle.getShuffleResult());
          }
          Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                              lane, index(b, 0));
          scf::IfOp::create(b, loc, first, [&](OpBuilder &b, Location loc) {
            Value old = memref::LoadOp::create(b, loc, output, row);
            memref::StoreOp::create(
                b, loc, combineWith(b, combiner, old, partial), output, row);
            scf::YieldOp::create(b, loc);
          });
        });
    rewriter.eraseOp(op);
  }

  void runOnOperation() override {
    SmallVector<linalg::GenericOp> candidates;
    getOperation().walk(
        [&](linalg::GenericOp op) { candidates.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (linalg::GenericOp op : candidates) {
      Combiner combiner{};
      unsigned rows = 0;
      SmallVector<int64_t> ranges;
      if (qualifies(op, combiner, rows, ranges))
        rewrite(rewriter, op, combiner, rows, ranges);
    }
  }
};

} // namespace
