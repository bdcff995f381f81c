//===- MixedPrecision.cpp - bf16/f16 storage, f32 arithmetic --------------===//
//
// See Passes.td. Values are demoted where they are produced (a parameter,
// an elementwise kernel's output) and read back in f32 where they are
// consumed, so that only the bytes in memory change type.
//
//===----------------------------------------------------------------------===//

#include "autopar/Dialect/Attributes.h"
#include "autopar/Dialect/AutoparOps.h"
#include "autopar/Planner/LossHead.h"
#include "autopar/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

namespace autopar {
#define GEN_PASS_DEF_MIXEDPRECISION
#include "autopar/Transforms/Passes.h.inc"
} // namespace autopar

using namespace mlir;
using autopar::isReshapeOrSlice;
using autopar::lossHead;

namespace {

/// A static f32 tensor type, or null.
RankedTensorType staticF32Tensor(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.getElementType().isF32() || !tensor.hasStaticShape())
    return {};
  return tensor;
}

bool isGemm(Operation *op) {
  return isa<linalg::MatmulOp, linalg::BatchMatmulOp>(op);
}

bool isAttention(Operation *op) {
  return isa<autopar::AttentionOp, autopar::AttentionGradOp>(op);
}

bool isCrossEntropy(Operation *op) {
  return isa<autopar::SoftmaxCrossEntropyOp,
             autopar::SoftmaxCrossEntropyGradOp>(op);
}

/// The fused ops whose GPU kernels read and write the low type.
bool isFusedKernel(Operation *op) {
  return isAttention(op) || isCrossEntropy(op);
}

/// Whether `use` is a fused op's operand that its kernels read in the low
/// type: attention's query, key, value, and the gradient's saved out and
/// d_out (the mask and lse stay f32); cross-entropy's logits (labels, lse
/// and d_nll stay as they are).
bool isLowFusedOperand(OpOperand &use) {
  Operation *op = use.getOwner();
  if (!isFusedKernel(op))
    return false;
  auto dst = cast<DestinationStyleOpInterface>(op);
  if (dst.isDpsInit(&use))
    return false;
  unsigned n = use.getOperandNumber();
  if (isCrossEntropy(op))
    return n == 0;
  if (n < 3)
    return true;
  Value v = use.get();
  if (auto grad = dyn_cast<autopar::AttentionGradOp>(op))
    return v == grad.getSaved()[0] || v == grad.getSaved()[2];
  return false;
}

/// Whether a fused op's result is low-typed with its kernels: all but
/// attention's lse and cross-entropy's nll and lse (the logits' gradient
/// is).
bool isLowFusedResult(OpResult result) {
  Operation *op = result.getOwner();
  if (isa<autopar::AttentionOp>(op))
    return result.getResultNumber() == 0;
  return !isa<autopar::SoftmaxCrossEntropyOp>(op);
}

/// Whether `value` is returned by the function, directly or reshaped:
/// graph outputs keep their type, so it is not demoted.
bool feedsReturn(Value value) {
  for (OpOperand &use : value.getUses()) {
    Operation *user = use.getOwner();
    if (isa<func::ReturnOp>(user) ||
        (isReshapeOrSlice(user) && use.getOperandNumber() == 0 &&
         feedsReturn(user->getResult(0))))
      return true;
  }
  return false;
}

class Demoter {
public:
  Demoter(MLIRContext *ctx, Type low) : rewriter(ctx), low(low) {}

  /// `f(x)` elementwise over `value`, into a new tensor of element type
  /// `elementType`: the explicit conversions between f32 and `low`.
  Value convert(Location loc, Value value, Type elementType) {
    auto type = cast<RankedTensorType>(value.getType());
    Value init =
        tensor::EmptyOp::create(rewriter, loc, type.getShape(), elementType);
    AffineMap id = rewriter.getMultiDimIdentityMap(type.getRank());
    auto generic = linalg::GenericOp::create(
        rewriter, loc, init.getType(), ValueRange{value}, ValueRange{init},
        ArrayRef<AffineMap>{id, id},
        SmallVector<utils::IteratorType>(type.getRank(),
                                         utils::IteratorType::parallel),
        [&](OpBuilder &b, Location nested, ValueRange args) {
          Value converted =
              elementType.getIntOrFloatBitWidth() >
                      args[0].getType().getIntOrFloatBitWidth()
                  ? arith::ExtFOp::create(b, nested, elementType, args[0])
                        .getResult()
                  : arith::TruncFOp::create(b, nested, elementType, args[0])
                        .getResult();
          linalg::YieldOp::create(b, nested, converted);
        });
    conversions.insert(generic);
    return generic.getResult(0);
  }

