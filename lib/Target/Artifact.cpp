//===- Artifact.cpp - manifest.json writer --------------------------------===//

#include "autopar/Target/Artifact.h"
#include "autopar/Dialect/Attributes.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
namespace autopar {

static std::string stringAttr(DictionaryAttr dict, llvm::StringRef name) {
  if (!dict)
    return "";
  if (auto s = dict.getAs<StringAttr>(name))
    return s.str();
  return "";
}

FailureOr<std::vector<ArtifactArgument>>
collectArtifactArguments(func::FuncOp main) {
  std::vector<ArtifactArgument> args;
  auto add = [&](DictionaryAttr dict, Type type,
                 bool isResult) -> LogicalResult {
    ArtifactArgument arg;
    llvm::StringRef activation =
        isResult ? attrs::kActivationOut : attrs::kActivationIn;
    if (!(arg.name = stringAttr(dict, activation)).empty()) {
      arg.kind = isResult ? ArtifactArgument::Kind::ActivationOut
                          : ArtifactArgument::Kind::ActivationIn;
      auto peer = dict.getAs<IntegerAttr>(attrs::kPeerStage);
      if (!peer)
        return main.emitError("activation '")
               << arg.name << "' has no '" << attrs::kPeerStage << "'";
      arg.peerStage = peer.getInt();
    } else if (!(arg.name = stringAttr(dict, attrs::kResidual)).empty()) {
      arg.kind = ArtifactArgument::Kind::Residual;
    } else if (!isResult &&
               !(arg.name = stringAttr(dict, attrs::kAccumulator)).empty()) {
      arg.kind = ArtifactArgument::Kind::Accumulator;
    } else if (isResult &&
               !(arg.name = stringAttr(dict, attrs::kMetric)).empty()) {
      arg.kind = ArtifactArgument::Kind::Metric;
    } else if (isResult &&
               !(arg.updates = stringAttr(dict, attrs::kUpdate)).empty()) {
      arg.kind = ArtifactArgument::Kind::Update;
      arg.name = arg.updates + ".next";
    } else if (isResult) {
      arg.kind = ArtifactArgument::Kind::Output;
      arg.name = stringAttr(dict, attrs::kOutput);
    } else if (!(arg.name = stringAttr(dict, attrs::kParameter)).empty()) {
      arg.kind = ArtifactArgument::Kind::Parameter;
      arg.trainable = dict && dict.contains(attrs::kTrainable);
    } else if (!(arg.role = stringAttr(dict, attrs::kOptimizerState)).empty()) {
      arg.kind = ArtifactArgument::Kind::OptimizerState;
      arg.stateOf = stringAttr(dict, attrs::kStateOf);
      arg.name = arg.stateOf + "." + arg.role;
    } else if (dict && dict.contains(attrs::kStep)) {
      arg.kind = ArtifactArgument::Kind::Step;
      arg.name = "step";
    } else if (dict && dict.contains(attrs::kSeed)) {
      arg.kind = ArtifactArgument::Kind::Seed;
      arg.name = "seed";
    } else if (dict && dict.contains(attrs::kSampleOffset)) {
      arg.kind = ArtifactArgument::Kind::SampleOffset;
      arg.name = "sample_offset";
    } else {
      arg.kind = ArtifactArgument::Kind::Input;
      arg.name = stringAttr(dict, attrs::kInput);
    }
    arg.dtype = stringAttr(dict, attrs::kDType);
    if (arg.kind == ArtifactArgument::Kind::SampleOffset && arg.dtype.empty())
      arg.dtype = "int64";
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (arg.name.empty() || arg.dtype.empty() || !tensor ||
        !tensor.hasStaticShape())
      return main.emitError("@main's signature lacks the importer's "
                            "autopar.* attributes or static tensor types");
    arg.shape.assign(tensor.getShape().begin(), tensor.getShape().end());
    args.push_back(std::move(arg));
    return success();
  };
  for (unsigned i = 0; i < main.getNumArguments(); ++i)
    if (failed(add(main.getArgAttrDict(i), main.getArgumentTypes()[i], false)))
      return failure();
  for (unsigned i = 0; i < main.getNumResults(); ++i)
    if (failed(add(main.getResultAttrDict(i), main.getResultTypes()[i], true)))
      return failure();
  return args;
}

static llvm::StringRef kindName(ArtifactArgument::Kind kind) {
  switch (kind) {
  case ArtifactArgument::Kind::Parameter:
    return "parameter";
  case ArtifactArgument::Kind::Input:
    return "input";
  case ArtifactArgument::Kind::Output:
    return "output";
  case ArtifactArgument::Kind::ActivationIn:
    return "activation_in";
  case ArtifactArgument::Kind::ActivationOut:
    return "activation_out";
  case ArtifactArgument::Kind::OptimizerState:
    return "optimizer_state";
  case ArtifactArgument::Kind::Step:
    return "step";
  case ArtifactArgument::Kind::SampleOffset:
    return "sample_offset";
  case ArtifactArgument::Kind::Seed:
    return "seed";
  case ArtifactArgument::Kind::Metric:
    return "metric";
  case ArtifactArgument::Kind::Update:
    return "update";
  case ArtifactArgument::Kind::Residual:
    return "residual";
  case ArtifactArgument::Kind::Accumulator:
    return "accumulator";
  }
  return "";
}

LogicalResult writeManifest(llvm::StringRef dir,
                            ArtifactDescription description,
                            const llvm::StringMap<WeightSource> &weights,
                            std::string &error) {
  std::string constants;
  /// Where each parameter is, once: stages may share one (tied weights).
  llvm::StringMap<WeightSource> sources;
  auto argumentList =
      [&](std::vector<ArtifactArgument> &args) -> FailureOr<llvm::json::Array> {
    llvm::json::Array list;
    for (ArtifactArgument &arg : args) {
      llvm::json::Object entry{{"kind", kindName(arg.kind)},
                               {"name", arg.name},
                               {"dtype", arg.dtype},
                               {"shape", llvm::json::Array(arg.shape)}};
      if (!arg.globalShape.empty() && arg.globalShape != arg.shape)
        entry["global_shape"] = llvm::json::Array(arg.globalShape);
      if (arg.splitDim >= 0 && arg.innerSplitDim >= 0)
        entry["split"] = llvm::json::Array{
            llvm::json::Object{{"axis", arg.splitAxis}, {"dim", arg.splitDim}},
            llvm::json::Object{{"axis", arg.innerSplitAxis},
                               {"dim", arg.innerSplitDim}}};
      else if (arg.splitDim >= 0)
        entry["split"] =
            llvm::json::Object{{"axis", arg.splitAxis}, {"dim", arg.splitDim}};
      if (arg.peerStage >= 0)
        entry["peer_stage"] = arg.peerStage;
      if (arg.kind == ArtifactArgument::Kind::Parameter && description.training)
        entry["trainable"] = arg.trainable;
      if (arg.kind == ArtifactArgument::Kind::OptimizerState) {
        entry["role"] = arg.role;
        entry["of"] = arg.stateOf;
      }
      if (arg.kind == ArtifactArgument::Kind::Update)
        entry["updates"] = arg.updates;
      if (arg.kind == ArtifactArgument::Kind::Parameter) {
        auto known = sources.find(arg.name);
        if (known == sources.end()) {
          auto it = weights.find(arg.name);
          if (it == weights.end()) {
            error = "initializer '" + arg.name + "' was not found in the model";
            return failure();
          }
          WeightSource source = it->second;
          if (source.file.empty()) {
            // Not stored raw: the decoded bytes travel in constants.bin.
            source.file = "constants.bin";
            source.offset = constants.size();
            constants += source.bytes;
          }
          known = sources.try_emplace(arg.name, source).first;
        }
        const WeightSource &source = known->second;
        if (!arg.sourceDtype.empty())
          entry["source_dtype"] = arg.sourceDtype;
        entry["source"] = llvm::json::Object{{"file", source.file},
                                             {"offset", source.offset},
                                             {"length", source.length}};
      }
      list.push_back(std::move(entry));
    }
    return list;
  };

  // A single program keeps its arguments at the top level (as before
  // pipelines); pipeline stages each list their own.
  bool pipelined = description.pipeline.has_value();
  llvm::json::Array programs;
  std::optional<llvm::json::Array> topArguments;
  for (ArtifactProgram &program : description.programs) {
    FailureOr<llvm::json::Array> args = argumentList(program.arguments);
    if (failed(args))
      return failure();
    llvm::json::Object entry{{"name", program.name},
                             {"library", program.library},
                             {"entry", "autopar_entry"}};
    if (!program.deviceCode.empty())
      entry["device_code"] = llvm::json::Array(program.deviceCode);
    if (!program.phase.empty()) {
      entry["phase"] = program.phase;
      entry["stage"] = program.stage;
    }
    // A program that no rank runs as its step (a training artifact's eval
    // program) lists its own arguments too.
    if (pipelined || topArguments)
      entry["arguments"] = std::move(*args);
    else
      topArguments = std::move(*args);
    programs.push_back(std::move(entry));
  }

  // Rank r sits at (dp, tp, pp) coordinates with tp innermost; the ranks of
  // pipeline stage k run program k.
  llvm::json::Array ranks;
  for (int64_t r = 0; r < description.worldSize; ++r) {
    int64_t stage = r / (description.tp * description.dp);
    ranks.push_back(llvm::json::Object{
        {"rank", r},
        {"program", description.programs[pipelined ? stage : 0].name},
        {"coords",
         llvm::json::Object{{"dp", (r / description.tp) % description.dp},
                            {"tp", r % description.tp},
                            {"pp", stage}}}});
  }
  llvm::json::Object manifest{
      {"format", "autopar-artifact"},
      {"version", 1},
      {"model", description.modelPath},
      {"cluster", description.cluster},
      {"world_size", description.worldSize},
      {"programs", std::move(programs)},
      {"grid", llvm::json::Object{{"dp", description.dp},
                                  {"tp", description.tp},
                                  {"pp", description.pp}}},
      {"ranks", std::move(ranks)}};
  // The model file's content hash: checkpoints record it, so that the
  // trained model is later assembled from the same file (autopar-ckpt).
  if (auto file = llvm::MemoryBuffer::getFile(description.modelPath)) {
    std::array<uint8_t, 32> digest =
        llvm::SHA256::hash(llvm::arrayRefFromStringRef((*file)->getBuffer()));
    manifest["model_sha256"] = llvm::toHex(digest, /*LowerCase=*/true);
  }
  if (topArguments)
    manifest["arguments"] = std::move(*topArguments);
  if (pipelined) {
    llvm::json::Object pipeline{
        {"stages", description.pp},
        {"micro_batches", description.pipeline->microBatches},
        {"micro_batch_size", description.pipeline->microBatchSize},
        {"schedule", description.pipeline->schedule}};
    if (description.pipeline->virtualStages > 1)
      pipeline["virtual_stages"] = description.pipeline->virtualStages;
    manifest["pipeline"] = std::move(pipeline);
  }

  if (description.training) {
    ArtifactTraining &training = *description.training;
    manifest["mode"] = "train";
    llvm::json::Object entry{{"loss", training.loss},
                             {"global_batch", training.globalBatch},
                             {"optimizer", std::move(training.optimizer)},
                             {"scheduler", std::move(training.scheduler)},
                             {"gradient_clipping", training.gradientClipping},
                             {"precision", training.precision},
                             {"micro_batches", training.microBatches}};
    if (training.tokensPerSample > 0)
      entry["tokens_per_sample"] = training.tokensPerSample;
    if (training.lossScaling)
      entry["loss_scaling"] = std::move(*training.lossScaling);
    if (!training.inferenceTemplate.empty())
      entry["inference_template"] = training.inferenceTemplate;
    if (!training.evalProgram.empty())
      entry["eval_program"] = training.evalProgram;
    if (!training.evalUnavailable.empty())
      entry["eval_unavailable"] = training.evalUnavailable;
    manifest["training"] = std::move(entry);
  }
  if (description.target)
    manifest["target"] =
        llvm::json::Object{{"kind", description.target->kind},
                           {"arch", description.target->arch},
                           {"precision", description.target->precision}};

  auto writeFile = [&](llvm::StringRef name,
                       llvm::function_ref<void(llvm::raw_ostream &)> body) {
    llvm::SmallString<256> path(dir);
    llvm::sys::path::append(path, name);
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    if (ec) {
      error = "cannot write " + std::string(path) + ": " + ec.message();
      return failure();
    }
    body(os);
    return success();
  };
  if (!constants.empty() &&
      failed(writeFile("constants.bin",
                       [&](llvm::raw_ostream &os) { os << constants; })))
    return failure();
  return writeFile("manifest.json", [&](llvm::raw_ostream &os) {
    os << llvm::formatv("{0:2}", llvm::json::Value(std::move(manifest)))
       << "\n";
  });
}

} // namespace autopar
