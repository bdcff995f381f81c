//===- autopar-run.cpp - Execute an autopar artifact ----------------------===//
//
// autopar-run ARTIFACT_DIR [--inputs DIR] [--outputs DIR] [--steps N]
//                          [--seed N] [--timeout SECONDS] [--comm-stats]
//                          [--comm-stats-json FILE]
//
// Started once per rank by mpirun / srun, or alone for a single rank. The
// user-facing contract is docs INTERFACES.md ("autopar-run"); the artifact
// format is docs/design/artifact.md.
//
// Order of events: MPI is initialized (more than one rank only); each rank
// loads its part of the artifact, checking the launcher's world size against
// the manifest, and the ranks agree on the outcome, so a mismatch or a bad
// file is reported by every rank that sees it and all exit cleanly rather
// than racing an MPI_Abort (loadOnEveryRank). From there on any error ends
// every rank through MPI_Abort.
//
//===----------------------------------------------------------------------===//

#include "autopar/runtime/Communicator.h"
#include "autopar/runtime/CpuBlas.h"
#include "autopar/runtime/CrashReport.h"
#include "autopar/runtime/DeviceBackend.h"
#include "autopar/runtime/Distribution.h"
#include "autopar/runtime/Error.h"
#include "autopar/runtime/Fatal.h"
#include "autopar/runtime/MpiCommunicator.h"
#include "autopar/runtime/Session.h"
#include "autopar/runtime/Training.h"
#include "autopar/runtime/Watchdog.h"
#include "autopar/runtime/World.h"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <malloc.h>
#include <new>
#include <optional>
#include <string>
#include <unistd.h>
#include <vector>

using namespace autopar::runtime;

