//===- GradientBuckets.cpp - Gradient sums, one collective a type ---------===//
//
// See GradientBuckets.h.
//
//===----------------------------------------------------------------------===//

#include "autopar/Transforms/GradientBuckets.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/MapVector.h"

#include <numeric>

using namespace mlir;

void autopar::allReduceInBuckets(OpBuilder &b, Location loc,
                                 llvm::StringRef grid, int16_t axis,
                                 SmallVectorImpl<Value> &values,
                                 ArrayRef<unsigned> which) {
  llvm::MapVector<Type, SmallVector<unsigned>> byType;
  for (unsigned i : which)
    byType[cast<RankedTensorType>(values[i].getType()).getElementType()]
        .push_back(i);
  for (auto &[elementType, members] : byType) {
    int64_t total = 0;
    SmallVector<int64_t> offsets;
    for (unsigned i : members) {
      offsets.push_back(total);
      total += cast<RankedTensorType>(values[i].getType()).getNumElements();
    }
    auto bucketType = RankedTensorType::get({total}, elementType);
    Value bucket =
        tensor::EmptyOp::create(b, loc, bucketType.getShape(), elementType);
    auto flat = [&](Value v) -> Value {
      auto type = cast<RankedTensorType>(v.getType());
      auto flatType =
          RankedTensorType::get({type.getNumElements()}, elementType);
      if (type.getRank() == 1)
        return v;
      if (type.getRank() == 0)
        return tensor::ExpandShapeOp::create(b, loc, flatType, v,
                                             ArrayRef<ReassociationIndices>{});
      ReassociationIndices all(type.getRank());
      std::iota(all.begin(), all.end(), 0);
      return tensor::CollapseShapeOp::create(
          b, loc, flatType, v, ArrayRef<ReassociationIndices>{all});
    };
    for (auto [i, offset] : llvm::zip(members, offsets)) {
      Value part = flat(values[i]);
      int64_t size = cast<RankedTensorType>(part.getType()).getDimSize(0);
      bucket = tensor::InsertSliceOp::create(
          b, loc, part, bucket, ArrayRef<OpFoldResult>{b.getIndexAttr(offset)},
          ArrayRef<OpFoldResult>{b.getIndexAttr(size)},
          ArrayRef<OpFoldResult>{b.getIndexAttr(1)});
    }
    Value reducedBucket = shard::AllReduceOp::create(
        b, loc, bucketType, grid, ArrayRef<shard::GridAxis>{axis}, bucket,
        shard::ReductionKind::Sum);
    for (auto [i, offset] : llvm::zip(members, offsets)) {
      auto type = cast<RankedTensorType>(values[i].getType());
      int64_t size = type.getNumElements();
      auto partType = RankedTensorType::get({size}, elementType);
      Value part = tensor::ExtractSliceOp::create(
          b, loc, partType, reducedBucket,
          ArrayRef<OpFoldResult>{b.getIndexAttr(offset)},
          ArrayRef<OpFoldResult>{b.getIndexAttr(size)},
          ArrayRef<OpFoldResult>{b.getIndexAttr(1)});
      if (type.getRank() == 0) {
        part = tensor::CollapseShapeOp::create(
            b, loc, type, part, ArrayRef<ReassociationIndices>{});
      } else if (type.getRank() > 1) {
        ReassociationIndices all(type.getRank());
        std::iota(all.begin(), all.end(), 0);
        part = tensor::ExpandShapeOp::create(
            b, loc, type, part, ArrayRef<ReassociationIndices>{all});
      }
      values[i] = part;
    }
  }
}
