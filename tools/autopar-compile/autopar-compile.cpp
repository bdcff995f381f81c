//===- autopar-compile.cpp - ONNX model in, plan and artifact out ---------===//
//
// The user-facing compiler (docs/interfaces.md): parses the flags and hands
// them to the compile flow of lib/Driver (Compiler.h). The MLIR pass manager
// options (--mlir-print-ir-after-all, --mlir-timing, ...) apply to every
// pipeline the flow runs (--mlir-print-ir-after=PASS names any of its passes).
//
//===----------------------------------------------------------------------===//

#include "autopar/Driver/Compiler.h"

#include "mlir/Pass/PassManager.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"

namespace cl = llvm::cl;
using autopar::PlanModeOption;
using autopar::PlanPrecisionOption;
using autopar::PlanRecomputeOption;

static cl::OptionCategory category("autopar-compile options");
static cl::opt<std::string> modelPath(cl::Positional, cl::Required,
                                      cl::desc("MODEL.onnx"),
                                      cl::cat(category));
static cl::opt<std::string>
    cluster("cluster", cl::Required,
            cl::desc("Cluster: a preset (local:N, dgx-h100:NODES, ...) or a "
                     "JSON file"),
            cl::value_desc("SPEC"), cl::cat(category));
static cl::list<std::string> inputShapes(
    "input-shape",
    cl::desc("Shape of a graph input, NAME=D0xD1x... (repeatable; the batch "
             "dim is the global batch)"),
    cl::value_desc("NAME=DIMS"), cl::cat(category));
static cl::list<std::string> constInputs(
    "const-input",
    cl::desc("Freeze a graph input to the contents of a .npy file, making it "
             "a compile-time constant (for inputs that decide shapes)"),
    cl::value_desc("NAME=FILE.npy"), cl::cat(category));
static cl::opt<PlanModeOption> mode(
    "mode", cl::init(PlanModeOption::Infer), cl::desc("What the plan runs"),
    cl::values(clEnumValN(PlanModeOption::Infer, "infer", "forward only"),
               clEnumValN(PlanModeOption::Train, "train", "training steps")),
    cl::cat(category));
static cl::opt<std::string> loss(
    "loss",
    cl::desc("--mode train: the graph output that is the loss (default: the "
             "only scalar float output), or cross-entropy:OUTPUT"),
    cl::value_desc("NAME"), cl::cat(category));
static cl::opt<std::string> trainConfig(
    "train-config",
    cl::desc("--mode train: hyperparameters in DeepSpeed's JSON schema "
             "(optimizer, scheduler, gradient_clipping, batch sizes)"),
    cl::value_desc("FILE"), cl::cat(category));
static cl::list<std::string>
    freeze("freeze",
           cl::desc("--mode train: keep initializers matching this glob fixed "
                    "(repeatable)"),
           cl::value_desc("GLOB"), cl::cat(category));
static cl::opt<bool> emitGradients(
    "emit-gradients",
    cl::desc("--mode train: stop after differentiation; the program returns "
             "the loss and one '<parameter>.grad' output per trained "
             "parameter and runs as an inference artifact (for checking "
             "gradients)"),
    cl::cat(category));
static cl::opt<PlanPrecisionOption>
    precision("precision", cl::init(PlanPrecisionOption::Auto),
              cl::desc("Precision (default: bf16 on GPUs, fp32 on CPU ranks)"),
              cl::values(clEnumValN(PlanPrecisionOption::FP32, "fp32", "fp32"),
                         clEnumValN(PlanPrecisionOption::BF16, "bf16",
                                    "bf16 storage, f32 arithmetic"),
                         clEnumValN(PlanPrecisionOption::FP16, "fp16",
                                    "fp16 storage, f32 arithmetic")),
              cl::cat(category));
static cl::opt<int64_t> dp("dp", cl::desc("Pin data parallelism"),
                           cl::cat(category));