namespace {

const char *const Usage =
    R"(usage: autopar-run ARTIFACT_DIR [--inputs DIR] [--outputs DIR] [--steps N] [--seed N]
                   [--timeout SECONDS] [--threads N] [--comm-stats]
       autopar-run ARTIFACT_DIR --train --data DIR --steps N [--metrics FILE.jsonl]
                   [--outputs DIR] [--save-onnx FILE] [--shuffle SEED] [--seed N]
                   [--eval-data DIR [--eval-every K]]
                   [--checkpoint-dir D [--checkpoint-every K] [--keep-checkpoints K]
                   [--checkpoint-block-bytes N] [--resume]]

Runs an artifact written by autopar-compile. Launch one process per rank with
mpirun or srun, or a single process for a single-rank artifact; the number of
processes must equal the artifact's world_size.

options:
  --inputs DIR    read each graph input from DIR/<input name>.npy; dtype and
                  shape must match the artifact's global tensor exactly
                  (bfloat16 as uint16); rank 0 reads, every rank gets its block
  --outputs DIR   rank 0 writes each graph output to DIR/<output name>.npy
                  (DIR is created); random inputs are written there as well
  --steps N       run N steps (default 1), printing the time of each (the
                  slowest rank's)
  --seed N        seed of the random inputs (default 0); with --train, of
                  the dropout masks (a resumed run keeps its checkpoint's)
  --timeout S     end every rank with an error if a step, or a collective
                  outside the steps, takes longer than S seconds (default:
                  $AUTOPAR_TIMEOUT_S, else 300 with more than one rank and
                  none with one; 0 disables it)
  --threads N     CPU threads of each rank: OpenBLAS's GEMMs, the
                  convolution and attention kernels, the larger generated
                  loops;
                  default: OPENBLAS_NUM_THREADS or OMP_NUM_THREADS if set,
                  else the node's cores divided among its ranks, at least 1
  --comm-stats    print calls, bus bytes and seconds of the collectives, per
                  grid axis and operation
  --comm-stats-json FILE
                  rank 0 also writes those figures (maxima over the ranks,
                  all steps together) to FILE as JSON:
                  {"steps": N, "collectives": {axis: {op: {"calls",
                  "bus_bytes", "seconds"}}}}, the shape of the plan report's
                  "predicted_collectives"
  -h, --help      print this help

training (an artifact compiled with --mode train; one CPU or GPU rank so far):
  --train         train: each step runs the compiled training step (forward,
                  backward, optimizer) on the next global batch of the data
  --data DIR      one DIR/<input name>.npy per data input, dim 0 = samples,
                  memory-mapped; step s takes samples [s*B, (s+1)*B) of the
                  epoch's order (B = the global batch), an epoch's last
                  incomplete batch is dropped
  --steps N       train up to step N (after --resume: from the checkpoint's
                  step to N)
  --metrics FILE  append one JSON object per step: step, loss, lr,
                  grad_norm, step_time_s, samples_per_s (tokens_per_s for
                  sequence models)
  --outputs DIR   write the trained parameters to DIR/<name>.npy
  --eval-data DIR held-out data (the --data layout): after the last step, and
                  every --eval-every K steps, the mean loss of its full
                  batches with Dropout off and BatchNorm on its running
                  statistics, printed and appended to --metrics as
                  {"step", "eval_loss", "eval_batches"}
  --eval-every K  also evaluate every K steps
  --save-onnx FILE
                  at the end, write the trained model as an inference ONNX
                  model (the input model with Dropout off, BatchNorm on its
                  trained running statistics, the trained initializers; same
                  node and tensor names) that onnxruntime runs
  --shuffle SEED  visit each epoch's samples in a permutation drawn from SEED
                  and the epoch (SplitMix64 + Fisher-Yates; python/autopar/
                  data.py computes the same order)
  --checkpoint-dir D
                  write checkpoints to D/step-NNNNNNNN/ (at the end, and every
                  --checkpoint-every K steps); D/latest names the newest
  --checkpoint-every K
                  also write one every K steps
  --keep-checkpoints K
                  delete all but the newest K checkpoints (never the one
                  D/latest names)
  --checkpoint-block-bytes N
                  checksum each chunk larger than N bytes in blocks of N
                  (default 1048576, at least 64), so that a plan that holds
                  part of a chunk reads only the blocks that hold its part
  --resume        start from D/latest: parameters, optimizer state, step and
                  data position (from step 0 if there is no checkpoint yet);
                  --metrics is appended to

Without --inputs, inputs are drawn at random, reproducibly from the seed and
the input's name: floating-point values uniform in [-1, 1), integers uniform
in [0, 10) (so that token ids and labels stay in range), bools 0 or 1.
A '/' in a tensor name becomes '_' in its file name.

GPU artifacts (manifest target "cuda") run one rank per GPU (local rank
modulo the node's GPUs) through libautopar_cuda.so, from ../lib beside this
program or $AUTOPAR_CUDA_RUNTIME; step times include copying the inputs in
and the outputs out. Their collectives, and a pipeline's activations (which
stay on the GPU), use NCCL, or MPI through host memory when ranks share a GPU;
AUTOPAR_COLLECTIVES=nccl or =mpi forces one.
)";

/// The watchdog's timeout with more than one rank, unless set.
constexpr double DefaultTimeoutSeconds = 300;

struct Options {
  std::string artifactDir;
  std::optional<std::string> inputsDir;
  std::optional<std::string> outputsDir;
  int64_t steps = 1;
  uint64_t seed = 0;
  bool seedGiven = false;
  /// From --timeout or AUTOPAR_TIMEOUT_S.
  std::optional<double> timeoutSeconds;
  /// --threads: CPU threads per rank (configureCpuThreads).
  std::optional<int64_t> threads;
  bool commStats = false;
  std::optional<std::string> commStatsJson;
  bool help = false;
  /// --train, --data, --metrics.
  bool train = false;
  std::optional<std::string> dataDir;
  std::optional<std::string> metricsPath;
  std::optional<std::string> saveOnnx;
  std::optional<std::string> evalDataDir;
  int64_t evalEvery = 0;
  /// --shuffle, --checkpoint-dir, --checkpoint-every, --keep-checkpoints,
  /// --resume.
  std::optional<uint64_t> shuffleSeed;
  std::optional<std::string> checkpointDir;
  int64_t checkpointEvery = 0;
  int64_t keepCheckpoints = 0;
  std::optional<uint64_t> checkpointBlockBytes;
  bool resume = false;
};

/// A number of seconds: a non-negative decimal number.
double parseSeconds(const std::string &source, const std::string &text) {
  size_t used = 0;
  double value = -1;
  bool ok =
      !text.empty() && ((text[0] >= '0' && text[0] <= '9') || text[0] == '.');
  if (ok) {
    try {
      value = std::stod(text, &used);
    } catch (...) {
      ok = false;
    }
  }
  if (!ok || used != text.size() || !(value >= 0) || value > 1e9)
    throw Error(source +
                " expects a number of seconds (0 disables the "
                "timeout), got '" +
                text + "'");
  return value;
}

uint64_t parseNumber(const std::string &option, const std::string &text,
                     uint64_t minimum) {
  size_t used = 0;
  unsigned long long value = 0;
  bool ok = !text.empty() && text[0] >= '0' && text[0] <= '9';
  if (ok) {
    try {
      value = std::stoull(text, &used);
    } catch (...) {
      ok = false;
    }
  }
  if (!ok || used != text.size() || value < minimum)
    throw Error(option + " expects an integer of at least " +
                std::to_string(minimum) + ", got '" + text + "'");
  return value;
}

Options parseOptions(int argc, char **argv) {
  Options options;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      options.help = true;
      return options;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      positional.push_back(arg);
      continue;
    }
    if (arg == "--comm-stats") {
      options.commStats = true;
      continue;
    }
    if (arg == "--train") {
      options.train = true;
      continue;
    }
    if (arg == "--resume") {
      options.resume = true;
      continue;
    }
    // Accept both "--steps 3" and "--steps=3".
    std::string name = arg, value;
    bool hasValue = false;
    if (size_t equals = arg.find('='); equals != std::string::npos) {
      name = arg.substr(0, equals);
      value = arg.substr(equals + 1);
      hasValue = true;
    }
    if (name != "--inputs" && name != "--outputs" && name != "--steps" &&
        name != "--seed" && name != "--timeout" &&
        name != "--comm-stats-json" && name != "--data" &&
        name != "--metrics" && name != "--shuffle" &&
        name != "--checkpoint-dir" && name != "--checkpoint-every" &&
        name != "--keep-checkpoints" && name != "--checkpoint-block-bytes" &&
        name != "--save-onnx" && name != "--eval-data" &&
        name != "--eval-every" && name != "--threads")
      throw Error("unknown option '" + arg + "' (see --help)");
    if (!hasValue) {
      if (i + 1 >= argc)
        throw Error(name + " expects a value (see --help)");
      value = argv[++i];
    }
    if (name == "--inputs")
      options.inputsDir = value;
    else if (name == "--outputs")
      options.outputsDir = value;
    else if (name == "--steps")
      options.steps = static_cast<int64_t>(parseNumber(name, value, 1));
    else if (name == "--timeout")
      options.timeoutSeconds = parseSeconds(name, value);
    else if (name == "--threads") {
      options.threads = static_cast<int64_t>(parseNumber(name, value, 1));
      if (*options.threads > 1024)
        throw Error("--threads expects at most 1024, got '" + value + "'");
    } else if (name == "--comm-stats-json")
      options.commStatsJson = value;
    else if (name == "--data")
      options.dataDir = value;
    else if (name == "--metrics")
      options.metricsPath = value;
    else if (name == "--save-onnx")
      options.saveOnnx = value;
    else if (name == "--eval-data")
      options.evalDataDir = value;
    else if (name == "--eval-every")
      options.evalEvery = static_cast<int64_t>(parseNumber(name, value, 1));
    else if (name == "--shuffle")
      options.shuffleSeed = parseNumber(name, value, 0);
    else if (name == "--checkpoint-dir")
      options.checkpointDir = value;
    else if (name == "--checkpoint-every")
      options.checkpointEvery =
          static_cast<int64_t>(parseNumber(name, value, 1));
    else if (name == "--keep-checkpoints")
      options.keepCheckpoints =
          static_cast<int64_t>(parseNumber(name, value, 1));
    else if (name == "--checkpoint-block-bytes")
      options.checkpointBlockBytes = parseNumber(name, value, 64);
    else {
      options.seed = parseNumber(name, value, 0);
      options.seedGiven = true;
    }
  }
  if (positional.empty())
    throw Error("missing ARTIFACT_DIR (see --help)");
  if (options.train && !options.dataDir)
    throw Error("--train needs --data DIR (one <input name>.npy per data "
                "input)");
  if (!options.train) {
    const char *trainingOnly = options.dataDir           ? "--data"
                               : options.metricsPath     ? "--metrics"
                               : options.shuffleSeed     ? "--shuffle"
                               : options.checkpointDir   ? "--checkpoint-dir"
                               : options.checkpointEvery ? "--checkpoint-every"
                               : options.keepCheckpoints ? "--keep-checkpoints"
                               : options.checkpointBlockBytes
                                   ? "--checkpoint-block-bytes"
                               : options.resume      ? "--resume"
                               : options.saveOnnx    ? "--save-onnx"
                               : options.evalDataDir ? "--eval-data"
                                                     : nullptr;
    if (trainingOnly)
      throw Error(std::string(trainingOnly) + " needs --train");
  }
  if (!options.checkpointDir &&
      (options.checkpointEvery || options.keepCheckpoints || options.resume ||
       options.checkpointBlockBytes))
    throw Error(std::string(options.resume            ? "--resume"
                            : options.checkpointEvery ? "--checkpoint-every"
                            : options.keepCheckpoints
                                ? "--keep-checkpoints"
                                : "--checkpoint-block-bytes") +
                " needs --checkpoint-dir D");
  if (options.evalEvery && !options.evalDataDir)
    throw Error("--eval-every needs --eval-data DIR");
  if (options.train && options.inputsDir)
    throw Error("--train reads its batches from --data, not --inputs");
  if (positional.size() > 1)
    throw Error("expected one ARTIFACT_DIR, got '" + positional[0] + "' and '" +
                positional[1] + "' (see --help)");
  options.artifactDir = positional[0];
  if (!options.timeoutSeconds)
    if (const char *env = std::getenv("AUTOPAR_TIMEOUT_S"))
      options.timeoutSeconds = parseSeconds("AUTOPAR_TIMEOUT_S", env);
  return options;
}

