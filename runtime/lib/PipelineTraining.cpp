//===- PipelineTraining.cpp - A training pipeline stage's micro-batches ---===//
//
// See PipelineTraining.h.
//
//===----------------------------------------------------------------------===//

#include "autopar/runtime/PipelineTraining.h"

#include "autopar/runtime/Error.h"
#include "autopar/runtime/Tensor.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <optional>

namespace autopar::runtime {

/// One of the stage's per-micro-batch programs and how its arguments are
/// fed.
struct PipelineTrainer::Phase {
  std::unique_ptr<Session> session;
  bool isForward = true;
  /// (argument, the step's argument): parameters (and the step number,
  /// fp16's loss scaler) and data inputs.
  std::vector<std::pair<size_t, size_t>> parameters, inputs;
  /// Activations (forward) or cotangents (backward), in argument order.
  std::vector<size_t> received, sent;
  std::vector<size_t> residuals;
  /// (accumulator argument, the update result holding its next value).
  std::vector<std::pair<size_t, size_t>> accumulators;
  /// (update result, the step's parameter): the state the forward updates
  /// itself (BatchNorm's running statistics), carried to the next
  /// micro-batch and the next step in the step's parameter.
  std::vector<std::pair<size_t, size_t>> stateUpdates;
  std::optional<size_t> seed, sampleOffset;
};

/// One model chunk of the stage (the only one without virtual stages): its
/// two programs and the residuals its forwards keep for its backwards.
struct PipelineTrainer::Chunk {
  std::unique_ptr<Phase> forward, backward;
  /// Per residual name: one buffer per slot.
  std::map<std::string, std::vector<HostBuffer>> stash;
  size_t residualBytes = 0;
  /// The stash slot of each micro-batch: the walk of the schedule hands a
  /// forward the lowest slot no micro-batch in flight holds.
  std::vector<size_t> slotOf;
  size_t slots = 0;
};

namespace {

size_t bytesOf(const ArgumentDesc &arg) {
  return byteSize(arg.dtype, arg.shape, arg.name);
}

} // namespace

PipelineTrainer::PipelineTrainer(Session &step) : step(step) {
  const Manifest &manifest = step.getManifest();
  if (!manifest.isPipelineTraining())
    throw Error(manifest.path + ": not a pipeline training artifact");
  if (step.device())
    throw Error(manifest.path +
                ": this pipeline training artifact is compiled for GPUs, and "
                "autopar-run trains pipelines on CPU ranks so far (its "
                "micro-batches' stash and sums are host buffers); compile for "
                "--cluster local:N, or train it without --pp");
  const WorldInfo &world = step.getWorld();
  const RankDesc &rank = manifest.ranks.at(static_cast<size_t>(world.rank));
  stage = rank.coords[static_cast<size_t>(GridAxis::PP)];
  replica = rank.coords[static_cast<size_t>(GridAxis::DP)];
  stages = manifest.pipeline->stages;
  microBatches = manifest.pipeline->microBatches;
  microBatchSize = manifest.pipeline->microBatchSize;
  schedule = manifest.pipeline->schedule;
  const int64_t virtualStages = manifest.pipeline->virtualStages;
  order = pipelineSchedule(schedule, stages, stage, microBatches,
                           /*withBackward=*/true, virtualStages);
  if (order.empty())
    throw Error(
        manifest.path + ": pipeline stage " + std::to_string(stage) +
        " has no schedule: " +
        pipelineScheduleError(schedule, stages, microBatches, virtualStages)
            .value_or("no micro-batches"));
  for (size_t k = 0; k < order.size(); ++k)
    if (k == 0 || !order[k - 1].pairedWithNext)
      groups.push_back({k, k + 1});
    else
      groups.back().second = k + 1;
  for (int64_t c = 0; c < virtualStages; ++c) {
    chunks.push_back(std::make_unique<Chunk>());
    chunks.back()->slotOf.assign(static_cast<size_t>(microBatches), 0);
  }
  // Each chunk's stash slots, from a walk of the schedule: as many as
  // micro-batches it holds at once (1F1B without virtual stages: at most
  // stages - stage, GPipe: all of them).
  {
    std::vector<std::vector<bool>> taken(chunks.size());
    for (const PipelineStep &s : order) {
      Chunk &chunk = *chunks[static_cast<size_t>(s.chunk)];
      std::vector<bool> &busy = taken[static_cast<size_t>(s.chunk)];
      size_t &slot = chunk.slotOf[static_cast<size_t>(s.microBatch)];
      if (s.phase == StepPhase::Backward) {
        busy[slot] = false;
        continue;
      }
      slot = static_cast<size_t>(std::find(busy.begin(), busy.end(), false) -
                                 busy.begin());
      if (slot == busy.size())
        busy.push_back(true);
      busy[slot] = true;
      chunk.slots = std::max(chunk.slots, busy.size());
    }
  }
  std::string dir = std::filesystem::path(manifest.path).parent_path().string();
  const std::vector<ArgumentDesc> &stepArgs = step.getArguments();

  auto open = [&](Chunk &chunk, int64_t virtualStage, const char *name) {
    const ProgramDesc *program = manifest.phaseProgram(virtualStage, name);
    if (!program)
      throw Error(manifest.path + ": pipeline stage " + std::to_string(stage) +
                  " has no " + name + " program" +
                  (virtualStages > 1
                       ? " for virtual stage " + std::to_string(virtualStage)
                       : std::string()));
    Manifest phaseManifest = manifest;
    // Parameters are bound to the step's, not copied.
    phaseManifest.training.reset();
    for (RankDesc &r : phaseManifest.ranks)
      r.program = program->name;
    auto phase = std::make_unique<Phase>();
    phase->isForward = std::string_view(name) == "forward";
    phase->session = Session::open(std::move(phaseManifest), dir, world);
    const std::vector<ArgumentDesc> &args = phase->session->getArguments();
    // The step's argument of `kind` named `name`, of `arg`'s type and size;
    // an error saying that it `reads` one the step lacks otherwise.
    auto stepsAlike = [&](ArgumentKind kind, const std::string &name,
                          const ArgumentDesc &arg,
                          const std::string &reads) -> size_t {
      std::optional<size_t> j = step.findArgument(kind, name);
      if (!j || stepArgs[*j].dtype != arg.dtype ||
          bytesOf(stepArgs[*j]) != bytesOf(arg))
        throw Error(manifest.path + ": program '" + program->name + "' " +
                    reads + ", which its stage's step does not hold alike");
      return *j;
    };
    for (size_t i = 0; i < args.size(); ++i) {
      const ArgumentDesc &arg = args[i];
      switch (arg.kind) {
      case ArgumentKind::Parameter:
        // Frozen parameters are not the step's: they keep their loaded
        // value.
        if (std::optional<size_t> j =
                step.findArgument(ArgumentKind::Parameter, arg.name))
          phase->parameters.push_back({i, *j});
        break;
      case ArgumentKind::Input:
        phase->inputs.push_back(
            {i, stepsAlike(ArgumentKind::Input, arg.name, arg,
                           "reads input '" + arg.name + "'")});
        break;
      case ArgumentKind::ActivationIn:
        phase->received.push_back(i);
        break;
      case ArgumentKind::ActivationOut:
        phase->sent.push_back(i);
        break;
      case ArgumentKind::Residual: {
        std::vector<HostBuffer> &slots = chunk.stash[arg.name];
        if (slots.empty()) {
          for (size_t m = 0; m < chunk.slots; ++m)
            slots.emplace_back(bytesOf(arg));
          chunk.residualBytes += bytesOf(arg);
        }
        phase->residuals.push_back(i);
        break;
      }
      case ArgumentKind::Accumulator: {
        std::optional<size_t> next;
        for (size_t r = 0; r < args.size(); ++r)
          if (args[r].kind == ArgumentKind::Update &&
              args[r].updates == arg.name)
            next = r;
        if (!next)
          throw Error(manifest.path + ": program '" + program->name +
                      "' reads accumulator '" + arg.name +
                      "' but returns no update of it");
        phase->accumulators.push_back({i, *next});
        if (!sums.count(arg.name))
          sums.emplace(arg.name,
                       Sum{HostBuffer(bytesOf(arg)), HostBuffer(bytesOf(arg))});
        break;
      }
      case ArgumentKind::Seed:
        phase->seed = i;
        break;
      case ArgumentKind::Step: {
        // Dropout's masks depend on the step: the step's own counter.
        std::optional<size_t> j =
            step.findArgument(ArgumentKind::Step, arg.name);
        if (!j)
          throw Error(manifest.path + ": program '" + program->name +
                      "' reads the step number, which its stage's step "
                      "does not take");
        phase->parameters.push_back({i, *j});
        break;
      }
      case ArgumentKind::OptimizerState:
        // fp16's loss scaler (the last stage's forward and backward scale
        // the loss by it): the step's state, which it updates.
        phase->parameters.push_back(
            {i, stepsAlike(ArgumentKind::OptimizerState, arg.name, arg,
                           "reads optimizer state '" + arg.name + "'")});
        break;
      case ArgumentKind::SampleOffset:
        phase->sampleOffset = i;
        break;
      default:
        break;
      }
    }
    for (size_t r = 0; r < args.size(); ++r) {
      const ArgumentDesc &arg = args[r];
      if (arg.kind != ArgumentKind::Update ||
          std::any_of(phase->accumulators.begin(), phase->accumulators.end(),
                      [&](const std::pair<size_t, size_t> &a) {
                        return a.second == r;
                      }))
        continue;
      phase->stateUpdates.push_back(
          {r, stepsAlike(ArgumentKind::Parameter, arg.updates, arg,
                         "updates parameter '" + arg.updates + "'")});
    }
    return phase;
  };
  for (int64_t c = 0; c < virtualStages; ++c) {
    Chunk &chunk = *chunks[static_cast<size_t>(c)];
    chunk.forward = open(chunk, c * stages + stage, "forward");
    chunk.backward = open(chunk, c * stages + stage, "backward");
  }
  for (size_t j = 0; j < stepArgs.size(); ++j)
    if (stepArgs[j].kind == ArgumentKind::Accumulator &&
        !sums.count(stepArgs[j].name))
      throw Error(manifest.path + ": the step of pipeline stage " +
                  std::to_string(stage) + " reads accumulator '" +
                  stepArgs[j].name +
                  "', which neither its forwards nor its backwards add to");
}

PipelineTrainer::~PipelineTrainer() = default;

bool PipelineTrainer::hasSeed() const {
  for (const std::unique_ptr<Chunk> &chunk : chunks)
    if (chunk->forward->seed || chunk->backward->seed)
      return true;
  return false;
}

void PipelineTrainer::setSeed(int64_t seed) {
  for (const std::unique_ptr<Chunk> &chunk : chunks)
    for (Phase *phase : {chunk->forward.get(), chunk->backward.get()})
      if (phase->seed)
        *static_cast<int64_t *>(phase->session->argumentData(*phase->seed)) =
            seed;
}

size_t PipelineTrainer::residualBytesPerMicroBatch() const {
  size_t bytes = 0;
  for (const std::unique_ptr<Chunk> &chunk : chunks)
    bytes += chunk->residualBytes;
  return bytes;
}

PipelineTrainer::Phase &PipelineTrainer::phaseOf(const PipelineStep &s) {
  Chunk &chunk = *chunks[static_cast<size_t>(s.chunk)];
  return s.phase == StepPhase::Forward ? *chunk.forward : *chunk.backward;
}

std::vector<Communicator::Message> PipelineTrainer::messages(Phase &phase,
                                                             bool sends) {
  std::vector<Communicator::Message> list;
  const std::vector<ArgumentDesc> &args = phase.session->getArguments();
  for (size_t i : sends ? phase.sent : phase.received) {
    const ArgumentDesc &arg = args[i];
    // Peers are virtual stages; virtual stage v runs on stage v % stages.
    list.push_back({phase.session->entryData(i),
                    numElements(arg.shape, arg.name), arg.dtype,
                    arg.peerStage % stages});
  }
  return list;
}

void PipelineTrainer::runPhase(Phase &phase, Chunk &chunk,
                               const PipelineStep &s) {
  Session &session = *phase.session;
  const std::vector<ArgumentDesc> &args = session.getArguments();
  int64_t m = s.microBatch;
  for (auto [i, j] : phase.inputs)
    session.bindArgument(i, static_cast<char *>(step.entryData(j)) +
                                static_cast<size_t>(m) * bytesOf(args[i]));
  if (phase.sampleOffset)
    *static_cast<int64_t *>(session.argumentData(*phase.sampleOffset)) =
        (replica * microBatches + m) * microBatchSize;
  size_t slot = chunk.slotOf[static_cast<size_t>(m)];
  for (size_t i : phase.residuals)
    session.bindArgument(i, chunk.stash.at(args[i].name)[slot].data());
  for (auto [in, out] : phase.accumulators) {
    Sum &sum = sums.at(args[in].name);
    session.bindArgument(in, sum.current.data());
    session.bindArgument(out, sum.next.data());
  }
  session.call();
  for (auto [in, out] : phase.accumulators) {
    Sum &sum = sums.at(args[in].name);
    std::swap(sum.current, sum.next);
  }
  // The micro-batches of a stage run their forwards in order, each on the
  // state the previous one left (as PyTorch's forward calls do).
  for (auto [out, j] : phase.stateUpdates)
    std::memcpy(step.entryData(j), session.entryData(out), bytesOf(args[out]));
}

void PipelineTrainer::runMicroBatches(Communicator &comm) {
  // The step's updates trade its buffers after every step: bind the
  // current ones.
  for (const std::unique_ptr<Chunk> &chunk : chunks)
    for (Phase *phase : {chunk->forward.get(), chunk->backward.get()})
      for (auto [i, j] : phase->parameters)
        phase->session->bindArgument(i, step.entryData(j));
  for (auto &[name, sum] : sums)
    std::memset(sum.current.data(), 0, sum.current.size());
  // A group's receives, in step order (each pair of stages posts its
  // messages in one order, so MPI matches them with one tag).
  auto receivesOf = [&](std::pair<size_t, size_t> group) {
    std::vector<Communicator::Message> list;
    for (size_t k = group.first; k < group.second; ++k)
      for (const Communicator::Message &m : messages(phaseOf(order[k]), false))
        list.push_back(m);
    return list;
  };
  int64_t inFlight = 0;
  size_t bytes = 0;
  peakInFlight = 0;
  peakBytes = 0;
  comm.exchange({}, receivesOf(groups.front()), CommScope::PP);
  for (size_t g = 0; g < groups.size(); ++g) {
    std::vector<Communicator::Message> sends;
    for (size_t k = groups[g].first; k < groups[g].second; ++k) {
      const PipelineStep &s = order[k];
      Chunk &chunk = *chunks[static_cast<size_t>(s.chunk)];
      Phase &phase = phaseOf(s);
      runPhase(phase, chunk, s);
      inFlight += phase.isForward ? 1 : -1;
      if (phase.isForward)
        bytes += chunk.residualBytes;
      peakInFlight = std::max(peakInFlight, inFlight);
      peakBytes = std::max(peakBytes, bytes);
      if (!phase.isForward)
        bytes -= chunk.residualBytes;
      for (const Communicator::Message &m : messages(phase, true))
        sends.push_back(m);
    }
    // This group's sends with the next group's receives, so that two
    // neighbours sending to each other (1F1B's steady state) both proceed.
    comm.exchange(sends,
                  g + 1 < groups.size() ? receivesOf(groups[g + 1])
                                        : std::vector<Communicator::Message>{},
                  CommScope::PP);
  }
  const std::vector<ArgumentDesc> &stepArgs = step.getArguments();
  for (size_t j = 0; j < stepArgs.size(); ++j)
    if (stepArgs[j].kind == ArgumentKind::Accumulator)
      step.bindArgument(j, sums.at(stepArgs[j].name).current.data());
}

} // namespace autopar::runtime
