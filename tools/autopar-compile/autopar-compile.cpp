//===- autopar-compile.cpp - ONNX model in, plan and artifact out ---------===//
//
// The user-facing compiler (docs/interfaces.md): parses the flags for the
// compile flow of lib/Driver (Compiler.h). MLIR's pass manager options
// (--mlir-print-ir-after-all, --mlir-timing) reach every pipeline it runs.
//
//===----------------------------------------------------------------------===//

#include "autopar/Driver/Compiler.h"

#include "mlir/Pass/PassManager.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"

namespace cl = llvm::cl;
using namespace autopar;

static cl::OptionCategory category("autopar-compile options");
/// What the flags below write into (cl::location); the defaults are
/// CompileOptions's.
static CompileOptions options;
static cl::opt<std::string, true> modelPath(cl::Positional, cl::Required,
                                            cl::desc("MODEL.onnx"),
                                            cl::location(options.modelPath),
                                            cl::cat(category));
static cl::opt<std::string, true>
    cluster("cluster", cl::Required,
            cl::desc("Cluster: a preset (local:N, dgx-h100:NODES, ...), "
                     "slurm:NODE (this Slurm allocation of NODE nodes) or a "
                     "JSON file"),
            cl::value_desc("SPEC"), cl::location(options.cluster),
            cl::cat(category));
static cl::list<std::string, std::vector<std::string>> inputShapes(
    "input-shape",
    cl::desc("Shape of a graph input, NAME=D0xD1x... (repeatable; the batch "
             "dim is the global batch)"),
    cl::value_desc("NAME=DIMS"), cl::location(options.inputShapes),
    cl::cat(category));
static cl::list<std::string, std::vector<std::string>> constInputs(
    "const-input",
    cl::desc("Freeze a graph input to a .npy file's contents (a constant)"),
    cl::value_desc("NAME=FILE.npy"), cl::location(options.constInputs),
    cl::cat(category));
static cl::opt<PlanModeOption, true> mode(
    "mode", cl::desc("What the plan runs"),
    cl::values(clEnumValN(PlanModeOption::Infer, "infer", "forward only"),
               clEnumValN(PlanModeOption::Train, "train", "training steps")),
    cl::location(options.mode), cl::cat(category));
static cl::opt<std::string, true> loss(
    "loss",
    cl::desc("--mode train: the graph output that is the loss (default: the "
             "only scalar float output), or cross-entropy:OUTPUT"),
    cl::value_desc("NAME"), cl::location(options.loss), cl::cat(category));
static cl::opt<std::string, true> trainConfig(
    "train-config",
    cl::desc("--mode train: hyperparameters in DeepSpeed's JSON schema "
             "(optimizer, scheduler, gradient_clipping, batch sizes)"),
    cl::value_desc("FILE"), cl::location(options.trainConfigPath),
    cl::cat(category));
static cl::list<std::string, std::vector<std::string>>
    freeze("freeze",
           cl::desc("--mode train: keep initializers matching this glob fixed "
                    "(repeatable)"),
           cl::value_desc("GLOB"), cl::location(options.freeze),
           cl::cat(category));
static cl::opt<bool, true> emitGradients(
    "emit-gradients",
    cl::desc("--mode train: stop after differentiation: the loss and "
             "'<parameter>.grad' outputs, run as an inference artifact"),
    cl::location(options.emitGradients), cl::cat(category));
static cl::opt<bool, true> fuseAttention(
    "fuse-attention",
    cl::desc("Run attention as fused FlashAttention kernels, forward and "
             "backward (default true; =false keeps the unfused softmax, for "
             "comparison)"),
    cl::location(options.fuseAttention), cl::cat(category));
static cl::opt<bool, true> fuseCrossEntropy(
    "fuse-cross-entropy",
    cl::desc("--mode train: compute a softmax cross-entropy (the model's "
             "SoftmaxCrossEntropyLoss, or --loss cross-entropy:OUTPUT) with "
             "the fused kernels, forward and backward (default true; =false "
             "keeps the unfused loss, for comparison)"),
    cl::location(options.fuseCrossEntropy), cl::cat(category));
static cl::opt<bool, true> tpCommOverlap(
    "tp-comm-overlap",
    cl::desc("With --plan-only: price tensor-parallel collectives overlapped "
             "with their GEMMs in chunks, as Megatron-LM's --tp-comm-overlap "
             "(Transformer Engine) runs them; autopar's runtime does not"),
    cl::location(options.tpCommOverlap), cl::cat(category));
static cl::opt<PlanPrecisionOption, true>
    precision("precision",
              cl::desc("Precision (default: bf16 on GPUs, fp32 on CPU ranks)"),
              cl::values(clEnumValN(PlanPrecisionOption::FP32, "fp32", "fp32"),
                         clEnumValN(PlanPrecisionOption::BF16, "bf16",
                                    "bf16 storage, f32 arithmetic"),
                         clEnumValN(PlanPrecisionOption::FP16, "fp16",
                                    "fp16 storage, f32 arithmetic")),
              cl::location(options.precision), cl::cat(category));
static cl::opt<int64_t, true> dp("dp", cl::desc("Pin data parallelism"),
                                 cl::location(options.dp), cl::cat(category));
static cl::opt<int64_t, true> tp("tp", cl::desc("Pin tensor parallelism"),
                                 cl::location(options.tp), cl::cat(category));
static cl::opt<int64_t, true> pp("pp", cl::desc("Pin pipeline parallelism"),
                                 cl::location(options.pp), cl::cat(category));
static cl::opt<int64_t, true> zero("zero", cl::desc("Pin the ZeRO stage"),
                                   cl::location(options.zero),
                                   cl::cat(category));
