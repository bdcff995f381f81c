//===- Compiler.cpp - The compile flow of autopar-compile -----------------===//

#include "autopar/Driver/Compiler.h"
#include "autopar/Driver/FrameworkExport.h"
#include "autopar/Driver/PipelineStages.h"
#include "autopar/Driver/PipelineTraining.h"
#include "autopar/Driver/TensorParallel.h"
#include "autopar/Driver/TrainConfig.h"
#include "autopar/Driver/TrainingStep.h"

#include "autopar/Conversion/Passes.h"
#include "autopar/Dialect/Attributes.h"
#include "autopar/Import/OnnxImporter.h"
#include "autopar/Import/WeightLocator.h"
#include "autopar/Planner/Cluster.h"
#include "autopar/Target/Artifact.h"
#include "autopar/Target/CpuCodegen.h"
#include "autopar/Target/GpuCodegen.h"
#include "autopar/Target/LoweringPasses.h"
#include "autopar/Transforms/Passes.h"
#include "autopar/Transforms/PlanAnnotate.h"
#include "autopar/Transforms/ShardingModels.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"

#include <chrono>
#include <optional>

using namespace mlir;
namespace autopar {
namespace {

/// One run of the flow. Each step returns an exit code (0: go on) or a
/// LogicalResult whose failure has been reported.
class CompileFlow {
public:
  explicit CompileFlow(const CompileOptions &options)
      : o(options), start(std::chrono::steady_clock::now()) {}

  int run();

private:
  int fail(const llvm::Twine &message) const;
  void writeIR(llvm::StringRef name, ModuleOp module) const;
  double elapsedSeconds() const;

  /// Checks the flags, the training config and the GPU target, and builds
  /// the plan request, before any work.
  int validateRequest();
  /// The MLIR context with autopar's sharding models, every dialect and the
  /// LLVM IR translations, printing diagnostics as autopar-compile's.
  void createContext();
  /// Imports the model at `options` and runs the passes every program gets
  /// before planning; null (diagnostics reported) on failure.
  OwningOpRef<ModuleOp> importProgram(const ImportOptions &options);
  /// Training: the micro-batch the user fixed, and whether the model
  /// updates state (BatchNorm), into the request.
  int pinTrainingMicroBatch();
  /// Training: `--tp N` over every rank pins the plan to it, or says what
  /// is not built yet.
  int pinTensorParallelTraining();
  /// Training: `--pp P` pins the plan to P pipeline stages of data-parallel
  /// replicas, or says what is not built yet.
  int pinPipelineTraining();
  /// Writes the plan report, if asked for, with what the flow adds.
  bool writeReport(const PlanResult &result, const PlanRequest &forRequest,
                   llvm::json::Object extra);

  int compileTrainingStep();
  /// Training with pipeline stages: each stage's forward, backward and
  /// step (PipelineTraining.h).
  int compilePipelineTraining();
  /// \p base with the choices of the plan that runs pinned: a tp group is
  /// planned again when its program is partitioned, and must lay out what
  /// the cluster plan priced (the report's memory and collectives).
  PlanRequest withExecutedChoices(PlanRequest base) const {
    base.pinnedOpShardings =
        pinnedOpShardingsOf(executedPlan ? *executedPlan : *plan);
    return base;
  }
  /// A model whose forward updates state (BatchNorm) cut into several
  /// micro-batches by the user's pin: says, and adds to \p notes, that its
  /// statistics are per micro-batch.
  void noteStatisticsPerMicroBatch(const PlanCandidate &best,
                                   llvm::json::Array &notes) const;
  /// What every training artifact takes from the flags and the plan.
  TrainingArtifactOptions trainingArtifactOptions(int64_t microBatches) const;
  int compileInference();
  /// --emit-sbatch: the batch script for the artifact just written.
  int writeSbatchScript();
  /// --emit-megatron, --emit-deepspeed, --emit-torchtitan: the plan the
  /// report names, as those frameworks' settings.
  int writeFrameworkExports();
  /// Inference: the best plan if its tensor parallelism and pipeline stages
  /// can be carried out, else the best plan without them (recorded in
  /// `fallbacks`); fills `programs` for a pipeline.
  int chooseExecutablePlan(std::vector<StageProgram> &programs);
  /// Replans without what cannot run; false after reporting when no such
  /// plan exists.
  bool fallBack(const PlanRequest &replanRequest, llvm::StringRef without,
                llvm::StringRef reason);
  /// Inference with dp > 1 and no pipeline: the program of one replica,
  /// imported for its share of the batch.
  int importReplica();
  /// The whole program as the planner reads it (`module`).
  int importForPlanning();
  /// planProgram for \p forRequest on \p main, a function of `module`.
  /// Training with `--loss cross-entropy:OUTPUT` plans a copy of it with
  /// the loss added as the step adds it, so that the plan prices the loss
  /// (and its vocabulary-parallel form); the copy stays in `plannedModules`,
  /// which the result points into.
  llvm::Expected<PlanResult> planModel(func::FuncOp main,
                                       const PlanRequest &forRequest);
  /// Training: the search chose what the step cannot run (\p chosen, why in
  /// \p reason): trains the best plan of \p without (the request with
  /// \p dropped pinned off) instead, saying so, or fails when none exists.
  /// \p rewritten: the failed attempt rewrote `module`, imported again first.
  int trainBestPlanWithout(PlanRequest without, const llvm::Twine &chosen,
                           llvm::StringRef dropped, llvm::StringRef reason,
                           bool rewritten);

  const CompileOptions &o;
  std::chrono::steady_clock::time_point start;

  // The request, as validated.
  std::string precision;
  TrainConfig trainConfig = defaultTrainConfig();
  PlanRequest request;
  bool gpu = false, training = false;
  /// The precision the generated code stores parameters and activations in
  /// (GPU: bf16/fp16 with f32 arithmetic; TF32 is not used, so tf32 plans
  /// run fp32 GEMMs).
  Precision codePrecision = Precision::FP32;
  GpuTarget gpuTarget;
  ImportOptions importOptions;
  /// Training code for several CPU ranks: pure data parallelism over all.
  bool dataParallelTraining = false;
  /// Training code for several CPU ranks: tensor parallelism over all.
  bool tensorParallelTraining = false;
  /// Training code for several CPU ranks: pipeline stages of dp replicas.
  bool pipelineTraining = false;
  /// Training on several CPU ranks without --dp, --tp or --pp: the search
  /// chooses between pure dp and pipelines of dp replicas.
  bool automaticPipeline = false;

  // The model and its plan.
  std::unique_ptr<MLIRContext> context;
  std::optional<ScopedDiagnosticHandler> diagnostics;
  OwningOpRef<ModuleOp> module;
  /// The programs planned in place of `module` (planModel): plans point
  /// into them.
  std::vector<OwningOpRef<ModuleOp>> plannedModules;
  std::vector<ArtifactArgument> arguments;
  std::optional<PlanResult> plan;

