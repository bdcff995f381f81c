//===- Training.cpp - autopar-run --train (a CPU or GPU, or dp CPU ranks) -===//

#include "autopar/runtime/Training.h"
#include "autopar/runtime/PipelineEvaluation.h"
#include "autopar/runtime/PipelineTraining.h"

#include "autopar/runtime/BufferAccounting.h"
#include "autopar/runtime/Checkpoint.h"
#include "autopar/runtime/DataLoader.h"
#include "autopar/runtime/Error.h"
#include "autopar/runtime/Npy.h"
#include "autopar/runtime/OnnxWriter.h"
#include "autopar/runtime/Session.h"
#include "autopar/runtime/TensorFiles.h"
#include "autopar/runtime/TensorLayout.h"
#include "autopar/runtime/TrainProgress.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <thread>

namespace autopar::runtime {
namespace {

size_t findIndex(const Session &session, ArgumentKind kind,
                 const std::string &name, const std::string &what) {
  if (std::optional<size_t> i = session.findArgument(kind, name))
    return *i;
  throw Error("the training artifact has no " + what + " '" + name +
              "' (recompile it with autopar-compile --mode train)");
}

/// The stage of a training pipeline that lists each argument of the steps
/// first: the one that checkpoints and writes out a tied weight that later
/// stages hold copies of.
std::map<std::string, int64_t> firstStageOf(const Manifest &manifest) {
  std::map<std::string, int64_t> first;
  for (int64_t stage = 0; stage < manifest.pipeline->stages; ++stage)
    for (const ProgramDesc &program : manifest.programs)
      if (program.stage == stage && program.phase.empty())
        for (const ArgumentDesc &arg : program.arguments)
          first.try_emplace(arg.name, stage);
  return first;
}

/// The arguments that describe the run's training state: the session's, or
/// in a training pipeline those of every stage's step, in stage order, so
/// that every rank lists the same tensors (each holding its stage's), with
/// the updates of the state each stage's forward updates itself; a tied
/// weight (and its optimizer states), which several stages hold, once.
std::vector<ArgumentDesc> stateArguments(const Session &session) {
  const Manifest &manifest = session.getManifest();
  if (!manifest.isPipelineTraining())
    return session.getArguments();
  std::vector<ArgumentDesc> all;
  std::set<std::string> listed, parameters;
  for (int64_t stage = 0; stage < manifest.pipeline->stages; ++stage) {
    for (const ProgramDesc &program : manifest.programs)
      if (program.stage == stage && program.phase.empty())
        for (const ArgumentDesc &arg : program.arguments) {
          if (arg.kind == ArgumentKind::Parameter)
            parameters.insert(arg.name);
          if ((arg.kind != ArgumentKind::Parameter &&
               arg.kind != ArgumentKind::OptimizerState) ||
              listed.insert(arg.name).second)
            all.push_back(arg);
        }
    // The state a stage's forward updates itself (BatchNorm's running
    // statistics) is training state too; the forward's other updates are
    // accumulators'.
    for (const ProgramDesc &program : manifest.programs)
      if (program.stage == stage && program.phase == "forward")
        for (const ArgumentDesc &arg : program.arguments)
          if (arg.kind == ArgumentKind::Update && parameters.count(arg.updates))
            all.push_back(arg);
  }
  return all;
}

/// The cuts of \p arg's blocks, for its checkpoint tensor (none when whole).
std::vector<CheckpointTensor::BlockLevel>
blockLevelsOf(const ArgumentDesc &arg, const Communicator &comm) {
  std::vector<CheckpointTensor::BlockLevel> levels;
  for (const std::optional<SplitDesc> &split : {arg.split, arg.innerSplit})
    if (split)
      levels.push_back({split->dim, comm.scopeSize(scopeOf(split->axis))});
  return levels;
}

/// The training state of \p session, pointing at host memory holding its
/// current values (on a GPU, copied from the device: call again after each
/// step; after changing them, call commitState). A split argument (ZeRO's
/// optimizer states) is this rank's block; a tensor is written by the rank
/// whose coordinates are 0 on every axis that does not split it.
std::vector<CheckpointTensor> currentState(Session &session,
                                           const Communicator &comm) {
  const std::vector<ArgumentDesc> &args = session.getArguments();
  bool pipeline = session.getManifest().isPipelineTraining();
  std::vector<ArgumentDesc> state = stateArguments(session);
  std::map<std::string, int64_t> firstStage;
  std::map<std::string, const ArgumentDesc *> stateByName;
  if (pipeline) {
    firstStage = firstStageOf(session.getManifest());
    for (const ArgumentDesc &arg : state)
      if (arg.kind == ArgumentKind::Parameter ||
          arg.kind == ArgumentKind::OptimizerState)
        stateByName.emplace(arg.name, &arg);
  }
  std::vector<CheckpointTensor> tensors = trainingStateTensors(state);
  for (CheckpointTensor &tensor : tensors) {
    std::optional<size_t> index =
        session.findArgument(ArgumentKind::Parameter, tensor.name);
    if (!index)
      index = session.findArgument(ArgumentKind::OptimizerState, tensor.name);
    if (!index) {
      // Another pipeline stage's: not written here, but its blocks (tensor
      // parallelism within the stage) are what the metadata describes.
      tensor.write = false;
      auto it = stateByName.find(tensor.name);
      if (it != stateByName.end())
        tensor.blockLevels = blockLevelsOf(*it->second, comm);
      continue;
    }
    tensor.data = session.readArgument(*index);
    const ArgumentDesc &arg = args[*index];
    tensor.blockLevels = blockLevelsOf(arg, comm);
    // The block's number, row-major over the cuts.
    for (GridAxis axis : arg.splitAxes())
      tensor.blockIndex = tensor.blockIndex * comm.scopeSize(scopeOf(axis)) +
                          comm.scopeRank(scopeOf(axis));
    // Each pipeline stage holds its own tensors: their stage writes them (a
    // tied weight, the first stage that holds it).
    std::vector<GridAxis> replicating{GridAxis::DP, GridAxis::TP};
    if (!pipeline)
      replicating.push_back(GridAxis::PP);
    if (!arg.isFirstCopyAt(comm.coordsOf(comm.worldRank()), replicating))
      tensor.write = false;
    if (pipeline && firstStage.at(tensor.name) != comm.scopeRank(CommScope::PP))
      tensor.write = false;
  }
  return tensors;
}

/// The whole value of parameter \p index on world rank 0 (empty on the
/// others): its buffer, or for a split one (ZeRO-3's blocks) every block,
/// gathered from the ranks at coordinate 0 of the other axes. The gather is
/// the runtime's own (world scope), as the distribution of inputs is.
std::vector<char> wholeParameter(Session &session, Communicator &comm,
                                 size_t index) {
  const ArgumentDesc &arg = session.getArguments()[index];
  const void *mine = session.readArgument(index);
  size_t blockBytes =
      static_cast<size_t>(byteSize(arg.dtype, arg.shape, arg.name));
  if (!arg.split) {
    if (comm.worldRank() != 0)
      return {};
    const char *bytes = static_cast<const char *>(mine);
    return std::vector<char>(bytes, bytes + blockBytes);
  }
  int64_t ranks = comm.worldSize();
  std::vector<char> all(
      comm.worldRank() == 0 ? blockBytes * static_cast<size_t>(ranks) : 0);
  comm.gather(mine, all.data(), numElements(arg.shape, arg.name), arg.dtype, 0,
              CommScope::World);
  if (comm.worldRank() != 0)
    return {};
  const GridVector &grid = session.getManifest().grid;
  size_t elementSize = dtypeSize(arg.dtype);
  std::vector<char> whole(
      static_cast<size_t>(byteSize(arg.dtype, arg.globalShape, arg.name)));
  for (int64_t r = 0; r < ranks; ++r) {
    const GridVector &coords = comm.coordsOf(r);
    if (arg.isFirstCopyAt(coords, {GridAxis::DP, GridAxis::TP, GridAxis::PP}))
      unpackBox(all.data() + static_cast<size_t>(r) * blockBytes,
                arg.boxAt(grid, coords), arg.globalShape, elementSize,
                whole.data());
  }
  return whole;
}

/// A parameter of a training pipeline, whole (gatherPipelineParameters).
struct PipelineParameter {
  std::string name;
  DType dtype = DType::Float32;
  Shape shape;
  /// Whether training updates it (what --save-onnx writes into the model).
  bool updated = false;
  std::vector<char> bytes;
};

/// Every parameter of every stage of a training pipeline, whole, on world
/// rank 0 (empty elsewhere; every rank must call it): stage by stage, each
/// parameter is gathered at world scope (the runtime's own traffic, as
/// wholeParameter's; ranks of other stages send zeros) from the stage's
/// first replica, whose tp ranks hold its blocks when tp splits it, or from
/// the stage's replicas, which hold its blocks under ZeRO-3. A tied weight
/// comes once, from the first stage that holds it.
std::vector<PipelineParameter>
gatherPipelineParameters(Session &session, const Communicator &comm,
                         Communicator &hostComm) {
  const Manifest &manifest = session.getManifest();
  std::map<std::string, int64_t> firstStage = firstStageOf(manifest);
  std::vector<PipelineParameter> result;
  bool leader = hostComm.worldRank() == 0;
  int64_t ranks = hostComm.worldSize();
  int64_t myStage = comm.scopeRank(CommScope::PP);
  for (int64_t stage = 0; stage < manifest.pipeline->stages; ++stage)
    for (const ProgramDesc &program : manifest.programs) {
      if (program.stage != stage || !program.phase.empty())
        continue;
      for (const ArgumentDesc &arg : program.arguments) {
        if (arg.kind != ArgumentKind::Parameter ||
            firstStage.at(arg.name) != stage)
          continue;
        for (GridAxis axis : arg.splitAxes())
          if (axis == GridAxis::PP)
            throw Error("internal error: pipeline stage parameter '" +
                        arg.name +
                        "' is split over pp, which writing the trained "
                        "parameters does not gather");
        size_t blockBytes =
            static_cast<size_t>(byteSize(arg.dtype, arg.shape, arg.name));
        std::vector<char> zeros;
        const void *mine = nullptr;
        if (myStage == stage) {
          mine = session.readArgument(
              *session.findArgument(ArgumentKind::Parameter, arg.name));
        } else {
          zeros.assign(blockBytes, 0);
          mine = zeros.data();
        }
        std::vector<char> all(leader ? blockBytes * static_cast<size_t>(ranks)
                                     : 0);
        hostComm.gather(mine, all.data(), numElements(arg.shape, arg.name),
                        arg.dtype, 0, CommScope::World);
        if (!leader)
          continue;
        PipelineParameter p;
        p.name = arg.name;
        p.dtype = arg.dtype;
        p.shape = arg.split ? arg.globalShape : arg.shape;
        // Updated by the stage's step (trained) or its forward (BatchNorm's
        // running statistics).
        p.updated = std::any_of(
            manifest.programs.begin(), manifest.programs.end(),
            [&](const ProgramDesc &other) {
              return other.stage == stage &&
                     std::any_of(other.arguments.begin(), other.arguments.end(),
                                 [&](const ArgumentDesc &a) {
                                   return a.kind == ArgumentKind::Update &&
                                          a.updates == arg.name;
                                 });
            });
        p.bytes.resize(
            static_cast<size_t>(byteSize(arg.dtype, p.shape, arg.name)));
        // The blocks come from the stage's ranks along the split axes (tp,
        // dp for ZeRO-3, or both), at coordinate 0 of the others.
        for (int64_t r = 0; r < ranks; ++r) {
          const GridVector &coords = hostComm.coordsOf(r);
          if (coords[static_cast<size_t>(GridAxis::PP)] != stage ||
              !arg.isFirstCopyAt(coords, {GridAxis::DP, GridAxis::TP}))
            continue;
          unpackBox(all.data() + static_cast<size_t>(r) * blockBytes,
                    arg.boxAt(manifest.grid, coords), p.shape,
                    dtypeSize(arg.dtype), p.bytes.data());
        }
        result.push_back(std::move(p));
      }
    }
  return result;
}

/// For the fault tests (test/Integration/train_dp.py): when
/// AUTOPAR_TEST_FAULT is `hang` or `kill` and AUTOPAR_TEST_FAULT_RANK names
/// this world rank, step AUTOPAR_TEST_FAULT_STEP (1-based, default 1)
/// sleeps for an hour or kills the process (SIGKILL) before it runs, as a
/// rank that hangs or dies mid-training would, while the others wait for
/// it in the step's collectives.
void injectTestFault(const Communicator &comm, int64_t step) {
  const char *fault = std::getenv("AUTOPAR_TEST_FAULT");
  const char *rank = std::getenv("AUTOPAR_TEST_FAULT_RANK");
  if (!fault || !rank || std::strtoll(rank, nullptr, 10) != comm.worldRank())
    return;
  const char *at = std::getenv("AUTOPAR_TEST_FAULT_STEP");
  if (step != (at ? std::strtoll(at, nullptr, 10) : 1))
    return;
  std::fflush(nullptr);
  if (std::string(fault) == "kill")
    std::raise(SIGKILL);
  if (std::string(fault) == "hang")
    std::this_thread::sleep_for(std::chrono::hours(1));
}

/// Makes the step read the state currentState returned, after a caller
/// changed it (a restored checkpoint).
void commitState(Session &session) {
  for (const CheckpointTensor &tensor :
       trainingStateTensors(session.getArguments())) {
    std::optional<size_t> index =
        session.findArgument(ArgumentKind::Parameter, tensor.name);
    if (!index)
      index = session.findArgument(ArgumentKind::OptimizerState, tensor.name);
    session.writeArgument(*index);
  }
}

/// "--shuffle 7" or "no --shuffle".
std::string describeShuffle(const std::optional<uint64_t> &seed) {
  return seed ? "--shuffle " + std::to_string(*seed) : "no --shuffle";
}

/// Restores the training state from --checkpoint-dir's latest checkpoint,
/// if any, and returns the step and data position it ends at.
struct Restored {
  int64_t step = 0;
  DataPosition position;
  /// The checkpoint's seed of the random ops, when it recorded one.
  std::optional<uint64_t> randomSeed;
};

Restored resume(Session &session, const Communicator &comm,
                const TrainOptions &options, DataLoader &data,
                TrainProgress &progress) {
  const std::string &dir = *options.checkpointDir;
  std::optional<std::string> stepDir = findLatestCheckpoint(dir);
  if (!stepDir) {
    progress.message("autopar-run: --resume: no checkpoint in " + dir +
                     " (no " + dir + "/latest); starting from step 0");
    return {};
  }
  const Manifest &manifest = session.getManifest();
  CheckpointInfo info = readCheckpoint(
      *stepDir, modelHash(stateArguments(session)), currentState(session, comm),
      modelHash(session.getArguments(), /*inArgumentOrder=*/true));
  commitState(session);
  if (info.shuffleSeed != options.shuffleSeed)
    throw Error("--resume: " + *stepDir + " was written with " +
                describeShuffle(info.shuffleSeed) + ", this run has " +
                describeShuffle(options.shuffleSeed) +
                "; resume with the same data order");
  if (info.randomSeed && options.seedGiven && *info.randomSeed != options.seed)
    throw Error("--resume: " + *stepDir + " was written with --seed " +
                std::to_string(*info.randomSeed) + ", this run has --seed " +
                std::to_string(options.seed) +
                "; drop --seed to continue with the checkpoint's masks");
  Restored restored{info.step, info.position, info.randomSeed};
  if (info.samplesPerEpoch != data.samples() ||
      info.globalBatch != manifest.training->globalBatch) {
    progress.message("autopar-run: note: " + *stepDir + " was written with " +
                     std::to_string(info.samplesPerEpoch) +
                     " samples per epoch in " + info.dataDir +
                     " and global batch " + std::to_string(info.globalBatch) +
                     "; this run has " + std::to_string(data.samples()) +
                     " in " + data.directory() + " and " +
                     std::to_string(manifest.training->globalBatch));
    if (restored.position.batchInEpoch >= data.batchesPerEpoch())
      restored.position = {restored.position.epoch + 1, 0};
  }
  progress.message("autopar-run: resumed from " + *stepDir + " (step " +
                   std::to_string(info.step) + ", epoch " +
                   std::to_string(restored.position.epoch) + ", batch " +
                   std::to_string(restored.position.batchInEpoch) +
                   "; this rank read " + std::to_string(info.bytesRead) +
                   " of the training state's " +
                   std::to_string(info.bytesTotal) + " bytes)");
  return restored;
}

/// Checkpoints written in the background (docs/checkpoints.md, "Saving in
/// the background"): save() copies the rank's shards to host memory, has
/// rank 0 create the step's directory, and starts a thread that writes and
/// syncs this rank's file; the save completes (the exchange of chunk
/// records, rank 0's metadata and renames) once every rank's writer is
/// done. Every communicator call stays on the training thread:
/// MPI_THREAD_MULTIPLE is asked for but not guaranteed, and a communicator
/// is not thread-safe. So after each step the ranks agree whether all
/// writers are done (an uncounted all-reduce of one flag, the same answer
/// on every rank, so they all complete after the same step); until they
/// are, training goes on. At most one save is in flight: the next save,
/// and the end of the run, wait for the one before.
class BackgroundSaver {
public:
  BackgroundSaver(Communicator &comm, const TrainOptions &options,
                  TrainProgress &progress)
      : comm(comm), options(options), progress(progress) {}
  ~BackgroundSaver() {
    // On an error: the writer must end before its buffers go.
    if (writer.joinable())
      writer.join();
  }

