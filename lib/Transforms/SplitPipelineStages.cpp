//===- SplitPipelineStages.cpp - One program per pipeline stage -----------===//
//
// See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "autopar/Dialect/Attributes.h"
#include "autopar/Transforms/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

namespace autopar {
#define GEN_PASS_DEF_SPLITPIPELINESTAGES
#include "autopar/Transforms/Passes.h.inc"
} // namespace autopar

using namespace mlir;
namespace attrs = autopar::attrs;

namespace {

constexpr llvm::StringLiteral kPassName = "autopar-split-pipeline-stages";

/// Operand-free pure ops (constants, tensor.empty) are cloned into every
/// stage that uses them: recomputing them costs nothing, sending them does.
bool isRematerializable(Operation *op) {
  return op->getNumOperands() == 0 && op->getNumRegions() == 0 &&
         op->getNumResults() > 0 && isMemoryEffectFree(op);
}

/// The ONNX node name a value's location carries, if any.
std::string nodeName(Location loc) {
  std::string name;
  loc->walk([&](Location inner) {
    if (auto named = dyn_cast<NameLoc>(inner)) {
      name = named.getName().str();
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return name;
}

/// Which stage computes what, and what crosses each stage boundary.
struct StageSplit {
  int64_t numStages = 1;
  /// The stage of every op of @main that is not rematerialized.
  llvm::DenseMap<Operation *, int64_t> stageOf;
  /// The stage that returns each result of @main.
  SmallVector<int64_t> outputStage;
  /// crossing[k]: the values stage k sends to stage k+1, in program order.
  SmallVector<llvm::SetVector<Value>> crossing;
  /// The name of each crossing value, unique in the program.
  llvm::DenseMap<Value, std::string> names;
};

/// The values \p op reads from @main's body: its operands and the values its
/// regions capture.
llvm::SetVector<Value> valuesReadBy(Operation *op) {
  llvm::SetVector<Value> used(op->operand_begin(), op->operand_end());
  getUsedValuesDefinedAbove(op->getRegions(), used);
  return used;
}

FailureOr<StageSplit> analyze(func::FuncOp main) {
  StageSplit split;
  Block &body = main.front();
  for (Operation &op : body.without_terminator()) {
    if (isRematerializable(&op))
      continue;
    auto stage = op.getAttrOfType<IntegerAttr>(attrs::kStage);
    if (!stage)
      return op.emitError(kPassName) << ": op has no integer '" << attrs::kStage
                                     << "' (run autopar-plan first)";
    if (stage.getInt() < 0)
      return op.emitError(kPassName)
             << ": '" << attrs::kStage << "' is " << stage.getInt()
             << ", stages count from 0";
    split.stageOf[&op] = stage.getInt();
    split.numStages = std::max(split.numStages, stage.getInt() + 1);
  }
  auto producer = [&](Value v) -> std::optional<int64_t> {
    auto it = split.stageOf.find(v.getDefiningOp());
    if (it == split.stageOf.end())
      return std::nullopt; // an argument or a rematerialized constant
    return it->second;
  };

  // The last stage that reads each computed value.
  llvm::DenseMap<Value, int64_t> lastReader;
  for (Operation &op : body.without_terminator()) {
    auto it = split.stageOf.find(&op);
    if (it == split.stageOf.end())
      continue;
    int64_t stage = it->second;
    for (Value v : valuesReadBy(&op)) {
      std::optional<int64_t> from = producer(v);
      if (!from)
        continue;
      if (*from > stage) {
        InFlightDiagnostic diag =
            op.emitError(kPassName)
            << ": op of stage " << stage << " uses a value computed in stage "
            << *from << "; stages must not decrease along def-use chains";
        diag.attachNote(v.getLoc()) << "computed here";
        return failure();
      }
      int64_t &last = lastReader.try_emplace(v, *from).first->second;
      last = std::max(last, stage);
    }
  }
  // An output comes from the stage that computes it, so it is never sent.
  for (Value v : body.getTerminator()->getOperands())
    split.outputStage.push_back(producer(v).value_or(0));

  split.crossing.resize(split.numStages);
  llvm::StringSet<> taken;
  for (Operation &op : body.without_terminator()) {
    auto it = split.stageOf.find(&op);
    if (it == split.stageOf.end())
      continue;
    int64_t from = it->second;
    for (OpResult result : op.getResults()) {
      auto last = lastReader.find(result);
      if (last == lastReader.end() || last->second == from)
        continue;
      auto type = dyn_cast<RankedTensorType>(result.getType());
      if (!type || !type.hasStaticShape() ||
          !autopar::dtypeAttrName(type.getElementType()))
        return op.emitError(kPassName)
               << ": a value of type " << result.getType()
               << " is needed in stage " << last->second
               << ", but stages exchange only statically shaped tensors of "
                  "float, integer or bool elements";
      for (int64_t k = from; k < last->second; ++k)
        split.crossing[k].insert(result);
      std::string base = nodeName(op.getLoc());
      if (base.empty())
        base = "activation";
      if (op.getNumResults() > 1)
        base += ":" + std::to_string(result.getResultNumber());
      std::string name = base;
      for (int n = 1; !taken.insert(name).second; ++n)
        name = base + "#" + std::to_string(n);
      split.names[result] = name;
    }
  }
  return split;
}

DictionaryAttr activationAttrs(Builder &b, llvm::StringRef kind,
                               llvm::StringRef name, Type type, int64_t peer) {
  Type element = cast<RankedTensorType>(type).getElementType();
  return b.getDictionaryAttr(
      {b.getNamedAttr(kind, b.getStringAttr(name)),
       b.getNamedAttr(attrs::kDType,
                      b.getStringAttr(*autopar::dtypeAttrName(element))),
       b.getNamedAttr(attrs::kPeerStage, b.getI64IntegerAttr(peer))});
}

/// Appends module @stage<k> holding stage k's @main to \p top.
void buildStage(ModuleOp top, func::FuncOp main, const StageSplit &split,
                int64_t k, ArrayRef<Operation *> shared) {
  MLIRContext *ctx = top.getContext();
  Block &body = main.front();
  Operation *ret = body.getTerminator();

  SmallVector<Operation *> ops;
  llvm::SetVector<Value> used;
  for (Operation &op : body.without_terminator()) {
    auto it = split.stageOf.find(&op);
    if (it == split.stageOf.end() || it->second != k)
      continue;
    ops.push_back(&op);
    used.insert_range(valuesReadBy(&op));
  }
  SmallVector<unsigned> outputs;
  for (auto [j, v] : llvm::enumerate(ret->getOperands()))
    if (split.outputStage[j] == k) {
      outputs.push_back(j);
      used.insert(v);
    }
  llvm::ArrayRef<Value> received;
  if (k > 0)
    received = split.crossing[k - 1].getArrayRef();
  llvm::ArrayRef<Value> sent = split.crossing[k].getArrayRef();
  used.insert_range(sent);

  // Signature: parameters and inputs (in @main's order), received
  // activations; sent activations, then outputs.
  OpBuilder b(ctx);
  SmallVector<Type> argTypes, resultTypes;
  SmallVector<DictionaryAttr> argAttrs, resultAttrs;
  SmallVector<Value> argValues;
  for (BlockArgument arg : main.getArguments())
    if (used.contains(arg)) {
      argValues.push_back(arg);
      argTypes.push_back(arg.getType());
      argAttrs.push_back(main.getArgAttrDict(arg.getArgNumber()));
    }
  for (Value v : received) {
    argValues.push_back(v);
    argTypes.push_back(v.getType());
    argAttrs.push_back(activationAttrs(
        b, attrs::kActivationIn, split.names.lookup(v), v.getType(), k - 1));
  }
  SmallVector<Value> results;
  for (Value v : sent) {
    results.push_back(v);
    resultTypes.push_back(v.getType());
    resultAttrs.push_back(activationAttrs(
        b, attrs::kActivationOut, split.names.lookup(v), v.getType(), k + 1));
  }
  for (unsigned j : outputs) {
    results.push_back(ret->getOperand(j));
    resultTypes.push_back(ret->getOperand(j).getType());
    resultAttrs.push_back(main.getResultAttrDict(j));
  }

  auto stage = ModuleOp::create(main.getLoc(), ("stage" + Twine(k)).str());
  top.getBody()->push_back(stage);
  for (NamedAttribute attr : top->getDiscardableAttrs())
    stage->setAttr(attr.getName(), attr.getValue());
  stage->setAttr(attrs::kStage, b.getI64IntegerAttr(k));
  b.setInsertionPointToEnd(stage.getBody());
  for (Operation *op : shared)
    b.clone(*op);
  auto func = func::FuncOp::create(b, main.getLoc(), "main",
                                   b.getFunctionType(argTypes, resultTypes));
  for (NamedAttribute attr : main->getDiscardableAttrs())
    func->setAttr(attr.getName(), attr.getValue());
  for (auto [i, dict] : llvm::enumerate(argAttrs))
    if (dict)
      func.setArgAttrs(i, dict);
  for (auto [j, dict] : llvm::enumerate(resultAttrs))
    if (dict)
      func.setResultAttrs(j, dict);

  Block *entry = func.addEntryBlock();
  IRMapping map;
  for (auto [from, to] : llvm::zip(argValues, entry->getArguments()))
    map.map(from, to);
  b.setInsertionPointToStart(entry);
  for (Operation &op : body.without_terminator())
    if (isRematerializable(&op) && llvm::any_of(op.getResults(), [&](Value v) {
          return used.contains(v);
        }))
      b.clone(op, map);
  for (Operation *op : ops)
    b.clone(*op, map);
  SmallVector<Value> returned;
  for (Value v : results)
    returned.push_back(map.lookupOrDefault(v));
  func::ReturnOp::create(b, ret->getLoc(), returned);
}

struct SplitPipelineStagesPass
    : autopar::impl::SplitPipelineStagesBase<SplitPipelineStagesPass> {
  void runOnOperation() override {
    ModuleOp top = getOperation();
    auto main = top.lookupSymbol<func::FuncOp>("main");
    if (!main || main.isExternal()) {
      top.emitError(kPassName) << ": no func.func @main with a body to split";
      return signalPassFailure();
    }
    if (!main.getBody().hasOneBlock()) {
      main.emitError(kPassName) << ": @main must have a single block";
      return signalPassFailure();
    }
    FailureOr<StageSplit> split = analyze(main);
    if (failed(split))
      return signalPassFailure();

    // Every other top-level op (a shard.grid, declarations) goes into each
    // stage's module, which is compiled on its own.
    SmallVector<Operation *> shared;
    for (Operation &op : top.getOps())
      if (&op != main.getOperation())
        shared.push_back(&op);
    for (int64_t k = 0; k < split->numStages; ++k)
      buildStage(top, main, *split, k, shared);
    for (Operation *op : shared)
      op->erase();
    main.erase();
  }
};

} // namespace