  /// An f32 copy of a low-typed value for one reader, made right before
  /// `user`: each reader its own, so that a copy lives only until its
  /// reader runs (a copy shared by the forward and the backward would be
  /// kept between them beside the low-typed value, more than f32 alone).
  Value f32CopyFor(Operation *user, Value lowValue) {
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPoint(user);
    return readCopy(
        convert(lowValue.getLoc(), lowValue, rewriter.getF32Type()));
  }

  /// Marks `copy` (a conversion made for one reader) with its own
  /// `read_copy` number, so that CSE does not merge it with another
  /// reader's copy of the same value. A plain discardable attribute: no
  /// pass reads it, and autopar's dialect verifies only its own names.
  Value readCopy(Value copy) {
    copy.getDefiningOp()->setAttr("read_copy",
                                  rewriter.getI64IntegerAttr(nextReadCopy++));
    return copy;
  }

  /// Makes `uses`, which read an f32 tensor, read `lowValue` (the same
  /// values in the low type) instead, converting back to f32 where read.
  void redirect(ArrayRef<OpOperand *> uses, Value lowValue) {
    for (OpOperand *use : uses) {
      Operation *user = use->getOwner();
      auto generic = dyn_cast<linalg::GenericOp>(user);
      if (generic && generic.isDpsInput(use)) {
        // Read in the low type, extend in the body.
        BlockArgument arg = generic.getMatchingBlockArgument(use);
        use->set(lowValue);
        arg.setType(low);
        OpBuilder::InsertionGuard guard(rewriter);
        rewriter.setInsertionPointToStart(arg.getOwner());
        auto ext = arith::ExtFOp::create(rewriter, arg.getLoc(),
                                         rewriter.getF32Type(), arg);
        arg.replaceAllUsesExcept(ext, ext);
        continue;
      }
      if (auto extract = dyn_cast<tensor::ExtractOp>(user)) {
        OpBuilder::InsertionGuard guard(rewriter);
        rewriter.setInsertionPoint(extract);
        Value element = tensor::ExtractOp::create(
            rewriter, extract.getLoc(), lowValue, extract.getIndices());
        Value ext = arith::ExtFOp::create(rewriter, extract.getLoc(),
                                          rewriter.getF32Type(), element);
        rewriter.replaceOp(extract, ext);
        continue;
      }
      if (isReshapeOrSlice(user) && use->getOperandNumber() == 0) {
        // Reshapes and slices carry the low type on to their users.
        OpBuilder::InsertionGuard guard(rewriter);
        rewriter.setInsertionPoint(user);
        Operation *lowUser = rewriter.clone(*user);
        lowUser->setOperand(0, lowValue);
        Value result = user->getResult(0);
        auto resultType = cast<RankedTensorType>(result.getType());
        lowUser->getResult(0).setType(resultType.clone(low));
        SmallVector<OpOperand *> next;
        for (OpOperand &u : result.getUses())
          next.push_back(&u);
        redirect(next, lowUser->getResult(0));
        if (result.use_empty())
          rewriter.eraseOp(user);
        continue;
      }
      if (isGemm(user) && use->getOperandNumber() < 2) {
        // Both operands are made low-typed below; the result stays f32.
        use->set(lowValue);
        continue;
      }
      if (runsLow(user) && isLowFusedOperand(*use)) {
        // Made low-typed throughout by lowFusedKernel.
        use->set(lowValue);
        continue;
      }
      use->set(f32CopyFor(user, lowValue));
    }
  }

  /// Generics that keep their f32 outputs (the loss head).
  llvm::DenseSet<Operation *> keepF32;

  /// Whether the fused kernels (attention, cross-entropy) read and write the
  /// low type (GPU); else they read f32 copies of low-typed values (the
  /// CPU's f32 kernels).
  bool lowFusedOperands = false;

  /// Whether `op` is a fused op that runs in the low type: with
  /// `lowFusedOperands`, attention in either type, cross-entropy in bf16
  /// (its CUDA kernels take f32 and bf16; with f16 it reads f32 copies).
  bool runsLow(Operation *op) const {
    if (!lowFusedOperands)
      return false;
    return isAttention(op) || (isCrossEntropy(op) && low.isBF16());
  }

