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
  const PipelineDesc &pipeline = *manifest.pipeline;
  replicas = manifest.grid[static_cast<size_t>(GridAxis::DP)];
  microBatches = pipeline.microBatches;
  order =
      pipelineSchedule(pipeline.schedule, pipeline.stages, stage, microBatches,
                       /*withBackward=*/false, pipeline.virtualStages);

  // Every stage's step lists every data input, so every stage counts the
  // same batches (its eval programs read those of their ops).
  const std::vector<ArgumentDesc> &stepArgs = step.getArguments();
  int64_t batch = manifest.training->globalBatch;
  data = std::make_unique<DataLoader>(stepArgs, dataDir, batch, std::nullopt);
  if (replicas > 1)
    data->selectShare(replica * (batch / replicas), batch / replicas);
  for (size_t j : data->inputs())
    batchBuffers.emplace_back(static_cast<size_t>(
        byteSize(stepArgs[j].dtype, stepArgs[j].rankShape, stepArgs[j].name)));

  std::string dir = std::filesystem::path(manifest.path).parent_path().string();
  // Chunk c of this stage is virtual stage c * stages + stage.
  for (int64_t c = 0; c < pipeline.virtualStages; ++c) {
    int64_t virtualStage = c * pipeline.stages + stage;
    const ProgramDesc *program = manifest.phaseProgram(virtualStage, "eval");
    if (!program) {
      const std::string &why = manifest.training->evalUnavailable;
      throw Error("--eval-data: " + manifest.path +
                  " has no eval program for pipeline stage " +
                  std::to_string(virtualStage) +
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
    Chunk chunk;
    chunk.session = Session::open(std::move(evalManifest), dir, world);
    const std::vector<ArgumentDesc> &args = chunk.session->getArguments();
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
                      program->name + "' reads parameter '" + arg.name +
                      "' as " + std::string(dtypeName(arg.dtype)) + " " +
                      formatShape(arg.shape) + ", but its stage's step holds " +
                      std::string(dtypeName(held.dtype)) + " " +
                      formatShape(held.shape) + "; recompile the model");
        chunk.parameters.push_back({i, *j});
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
        chunk.inputs.push_back({i, *found});
        break;
      }
      case ArgumentKind::ActivationIn:
        chunk.received.push_back(i);
        break;
      case ArgumentKind::ActivationOut:
        chunk.sent.push_back(i);
        break;
      case ArgumentKind::Output:
        if (arg.name == manifest.training->loss)
          chunk.loss = i;
        else if (arg.name == "loss.denominator")
          chunk.denominator = i;
        break;
      default:
        break;
      }
    }
    if (virtualStage == pipeline.chunkStages() - 1 && !chunk.loss)
      throw Error("--eval-data: " + manifest.path + ": program '" +
                  program->name + "' of the last pipeline stage returns no '" +
                  manifest.training->loss + "'");
    chunks.push_back(std::move(chunk));
  }
}

PipelineEvaluator::~PipelineEvaluator() = default;

std::vector<Communicator::Message> PipelineEvaluator::messages(Chunk &chunk,
                                                               bool sends) {
  const std::vector<ArgumentDesc> &args = chunk.session->getArguments();
  std::vector<Communicator::Message> list;
  int64_t stages = step.getManifest().pipeline->stages;
  // Peers are virtual stages; virtual stage v runs on stage v % stages.
  for (size_t i : sends ? chunk.sent : chunk.received)
    list.push_back({chunk.session->entryData(i),
                    numElements(args[i].shape, args[i].name), args[i].dtype,
                    args[i].peerStage % stages});
  return list;
}

double PipelineEvaluator::run(Communicator &comm, Communicator &hostComm) {
  // The step's updates trade its buffers after every step: bind the
  // current ones.
  for (Chunk &chunk : chunks)
    for (auto [i, j] : chunk.parameters)
      chunk.session->bindArgument(i, step.entryData(j));
  std::vector<void *> buffers;
  for (HostBuffer &buffer : batchBuffers)
    buffers.push_back(buffer.data());
  auto scalar = [](Chunk &chunk, size_t i) {
    return static_cast<double>(
        *static_cast<const float *>(chunk.session->argumentData(i)));
  };
  auto chunkOf = [&](const PipelineStep &s) -> Chunk & {
    return chunks[static_cast<size_t>(s.chunk)];
  };
  bool last = false, ratio = false;
  for (Chunk &chunk : chunks) {
    last = last || chunk.loss.has_value();
    ratio = ratio || chunk.denominator.has_value();
  }
  double sum = 0;
  DataPosition position;
  for (int64_t b = 0; b < batches(); ++b) {
    data->fill(position, buffers);
    double lossSum = 0, denominatorSum = 0;
    // Each step's sends go with the next step's receives, so that a chunk
    // handing on to the next stage while that stage hands on to this one
    // (the interleaved order's chunks) cannot deadlock.
    if (!order.empty())
      comm.exchange({}, messages(chunkOf(order.front()), false), CommScope::PP);
    for (size_t k = 0; k < order.size(); ++k) {
      Chunk &chunk = chunkOf(order[k]);
      Session &session = *chunk.session;
      const std::vector<ArgumentDesc> &args = session.getArguments();
      int64_t m = order[k].microBatch;
      for (auto [i, j] : chunk.inputs)
        session.bindArgument(
            i, static_cast<char *>(batchBuffers[j].data()) +
                   static_cast<size_t>(m) *
                       static_cast<size_t>(byteSize(
                           args[i].dtype, args[i].shape, args[i].name)));
      session.call();
      if (chunk.loss)
        lossSum += scalar(chunk, *chunk.loss);
      if (chunk.denominator)
        denominatorSum += scalar(chunk, *chunk.denominator);
      std::vector<Communicator::Message> receives;
      if (k + 1 < order.size())
        receives = messages(chunkOf(order[k + 1]), false);
      comm.exchange(messages(chunk, true), receives, CommScope::PP);
    }
    if (last)
      sum += ratio ? lossSum / denominatorSum : lossSum;
    position = data->next(position);
  }
  // The last stage's mean, on every stage (the others add zero), then the
  // mean of the replicas' means.
  double mean = last ? sum / static_cast<double>(batches()) : 0.0;
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
