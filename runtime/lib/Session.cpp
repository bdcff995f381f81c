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
  for (const ArgumentDesc &arg : manifest.arguments) {
    if (arg.kind != kind)
      continue;
    auto [it, inserted] = owners.emplace(tensorFileName(arg.name), arg.name);
    if (!inserted)
      throw Error(manifest.path + ": " + std::string(argumentKindName(kind)) +
                  "s '" + it->second + "' and '" + arg.name +
                  "' would both be stored as " + it->first);
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
              std::to_string(manifest.worldSize));
}

Session::Session(Manifest manifest, std::string artifactDir, WorldInfo world)
    : manifest(std::move(manifest)), artifactDir(std::move(artifactDir)),
      world(std::move(world)), weights(this->artifactDir) {}

Session::~Session() {
  if (!deviceBackend)
    return;
  try {
    for (size_t i = 0; i < args.size(); ++i)
      if (args[i])
        deviceBackend->free(args[i]);
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
  if (session->manifest.target.kind == TargetKind::Cuda) {
    // Before the program library: its constructors load its GPU modules,
    // which needs the device's context.
    DeviceBackendConfig config;
    config.worldRank = world.rank;
    config.worldSize = world.size;
    config.node = node;
    config.target = session->manifest.target;
    session->deviceBackend = loadDeviceBackend(config, session->manifest.path);
  }
  const ProgramDesc &program = session->manifest.programForRank(world.rank);
  session->program =
      CpuProgram::load(resolve(artifactDir, program.library), program.entry);
  if (DeviceBackend *device = session->deviceBackend.get()) {
    device->checkProgramLoaded(program.name);
    session->program =
        std::make_unique<DeviceProgram>(std::move(session->program), *device);
    session->bindDeviceArguments();
  } else {
    session->bindHostArguments();
  }
  return session;
}

namespace {

std::string describe(const ArgumentDesc &arg) {
  return std::string(argumentKindName(arg.kind)) + " '" + arg.name + "'";
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

void Session::bindHostArguments() {
  const GridVector &coords =
      manifest.ranks[static_cast<size_t>(world.rank)].coords;
  buffers.resize(manifest.arguments.size());
  for (size_t i = 0; i < manifest.arguments.size(); ++i) {
    const ArgumentDesc &arg = manifest.arguments[i];
    size_t bytes =
        static_cast<size_t>(byteSize(arg.dtype, arg.shape, describe(arg)));
    if (arg.kind != ArgumentKind::Parameter) {
      buffers[i] = HostBuffer(bytes);
      hostArgs.push_back(buffers[i].data());
    } else if (arg.sourceDType == arg.dtype) {
      hostArgs.push_back(weights.get(arg, coords));
    } else {
      const void *source = weights.get(asStored(arg), coords);
      buffers[i] = HostBuffer(bytes);
      char *converted = static_cast<char *>(buffers[i].data());
      convertInPieces(source, numElements(arg.shape, arg.name), arg.dtype,
                      [&](const void *piece, size_t offset, size_t length) {
                        std::memcpy(converted + offset, piece, length);
                      });
      hostArgs.push_back(converted);
    }
  }
  args = hostArgs;
}

void Session::bindDeviceArguments() {
  const GridVector &coords =
      manifest.ranks[static_cast<size_t>(world.rank)].coords;
  DeviceBackend &device = *deviceBackend;
  buffers.resize(manifest.arguments.size());
  args.assign(manifest.arguments.size(), nullptr);
  for (size_t i = 0; i < manifest.arguments.size(); ++i) {
    const ArgumentDesc &arg = manifest.arguments[i];
    size_t bytes =
        static_cast<size_t>(byteSize(arg.dtype, arg.shape, describe(arg)));
    args[i] = device.allocate(bytes, describe(arg));
    if (arg.kind != ArgumentKind::Parameter) {
      // Inputs and outputs keep a host copy: Distribution fills and reads
      // it, runStep moves it.
      buffers[i] = HostBuffer(bytes);
      hostArgs.push_back(buffers[i].data());
      continue;
    }
    // Only this rank's block, uploaded once.
    void *source = weights.get(asStored(arg), coords);
    hostArgs.push_back(source);
    char *target = static_cast<char *>(args[i]);
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

void Session::runStep() {
  if (!deviceBackend) {
    program->run(args.data());
    return;
  }
  const std::vector<ArgumentDesc> &arguments = manifest.arguments;
  for (size_t i = 0; i < arguments.size(); ++i)
    if (arguments[i].kind == ArgumentKind::Input)
      deviceBackend->copyToDevice(args[i], hostArgs[i], buffers[i].size());
  program->run(args.data()); // Waits for the device.
  for (size_t i = 0; i < arguments.size(); ++i)
    if (arguments[i].kind == ArgumentKind::Output)
      deviceBackend->copyToHost(hostArgs[i], args[i], buffers[i].size());
}

} // namespace autopar::runtime