  /// Runs a fused op (attention, cross-entropy, or their gradients) in the
  /// low type: its f32 inputs the kernels take low are converted, and its
  /// f32 outputs but the statistics (lse, nll) become low-typed, their users
  /// reading them as any low-typed value.
  void lowFusedKernel(Operation *op) {
    rewriter.setInsertionPoint(op);
    for (OpOperand &use : op->getOpOperands())
      if (isLowFusedOperand(use) && staticF32Tensor(use.get().getType()))
        use.set(convert(op->getLoc(), use.get(), low));
    auto dst = cast<DestinationStyleOpInterface>(op);
    for (OpResult result : op->getResults()) {
      auto type = staticF32Tensor(result.getType());
      if (!type || !isLowFusedResult(result))
        continue;
      OpOperand *init = dst.getDpsInitOperand(result.getResultNumber());
      rewriter.setInsertionPoint(op);
      init->set(tensor::EmptyOp::create(rewriter, op->getLoc(), type.getShape(),
                                        low));
      // Users still expect f32: they are redirected to read the low value.
      SmallVector<OpOperand *> uses;
      for (OpOperand &use : result.getUses())
        uses.push_back(&use);
      result.setType(type.clone(low));
      redirect(uses, result);
    }
  }

  /// Stores the f32 outputs of an elementwise generic in the low type.
  void demoteProducer(linalg::GenericOp op) {
    if (op.getNumReductionLoops() != 0 || conversions.contains(op) ||
        keepF32.contains(op))
      return;
    SmallVector<unsigned> demoted;
    for (OpResult result : op->getResults()) {
      unsigned i = result.getResultNumber();
      if (staticF32Tensor(result.getType()) && !feedsReturn(result) &&
          op.getMatchingBlockArgument(op.getDpsInitOperand(i)).use_empty())
        demoted.push_back(i);
    }
    if (demoted.empty())
      return;
    rewriter.setInsertionPoint(op);
    auto lowOp = cast<linalg::GenericOp>(rewriter.clone(*op));
    auto yield = cast<linalg::YieldOp>(lowOp.getBody()->getTerminator());
    for (unsigned i : demoted) {
      auto type = cast<RankedTensorType>(op->getResult(i).getType());
      rewriter.setInsertionPoint(lowOp);
      Value init =
          tensor::EmptyOp::create(rewriter, op.getLoc(), type.getShape(), low);
      lowOp.getDpsInitsMutable()[i].set(init);
      lowOp->getResult(i).setType(type.clone(low));
      lowOp.getMatchingBlockArgument(lowOp.getDpsInitOperand(i)).setType(low);
      rewriter.setInsertionPoint(yield);
      Value trunc = arith::TruncFOp::create(rewriter, yield.getLoc(), low,
                                            yield.getOperand(i));
      yield.setOperand(i, trunc);
    }
    for (OpResult result : op->getResults()) {
      unsigned i = result.getResultNumber();
      if (!llvm::is_contained(demoted, i)) {
        result.replaceAllUsesWith(lowOp->getResult(i));
        continue;
      }
      SmallVector<OpOperand *> uses;
      for (OpOperand &use : result.getUses())
        uses.push_back(&use);
      redirect(uses, lowOp->getResult(i));
    }
    rewriter.eraseOp(op);
  }

  /// Stores the f32 parameters of `func` in the low type.
  void demoteParameters(func::FuncOp func, StringRef dtype) {
    Block &entry = func.getBody().front();
    for (BlockArgument arg : entry.getArguments()) {
      auto type = staticF32Tensor(arg.getType());
      if (!type ||
          !func.getArgAttr(arg.getArgNumber(), autopar::attrs::kParameter))
        continue;
      SmallVector<OpOperand *> uses;
      for (OpOperand &use : arg.getUses())
        uses.push_back(&use);
      arg.setType(type.clone(low));
      func.setArgAttr(arg.getArgNumber(), autopar::attrs::kDType,
                      rewriter.getStringAttr(dtype));
      redirect(uses, arg);
    }
    func.setType(FunctionType::get(func.getContext(), entry.getArgumentTypes(),
                                   func.getResultTypes()));
  }

  /// GEMM operands still in f32 are converted: GEMMs run on low-typed
  /// operands, accumulating into their f32 result. The op is rebuilt, since
  /// a named op's body is typed after its operands.
  /// With `f32Operands` the low-typed operands are extended back to f32
  /// instead (the products of low-precision operands, for f32-only kernels).
  void lowGemmOperands(Operation *gemm, bool f32Operands) {
    rewriter.setInsertionPoint(gemm);
    SmallVector<Value> inputs;
    for (unsigned i : {0u, 1u}) {
      Value operand = gemm->getOperand(i);
      if (staticF32Tensor(operand.getType()))
        operand = convert(gemm->getLoc(), operand, low);
      if (f32Operands)
        operand =
            readCopy(convert(gemm->getLoc(), operand, rewriter.getF32Type()));
      inputs.push_back(operand);
    }
    Value init = gemm->getOperand(2);
    rewriter.replaceOp(gemm, rebuildGemm(gemm, inputs, init)->getResults());
  }

