//===- PipelineEvaluation.cpp - --eval-data for a training pipeline -------===//
//
// See PipelineEvaluation.h.
//
//===----------------------------------------------------------------------===//

#include "autopar/runtime/PipelineEvaluation.h"

#include "autopar/runtime/Error.h"
#include "autopar/runtime/Tensor.h"

#include <filesystem>

namespace autopar::runtime {

PipelineEvaluator::PipelineEvaluator(Session &step, const std::string &dataDir)
    : step(step) {
  const Manifest &manifest = step.getManifest();
  const WorldInfo &world = step.getWorld();
  const RankDesc &rank = manifest.ranks.at(static_cast<size_t>(world.rank));
  int64_t stage = rank.coords[static_cast<size_t>(GridAxis::PP)];
  int64_t replica = rank.coords[static_cast<size_t>(GridAxis::DP)];
  replicas = manifest.grid[static_cast<size_t>(GridAxis::DP)];
  microBatches = manifest.pipeline->microBatches;
  const ProgramDesc *program = manifest.phaseProgram(stage, "eval");
  if (!program) {
    const std::string &why = manifest.training->evalUnavailable;
    throw Error("--eval-data: " + manifest.path +
                " has no eval program for pipeline stage " +
                std::to_string(stage) +
                (why.empty() ? std::string(" (compiled by an older "
                                           "autopar-compile); recompile the "
                                           "model")
                             : ": " + why) +
                "; evaluate the saved model (--save-onnx) instead");
  }
  Manifest evalManifest = manifest;
  // Parameters are bound to the step's, not copied.
  evalManifest.training.reset();
  for (RankDesc &r : evalManifest.ranks)
    r.program = program->name;
  std::string dir = std::filesystem::path(manifest.path).parent_path().string();
  session = Session::open(std::move(evalManifest), dir, world);

  // Every stage's step lists every data input, so every stage counts the
  // same batches (its eval program reads those of its ops).
  const std::vector<ArgumentDesc> &stepArgs = step.getArguments();
  int64_t batch = manifest.training->globalBatch;
  data = std::make_unique<DataLoader>(stepArgs, dataDir, batch, std::nullopt);
  if (replicas > 1)
    data->selectShare(replica * (batch / replicas), batch / replicas);
  for (size_t j : data->inputs())
    batchBuffers.emplace_back(static_cast<size_t>(
        byteSize(stepArgs[j].dtype, stepArgs[j].rankShape, stepArgs[j].name)));

  const std::vector<ArgumentDesc> &args = session->getArguments();
  for (size_t i = 0; i < args.size(); ++i) {
    const ArgumentDesc &arg = args[i];
    switch (arg.kind) {
    case ArgumentKind::Parameter: {
      std::optional<size_t> j =
          step.findArgument(ArgumentKind::Parameter, arg.name);
      // Frozen parameters the step does not read keep their loaded value.
      if (!j)
        break;
      const ArgumentDesc &held = stepArgs[*j];
      if (held.dtype != arg.dtype || held.shape != arg.shape)
        throw Error("--eval-data: " + manifest.path + ": program '" +
                    program->name + "' reads parameter '" + arg.name + "' as " +
                    std::string(dtypeName(arg.dtype)) + " " +
                    formatShape(arg.shape) + ", but its stage's step holds " +
                    std::string(dtypeName(held.dtype)) + " " +
                    formatShape(held.shape) + "; recompile the model");
      parameters.push_back({i, *j});
      break;
    }
    case ArgumentKind::Input: {
      std::optional<size_t> found;
      for (size_t k = 0; k < data->inputs().size(); ++k)
        if (stepArgs[data->inputs()[k]].name == arg.name)
          found = k;
      if (!found)
        throw Error("--eval-data: " + manifest.path + ": program '" +
                    program->name + "' reads input '" + arg.name +
                    "', which its stage's step does not list");
      inputs.push_back({i, *found});
      break;
    }
    case ArgumentKind::ActivationIn:
      received.push_back(i);
      break;
    case ArgumentKind::ActivationOut:
      sent.push_back(i);
      break;
    case ArgumentKind::Output:
      if (arg.name == manifest.training->loss)
        loss = i;
      else if (arg.name == "loss.denominator")
        denominator = i;
      break;
    default:
      break;
    }
  }
  if (stage == manifest.pipeline->stages - 1 && !loss)
    throw Error("--eval-data: " + manifest.path + ": program '" +
                program->name + "' of the last pipeline stage returns no '" +
                manifest.training->loss + "'");
}

PipelineEvaluator::~PipelineEvaluator() = default;

double PipelineEvaluator::run(Communicator &comm, Communicator &hostComm) {
  // The step's updates trade its buffers after every step: bind the
  // current ones.
  for (auto [i, j] : parameters)
    session->bindArgument(i, step.entryData(j));
  const std::vector<ArgumentDesc> &args = session->getArguments();
  auto messages = [&](const std::vector<size_t> &which) {
    std::vector<Communicator::Message> list;
    for (size_t i : which)
      list.push_back({session->entryData(i),
                      numElements(args[i].shape, args[i].name), args[i].dtype,
                      args[i].peerStage});
    return list;
  };
  std::vector<void *> buffers;
  for (HostBuffer &buffer : batchBuffers)
    buffers.push_back(buffer.data());
  auto scalar = [&](size_t i) {
    return static_cast<double>(
        *static_cast<const float *>(session->argumentData(i)));
  };
  double sum = 0;
  DataPosition position;
  for (int64_t b = 0; b < batches(); ++b) {
    data->fill(position, buffers);
    double lossSum = 0, denominatorSum = 0;
    for (int64_t m = 0; m < microBatches; ++m) {
      for (auto [i, k] : inputs)
        session->bindArgument(
            i, static_cast<char *>(batchBuffers[k].data()) +
                   static_cast<size_t>(m) *
                       static_cast<size_t>(byteSize(
                           args[i].dtype, args[i].shape, args[i].name)));
      comm.exchange({}, messages(received), CommScope::PP);
      session->call();
      comm.exchange(messages(sent), {}, CommScope::PP);
      if (loss)
        lossSum += scalar(*loss);
      if (denominator)
        denominatorSum += scalar(*denominator);
    }
    if (loss)
      sum += denominator ? lossSum / denominatorSum : lossSum;
    position = data->next(position);
  }
  // The last stage's mean, on every stage (the others add zero), then the
  // mean of the replicas' means.
  double mean = loss ? sum / static_cast<double>(batches()) : 0.0;
  hostComm.allReduce(&mean, &mean, 1, DType::Float64, ReduceOp::Sum,
                     CommScope::PP);
  if (replicas > 1) {
    hostComm.allReduce(&mean, &mean, 1, DType::Float64, ReduceOp::Sum,
                       CommScope::DP);
    mean /= static_cast<double>(replicas);
  }
  return mean;
}

} // namespace autopar::runtime