  // Inference: the plan that runs, when it is not the best one.
  PlanCandidate executable;
  std::optional<PlanResult> executedPlan;
  std::optional<PlanRequest> executedRequest;
  llvm::json::Array fallbacks;
};

int CompileFlow::fail(const llvm::Twine &message) const {
  llvm::outs().flush();
  llvm::errs() << "autopar-compile: error: " << message << "\n";
  return 1;
}

void CompileFlow::writeIR(llvm::StringRef name, ModuleOp program) const {
  if (o.dumpDir.empty())
    return;
  llvm::sys::fs::create_directories(o.dumpDir);
  llvm::SmallString<256> path(o.dumpDir);
  llvm::sys::path::append(path, name);
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (!ec)
    program.print(os);
}

double CompileFlow::elapsedSeconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

int CompileFlow::validateRequest() {
  training = o.mode == PlanModeOption::Train;
  precision = planOptionSpelling(o.precision).str();
  if (training && !o.trainConfigPath.empty()) {
    auto parsed = readTrainConfig(o.trainConfigPath);
    if (!parsed)
      return fail(llvm::toString(parsed.takeError()));
    trainConfig = std::move(*parsed);
    // A value in the file is a pin, like the CLI's: they must agree.
    if (trainConfig.zeroStage && o.zero >= 0 &&
        *trainConfig.zeroStage != o.zero)
      return fail(o.trainConfigPath + ": zero_optimization.stage is " +
                  llvm::Twine(*trainConfig.zeroStage) + " but --zero is " +
                  llvm::Twine(o.zero));
    if (trainConfig.microBatchSize && o.microBatchSize > 0 &&
        *trainConfig.microBatchSize != o.microBatchSize)
      return fail(o.trainConfigPath + ": train_micro_batch_size_per_gpu is " +
                  llvm::Twine(*trainConfig.microBatchSize) +
                  " but --micro-batch-size is " +
                  llvm::Twine(o.microBatchSize));
    // bf16/fp16 in the file is the precision, like --precision.
    if (!trainConfig.precision.empty()) {
      if (!precision.empty() && precision != trainConfig.precision)
        return fail(o.trainConfigPath + ": " + trainConfig.precision +
                    ".enabled is true but --precision is " + precision);
      precision = trainConfig.precision;
    }
  }
  // --precision bf16/fp16 alone trains in that precision (DeepSpeed's
  // defaults for fp16's loss scaling).
  if (training && trainConfig.precision.empty() &&
      (precision == "bf16" || precision == "fp16"))
    trainConfig.precision = precision;
  PlanFlags flags;
  flags.cluster = o.cluster;
  flags.mode = planOptionSpelling(o.mode).str();
  flags.precision = precision;
  flags.recompute = planOptionSpelling(o.recompute).str();
  flags.schedule = o.pipelineSchedule;
  flags.sequenceParallel = o.sequenceParallel;
  flags.dp = o.dp;
  flags.tp = o.tp;
  flags.pp = o.pp;
  flags.virtualStages = o.virtualStages;
  flags.zero = o.zero;
  // zero_optimization.stage pins the stage as --zero does.
  if (training && trainConfig.zeroStage && o.zero < 0)
    flags.zero = *trainConfig.zeroStage;
  flags.microBatchSize = o.microBatchSize;
  auto built = buildPlanRequest(flags);
  if (!built)
    return fail(llvm::toString(built.takeError()));
  request = std::move(*built);
  const ClusterSpec &cluster = request.cluster;
  request.modelName = llvm::sys::path::filename(o.modelPath).str();
  // Attention and the cross-entropy are priced fused as every plan runs
  // them (a tp step fuses them before its group's plan, which places the
  // fused ops: TrainingStep.cpp).
  request.fusedAttention = o.fuseAttention;
  request.fusedCrossEntropy = o.fuseCrossEntropy;
  request.overlapTensorParallelComm = o.tpCommOverlap;
  // What a rank holds to train: gradients and optimizer states for the
  // parameters not frozen, as many states as the optimizer keeps.
  if (training) {
    request.frozenParameters.assign(o.freeze.begin(), o.freeze.end());
    std::string fromCrossEntropy = crossEntropyOutput(o.loss);
    request.lossOutput = fromCrossEntropy.empty() ? o.loss : fromCrossEntropy;
    request.optimizerStatesPerParameter =
        trainConfig.optimizer != OptimizerKind::SGD ? 2
        : trainConfig.momentum != 0.0               ? 1
                                                    : 0;
  }
  // Code generation exists for inference and one-rank training, on CPU ranks
  // and NVIDIA GPUs; planning works for every request (--plan-only).
  gpu = !cluster.isLocalCpu();
  for (auto [flag, given] : {std::pair{"--loss", !o.loss.empty()},
                             {"--train-config", !o.trainConfigPath.empty()},
                             {"--freeze", !o.freeze.empty()},
                             {"--emit-gradients", o.emitGradients}})
    if (given && !training)
      return fail(llvm::Twine(flag) + " needs --mode train");
  if (!o.planOnly && training && cluster.worldSize() != 1 && o.pp > 1) {
    // Pipeline parallelism (docs/distributed-training.md, "Pipeline
    // parallelism"), with data-parallel replicas of the pipeline.
    if (int rc = pinPipelineTraining())
      return rc;
  } else if (!o.planOnly && training && cluster.worldSize() != 1 && o.tp > 1) {
    // Tensor parallelism (docs/distributed-training.md, "Tensor
    // parallelism") in data-parallel replicas; within pipeline stages above.
    if (int rc = pinTensorParallelTraining())
      return rc;
  } else if (!o.planOnly && training && cluster.worldSize() != 1) {
    // Distributed training: the search chooses among the plans the
    // executor runs (docs/distributed-training.md): data parallelism (ZeRO
    // 0-3) and, on CPU ranks, tensor parallelism and pipelines of either
    // (a tensor-parallel step that cannot be partitioned falls back to the
    // best plan without tp). On GPUs the step is data-parallel, its
    // collectives going to the NCCL backend.
    if (o.dp > 0 && o.dp != cluster.worldSize())
      return fail("--dp " + llvm::Twine(o.dp) + " --mode train on --cluster " +
                  o.cluster +
                  ": training on several ranks executes data parallelism "
                  "over all " +
                  llvm::Twine(cluster.worldSize()) +
                  " ranks, or --tp or --pp with --dp the rest");
    if (o.dp > 0 || gpu || o.emitGradients) {
      request.pins.tp = 1;
      request.pins.dp = cluster.worldSize();
      request.pins.pp = 1;
    } else {
      automaticPipeline = true;
    }
    // Every ZeRO stage runs: the search picks one unless --zero or
    // zero_optimization.stage pinned it (buildPlanRequest). The gradients
    // --emit-gradients returns are whole: no ZeRO.
    if (o.emitGradients) {
      if (flags.zero > 0)
        return fail("--emit-gradients returns every rank's whole gradients, "
                    "which ZeRO-" +
                    llvm::Twine(flags.zero) +
                    " shards; drop --zero (and zero_optimization.stage)");
      request.pins.zeroStage = 0;
    }
    dataParallelTraining = true;
  }
  // On a GPU the plan's precision (bf16 unless --precision says otherwise)
  // is the step's mixed precision, as for inference.
  if (training && gpu && trainConfig.precision.empty() &&
      (request.precision == Precision::BF16 ||
       request.precision == Precision::FP16))
    trainConfig.precision = precisionName(request.precision).str();
  // --loss cross-entropy:OUTPUT adds PyTorch's cross-entropy to logits.
  if (o.loss == "cross-entropy:")
    return fail("--loss cross-entropy:OUTPUT: name the output holding the "
                "logits, e.g. --loss cross-entropy:logits");
  if (gpu && (request.precision == Precision::BF16 ||
              request.precision == Precision::FP16))
    codePrecision = request.precision;
  if (gpu && !o.planOnly) {
    // Check the device target before any work: an unknown architecture or
    // a missing toolkit would otherwise fail after the whole lowering.
    gpuTarget.arch = cluster.device.arch;
    if (gpuTarget.arch.empty())
      return fail("--cluster " + o.cluster + ": the GPU '" +
                  cluster.device.name +
                  "' has no architecture; give \"arch\" (e.g. \"sm_90\") "
                  "in the cluster file's gpu object to generate code for it");
    if (auto features = getPtxFeatures(gpuTarget.arch); !features)
      return fail("--cluster " + o.cluster + ": " +
                  llvm::toString(features.takeError()));
    auto toolkit = findCudaToolkit(o.cudaPath);
    if (!toolkit)
      return fail("--cluster " + o.cluster + " (GPU code generation): " +
                  llvm::toString(toolkit.takeError()));
    gpuTarget.cudaPath = *toolkit;
    gpuTarget.precision = precisionName(codePrecision).str();
    gpuTarget.fuseAttention = o.fuseAttention;
  }
  if (o.tpCommOverlap && !o.planOnly)
    return fail("--tp-comm-overlap prices tensor-parallel collectives "
                "overlapped with their GEMMs, as Megatron-LM's "
                "--tp-comm-overlap runs them; autopar's runtime does not "
                "overlap them, so the flag only plans: add --plan-only");
  if (!o.emitSbatch.empty() && o.planOnly)
    return fail("--emit-sbatch writes a script that runs the artifact: drop "
                "--plan-only and give -o ARTIFACT_DIR");
  if (!o.planOnly && o.outputDir.empty())
    return fail("no output directory: give -o ARTIFACT_DIR (or --plan-only)");

  // A training step also returns the parameters training updates besides
  // the trained ones (BatchNorm's running statistics).
  importOptions.trainingStateUpdates = training;
  for (const std::string &flag : o.inputShapes) {
    std::string error;
    if (failed(parseInputShapeFlag(flag, importOptions, error)))
      return fail(error);
  }
  for (const std::string &flag : o.constInputs) {
    std::string error;
    if (failed(parseConstInputFlag(flag, importOptions, error)))
      return fail(error);
  }
  return 0;
}

void CompileFlow::createContext() {
  DialectRegistry registry;
  // autopar's sharding models first (registerAllDialects brings upstream's
  // linalg models, and the first attached wins): they replace upstream's.
  registerShardingModels(registry);
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registerAllToLLVMIRTranslations(registry);
  context = std::make_unique<MLIRContext>(registry);
  // Messages name the file, the ONNX nodes and parameters themselves; the IR
  // of the op they were attached to (often all of @main) would bury them.
  context->printOpOnDiagnostic(false);
  diagnostics.emplace(context.get(), [](Diagnostic &diag) {
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
}

OwningOpRef<ModuleOp> CompileFlow::importProgram(const ImportOptions &options) {
  OwningOpRef<ModuleOp> imported =
      importOnnxFile(context.get(), o.modelPath, options);
  if (!imported)
    return nullptr;
  // Every program is planned and compiled with merged dims carried apart
  // (attention's batch * heads).
  auto pm = PassManager::on<ModuleOp>(context.get());
  applyPassManagerCLOptionsIfAny(pm);
  pm.addNestedPass<func::FuncOp>(createSinkMergingReshapes());
  if (failed(pm.run(*imported)))
    return nullptr;
  return imported;
}

int CompileFlow::pinTensorParallelTraining() {
  const ClusterSpec &cluster = request.cluster;
  int64_t world = cluster.worldSize();
  auto refuse = [&](const llvm::Twine &what) {
    return fail("--tp " + llvm::Twine(o.tp) + " --mode train on --cluster " +
                o.cluster + ": " + what);
  };
  if (world % o.tp != 0 || (o.dp > 0 && o.dp * o.tp != world))
    return refuse("tensor-parallel training runs data-parallel replicas of "
                  "tensor-parallel groups over all " +
                  llvm::Twine(world) +
                  " ranks so far: --tp must divide the rank count, with "
                  "--dp the rest");
  if (gpu)
    return refuse("tensor-parallel training compiles for CPU ranks "
                  "(local:N) so far; on GPUs training runs data-parallel "
                  "(drop --tp)");
  if (o.emitGradients)
    return refuse("--emit-gradients returns whole gradients; tensor-"
                  "parallel ranks hold blocks of them (drop one of the two)");
  request.pins.dp = world / o.tp;
  request.pins.tp = o.tp;
  request.pins.pp = 1;
  // ZeRO 1 to 3 over the replicas when pinned (--zero or
  // zero_optimization.stage), else none.
  if (!request.pins.zeroStage)
    request.pins.zeroStage = 0;
  tensorParallelTraining = true;
  return 0;
}

int CompileFlow::pinPipelineTraining() {
  const ClusterSpec &cluster = request.cluster;
  int64_t world = cluster.worldSize();
  auto refuse = [&](const llvm::Twine &what) {
    return fail("--pp " + llvm::Twine(o.pp) + " --mode train on --cluster " +
                o.cluster + ": " + what);
  };
  int64_t tp = std::max<int64_t>(o.tp, 1);
  if (world % (o.pp * tp) != 0 || (o.dp > 0 && o.dp * tp * o.pp != world))
    return refuse("pipeline-parallel training runs data-parallel replicas of "
                  "the pipeline over all " +
                  llvm::Twine(world) + " ranks: --pp" +
                  (tp > 1 ? " times --tp" : "") +
                  " must divide the rank count, with --dp the rest");
  if (o.emitGradients)
    return refuse("--emit-gradients returns one program's gradients; the "
                  "stages of a pipeline each hold their own (drop one of the "
                  "two)");
  request.pins.dp = world / (tp * o.pp);
  request.pins.tp = tp;
  request.pins.pp = o.pp;
  // ZeRO 1 to 3 when pinned (--zero or zero_optimization.stage), else none.
  if (!request.pins.zeroStage)
    request.pins.zeroStage = 0;
  pipelineTraining = true;
  return 0;
}

int CompileFlow::pinTrainingMicroBatch() {
  // The micro-batch: the user's (--micro-batch-size, or the config's
  // train_micro_batch_size_per_gpu or gradient_accumulation_steps), else
  // the planner's; but the planner does not micro-batch a model whose
  // forward updates state (BatchNorm) on its own: that would change its
  // batch statistics (docs/training.md, "Gradient accumulation").
  int64_t batch = 0;
  for (const ArtifactArgument &arg : arguments)
    if (arg.kind == ArtifactArgument::Kind::Input && !arg.shape.empty()) {
      batch = arg.shape[0];
      break;
    }
  // The data-parallel degree when it is known before planning: 1 on one
  // rank, every rank for distributed training code (pure dp so far).
  std::optional<int64_t> dp;
  if (request.cluster.worldSize() == 1)
    dp = 1;
  else if (dataParallelTraining && !automaticPipeline)
    dp = request.cluster.worldSize();
  else if (tensorParallelTraining || pipelineTraining)
    dp = *request.pins.dp;
  // Tensor parallelism accumulates only the micro-batches the user asks for
  // (the partitioned step unrolls its micro-batch loop): by default each
  // replica runs its share of the batch in one call.
  if (tensorParallelTraining && batch > 0 && batch % *dp == 0 &&
      o.microBatchSize <= 0 && !trainConfig.microBatchSize &&
      !trainConfig.accumulationSteps)
    request.pins.microBatchSize = batch / *dp;
  if (dp && batch % *dp != 0)
    return fail("the batch of --input-shape (" + llvm::Twine(batch) +
                ") does not divide into " + llvm::Twine(*dp) +
                " data-parallel replicas");
  // DeepSpeed: train_batch_size = micro-batch x accumulation steps x dp.
  if (trainConfig.microBatchSize && trainConfig.accumulationSteps && dp &&
      *trainConfig.microBatchSize * *trainConfig.accumulationSteps * *dp !=
          batch)
    return fail(o.trainConfigPath + ": train_micro_batch_size_per_gpu (" +
                llvm::Twine(*trainConfig.microBatchSize) +
                ") x gradient_accumulation_steps (" +
                llvm::Twine(*trainConfig.accumulationSteps) + ")" +
                (*dp > 1
                     ? " x " + std::to_string(*dp) + " data-parallel replicas"
                     : std::string()) +
                " must be the batch of --input-shape (" + llvm::Twine(batch) +
                ")" + (*dp > 1 ? "" : " on one rank"));
  if (!request.pins.microBatchSize && trainConfig.microBatchSize) {
    int64_t micro = *trainConfig.microBatchSize;
    int64_t replicaBatch = dp ? batch / *dp : batch;
    if (micro < 1 || (replicaBatch > 0 && replicaBatch % micro != 0))
      return fail(
          o.trainConfigPath + ": train_micro_batch_size_per_gpu (" +
          llvm::Twine(micro) + ") must divide the batch of " +
          (dp && *dp > 1 ? "each data-parallel replica (" : "--input-shape (") +
          llvm::Twine(replicaBatch) + ")");
    request.pins.microBatchSize = micro;
  }
  // gradient_accumulation_steps alone fixes the micro-batch on one rank;
  // on several it depends on dp, which the planner chooses.
  if (!request.pins.microBatchSize && trainConfig.accumulationSteps &&
      batch > 0 && dp) {
    int64_t steps = *trainConfig.accumulationSteps;
    int64_t replicaBatch = batch / *dp;
    if (steps < 1 || replicaBatch % steps != 0)
      return fail(o.trainConfigPath + ": gradient_accumulation_steps (" +
                  llvm::Twine(steps) + ") must divide the batch of " +
                  (*dp > 1 ? "each of " + std::to_string(*dp) +
                                 " data-parallel replicas ("
                           : std::string("--input-shape (")) +
                  llvm::Twine(replicaBatch) + ")");
    request.pins.microBatchSize = replicaBatch / steps;
  }
  auto main = module->lookupSymbol<func::FuncOp>("main");
  bool updatesState = false;
  for (unsigned i = 0; i < main.getNumResults(); ++i)
    updatesState |= bool(main.getResultAttr(i, attrs::kUpdate));
  // The planner cuts no micro-batches of its own from such a model, with
  // or without pipeline stages (one micro-batch per replica, however deep
  // the pipeline); the stages carry the state from one micro-batch to the
  // next when the user asks for several.
  request.wholeReplicaBatch = updatesState;
  return 0;
}

bool CompileFlow::writeReport(const PlanResult &result,
                              const PlanRequest &forRequest,
                              llvm::json::Object extra) {
  if (o.reportJson.empty())
    return true;
  std::error_code ec;
  llvm::raw_fd_ostream os(o.reportJson, ec);
  if (ec) {
    fail("cannot write " + o.reportJson + ": " + ec.message());
    return false;
  }
  llvm::json::Value report = planReportJson(result, forRequest);
  llvm::json::Object &fields = *report.getAsObject();
  // A compiled step's own collectives replace the cost model's estimate,
  // which stays beside them.
  if (extra.get("predicted_collectives"))
    if (llvm::json::Value *model = fields.get("predicted_collectives"))
      fields["cost_model_collectives"] = std::move(*model);
  for (auto &[key, value] : extra)
    fields[key] = std::move(value);
  os << llvm::formatv("{0:2}", report) << "\n";
  return true;
}

int CompileFlow::importForPlanning() {
  module = importProgram(importOptions);
  if (!module)
    return 1;
  // On several ranks, plan attention's fused QKV projection as the parts a
  // tensor-parallel partition splits (a replica is re-imported).
  if (request.cluster.worldSize() > 1) {
    auto pm = PassManager::on<ModuleOp>(context.get());
    applyPassManagerCLOptionsIfAny(pm);
    pm.addNestedPass<func::FuncOp>(createExposeProjectionParts());
    if (failed(pm.run(*module)))
      return 1;
  }
  return 0;
}

llvm::Expected<PlanResult>
CompileFlow::planModel(func::FuncOp main, const PlanRequest &forRequest) {
  auto pm = PassManager::on<ModuleOp>(context.get());
  applyPassManagerCLOptionsIfAny(pm);
  if (!training || !addCrossEntropyLossPass(pm, o.loss, o.fuseCrossEntropy))
    return planProgram(main, forRequest);
  OwningOpRef<ModuleOp> withLoss(cast<ModuleOp>(main->getParentOp()->clone()));
  // A loss that cannot be added (no such output, one named "loss" already)
  // is the error itself, reported once by the caller.
  std::string problems;
  {
    ScopedDiagnosticHandler collect(context.get(), [&](Diagnostic &diag) {
      if (diag.getSeverity() == DiagnosticSeverity::Error)
        problems += (problems.empty() ? "" : "; ") + diag.str();
      return success();
    });
    if (failed(pm.run(*withLoss)))
      return llvm::createStringError(
          problems.empty() ? "--loss " + o.loss + ": adding the loss failed"
                           : problems);
  }
  PlanRequest planned = forRequest;
  planned.lossOutput = "loss";
  auto result =
      planProgram(withLoss->lookupSymbol<func::FuncOp>("main"), planned);
  plannedModules.push_back(std::move(withLoss));
  return result;
}

int CompileFlow::run() {
  if (int rc = validateRequest())
    return rc;
  createContext();
  if (int rc = importForPlanning())
    return rc;
  auto main = module->lookupSymbol<func::FuncOp>("main");
  writeIR("imported.mlir", *module);
  auto collected = collectArtifactArguments(main);
  if (failed(collected))
    return 1;
  arguments = std::move(*collected);
  // Every input's global shape, explicit: the re-imports for one replica
  // or micro-batch (the eval program's too) cut the batch of the shapes
  // given, and a model with static shapes had none to cut (its eval
  // program then read the global batch beside a step of a replica's).
  for (const ArtifactArgument &arg : arguments)
    if (arg.kind == ArtifactArgument::Kind::Input &&
        !importOptions.inputShapes.count(arg.name))
      importOptions.inputShapes[arg.name] =
          llvm::SmallVector<int64_t>(arg.shape);
  if (training)
    if (int rc = pinTrainingMicroBatch())
      return rc;

  // --explain-plan: each dimension against its runner-up (replans do not).
  PlanRequest plannedRequest = request;
  plannedRequest.compareDimensions = o.explainPlan;
  auto planned = planModel(main, plannedRequest);
  if (!planned) {
    // A plan that does not fit is still reported: fits false, the bytes
    // over, the pins to change and the nearest plan that fits.
    std::string message;
    llvm::handleAllErrors(
        planned.takeError(),
        [&](const InfeasiblePlanError &e) {
          message = e.message();
          writeReport(e.result(), request, {});
        },
        [&](const llvm::ErrorInfoBase &e) { message = e.message(); });
    return fail(message);
  }
  plan = std::move(*planned);
  printPlanTable(llvm::outs(), *plan, request);
  if (o.explainPlan)
    printPlanDimensions(llvm::outs(), *plan);
  if (o.explain)
    printPlanExplanation(llvm::outs(), *plan);
  int rc;
  if (o.planOnly)
    rc = writeReport(*plan, request, {}) ? 0 : 1;
  else
    rc = training ? compileTrainingStep() : compileInference();
  return rc ? rc : writeFrameworkExports();
}

int CompileFlow::compileTrainingStep() {
  // train_batch_size, when given, must be the batch of --input-shape.
  if (trainConfig.trainBatchSize &&
      *trainConfig.trainBatchSize != plan->globalBatch)
    return fail(o.trainConfigPath + ": train_batch_size is " +
                llvm::Twine(*trainConfig.trainBatchSize) +
                " but the inputs' batch (--input-shape) is " +
                llvm::Twine(plan->globalBatch));
  if (plan->best.pp > 1)
    return compilePipelineTraining();
  // On one rank the plan's micro-batches are accumulated in the step.
  const PlanCandidate &best = plan->best;
  int64_t microBatches = best.numMicroBatches;
  if (best.dp * best.microBatchSize * microBatches != plan->globalBatch)
    return fail("the plan's " + llvm::Twine(microBatches) +
                " micro-batches of " + llvm::Twine(best.microBatchSize) +
                " do not make the global batch " +
                llvm::Twine(plan->globalBatch));
  llvm::json::Array notes;
  if (microBatches > 1 || best.dp > 1) {
    // The step runs the forward one micro-batch of one replica at a time:
    // import it at that batch.
    ImportOptions perMicroBatch = importOptions;
    perMicroBatch.batchRatio = plan->globalBatch / best.microBatchSize;
    // Replicas share BatchNorm's batch statistics (SyncBatchNorm's).
    perMicroBatch.dataParallelReplicas = best.dp;
    for (const ArtifactArgument &arg : arguments) {
      if (arg.kind != ArtifactArgument::Kind::Input)
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
    module = importOnnxFile(context.get(), o.modelPath, perMicroBatch);
    if (!module)
      return fail("importing " + o.modelPath + " for a micro-batch of " +
                  llvm::Twine(best.microBatchSize) + " failed");
    if (microBatches > 1)
      llvm::outs() << "  accumulation  " << microBatches << " micro-batches of "
                   << best.microBatchSize
                   << " per step (one optimizer step per global batch of "
                   << plan->globalBatch << ")\n";
    if (best.dp > 1 && best.zeroStage == 0)
      llvm::outs() << "  data parallel " << best.dp << " replicas of "
                   << plan->globalBatch / best.dp
                   << " samples: the loss and the gradients are all-reduced "
                      "over them before the update\n";
    else if (best.dp > 1)
      llvm::outs() << "  data parallel " << best.dp << " replicas of "
                   << plan->globalBatch / best.dp << " samples, ZeRO-"
                   << best.zeroStage << ": each updates its block of the "
                   << "optimizer state after "
                   << (best.zeroStage >= 2 ? "a reduce-scatter"
                                           : "an all-reduce")
                   << " of the gradients; "
                   << (best.zeroStage >= 3
                           ? "each holds its block of the parameters and "
                             "gathers a parameter before its uses in the "
                             "forward and again in the backward\n"
                           : "the parameters are all-gathered\n");
    noteStatisticsPerMicroBatch(best, notes);
  }
  // One training step: loss and gradients, then clipping, schedule and
  // update (docs/training.md); then the artifact.
  TrainingStepOptions step;
  step.loss = o.loss;
  step.freeze.assign(o.freeze.begin(), o.freeze.end());
  step.emitGradients = o.emitGradients;
  step.microBatches = microBatches;
  step.recompute = recomputeName(best.recompute).str();
  step.dataParallel = best.dp;
  step.zeroStage = best.zeroStage;
  step.config = trainConfig;
  step.lowPrecisionGemms = gpu;
  step.fuseAttention = o.fuseAttention;
  step.fuseCrossEntropy = o.fuseCrossEntropy;
  if (gpu) {
    FuseAttentionOptions fuse = gpuFuseAttentionOptions();
    step.attentionMaxHeadDim = fuse.maxHeadDim;
    step.attentionHeadDimMultiple = fuse.headDimMultiple;
  }
  step.lowerCollectives = false;
  step.phaseMarks = !gpu;
  if (best.tp > 1) {
    // The forward is planned for one tp group of the cluster's devices.
    step.tensorParallel = best.tp;
    PlanRequest group =
        tensorParallelGroupRequest(withExecutedChoices(request), best.tp);
    step.makePlanPass = [group] {
      return createAutoparPlanPass(group, [](const PlanResult &) {});
    };
    llvm::outs() << "  tensor parallel " << best.tp
                 << " ranks: the forward is partitioned as planned, and the "
                 << (best.zeroStage > 0
                         ? "backward as its annotations imply; ZeRO's update "
                           "runs on each rank's blocks\n"
                         : "backward and the update as its annotations "
                           "imply\n");
  }
  // Under ZeRO, a tp step is partitioned before its update, so that ZeRO
  // cuts each rank's tp block over the replicas as it would cut a whole
  // parameter (docs/distributed-training.md, "ZeRO with tensor
  // parallelism"); so is one in mixed precision, so that
  // autopar-mixed-precision sees the partitioned step (its collectives stay
  // f32, its loss head f32, no widened copy resharded) as a pipeline
  // stage's; otherwise the update is annotated and partitioned with the
  // rest.
  step.partitionedForTensorParallel =
      best.tp > 1 && (best.zeroStage > 0 || !trainConfig.precision.empty());
  auto runPasses = [&](auto build) {
    auto pm = PassManager::on<ModuleOp>(context.get());
    applyPassManagerCLOptionsIfAny(pm);
    build(pm, step);
    return pm.run(*module);
  };
  if (failed(runPasses(step.partitionedForTensorParallel
                           ? buildGradientPipeline
                           : buildTrainingStepPipeline)))
    return 1;
  std::vector<TensorParallelSplit> splits;
  if (best.tp > 1) {
    writeIR("train-step-annotated.mlir", *module);
    // Every op that cannot be partitioned, once, with the ONNX node it
    // comes from (the backward's ops carry their forward node's location).
    std::vector<std::string> problems;
    LogicalResult partitioned = success();
    {
      ScopedDiagnosticHandler collect(context.get(), [&](Diagnostic &diag) {
        if (diag.getSeverity() != DiagnosticSeverity::Error)
          return success();
        std::string node;
        diag.getLocation()->walk([&](Location loc) {
          if (auto name = dyn_cast<NameLoc>(loc); name && node.empty())
            node = name.getName().str();
          return WalkResult::advance();
        });
        std::string problem =
            diag.str() + (node.empty() ? "" : " (ONNX node '" + node + "')");
        if (!llvm::is_contained(problems, problem))
          problems.push_back(problem);
        return success();
      });
      if (step.partitionedForTensorParallel) {
        // The gradients, and the updates of what the forward updates, are
        // laid out as their parameters.
        auto main = module->lookupSymbol<func::FuncOp>("main");
        if (llvm::Error err = partitionDifferentiated(
                *module, main, "the training step", [&](unsigned j) {
                  return main.getResultAttr(j, attrs::kGradient) ||
                         main.getResultAttr(j, attrs::kUpdate);
                })) {
          problems.push_back(llvm::toString(std::move(err)));
          partitioned = failure();
        }
      } else {
        partitioned = partitionTrainingStep(*module, splits);
      }
    }
    if (failed(partitioned)) {
      std::string list;
      for (const std::string &problem : problems)
        list += "\n  " + problem;
      if (!request.pins.tp) {
        PlanRequest withoutTensor = request;
        withoutTensor.pins.tp = 1;
        return trainBestPlanWithout(
            withoutTensor,
            "tensor parallelism (tp=" + llvm::Twine(best.tp) + ")",
            "tensor parallelism",
            "the training step cannot be partitioned over tensor-parallel "
            "ranks yet:" +
                list,
            /*rewritten=*/true);
      }
      return fail(
          "--tp " + llvm::Twine(best.tp) + ": the training step of " +
          o.modelPath +
          " cannot be partitioned over tensor-parallel ranks yet:" + list +
          "\ndrop --tp to train it data-parallel over the ranks "
          "(--dump-ir DIR writes train-step-annotated.mlir)");
    }
  }
  if (step.partitionedForTensorParallel) {
    if (failed(runPasses(buildUpdatePipeline)))
      return 1;
    // The collectives as they will run: the update's canonicalization
    // exposes more of the rewrites autopar-lower-collectives-to-runtime
    // makes first (an all-reduce whose block is sliced: a reduce-scatter).
    RewritePatternSet fold(context.get());
    populateCollectiveFoldPatterns(fold);
    if (failed(applyPatternsGreedily(*module, std::move(fold))))
      return fail("folding the training step's collectives did not converge");
  }
  // What the step exchanges, exactly (the report's predicted collectives),
  // before the collectives become runtime calls.
  llvm::json::Object collectives = stepCollectives(*module);
  if (best.dp > 1 || best.tp > 1) {
    auto lower = PassManager::on<ModuleOp>(context.get());
    applyPassManagerCLOptionsIfAny(lower);
    lower.addPass(createLowerCollectivesToRuntime());
    lower.addPass(mlir::createCanonicalizerPass());
    lower.addPass(mlir::createCSEPass());
    if (failed(lower.run(*module)))
      return 1;
  }
  writeIR("train-step.mlir", *module);
  TrainingArtifactOptions artifact = trainingArtifactOptions(microBatches);
  artifact.withOptimizer = !o.emitGradients;
  artifact.tensorParallel = best.tp;
  artifact.tensorParallelSplits = std::move(splits);
  if (best.tp > 1)
    artifact.tensorParallelRequest = withExecutedChoices(request);
  if (gpu) {
    // The step carries its own mixed precision (f32 master weights).
    artifact.gpu = gpuTarget;
    artifact.gpu->precision = "fp32";
  }
  std::string error;
  auto trained = writeTrainingArtifact(*module, artifact, error);
  if (failed(trained))
    return fail(error);
  llvm::outs() << llvm::formatv(
      "  trained: {0} parameters ({1:F2} MiB) in {2} tensors\n",
      trained->elements, trained->bytes / (1024.0 * 1024.0), trained->tensors);
  llvm::json::Object extra;
  if (!notes.empty())
    extra["notes"] = std::move(notes);
  extra["predicted_collectives"] = std::move(collectives);
  extra["trainable_parameters"] =
      llvm::json::Object{{"count", trained->elements},
                         {"bytes", trained->bytes},
                         {"tensors", trained->tensors}};
  if (!writeReport(*plan, request, std::move(extra)))
    return 1;
  llvm::outs() << "wrote " << o.outputDir << " (training step, compiled in "
               << llvm::format("%.2f", elapsedSeconds()) << " s)\n";
  return writeSbatchScript();
}

void CompileFlow::noteStatisticsPerMicroBatch(const PlanCandidate &best,
                                              llvm::json::Array &notes) const {
  if (!request.wholeReplicaBatch || best.numMicroBatches <= 1)
    return;
  std::string note = "BatchNorm statistics are computed per micro-batch of " +
                     std::to_string(best.microBatchSize) +
                     ", as PyTorch computes them under gradient "
                     "accumulation, not over the global batch";
  llvm::outs() << "  note: " << note << "\n";
  notes.push_back(note);
}

TrainingArtifactOptions
CompileFlow::trainingArtifactOptions(int64_t microBatches) const {
  TrainingArtifactOptions artifact;
  artifact.modelPath = o.modelPath;
  artifact.outputDir = o.outputDir;
  artifact.cluster = o.cluster;
  artifact.targetCpu = o.targetCpu;
  artifact.dumpDir = o.dumpDir;
  artifact.globalBatch = plan->globalBatch;
  artifact.microBatches = microBatches;
  artifact.dataParallel = plan->best.dp;
  artifact.config = trainConfig;
  artifact.loss = o.loss;
  artifact.importOptions = importOptions;
  artifact.fuseAttention = o.fuseAttention;
  artifact.fuseCrossEntropy = o.fuseCrossEntropy;
  return artifact;
}

int CompileFlow::compilePipelineTraining() {
  const PlanCandidate &best = plan->best;
  llvm::outs() << "  pipeline      " << best.pp << " stages, "
               << best.numMicroBatches << " micro-batches of "
               << best.microBatchSize << " per step ("
               << scheduleName(best.schedule)
               << (best.virtualStages > 1
                       ? " interleaved over " +
                             std::to_string(best.virtualStages) +
                             " model chunks per stage"
                       : std::string())
               << ", recompute " << recomputeName(best.recompute)
               << "): each stage runs its forward and backward per "
                  "micro-batch"
               << (best.virtualStages > 1 ? " and chunk" : "")
               << ", then its update\n";
  if (best.dp > 1 && best.zeroStage == 0)
    llvm::outs() << "  data parallel " << best.dp << " replicas of the "
                 << "pipeline, " << plan->globalBatch / best.dp
                 << " samples each: each stage's gradients are all-reduced "
                    "over them before the update\n";
  else if (best.dp > 1)
    llvm::outs() << "  data parallel " << best.dp << " replicas of the "
                 << "pipeline, " << plan->globalBatch / best.dp
                 << " samples each, ZeRO-" << best.zeroStage
                 << ": each stage's replicas update their blocks of its "
                 << (best.zeroStage >= 3
                         ? "parameters, gradients and optimizer states"
                     : best.zeroStage == 2 ? "gradients and optimizer states"
                                           : "optimizer states")
                 << (best.tp > 1 ? " (blocks of each rank's tp blocks)" : "")
                 << "\n";
  if (best.tp > 1)
    llvm::outs() << "  tensor parallel " << best.tp
                 << " ranks per stage: each stage's forward is partitioned "
                    "as planned, and its backward as its annotations imply\n";
  llvm::json::Array notes;
  noteStatisticsPerMicroBatch(best, notes);
  PipelineTrainingOptions options;
  if (best.tp > 1) {
    // Each stage is planned for one tp group of the cluster's devices.
    options.step.tensorParallel = best.tp;
    PlanRequest group =
        tensorParallelGroupRequest(withExecutedChoices(request), best.tp);
    options.step.makePlanPass = [group] {
      return createAutoparPlanPass(group, [](const PlanResult &) {});
    };
  }
  options.step.loss = o.loss;
  options.step.freeze.assign(o.freeze.begin(), o.freeze.end());
  options.step.config = trainConfig;
  options.step.fuseAttention = o.fuseAttention;
  options.step.fuseCrossEntropy = o.fuseCrossEntropy;
  // Mixed precision's GEMMs read the low type on GPUs, as the one-program
  // step's do.
  options.step.lowPrecisionGemms = gpu;
  if (gpu) {
    FuseAttentionOptions fuse = gpuFuseAttentionOptions();
    options.step.attentionMaxHeadDim = fuse.maxHeadDim;
    options.step.attentionHeadDimMultiple = fuse.headDimMultiple;
  }
  options.modelPath = o.modelPath;
  options.importOptions = importOptions;
  options.globalArguments = arguments;
  options.globalBatch = plan->globalBatch;
  auto stages = buildPipelineTraining(*context, best, options);
  if (!stages && automaticPipeline) {
    // The search's pipeline cannot run this model (a stage that trains
    // nothing, tied weights across stages, ...): the best plan without
    // one does.
    std::string reason = llvm::toString(stages.takeError());
    PlanRequest withoutPipeline = request;
    withoutPipeline.pins.pp = 1;
    return trainBestPlanWithout(withoutPipeline,
                                llvm::Twine(best.pp) + " pipeline stages",
                                "pipeline stages", reason,
                                /*rewritten=*/false);
  }
  if (!stages)
    return fail(llvm::toString(stages.takeError()));
  for (auto [k, stage] :
       llvm::enumerate(llvm::ArrayRef(*stages).take_front(size_t(best.pp))))
    if (stage.trainedParameters == 0) {
      std::string note = "pipeline stage " + std::to_string(k) +
                         " trains no parameter: it runs parameter-free ops, "
                         "passing activations on and cotangents back";
      llvm::outs() << "  note: " << note << "\n";
      notes.push_back(note);
    }
  // What the stages exchange, exactly (the report's predicted collectives),
  // before the collectives become runtime calls.
  llvm::json::Object collectives =
      pipelineCollectives(*stages, best.pp, best.numMicroBatches);
  TrainingArtifactOptions artifact =
      trainingArtifactOptions(best.numMicroBatches);
  if (gpu) {
    // Compiled for the GPUs, each stage's programs with their kernels; the
    // runtime's pipeline trainer runs on CPU ranks so far (autopar-run says
    // so).
    artifact.gpu = gpuTarget;
    artifact.gpu->precision = "fp32";
  }
  std::string error;
  auto trained = writePipelineTrainingArtifact(*stages, best, artifact, error);
  if (failed(trained))
    return fail(error);
  llvm::outs() << llvm::formatv(
      "  trained: {0} parameters ({1:F2} MiB) in {2} tensors\n",
      trained->elements, trained->bytes / (1024.0 * 1024.0), trained->tensors);
  llvm::json::Object extra;
  extra["predicted_collectives"] = std::move(collectives);
  extra["trainable_parameters"] =
      llvm::json::Object{{"count", trained->elements},
                         {"bytes", trained->bytes},
                         {"tensors", trained->tensors}};
  if (!notes.empty())
    extra["notes"] = std::move(notes);
  if (!writeReport(*plan, request, std::move(extra)))
    return 1;
  llvm::outs() << "wrote " << o.outputDir << " (pipeline training, compiled in "
               << llvm::format("%.2f", elapsedSeconds()) << " s)\n";
  return writeSbatchScript();
}

int CompileFlow::trainBestPlanWithout(PlanRequest without,
                                      const llvm::Twine &chosen,
                                      llvm::StringRef dropped,
                                      llvm::StringRef reason, bool rewritten) {
  std::string subject = chosen.str();
  llvm::outs() << "  note: the plan's " << subject << " cannot be trained ("
               << reason << "); training the best plan without " << dropped
               << "\n";
  if (rewritten)
    if (int rc = importForPlanning())
      return rc;
  auto main = module->lookupSymbol<func::FuncOp>("main");
  auto replanned = planModel(main, without);
  if (!replanned)
    return fail("the plan's " + subject + " cannot be trained (" + reason +
                "), and without " + dropped + ": " +
                llvm::toString(replanned.takeError()));
  request = std::move(without);
  plan = std::move(*replanned);
  printPlanTable(llvm::outs(), *plan, request);
  return compileTrainingStep();
}

bool CompileFlow::fallBack(const PlanRequest &replanRequest,
                           llvm::StringRef without, llvm::StringRef reason) {
  auto main = module->lookupSymbol<func::FuncOp>("main");
  auto replanned = planModel(main, replanRequest);
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
}

int CompileFlow::chooseExecutablePlan(std::vector<StageProgram> &programs) {
  executable = plan->best;
  // Tensor parallelism needs every op on the way to have a partitioning
  // rule (upstream has none for some ops yet): try it on a copy first and
  // fall back to the best plan without it, saying why. Replanning is the
  // flow's decision between pipelines, not a rewrite of the IR, so it
  // stays here rather than in a pass.
  if (executable.tp > 1) {
    OwningOpRef<ModuleOp> trial = module->clone();
    std::vector<ArtifactArgument> trialArgs = arguments;
    std::string reason;
    LogicalResult partitioned = success();
    {
      ScopedDiagnosticHandler collect(context.get(), [&](Diagnostic &diag) {
        if (reason.empty() && diag.getSeverity() == DiagnosticSeverity::Error)
          reason = diag.str();
        return success();
      });
      partitioned = partitionTensorParallel(
          *trial, executable.tp, withExecutedChoices(request), trialArgs,
          nullptr, [&](llvm::StringRef name, ModuleOp m) { writeIR(name, m); });
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
      PlanRequest noTensor = request;
      noTensor.pins.tp = 1;
      if (!fallBack(noTensor, "tensor parallelism",
                    "tensor-parallel partitioning failed: " + reason))
        return 1;
    }
  }

  // Pipeline parallelism: one program per stage, for one micro-batch.
  if (executable.pp > 1) {
    auto stages = buildPipelineStages(*context, o.modelPath, importOptions,
                                      executable, arguments, plan->globalBatch);
    if (stages) {
      programs = std::move(*stages);
    } else {
      std::string reason = llvm::toString(stages.takeError());
      if (request.pins.pp && *request.pins.pp > 1)
        return fail("--pp " + llvm::Twine(*request.pins.pp) + ": " + reason);
      PlanRequest noPipeline = request;
      noPipeline.pins.pp = 1;
      if (!noPipeline.pins.tp)
        noPipeline.pins.tp = 1;
      if (!fallBack(noPipeline, "pipeline stages", reason))
        return 1;
    }
  }
  return 0;
}

int CompileFlow::importReplica() {
  // Re-import for one rank's slice of the batch: every input and output
  // must carry the batch as its leading dim.
  int64_t batch = plan->globalBatch;
  int64_t dp = executable.dp;
  ImportOptions perRank = importOptions;
  for (const ArtifactArgument &arg : arguments) {
    if (arg.kind != ArtifactArgument::Kind::Input)
      continue;
    if (arg.shape.empty() || arg.shape[0] != batch)
      return fail("input '" + arg.name + "' does not have the global batch (" +
                  llvm::Twine(batch) +
                  ") as its leading dim, so it cannot be split over " +
                  llvm::Twine(dp) + " data-parallel ranks");
    llvm::SmallVector<int64_t> shape(arg.shape);
    shape[0] /= dp;
    perRank.inputShapes[arg.name] = shape;
  }
  OwningOpRef<ModuleOp> replica = importProgram(perRank);
  if (!replica)
    return 1;
  auto replicaArgs =
      collectArtifactArguments(replica->lookupSymbol<func::FuncOp>("main"));
  if (failed(replicaArgs))
    return 1;
  for (auto [global, local] : llvm::zip(arguments, *replicaArgs)) {
    if (global.kind == ArtifactArgument::Kind::Parameter)
      continue;
    if (global.shape.empty() || local.shape.empty() ||
        global.shape[0] != local.shape[0] * dp ||
        llvm::ArrayRef(global.shape).drop_front() !=
            llvm::ArrayRef(local.shape).drop_front())
      return fail("output '" + global.name +
                  "' does not keep the batch as its leading dim, so "
                  "data-parallel ranks cannot each compute a slice of it");
    local.globalShape = global.shape;
    local.splitDim = 0;
  }
  module = std::move(replica);
  arguments = std::move(*replicaArgs);
  return 0;
}

int CompileFlow::compileInference() {
  std::vector<StageProgram> programs;
  if (int rc = chooseExecutablePlan(programs))
    return rc;
  if (executable.dp > 1 && programs.empty())
    if (int rc = importReplica())
      return rc;
  if (programs.empty())
    programs.push_back({std::move(module), std::move(arguments)});

  auto weights = locateInitializers(o.modelPath);
  if (!weights)
    return fail(llvm::toString(weights.takeError()));
  if (std::error_code ec = llvm::sys::fs::create_directories(o.outputDir))
    return fail("cannot create " + o.outputDir + ": " + ec.message());

  ArtifactDescription description;
  int64_t tp = executable.tp;
  // A replica's (or stage's) tp sharding is planned for its own program (its
  // share of the batch), which may differ from the search's estimate on the
  // whole batch: the report gives what the programs issue.
  std::vector<CollectiveVolume> tpCollectives;
  for (auto [k, program] : llvm::enumerate(programs)) {
    std::string name = "stage" + std::to_string(k);
    std::string what = programs.size() > 1
                           ? "stage " + std::to_string(k) + " of " + o.modelPath
                           : o.modelPath;
    std::vector<CollectiveVolume> stageCollectives;
    if (tp > 1 &&
        failed(partitionTensorParallel(
            *program.module, tp, withExecutedChoices(request),
            program.arguments, &stageCollectives,
            [&](llvm::StringRef file, ModuleOp m) { writeIR(file, m); })))
      return fail("partitioning " + what + " over " + llvm::Twine(tp) +
                  " tensor-parallel ranks failed (see the diagnostics above)");
    // Its calls per step: once per micro-batch. Ranks of the busiest stage.
    for (CollectiveVolume &v : stageCollectives) {
      if (v.axis != "tp")
        continue;
      v.calls *= programs.size() > 1 ? executable.numMicroBatches : 1;
      v.busBytes *= programs.size() > 1 ? executable.numMicroBatches : 1;
      keepBusiest(tpCollectives, v);
    }
    llvm::outs().flush();
    std::vector<std::string> loweredDTypes;
    LogicalResult lowered =
        gpu ? lowerToLLVMForGpu(*program.module, gpuTarget, &loweredDTypes)
            : lowerToLLVMForCpu(*program.module, o.fuseAttention);
    if (failed(lowered))
      return fail("lowering " + what + " to " +
                  (gpu ? "GPU code for " + gpuTarget.arch : "native code") +
                  " failed (see the diagnostics above)");
    std::string prefix = programs.size() > 1 ? name + "-" : "";
    writeIR(prefix + "llvm-dialect.mlir", *program.module);

    // Parameters the GPU code stores in bf16/fp16: the manifest gives their
    // new dtype, and the model's as source_dtype (the runtime converts).
    for (auto [arg, dtype] : llvm::zip(program.arguments, loweredDTypes))
      if (arg.kind == ArtifactArgument::Kind::Parameter && !dtype.empty() &&
          dtype != arg.dtype) {
        arg.sourceDtype = arg.dtype;
        arg.dtype = dtype;
      }
    std::vector<std::string> deviceCode;
    if (gpu) {
      auto written =
          writeDeviceCode(*program.module, o.outputDir, name, gpuTarget.arch);
      if (!written)
        return fail(llvm::toString(written.takeError()));
      deviceCode = std::move(*written);
    }

    llvm::SmallString<256> soPath(o.outputDir);
    llvm::sys::path::append(soPath, name + ".so");
    SharedLibraryOptions codegen;
    codegen.cpu = o.targetCpu;
    if (!o.dumpDir.empty())
      codegen.llvmIRPath =
          o.dumpDir + "/" + (programs.size() > 1 ? name : "model") + ".ll";
    std::string error;
    if (failed(emitSharedLibrary(*program.module, soPath, codegen, error)))
      return fail(error);
    description.programs.push_back({name, name + ".so",
                                    std::move(program.arguments),
                                    std::move(deviceCode)});
  }

  PlanResult reported = executedPlan ? *executedPlan : *plan;
  if (tp > 1) {
    llvm::erase_if(reported.best.collectives,
                   [](const CollectiveVolume &v) { return v.axis == "tp"; });
    llvm::append_range(reported.best.collectives, tpCollectives);
  }
  llvm::json::Object extra;
  if (!fallbacks.empty())
    extra["fallbacks"] = std::move(fallbacks);
  if (!writeReport(reported, executedRequest ? *executedRequest : request,
                   std::move(extra)))
    return 1;

  llvm::SmallString<256> absModel(o.modelPath);
  llvm::sys::fs::make_absolute(absModel);
  description.modelPath = std::string(absModel);
  description.cluster = o.cluster;
  description.worldSize = request.cluster.worldSize();
  description.dp = executable.dp;
  description.tp = tp;
  description.pp = executable.pp;
  if (executable.pp > 1)
    description.pipeline =
        ArtifactPipeline{executable.numMicroBatches, executable.microBatchSize,
                         scheduleName(executable.schedule).str()};
  if (gpu)
    description.target = ArtifactTarget{"cuda", gpuTarget.arch,
                                        precisionName(codePrecision).str()};
  std::string error;
  if (failed(
          writeManifest(o.outputDir, std::move(description), *weights, error)))
    return fail(error);
  llvm::outs() << "wrote " << o.outputDir << " (compiled in "
               << llvm::format("%.2f", elapsedSeconds()) << " s)\n";
  return writeSbatchScript();
}

int CompileFlow::writeSbatchScript() {
  if (o.emitSbatch.empty())
    return 0;
  const ClusterSpec &cluster = request.cluster;
  llvm::SmallString<256> artifact(o.outputDir);
  llvm::sys::fs::make_absolute(artifact);
  // autopar-run beside this autopar-compile (a build's bin/), else PATH's.
  std::string run = "autopar-run";
  std::string self = llvm::sys::fs::getMainExecutable(nullptr, nullptr);
  if (!self.empty()) {
    llvm::SmallString<256> sibling(llvm::sys::path::parent_path(self));
    llvm::sys::path::append(sibling, "autopar-run");
    if (llvm::sys::fs::can_execute(sibling))
      run = std::string(sibling);
  }
  std::string stem = llvm::sys::path::stem(o.modelPath).str();
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "#!/bin/bash\n"
     << "# Written by autopar-compile --emit-sbatch: runs " << artifact << " ("
     << o.modelPath << ", --cluster " << o.cluster << ") on "
     << cluster.worldSize() << " ranks.\n";
  if (training)
    os << "# Set AUTOPAR_DATA (the training data: one .npy per input); "
          "optionally\n# AUTOPAR_STEPS, AUTOPAR_CHECKPOINT_DIR, "
          "AUTOPAR_CHECKPOINT_EVERY, AUTOPAR_METRICS.\n"
          "# The run resumes from its latest checkpoint, so a requeued job "
          "continues.\n";
  else
    os << "# Arguments after the script name go to autopar-run (e.g. "
          "--inputs DIR --outputs DIR).\n";
  os << "#SBATCH --job-name=autopar-" << stem << "\n"
     << "#SBATCH --nodes=" << cluster.nodes << "\n"
     << "#SBATCH --ntasks=" << cluster.worldSize() << "\n";
  if (cluster.nodes > 1)
    os << "#SBATCH --ntasks-per-node=" << cluster.gpusPerNode << "\n";
  if (gpu)
    os << "#SBATCH --gpus-per-task=1\n";
  if (training)
    os << "#SBATCH --requeue\n#SBATCH --open-mode=append\n";
  os << "set -euo pipefail\n";
  if (!gpu)
    os << "export OPENBLAS_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1}\n";
  os << "RUN='" << run << "'\nART='" << artifact << "'\n";
  if (training)
    os << ": \"${AUTOPAR_DATA:?set AUTOPAR_DATA to the training data "
          "directory}\"\n"
       << "srun --mpi=pmix \"$RUN\" \"$ART\" --train --data \"$AUTOPAR_DATA\" "
          "\\\n"
       << "    --steps \"${AUTOPAR_STEPS:-1000}\" --checkpoint-dir "
          "\"${AUTOPAR_CHECKPOINT_DIR:-$ART/checkpoints}\" \\\n"
       << "    --checkpoint-every \"${AUTOPAR_CHECKPOINT_EVERY:-100}\" "
          "--resume \\\n"
       << "    --metrics \"${AUTOPAR_METRICS:-$ART/metrics.jsonl}\"\n";
  else
    os << "srun --mpi=pmix \"$RUN\" \"$ART\" \"$@\"\n";
  std::error_code ec;
  {
    llvm::raw_fd_ostream file(o.emitSbatch, ec);
    if (ec)
      return fail("--emit-sbatch " + o.emitSbatch + ": " + ec.message());
    file << text;
  }
  llvm::sys::fs::setPermissions(o.emitSbatch, llvm::sys::fs::all_read |
                                                  llvm::sys::fs::owner_write |
                                                  llvm::sys::fs::all_exe);
  llvm::outs() << "wrote " << o.emitSbatch << " (sbatch: " << cluster.nodes
               << " nodes x " << cluster.gpusPerNode << " tasks)\n";
  return 0;
}

int CompileFlow::writeFrameworkExports() {
  FrameworkExportPaths paths{o.emitMegatron, o.emitDeepSpeed, o.emitTorchtitan,
                             o.trainConfigPath};
  if (!paths.any())
    return 0;
  // The plan that ran (inference may fall back from the best one).
  llvm::Error error = autopar::writeFrameworkExports(
      paths, executedPlan ? *executedPlan : *plan,
      executedRequest ? *executedRequest : request,
      [](const llvm::Twine &warning) {
        llvm::outs().flush();
        llvm::errs() << "autopar-compile: warning: " << warning << "\n";
      });
  if (error)
    return fail(llvm::toString(std::move(error)));
  return 0;
}

} // namespace

void registerCompilerPasses() {
  registerAllPasses();
  registerAutoparConversionPasses();
  registerAutoparTransformsPasses();
}

int runCompiler(const CompileOptions &options) {
  return CompileFlow(options).run();
}

} // namespace autopar
