//===- Session.h - One rank's loaded artifact -------------------*- C++ -*-===//
//
// A Session is everything one rank needs to run steps of an artifact: the
// manifest, the rank's program, its parameters (mapped), and host buffers for
// the graph inputs and outputs (and a pipeline stage's activations), bound
// into the entry's argument array.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_SESSION_H
#define AUTOPAR_RUNTIME_SESSION_H

#include "autopar/runtime/Communicator.h"
#include "autopar/runtime/HostBuffer.h"
#include "autopar/runtime/Manifest.h"
#include "autopar/runtime/Program.h"
#include "autopar/runtime/WeightMap.h"
#include "autopar/runtime/World.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace autopar::runtime {

/// A loaded artifact, ready to run steps on this rank.
class Session {
public:
  /// Reads ARTIFACT/manifest.json (after checking that ARTIFACT is a
  /// directory). Throws Error.
  static Manifest readArtifactManifest(const std::string &artifactDir);

  /// Loads this rank's program, maps its parameters (only those it takes)
  /// and allocates (zeroed) buffers for its inputs and outputs (of their
  /// `rankShape`: every micro-batch) and its activations. Checks
  /// \p world against the manifest first (checkWorldSize). Throws Error on
  /// any problem.
  static std::unique_ptr<Session> open(Manifest manifest,
                                       const std::string &artifactDir,
                                       const WorldInfo &world);
  /// readArtifactManifest, then the above.
  static std::unique_ptr<Session> open(const std::string &artifactDir,
                                       const WorldInfo &world);

  const Manifest &getManifest() const { return manifest; }
  const WorldInfo &getWorld() const { return world; }
  /// The program this rank runs.
  const ProgramDesc &getProgram() const { return *programDesc; }
  /// Its arguments, in call order.
  const std::vector<ArgumentDesc> &getArguments() const {
    return programDesc->arguments;
  }

  /// Runs one step: the entry point once per step of this rank's pipeline
  /// schedule (once without a pipeline), on micro-batch m's block of the
  /// inputs and outputs, receiving the stage's activations from the
  /// previous stage before each call and sending on the next stage's after
  /// it, over \p comm's pp axis.
  void runStep(Communicator &comm);

  /// The buffer of getArguments()[index]: the rank's block of an input or
  /// output, every micro-batch (see Distribution.h for moving whole tensors
  /// in and out).
  void *argumentData(size_t index) const { return bases[index]; }
  /// The index in getArguments() of this rank's \p kind named \p name.
  std::optional<size_t> findArgument(ArgumentKind kind,
                                     const std::string &name) const;

private:
  Session(Manifest manifest, std::string artifactDir, WorldInfo world);

  Manifest manifest;
  std::string artifactDir;
  WorldInfo world;
  const ProgramDesc *programDesc = nullptr;
  std::unique_ptr<Program> program;
  WeightMap weights;
  /// Buffers of inputs, outputs and activations; parameters live in
  /// `weights`.
  std::vector<HostBuffer> buffers;
  /// Where each argument's data starts.
  std::vector<void *> bases;
  /// Bytes of one micro-batch of each input and output; 0 for the others.
  std::vector<size_t> microBatchBytes;
  /// The entry's argument array: one pointer per argument, moved to the
  /// current micro-batch.
  std::vector<void *> args;
  std::vector<PipelineStep> schedule;
};

/// Refuses a world the artifact was not compiled for: throws Error, saying
/// how to launch it, unless \p world has the manifest's world_size. Every
/// rank runs this check on its own (before MPI is initialized), so every rank
/// reports a mismatch.
void checkWorldSize(const Manifest &manifest, const WorldInfo &world);

} // namespace autopar::runtime

#endif // AUTOPAR_RUNTIME_SESSION_H
