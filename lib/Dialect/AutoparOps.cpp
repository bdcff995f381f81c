//===- AutoparOps.cpp - autopar's own ops ---------------------------------===//
//
// See AutoparOps.td.
//
//===----------------------------------------------------------------------===//

#include "autopar/Dialect/AutoparOps.h"
#include "autopar/Dialect/Attributes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterfaceImpl.h"
#include "mlir/Dialect/Shard/Transforms/Transforms.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Transforms/InliningUtils.h"

using namespace mlir;
using namespace autopar;

#include "autopar/Dialect/AutoparDialect.cpp.inc"

std::optional<std::string> autopar::dtypeAttrName(Type type) {
  if (type.isF32())
    return "float32";
  if (type.isF64())
    return "float64";
  if (type.isF16())
    return "float16";
  if (type.isBF16())
    return "bfloat16";
  if (type.isInteger(1))
    return "bool";
  for (unsigned bits : {8u, 16u, 32u, 64u})
    if (type.isInteger(bits))
      return "int" + std::to_string(bits);
  return std::nullopt;
}

namespace {

/// autopar's ops are pure (or destination-passing) computations: a call of a
/// function holding them may be inlined (a data-parallel replica's outlined
/// forward and backward, which tensor-parallel partitioning needs in one
/// block).
struct AutoparInlinerInterface : public DialectInlinerInterface {
  using DialectInlinerInterface::DialectInlinerInterface;
  bool isLegalToInline(Operation *, Region *, bool, IRMapping &) const final {
    return true;
  }
  bool isLegalToInline(Region *, Region *, bool, IRMapping &) const final {
    return true;
  }
};

} // namespace

void AutoparDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "autopar/Dialect/AutoparOps.cpp.inc"
      >();
  addInterfaces<AutoparInlinerInterface>();
  attachAttentionBufferization(getContext());
  attachCrossEntropyBufferization(getContext());
}

#define GET_OP_CLASSES
#include "autopar/Dialect/AutoparOps.cpp.inc"

//===----------------------------------------------------------------------===//
// The autopar.* attributes
//===----------------------------------------------------------------------===//

namespace {

/// Checks that `attr`, an `autopar.*` attribute, has the type AutoparOps.td
/// gives it. Unknown `autopar.*` names are errors too: a misspelled one
/// would otherwise be ignored by every pass.
LogicalResult verifyAutoparAttribute(function_ref<InFlightDiagnostic()> error,
                                     NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  Attribute value = attr.getValue();
  auto expect = [&](bool ok, StringRef kind) -> LogicalResult {
    if (ok)
      return success();
    return error() << "'" << name << "' must be " << kind << ", not " << value;
  };
  using D = AutoparDialect;
  if (name == D::ParameterAttrHelper::getNameStr() ||
      name == D::InputAttrHelper::getNameStr() ||
      name == D::OutputAttrHelper::getNameStr() ||
      name == D::DtypeAttrHelper::getNameStr() ||
      name == D::ModelAttrHelper::getNameStr() ||
      name == D::ActivationInAttrHelper::getNameStr() ||
      name == D::ActivationOutAttrHelper::getNameStr() ||
      name == D::GradientAttrHelper::getNameStr() ||
      name == D::OptimizerStateAttrHelper::getNameStr() ||
      name == D::StateOfAttrHelper::getNameStr() ||
      name == D::MetricAttrHelper::getNameStr() ||
      name == D::UpdateAttrHelper::getNameStr() ||
      name == D::ResidualAttrHelper::getNameStr() ||
      name == D::AccumulatorAttrHelper::getNameStr())
    return expect(isa<StringAttr>(value), "a string");
  if (name == D::StageAttrHelper::getNameStr() ||
      name == D::PeerStageAttrHelper::getNameStr() ||
      name == D::ZeroBlocksAttrHelper::getNameStr() ||
      name == D::TpSplitAttrHelper::getNameStr() ||
      name == D::ParallelAttrHelper::getNameStr())
    return expect(isa<IntegerAttr>(value), "an integer");
  if (name == D::TrainableAttrHelper::getNameStr() ||
      name == D::StepAttrHelper::getNameStr() ||
      name == D::SeedAttrHelper::getNameStr() ||
      name == D::SampleOffsetAttrHelper::getNameStr() ||
      name == D::RecomputedAttrHelper::getNameStr() ||
      name == D::LossScalingAttrHelper::getNameStr() ||
      name == D::ProjectionPartsAttrHelper::getNameStr() ||
      name == D::TiedCopyAttrHelper::getNameStr())
    return expect(isa<UnitAttr>(value), "a unit attribute");
  if (name == D::PlanAttrHelper::getNameStr())
    return expect(isa<DictionaryAttr>(value), "a dictionary");
  if (name == D::ArgShapesAttrHelper::getNameStr())
    return expect(isa<ArrayAttr>(value), "an array");
  if (name == D::NoaliasPointerArgsAttrHelper::getNameStr() ||
      name == D::ParallelRangeAttrHelper::getNameStr())
    return expect(isa<DenseI64ArrayAttr>(value), "an i64 array");
  return error() << "unknown attribute '" << name
                 << "' (autopar's attributes are listed in AutoparOps.td)";
}

} // namespace

LogicalResult AutoparDialect::verifyOperationAttribute(Operation *op,
                                                       NamedAttribute attr) {
  return verifyAutoparAttribute([&] { return op->emitError(); }, attr);
}

LogicalResult AutoparDialect::verifyRegionArgAttribute(Operation *op,
                                                       unsigned region,
                                                       unsigned arg,
                                                       NamedAttribute attr) {
  return verifyAutoparAttribute(
      [&] { return op->emitError() << "argument " << arg << ": "; }, attr);
}

