//===- autopar-compile.cpp - ONNX model in, plan and artifact out ---------===//
//
// The user-facing compiler driver (INTERFACES.md). It plans for any cluster
// and generates code for CPU ranks (`local:N`, CpuCodegen) and NVIDIA GPUs
// (GPU presets and cluster files, GpuCodegen), for inference.
//
//===----------------------------------------------------------------------===//

#include "PipelineStages.h"

#include "autopar/Driver/TrainConfig.h"
#include "autopar/Driver/TrainingStep.h"

#include "autopar/Conversion/Passes.h"
#include "autopar/Import/OnnxImporter.h"
#include "autopar/Import/WeightLocator.h"
#include "autopar/Planner/Cluster.h"
#include "autopar/Target/Artifact.h"
#include "autopar/Target/CpuCodegen.h"
#include "autopar/Target/GpuCodegen.h"
#include "autopar/Transforms/Passes.h"
#include "autopar/Transforms/PlanAnnotate.h"
#include "autopar/Transforms/ProjectionParts.h"
#include "autopar/Transforms/ShardingModels.h"
#include "autopar/Transforms/SinkMergingReshapes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/Timer.h"

#include <chrono>

using namespace mlir;
namespace cl = llvm::cl;

static cl::OptionCategory category("autopar-compile options");
static cl::opt<std::string> modelPath(cl::Positional, cl::Required,
                                      cl::desc("MODEL.onnx"),
                                      cl::cat(category));
static cl::opt<std::string>
    clusterSpec("cluster", cl::Required,
                cl::desc("Cluster: a preset (local:N) or a JSON file"),
                cl::value_desc("SPEC"), cl::cat(category));
static cl::list<std::string>
    inputShapes("input-shape",
                cl::desc("Shape of a graph input, NAME=D0xD1x... "
                         "(repeatable; the batch dim is the global batch)"),
                cl::value_desc("NAME=DIMS"), cl::cat(category));
static cl::list<std::string> constInputs(
    "const-input",
    cl::desc("Freeze a graph input to the contents of a .npy file, making it "
             "a compile-time constant (for inputs that decide shapes)"),
    cl::value_desc("NAME=FILE.npy"), cl::cat(category));
static cl::opt<std::string> mode("mode", cl::init("infer"),
                                 cl::desc("infer (forward only) or train"),
                                 cl::cat(category));
static cl::opt<std::string>
    lossName("loss",
             cl::desc("--mode train: the graph output that is the loss "
                      "(default: the only scalar float output)"),
             cl::value_desc("NAME"), cl::cat(category));
static cl::opt<std::string> trainConfigPath(
    "train-config",
    cl::desc("--mode train: hyperparameters in DeepSpeed's JSON schema "
             "(optimizer, scheduler, gradient_clipping, batch sizes)"),
    cl::value_desc("FILE"), cl::cat(category));
static cl::list<std::string>
    freezeGlobs("freeze",
                cl::desc("--mode train: keep initializers matching this glob "
                         "fixed (repeatable)"),
                cl::value_desc("GLOB"), cl::cat(category));
static cl::opt<bool> emitGradients(
    "emit-gradients",
    cl::desc("--mode train: stop after differentiation; the program returns "
             "the loss and one '<parameter>.grad' output per trained "
             "parameter and runs as an inference artifact (for checking "
             "gradients)"),
    cl::cat(category));
static cl::opt<std::string> precision("precision", cl::init(""),
                                      cl::desc("fp32, bf16 or fp16"),
                                      cl::cat(category));
static cl::opt<int> dp("dp", cl::init(0), cl::desc("Pin data parallelism"),
                       cl::cat(category));
static cl::opt<int> tp("tp", cl::init(0), cl::desc("Pin tensor parallelism"),
                       cl::cat(category));
static cl::opt<int> pp("pp", cl::init(0), cl::desc("Pin pipeline parallelism"),
                       cl::cat(category));
static cl::opt<int> zero("zero", cl::init(-1), cl::desc("Pin the ZeRO stage"),
                         cl::cat(category));
static cl::opt<int> microBatchSize("micro-batch-size", cl::init(0),
                                   cl::desc("Pin the micro-batch size"),
                                   cl::cat(category));
static cl::opt<std::string>
    recompute("recompute", cl::init(""),
              cl::desc("Pin recomputation: none, selective or full"),
              cl::cat(category));
static cl::opt<bool> planOnly("plan-only",
                              cl::desc("Plan and report; no code generation"),
                              cl::cat(category));
static cl::opt<std::string> reportJson("report-json",
                                       cl::desc("Write the plan report here"),
                                       cl::value_desc("FILE"),
                                       cl::cat(category));
static cl::opt<bool> explain("explain",
                             cl::desc("Print each op's sharding decision with "
                                      "its cost"),
                             cl::cat(category));
static cl::opt<std::string> outputDir("o", cl::desc("Artifact directory"),
                                      cl::value_desc("ARTIFACT_DIR"),
                                      cl::cat(category));
