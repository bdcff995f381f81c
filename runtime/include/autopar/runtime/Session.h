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
  /// Like open, for a second program of the same GPU artifact (a training
  /// artifact's eval program) in this process: it runs on \p device, the
  /// device backend of the session opened first, which must outlive it (a
  /// process opens one CUDA device).
  static std::unique_ptr<Session> openOnDevice(Manifest manifest,
                                               const std::string &artifactDir,
                                               const WorldInfo &world,
                                               DeviceBackend &device);
  /// readArtifactManifest, then the above.
  static std::unique_ptr<Session> open(const std::string &artifactDir,
                                       const WorldInfo &world,
                                       const NodePlacement &node = {});
  ~Session();

  const Manifest &getManifest() const { return manifest; }
  const WorldInfo &getWorld() const { return world; }
  /// The rank's GPU; null on a CPU target.
  DeviceBackend *device() const { return deviceBackend; }
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

  /// Runs the entry once on the arguments as they are bound (bindArgument),
  /// without the micro-batch walk and the exchanges of runStep: a training
  /// pipeline's forward and backward, whose trainer (PipelineTraining.h)
  /// moves their data. CPU sessions only.
  void call();
  /// On a GPU, copies every output from the device to its host buffer (after
  /// the last runStep's work, which runStep waited for). Nothing on a CPU.
  void copyOutputsToHost();

  /// The host buffer of getArguments()[index]: the rank's block of an input
  /// or output, every micro-batch (see Distribution.h for moving whole
  /// tensors in and out), a step or seed, a metric. On a GPU, null for an
  /// activation, an update or an optimizer state (device only), and a
  /// parameter's is its source in the model file, not its trained value:
  /// use readArgument for those.
  void *argumentData(size_t index) const { return hostData[index]; }
  /// Training: arguments \p a and \p b trade buffers (device buffers on a
  /// GPU), so that an update's result is the next step's parameter or
  /// optimizer state.
  void swapArguments(size_t a, size_t b);
  /// Where the entry reads getArguments()[index]: device memory on a GPU,
  /// else the host memory of argumentData (the current buffer of a
  /// parameter or state that swapArguments moved).
  void *entryData(size_t index) const { return bases[index]; }
  /// getArguments()[index] reads \p data (of its size, owned by the caller:
  /// another session's entryData of a parameter; device memory on a GPU)
  /// from the next step on.
  void bindArgument(size_t index, void *data);
  /// Host memory holding the current value of getArguments()[index]. On the
  /// CPU that is entryData. On a GPU, parameters and optimizer states live
  /// on the device: they are copied into a host mirror of the session (the
  /// same one each time, refreshed by each call); inputs, outputs and
  /// metrics are their host buffers (runStep moves them).
  void *readArgument(size_t index);
  /// After the caller changed the memory readArgument(index) returned (a
  /// restored checkpoint), makes the entry read it: on a GPU, copies it to
  /// the device. Nothing to do on the CPU.
  void writeArgument(size_t index);
  /// The index in getArguments() of this rank's \p kind named \p name.
  std::optional<size_t> findArgument(ArgumentKind kind,
                                     const std::string &name) const;

private:
  Session(Manifest manifest, std::string artifactDir, WorldInfo world);
  /// Loads the program and binds its arguments, on deviceBackend if set.
  void load();
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
  std::unique_ptr<DeviceBackend> ownedDevice;
  /// ownedDevice, or the device of the session openOnDevice was given.
  DeviceBackend *deviceBackend = nullptr;
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
  /// GPU: per argument, whether its device buffer in `bases` is the
  /// session's to free (not one bindArgument gave it).
  std::vector<bool> ownsBase;
  /// GPU: host copies of parameters and optimizer states (readArgument).
  std::vector<HostBuffer> mirrors;
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
