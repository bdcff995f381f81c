//===- LoweringPasses.h - Steps the CPU and GPU pipelines share -*- C++ -*-===//
//
// The CPU (CpuCodegen.h) and GPU (GpuCodegen.h) lowering pipelines are built
// in C++ from the passes' own constructors; the steps they share are here,
// and registerLoweringPipelines() makes both available by name
// (`autopar-cpu-pipeline`, `autopar-gpu-pipeline`) to autopar-opt.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_TARGET_LOWERINGPASSES_H
#define AUTOPAR_TARGET_LOWERINGPASSES_H

#include "mlir/Pass/PassManager.h"

#include <memory>
#include <string>

namespace autopar {

/// One-Shot Bufferize with identity layouts at function boundaries, results
/// turned into out-params (static allocations hoisted, `@main` included),
/// results forwarded into them, and temporaries freed.
/// `allowReturnAllocsFromLoops`: a loop may yield a new buffer (CPU).
void addBufferizationPasses(mlir::OpPassManager &pm,
                            bool allowReturnAllocsFromLoops);

/// Math that LLVM or the GPU cannot do directly: f16/bf16 math computed in
/// f32, autopar's approximations, arith ops expanded (bf16 included), and
/// the rest of math as calls to generated functions.
void addMathLoweringPasses(mlir::OpPassManager &pm);

/// Applies `--mlir-print-ir-after-all`, `--mlir-timing` and the other pass
/// manager options when the tool registered them, so that every pipeline
/// autopar-compile runs can be printed or timed from its command line.
void applyPassManagerCLOptionsIfAny(mlir::PassManager &pm);

/// A pass that fails, reporting `message` on the op it runs on: what a
/// pipeline builder, which cannot fail, adds when its options are wrong.
std::unique_ptr<mlir::Pass> createReportErrorPass(std::string message);

/// Registers `autopar-cpu-pipeline` and `autopar-gpu-pipeline`.
void registerLoweringPipelines();

} // namespace autopar

#endif // AUTOPAR_TARGET_LOWERINGPASSES_H