/// Restarts autopar-run with OPENBLAS_CORETYPE set when OpenBLAS did not
/// recognize the CPU and chose kernels several times slower than it has (see
/// CpuBlas.h). OpenBLAS reads the variable only when it is loaded, before
/// main, hence a fresh process. A user's own OPENBLAS_CORETYPE is left alone,
/// which also ends the recursion. If exec fails, the run goes on as it is.
void useFasterBlasKernels(char **argv) {
  if (std::getenv("OPENBLAS_CORETYPE"))
    return;
  std::optional<std::string> core = preferredOpenBlasCoreType();
  if (!core)
    return;
  setenv("OPENBLAS_CORETYPE", core->c_str(), 1);
  std::fflush(nullptr);
  execv("/proc/self/exe", argv);
}

std::string describeGrid(const Manifest &manifest) {
  const GridVector &g = manifest.grid;
  return "dp " + std::to_string(g[0]) + " x tp " + std::to_string(g[1]) +
         " x pp " + std::to_string(g[2]);
}

void printThroughput(double totalMs, double firstMs, int64_t steps) {
  double meanMs = totalMs / static_cast<double>(steps);
  std::printf("throughput: %.3f steps/s (mean %.3f ms over %lld steps",
              meanMs > 0 ? 1000.0 / meanMs : 0.0, meanMs,
              static_cast<long long>(steps));
  if (steps > 1) {
    // The first step also pays for page faults on the mapped weights.
    double steadyMs = (totalMs - firstMs) / static_cast<double>(steps - 1);
    std::printf("; %.3f steps/s after the first",
                steadyMs > 0 ? 1000.0 / steadyMs : 0.0);
  }
  std::printf(")\n");
}