  /// Starts saving step \p info.step, after completing the save before.
  void save(Session &session, const CheckpointInfo &info) {
    complete();
    auto begin = std::chrono::steady_clock::now();
    pending = std::make_unique<CheckpointSave>(
        *options.checkpointDir, info, currentState(session, comm), &comm,
        /*snapshot=*/true);
    stallSeconds = seconds(begin);
    savedAt = lastStep = info.step;
    written = false;
    writer = std::thread([this, save = pending.get()] {
      save->writeRankFile();
      written = true;
    });
  }

  /// After step \p step: completes the save in flight if every rank's
  /// writer is done. Every rank calls it after every step.
  void poll(int64_t step) {
    if (!pending)
      return;
    lastStep = step;
    auto begin = std::chrono::steady_clock::now();
    double notDone = written ? 0 : 1;
    comm.maxOverWorld(&notDone, 1);
    stallSeconds += seconds(begin);
    if (notDone == 0)
      complete();
  }

  /// Completes the save in flight, waiting for the writers if need be.
  void complete() {
    if (!pending)
      return;
    auto begin = std::chrono::steady_clock::now();
    writer.join();
    double waitSeconds = seconds(begin);
    std::unique_ptr<CheckpointSave> save = std::move(pending);
    std::string directory = save->finish();
    stallSeconds += seconds(begin);
    std::ostringstream line;
    line.precision(3);
    line << std::fixed << "autopar-run: wrote checkpoint " << directory
         << " (training stalled " << stallSeconds * 1e3
         << " ms; this rank's file written in the background in "
         << save->writeSeconds() * 1e3 << " ms";
    if (lastStep == savedAt + 1)
      line << ", while step " << lastStep << " ran";
    else if (lastStep > savedAt + 1)
      line << ", while steps " << savedAt + 1 << "-" << lastStep << " ran";
    line << ")";
    // The writers' time that overlapped nothing: the next save, or the end
    // of the run, waited for them.
    if (waitSeconds >= 1e-3)
      line << " (waited " << waitSeconds * 1e3
           << " ms for the writers; a longer --checkpoint-every hides them)";
    std::vector<std::string> deleted;
    if (comm.worldRank() == 0)
      deleted =
          pruneCheckpoints(*options.checkpointDir, options.keepCheckpoints);
    if (!deleted.empty()) {
      line << " (deleted";
      for (const std::string &name : deleted)
        line << " " << name;
      line << ")";
    }
    progress.message(line.str());
  }

private:
  static double seconds(std::chrono::steady_clock::time_point since) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         since)
        .count();
  }