  /// A GEMM whose f32 result is only ever rounded to the low type, possibly
  /// after reshapes (the conversions in front of a fused kernel that reads
  /// it low: the LM head's logits before the fused cross-entropy) writes the
  /// low type itself: the GEMM kernels accumulate in f32 and round once, as the
  /// conversion did, and the f32 result (and the pass that rounds it) is
  /// gone. Only GEMMs that start from zero: one that adds to an init would
  /// round the sum differently.
  void lowGemmResult(Operation *gemm) {
    Value result = gemm->getResult(0);
    auto type = staticF32Tensor(result.getType());
    auto fill = gemm->getOperand(2).getDefiningOp<linalg::FillOp>();
    if (!type || !fill ||
        !matchPattern(fill.getInputs()[0], m_AnyZeroFloat()) ||
        !onlyRounded(result))
      return;
    rewriter.setInsertionPoint(gemm);
    Location loc = gemm->getLoc();
    Value empty = tensor::EmptyOp::create(rewriter, loc, type.getShape(), low);
    Value zero =
        arith::ConstantOp::create(rewriter, loc, rewriter.getZeroAttr(low));
    Value init =
        linalg::FillOp::create(rewriter, loc, zero, empty).getResult(0);
    SmallVector<Value> inputs = {gemm->getOperand(0), gemm->getOperand(1)};
    replaceRounded(result, rebuildGemm(gemm, inputs, init)->getResult(0));
    rewriter.eraseOp(gemm);
  }

private:
  /// `gemm` (a matmul or batch matmul) rebuilt with `inputs` and `init`,
  /// its result typed as `init`. The named op's own attributes (indexing
  /// maps of transposed operands) carry over; its region is rebuilt for the
  /// new types.
  Operation *rebuildGemm(Operation *gemm, ValueRange inputs, Value init) {
    SmallVector<NamedAttribute> attrs;
    for (NamedAttribute attr : gemm->getDiscardableAttrs())
      attrs.push_back(attr);
    if (Attribute maps = gemm->getAttr("indexing_maps"))
      attrs.push_back(rewriter.getNamedAttr("indexing_maps", maps));
    if (isa<linalg::MatmulOp>(gemm))
      return linalg::MatmulOp::create(rewriter, gemm->getLoc(),
                                      TypeRange{init.getType()}, inputs,
                                      ValueRange{init}, attrs);
    return linalg::BatchMatmulOp::create(rewriter, gemm->getLoc(),
                                         TypeRange{init.getType()}, inputs,
                                         ValueRange{init}, attrs);
  }

  /// Whether every reader of `value` rounds it to the low type, directly or
  /// after reshapes (the GEMM's [N, C] result expanded to [B, S, C]).
  bool onlyRounded(Value value) const {
    if (value.use_empty())
      return false;
    for (Operation *user : value.getUsers()) {
      if (isTruncation(user))
        continue;
      if (!isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(user) ||
          !onlyRounded(user->getResult(0)))
        return false;
    }
    return true;
  }

  /// Makes the readers of `value` (onlyRounded) read `lowValue`, the same
  /// values in the low type: roundings are replaced by it, reshapes
  /// recreated on it.
  void replaceRounded(Value value, Value lowValue) {
    for (Operation *user : llvm::to_vector(value.getUsers())) {
      if (isTruncation(user)) {
        rewriter.replaceOp(user, lowValue);
        continue;
      }
      rewriter.setInsertionPoint(user);
      Operation *lowReshape = rewriter.clone(*user);
      lowReshape->setOperand(0, lowValue);
      Value reshaped = user->getResult(0);
      lowReshape->getResult(0).setType(
          cast<RankedTensorType>(reshaped.getType()).clone(low));
      replaceRounded(reshaped, lowReshape->getResult(0));
      rewriter.eraseOp(user);
    }
  }