static cl::opt<std::string> dumpDir(
    "dump-ir",
    cl::desc(
        "Write the IR after each phase to DIR "
        "(imported.mlir, annotated.mlir, partitioned.mlir, llvm-dialect.mlir, "
        "model.ll)"),
    cl::value_desc("DIR"), cl::cat(category));
static cl::opt<std::string>
    targetCpu("target-cpu", cl::init("native"),
              cl::desc("LLVM CPU name for CPU code, and for the host code of "
                       "GPU programs (default: this machine's)"),
              cl::cat(category));
static cl::opt<std::string>
    cudaPath("cuda-path",
             cl::desc("CUDA toolkit root, whose bin/ptxas assembles GPU "
                      "kernels (default: $CUDA_HOME, $CUDA_PATH, the toolkit "
                      "found at build time, or ptxas on PATH)"),
             cl::value_desc("DIR"), cl::cat(category));

static int fail(const llvm::Twine &message) {
  llvm::outs().flush();
  llvm::errs() << "autopar-compile: error: " << message << "\n";
  return 1;
}

static void writeIR(llvm::StringRef name, ModuleOp module) {
  if (dumpDir.empty())
    return;
  llvm::sys::fs::create_directories(dumpDir);
  llvm::SmallString<256> path(dumpDir);
  llvm::sys::path::append(path, name);
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (!ec)
    module.print(os);
}

/// Partitions one data-parallel replica's program over `tp` ranks: plans the
/// per-op sharding for a tp group, annotates it, keeps inputs and outputs
/// replicated, runs upstream `sharding-propagation` and `shard-partition`,
/// and lowers the collectives to runtime calls. Records each argument's
/// local block in `arguments`, and in `predicted` the collectives the
/// replica's plan predicts (what its partitioned program issues).
static LogicalResult partitionTensorParallel(
    ModuleOp module, int64_t tp, const autopar::PlanRequest &request,
    std::vector<autopar::ArtifactArgument> &arguments,
    std::vector<autopar::CollectiveVolume> *predicted = nullptr) {
  auto main = module.lookupSymbol<func::FuncOp>("main");
  autopar::PlanRequest tpRequest = request;
  tpRequest.cluster.nodes = 1;
  tpRequest.cluster.gpusPerNode = tp;
  tpRequest.pins = {};
  tpRequest.pins.dp = 1;
  tpRequest.pins.tp = tp;
  tpRequest.pins.pp = 1;
  autopar::exposeProjectionParts(main);
  auto plan = autopar::planProgram(main, tpRequest);
  if (!plan) {
    llvm::errs() << "autopar-compile: error: "
                 << llvm::toString(plan.takeError()) << "\n";
    return failure();
  }
  autopar::annotateModuleWithPlan(module, *plan);
  if (predicted)
    *predicted = plan->best.collectives;
  // A plan that splits nothing (small ops on fast GPUs: every op replicated)
  // leaves the program as it is on every tp rank. Upstream's partitioning
  // crashes on a program whose only shardings are the replicated ones added
  // below, so there is nothing to run it for.
  bool splitsSomething = false;
  main.walk([&](shard::ShardOp) { splitsSomething = true; });
  if (!splitsSomething) {
    for (shard::GridOp grid :
         llvm::make_early_inc_range(module.getOps<shard::GridOp>()))
      grid.erase();
    return success();
  }

  // Graph inputs and outputs (and a pipeline stage's activations) stay whole
  // on every tp rank.
  MLIRContext *ctx = module.getContext();
  OpBuilder b(ctx);
  // One empty entry, not none: see createSharding in PlanAnnotate.cpp.
  auto replicated = [&](Location loc) {
    return shard::ShardingOp::create(
               b, loc, FlatSymbolRefAttr::get(ctx, "autopar_grid"),
               ArrayRef<shard::GridAxesAttr>{shard::GridAxesAttr::get(ctx, {})})
        .getResult();
  };
  b.setInsertionPointToStart(&main.getBody().front());
  for (BlockArgument arg : main.getArguments()) {
    if (main.getArgAttr(arg.getArgNumber(), autopar::attrs::kParameter))
      continue;
    // The input itself is whole; a user that needs it split slices it.
    auto annotated =
        shard::ShardOp::create(b, arg.getLoc(), arg, replicated(arg.getLoc()),
                               /*annotate_for_users=*/false);
    arg.replaceAllUsesExcept(annotated.getResult(), annotated);
  }
  auto ret = cast<func::ReturnOp>(main.getBody().front().getTerminator());
  b.setInsertionPoint(ret);
  for (OpOperand &operand : ret->getOpOperands()) {
    auto annotated = shard::ShardOp::create(b, ret.getLoc(), operand.get(),
                                            replicated(ret.getLoc()),
                                            /*annotate_for_users=*/false);
    operand.set(annotated.getResult());
  }

  llvm::SmallVector<llvm::SmallVector<int64_t>> global;
  for (Type t : main.getArgumentTypes())
    global.push_back(
        llvm::SmallVector<int64_t>(cast<RankedTensorType>(t).getShape()));

  writeIR("annotated.mlir", module);
  // Partition, then (after writing the partitioned IR) lower the
  // collectives to runtime calls.
  for (llvm::StringRef pipeline :
       {"func.func(sharding-propagation,autopar-check-partitionable,"
        "shard-partition,autopar-lower-embeddings,"
        "autopar-merge-projection-parts)",
        "autopar-lower-collectives-to-runtime,canonicalize"}) {
    PassManager pm = PassManager::on<ModuleOp>(ctx);
    if (failed(parsePassPipeline(pipeline, pm)) || failed(pm.run(module)))
      return failure();
    if (pipeline.starts_with("func"))
      writeIR("partitioned.mlir", module);
  }

  main = module.lookupSymbol<func::FuncOp>("main");
  for (auto [i, type] : llvm::enumerate(main.getArgumentTypes())) {
    auto local = cast<RankedTensorType>(type).getShape();
    autopar::ArtifactArgument &arg = arguments[i];
    if (local == llvm::ArrayRef(global[i]))
      continue;
    for (int64_t d = 0; d < int64_t(local.size()); ++d)
      if (local[d] != global[i][d]) {
        if (arg.kind != autopar::ArtifactArgument::Kind::Parameter) {
          llvm::errs() << "autopar-compile: error: '" << arg.name
                       << "' was split over tp; inputs and activations must "
                          "stay whole\n";
          return failure();
        }
        arg.globalShape = global[i];
        arg.splitDim = d;
        arg.splitAxis = "tp";
        arg.shape.assign(local.begin(), local.end());
        break;
      }
  }
  for (auto [k, type] : llvm::enumerate(main.getResultTypes())) {
    autopar::ArtifactArgument &out = arguments[main.getNumArguments() + k];
    if (cast<RankedTensorType>(type).getShape() != llvm::ArrayRef(out.shape)) {
      llvm::errs() << "autopar-compile: error: '" << out.name
                   << "' is not whole after partitioning\n";
      return failure();
    }
  }
  return success();
}