static cl::opt<int64_t, true>
    microBatchSize("micro-batch-size", cl::desc("Pin the micro-batch size"),
                   cl::location(options.microBatchSize), cl::cat(category));
static cl::opt<PlanRecomputeOption, true>
    recompute("recompute", cl::desc("Pin recomputation"),
              cl::values(clEnumValN(PlanRecomputeOption::None, "none", "none"),
                         clEnumValN(PlanRecomputeOption::Selective, "selective",
                                    "attention's inner activations"),
                         clEnumValN(PlanRecomputeOption::Full, "full",
                                    "every layer's forward")),
              cl::location(options.recompute), cl::cat(category));
static cl::opt<std::string, true> sequenceParallel(
    "sequence-parallel",
    cl::desc("Pin Megatron-LM's sequence parallelism: on splits the "
             "activations handed between and within the layers (LayerNorm, "
             "dropout, residual adds) along the sequence over tp, with "
             "reduce-scatters and all-gathers around each tensor-parallel "
             "pair; off keeps them whole (default: the cost decides)"),
    cl::value_desc("on|off"), cl::location(options.sequenceParallel),
    cl::cat(category));
static cl::opt<std::string, true> pipelineSchedule(
    "pipeline-schedule",
    cl::desc("Pin the pipeline schedule: gpipe (every forward, then every "
             "backward) or 1f1b (the default, Megatron's)"),
    cl::value_desc("gpipe|1f1b"), cl::location(options.pipelineSchedule),
    cl::cat(category));
static cl::opt<int64_t, true> virtualStages(
    "virtual-stages",
    cl::desc("Model chunks per pipeline stage (training): N > 1 runs "
             "Megatron-LM's interleaved 1F1B, each stage holding N chunks of "
             "the layers, which cuts the pipeline bubble N-fold for N times "
             "the point-to-point messages; needs --pp above 1 (or a plan with "
             "one) and micro-batches a multiple of pp (default 1)"),
    cl::value_desc("N"), cl::location(options.virtualStages),
    cl::cat(category));
static cl::opt<bool, true>
    planOnly("plan-only", cl::desc("Plan and report; no code generation"),
             cl::location(options.planOnly), cl::cat(category));
static cl::opt<std::string, true>
    reportJson("report-json", cl::desc("Write the plan report here"),
               cl::value_desc("FILE"), cl::location(options.reportJson),
               cl::cat(category));
static cl::opt<bool, true>
    explain("explain",
            cl::desc("Print each op's sharding decision with its cost"),
            cl::location(options.explain), cl::cat(category));
static cl::opt<bool, true> explainPlan(
    "explain-plan",
    cl::desc("Print why each plan dimension (dp, tp, pp, ZeRO stage, "
             "micro-batch size, recompute) beat its runner-up"),
    cl::location(options.explainPlan), cl::cat(category));
static cl::opt<std::string, true> outputDir("o", cl::desc("Artifact directory"),
                                            cl::value_desc("ARTIFACT_DIR"),
                                            cl::location(options.outputDir),
                                            cl::cat(category));
static cl::opt<std::string, true> emitSbatch(
    "emit-sbatch",
    cl::desc("Also write a Slurm batch script running the artifact on the "
             "plan's nodes and ranks (training: resumable)"),
    cl::value_desc("FILE"), cl::location(options.emitSbatch),
    cl::cat(category));
static cl::opt<std::string, true> emitMegatron(
    "emit-megatron",
    cl::desc("Also write the plan as Megatron-LM arguments (- for stdout)"),
    cl::value_desc("FILE"), cl::location(options.emitMegatron),
    cl::cat(category));
static cl::opt<std::string, true> emitDeepSpeed(
    "emit-deepspeed",
    cl::desc("Also write the plan as a DeepSpeed ds_config.json, with "
             "--train-config's optimizer and scheduler (- for stdout)"),
    cl::value_desc("FILE"), cl::location(options.emitDeepSpeed),
    cl::cat(category));
static cl::opt<std::string, true> emitTorchtitan(
    "emit-torchtitan",
    cl::desc("Also write the plan as torchtitan job config TOML sections (- "
             "for stdout)"),
    cl::value_desc("FILE"), cl::location(options.emitTorchtitan),
    cl::cat(category));
static cl::opt<std::string, true>
    dumpDir("dump-ir",
            cl::desc("Write the IR after each phase to DIR (imported.mlir, "
                     "annotated.mlir, partitioned.mlir, train-step.mlir, "
                     "llvm-dialect.mlir, model.ll)"),
            cl::value_desc("DIR"), cl::location(options.dumpDir),
            cl::cat(category));
static cl::opt<std::string, true>
    targetCpu("target-cpu",
              cl::desc("LLVM CPU name for CPU code, and for the host code of "
                       "GPU programs (default: this machine's)"),
              cl::location(options.targetCpu), cl::cat(category));
static cl::opt<std::string, true> cudaPath(
    "cuda-path",
    cl::desc("CUDA toolkit root, whose bin/ptxas assembles GPU kernels "
             "(default: $CUDA_HOME, $CUDA_PATH, the toolkit found at build "
             "time, or ptxas on PATH)"),
    cl::value_desc("DIR"), cl::location(options.cudaPath), cl::cat(category));

int main(int argc, char **argv) {
  llvm::InitLLVM y(argc, argv);
  // Passes first: the pass manager options list the registered passes.
  registerCompilerPasses();
  mlir::registerPassManagerCLOptions();
  // MLIR's pass manager options work but stay out of --help.
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "autopar-compile: plan and compile an ONNX model for a cluster\n");
  return runCompiler(options);
}