  Communicator &comm;
  const TrainOptions &options;
  TrainProgress &progress;
  std::unique_ptr<CheckpointSave> pending;
  std::thread writer;
  /// Set by the writer when this rank's file is written (or failed).
  std::atomic<bool> written = false;
  int64_t savedAt = 0, lastStep = 0;
  double stallSeconds = 0;
};

/// The checkpoint record of step \p step.
CheckpointInfo checkpointInfo(Session &session, const TrainOptions &options,
                              const DataLoader &data, int64_t step,
                              const DataPosition &position,
                              std::optional<uint64_t> randomSeed) {
  const Manifest &manifest = session.getManifest();
  CheckpointInfo info;
  info.randomSeed = randomSeed;
  info.step = step;
  info.position = position;
  info.globalBatch = manifest.training->globalBatch;
  info.samplesConsumed = step * info.globalBatch;
  info.shuffleSeed = options.shuffleSeed;
  // Absolute, so that the record means the same from any directory.
  std::error_code error;
  info.dataDir = std::filesystem::absolute(data.directory(), error).string();
  info.samplesPerEpoch = data.samples();
  info.modelHash = modelHash(stateArguments(session));
  info.model = manifest.model;
  info.modelSha256 = manifest.modelSha256;
  info.cluster = manifest.cluster;
  info.worldSize = manifest.worldSize;
  info.grid = manifest.grid;
  info.blockBytes = options.checkpointBlockBytes;
  return info;
}

