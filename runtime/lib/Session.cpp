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

Manifest Session::readArtifactManifest(const std::string &artifactDir) {
  if (!fs::is_directory(artifactDir))
    throw Error(
        "artifact directory " + artifactDir +
        (fs::exists(artifactDir) ? " is not a directory" : " does not exist"));
  return readManifest((fs::path(artifactDir) / "manifest.json").string());
}

std::unique_ptr<Session> Session::open(const std::string &artifactDir,
                                       const WorldInfo &world) {
  return open(readArtifactManifest(artifactDir), artifactDir, world);
}

std::unique_ptr<Session> Session::open(Manifest manifest,
                                       const std::string &artifactDir,
                                       const WorldInfo &world) {
  checkWorldSize(manifest, world);
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
      session->args.push_back(session->weights.get(
          arg,
          session->manifest.ranks[static_cast<size_t>(world.rank)].coords));
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

void Session::runStep() { program->run(args.data()); }

} // namespace autopar::runtime