int main(int argc, char **argv) {
  llvm::InitLLVM y(argc, argv);
  registerAllPasses();
  autopar::registerAutoparConversionPasses();
  autopar::registerAutoparTransformsPasses();
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "autopar-compile: plan and compile an ONNX model for a cluster\n");
  auto start = std::chrono::steady_clock::now();

  // Validate the request before any work.
  autopar::TrainConfig trainConfig = autopar::defaultTrainConfig();
  if (mode == "train" && !trainConfigPath.empty()) {
    auto parsed = autopar::readTrainConfig(trainConfigPath);
    if (!parsed)
      return fail(llvm::toString(parsed.takeError()));
    trainConfig = std::move(*parsed);
    // A value in the file is a pin, like the CLI's: they must agree.
    if (trainConfig.zeroStage && zero >= 0 && *trainConfig.zeroStage != zero)
      return fail(trainConfigPath + ": zero_optimization.stage is " +
                  llvm::Twine(*trainConfig.zeroStage) + " but --zero is " +
                  llvm::Twine(int(zero)));
    if (trainConfig.microBatchSize && microBatchSize > 0 &&
        *trainConfig.microBatchSize != microBatchSize)
      return fail(trainConfigPath + ": train_micro_batch_size_per_gpu is " +
                  llvm::Twine(*trainConfig.microBatchSize) +
                  " but --micro-batch-size is " +
                  llvm::Twine(int(microBatchSize)));
    // bf16/fp16 in the file is the precision, like --precision.
    if (!trainConfig.precision.empty()) {
      if (!precision.empty() && precision != trainConfig.precision)
        return fail(trainConfigPath + ": " + trainConfig.precision +
                    ".enabled is true but --precision is " + precision);
      precision = trainConfig.precision;
    }
  }
  // --precision bf16/fp16 alone trains in that precision (DeepSpeed's
  // defaults for fp16's loss scaling).
  if (mode == "train" && trainConfig.precision.empty() &&
      (precision == "bf16" || precision == "fp16"))
    trainConfig.precision = precision;
  autopar::PlanFlags flags;
  flags.cluster = clusterSpec;
  flags.mode = mode;
  flags.precision = precision;
  flags.recompute = recompute;
  flags.dp = dp;
  flags.tp = tp;
  flags.pp = pp;
  flags.zero = zero;
  flags.microBatchSize = microBatchSize;
  auto built = autopar::buildPlanRequest(flags);
  if (!built)
    return fail(llvm::toString(built.takeError()));
  autopar::PlanRequest request = std::move(*built);
  const autopar::ClusterSpec *cluster = &request.cluster;
  request.modelName = llvm::sys::path::filename(modelPath).str();
  // Code generation exists for inference and one-rank training, on CPU ranks
  // and NVIDIA GPUs; planning works for every request (--plan-only).
  bool gpu = !cluster->isLocalCpu();
  bool training = request.mode == autopar::PlanMode::Training;
  for (auto [flag, given] : {std::pair{"--loss", !lossName.empty()},
                             {"--train-config", !trainConfigPath.empty()},
                             {"--freeze", !freezeGlobs.empty()},
                             {"--emit-gradients", bool(emitGradients)}})
    if (given && !training)
      return fail(llvm::Twine(flag) + " needs --mode train");
  if (!planOnly && training && cluster->worldSize() != 1)
    return fail("--cluster " + clusterSpec +
                " --mode train: training code is generated for one rank so "
                "far (--cluster local:1, or a cluster of one GPU); "
                "distributed training is being built. Use --plan-only to "
                "plan and report for this cluster");
  // On a GPU the plan's precision (bf16 unless --precision says otherwise)
  // is the step's mixed precision, as for inference.
  if (training && gpu && trainConfig.precision.empty() &&
      (request.precision == autopar::Precision::BF16 ||
       request.precision == autopar::Precision::FP16))
    trainConfig.precision = autopar::precisionName(request.precision).str();
  // --loss cross-entropy:OUTPUT adds PyTorch's cross-entropy to logits.
  if (lossName == "cross-entropy:")
    return fail("--loss cross-entropy:OUTPUT: name the output holding the "
                "logits, e.g. --loss cross-entropy:logits");
  // The precision the generated code stores parameters and activations in
  // (GPU: bf16/fp16 with f32 arithmetic; TF32 is not used, so tf32 plans run
  // fp32 GEMMs).
  autopar::Precision codePrecision = autopar::Precision::FP32;
  if (gpu && (request.precision == autopar::Precision::BF16 ||
              request.precision == autopar::Precision::FP16))
    codePrecision = request.precision;
  autopar::GpuTarget gpuTarget;
  if (gpu && !planOnly) {
    // Check the device target before any work: an unknown architecture or
    // a missing toolkit would otherwise fail after the whole lowering.
    gpuTarget.arch = cluster->device.arch;
    if (gpuTarget.arch.empty())
      return fail("--cluster " + clusterSpec + ": the GPU '" +
                  cluster->device.name +
                  "' has no architecture; give \"arch\" (e.g. \"sm_90\") "
                  "in the cluster file's gpu object to generate code for it");
    if (auto features = autopar::getPtxFeatures(gpuTarget.arch); !features)
      return fail("--cluster " + clusterSpec + ": " +
                  llvm::toString(features.takeError()));
    auto toolkit = autopar::findCudaToolkit(cudaPath);
    if (!toolkit)
      return fail("--cluster " + clusterSpec + " (GPU code generation): " +
                  llvm::toString(toolkit.takeError()));
    gpuTarget.cudaPath = *toolkit;
    gpuTarget.precision = autopar::precisionName(codePrecision).str();
  }
  if (!planOnly && outputDir.empty())
    return fail("no output directory: give -o ARTIFACT_DIR (or --plan-only)");

  autopar::ImportOptions options;
  // A training step also returns the parameters training updates besides
  // the trained ones (BatchNorm's running statistics).
  options.trainingStateUpdates = training;
  for (const std::string &flag : inputShapes) {
    std::string error;
    if (failed(autopar::parseInputShapeFlag(flag, options, error)))
      return fail(error);
  }
  for (const std::string &flag : constInputs) {
    std::string error;
    if (failed(autopar::parseConstInputFlag(flag, options, error)))
      return fail(error);
  }

  DialectRegistry registry;
  // autopar's sharding models first (registerAllDialects brings upstream's
  // linalg models, and the first attached wins): they replace upstream's.
  autopar::registerShardingModels(registry);
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registerAllToLLVMIRTranslations(registry);
  MLIRContext context(registry);
  // Messages name the file, the ONNX nodes and parameters themselves; the IR
  // of the op they were attached to (often all of @main) would bury them.
  context.printOpOnDiagnostic(false);
  // Importer messages name the file and node themselves; print them plainly.
  ScopedDiagnosticHandler handler(&context, [](Diagnostic &diag) {
    llvm::outs().flush();
    llvm::StringRef severity =
        diag.getSeverity() == DiagnosticSeverity::Error     ? "error"
        : diag.getSeverity() == DiagnosticSeverity::Warning ? "warning"
                                                            : "note";
    llvm::errs() << "autopar-compile: " << severity << ": " << diag << "\n";
    for (Diagnostic &note : diag.getNotes())
      llvm::errs() << "autopar-compile: note: " << note << "\n";
    return success();
  });

  OwningOpRef<ModuleOp> module =
      autopar::importOnnxFile(&context, modelPath, options);
  if (!module)
    return 1;
  auto main = module->lookupSymbol<func::FuncOp>("main");
  // Every program is planned and compiled with merged dims carried apart
  // (attention's batch * heads), here and where a replica or a stage is
  // re-imported.
  autopar::sinkMergingReshapes(main);
  writeIR("imported.mlir", *module);
  // On several ranks, plan attention's fused QKV projection as the parts a
  // tensor-parallel partition splits (a replica is re-imported).
  if (cluster->worldSize() > 1)
    autopar::exposeProjectionParts(main);
  auto arguments = autopar::collectArtifactArguments(main);
  if (failed(arguments))
    return 1;

  if (training) {
    // The micro-batch: the user's (--micro-batch-size, or the config's
    // train_micro_batch_size_per_gpu or gradient_accumulation_steps), else
    // the planner's; but the planner does not micro-batch a model whose
    // forward updates state (BatchNorm) on its own: that would change its
    // batch statistics (docs/training.md, "Gradient accumulation").
    int64_t batch = 0;
    for (const autopar::ArtifactArgument &arg : *arguments)
      if (arg.kind == autopar::ArtifactArgument::Kind::Input &&
          !arg.shape.empty()) {
        batch = arg.shape[0];
        break;
      }
    // DeepSpeed: train_batch_size = micro-batch x accumulation steps x dp.
    if (trainConfig.microBatchSize && trainConfig.accumulationSteps &&
        cluster->worldSize() == 1 &&
        *trainConfig.microBatchSize * *trainConfig.accumulationSteps != batch)
      return fail(trainConfigPath + ": train_micro_batch_size_per_gpu (" +
                  llvm::Twine(*trainConfig.microBatchSize) +
                  ") x gradient_accumulation_steps (" +
                  llvm::Twine(*trainConfig.accumulationSteps) +
                  ") must be the batch of --input-shape (" +
                  llvm::Twine(batch) + ") on one rank");
    if (!request.pins.microBatchSize && trainConfig.microBatchSize) {
      int64_t micro = *trainConfig.microBatchSize;
      if (micro < 1 || (batch > 0 && batch % micro != 0))
        return fail(trainConfigPath + ": train_micro_batch_size_per_gpu (" +
                    llvm::Twine(micro) +
                    ") must divide the batch of --input-shape (" +
                    llvm::Twine(batch) + ")");
      request.pins.microBatchSize = micro;
    }
    // gradient_accumulation_steps alone fixes the micro-batch on one rank;
    // on several it depends on dp, which the planner chooses.
    if (!request.pins.microBatchSize && trainConfig.accumulationSteps &&
        batch > 0 && cluster->worldSize() == 1) {
      int64_t steps = *trainConfig.accumulationSteps;
      if (steps < 1 || batch % steps != 0)
        return fail(trainConfigPath + ": gradient_accumulation_steps (" +
                    llvm::Twine(steps) +
                    ") must divide the batch of --input-shape (" +
                    llvm::Twine(batch) + ")");
      request.pins.microBatchSize = batch / steps;
    }
    bool updatesState = false;
    for (unsigned i = 0; i < main.getNumResults(); ++i)
      updatesState |= bool(main.getResultAttr(i, autopar::attrs::kUpdate));
    request.wholeReplicaBatch = updatesState;
  }

  auto plan = autopar::planProgram(main, request);
  if (!plan)
    return fail(llvm::toString(plan.takeError()));
  autopar::printPlanTable(llvm::outs(), *plan, request);
  if (explain)
    autopar::printPlanExplanation(llvm::outs(), *plan);
  // The report describes the plan that runs: when the best plan cannot be
  // executed and another is, the report is that one's, and says why.
  auto writeReport = [&](const autopar::PlanResult &result,
                         const autopar::PlanRequest &forRequest,
                         llvm::json::Array fallbacks) -> bool {
    if (reportJson.empty())
      return true;
    std::error_code ec;
    llvm::raw_fd_ostream os(reportJson, ec);
    if (ec) {
      fail("cannot write " + reportJson + ": " + ec.message());
      return false;
    }
    llvm::json::Value report = autopar::planReportJson(result, forRequest);
    if (!fallbacks.empty())
      (*report.getAsObject())["fallbacks"] = std::move(fallbacks);
    os << llvm::formatv("{0:2}", report) << "\n";
    return true;
  };
  if (planOnly)
    return writeReport(*plan, request, {}) ? 0 : 1;

  if (training) {
    // train_batch_size, when given, must be the batch of --input-shape.
    if (trainConfig.trainBatchSize &&
        *trainConfig.trainBatchSize != plan->globalBatch)
      return fail(trainConfigPath + ": train_batch_size is " +
                  llvm::Twine(*trainConfig.trainBatchSize) +
                  " but the inputs' batch (--input-shape) is " +
                  llvm::Twine(plan->globalBatch));
    // On one rank the plan's micro-batches are accumulated in the step.
    const autopar::PlanCandidate &best = plan->best;
    int64_t microBatches = best.numMicroBatches;
    if (best.dp * best.microBatchSize * microBatches != plan->globalBatch)
      return fail("the plan's " + llvm::Twine(microBatches) +
                  " micro-batches of " + llvm::Twine(best.microBatchSize) +
                  " do not make the global batch " +
                  llvm::Twine(plan->globalBatch));
    llvm::json::Array notes;
    if (microBatches > 1) {
      // The step runs the forward one micro-batch at a time: import it at
      // that batch.
      autopar::ImportOptions perMicroBatch = options;
      perMicroBatch.batchRatio = plan->globalBatch / best.microBatchSize;
      for (const autopar::ArtifactArgument &arg : *arguments) {
        if (arg.kind != autopar::ArtifactArgument::Kind::Input)
          continue;
        if (arg.shape.empty() || arg.shape[0] != plan->globalBatch)
          return fail("input '" + arg.name +
                      "' does not have the global batch (" +
                      llvm::Twine(plan->globalBatch) +
                      ") as its leading dim, so it cannot be cut into "
                      "micro-batches for gradient accumulation");
        llvm::SmallVector<int64_t> shape(arg.shape);
        shape[0] = best.microBatchSize;
        perMicroBatch.inputShapes[arg.name] = shape;
      }
      module = autopar::importOnnxFile(&context, modelPath, perMicroBatch);
      if (!module)
        return fail("importing " + modelPath + " for a micro-batch of " +
                    llvm::Twine(best.microBatchSize) + " failed");
      llvm::outs() << "  accumulation  " << microBatches << " micro-batches of "
                   << best.microBatchSize
                   << " per step (one optimizer step per global batch of "
                   << plan->globalBatch << ")\n";
      if (request.wholeReplicaBatch) {
        std::string note =
            "BatchNorm statistics are computed per micro-batch of " +
            std::to_string(best.microBatchSize) +
            ", as PyTorch computes them under gradient accumulation, not "
            "over the global batch";
        llvm::outs() << "  note: " << note << "\n";
        notes.push_back(note);
      }
    }
    // One training step: loss and gradients, then clipping, schedule and
    // update (docs/training.md); then the artifact.
    autopar::TrainingStepOptions step;
    step.loss = lossName;
    step.freeze.assign(freezeGlobs.begin(), freezeGlobs.end());
    step.emitGradients = emitGradients;
    step.microBatches = microBatches;
    step.config = trainConfig;
    step.lowPrecisionGemms = gpu;
    PassManager pm = PassManager::on<ModuleOp>(&context);
    autopar::buildTrainingStepPipeline(pm, step);
    if (failed(pm.run(*module)))
      return 1;
    writeIR("train-step.mlir", *module);
    autopar::TrainingArtifactOptions artifact;
    artifact.modelPath = modelPath;
    artifact.outputDir = outputDir;
    artifact.cluster = clusterSpec;
    artifact.targetCpu = targetCpu;
    artifact.dumpDir = dumpDir;
    artifact.globalBatch = plan->globalBatch;
    artifact.microBatches = microBatches;
    artifact.withOptimizer = !emitGradients;
    artifact.config = trainConfig;
    artifact.loss = lossName;
    artifact.importOptions = options;
    if (gpu) {
      // The step carries its own mixed precision (f32 master weights).
      artifact.gpu = gpuTarget;
      artifact.gpu->precision = "fp32";
    }
    std::string error;
    auto trained = autopar::writeTrainingArtifact(*module, artifact, error);
    if (failed(trained))
      return fail(error);
    llvm::outs() << llvm::formatv(
        "  trained: {0} parameters ({1:F2} MiB) in {2} tensors\n",
        trained->elements, trained->bytes / (1024.0 * 1024.0),
        trained->tensors);
    if (!reportJson.empty()) {
      std::error_code ec;
      llvm::raw_fd_ostream os(reportJson, ec);
      if (ec)
        return fail("cannot write " + reportJson + ": " + ec.message());
      llvm::json::Value report = autopar::planReportJson(*plan, request);
      if (!notes.empty())
        (*report.getAsObject())["notes"] = std::move(notes);
      (*report.getAsObject())["trainable_parameters"] =
          llvm::json::Object{{"count", trained->elements},
                             {"bytes", trained->bytes},
                             {"tensors", trained->tensors}};
      os << llvm::formatv("{0:2}", report) << "\n";
    }
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    llvm::outs() << "wrote " << outputDir << " (training step, compiled in "
                 << llvm::format("%.2f", seconds) << " s)\n";
    return 0;
  }

  autopar::PlanCandidate executable = plan->best;
  std::optional<autopar::PlanResult> executedPlan;
  std::optional<autopar::PlanRequest> executedRequest;
  llvm::json::Array fallbacks;
  // Replans without what cannot run (`without`: "tensor parallelism",
  // "pipeline stages"), records why and says so; false (after printing the
  // error) when no such plan exists.
  auto fallBack = [&](const autopar::PlanRequest &replanRequest,
                      llvm::StringRef without, llvm::StringRef reason) {
    auto replanned = autopar::planProgram(main, replanRequest);
    if (!replanned) {
      fail("the best plan needs " + without + ", which this program cannot " +
           "run with yet (" + reason + "), and no plan without it exists: " +
           llvm::toString(replanned.takeError()));
      return false;
    }
    fallbacks.push_back(llvm::json::Object{
        {"from_mesh", llvm::json::Object{{"dp", executable.dp},
                                         {"tp", executable.tp},
                                         {"pp", executable.pp}}},
        {"from_step_time_s", executable.stepSeconds},
        {"reason", reason.str()}});
    executable = replanned->best;
    executedPlan = std::move(*replanned);
    executedRequest = replanRequest;
    llvm::outs() << llvm::formatv(
        "  executing the best plan without {0} instead (dp={1} tp={2} pp={3}, "
        "predicted {4:F3} ms per step): {5}\n",
        without, executable.dp, executable.tp, executable.pp,
        executable.stepSeconds * 1e3, reason);
    return true;
  };
  // Tensor parallelism needs every op on the way to have a partitioning
  // rule (upstream has none for reshapes yet): try it on a copy first and
  // fall back to the best plan without it, saying why.
  if (executable.tp > 1) {
    OwningOpRef<ModuleOp> trial = module->clone();
    std::vector<autopar::ArtifactArgument> trialArgs = *arguments;
    std::string reason;
    LogicalResult partitioned = success();
    {
      ScopedDiagnosticHandler collect(&context, [&](Diagnostic &diag) {
        if (reason.empty() && diag.getSeverity() == DiagnosticSeverity::Error)
          reason = diag.str();
        return success();
      });
      partitioned =
          partitionTensorParallel(*trial, executable.tp, request, trialArgs);
    }
    if (failed(partitioned)) {
      if (reason.empty())
        reason = "a partitioning pass failed without saying why (--dump-ir "
                 "DIR writes the annotated program, annotated.mlir)";
      if (request.pins.tp && *request.pins.tp > 1)
        return fail("--tp " + llvm::Twine(*request.pins.tp) +
                    ": this program cannot be partitioned over tensor-"
                    "parallel ranks yet: " +
                    reason);
      // Pipeline stages need no partitioning rules: the planner may choose
      // them instead.
      autopar::PlanRequest noTensor = request;
      noTensor.pins.tp = 1;
      if (!fallBack(noTensor, "tensor parallelism",
                    "tensor-parallel partitioning failed: " + reason))
        return 1;
    }
  }

  // Pipeline parallelism: one program per stage, for one micro-batch.
  std::vector<autopar::StageProgram> programs;
  if (executable.pp > 1) {
    auto stages = autopar::buildPipelineStages(
        context, modelPath, options, executable, *arguments, plan->globalBatch);
    if (stages) {
      programs = std::move(*stages);
    } else {
      std::string reason = llvm::toString(stages.takeError());
      if (request.pins.pp && *request.pins.pp > 1)
        return fail("--pp " + llvm::Twine(*request.pins.pp) + ": " + reason);
      autopar::PlanRequest noPipeline = request;
      noPipeline.pins.pp = 1;
      if (!noPipeline.pins.tp)
        noPipeline.pins.tp = 1;
      if (!fallBack(noPipeline, "pipeline stages", reason))
        return 1;
    }
  }

  int64_t dpDegree = executable.dp;
  if (dpDegree > 1 && programs.empty()) {
    // Re-import for one rank's slice of the batch: every input and output
    // must carry the batch as its leading dim.
    int64_t batch = plan->globalBatch;
    autopar::ImportOptions perRank = options;
    for (const autopar::ArtifactArgument &arg : *arguments) {
      if (arg.kind != autopar::ArtifactArgument::Kind::Input)
        continue;
      if (arg.shape.empty() || arg.shape[0] != batch)
        return fail("input '" + arg.name +
                    "' does not have the global batch (" + llvm::Twine(batch) +
                    ") as its leading dim, so it cannot be split over " +
                    llvm::Twine(dpDegree) + " data-parallel ranks");
      llvm::SmallVector<int64_t> shape(arg.shape);
      shape[0] /= dpDegree;
      perRank.inputShapes[arg.name] = shape;
    }
    OwningOpRef<ModuleOp> rankModule =
        autopar::importOnnxFile(&context, modelPath, perRank);
    if (!rankModule)
      return 1;
    autopar::sinkMergingReshapes(
        rankModule->lookupSymbol<func::FuncOp>("main"));
    auto rankArgs = autopar::collectArtifactArguments(
        rankModule->lookupSymbol<func::FuncOp>("main"));
    if (failed(rankArgs))
      return 1;
    for (auto [global, local] : llvm::zip(*arguments, *rankArgs)) {
      if (global.kind == autopar::ArtifactArgument::Kind::Parameter)
        continue;
      if (global.shape.empty() || local.shape.empty() ||
          global.shape[0] != local.shape[0] * dpDegree ||
          llvm::ArrayRef(global.shape).drop_front() !=
              llvm::ArrayRef(local.shape).drop_front())
        return fail("output '" + global.name +
                    "' does not keep the batch as its leading dim, so "
                    "data-parallel ranks cannot each compute a slice of it");
      local.globalShape = global.shape;
      local.splitDim = 0;
    }
    module = std::move(rankModule);
    arguments = std::move(rankArgs);
  }

  if (programs.empty())
    programs.push_back({std::move(module), std::move(*arguments)});

  auto weights = autopar::locateInitializers(modelPath);
  if (!weights)
    return fail(llvm::toString(weights.takeError()));
  if (std::error_code ec = llvm::sys::fs::create_directories(outputDir))
    return fail("cannot create " + outputDir + ": " + ec.message());

  autopar::ArtifactDescription description;
  int64_t tpDegree = executable.tp;
  // A replica's (or stage's) tp sharding is planned for its own program (its
  // share of the batch), which may differ from the search's estimate on the
  // whole batch: the report gives what the programs issue.
  std::vector<autopar::CollectiveVolume> tpCollectives;
  for (auto [k, program] : llvm::enumerate(programs)) {
    std::string name = "stage" + std::to_string(k);
    std::string what = programs.size() > 1
                           ? "stage " + std::to_string(k) + " of " + modelPath
                           : std::string(modelPath);
    std::vector<autopar::CollectiveVolume> stageCollectives;
    if (tpDegree > 1 &&
        failed(partitionTensorParallel(*program.module, tpDegree, request,
                                       program.arguments, &stageCollectives)))
      return fail("partitioning " + what + " over " + llvm::Twine(tpDegree) +
                  " tensor-parallel ranks failed (see the diagnostics above)");
    // Its calls per step: once per micro-batch. Ranks of the busiest stage.
    for (autopar::CollectiveVolume &v : stageCollectives) {
      if (v.axis != "tp")
        continue;
      v.calls *= programs.size() > 1 ? executable.numMicroBatches : 1;
      v.busBytes *= programs.size() > 1 ? executable.numMicroBatches : 1;
      autopar::keepBusiest(tpCollectives, v);
    }
    llvm::outs().flush();
    std::vector<std::string> loweredDTypes;
    LogicalResult lowered =
        gpu ? autopar::lowerToLLVMForGpu(*program.module, gpuTarget,
                                         &loweredDTypes)
            : autopar::lowerToLLVMForCpu(*program.module);
    if (failed(lowered))
      return fail("lowering " + what + " to " +
                  (gpu ? "GPU code for " + gpuTarget.arch : "native code") +
                  " failed (see the diagnostics above)");
    std::string prefix = programs.size() > 1 ? name + "-" : "";
    writeIR(prefix + "llvm-dialect.mlir", *program.module);

    // Parameters the GPU code stores in bf16/fp16: the manifest gives their
    // new dtype, and the model's as source_dtype (the runtime converts).
    for (auto [arg, dtype] : llvm::zip(program.arguments, loweredDTypes))
      if (arg.kind == autopar::ArtifactArgument::Kind::Parameter &&
          !dtype.empty() && dtype != arg.dtype) {
        arg.sourceDtype = arg.dtype;
        arg.dtype = dtype;
      }
    std::vector<std::string> deviceCode;
    if (gpu) {
      auto written = autopar::writeDeviceCode(*program.module, outputDir, name,
                                              gpuTarget.arch);
      if (!written)
        return fail(llvm::toString(written.takeError()));
      deviceCode = std::move(*written);
    }

    llvm::SmallString<256> soPath(outputDir);
    llvm::sys::path::append(soPath, name + ".so");
    autopar::SharedLibraryOptions codegen;
    codegen.cpu = targetCpu;
    if (!dumpDir.empty())
      codegen.llvmIRPath =
          dumpDir + "/" + (programs.size() > 1 ? name : "model") + ".ll";
    std::string error;
    if (failed(autopar::emitSharedLibrary(*program.module, soPath, codegen,
                                          error)))
      return fail(error);
    description.programs.push_back({name, name + ".so",
                                    std::move(program.arguments),
                                    std::move(deviceCode)});
  }

  autopar::PlanResult reported = executedPlan ? *executedPlan : *plan;
  if (tpDegree > 1) {
    llvm::erase_if(
        reported.best.collectives,
        [](const autopar::CollectiveVolume &v) { return v.axis == "tp"; });
    llvm::append_range(reported.best.collectives, tpCollectives);
  }
  if (!writeReport(reported, executedRequest ? *executedRequest : request,
                   std::move(fallbacks)))
    return 1;

  llvm::SmallString<256> absModel(modelPath);
  llvm::sys::fs::make_absolute(absModel);
  description.modelPath = std::string(absModel);
  description.cluster = clusterSpec;
  description.worldSize = cluster->worldSize();
  description.dp = dpDegree;
  description.tp = tpDegree;
  description.pp = executable.pp;
  if (executable.pp > 1)
    description.pipeline = autopar::ArtifactPipeline{
        executable.numMicroBatches, executable.microBatchSize,
        autopar::scheduleName(executable.schedule).str()};
  if (gpu)
    description.target = autopar::ArtifactTarget{
        "cuda", gpuTarget.arch, autopar::precisionName(codePrecision).str()};
  std::string error;
  if (failed(autopar::writeManifest(outputDir, std::move(description), *weights,
                                    error)))
    return fail(error);

  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  llvm::outs() << "wrote " << outputDir << " (compiled in "
               << llvm::format("%.2f", seconds) << " s)\n";
  return 0;
}
