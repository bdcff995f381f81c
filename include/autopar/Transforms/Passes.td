//===- Passes.td - autopar transformation passes -----------*- tablegen -*-===//

#ifndef AUTOPAR_TRANSFORMS_PASSES
#define AUTOPAR_TRANSFORMS_PASSES

include "mlir/Pass/PassBase.td"

def FuseElementwise : Pass<"autopar-fuse-elementwise", "mlir::func::FuncOp"> {
  let summary = "Fuse elementwise producers into consumers that read each "
                "produced element once";
  let description = [{
    Fusing chains such as bias + residual + GELU into one `linalg.generic`
    saves a round trip through memory per op. Upstream
    `linalg-fuse-elementwise-ops` fuses a producer into any consumer, even
    one whose loops do not all index the fused operand: fused into a matmul
    written as a generic, a LayerNorm or GELU is then recomputed for every
    step of the reduction (measured: a small GPT ran 70x slower). It also
    propagates reshapes, turning named contractions into generics that the
    backends no longer recognize as GEMMs.

    This pass applies only the elementwise fusion patterns, and only where
    the consumer's indexing map of the fused operand is a permutation: every
    consumer iteration reads a distinct producer element, so nothing is
    recomputed. Named ops (matmul, convolution, transpose) are never
    consumers, so they stay recognizable.
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect"];
}

def ApproximateMath : Pass<"autopar-approximate-math"> {
  let summary = "Replace erf, tanh and exp by vectorizable polynomial "
                "approximations";
  let description = [{
    LLVM lowers `math.erf` and `math.tanh` to scalar libm calls, which stop
    the loop vectorizer: in a GPT-style model the GELU's `erff` calls took a
    third of the CPU time. MLIR's polynomial approximations (accurate to a
    few ulp in f32, far inside the 1e-4 tolerance autopar is checked against)
    are plain arithmetic that vectorizes with the rest of the fused loop.
  }];
  let dependentDialects = ["mlir::math::MathDialect",
                           "mlir::arith::ArithDialect",
                           "mlir::vector::VectorDialect"];
}

#endif // AUTOPAR_TRANSFORMS_PASSES
