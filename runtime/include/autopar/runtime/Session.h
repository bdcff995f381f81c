//===- Session.h - One rank's loaded artifact -------------------*- C++ -*-===//
//
// A Session is everything one rank needs to run steps of an artifact: the
// manifest, the rank's program, its parameters (mapped), and host buffers for
// the graph inputs and outputs, bound into the entry's argument array.
//
// On a GPU target (manifest "target": cuda) it also holds the rank's
// DeviceBackend: parameters are uploaded once (converted to their dtype if
// their source_dtype differs), the entry's arguments are device buffers, and
// each step copies the inputs to the device and, after the stream is done,
// the outputs back to the host buffers.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_SESSION_H
#define AUTOPAR_RUNTIME_SESSION_H

#include "autopar/runtime/DeviceBackend.h"
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
  /// \p world against the manifest first (checkWorldSize). On a GPU target,
  /// first loads the device backend (\p node picks the rank's GPU), then
  /// uploads the parameters. Throws Error on any problem.
  static std::unique_ptr<Session> open(Manifest manifest,
                                       const std::string &artifactDir,
                                       const WorldInfo &world,
                                       const NodePlacement &node = {});
  /// readArtifactManifest, then the above.
  static std::unique_ptr<Session> open(const std::string &artifactDir,
                                       const WorldInfo &world,
                                       const NodePlacement &node = {});
  ~Session();

  const Manifest &getManifest() const { return manifest; }
  const WorldInfo &getWorld() const { return world; }
  /// The rank's GPU; null on a CPU target.
  DeviceBackend *device() const { return deviceBackend.get(); }

  /// Runs the entry point once. On a GPU: copies the inputs in, runs, waits
  /// for the device and copies the outputs out.
  void runStep();

  /// The host buffer of arguments[index]: the rank's block of an input or
  /// output (see Distribution.h for moving whole tensors in and out).
  void *argumentData(size_t index) const { return hostArgs[index]; }

private:
  Session(Manifest manifest, std::string artifactDir, WorldInfo world);
  void bindHostArguments();
  void bindDeviceArguments();

  Manifest manifest;
  std::string artifactDir;
  WorldInfo world;
  /// First, so that it outlives the program and the device buffers.
  std::unique_ptr<DeviceBackend> deviceBackend;
  std::unique_ptr<Program> program;
  WeightMap weights;
  /// Buffers of inputs and outputs, and parameters converted from their
  /// source_dtype on the host; other parameters live in `weights`.
  std::vector<HostBuffer> buffers;
  /// Per argument: its host memory.
  std::vector<void *> hostArgs;
  /// The entry's argument array: one pointer per manifest argument (device
  /// buffers on a GPU, else hostArgs).
  std::vector<void *> args;
};

/// Refuses a world the artifact was not compiled for: throws Error, saying
/// how to launch it, unless \p world has the manifest's world_size. Every
/// rank runs this check on its own (before MPI is initialized), so every rank
/// reports a mismatch.
void checkWorldSize(const Manifest &manifest, const WorldInfo &world);

} // namespace autopar::runtime

#endif // AUTOPAR_RUNTIME_SESSION_H
