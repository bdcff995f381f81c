//===- Session.h - One rank's loaded artifact -------------------*- C++ -*-===//
//
// A Session is everything one rank needs to run steps of an artifact: the
// manifest, the rank's program, its parameters (mapped), and host buffers for
// the graph inputs and outputs (and a pipeline stage's activations), bound
// into the entry's argument array.
//
// On a GPU target (manifest "target": cuda) it also holds the rank's
// DeviceBackend: parameters are uploaded once (converted to their dtype if
// their source_dtype differs), the entry's arguments are device buffers
// (activations live only there), and each step copies the inputs (every
// micro-batch) to the device and, after the stream is done, the outputs back
// to the host buffers, unless the caller keeps them on the device until it
// needs them (copyOutputsToHost).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_SESSION_H
#define AUTOPAR_RUNTIME_SESSION_H

#include "autopar/runtime/Communicator.h"
#include "autopar/runtime/DeviceBackend.h"
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
  /// `rankShape`: every micro-batch) and its activations. Checks \p world
  /// against the manifest first (checkWorldSize). On a GPU target, first
  /// loads the device backend (\p node picks the rank's GPU), then uploads
  /// the parameters and allocates device buffers for every argument. Throws
  /// Error on any problem.
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
  /// it, over \p comm's pp axis. \p comm's buffers are the entry's: host
  /// memory on the CPU, the device's on a GPU (the communicator of
  /// DeviceBackend::createCommunicator). On a GPU the step also copies the
  /// inputs in first and waits for the device; with \p copyOutputs it then
  /// copies the outputs out. Without, they stay on the device until
  /// copyOutputsToHost(): an inference benchmark whose outputs are large
  /// (a language model's logits) would otherwise time the PCIe copy.
  void runStep(Communicator &comm, bool copyOutputs = true);

  /// On a GPU, copies every output from the device to its host buffer (after
  /// the last runStep's work, which runStep waited for). Nothing on a CPU.
  void copyOutputsToHost();

  /// The host buffer of getArguments()[index]: the rank's block of an input
  /// or output, every micro-batch (see Distribution.h for moving whole
  /// tensors in and out). Null for an activation on a GPU.
  void *argumentData(size_t index) const { return hostData[index]; }
  /// Training (CPU): arguments \p a and \p b trade buffers, so that an
  /// update's result is the next step's parameter or optimizer state.
  void swapArguments(size_t a, size_t b);
  /// CPU: getArguments()[index] reads \p data (of its size, owned by the
  /// caller: another session's parameter) from the next step on.
  void bindArgument(size_t index, void *data);
  /// The index in getArguments() of this rank's \p kind named \p name.
  std::optional<size_t> findArgument(ArgumentKind kind,
                                     const std::string &name) const;

private:
  Session(Manifest manifest, std::string artifactDir, WorldInfo world);
  void bindHostArguments();
  void bindDeviceArguments();
  /// Points args at micro-batch \p microBatch of the inputs and outputs.
  void selectMicroBatch(int64_t microBatch);
  /// Sends or receives (\p kind) the stage's activations over \p comm.
  void exchangeActivations(Communicator &comm, ArgumentKind kind);

  Manifest manifest;
  std::string artifactDir;
  WorldInfo world;
  /// First, so that it outlives the program and the device buffers.
  std::unique_ptr<DeviceBackend> deviceBackend;
  const ProgramDesc *programDesc = nullptr;
  std::unique_ptr<Program> program;
  WeightMap weights;
  /// Host buffers of inputs and outputs (and of activations on the CPU), and
  /// parameters converted from their source_dtype on the host; other
  /// parameters live in `weights`.
  std::vector<HostBuffer> buffers;
  /// Per argument: its host memory (null for an activation on a GPU).
  std::vector<void *> hostData;
  /// Per argument: where the entry's data starts (device buffers on a GPU,
  /// else hostData).
  std::vector<void *> bases;
  /// Bytes of one micro-batch of each input and output of a pipeline with
  /// several micro-batches; 0 for the others.
  std::vector<size_t> microBatchBytes;
  /// The entry's argument array: `bases`, with inputs and outputs moved to
  /// the current micro-batch.
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