/// --eval-data: the artifact's eval program (Dropout off, BatchNorm on its
/// running statistics) run over the held-out set's full batches, reading
/// the training session's current parameters. Data-parallel replicas each
/// evaluate their share of every batch (the program takes the share, as the
/// step does) and average their means.
class Evaluator {
public:
  Evaluator(Session &train, const std::string &dataDir, int64_t replicas,
            int64_t replica)
      : train(train), manifestPath(train.getManifest().path),
        replicas(replicas) {
    const Manifest &manifest = train.getManifest();
    const std::string &program = manifest.training->evalProgram;
    if (program.empty() && !manifest.training->evalUnavailable.empty())
      throw Error("--eval-data: " + manifest.path + " has no eval program: " +
                  manifest.training->evalUnavailable);
    if (program.empty())
      throw Error("--eval-data: " + manifest.path +
                  " has no eval program (compiled by an older "
                  "autopar-compile); recompile the model");
    Manifest evalManifest = manifest;
    evalManifest.training.reset(); // parameters are bound, not copied
    for (RankDesc &rank : evalManifest.ranks)
      rank.program = program;
    std::string dir =
        std::filesystem::path(manifest.path).parent_path().string();
    // On a GPU the eval program runs on the training session's device and
    // reads its parameters there.
    session =
        train.device()
            ? Session::openOnDevice(std::move(evalManifest), dir,
                                    train.getWorld(), *train.device())
            : Session::open(std::move(evalManifest), dir, train.getWorld());
    const std::vector<ArgumentDesc> &args = session->getArguments();
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i].kind == ArgumentKind::Parameter) {
        std::optional<size_t> source =
            train.findArgument(ArgumentKind::Parameter, args[i].name);
        if (!source)
          throw Error(manifest.path + ": the eval program's parameter '" +
                      args[i].name + "' is not one of the training step's");
        // ZeRO-3 leaves each replica a block of the parameters; the eval
        // program reads them whole.
        const ArgumentDesc &held = train.getArguments()[*source];
        if (held.shape != args[i].shape)
          throw Error("--eval-data: " + manifest.path + " shards parameter '" +
                      args[i].name + "' over the data-parallel replicas " +
                      "(ZeRO-3: each holds " + formatShape(held.shape) +
                      " of " + formatShape(args[i].shape) +
                      "), and the eval program reads it whole; evaluate the "
                      "saved model (--save-onnx), or train with ZeRO 0 to 2");
        bindings.push_back({i, *source});
      } else if (args[i].kind == ArgumentKind::Output) {
        loss = i;
      }
    }
    if (!loss)
      throw Error(manifest.path + ": the eval program has no loss output");
    int64_t batch = manifest.training->globalBatch;
    data = std::make_unique<DataLoader>(args, dataDir, batch, std::nullopt);
    if (replicas > 1)
      data->selectShare(replica * (batch / replicas), batch / replicas);
    for (size_t index : data->inputs())
      inputBuffers.push_back(session->argumentData(index));
  }

  /// The mean loss over the held-out set's full batches: over the replicas'
  /// equal shares, the mean of their means (\p hostComm adds them).
  double run(Communicator &comm, Communicator &hostComm) {
    for (auto [eval, source] : bindings)
      session->bindArgument(eval, train.entryData(source));
    double sum = 0;
    DataPosition position;
    for (int64_t b = 0; b < batches(); ++b) {
      data->fill(position, inputBuffers);
      session->runStep(comm);
      sum += *static_cast<const float *>(session->argumentData(*loss));
      position = data->next(position);
    }
    double mean = sum / static_cast<double>(batches());
    if (replicas > 1) {
      hostComm.allReduce(&mean, &mean, 1, DType::Float64, ReduceOp::Sum,
                         CommScope::DP);
      mean /= static_cast<double>(replicas);
    }
    return mean;
  }

  int64_t batches() const { return data->batchesPerEpoch(); }