/// Prints the --comm-stats table and writes --comm-stats-json on rank 0:
/// each number is the maximum over the ranks. On a GPU, the program's
/// collectives and the pipeline's sends and receives (the grid axes) are
/// counted by \p programComm, and the runtime's own distribution of inputs
/// and outputs (world) by \p hostComm.
void reportCommStats(Communicator &hostComm, Communicator &programComm,
                     bool leader, const Options &options, int64_t steps) {
  programComm.settleStats();
  CommStats stats = programComm.getStats();
  if (&programComm != &hostComm)
    stats[static_cast<size_t>(CommScope::World)] =
        hostComm.getStats()[static_cast<size_t>(CommScope::World)];
  double values[NumCommStatValues];
  flattenCommStats(stats, values);
  hostComm.maxOverWorld(values, NumCommStatValues);
  if (!leader)
    return;
  stats = unflattenCommStats(values);
  if (options.commStats)
    std::fputs(formatCommStats(stats).c_str(), stdout);
  if (options.commStatsJson) {
    std::FILE *file = std::fopen(options.commStatsJson->c_str(), "w");
    if (!file)
      throw Error("cannot write --comm-stats-json " + *options.commStatsJson +
                  ": " + std::strerror(errno));
    std::string json = formatCommStatsJson(stats, steps);
    bool ok = std::fwrite(json.data(), 1, json.size(), file) == json.size();
    ok &= std::fclose(file) == 0;
    if (!ok)
      throw Error("cannot write --comm-stats-json " + *options.commStatsJson);
  }
}

