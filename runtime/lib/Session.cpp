//===- Session.cpp - One rank's loaded artifact ---------------------------===//

#include "autopar/runtime/Session.h"

#include "autopar/runtime/CpuProgram.h"
#include "autopar/runtime/Error.h"
#include "autopar/runtime/TensorFiles.h"

#include <filesystem>
#include <map>

namespace fs = std::filesystem;

namespace autopar::runtime {

namespace {

std::string resolve(const std::string &artifactDir, const std::string &file) {
  fs::path path(file);
  return path.is_absolute() ? file : (fs::path(artifactDir) / path).string();
}

/// Refuses a world the artifact was not compiled for. Every rank runs this
/// check on its own, so every rank reports the mismatch.
void checkWorld(const Manifest &manifest, const WorldInfo &world) {
  if (world.size != manifest.worldSize) {
    std::string started =
        world.source == "no launcher"
            ? "autopar-run was started as a single process without a launcher"
            : "the launcher started " + std::to_string(world.size) +
                  " process" + (world.size == 1 ? "" : "es") + " (from " +
                  world.source + ")";
    throw Error("the artifact was compiled for world_size " +
                std::to_string(manifest.worldSize) + " (" + manifest.path +
                "), but " + started + "; launch it with mpirun -np " +
                std::to_string(manifest.worldSize) + " or srun -n " +
                std::to_string(manifest.worldSize));
  }
  if (manifest.worldSize > 1)
    throw Error("the artifact needs " + std::to_string(manifest.worldSize) +
                " ranks, but this autopar-run runs single-rank artifacts only "
                "(multi-rank execution over MPI is not implemented yet)");
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

void createDirectory(const std::string &dir) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (error || !fs::is_directory(dir))
    throw Error("cannot create directory " + dir + ": " +
                (error ? error.message() : "a file is in the way"));
}

} // namespace

Session::Session(Manifest manifest, std::string artifactDir, WorldInfo world)
    : manifest(std::move(manifest)), artifactDir(std::move(artifactDir)),
      world(std::move(world)), weights(this->artifactDir) {}

std::unique_ptr<Session> Session::open(const std::string &artifactDir,
                                       const WorldInfo &world) {
  if (!fs::is_directory(artifactDir))
    throw Error(
        "artifact directory " + artifactDir +
        (fs::exists(artifactDir) ? " is not a directory" : " does not exist"));
  Manifest manifest =
      readManifest((fs::path(artifactDir) / "manifest.json").string());
  checkWorld(manifest, world);
  checkFileNames(manifest, ArgumentKind::Input);
  checkFileNames(manifest, ArgumentKind::Output);

  std::unique_ptr<Session> session(
      new Session(std::move(manifest), artifactDir, world));
  const ProgramDesc &program = session->manifest.programForRank(world.rank);
  session->program =
      CpuProgram::load(resolve(artifactDir, program.library), program.entry);

  const std::vector<ArgumentDesc> &arguments = session->manifest.arguments;
  session->buffers.resize(arguments.size());
  for (size_t i = 0; i < arguments.size(); ++i) {
    const ArgumentDesc &arg = arguments[i];
    if (arg.kind == ArgumentKind::Parameter) {
      session->args.push_back(session->weights.get(arg));
      continue;
    }
    std::string what =
        std::string(argumentKindName(arg.kind)) + " '" + arg.name + "'";
    session->buffers[i] =
        HostBuffer(static_cast<size_t>(byteSize(arg.dtype, arg.shape, what)));
    session->args.push_back(session->buffers[i].data());
  }
  return session;
}

void Session::readInputs(const std::string &dir) {
  if (!fs::is_directory(dir))
    throw Error("inputs directory " + dir + " does not exist");
  for (size_t i = 0; i < manifest.arguments.size(); ++i) {
    const ArgumentDesc &arg = manifest.arguments[i];
    if (arg.kind != ArgumentKind::Input)
      continue;
    std::string path = (fs::path(dir) / tensorFileName(arg.name)).string();
    if (!fs::exists(path))
      throw Error("input '" + arg.name + "': missing file " + path +
                  " (--inputs needs one .npy file per graph input)");
    readTensorFile(path, arg, args[i]);
  }
}

void Session::randomizeInputs(uint64_t seed, const RandomInputPolicy &policy) {
  for (size_t i = 0; i < manifest.arguments.size(); ++i) {
    const ArgumentDesc &arg = manifest.arguments[i];
    if (arg.kind == ArgumentKind::Input)
      fillRandom(arg.dtype, numElements(arg.shape, arg.name), args[i], seed,
                 arg.name, policy);
  }
}

void Session::writeTensors(ArgumentKind kind, const std::string &dir) const {
  createDirectory(dir);
  for (size_t i = 0; i < manifest.arguments.size(); ++i) {
    const ArgumentDesc &arg = manifest.arguments[i];
    if (arg.kind == kind)
      writeTensorFile((fs::path(dir) / tensorFileName(arg.name)).string(), arg,
                      args[i]);
  }
}

void Session::writeInputs(const std::string &dir) const {
  writeTensors(ArgumentKind::Input, dir);
}

void Session::writeOutputs(const std::string &dir) const {
  writeTensors(ArgumentKind::Output, dir);
}

void Session::runStep() { program->run(args.data()); }

} // namespace autopar::runtime
