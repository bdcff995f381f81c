//===- autopar-compile.cpp - ONNX model in, plan and artifact out ---------===//
//
// The user-facing compiler driver (INTERFACES.md). Today it compiles for one
// CPU rank (`--cluster local:1`); the planner and the distributed and GPU
// backends extend the same driver.
//
//===----------------------------------------------------------------------===//

#include "autopar/Conversion/Passes.h"
#include "autopar/Import/OnnxImporter.h"
#include "autopar/Import/WeightLocator.h"
#include "autopar/Target/Artifact.h"
#include "autopar/Target/Cluster.h"
#include "autopar/Target/CpuCodegen.h"
#include "autopar/Transforms/Passes.h"
#include "autopar/Transforms/Planner.h"
#include "autopar/Transforms/ProjectionParts.h"
#include "autopar/Transforms/ShardingModels.h"

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
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
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
static cl::opt<std::string>
    dumpDir("dump-ir",
            cl::desc("Write the IR after each phase to DIR "
                     "(imported.mlir, partitioned.mlir, llvm-dialect.mlir, "
                     "model.ll)"),
            cl::value_desc("DIR"), cl::cat(category));
static cl::opt<std::string>
    targetCpu("target-cpu", cl::init("native"),
              cl::desc("LLVM CPU name for CPU code (default: this machine's)"),
              cl::cat(category));

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

  // Graph inputs and outputs stay whole on every tp rank.
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
    if (!main.getArgAttr(arg.getArgNumber(), autopar::attrs::kInput))
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
          llvm::errs() << "autopar-compile: error: input '" << arg.name
                       << "' was split over tp; inputs must stay whole\n";
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
      llvm::errs() << "autopar-compile: error: output '" << out.name
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
  // Code generation exists for one CPU rank, inference, so far; planning
  // works for every cluster (--plan-only).
  std::string codegenLimit;
  if (!cluster->isLocalCpu())
    codegenLimit = "GPU code generation is not implemented yet";
  else if (request.mode == autopar::PlanMode::Training)
    codegenLimit = "code generation for training is not implemented yet";
  if (!planOnly && !codegenLimit.empty())
    return fail("--cluster " + clusterSpec +
                (mode == "train" ? " --mode train" : "") + ": " + codegenLimit +
                "; use --plan-only to plan and report");
  if (!planOnly && outputDir.empty())
    return fail("no output directory: give -o ARTIFACT_DIR (or --plan-only)");

  autopar::ImportOptions options;
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
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registerAllToLLVMIRTranslations(registry);
  autopar::registerShardingModels(registry);
  MLIRContext context(registry);
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
  writeIR("imported.mlir", *module);
  auto main = module->lookupSymbol<func::FuncOp>("main");
  // On several ranks, plan attention's fused QKV projection as the parts a
  // tensor-parallel partition splits (a replica is re-imported).
  if (cluster->worldSize() > 1)
    autopar::exposeProjectionParts(main);
  auto arguments = autopar::collectArtifactArguments(main);
  if (failed(arguments))
    return 1;

  auto plan = autopar::planProgram(main, request);
  if (!plan)
    return fail(llvm::toString(plan.takeError()));
  autopar::printPlanTable(llvm::outs(), *plan, request);
  if (explain)
    autopar::printPlanExplanation(llvm::outs(), *plan);
  // The report describes the plan the artifact executes (written once it
  // is partitioned); with --plan-only, the search's best plan.
  auto writeReport = [&](const autopar::PlanResult &result) {
    if (reportJson.empty())
      return true;
    std::error_code ec;
    llvm::raw_fd_ostream os(reportJson, ec);
    if (ec)
      return false;
    os << llvm::formatv("{0:2}", autopar::planReportJson(result, request))
       << "\n";
    return true;
  };
  if (planOnly)
    return writeReport(*plan) ? 0 : fail("cannot write " + reportJson);
  autopar::PlanResult reported = *plan;

  // Several ranks: this build executes data parallelism (each rank runs the
  // program on its slice of the batch); tensor and pipeline parallel plans
  // are planned but not yet executed.
  autopar::PlanCandidate executable = plan->best;
  if (executable.pp > 1) {
    if (request.pins.pp && *request.pins.pp > 1)
      return fail("--pp > 1: executing pipeline parallel plans is not "
                  "implemented yet; use --plan-only, or let autopar choose "
                  "a plan without pipeline stages");
    autopar::PlanRequest noPipeline = request;
    noPipeline.pins.pp = 1;
    auto replanned = autopar::planProgram(main, noPipeline);
    if (!replanned)
      return fail("the best plan needs pipeline parallelism, whose execution "
                  "is not implemented yet, and no plan without stages "
                  "exists: " +
                  llvm::toString(replanned.takeError()));
    executable = replanned->best;
    reported = *replanned;
    llvm::outs() << llvm::formatv(
        "  executing the best plan without pipeline stages instead (dp={0} "
        "tp={1}, predicted {2:F3} ms per step): pipeline parallel execution "
        "is not implemented yet\n",
        executable.dp, executable.tp, executable.stepSeconds * 1e3);
  }
  // Tensor parallelism needs every op on the way to have a partitioning
  // rule (upstream has none for reshapes yet): try it on a copy first and
  // fall back to the best data-parallel plan, saying why.
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
      if (request.pins.tp && *request.pins.tp > 1)
        return fail("--tp " + llvm::Twine(*request.pins.tp) +
                    ": this program cannot be partitioned over tensor-"
                    "parallel ranks yet: " +
                    reason);
      autopar::PlanRequest dpOnly = request;
      dpOnly.pins.tp = 1;
      dpOnly.pins.pp = 1;
      auto replanned = autopar::planProgram(main, dpOnly);
      if (!replanned)
        return fail("the best plan needs tensor parallelism, which this "
                    "program cannot be partitioned for yet (" +
                    reason + "), and no data-parallel plan exists: " +
                    llvm::toString(replanned.takeError()));
      executable = replanned->best;
      reported = *replanned;
      llvm::outs() << llvm::formatv(
          "  executing the best data-parallel plan instead (dp={0}, "
          "predicted {1:F3} ms per step): tensor-parallel partitioning "
          "failed: {2}\n",
          executable.dp, executable.stepSeconds * 1e3, reason);
    }
  }

  int64_t dpDegree = executable.dp;
  if (dpDegree > 1) {
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

  int64_t tpDegree = executable.tp;
  std::vector<autopar::CollectiveVolume> tpCollectives;
  if (tpDegree > 1 &&
      failed(partitionTensorParallel(*module, tpDegree, request, *arguments,
                                     &tpCollectives)))
    return fail("partitioning " + modelPath + " over " + llvm::Twine(tpDegree) +
                " tensor-parallel ranks failed (see the diagnostics above)");
  // A replica's tp sharding is planned for its own program (its share of
  // the batch), which may differ from the search's estimate on the whole
  // batch: report what it issues.
  if (tpDegree > 1) {
    llvm::erase_if(
        reported.best.collectives,
        [](const autopar::CollectiveVolume &v) { return v.axis == "tp"; });
    llvm::append_range(reported.best.collectives, tpCollectives);
  }
  if (!writeReport(reported))
    return fail("cannot write " + reportJson);

  auto weights = autopar::locateInitializers(modelPath);
  if (!weights)
    return fail(llvm::toString(weights.takeError()));

  llvm::outs().flush();
  if (failed(autopar::lowerToLLVMForCpu(*module)))
    return fail("lowering " + modelPath +
                " to native code failed (see the "
                "diagnostics above)");
  writeIR("llvm-dialect.mlir", *module);

  if (std::error_code ec = llvm::sys::fs::create_directories(outputDir))
    return fail("cannot create " + outputDir + ": " + ec.message());
  llvm::SmallString<256> soPath(outputDir);
  llvm::sys::path::append(soPath, "stage0.so");
  autopar::CpuCodegenOptions codegen;
  codegen.cpu = targetCpu;
  if (!dumpDir.empty())
    codegen.llvmIRPath = dumpDir + "/model.ll";
  std::string error;
  if (failed(autopar::emitSharedLibrary(*module, soPath, codegen, error)))
    return fail(error);

  autopar::ArtifactDescription description;
  llvm::SmallString<256> absModel(modelPath);
  llvm::sys::fs::make_absolute(absModel);
  description.modelPath = std::string(absModel);
  description.cluster = clusterSpec;
  description.worldSize = cluster->worldSize();
  description.dp = dpDegree;
  description.tp = tpDegree;
  description.arguments = std::move(*arguments);
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
