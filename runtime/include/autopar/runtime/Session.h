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
#include "autopar/runtime/RandomInputs.h"
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
  /// Reads ARTIFACT/manifest.json, checks that \p world matches the artifact's
  /// world_size, loads this rank's program, maps its parameters and allocates
  /// (zeroed) input and output buffers. Throws Error on any problem.
  static std::unique_ptr<Session> open(const std::string &artifactDir,
                                       const WorldInfo &world);

  const Manifest &getManifest() const { return manifest; }
  const WorldInfo &getWorld() const { return world; }

  /// Reads every graph input from DIR/<input name>.npy.
  void readInputs(const std::string &dir);
  /// Fills every graph input with reproducible random values.
  void randomizeInputs(uint64_t seed, const RandomInputPolicy &policy = {});
  /// Writes every graph input to DIR/<input name>.npy; creates DIR.
  void writeInputs(const std::string &dir) const;
  /// Writes every graph output to DIR/<output name>.npy; creates DIR.
  void writeOutputs(const std::string &dir) const;

  /// Runs the entry point once.
  void runStep();

  /// The buffer bound to arguments[index] (for tests and tools).
  void *argumentData(size_t index) const { return args[index]; }

private:
  Session(Manifest manifest, std::string artifactDir, WorldInfo world);
  void writeTensors(ArgumentKind kind, const std::string &dir) const;

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

} // namespace autopar::runtime

#endif // AUTOPAR_RUNTIME_SESSION_H
