//===- CpuCodegen.cpp - linalg-on-tensors to a native shared library ------===//

#include "autopar/Target/CpuCodegen.h"

using namespace mlir;
namespace autopar {

llvm::StringRef getCpuLoweringPipeline() {
  // Why each step:
  // - fuse elementwise chains so that bias/residual/activation run in one
  //   loop nest instead of one pass over memory each;
  // - bufferize with identity layouts at the function boundary so every
  //   argument is a dense row-major buffer, and turn results into out-params
  //   that the runtime allocates; a loop may yield a new buffer (gradient
  //   accumulation carries BatchNorm's running statistics that way);
  // - contractions go to the runtime's BLAS kernels; the rest becomes loops
  //   (LLVM's vectorizer handles the static, unit-stride inner loops, made
  //   long by merging the loops that walk contiguous memory as one);
  // - math functions without an LLVM intrinsic (erf, ...) become libm calls,
  //   and f16/bf16 math is computed in f32.
  return "func.func(canonicalize,autopar-collapse-batched-contractions,"
         "autopar-fold-transposes-into-matmuls,autopar-fuse-elementwise,cse,"
         "canonicalize,"
         "autopar-split-shared-inits),"
         "one-shot-bufferize{allow-return-allocs-from-loops "
         "bufferize-function-boundaries "
         "function-boundary-type-conversion=identity-layout-map},"
         "buffer-results-to-out-params{hoist-static-allocs=true "
         "modify-public-functions=true},"
         "func.func(autopar-forward-results-to-out-params,canonicalize),"
         "buffer-deallocation-pipeline,"
         "autopar-lower-contractions-to-cpu-kernels,"
         "autopar-copies-to-linalg,"
         "func.func(autopar-collapse-contiguous-loops,convert-linalg-to-loops),"
         "autopar-outline-loop-nests,"
         "lower-affine,"
         "convert-scf-to-cf,"
         "expand-strided-metadata,"
         "lower-affine,"
         "math-extend-to-supported-types,"
         "autopar-approximate-math,"
         "arith-expand{include-bf16=true},"
         "convert-math-to-funcs{convert-ctlz=false},"
         "convert-math-to-llvm,"
         "convert-math-to-libm,"
         "finalize-memref-to-llvm,"
         "convert-arith-to-llvm,"
         "convert-index-to-llvm,"
         "convert-func-to-llvm,"
         "autopar-mark-noalias,"
         "convert-cf-to-llvm,"
         "reconcile-unrealized-casts";
}

LogicalResult lowerToLLVMForCpu(ModuleOp module) {
  // The pipeline is split where @main's memref types are recorded.
  llvm::StringRef pipeline = getCpuLoweringPipeline();
  size_t split = pipeline.find("autopar-lower-contractions-to-cpu-kernels");
  return lowerWithPackedEntry(module, pipeline.substr(0, split).rtrim(','),
                              pipeline.substr(split));
}

} // namespace autopar