static cl::opt<int64_t> tp("tp", cl::desc("Pin tensor parallelism"),
                           cl::cat(category));
static cl::opt<int64_t> pp("pp", cl::desc("Pin pipeline parallelism"),
                           cl::cat(category));
static cl::opt<int64_t> zero("zero", cl::init(-1),
                             cl::desc("Pin the ZeRO stage"), cl::cat(category));
static cl::opt<int64_t> microBatchSize("micro-batch-size",
                                       cl::desc("Pin the micro-batch size"),
                                       cl::cat(category));
static cl::opt<PlanRecomputeOption>
    recompute("recompute", cl::init(PlanRecomputeOption::Auto),
              cl::desc("Pin recomputation"),
              cl::values(clEnumValN(PlanRecomputeOption::None, "none", "none"),
                         clEnumValN(PlanRecomputeOption::Selective, "selective",
                                    "attention's inner activations"),
                         clEnumValN(PlanRecomputeOption::Full, "full",
                                    "every layer's forward")),
              cl::cat(category));
static cl::opt<bool> planOnly("plan-only",
                              cl::desc("Plan and report; no code generation"),
                              cl::cat(category));
static cl::opt<std::string> reportJson("report-json",
                                       cl::desc("Write the plan report here"),
                                       cl::value_desc("FILE"),
                                       cl::cat(category));
static cl::opt<bool>
    explain("explain",
            cl::desc("Print each op's sharding decision with its cost"),
            cl::cat(category));
static cl::opt<std::string> outputDir("o", cl::desc("Artifact directory"),
                                      cl::value_desc("ARTIFACT_DIR"),
                                      cl::cat(category));
static cl::opt<std::string>
    dumpDir("dump-ir",
            cl::desc("Write the IR after each phase to DIR (imported.mlir, "
                     "annotated.mlir, partitioned.mlir, train-step.mlir, "
                     "llvm-dialect.mlir, model.ll)"),
            cl::value_desc("DIR"), cl::cat(category));
static cl::opt<std::string>
    targetCpu("target-cpu", cl::init("native"),
              cl::desc("LLVM CPU name for CPU code, and for the host code of "
                       "GPU programs (default: this machine's)"),
              cl::cat(category));
static cl::opt<std::string> cudaPath(
    "cuda-path",
    cl::desc("CUDA toolkit root, whose bin/ptxas assembles GPU kernels "
             "(default: $CUDA_HOME, $CUDA_PATH, the toolkit found at build "
             "time, or ptxas on PATH)"),
    cl::value_desc("DIR"), cl::cat(category));

int main(int argc, char **argv) {
  llvm::InitLLVM y(argc, argv);
  // Passes first: the pass manager options list the registered passes.
  autopar::registerCompilerPasses();
  mlir::registerPassManagerCLOptions();
  // MLIR's pass manager options (--mlir-print-ir-after-all, --mlir-timing)
  // work but stay out of --help, as LLVM's own do.
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "autopar-compile: plan and compile an ONNX model for a cluster\n");
  autopar::CompileOptions options;
  options.modelPath = modelPath;
  options.cluster = cluster;
  options.inputShapes.assign(inputShapes.begin(), inputShapes.end());
  options.constInputs.assign(constInputs.begin(), constInputs.end());
  options.mode = mode;
  options.precision = precision;
  options.recompute = recompute;
  options.loss = loss;
  options.trainConfigPath = trainConfig;
  options.freeze.assign(freeze.begin(), freeze.end());
  options.emitGradients = emitGradients;
  options.dp = dp;
  options.tp = tp;
  options.pp = pp;
  options.zero = zero;
  options.microBatchSize = microBatchSize;
  options.planOnly = planOnly;
  options.explain = explain;
  options.reportJson = reportJson;
  options.outputDir = outputDir;
  options.dumpDir = dumpDir;
  options.targetCpu = targetCpu;
  options.cudaPath = cudaPath;
  return autopar::runCompiler(options);
}