LogicalResult AutoparDialect::verifyRegionResultAttribute(Operation *op,
                                                          unsigned region,
                                                          unsigned result,
                                                          NamedAttribute attr) {
  return verifyAutoparAttribute(
      [&] { return op->emitError() << "result " << result << ": "; }, attr);
}

std::string autopar::onnxNodeName(Operation *op) {
  if (auto name = dyn_cast<NameLoc>(op->getLoc()))
    return name.getName().str();
  return "";
}

//===----------------------------------------------------------------------===//
// EmbeddingOp
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::verify() {
  RankedTensorType table = getTable().getType();
  if (table.getRank() < 1)
    return emitOpError("table must have rank >= 1");
  if (getNumRows() < 1)
    return emitOpError("num_rows must be >= 1, got ") << getNumRows();
  SmallVector<int64_t> expected(getIds().getType().getShape());
  llvm::append_range(expected, table.getShape().drop_front());
  RankedTensorType result = getResult().getType();
  if (result.getElementType() != table.getElementType())
    return emitOpError("result element type ")
           << result.getElementType() << " differs from the table's "
           << table.getElementType();
  if (result.getShape() != ArrayRef(expected))
    return emitOpError("result shape must be the ids' shape followed by the "
                       "table's row shape, ")
           << RankedTensorType::get(expected, table.getElementType());
  return success();
}

// Loops: the ids' dims, the table's row dims after the first, and last the
// vocabulary (the table's first dim), a sum reduction.
SmallVector<utils::IteratorType> EmbeddingOp::getLoopIteratorTypes() {
  int64_t loops = getResult().getType().getRank() + 1;
  SmallVector<utils::IteratorType> types(loops, utils::IteratorType::parallel);
  types.back() = utils::IteratorType::reduction;
  return types;
}

SmallVector<shard::ReductionKind> EmbeddingOp::getReductionLoopIteratorKinds() {
  return {shard::ReductionKind::Sum};
}

SmallVector<AffineMap> EmbeddingOp::getLookupMaps(MLIRContext *ctx,
                                                  int64_t idsRank,
                                                  int64_t resultRank) {
  int64_t loops = resultRank + 1;
  SmallVector<AffineExpr> dims;
  for (int64_t d = 0; d < resultRank; ++d)
    dims.push_back(getAffineDimExpr(d, ctx));
  SmallVector<AffineExpr> table = {getAffineDimExpr(loops - 1, ctx)};
  llvm::append_range(table, ArrayRef(dims).drop_front(idsRank));
  return {AffineMap::get(loops, 0, table, ctx),
          AffineMap::get(loops, 0, ArrayRef(dims).take_front(idsRank), ctx),
          AffineMap::get(loops, 0, dims, ctx)};
}

SmallVector<AffineMap> EmbeddingOp::getIndexingMaps() {
  SmallVector<AffineMap> maps =
      getLookupMaps(getContext(), getIds().getType().getRank(),
                    getResult().getType().getRank());
  // Operands (table, ids, the optional offset), then the result.
  if (getRowOffset())
    maps.insert(maps.begin() + 2,
                AffineMap::get(maps.front().getNumDims(), 0, getContext()));
  return maps;
}

LogicalResult EmbeddingOp::partition(ArrayRef<Value> partitionedOperands,
                                     ArrayRef<shard::Sharding> operandShardings,
                                     ArrayRef<shard::Sharding> resultShardings,
                                     IRMapping &partitionMap,
                                     SymbolTableCollection &symbolTable,
                                     OpBuilder &builder) {
  shard::ShardingArray loopAxes = shard::getGridAxisAssignmentForLoopIterators(
      operandShardings, resultShardings, getLoopIteratorTypes(),
      getIndexingMaps());
  ArrayRef<shard::GridAxis> vocabAxes = loopAxes.back();
  ImplicitLocOpBuilder b(getLoc(), builder);
  Value table = partitionedOperands[0];
  Value offset = getRowOffset() ? partitionedOperands[2] : Value();
  shard::Sharding sharding = resultShardings[0];
  if (!sharding)
    for (const shard::Sharding &s : operandShardings)
      if (s)
        sharding = s;
  shard::GridOp grid =
      sharding ? shard::getGrid(*this, sharding.getGridAttr(), symbolTable)
               : shard::GridOp();
  if (!vocabAxes.empty()) {
    // This rank holds rows [index * n, (index + 1) * n) of the vocabulary.
    if (!grid)
      return emitOpError("the vocabulary is split but no grid is known");
    Value index =
        shard::createProcessLinearIndex(grid.getSymName(), vocabAxes, b);
    Value rows = arith::ConstantIndexOp::create(
        b, cast<RankedTensorType>(table.getType()).getDimSize(0));
    Value first = arith::MulIOp::create(b, index, rows);
    offset =
        offset ? arith::AddIOp::create(b, offset, first).getResult() : first;
  }
  RankedTensorType type = getResult().getType();
  if (resultShardings[0] && grid)
    type = cast<RankedTensorType>(
        shard::shardType(type, grid, resultShardings[0]));
  Value result = EmbeddingOp::create(b, type, table, partitionedOperands[1],
                                     offset, getNumRowsAttr());
  // Each rank found the ids in its rows; the others are zeros to sum over.
  if (!vocabAxes.empty())
    result = shard::AllReduceOp::create(b, result, grid.getSymName(), vocabAxes,
                                        shard::ReductionKind::Sum);
  partitionMap.map(getResult(), result);
  partitionMap.map(getOperation(), result.getDefiningOp());
  return success();
}
