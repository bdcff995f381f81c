//===- Contraction.cpp - MatMul and Gemm to linalg contractions -----------===//
//
// MatMul with 2-D weights becomes one linalg.matmul over the flattened
// leading dims (the shape of every Linear layer); batched products become
// linalg.batch_matmul over the broadcast batch dims collapsed into one.
// Einsum becomes one linalg.generic built from its equation.
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"

#include <map>
#include <set>

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

/// One Einsum term: its letters in order, with -1 standing for each dim of
/// the ellipsis (at most one).
struct EinsumTerm {
  llvm::SmallVector<int> labels; // letter, or -1 for an ellipsis dim
  bool hasEllipsis = false;
  int64_t ellipsisAt = 0; // position of the ellipsis among the letters
  int64_t numLetters = 0;
};

/// Parses "ab...c" into `term`; returns an error message or "".
static std::string parseEinsumTerm(llvm::StringRef text, EinsumTerm &term) {
  for (size_t i = 0; i < text.size();) {
    if (text.substr(i).starts_with("...")) {
      if (term.hasEllipsis)
        return "term '" + text.str() + "' has more than one '...'";
      term.hasEllipsis = true;
      term.ellipsisAt = term.numLetters;
      i += 3;
      continue;
    }
    char c = text[i];
    if (!llvm::isAlpha(c))
      return "term '" + text.str() + "' has character '" + std::string(1, c) +
             "' (expected letters a-z, A-Z and at most one '...')";
    term.labels.push_back(c);
    ++term.numLetters;
    ++i;
  }
  return "";
}