private:
  Session &train;
  std::string manifestPath;
  std::unique_ptr<Session> session;
  std::unique_ptr<DataLoader> data;
  std::vector<std::pair<size_t, size_t>> bindings;
  std::optional<size_t> loss;
  std::vector<void *> inputBuffers;
  int64_t replicas = 1;
};

} // namespace

int64_t runTraining(Session &session, Communicator &comm,
                    Communicator &hostComm, const TrainOptions &options) {
  const Manifest &manifest = session.getManifest();
  if (!manifest.training)
    throw Error("--train: " + manifest.path +
                " is an inference artifact; compile the model with "
                "autopar-compile --mode train");
  // Several ranks: data-parallel replicas, each training on its share of
  // every batch (the step's all-reduces give every replica the same loss,
  // gradients and update), or tensor-parallel ranks, each holding blocks of
  // the parameters and optimizer states and reading the whole batch.
  // Pipeline stages: each runs its forwards and backwards over the
  // micro-batches (PipelineTraining.h), then its step.
  std::unique_ptr<PipelineTrainer> pipeline;
  if (manifest.isPipelineTraining()) {
    pipeline = std::make_unique<PipelineTrainer>(session);
  } else if (comm.scopeSize(CommScope::PP) != 1) {
    throw Error("--train: " + manifest.path + " splits the step over " +
                std::to_string(comm.scopeSize(CommScope::PP)) +
                " pipeline stages but has no forward and backward program "
                "per stage; recompile it with autopar-compile --mode train");
  }
  const int64_t replicas = comm.scopeSize(CommScope::DP);
  const int64_t replica = comm.scopeRank(CommScope::DP);
  // The first rank writes what the run leaves (metrics, the trained model):
  // the replicas hold the same values (split ones are gathered to it). Every
  // rank writes its part of a checkpoint (writeCheckpoint).
  const bool leader = comm.worldRank() == 0;
  const TrainingDesc &training = *manifest.training;
  const std::vector<ArgumentDesc> &args = session.getArguments();

  size_t loss = findIndex(session, ArgumentKind::Output, training.loss, "loss");
  size_t lr = findIndex(session, ArgumentKind::Metric, "lr", "metric");
  size_t gradNorm =
      findIndex(session, ArgumentKind::Metric, "grad_norm", "metric");
  size_t step = findIndex(session, ArgumentKind::Step, "step", "step");
  // fp16 loss scaling: the scale a step used, and whether it was skipped.
  std::optional<size_t> lossScale, overflow;
  if (training.minLossScale) {
    lossScale =
        findIndex(session, ArgumentKind::Metric, "loss_scale", "metric");
    overflow = findIndex(session, ArgumentKind::Metric, "overflow", "metric");
  }
  // Programs with random ops (training-mode Dropout) read the run's seed.
  std::optional<size_t> seedArg =
      session.findArgument(ArgumentKind::Seed, "seed");
  std::vector<std::pair<size_t, size_t>> updates;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].kind != ArgumentKind::Update)
      continue;
    std::optional<size_t> target =
        session.findArgument(ArgumentKind::Parameter, args[i].updates);
    if (!target)
      target =
          session.findArgument(ArgumentKind::OptimizerState, args[i].updates);
    if (!target)
      throw Error(manifest.path + ": update '" + args[i].name + "' updates '" +
                  args[i].updates +
                  "', which is no parameter or optimizer state");
    updates.push_back({i, *target});
  }

  if (options.saveOnnx && training.inferenceTemplate.empty())
    throw Error("--save-onnx: " + manifest.path +
                " has no inference template (artifacts compiled from a "
                ".onnxtxt model, or by an older autopar-compile, have none); "
                "recompile the .onnx model with autopar-compile --mode train");
  // --eval-data: a pipeline's stages each run their eval program.
  std::optional<Evaluator> evaluator;
  std::unique_ptr<PipelineEvaluator> pipelineEvaluator;
  if (options.evalDataDir && pipeline)
    pipelineEvaluator =
        std::make_unique<PipelineEvaluator>(session, *options.evalDataDir);
  else if (options.evalDataDir)
    evaluator.emplace(session, *options.evalDataDir, replicas, replica);
  int64_t batch = training.globalBatch;
  if (batch % replicas != 0)
    throw Error(manifest.path + ": the global batch " + std::to_string(batch) +
                " does not divide into " + std::to_string(replicas) +
                " data-parallel replicas");
  DataLoader data(args, options.dataDir, batch, options.shuffleSeed);
  if (replicas > 1)
    data.selectShare(replica * (batch / replicas), batch / replicas);
  std::FILE *out = leader ? stdout : nullptr;
  TrainProgress progress(out, TrainProgress::isTerminal(stdout), options.steps);
  progress.message(
      "autopar-run: training to step " + std::to_string(options.steps) +
      " on " + std::to_string(data.samples()) + " samples (" +
      std::to_string(data.batchesPerEpoch()) + " batches of " +
      std::to_string(batch) + " per epoch" +
      (replicas > 1
           ? ", " + std::to_string(replicas) + " data-parallel replicas of " +
                 std::to_string(batch / replicas)
           : std::string()) +
      (options.shuffleSeed
           ? ", shuffled with seed " + std::to_string(*options.shuffleSeed)
           : "") +
      ")");
  // The model state this rank holds between steps (ZeRO shards it), the
  // largest over the ranks: what the plan report's memory breakdown
  // predicts as parameters and optimizer_states.
  double held[2] = {0, 0};
  for (const ArgumentDesc &arg : args)
    if (arg.kind == ArgumentKind::Parameter ||
        arg.kind == ArgumentKind::OptimizerState)
      held[arg.kind == ArgumentKind::Parameter ? 0 : 1] +=
          static_cast<double>(byteSize(arg.dtype, arg.shape, arg.name));
  hostComm.maxOverWorld(held, 2);
  progress.message("autopar-run: model state per rank (the largest): "
                   "parameters " +
                   std::to_string(static_cast<int64_t>(held[0])) +
                   " B, optimizer states " +
                   std::to_string(static_cast<int64_t>(held[1])) + " B");

  Restored start;
  if (options.resume)
    start = resume(session, hostComm, options, data, progress);
  else if (options.checkpointDir &&
           std::filesystem::exists(*options.checkpointDir + "/latest"))
    // Not an error: starting over on purpose is legitimate, but easily a
    // forgotten --resume, and this run's checkpoints will replace latest.
    progress.message("autopar-run: note: " + *options.checkpointDir +
                     " already has checkpoints; this run starts from step 0 "
                     "(add --resume to continue from " +
                     *options.checkpointDir + "/latest)");
  if (start.step >= options.steps)
    progress.message("autopar-run: the checkpoint is at step " +
                     std::to_string(start.step) + ", --steps is " +
                     std::to_string(options.steps) + ": nothing to train");

  std::ofstream metrics;
  if (options.metricsPath && leader) {
    metrics.open(*options.metricsPath, std::ios::app);
    if (!metrics)
      throw Error("--metrics " + *options.metricsPath + ": cannot open");
  }
  std::vector<void *> inputBuffers;
  for (size_t index : data.inputs())
    inputBuffers.push_back(session.argumentData(index));

  std::optional<uint64_t> randomSeed;
  if (seedArg || (pipeline && pipeline->hasSeed())) {
    randomSeed = start.randomSeed.value_or(options.seed);
    if (seedArg)
      *static_cast<int64_t *>(session.argumentData(*seedArg)) =
          static_cast<int64_t>(*randomSeed);
    if (pipeline)
      pipeline->setSeed(static_cast<int64_t>(*randomSeed));
    progress.message("autopar-run: dropout masks from seed " +
                     std::to_string(*randomSeed));
  }

  using Clock = std::chrono::steady_clock;
  DataPosition position = start.position;
  int64_t savedStep = start.step;
  BackgroundSaver saver(hostComm, options, progress);
  // What the generated code's buffers held during the steps: the most any
  // micro-batch's forward kept for its backward, the most live above what
  // was live before the step (BufferAccounting.h).
  int64_t keptForBackward = 0, keptBuffers = 0, stepBufferPeak = 0,
          backwards = 0;
  for (int64_t s = start.step; s < options.steps; ++s) {
    data.fill(position, inputBuffers);
    *static_cast<int64_t *>(session.argumentData(step)) = s + 1;
    Clock::time_point begin = Clock::now();
    injectTestFault(hostComm, s + 1);
    if (pipeline)
      pipeline->runMicroBatches(comm);
    resetBufferPeaks();
    const int64_t liveBefore = bufferStats().live;
    session.runStep(comm);
    BufferStats buffers = bufferStats();
    if (buffers.keptForBackward > keptForBackward) {
      keptForBackward = buffers.keptForBackward;
      keptBuffers = buffers.buffersKeptForBackward;
    }
    stepBufferPeak = std::max(stepBufferPeak, buffers.peak - liveBefore);
    backwards += buffers.backwards;
    double seconds =
        std::chrono::duration<double>(Clock::now() - begin).count();
    float lossValue = *static_cast<const float *>(session.argumentData(loss));
    float lrValue = *static_cast<const float *>(session.argumentData(lr));
    float normValue =
        *static_cast<const float *>(session.argumentData(gradNorm));
    double samplesPerSecond = batch / seconds;
    std::ostringstream record;
    record.precision(9);
    // JSON has no inf or NaN (a skipped fp16 step's norm): null.
    auto number = [](float v) {
      std::ostringstream text;
      text.precision(9);
      if (std::isfinite(v))
        text << v;
      else
        text << "null";
      return text.str();
    };
    record << "{\"step\": " << s + 1 << ", \"loss\": " << number(lossValue)
           << ", \"lr\": " << lrValue
           << ", \"grad_norm\": " << number(normValue)
           << ", \"step_time_s\": " << seconds
           << ", \"samples_per_s\": " << samplesPerSecond;
    if (training.tokensPerSample > 0)
      record << ", \"tokens_per_s\": "
             << samplesPerSecond * training.tokensPerSample;
    float scaleValue = 0.0f;
    bool skipped = false;
    if (lossScale) {
      scaleValue =
          *static_cast<const float *>(session.argumentData(*lossScale));
      skipped =
          *static_cast<const float *>(session.argumentData(*overflow)) != 0.0f;
      record << ", \"loss_scale\": " << scaleValue
             << ", \"skipped\": " << (skipped ? "true" : "false");
    }
    record << "}";
    if (metrics.is_open())
      metrics << record.str() << "\n" << std::flush;
    progress.step(s + 1, lossValue, lrValue, normValue, seconds,
                  samplesPerSecond);
    if (skipped) {
      // The program left every parameter and state as it was (fp16
      // overflow), as DeepSpeed's loss scaler does; at the smallest scale
      // that cannot help, and DeepSpeed stops.
      if (scaleValue <= *training.minLossScale) {
        progress.finish();
        throw Error("step " + std::to_string(s + 1) +
                    ": the fp16 gradients overflow at the minimum loss "
                    "scale (" +
                    std::to_string(*training.minLossScale) +
                    "); lower the learning rate, clip the gradients, lower "
                    "fp16.min_loss_scale, or train in bf16");
      }
      std::ostringstream line;
      line << "step " << s + 1 << ": fp16 gradients overflowed at loss scale "
           << scaleValue << "; step skipped";
      progress.message(line.str());
    } else if (!std::isfinite(lossValue) || !std::isfinite(normValue)) {
      progress.finish();
      throw Error("step " + std::to_string(s + 1) + ": the " +
                  (std::isfinite(lossValue) ? "gradient norm" : "loss") +
                  " is not finite; lower the learning rate or clip the "
                  "gradients (gradient_clipping)");
    }
    for (auto [update, target] : updates)
      session.swapArguments(update, target);
    position = data.next(position);
    saver.poll(s + 1);
    if (options.checkpointDir && options.checkpointEvery > 0 &&
        (s + 1) % options.checkpointEvery == 0) {
      saver.save(session, checkpointInfo(session, options, data, s + 1,
                                         position, randomSeed));
      savedStep = s + 1;
    }
    bool last = s + 1 == options.steps;
    if ((evaluator || pipelineEvaluator) &&
        (last || (options.evalEvery > 0 && (s + 1) % options.evalEvery == 0))) {
      double evalLoss = evaluator ? evaluator->run(comm, hostComm)
                                  : pipelineEvaluator->run(comm, hostComm);
      int64_t evalBatches =
          evaluator ? evaluator->batches() : pipelineEvaluator->batches();
      std::ostringstream line;
      line.precision(6);
      line << std::fixed << "eval after step " << s + 1 << ": loss " << evalLoss
           << " over " << evalBatches << " batches";
      progress.message(line.str());
      if (metrics.is_open()) {
        std::ostringstream record;
        record.precision(9);
        record << "{\"step\": " << s + 1 << ", \"eval_loss\": " << evalLoss
               << ", \"eval_batches\": " << evalBatches << "}";
        metrics << record.str() << "\n" << std::flush;
      }
    }
  }
  // At the end, unless the last step was just saved (or none was taken).
  if (options.checkpointDir && savedStep < options.steps &&
      start.step < options.steps)
    saver.save(session, checkpointInfo(session, options, data, options.steps,
                                       position, randomSeed));
  saver.complete();
  progress.finish();
  const int64_t taken = std::max<int64_t>(0, options.steps - start.step);
  if (!pipeline && backwards > 0) {
    // The activations a step without pipeline stages kept between a
    // micro-batch's forward and its backward, which the plan report
    // predicts (memory_breakdown_bytes.activations); the most over ranks.
    double measured[3] = {static_cast<double>(keptForBackward),
                          static_cast<double>(keptBuffers),
                          static_cast<double>(stepBufferPeak)};
    hostComm.maxOverWorld(measured, 3);
    if (leader)
      std::printf("autopar-run: activations kept for the backward: %lld B "
                  "per micro-batch in %lld buffers (the step's buffers "
                  "peaked at %lld B)\n",
                  static_cast<long long>(measured[0]),
                  static_cast<long long>(measured[1]),
                  static_cast<long long>(measured[2]));
  }
  if (pipeline && taken > 0) {
    // The activations each stage kept between a micro-batch's forward and
    // its backward (its residuals, times the micro-batches in flight at
    // once), which the plan report predicts per stage.
    // With virtual stages the chunks' residuals differ in size: the peak
    // of what the stage held, and the chunk micro-batches in flight then.
    const int64_t stages = session.getManifest().pipeline->stages;
    std::vector<double> kept(static_cast<size_t>(3 * stages), 0.0);
    size_t k = static_cast<size_t>(comm.scopeRank(CommScope::PP));
    kept[3 * k] = static_cast<double>(pipeline->residualBytesPerMicroBatch());
    kept[3 * k + 1] = static_cast<double>(pipeline->peakMicroBatchesInFlight());
    kept[3 * k + 2] = static_cast<double>(pipeline->peakResidualBytes());
    hostComm.maxOverWorld(kept.data(), static_cast<int>(kept.size()));
    if (leader) {
      std::string line = "autopar-run: activations kept per stage:";
      for (int64_t stage = 0; stage < stages; ++stage) {
        double perMicroBatch = kept[3 * stage], inFlight = kept[3 * stage + 1];
        line += (stage ? ", stage " : " stage ") + std::to_string(stage) + " " +
                std::to_string(static_cast<int64_t>(kept[3 * stage + 2])) +
                " B (";
        if (pipeline->chunkCount() == 1)
          line += std::to_string(static_cast<int64_t>(perMicroBatch)) +
                  " B per micro-batch x " +
                  std::to_string(static_cast<int64_t>(inFlight)) +
                  " in flight)";
        else
          line += std::to_string(static_cast<int64_t>(perMicroBatch)) +
                  " B per micro-batch over its " +
                  std::to_string(pipeline->chunkCount()) + " chunks, at most " +
                  std::to_string(static_cast<int64_t>(inFlight)) +
                  " chunk micro-batches in flight)";
      }
      std::printf("%s\n", line.c_str());
    }
  }
  if (DeviceBackend *device = session.device(); device && taken > 0) {
    // What the step needed of the GPU's memory, which the plan report
    // predicts as memory_per_gpu_bytes: the caching allocator's high-water
    // mark, and what it took from the driver to serve it.
    // Beyond the allocator's blocks, the device holds the CUDA context and
    // the libraries' workspaces (the plan's "other"): what the driver says
    // is in use less what the allocator holds, which it has not given back.
    double used = static_cast<double>(device->deviceBytesUsed());
    double reserved = static_cast<double>(device->peakBytesReserved());
    double peaks[3] = {static_cast<double>(device->peakBytesInUse()), reserved,
                       used > reserved ? used - reserved : 0.0};
    hostComm.maxOverWorld(peaks, 3);
    if (leader)
      std::printf("autopar-run: device memory: peak %.1f MiB in use, %.1f MiB "
                  "allocated from the driver, %.1f MiB more in use on the "
                  "device (the CUDA context, libraries, other processes); "
                  "most of any rank\n",
                  peaks[0] / (1 << 20), peaks[1] / (1 << 20),
                  peaks[2] / (1 << 20));
  }

  // The parameters' whole values on the first rank (ZeRO-3's are blocks).
  std::map<size_t, std::vector<char>> wholes;
  if ((options.saveOnnx || options.outputsDir) && !pipeline)
    for (size_t i = 0; i < args.size(); ++i)
      if (args[i].kind == ArgumentKind::Parameter)
        wholes[i] = wholeParameter(session, hostComm, i);
  if ((options.saveOnnx || options.outputsDir) && pipeline) {
    // Every stage's parameters, whole, on the first rank.
    std::vector<PipelineParameter> parameters =
        gatherPipelineParameters(session, comm, hostComm);
    if (!leader)
      return taken;
    if (options.saveOnnx) {
      std::vector<OnnxInitializer> tensors;
      for (const PipelineParameter &p : parameters)
        if (p.updated)
          tensors.push_back({p.name, p.dtype, p.shape, p.bytes.data()});
      writeOnnxWithInitializers(training.inferenceTemplate, tensors,
                                *options.saveOnnx);
      std::printf("autopar-run: wrote the trained model to %s\n",
                  options.saveOnnx->c_str());
    }
    if (options.outputsDir) {
      for (const PipelineParameter &p : parameters)
        writeNpy(*options.outputsDir + "/" + tensorFileName(p.name), p.dtype,
                 p.shape, p.bytes.data());
      std::printf("autopar-run: wrote the trained parameters to %s\n",
                  options.outputsDir->c_str());
    }
    return taken;
  }
  if (!leader)
    return taken;
  auto globalShape = [&](size_t i) {
    return args[i].split ? args[i].globalShape : args[i].shape;
  };
  if (options.saveOnnx) {
    // The trained model: the template plus every parameter training
    // updated (trainable ones and BatchNorm's running statistics).
    std::vector<OnnxInitializer> tensors;
    for (auto [update, target] : updates)
      if (args[target].kind == ArgumentKind::Parameter)
        tensors.push_back({args[target].name, args[target].dtype,
                           globalShape(target), wholes[target].data()});
    writeOnnxWithInitializers(training.inferenceTemplate, tensors,
                              *options.saveOnnx);
    std::printf("autopar-run: wrote the trained model to %s\n",
                options.saveOnnx->c_str());
  }
  if (options.outputsDir) {
    for (size_t i = 0; i < args.size(); ++i)
      if (args[i].kind == ArgumentKind::Parameter)
        writeNpy(*options.outputsDir + "/" + tensorFileName(args[i].name),
                 args[i].dtype, globalShape(i), wholes[i].data());
    std::printf("autopar-run: wrote the trained parameters to %s\n",
                options.outputsDir->c_str());
  }
  return taken;
}

} // namespace autopar::runtime