/// "12.5 MiB", or "640 KiB" below a MiB.
std::string formatMemory(double bytes) {
  char text[32];
  if (bytes < (1 << 20))
    std::snprintf(text, sizeof(text), "%.0f KiB", bytes / 1024);
  else
    std::snprintf(text, sizeof(text), "%.1f MiB", bytes / (1 << 20));
  return text;
}

/// Prints the device memory the run needed at most, over all ranks.
void printDeviceMemory(DeviceBackend &device, Communicator &comm, bool leader) {
  // What the driver says is in use beyond the allocator's blocks: the CUDA
  // context and the libraries' workspaces (the plan's "other").
  double used = static_cast<double>(device.deviceBytesUsed());
  double reserved = static_cast<double>(device.peakBytesReserved());
  double peaks[3] = {static_cast<double>(device.peakBytesInUse()), reserved,
                     used > reserved ? used - reserved : 0.0};
  comm.maxOverWorld(peaks, 3);
  if (leader)
    std::printf("device memory: peak %s in use, %s allocated from the driver, "
                "%s more in use on the device (the CUDA context, libraries, "
                "other processes); most of any rank\n",
                formatMemory(peaks[0]).c_str(), formatMemory(peaks[1]).c_str(),
                formatMemory(peaks[2]).c_str());
}

/// The communicator of the program's collectives and of a pipeline's sends
/// and receives of activations: on a GPU, the device's (NCCL, or MPI staged
/// through the host); null on the CPU, where it is \p hostComm itself.
/// Collective.
std::unique_ptr<Communicator>
programCommunicator(Session &session, Communicator &hostComm, Watchdog *dog) {
  DeviceBackend *device = session.device();
  if (!device)
    return nullptr;
  Watchdog::Scope scope(dog, "creating the device communicators",
                        /*waiting=*/true);
  return device->createCommunicator(hostComm);
}

/// The watchdog the options ask for, or null.
std::unique_ptr<Watchdog> makeWatchdog(const Options &options,
                                       const WorldInfo &world) {
  double timeout = options.timeoutSeconds.value_or(
      world.size > 1 ? DefaultTimeoutSeconds : 0.0);
  if (timeout <= 0)
    return nullptr;
  return std::make_unique<Watchdog>(timeout);
}

