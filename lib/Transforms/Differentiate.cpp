//===- Differentiate.cpp - @main's loss and its gradients -----------------===//
//
// See Passes.td. The pass chooses the loss and the trained parameters and
// reports every way that choice can fail with the names a user wrote (ONNX
// outputs and initializers); the reverse sweep itself is in Autodiff/.
//
//===----------------------------------------------------------------------===//

#include "autopar/Dialect/Attributes.h"
#include "autopar/Planner/ActiveValues.h"
#include "autopar/Transforms/Autodiff.h"
#include "autopar/Transforms/LossScaling.h"
#include "autopar/Transforms/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/Support/GlobPattern.h"

namespace autopar {
#define GEN_PASS_DEF_DIFFERENTIATE
#include "autopar/Transforms/Passes.h.inc"
} // namespace autopar

using namespace mlir;

namespace {

bool isFloatScalar(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && isa<FloatType>(tensor.getElementType()) &&
         tensor.getNumElements() == 1;
}

StringRef resultName(func::FuncOp main, unsigned i) {
  if (auto name =
          main.getResultAttrOfType<StringAttr>(i, autopar::attrs::kOutput))
    return name.getValue();
  return "";
}

struct DifferentiatePass : autopar::impl::DifferentiateBase<DifferentiatePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto main = module.lookupSymbol<func::FuncOp>("main");
    if (!main) {
      module.emitError("autopar-differentiate: no func.func @main");
      return signalPassFailure();
    }
    auto lossIndex = findLoss(main);
    if (failed(lossIndex))
      return signalPassFailure();
    auto ret = cast<func::ReturnOp>(main.getBody().front().getTerminator());
    Value loss = ret.getOperand(*lossIndex);
    std::string lossName = resultName(main, *lossIndex).str();

    auto trainable = findTrainable(main, loss, lossName);
    if (failed(trainable))
      return signalPassFailure();
    if (lossScale > 0.0)
      loss = autopar::scaleLoss(main, loss, lossScale, dynamicLossScale);
    SmallVector<Value> wrt;
    for (unsigned i : *trainable)
      wrt.push_back(main.getArgument(i));
    // The backward goes before the terminator, after the forward's last op.
    Operation *forwardLast = ret->getPrevNode();
    auto gradients = autopar::buildGradients(main, loss, wrt);
    if (failed(gradients))
      return signalPassFailure();
    if (phaseMarks)
      markPhases(module, main, forwardLast);

    // @main now returns the loss and the gradients, and the parameters the
    // forward updates itself (BatchNorm's running statistics); the forward's
    // other outputs are no longer needed.
    SmallVector<Value> results{loss};
    llvm::append_range(results, *gradients);
    SmallVector<DictionaryAttr> resultAttrs{main.getResultAttrDict(*lossIndex)};
    SmallVector<Value> forwardUpdates;
    SmallVector<DictionaryAttr> forwardUpdateAttrs;
    for (unsigned i = 0; i < main.getNumResults(); ++i)
      if (main.getResultAttr(i, autopar::attrs::kUpdate)) {
        forwardUpdates.push_back(ret.getOperand(i));
        forwardUpdateAttrs.push_back(main.getResultAttrDict(i));
      }
    Builder b(&getContext());
    for (unsigned i : *trainable) {
      main.setArgAttr(i, autopar::attrs::kTrainable, b.getUnitAttr());
      auto name =
          main.getArgAttrOfType<StringAttr>(i, autopar::attrs::kParameter);
      // Named as an output too ("<param>.grad"), so that a program that
      // stops here (autopar-compile --emit-gradients) runs as it is.
      SmallVector<NamedAttribute> attrs{
          b.getNamedAttr(autopar::attrs::kGradient, name),
          b.getNamedAttr(autopar::attrs::kOutput,
                         b.getStringAttr(name.getValue() + ".grad"))};
      if (Attribute dtype = main.getArgAttr(i, autopar::attrs::kDType))
        attrs.push_back(b.getNamedAttr(autopar::attrs::kDType, dtype));
      resultAttrs.push_back(b.getDictionaryAttr(attrs));
    }
    llvm::append_range(results, forwardUpdates);
    llvm::append_range(resultAttrs, forwardUpdateAttrs);
    OpBuilder rb(ret);
    func::ReturnOp::create(rb, ret.getLoc(), results);
    ret.erase();
    main.setType(FunctionType::get(&getContext(), main.getArgumentTypes(),
                                   ValueRange(results).getTypes()));
    main.setAllResultAttrs(resultAttrs);