  /// Whether `op` is an elementwise generic that only rounds its one input
  /// to the low type.
  bool isTruncation(Operation *op) const {
    auto generic = dyn_cast<linalg::GenericOp>(op);
    if (!generic || generic.getNumDpsInputs() != 1 ||
        generic.getNumDpsInits() != 1 || generic.getNumReductionLoops() != 0 ||
        !llvm::all_of(generic.getIndexingMapsArray(),
                      [](AffineMap m) { return m.isIdentity(); }))
      return false;
    auto type = dyn_cast<RankedTensorType>(generic.getResult(0).getType());
    if (!type || type.getElementType() != low)
      return false;
    Block *body = generic.getBody();
    if (body->getOperations().size() != 2)
      return false;
    auto trunc = dyn_cast<arith::TruncFOp>(body->front());
    return trunc && trunc.getIn() == body->getArgument(0) &&
           body->getTerminator()->getOperand(0) == trunc.getResult();
  }

  IRRewriter rewriter;
  Type low;
  int64_t nextReadCopy = 0;
  /// The conversions made here: never demoted themselves.
  llvm::DenseSet<Operation *> conversions;
};

/// Adds to `keep` the generics the fused cross-entropy's gradient reads its
/// d_nll from (the loss head's backward: the mean's 1 / count broadcast to
/// the positions, the loss scale), back to where they start: values no
/// larger than d_nll, whose rounding to the low type would scale the whole
/// gradient by up to 2^-9 (bf16). The unfused loss's backward runs on the
/// logits' shape and is left as it was.
void keepCrossEntropyCotangentF32(func::FuncOp func,
                                  llvm::DenseSet<Operation *> &keep) {
  SmallVector<Value> work;
  func.walk([&](autopar::SoftmaxCrossEntropyGradOp grad) {
    if (grad.getSaved().size() == 2)
      work.push_back(grad.getSaved()[1]);
  });
  llvm::DenseSet<Value> seen;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (!seen.insert(v).second)
      continue;
    auto generic = v.getDefiningOp<linalg::GenericOp>();
    if (!generic)
      continue;
    keep.insert(generic);
    for (Value input : generic.getDpsInputs())
      work.push_back(input);
  }
}

struct MixedPrecisionPass
    : autopar::impl::MixedPrecisionBase<MixedPrecisionPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    MLIRContext *ctx = &getContext();
    bool bf16 = type == autopar::LowPrecision::BF16;
    Type low =
        bf16 ? Type(BFloat16Type::get(ctx)) : Type(Float16Type::get(ctx));
    StringRef dtype = bf16 ? "bfloat16" : "float16";
    if (func.isExternal())
      return;

    // Named ops other than GEMMs, convolutions and fills become generics,
    // which can read their inputs in the low type (a named op's body is
    // typed after its operands).
    IRRewriter rewriter(ctx);
    SmallVector<linalg::LinalgOp> named;
    func.walk([&](linalg::LinalgOp op) {
      if (!isa<linalg::GenericOp, linalg::FillOp>(op) && !isGemm(op) &&
          !isa<linalg::ConvolutionOpInterface>(op.getOperation()) &&
          op.hasPureTensorSemantics())
        named.push_back(op);
    });
    for (linalg::LinalgOp op : named) {
      rewriter.setInsertionPoint(op);
      (void)linalg::generalizeNamedOp(rewriter, op);
    }

    Demoter demoter(ctx, low);
    demoter.lowFusedOperands = !f32Gemms;
    if (f32LossHead) {
      demoter.keepF32 = lossHead(func);
      keepCrossEntropyCotangentF32(func, demoter.keepF32);
    }
    if (!keepParameters)
      demoter.demoteParameters(func, dtype);
    SmallVector<linalg::GenericOp> producers;
    func.walk([&](linalg::GenericOp op) { producers.push_back(op); });
    for (linalg::GenericOp op : producers)
      demoter.demoteProducer(op);
    SmallVector<Operation *> gemms;
    func.walk([&](Operation *op) {
      if (isGemm(op) && cast<linalg::LinalgOp>(op).hasPureTensorSemantics())
        gemms.push_back(op);
    });
    for (Operation *gemm : gemms)
      demoter.lowGemmOperands(gemm, f32Gemms);
    if (!f32Gemms) {
      SmallVector<Operation *> fused;
      func.walk([&](Operation *op) {
        if (demoter.runsLow(op) &&
            cast<DestinationStyleOpInterface>(op).hasPureTensorSemantics())
          fused.push_back(op);
      });
      for (Operation *op : fused)
        demoter.lowFusedKernel(op);
      SmallVector<Operation *> roundedGemms;
      func.walk([&](Operation *op) {
        if (isGemm(op) && cast<linalg::LinalgOp>(op).hasPureTensorSemantics())
          roundedGemms.push_back(op);
      });
      for (Operation *gemm : roundedGemms)
        demoter.lowGemmResult(gemm);
    }
  }
};

} // namespace
