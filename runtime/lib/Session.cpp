//===- Session.cpp - One rank's loaded artifact ---------------------------===//

#include "autopar/runtime/Session.h"

#include "autopar/runtime/CpuProgram.h"
#include "autopar/runtime/DeviceProgram.h"
#include "autopar/runtime/Error.h"
#include "autopar/runtime/TensorFiles.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>

namespace fs = std::filesystem;

namespace autopar::runtime {

namespace {

std::string resolve(const std::string &artifactDir, const std::string &file) {
  fs::path path(file);
  return path.is_absolute() ? file : (fs::path(artifactDir) / path).string();
}

/// Two tensors of one kind must not share a file in --inputs / --outputs.
void checkFileNames(const Manifest &manifest, ArgumentKind kind) {
  std::map<std::string, std::string> owners;
  for (const ProgramDesc &program : manifest.programs)
    for (const ArgumentDesc &arg : program.arguments) {
      if (arg.kind != kind)
        continue;
      auto [it, inserted] = owners.emplace(tensorFileName(arg.name), arg.name);
      if (!inserted && it->second != arg.name)
        throw Error(manifest.path + ": " + std::string(argumentKindName(kind)) +
                    "s '" + it->second + "' and '" + arg.name +
                    "' would both be stored as " + it->first);
    }
}

std::string describe(const ArgumentDesc &arg) {
  return std::string(argumentKindName(arg.kind)) + " '" + arg.name + "'";
}

/// The bytes this rank holds of \p arg (its `rankShape`).
size_t rankBytes(const ArgumentDesc &arg) {
  return static_cast<size_t>(byteSize(arg.dtype, arg.rankShape, describe(arg)));
}

/// The bytes of one call's block of \p arg when it holds several
/// micro-batches (a pipeline's inputs and outputs), else 0.
size_t blockBytes(const ArgumentDesc &arg) {
  if (arg.rankShape == arg.shape)
    return 0;
  return static_cast<size_t>(byteSize(arg.dtype, arg.shape, describe(arg)));
}

/// \p arg as its source file holds it: its source_dtype.
ArgumentDesc asStored(const ArgumentDesc &arg) {
  ArgumentDesc stored = arg;
  stored.dtype = arg.sourceDType;
  return stored;
}

/// Passes \p count elements of \p source, converted from float32 to \p to,
/// to \p sink(bytes, byteOffset, byteCount) in pieces, so that a large
/// parameter never needs a whole converted copy on the host.
template <typename Sink>
void convertInPieces(const void *source, int64_t count, DType to, Sink sink) {
  constexpr int64_t Piece = int64_t(1) << 22;
  size_t size = dtypeSize(to);
  HostBuffer piece(static_cast<size_t>(std::min(count, Piece)) * size);
  const float *from = static_cast<const float *>(source);
  for (int64_t offset = 0; offset < count; offset += Piece) {
    int64_t length = std::min(Piece, count - offset);
    convertFromFloat32(from + offset, length, to, piece.data());
    sink(piece.data(), static_cast<size_t>(offset) * size,
         static_cast<size_t>(length) * size);
  }
}

} // namespace

void checkWorldSize(const Manifest &manifest, const WorldInfo &world) {
  if (world.size == manifest.worldSize)
    return;
  std::string started =
      world.source == "no launcher"
          ? "autopar-run was started as a single process without a launcher"
          : "the launcher started " + std::to_string(world.size) + " process" +
                (world.size == 1 ? "" : "es") + " (from " + world.source + ")";
  throw Error("the artifact was compiled for world_size " +
              std::to_string(manifest.worldSize) + " (" + manifest.path +
              "), but " + started + "; launch it with mpirun -np " +
              std::to_string(manifest.worldSize) + " or srun -n " +
              std::to_string(manifest.worldSize) + " --mpi=pmix");
}

Session::Session(Manifest manifest, std::string artifactDir, WorldInfo world)
    : manifest(std::move(manifest)), artifactDir(std::move(artifactDir)),
      world(std::move(world)), weights(this->artifactDir) {}

Session::~Session() {
  if (!deviceBackend)
    return;
  try {
    for (size_t i = 0; i < bases.size(); ++i)
      if (bases[i] && ownsBase[i])
        deviceBackend->free(bases[i]);
  } catch (const std::exception &) {
    // The device goes next, and its memory with it.
  }
}

Manifest Session::readArtifactManifest(const std::string &artifactDir) {
  if (!fs::is_directory(artifactDir))
    throw Error(
        "artifact directory " + artifactDir +
        (fs::exists(artifactDir) ? " is not a directory" : " does not exist"));
  return readManifest((fs::path(artifactDir) / "manifest.json").string());
}

std::unique_ptr<Session> Session::open(const std::string &artifactDir,
                                       const WorldInfo &world,
                                       const NodePlacement &node) {
  return open(readArtifactManifest(artifactDir), artifactDir, world, node);
}

std::unique_ptr<Session> Session::open(Manifest manifest,
                                       const std::string &artifactDir,
                                       const WorldInfo &world,
                                       const NodePlacement &node) {
  checkWorldSize(manifest, world);
  checkFileNames(manifest, ArgumentKind::Input);
  checkFileNames(manifest, ArgumentKind::Output);

  std::unique_ptr<Session> session(
      new Session(std::move(manifest), artifactDir, world));
  const Manifest &loaded = session->manifest;
  if (loaded.target.kind == TargetKind::Cuda) {
    // Before the program library: its constructors load its GPU modules,
    // which needs the device's context.
    DeviceBackendConfig config;
    config.worldRank = world.rank;
    config.worldSize = world.size;
    config.node = node;
    config.target = loaded.target;
    session->ownedDevice = loadDeviceBackend(config, loaded.path);
    session->deviceBackend = session->ownedDevice.get();
  }
  session->load();
  return session;
}

std::unique_ptr<Session> Session::openOnDevice(Manifest manifest,
                                               const std::string &artifactDir,
                                               const WorldInfo &world,
                                               DeviceBackend &device) {
  checkWorldSize(manifest, world);
  if (manifest.target.kind != TargetKind::Cuda)
    throw Error(manifest.path + ": a program of a CPU artifact cannot run on "
                                "the GPU of another session");
  std::unique_ptr<Session> session(
      new Session(std::move(manifest), artifactDir, world));
  session->deviceBackend = &device;
  session->load();
  return session;
}

void Session::load() {
  const ProgramDesc &program = manifest.programForRank(world.rank);
  programDesc = &program;
  this->program =
      CpuProgram::load(resolve(artifactDir, program.library), program.entry);
  if (DeviceBackend *device = deviceBackend) {
    device->checkProgramLoaded(program.name);
    this->program =
        std::make_unique<DeviceProgram>(std::move(this->program), *device);
    bindDeviceArguments();
  } else {
    bindHostArguments();
  }
  for (const ArgumentDesc &arg : program.arguments)
    microBatchBytes.push_back(blockBytes(arg));
  args = bases;
  // Inference: forward steps only, in which GPipe and 1F1B agree. A
  // training pipeline's step runs once (its trainer runs the micro-batches).
  const std::optional<PipelineDesc> &pipeline = manifest.pipeline;
  if (pipeline && !manifest.isPipelineTraining())
    schedule =
        pipelineSchedule(pipeline->schedule, pipeline->stages, program.stage,
                         pipeline->microBatches, /*withBackward=*/false);
  else
    schedule = {PipelineStep{0, StepPhase::Forward}};
}

void Session::bindHostArguments() {
  const GridVector &coords =
      manifest.ranks[static_cast<size_t>(world.rank)].coords;
  const std::vector<ArgumentDesc> &arguments = getArguments();
  buffers.resize(arguments.size());
  for (size_t i = 0; i < arguments.size(); ++i) {
    const ArgumentDesc &arg = arguments[i];
    size_t bytes = rankBytes(arg);
    if (arg.kind != ArgumentKind::Parameter) {
      buffers[i] = HostBuffer(bytes);
      hostData.push_back(buffers[i].data());
    } else if (arg.sourceDType == arg.dtype && !manifest.training) {
      hostData.push_back(weights.get(arg, coords, manifest.grid));
    } else if (arg.sourceDType == arg.dtype) {
      // Training updates parameters: each gets a writable copy (its update
      // buffer and it swap after every step).
      buffers[i] = HostBuffer(bytes);
      std::memcpy(buffers[i].data(), weights.get(arg, coords, manifest.grid),
                  bytes);
      hostData.push_back(buffers[i].data());
    } else {
      const void *source = weights.get(asStored(arg), coords, manifest.grid);
      buffers[i] = HostBuffer(bytes);
      char *converted = static_cast<char *>(buffers[i].data());
      convertInPieces(source, numElements(arg.shape, arg.name), arg.dtype,
                      [&](const void *piece, size_t offset, size_t length) {
                        std::memcpy(converted + offset, piece, length);
                      });
      hostData.push_back(converted);
    }
  }
  bases = hostData;
}

void Session::bindArgument(size_t index, void *data) {
  if (deviceBackend) {
    // The session's own buffer is no longer read; the bound one is the
    // caller's to free.
    if (bases[index] && ownsBase[index])
      deviceBackend->free(bases[index]);
    ownsBase[index] = false;
  } else {
    hostData[index] = data;
  }
  bases[index] = data;
  args[index] = data;
}

void Session::swapArguments(size_t a, size_t b) {
  // On a GPU the host side of a parameter or state is its source or its
  // mirror, which stay with the argument; the device buffers trade places.
  if (!deviceBackend)
    std::swap(hostData[a], hostData[b]);
  else
    std::vector<bool>::swap(ownsBase[a], ownsBase[b]);
  std::swap(bases[a], bases[b]);
  std::swap(args[a], args[b]);
}

/// Whether a GPU session keeps \p kind on the device only, with a host
/// mirror made on demand (readArgument).
static bool mirroredOnDevice(ArgumentKind kind) {
  return kind == ArgumentKind::Parameter ||
         kind == ArgumentKind::OptimizerState;
}

void *Session::readArgument(size_t index) {
  if (!deviceBackend)
    return hostData[index];
  const ArgumentDesc &arg = getArguments()[index];
  if (!mirroredOnDevice(arg.kind))
    return hostData[index];
  size_t bytes = rankBytes(arg);
  if (mirrors[index].size() != bytes)
    mirrors[index] = HostBuffer(bytes);
  deviceBackend->copyToHost(mirrors[index].data(), bases[index], bytes);
  return mirrors[index].data();
}

void Session::writeArgument(size_t index) {
  if (!deviceBackend)
    return;
  const ArgumentDesc &arg = getArguments()[index];
  if (!mirroredOnDevice(arg.kind) || mirrors[index].size() != rankBytes(arg))
    throw Error("internal error: writeArgument(" + describe(arg) +
                ") without its readArgument first");
  deviceBackend->copyToDevice(bases[index], mirrors[index].data(),
                              mirrors[index].size());
  deviceBackend->synchronize();
}

void Session::bindDeviceArguments() {
  const GridVector &coords =
      manifest.ranks[static_cast<size_t>(world.rank)].coords;
  DeviceBackend &device = *deviceBackend;
  const std::vector<ArgumentDesc> &arguments = getArguments();
  buffers.resize(arguments.size());
  mirrors.resize(arguments.size());
  hostData.assign(arguments.size(), nullptr);
  bases.assign(arguments.size(), nullptr);
  ownsBase.assign(arguments.size(), true);
  for (size_t i = 0; i < arguments.size(); ++i) {
    const ArgumentDesc &arg = arguments[i];
    size_t bytes = rankBytes(arg);
    // Zeroed: optimizer states start at zero, as on the CPU.
    bases[i] = device.allocate(bytes, describe(arg));
    // Activations only live on the device: the device communicator sends
    // and receives them there; so do a training step's updates and
    // optimizer states (readArgument copies them out when asked).
    if (arg.isActivation() || arg.kind == ArgumentKind::Update ||
        arg.kind == ArgumentKind::OptimizerState)
      continue;
    if (arg.kind != ArgumentKind::Parameter) {
      // Inputs and outputs keep a host copy (every micro-batch):
      // Distribution fills and reads it, runStep moves it; so do a
      // training step's step counter, seed and metrics.
      buffers[i] = HostBuffer(bytes);
      hostData[i] = buffers[i].data();
      continue;
    }
    // Only this rank's block, uploaded once.
    void *source = weights.get(asStored(arg), coords, manifest.grid);
    hostData[i] = source;
    char *target = static_cast<char *>(bases[i]);
    if (arg.sourceDType == arg.dtype)
      device.copyToDevice(target, source, bytes);
    else
      convertInPieces(source, numElements(arg.shape, arg.name), arg.dtype,
                      [&](const void *piece, size_t offset, size_t length) {
                        device.copyToDevice(target + offset, piece, length);
                      });
  }
  device.synchronize();
}

std::optional<size_t> Session::findArgument(ArgumentKind kind,
                                            const std::string &name) const {
  const std::vector<ArgumentDesc> &arguments = getArguments();
  for (size_t i = 0; i < arguments.size(); ++i)
    if (arguments[i].kind == kind && arguments[i].name == name)
      return i;
  return std::nullopt;
}

void Session::selectMicroBatch(int64_t microBatch) {
  for (size_t i = 0; i < args.size(); ++i)
    if (microBatchBytes[i])
      args[i] = static_cast<char *>(bases[i]) +
                static_cast<size_t>(microBatch) * microBatchBytes[i];
}

void Session::exchangeActivations(Communicator &comm, ArgumentKind kind) {
  const std::vector<ArgumentDesc> &arguments = getArguments();
  for (size_t i = 0; i < arguments.size(); ++i) {
    const ArgumentDesc &arg = arguments[i];
    if (arg.kind != kind)
      continue;
    int64_t count = numElements(arg.shape, arg.name);
    if (kind == ArgumentKind::ActivationIn)
      comm.recv(args[i], count, arg.dtype, arg.peerStage, CommScope::PP);
    else
      comm.send(args[i], count, arg.dtype, arg.peerStage, CommScope::PP);
  }
}

void Session::runStep(Communicator &comm, bool copyOutputs) {
  const std::vector<ArgumentDesc> &arguments = getArguments();
  if (deviceBackend) {
    if (comm.memory().isHost())
      throw Error("a GPU session's steps need a communicator of device "
                  "memory (DeviceBackend::createCommunicator)");
    for (size_t i = 0; i < arguments.size(); ++i)
      if (arguments[i].kind == ArgumentKind::Input ||
          arguments[i].kind == ArgumentKind::Step ||
          arguments[i].kind == ArgumentKind::Seed)
        deviceBackend->copyToDevice(bases[i], hostData[i], buffers[i].size());
  }
  for (const PipelineStep &step : schedule) {
    selectMicroBatch(step.microBatch);
    exchangeActivations(comm, ArgumentKind::ActivationIn);
    program->run(args.data()); // On a GPU, waits for the device.
    exchangeActivations(comm, ArgumentKind::ActivationOut);
  }
  if (!deviceBackend)
    return;
  // The last sends may still be queued on the stream.
  deviceBackend->synchronize();
  if (copyOutputs)
    copyOutputsToHost();
}

void Session::call() {
  if (deviceBackend)
    throw Error(manifest.path + ": a training pipeline's programs run on CPU "
                                "ranks so far");
  program->run(args.data());
}

void Session::copyOutputsToHost() {
  if (!deviceBackend)
    return;
  const std::vector<ArgumentDesc> &arguments = getArguments();
  for (size_t i = 0; i < arguments.size(); ++i)
    if (arguments[i].kind == ArgumentKind::Output ||
        arguments[i].kind == ArgumentKind::Metric)
      deviceBackend->copyToHost(hostData[i], bases[i], buffers[i].size());
}

} // namespace autopar::runtime