/// Einsum: one linalg.generic with a loop per distinct letter (and per
/// broadcast ellipsis dim). Output dims are the leading parallel loops in
/// output order, so the output map is the identity; letters absent from the
/// output follow as reductions. The body multiplies the operands and, when
/// there are reductions, accumulates into a zero-filled init.
static LogicalResult convertEinsum(NodeContext &ctx) {
  OpBuilder &b = ctx.getBuilder();
  Location loc = ctx.getLoc();
  MLIRContext *mctx = ctx.getContext();
  int64_t numInputs = ctx.getNumInputs();
  if (numInputs < 1)
    return ctx.emitError("needs at least one operand");
  OnnxDType t = ctx.inputDType(0);
  for (int64_t i = 0; i < numInputs; ++i) {
    if (!isFloatDType(ctx.inputDType(i)))
      return ctx.unsupported("element type " + dtypeName(ctx.inputDType(i)) +
                             " of operand " + llvm::Twine(i) +
                             " is not supported (only float types)");
    if (ctx.inputDType(i) != t)
      return ctx.emitError("operands have different element types (")
             << dtypeName(t) << " and " << dtypeName(ctx.inputDType(i)) << ")";
    for (int64_t d : ctx.inputShape(i))
      if (ShapedType::isDynamic(d))
        return ctx.unsupported("dynamic dims are not supported");
  }
  if (!ctx.hasAttr("equation"))
    return ctx.emitError("missing 'equation' attribute");
  std::string eq;
  for (char c : ctx.getStringAttr("equation", ""))
    if (!llvm::isSpace(c))
      eq.push_back(c);
  llvm::StringRef eqRef(eq);
  auto [lhsText, rhsText] = eqRef.split("->");
  bool explicitOut = eqRef.contains("->");
  auto fail = [&](const std::string &msg) {
    return ctx.emitError("equation '") << eq << "': " << msg;
  };

  llvm::SmallVector<llvm::StringRef> termTexts;
  lhsText.split(termTexts, ',');
  if ((int64_t)termTexts.size() != numInputs)
    return fail("has " + std::to_string(termTexts.size()) +
                " input terms for " + std::to_string(numInputs) + " operands");
  llvm::SmallVector<EinsumTerm> terms(numInputs);
  int64_t ellipsisRank = 0;
  for (int64_t i = 0; i < numInputs; ++i) {
    std::string err = parseEinsumTerm(termTexts[i], terms[i]);
    if (!err.empty())
      return fail(err);
    int64_t rank = ctx.inputRank(i);
    EinsumTerm &term = terms[i];
    if (term.hasEllipsis ? term.numLetters > rank : term.numLetters != rank)
      return fail("term '" + termTexts[i].str() + "' has " +
                  std::to_string(term.numLetters) + " letters but operand " +
                  std::to_string(i) + " has rank " + std::to_string(rank));
    if (term.hasEllipsis) {
      int64_t e = rank - term.numLetters;
      term.labels.insert(term.labels.begin() + term.ellipsisAt, e, -1);
      ellipsisRank = std::max(ellipsisRank, e);
    }
  }

  // Sizes: letters must agree across operands (1 broadcasts); ellipsis dims
  // broadcast right-aligned.
  std::map<int, int64_t> letterSize;
  llvm::SmallVector<int64_t> ellSize(ellipsisRank, 1);
  std::map<int, int> count;
  for (int64_t i = 0; i < numInputs; ++i) {
    llvm::ArrayRef<int64_t> shape = ctx.inputShape(i);
    int64_t e = shape.size() - terms[i].numLetters, seen = 0;
    for (auto [d, label] : llvm::enumerate(terms[i].labels)) {
      int64_t size = shape[d];
      if (label < 0) {
        int64_t &s = ellSize[ellipsisRank - e + seen++];
        if (s != size && s != 1 && size != 1)
          return fail("'...' dims of operand " + std::to_string(i) +
                      " cannot be broadcast with the other operands");
        if (size != 1)
          s = size;
        continue;
      }
      ++count[label];
      auto [it, inserted] = letterSize.try_emplace(label, size);
      if (!inserted && it->second != size) {
        if (it->second != 1 && size != 1)
          return fail(std::string("letter '") + char(label) + "' has sizes " +
                      std::to_string(it->second) + " and " +
                      std::to_string(size));
        it->second = std::max(it->second, size);
      }
    }
  }

  // Output labels (-1 for each ellipsis dim).
  llvm::SmallVector<int> outLabels;
  if (explicitOut) {
    EinsumTerm out;
    std::string err = parseEinsumTerm(rhsText, out);
    if (!err.empty())
      return fail(err);
    std::set<int> seen;
    for (int l : out.labels) {
      if (!letterSize.count(l))
        return fail(std::string("output letter '") + char(l) +
                    "' is not in any input term");
      if (!seen.insert(l).second)
        return fail(std::string("output letter '") + char(l) + "' is repeated");
    }
    outLabels = out.labels;
    if (out.hasEllipsis)
      outLabels.insert(outLabels.begin() + out.ellipsisAt, ellipsisRank, -1);
  } else {
    outLabels.assign(ellipsisRank, -1);
    for (auto [l, n] : count) // std::map: sorted by ASCII
      if (n == 1)
        outLabels.push_back(l);
  }

  // Loops: output dims first, then reductions.
  std::map<int, int64_t> letterLoop;
  llvm::SmallVector<int64_t> ellLoop(ellipsisRank, -1);
  llvm::SmallVector<int64_t> loopSizes, outShape;
  int64_t nextEll = 0;
  for (int l : outLabels) {
    if (l < 0) {
      ellLoop[nextEll] = loopSizes.size();
      loopSizes.push_back(ellSize[nextEll++]);
    } else {
      letterLoop[l] = loopSizes.size();
      loopSizes.push_back(letterSize[l]);
    }
  }
  outShape = loopSizes;
  int64_t numParallel = loopSizes.size();
  for (int64_t j = 0; j < ellipsisRank; ++j)
    if (ellLoop[j] < 0) {
      ellLoop[j] = loopSizes.size();
      loopSizes.push_back(ellSize[j]);
    }
  for (const EinsumTerm &term : terms)
    for (int l : term.labels)
      if (l >= 0 && !letterLoop.count(l)) {
        letterLoop[l] = loopSizes.size();
        loopSizes.push_back(letterSize[l]);
      }
  int64_t numLoops = loopSizes.size();

  llvm::SmallVector<AffineMap> maps;
  llvm::SmallVector<Value> operands;
  for (int64_t i = 0; i < numInputs; ++i) {
    llvm::ArrayRef<int64_t> shape = ctx.inputShape(i);
    int64_t e = shape.size() - terms[i].numLetters, seen = 0;
    llvm::SmallVector<AffineExpr> exprs;
    llvm::SmallVector<int64_t> kept;
    for (auto [d, label] : llvm::enumerate(terms[i].labels)) {
      int64_t loop =
          label < 0 ? ellLoop[ellipsisRank - e + seen++] : letterLoop[label];
      // A size-1 dim against a larger loop is broadcast: it is reshaped
      // away, so that every map stays a projected permutation (or repeats a
      // dim for a diagonal) rather than reading a constant index.
      if (shape[d] == 1 && loopSizes[loop] != 1)
        continue;
      exprs.push_back(getAffineDimExpr(loop, mctx));
      kept.push_back(shape[d]);
    }
    maps.push_back(AffineMap::get(numLoops, 0, exprs, mctx));
    Value operand = ctx.input(i);
    if (kept.size() != shape.size())
      operand = reshapeTensor(b, loc, operand, kept);
    operands.push_back(operand);
  }
  llvm::SmallVector<AffineExpr> outExprs;
  for (int64_t l = 0; l < numParallel; ++l)
    outExprs.push_back(getAffineDimExpr(l, mctx));
  maps.push_back(AffineMap::get(numLoops, 0, outExprs, mctx));
  SmallVector<utils::IteratorType> iterators(numLoops,
                                             utils::IteratorType::parallel);
  for (int64_t l = numParallel; l < numLoops; ++l)
    iterators[l] = utils::IteratorType::reduction;

  // A 2-D matmul (operands possibly transposed or swapped) becomes
  // linalg.matmul with the operands' maps, like Gemm, so that it reaches the
  // GEMM kernels; batched ones are generics of the batchedContraction form,
  // which autopar-collapse-batched-contractions turns into batch_matmul.
  if (numInputs == 2 && numParallel == 2 && numLoops == 3 &&
      maps[0].getNumResults() == 2 && maps[1].getNumResults() == 2) {
    unsigned aIdx = maps[0].isFunctionOfDim(0) ? 0 : 1;
    AffineMap mapA = maps[aIdx], mapB = maps[1 - aIdx];
    auto holds = [](AffineMap map, unsigned x, unsigned y) {
      return map.isFunctionOfDim(x) && map.isFunctionOfDim(y);
    };
    if (holds(mapA, 0, 2) && holds(mapB, 1, 2)) {
      Type et = getElementTypeOf(operands[0]);
      Value init = zeros(b, loc, outShape, et);
      Attribute matmulMaps[] = {AffineMapAttr::get(mapA),
                                AffineMapAttr::get(mapB),
                                AffineMapAttr::get(maps[2])};
      Value y =
          linalg::MatmulOp::create(
              b, loc, TypeRange{init.getType()},
              ValueRange{operands[aIdx], operands[1 - aIdx]}, ValueRange{init},
              {b.getNamedAttr("indexing_maps", b.getArrayAttr(matmulMaps))})
              .getResult(0);
      ctx.setOutput(0, y, t);
      return success();
    }
  }

  bool reduces = numLoops > numParallel;
  Type et = getElementTypeOf(ctx.input(0));
  Value init = reduces ? zeros(b, loc, outShape, et)
                       : createEmptyTensor(b, loc, outShape, et);
  Value y =
      linalg::GenericOp::create(
          b, loc, init.getType(), operands, ValueRange{init}, maps, iterators,
          [&](OpBuilder &nb, Location l, ValueRange args) {
            Value prod = args[0];
            for (int64_t i = 1; i < numInputs; ++i)
              prod = arith::MulFOp::create(nb, l, prod, args[i]);
            if (reduces)
              prod = arith::AddFOp::create(nb, l, args[numInputs], prod);
            linalg::YieldOp::create(nb, l, prod);
          })
          .getResult(0);
  ctx.setOutput(0, y, t);
  return success();
}

} // namespace

void registerContractionConverters(ConverterRegistry &r) {
  r["MatMul"] = convertMatMul;
  r["Gemm"] = convertGemm;
  r["Einsum"] = convertEinsum;
}

} // namespace autopar::import