/// Distributes the inputs (over \p comm, host memory), runs the steps (the
/// program's collectives and the pipeline's activations on \p programComm,
/// device memory on a GPU), collects the outputs.
void runSession(const Options &options, const WorldInfo &world,
                Session &session, Communicator &comm, Communicator &programComm,
                Watchdog *dog) {
  comm.setWatchdog(dog);
  programComm.setWatchdog(dog);
  setActiveCommunicator(&programComm);
  const Manifest &loaded = session.getManifest();
  DeviceBackend *device = session.device();
  bool leader = world.rank == 0;
  if (leader) {
    std::printf("autopar-run: %s: world_size %lld", options.artifactDir.c_str(),
                static_cast<long long>(loaded.worldSize));
    if (world.size > 1)
      std::printf(" (%s)", describeGrid(loaded).c_str());
    std::printf(", program '%s' (%s)\n",
                loaded.programForRank(world.rank).name.c_str(),
                device ? device->describe().c_str() : describeBlas().c_str());
    if (device)
      std::printf("autopar-run: collectives: %s; step times include copying "
                  "the inputs to the GPU, not the outputs back (once, at the "
                  "end)\n",
                  device->describeCommunicator().c_str());
    if (const std::optional<PipelineDesc> &pipeline = loaded.pipeline)
      std::printf(
          "autopar-run: pipeline of %lld stages, %lld micro-batches of %lld "
          "per step, %s schedule%s (%s)\n",
          static_cast<long long>(pipeline->stages),
          static_cast<long long>(pipeline->microBatches),
          static_cast<long long>(pipeline->microBatchSize),
          std::string(scheduleKindName(pipeline->schedule)).c_str(),
          pipeline->virtualStages > 1
              ? (" interleaved over " +
                 std::to_string(pipeline->virtualStages) +
                 " model chunks per stage")
                    .c_str()
              : "",
          loaded.isPipelineTraining()
              ? "forward and backward per micro-batch, then each stage's "
                "update"
              : "forward only");
  }

  if (options.train != bool(loaded.training))
    throw Error(options.train
                    ? "--train: " + options.artifactDir +
                          " is an inference artifact; compile the model with "
                          "autopar-compile --mode train"
                    : options.artifactDir +
                          " is a training artifact: run it with --train "
                          "--data DIR --steps N");
  if (options.train) {
    TrainOptions train;
    train.dataDir = *options.dataDir;
    train.steps = options.steps;
    train.metricsPath = options.metricsPath;
    train.outputsDir = options.outputsDir;
    train.shuffleSeed = options.shuffleSeed;
    train.checkpointDir = options.checkpointDir;
    train.checkpointEvery = options.checkpointEvery;
    train.keepCheckpoints = options.keepCheckpoints;
    if (options.checkpointBlockBytes)
      train.checkpointBlockBytes = *options.checkpointBlockBytes;
    train.resume = options.resume;
    train.seed = options.seed;
    train.saveOnnx = options.saveOnnx;
    train.evalDataDir = options.evalDataDir;
    train.evalEvery = options.evalEvery;
    train.seedGiven = options.seedGiven;
    if (train.outputsDir)
      std::filesystem::create_directories(*train.outputsDir);
    int64_t taken = runTraining(session, programComm, comm, train);
    if (options.commStats || options.commStatsJson)
      reportCommStats(comm, programComm, leader, options, taken);
    std::fflush(stdout);
    setActiveCommunicator(nullptr);
    programComm.setWatchdog(nullptr);
    comm.setWatchdog(nullptr);
    return;
  }

  InputSource source;
  source.dir = options.inputsDir;
  source.seed = options.seed;
  if (!options.inputsDir) {
    source.writeRandomTo = options.outputsDir;
    if (leader)
      std::printf("autopar-run: random inputs (seed %llu)\n",
                  static_cast<unsigned long long>(options.seed));
  }
  distributeInputs(session, comm, dog, source);

  const ProgramDesc &program = loaded.programForRank(world.rank);
  installCrashReport("program '" + program.name + "' (" + program.library +
                     ")");
  // A program with training-mode Dropout (compiled for inference, e.g. to
  // check it) reads the seed and the step: --seed, and the step's number.
  std::optional<size_t> seedArg =
      session.findArgument(ArgumentKind::Seed, "seed");
  std::optional<size_t> stepArg =
      session.findArgument(ArgumentKind::Step, "step");
  if (seedArg)
    *static_cast<int64_t *>(session.argumentData(*seedArg)) =
        static_cast<int64_t>(options.seed);
  using Clock = std::chrono::steady_clock;
  double totalMs = 0, firstMs = 0;
  for (int64_t step = 1; step <= options.steps; ++step) {
    setCrashReportStep(step);
    if (stepArg)
      *static_cast<int64_t *>(session.argumentData(*stepArg)) = step;
    std::string name = "step " + std::to_string(step);
    double ms = 0;
    {
      Watchdog::Scope scope(dog, name);
      Clock::time_point start = Clock::now();
      // The outputs stay on a GPU until they are written (below).
      session.runStep(programComm, /*copyOutputs=*/false);
      ms = std::chrono::duration<double, std::milli>(Clock::now() - start)
               .count();
    }
    if (world.size > 1) {
      // A step takes as long as its slowest rank.
      Watchdog::Scope scope(dog, "timing of " + name,
                            /*waiting=*/true);
      comm.maxOverWorld(&ms, 1);
    }
    totalMs += ms;
    if (step == 1)
      firstMs = ms;
    if (leader) {
      std::printf("step %lld/%lld: %.3f ms", static_cast<long long>(step),
                  static_cast<long long>(options.steps), ms);
      if (world.size > 1)
        std::printf(" (slowest of %lld ranks)",
                    static_cast<long long>(world.size));
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  removeCrashReport();
  if (leader)
    printThroughput(totalMs, firstMs, options.steps);

  if (options.outputsDir) {
    session.copyOutputsToHost();
    collectOutputs(session, comm, dog, *options.outputsDir);
    if (leader)
      std::printf("autopar-run: wrote outputs to %s\n",
                  options.outputsDir->c_str());
  }
  if (device) {
    Watchdog::Scope scope(dog, "collecting the device memory peaks",
                          /*waiting=*/true);
    printDeviceMemory(*device, comm, leader);
  }
  if (options.commStats || options.commStatsJson) {
    Watchdog::Scope scope(dog, "collecting --comm-stats", /*waiting=*/true);
    reportCommStats(comm, programComm, leader, options, options.steps);
  }
  std::fflush(stdout);
  setActiveCommunicator(nullptr);
  programComm.setWatchdog(nullptr);
  comm.setWatchdog(nullptr);
}

/// Loading failed on some rank, and every rank knows it.
struct LoadFailed : Error {
  using Error::Error;
};

/// Loads this rank's part of the artifact. Under MPI, the ranks then agree:
/// if any failed, each failed rank reports its own error, rank 0 names the
/// failed ranks, and all exit with status 1 after MPI_Finalize, so that
/// every message gets out (an MPI_Abort would race them).
std::unique_ptr<Session> loadOnEveryRank(const Options &options,
                                         const WorldInfo &world,
                                         const NodePlacement &node,
                                         const MpiEnvironment &mpi,
                                         Watchdog *dog) {
  Watchdog::Scope loading(dog, "loading the artifact");
  std::unique_ptr<Session> session;
  std::string error;
  try {
    Manifest manifest = Session::readArtifactManifest(options.artifactDir);
    session =
        Session::open(std::move(manifest), options.artifactDir, world, node);
  } catch (const std::bad_alloc &) {
    error = "out of memory";
  } catch (const std::exception &failure) {
    error = failure.what();
  }
  std::vector<int64_t> failed;
  {
    Watchdog::Scope scope(dog, "the check that every rank loaded it",
                          /*waiting=*/true);
    failed = mpi.ranksWhere(!error.empty());
  }
  if (failed.empty())
    return session;
  if (!error.empty())
    throw LoadFailed(error);
  if (world.rank == 0) {
    std::string list;
    for (size_t i = 0; i < failed.size() && i < 8; ++i)
      list += (i ? ", " : "") + std::to_string(failed[i]);
    if (failed.size() > 8)
      list += ", ...";
    throw LoadFailed("stopping: " + std::to_string(failed.size()) + " rank" +
                     (failed.size() == 1 ? "" : "s") + " (" + list +
                     ") failed to load the artifact (see their messages)");
  }
  throw LoadFailed(""); // Quiet: rank 0 and the failed ranks have spoken.
}

int run(const Options &options) {
  WorldInfo world = detectWorld();
  if (world.size == 1) {
    configureCpuThreads(options.threads, /*ranksOnNode=*/1);
    std::unique_ptr<Watchdog> dog = makeWatchdog(options, world);
    LocalCommunicator comm;
    std::unique_ptr<Session> session =
        Session::open(options.artifactDir, world);
    std::unique_ptr<Communicator> programComm =
        programCommunicator(*session, comm, dog.get());
    runSession(options, world, *session, comm,
               programComm ? *programComm : comm, dog.get());
    programComm.reset(); // Before the session's device goes.
    return 0;
  }

  setErrorRank(world.rank);
  MpiEnvironment mpi(world);
  // Which GPU this rank takes: the launcher's local rank if it says, else
  // the rank's place among the ranks of its node (MPI_COMM_TYPE_SHARED).
  NodePlacement node = mpi.nodePlacement();
  configureCpuThreads(options.threads, node.localSize);
  if (std::optional<NodePlacement> launcher = detectNodePlacement(
          [](const char *name) { return std::getenv(name); }))
    node = NodePlacement{launcher->localRank, node.localSize, launcher->source};
  // Objects destroyed in reverse order: the session and its program first,
  // then the communicator, then the watchdog; MPI last.
  std::unique_ptr<Watchdog> dog = makeWatchdog(options, world);
  std::unique_ptr<Session> session;
  try {
    session = loadOnEveryRank(options, world, node, mpi, dog.get());
  } catch (const LoadFailed &error) {
    // Every rank knows that loading failed: leave together, without abort.
    if (*error.what())
      std::fprintf(stderr, "%s%s\n", errorPrefix().c_str(), error.what());
    return 1;
  } catch (const std::exception &error) {
    fatalError(error.what()); // The agreement itself failed.
  }
  // From here on an error ends every rank at once (fatalError: MPI_Abort),
  // since the others may be waiting for this one in a collective. It must
  // not unwind past the MpiEnvironment, whose MPI_Finalize would wait for
  // them.
  try {
    const Manifest &manifest = session->getManifest();
    std::vector<GridVector> coords;
    for (const RankDesc &rank : manifest.ranks)
      coords.push_back(rank.coords);
    std::unique_ptr<MpiCommunicator> comm;
    {
      Watchdog::Scope scope(dog.get(), "creating the axis communicators",
                            /*waiting=*/true);
      comm = MpiCommunicator::create(manifest.grid, std::move(coords));
    }
    std::unique_ptr<Communicator> programComm =
        programCommunicator(*session, *comm, dog.get());
    runSession(options, world, *session, *comm,
               programComm ? *programComm : *comm, dog.get());
    // The device communicator before the session's device, the session
    // before MPI.
    programComm.reset();
    session.reset();
  } catch (const std::bad_alloc &) {
    fatalError("out of memory");
  } catch (const std::exception &error) {
    fatalError(error.what());
  }
  return 0;
}

} // namespace

/// Generated code allocates its temporaries with malloc and frees them every
/// step. glibc serves large blocks with mmap and returns them with munmap, so
/// each step would fault every page of every temporary in again (measured:
/// 6% of a small GPT's time). Keeping them on the heap reuses the pages.
static void keepTemporariesOnTheHeap() {
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

/// Reports an error that reached main. Once MPI is up, the other ranks may
/// be waiting for this one in a collective: end them all (MPI_Abort).
/// Before that, every rank reports on its own and exits with status 1.
static int fail(const std::string &message) {
  if (MpiEnvironment::isInitialized())
    fatalError(message);
  std::fflush(stdout);
  std::fprintf(stderr, "%s%s\n", errorPrefix().c_str(), message.c_str());
  return 1;
}

int main(int argc, char **argv) {
  keepTemporariesOnTheHeap();
  try {
    Options options = parseOptions(argc, argv);
    if (options.help) {
      std::fputs(Usage, stdout);
      return 0;
    }
    useFasterBlasKernels(argv);
    return run(options);
  } catch (const std::bad_alloc &) {
    return fail("out of memory");
  } catch (const std::exception &error) {
    return fail(error.what());
  } catch (...) {
    return fail("unknown failure");
  }
}
