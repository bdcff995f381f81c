//===- Session.h - One rank's loaded artifact -------------------*- C++ -*-===//
//
// A Session is everything one rank needs to run steps of an artifact: the
// manifest, the rank's program, its parameters (mapped), and host buffers for
// the graph inputs and outputs, bound into the entry's argument array.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_SESSION_H
#define AUTOPAR_RUNTIME_SESSION_H

#include "autopar/runtime/HostBuffer.h"
#include "autopar/runtime/Manifest.h"
#include "autopar/runtime/Program.h"
#include "autopar/runtime/WeightMap.h"
#include "autopar/runtime/World.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace autopar::runtime {

/// A loaded artifact, ready to run steps on this rank.
class Session {
public:
  /// Reads ARTIFACT/manifest.json (after checking that ARTIFACT is a
  /// directory). Throws Error.
  static Manifest readArtifactManifest(const std::string &artifactDir);

  /// Loads this rank's program, maps its parameters and allocates (zeroed)
  /// buffers for its inputs and outputs (of their per-rank `shape`). Checks
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

  /// Runs the entry point once.
  void runStep();

  /// The buffer bound to arguments[index]: the rank's block of an input or
  /// output (see Distribution.h for moving whole tensors in and out).
  void *argumentData(size_t index) const { return args[index]; }

private:
  Session(Manifest manifest, std::string artifactDir, WorldInfo world);

  Manifest manifest;
  std::string artifactDir;
  WorldInfo world;
  std::unique_ptr<Program> program;
  WeightMap weights;
  /// Buffers of inputs and outputs; parameters live in `weights`.
  std::vector<HostBuffer> buffers;
  /// The entry's argument array: one pointer per manifest argument.
  std::vector<void *> args;
};

/// Refuses a world the artifact was not compiled for: throws Error, saying
/// how to launch it, unless \p world has the manifest's world_size. Every
/// rank runs this check on its own (before MPI is initialized), so every rank
/// reports a mismatch.
void checkWorldSize(const Manifest &manifest, const WorldInfo &world);

} // namespace autopar::runtime

#endif // AUTOPAR_RUNTIME_SESSION_H
