//===- CpuCodegen.cpp - linalg-on-tensors to a native shared library ------===//

#include "autopar/Target/CpuCodegen.h"
#include "autopar/Conversion/Passes.h"
#include "autopar/Target/LoweringPasses.h"
#include "autopar/Transforms/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
namespace autopar {

void buildCpuBufferizationPipeline(OpPassManager &pm, bool fuseAttention) {
  // - fuse elementwise chains so that bias/residual/activation run in one
  //   loop nest instead of one pass over memory each;
  // - bufferize with identity layouts at the function boundary so every
  //   argument is a dense row-major buffer, and turn results into out-params
  //   that the runtime allocates; a loop may yield a new buffer (gradient
  //   accumulation carries BatchNorm's running statistics that way).
  OpPassManager &tensors = pm.nest<func::FuncOp>();
  // Attention first, while its pieces are still the importer's ops.
  if (fuseAttention)
    tensors.addPass(createFuseAttention());
  tensors.addPass(createCanonicalizerPass());
  tensors.addPass(createCollapseBatchedContractions());
  tensors.addPass(createFoldTransposesIntoMatmuls());
  tensors.addPass(createFuseElementwise());
  tensors.addPass(createCSEPass());
  tensors.addPass(createCanonicalizerPass());
  tensors.addPass(createSplitSharedInits());
  addBufferizationPasses(pm, /*allowReturnAllocsFromLoops=*/true);
  // Each buffer freed at its last use, not at its block's end: a training
  // step's temporaries die as they do in PyTorch, and what the step keeps
  // for its backward is what the planner prices.
  pm.addNestedPass<func::FuncOp>(createDeallocateAtLastUse());
}

void buildCpuLoweringToLLVMPipeline(OpPassManager &pm) {
  // - contractions go to the runtime's BLAS kernels; an embedding's gradient
  //   (a one-hot reduction) becomes a scatter in the reduction's order; the
  //   rest becomes loops (LLVM's vectorizer handles the static, unit-stride
  //   inner loops, made long by merging the loops that walk contiguous
  //   memory as one); the loop of a nest whose iterations write disjoint
  //   elements runs on the kernel threads (autopar-linalg-to-loops marks it,
  //   autopar-outline-loop-nests gives it a range, autopar-parallel-loop-calls
  //   hands the range to the runtime);
  // - math functions without an LLVM intrinsic (erf, ...) become libm calls,
  //   and f16/bf16 math is computed in f32.
  pm.addPass(createLowerContractionsToCpuKernels());
  pm.addPass(createLowerAttentionToKernels(
      LowerAttentionToKernelsOptions{/*library=*/"cpu"}));
  pm.addPass(createLowerCrossEntropyToKernels(
      LowerCrossEntropyToKernelsOptions{/*library=*/"cpu"}));
  pm.addPass(createCopiesToLinalg());
  OpPassManager &loops = pm.nest<func::FuncOp>();
  loops.addPass(createOneHotReductionsToScatter(
      OneHotReductionsToScatterOptions{/*atomic=*/false}));
  loops.addPass(createCollapseContiguousLoops());
  loops.addPass(createLinalgToLoops());
  pm.addPass(createOutlineLoopNests());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  addMathLoweringPasses(pm);
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  // Buffers are allocated through the runtime (_mlir_memref_to_llvm_*,
  // runtime/include/autopar/runtime/BufferAccounting.h), which counts them:
  // autopar-run measures the activations a training step keeps. Aligned
  // allocation asks for the buffer's bytes (rounded up to the alignment),
  // where the malloc lowering asks for an alignment's worth more to align
  // the pointer itself.
  FinalizeMemRefToLLVMConversionPassOptions memrefToLLVM;
  memrefToLLVM.useGenericFunctions = true;
  memrefToLLVM.useAlignedAlloc = true;
  pm.addPass(createFinalizeMemRefToLLVMConversionPass(memrefToLLVM));
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createMarkNoAlias());
  pm.addPass(createParallelLoopCalls());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createEmitPackedEntry());
}

void buildCpuPipeline(OpPassManager &pm, bool fuseAttention) {
  buildCpuBufferizationPipeline(pm, fuseAttention);
  pm.addPass(createRecordArgumentShapes());
  buildCpuLoweringToLLVMPipeline(pm);
}

LogicalResult lowerToLLVMForCpu(ModuleOp module, bool fuseAttention) {
  auto pm = PassManager::on<ModuleOp>(module.getContext());
  applyPassManagerCLOptionsIfAny(pm);
  buildCpuPipeline(pm, fuseAttention);
  return pm.run(module);
}

} // namespace autopar
