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
  std::string dir = std::filesystem::path(manifest.path).parent_path().string();
  const std::vector<ArgumentDesc> &stepArgs = step.getArguments();

  auto open = [&](const char *name) {
    const ProgramDesc *program = manifest.phaseProgram(stage, name);
    if (!program)
      throw Error(manifest.path + ": pipeline stage " + std::to_string(stage) +
                  " has no " + name + " program");
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
        std::vector<HostBuffer> &slots = stash[arg.name];
        // 1F1B holds at most stages - stage micro-batches between their
        // forward and their backward, consecutive ones: slot m modulo that.
        int64_t window = schedule == ScheduleKind::OneFOneB
                             ? std::min(stages - stage, microBatches)
                             : microBatches;
        if (slots.empty()) {
          for (int64_t m = 0; m < window; ++m)
            slots.emplace_back(bytesOf(arg));
          residualBytes += bytesOf(arg);
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
  forward = open("forward");
  backward = open("backward");
  for (size_t j = 0; j < stepArgs.size(); ++j)
    if (stepArgs[j].kind == ArgumentKind::Accumulator &&
        !sums.count(stepArgs[j].name))
      throw Error(manifest.path + ": the step of pipeline stage " +
                  std::to_string(stage) + " reads accumulator '" +
                  stepArgs[j].name +
                  "', which neither its forward nor its backward adds to");
}

PipelineTrainer::~PipelineTrainer() = default;

bool PipelineTrainer::hasSeed() const {
  return forward->seed || backward->seed;
}

void PipelineTrainer::setSeed(int64_t seed) {
  for (Phase *phase : {forward.get(), backward.get()})
    if (phase->seed)
      *static_cast<int64_t *>(phase->session->argumentData(*phase->seed)) =
          seed;
}

std::vector<Communicator::Message> PipelineTrainer::messages(Phase &phase,
                                                             bool sends) {
  std::vector<Communicator::Message> list;
  const std::vector<ArgumentDesc> &args = phase.session->getArguments();
  for (size_t i : sends ? phase.sent : phase.received) {
    const ArgumentDesc &arg = args[i];
    list.push_back({phase.session->entryData(i),
                    numElements(arg.shape, arg.name), arg.dtype,
                    arg.peerStage});
  }
  return list;
}

void PipelineTrainer::runPhase(Phase &phase, const PipelineStep &s) {
  Session &session = *phase.session;
  const std::vector<ArgumentDesc> &args = session.getArguments();
  int64_t m = s.microBatch;
  for (auto [i, j] : phase.inputs)
    session.bindArgument(i, static_cast<char *>(step.entryData(j)) +
                                static_cast<size_t>(m) * bytesOf(args[i]));
  if (phase.sampleOffset)
    *static_cast<int64_t *>(session.argumentData(*phase.sampleOffset)) =
        (replica * microBatches + m) * microBatchSize;
  for (size_t i : phase.residuals) {
    std::vector<HostBuffer> &slots = stash.at(args[i].name);
    session.bindArgument(i,
                         slots[static_cast<size_t>(m) % slots.size()].data());
  }
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
  for (Phase *phase : {forward.get(), backward.get()})
    for (auto [i, j] : phase->parameters)
      phase->session->bindArgument(i, step.entryData(j));
  for (auto &[name, sum] : sums)
    std::memset(sum.current.data(), 0, sum.current.size());
  std::vector<PipelineStep> order =
      pipelineSchedule(schedule, stages, stage, microBatches,
                       /*withBackward=*/true);
  auto phaseOf = [&](const PipelineStep &s) -> Phase & {
    return s.phase == StepPhase::Forward ? *forward : *backward;
  };
  int64_t inFlight = 0;
  peakInFlight = 0;
  if (!order.empty())
    comm.exchange({}, messages(phaseOf(order.front()), false), CommScope::PP);
  for (size_t k = 0; k < order.size(); ++k) {
    Phase &phase = phaseOf(order[k]);
    runPhase(phase, order[k]);
    inFlight += phase.isForward ? 1 : -1;
    peakInFlight = std::max(peakInFlight, inFlight);
    // This step's sends with the next step's receives, so that two
    // neighbours sending to each other (1F1B's steady state) both proceed.
    std::vector<Communicator::Message> receives;
    if (k + 1 < order.size())
      receives = messages(phaseOf(order[k + 1]), false);
    comm.exchange(messages(phase, true), receives, CommScope::PP);
  }
  const std::vector<ArgumentDesc> &stepArgs = step.getArguments();
  for (size_t j = 0; j < stepArgs.size(); ++j)
    if (stepArgs[j].kind == ArgumentKind::Accumulator)
      step.bindArgument(j, sums.at(stepArgs[j].name).current.data());
}

} // namespace autopar::runtime
