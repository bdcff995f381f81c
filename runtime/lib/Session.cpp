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
  const Manifest &loaded = session->manifest;
  const ProgramDesc &program = loaded.programForRank(world.rank);
  session->programDesc = &program;
  session->program =
      CpuProgram::load(resolve(artifactDir, program.library), program.entry);

  const GridVector &coords =
      loaded.ranks[static_cast<size_t>(world.rank)].coords;
  const std::vector<ArgumentDesc> &arguments = program.arguments;
  session->buffers.resize(arguments.size());
  session->microBatchBytes.assign(arguments.size(), 0);
  for (size_t i = 0; i < arguments.size(); ++i) {
    const ArgumentDesc &arg = arguments[i];
    if (arg.kind == ArgumentKind::Parameter) {
      session->bases.push_back(session->weights.get(arg, coords));
      continue;
    }
    std::string what =
        std::string(argumentKindName(arg.kind)) + " '" + arg.name + "'";
    session->buffers[i] = HostBuffer(
        static_cast<size_t>(byteSize(arg.dtype, arg.rankShape, what)));
    session->bases.push_back(session->buffers[i].data());
    if (arg.rankShape != arg.shape)
      session->microBatchBytes[i] =
          static_cast<size_t>(byteSize(arg.dtype, arg.shape, what));
  }
  session->args = session->bases;
  // Inference: forward steps only, in which GPipe and 1F1B agree.
  if (const std::optional<PipelineDesc> &pipeline = loaded.pipeline)
    session->schedule =
        pipelineSchedule(pipeline->schedule, pipeline->stages, program.stage,
                         pipeline->microBatches, /*withBackward=*/false);
  else
    session->schedule = {PipelineStep{0, StepPhase::Forward}};
  return session;
}

std::optional<size_t> Session::findArgument(ArgumentKind kind,
                                            const std::string &name) const {
  const std::vector<ArgumentDesc> &arguments = getArguments();
  for (size_t i = 0; i < arguments.size(); ++i)
    if (arguments[i].kind == kind && arguments[i].name == name)
      return i;
  return std::nullopt;
}

void Session::runStep(Communicator &comm) {
  const std::vector<ArgumentDesc> &arguments = getArguments();
  auto exchange = [&](ArgumentKind kind) {
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
  };
  for (const PipelineStep &step : schedule) {
    for (size_t i = 0; i < args.size(); ++i)
      if (microBatchBytes[i])
        args[i] = static_cast<char *>(bases[i]) +
                  static_cast<size_t>(step.microBatch) * microBatchBytes[i];
    exchange(ArgumentKind::ActivationIn);
    program->run(args.data());
    exchange(ArgumentKind::ActivationOut);
  }
}

} // namespace autopar::runtime