    // The generic adjoint rule keeps every operand of the forward op; drop
    // the ones an adjoint's body does not read, so that later passes see
    // plain contractions (a batched matmul's adjoints become GEMMs).
    RewritePatternSet patterns(&getContext());
    linalg::populateEraseUnusedOperandsAndResultsPatterns(patterns);
    if (failed(applyPatternsGreedily(main, std::move(patterns))))
      return signalPassFailure();
  }

  /// Calls `autopar_rt_step_phase(0)` first in `main` and
  /// `autopar_rt_step_phase(1)` after `forwardLast` (the forward's last op;
  /// null: the forward is empty), declaring the function. LLVM dialect calls:
  /// the partitioner passes them through (ScalarShardingModels.cpp), and a
  /// func.func declaration would stop it (it partitions every func.func).
  void markPhases(ModuleOp module, func::FuncOp main, Operation *forwardLast) {
    constexpr StringLiteral kPhase = "autopar_rt_step_phase";
    OpBuilder b(&getContext());
    auto i32 = b.getI32Type();
    if (!module.lookupSymbol(kPhase)) {
      b.setInsertionPointToStart(module.getBody());
      LLVM::LLVMFuncOp::create(
          b, module.getLoc(), kPhase,
          LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(&getContext()),
                                      {i32}));
    }
    auto mark = [&](int32_t phase) {
      Location loc = main.getLoc();
      Value value =
          LLVM::ConstantOp::create(b, loc, i32, b.getI32IntegerAttr(phase));
      LLVM::CallOp::create(b, loc, TypeRange{},
                           FlatSymbolRefAttr::get(&getContext(), kPhase),
                           ValueRange{value});
    };
    Block &body = main.getBody().front();
    b.setInsertionPointToStart(&body);
    mark(0);
    if (forwardLast)
      b.setInsertionPointAfter(forwardLast);
    mark(1);
  }

  /// The index of the loss among @main's results.
  FailureOr<unsigned> findLoss(func::FuncOp main) {
    SmallVector<std::string> names, scalars;
    std::optional<unsigned> found;
    for (unsigned i = 0; i < main.getNumResults(); ++i) {
      if (main.getResultAttr(i, autopar::attrs::kUpdate))
        continue; // A parameter's new value, not a model output.
      std::string name = resultName(main, i).str();
      names.push_back(name);
      if (!loss.empty() && name == loss)
        found = i;
      if (loss.empty() && isFloatScalar(main.getResultTypes()[i])) {
        scalars.push_back(name);
        found = i;
      }
    }
    auto list = [](ArrayRef<std::string> v) {
      std::string s;
      for (const std::string &n : v)
        s += (s.empty() ? "'" : ", '") + n + "'";
      return s;
    };
    if (!loss.empty() && !found) {
      main.emitError() << "--loss " << loss
                       << ": the model has no output of that name; its "
                          "outputs are "
                       << list(names);
      return failure();
    }
    if (loss.empty() && scalars.empty()) {
      main.emitError()
          << "no loss: none of the model's outputs (" << list(names)
          << ") is a float scalar; name one with --loss NAME, or add "
             "cross-entropy to an output of logits with --loss "
             "cross-entropy:OUTPUT";
      return failure();
    }
    if (loss.empty() && scalars.size() > 1) {
      main.emitError() << "several outputs could be the loss (" << list(scalars)
                       << "); choose one with --loss NAME";
      return failure();
    }
    Type type = main.getResultTypes()[*found];
    if (!isFloatScalar(type)) {
      main.emitError() << "--loss " << loss << ": the loss must be a float "
                       << "scalar, but '" << loss << "' is " << type;
      return failure();
    }
    return *found;
  }

  /// The arguments to train, in order.
  FailureOr<SmallVector<unsigned>> findTrainable(func::FuncOp main, Value loss,
                                                 StringRef lossName) {
    SmallVector<llvm::GlobPattern> globs;
    for (const std::string &glob : freeze) {
      auto pattern = llvm::GlobPattern::create(glob);
      if (!pattern) {
        main.emitError() << "--freeze " << glob << ": "
                         << llvm::toString(pattern.takeError());
        return failure();
      }
      globs.push_back(std::move(*pattern));
    }
    SmallVector<Value> candidates;
    SmallVector<unsigned> indices;
    std::vector<bool> globUsed(globs.size());
    for (BlockArgument arg : main.getArguments()) {
      auto name = main.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                    autopar::attrs::kParameter);
      auto type = dyn_cast<RankedTensorType>(arg.getType());
      if (!name || !type || !isa<FloatType>(type.getElementType()))
        continue;
      bool frozen = false;
      for (auto [k, glob] : llvm::enumerate(globs))
        if (glob.match(name.getValue()))
          frozen = globUsed[k] = true;
      if (frozen)
        continue;
      candidates.push_back(arg);
      indices.push_back(arg.getArgNumber());
    }
    for (auto [k, used] : llvm::enumerate(globUsed))
      if (!used)
        main.emitWarning() << "--freeze " << freeze[k]
                           << " matches no float parameter";
    llvm::DenseSet<Value> active =
        autopar::findActiveValues(main, candidates, loss);
    SmallVector<unsigned> trainable;
    for (auto [arg, index] : llvm::zip(candidates, indices))
      if (active.contains(arg))
        trainable.push_back(index);
    if (trainable.empty()) {
      main.emitError() << "the loss '" << lossName
                       << "' does not depend on any "
                       << (freeze.empty() ? "" : "unfrozen ")
                       << "float parameter, so there is nothing to train";
      return failure();
    }
    return trainable;
  }
};

} // namespace
