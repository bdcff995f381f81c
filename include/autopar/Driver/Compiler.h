//===- Compiler.h - The compile flow of autopar-compile ---------*- C++ -*-===//
//
// The flow from an ONNX file and a cluster to a plan report and an artifact
// (docs/architecture.md, "The compile flow"): validate the request, import,
// plan, then either build one training step or carry the plan out for
// inference (tensor-parallel partitioning with a fallback when it cannot
// run, pipeline stages, a data-parallel replica's re-import), lower each
// program for CPU ranks or GPUs and write the artifact. Each IR step is a
// pass or a registered pipeline (autopar-opt reproduces it); this library
// decides which run, on which programs, and what is written.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_DRIVER_COMPILER_H
#define AUTOPAR_DRIVER_COMPILER_H

#include "autopar/Transforms/Training.h"

#include <string>
#include <vector>

namespace autopar {

/// What autopar-compile is asked to do: its flags (docs/interfaces.md),
/// typed. 0, -1 and "" mean "not given".
struct CompileOptions {
  std::string modelPath;
  /// A preset (local:N, dgx-h100:NODES, ...) or a cluster JSON file.
  std::string cluster;
  /// NAME=D0xD1x..., and NAME=FILE.npy for inputs frozen to constants.
  std::vector<std::string> inputShapes, constInputs;
  PlanModeOption mode = PlanModeOption::Infer;
  PlanPrecisionOption precision = PlanPrecisionOption::Auto;
  PlanRecomputeOption recompute = PlanRecomputeOption::Auto;
  /// --pipeline-schedule: "gpipe" or "1f1b" (empty: 1F1B).
  std::string pipelineSchedule;
  /// --sequence-parallel: "on" or "off" (empty: the cost decides).
  std::string sequenceParallel;
  /// --mode train: the loss output, the DeepSpeed-style config, frozen
  /// parameter globs, and whether to stop after the gradients.
  std::string loss, trainConfigPath;
  std::vector<std::string> freeze;
  bool emitGradients = false;
  /// Rewrite attention into the FlashAttention kernels
  /// (docs/design/attention.md); false keeps the unfused ops.
  bool fuseAttention = true;
  /// Compute `--loss cross-entropy:OUTPUT` with the fused softmax
  /// cross-entropy kernels (docs/design/cross-entropy.md); false keeps the
  /// unfused linalg loss.
  bool fuseCrossEntropy = true;
  /// Price tensor-parallel collectives overlapped with their GEMMs, as
  /// Megatron-LM's --tp-comm-overlap runs them (--plan-only only: autopar's
  /// runtime does not overlap them).
  bool tpCommOverlap = false;
  /// Pins.
  int64_t dp = 0, tp = 0, pp = 0, zero = -1, microBatchSize = 0;
  /// --virtual-stages: model chunks per pipeline stage (-1: not given, one).
  int64_t virtualStages = -1;
  /// Plan and report only; print each op's decision; print why each plan
  /// dimension beat its runner-up (--explain-plan).
  bool planOnly = false, explain = false, explainPlan = false;
  std::string reportJson, outputDir, dumpDir;
  /// Also write a Slurm batch script that runs the artifact on the plan's
  /// nodes and ranks (training: resumable, so a requeued job continues).
  std::string emitSbatch;
  /// Also write the plan as Megatron-LM arguments, a DeepSpeed config and
  /// torchtitan's TOML (FrameworkExport.h): a path, or "-" for stdout.
  std::string emitMegatron, emitDeepSpeed, emitTorchtitan;
  /// LLVM CPU of the host code; the CUDA toolkit for GPU code.
  std::string targetCpu = "native", cudaPath;
};

/// Registers every pass the flow may run (upstream's and autopar's), so that
/// MLIR's pass manager options that name passes
/// (`--mlir-print-ir-after=autopar-plan`) parse. Call before parsing the
/// command line.
void registerCompilerPasses();

/// Runs the compile flow. Prints the plan table (and progress) to
/// llvm::outs() and every error, prefixed `autopar-compile: error:`, to
/// llvm::errs(). Returns the process's exit code: 0 on success.
int runCompiler(const CompileOptions &options);

} // namespace autopar

#endif // AUTOPAR_DRIVER_COMPILER_H
