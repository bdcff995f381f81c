//===- Contraction.cpp - MatMul and Gemm to linalg contractions -----------===//
//
// MatMul with 2-D weights becomes one linalg.matmul over the flattened
// leading dims (the shape of every Linear layer); batched products become
// linalg.batch_matmul over the broadcast batch dims collapsed into one.
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"

using namespace mlir;
namespace autopar::import {
namespace {

/// `init` filled with zero of `elementType`.
static Value zeros(OpBuilder &b, Location loc, llvm::ArrayRef<int64_t> shape,
                   Type elementType) {
  return createFilledTensor(b, loc, shape, elementType,
                            createScalarConstant(b, loc, elementType, 0.0));
}

/// C[m,n] = A[m,k] * B[k,n] for 2-D tensors.
static Value matmul2d(OpBuilder &b, Location loc, Value lhs, Value rhs) {
  Type et = getElementTypeOf(lhs);
  int64_t m = getShape(lhs)[0], n = getShape(rhs)[1];
  Value init = zeros(b, loc, {m, n}, et);
  return linalg::MatmulOp::create(b, loc, ValueRange{lhs, rhs},
                                  ValueRange{init})
      .getResult(0);
}

/// C[b..., m, n] += A[b..., m, k] * B[b..., k, n] as a linalg.generic whose
/// leading loops are the batch dims.
static Value batchedContraction(OpBuilder &b, Location loc, Value lhs,
                                Value rhs, Value init) {
  MLIRContext *ctx = b.getContext();
  int64_t rank = getShape(init).size();
  int64_t loops = rank + 1; // batch..., m, n, k
  SmallVector<AffineExpr> batchDims;
  for (int64_t i = 0; i < rank - 2; ++i)
    batchDims.push_back(getAffineDimExpr(i, ctx));
  AffineExpr m = getAffineDimExpr(rank - 2, ctx),
             n = getAffineDimExpr(rank - 1, ctx),
             k = getAffineDimExpr(rank, ctx);
  auto map = [&](AffineExpr r, AffineExpr c) {
    SmallVector<AffineExpr> e(batchDims);
    e.push_back(r);
    e.push_back(c);
    return AffineMap::get(loops, 0, e, ctx);
  };
  SmallVector<utils::IteratorType> iterators(loops - 1,
                                             utils::IteratorType::parallel);
  iterators.push_back(utils::IteratorType::reduction);
  bool isFloat = isa<FloatType>(getElementTypeOf(init));
  return linalg::GenericOp::create(
             b, loc, init.getType(), ValueRange{lhs, rhs}, ValueRange{init},
             ArrayRef<AffineMap>{map(m, k), map(k, n), map(m, n)}, iterators,
             [&](OpBuilder &nb, Location l, ValueRange args) {
               Value prod =
                   isFloat
                       ? Value(arith::MulFOp::create(nb, l, args[0], args[1]))
                       : Value(arith::MulIOp::create(nb, l, args[0], args[1]));
               Value sum =
                   isFloat ? Value(arith::AddFOp::create(nb, l, args[2], prod))
                           : Value(arith::AddIOp::create(nb, l, args[2], prod));
               linalg::YieldOp::create(nb, l, sum);
             })
      .getResult(0);
}

static LogicalResult convertMatMul(NodeContext &ctx) {
  OpBuilder &b = ctx.getBuilder();
  Location loc = ctx.getLoc();
  OnnxDType t = ctx.inputDType(0);
  if (t != ctx.inputDType(1))
    return ctx.emitError("operands have different element types (")
           << dtypeName(t) << " and " << dtypeName(ctx.inputDType(1)) << ")";
  if (isBoolDType(t))
    return ctx.unsupported("bool operands are not supported");
  Value lhs = ctx.input(0), rhs = ctx.input(1);
  llvm::SmallVector<int64_t> ls(getShape(lhs)), rs(getShape(rhs));
  if (ls.empty() || rs.empty())
    return ctx.emitError("operands must have rank >= 1");
  // 1-D operands are promoted (and the added dim dropped from the result).
  bool lhsVector = ls.size() == 1, rhsVector = rs.size() == 1;
  if (lhsVector) {
    ls.insert(ls.begin(), 1);
    lhs = reshapeTensor(b, loc, lhs, ls);
  }
  if (rhsVector) {
    rs.push_back(1);
    rhs = reshapeTensor(b, loc, rhs, rs);
  }
  int64_t m = ls[ls.size() - 2], k = ls.back(), n = rs.back();
  if (rs[rs.size() - 2] != k)
    return ctx.emitError("contraction dims differ: lhs [")
           << llvm::make_range(ctx.inputShape(0).begin(),
                               ctx.inputShape(0).end())
           << "] has K=" << k << ", rhs has K=" << rs[rs.size() - 2];

  llvm::SmallVector<int64_t> lb(ls.begin(), ls.end() - 2),
      rb(rs.begin(), rs.end() - 2);
  auto batch = broadcastShapes({lb, rb});
  if (failed(batch))
    return ctx.emitError("batch dims cannot be broadcast together");
  llvm::SmallVector<int64_t> outShape(*batch);
  outShape.push_back(m);
  outShape.push_back(n);

  Value result;
  if (rb.empty() || getNumElements(rb) == 1) {
    // Shared 2-D rhs: fold every leading lhs dim into M.
    int64_t rows = getNumElements(ls) / k;
    Value lhs2 =
        reshapeTensor(b, loc,
                      broadcastTo(b, loc, lhs,
                                  [&] {
                                    llvm::SmallVector<int64_t> s(*batch);
                                    s.push_back(m);
                                    s.push_back(k);
                                    return s;
                                  }()),
                      {getNumElements(*batch) * m, k});
    (void)rows;
    Value rhs2 = reshapeTensor(b, loc, rhs, {k, n});
    result = reshapeTensor(b, loc, matmul2d(b, loc, lhs2, rhs2), outShape);
  } else {
    auto full = [&](Value v, int64_t r, int64_t c) {
      llvm::SmallVector<int64_t> s(*batch);
      s.push_back(r);
      s.push_back(c);
      return broadcastTo(b, loc, v, s);
    };
    Value lhsN = full(lhs, m, k), rhsN = full(rhs, k, n);
    Type et = getElementTypeOf(lhs);
    if (batch->size() == 1) {
      Value init = zeros(b, loc, outShape, et);
      result = linalg::BatchMatmulOp::create(b, loc, ValueRange{lhsN, rhsN},
                                             ValueRange{init})
                   .getResult(0);
    } else {
      // Several batch dims (attention: batch, heads) stay separate loops of
      // one contraction, so that the planner can split the heads; the CPU
      // backend folds them into one for its batched GEMM kernel.
      result =
          batchedContraction(b, loc, lhsN, rhsN, zeros(b, loc, outShape, et));
    }
  }
  llvm::SmallVector<int64_t> finalShape(outShape);
  if (rhsVector)
    finalShape.pop_back();
  if (lhsVector)
    finalShape.erase(finalShape.end() - (rhsVector ? 1 : 2));
  ctx.setOutput(0, reshapeTensor(b, loc, result, finalShape), t);
  return success();
}

/// Gemm: Y = alpha * op(A) * op(B) + beta * C.
static LogicalResult convertGemm(NodeContext &ctx) {
  OpBuilder &b = ctx.getBuilder();
  Location loc = ctx.getLoc();
  OnnxDType t = ctx.inputDType(0);
  if (!isFloatDType(t) && !isSignedIntDType(t) && !isUnsignedIntDType(t))
    return ctx.unsupported("element type " + dtypeName(t) +
                           " is not supported");
  if (ctx.inputRank(0) != 2 || ctx.inputRank(1) != 2)
    return ctx.emitError("A and B must be 2-D");
  // Transposed operands are expressed in the matmul's indexing maps rather
  // than materialized: weights stored as [N, K] (transB, every torch Linear)
  // are then read in place by the GEMM instead of copied every step.
  bool transA = ctx.getIntAttr("transA", 0),
       transB = ctx.getIntAttr("transB", 0);
  Value a = ctx.input(0), bm = ctx.input(1);
  int64_t m = getShape(a)[transA ? 1 : 0], ka = getShape(a)[transA ? 0 : 1];
  int64_t kb = getShape(bm)[transB ? 1 : 0], n = getShape(bm)[transB ? 0 : 1];
  if (ka != kb)
    return ctx.emitError("contraction dims differ: op(A) has K=")
           << ka << ", op(B) has K=" << kb;
  MLIRContext *mctx = ctx.getContext();
  AffineExpr dm = getAffineDimExpr(0, mctx), dn = getAffineDimExpr(1, mctx),
             dk = getAffineDimExpr(2, mctx);
  auto map = [&](AffineExpr r, AffineExpr c) {
    return AffineMapAttr::get(AffineMap::get(3, 0, {r, c}, mctx));
  };
  Attribute maps[] = {transA ? map(dk, dm) : map(dm, dk),
                      transB ? map(dn, dk) : map(dk, dn), map(dm, dn)};
  Type et = getElementTypeOf(a);
  Value init = zeros(b, loc, {m, n}, et);
  Value y = linalg::MatmulOp::create(
                b, loc, TypeRange{init.getType()}, ValueRange{a, bm},
                ValueRange{init},
                {b.getNamedAttr("indexing_maps", b.getArrayAttr(maps))})
                .getResult(0);
  double alpha = ctx.getFloatAttr("alpha", 1.0f);
  double beta = ctx.getFloatAttr("beta", 1.0f);
  llvm::SmallVector<Value> operands{y};
  if (ctx.hasInput(2)) {
    auto shape =
        broadcastShapes({llvm::SmallVector<int64_t>(getShape(y)),
                         llvm::SmallVector<int64_t>(ctx.inputShape(2))});
    if (failed(shape) || *shape != llvm::SmallVector<int64_t>(getShape(y)))
      return ctx.emitError("C cannot be broadcast to the result shape");
    operands.push_back(ctx.input(2));
  }
  if (alpha != 1.0 || operands.size() > 1) {
    y = createElementwise(
        b, loc, operands, getShape(y), getElementTypeOf(y),
        [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
          Type et = args[0].getType();
          bool isF = isa<FloatType>(et);
          auto mul = [&](Value x, double s) -> Value {
            if (s == 1.0)
              return x;
            Value c = createScalarConstant(nb, l, et, s);
            return isF ? Value(arith::MulFOp::create(nb, l, x, c))
                       : Value(arith::MulIOp::create(nb, l, x, c));
          };
          Value r = mul(args[0], alpha);
          if (args.size() > 1) {
            Value c = mul(args[1], beta);
            r = isF ? Value(arith::AddFOp::create(nb, l, r, c))
                    : Value(arith::AddIOp::create(nb, l, r, c));
          }
          return r;
        });
  }
  ctx.setOutput(0, y, t);
  return success();
}

} // namespace

void registerContractionConverters(ConverterRegistry &r) {
  r["MatMul"] = convertMatMul;
  r["Gemm"] = convertGemm;
}

} // namespace autopar::import
