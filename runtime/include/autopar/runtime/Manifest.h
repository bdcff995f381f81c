//===- Manifest.h - The artifact's manifest.json ----------------*- C++ -*-===//
//
// The manifest says what to run (programs), where (ranks) and with which
// arguments, in the entry point's call order. docs/design/artifact.md is the
// contract; this is its parser. Keys the contract names are required; unknown
// keys are ignored so that later compilers may add information.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_MANIFEST_H
#define AUTOPAR_RUNTIME_MANIFEST_H

#include "autopar/runtime/DType.h"
#include "autopar/runtime/Grid.h"
#include "autopar/runtime/PipelineSchedule.h"
#include "autopar/runtime/Tensor.h"
#include "autopar/runtime/TensorLayout.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace autopar::runtime {

/// The only manifest format version this runtime reads.
constexpr int64_t ManifestVersion = 1;

/// What an entry argument is. Activations pass between neighbouring pipeline
/// stages: one stage's `ActivationOut` is the next one's `ActivationIn`.
/// A training step (docs/design/training-artifact.md) adds optimizer
/// states, the step number, metrics and updates.
enum class ArgumentKind {
  Parameter,
  Input,
  Output,
  ActivationIn,
  ActivationOut,
  OptimizerState,
  Step,
  Seed,
  Metric,
  Update,
  /// Pipeline-parallel training (docs/design/training-artifact.md): the
  /// index of the micro-batch's first sample in the global batch (int64
  /// scalar; Dropout's masks), a forward value its stage's backward reads
  /// (kept per micro-batch), and a sum over the step's micro-batches.
  SampleOffset,
  Residual,
  Accumulator
};

/// "parameter", "input", "output", "activation_in" or "activation_out".
std::string_view argumentKindName(ArgumentKind kind);

/// Where a parameter's bytes are: a byte range of a file.
struct TensorSource {
  /// As written in the manifest: absolute, or relative to the artifact dir.
  std::string file;
  int64_t offset = 0;
  int64_t length = 0;
};

/// How a global tensor is cut among the ranks: into equal contiguous blocks
/// along dimension `dim`, one per coordinate of grid axis `axis`; a rank gets
/// the block of its coordinate on that axis.
struct SplitDesc {
  GridAxis axis = GridAxis::DP;
  int64_t dim = 0;
};

/// One argument of the entry point.
struct ArgumentDesc {
  ArgumentKind kind = ArgumentKind::Input;
  std::string name;
  DType dtype = DType::Float32;
  /// What the rank's program takes (per call).
  Shape shape;
  /// What the rank holds: `shape`, except for the inputs and outputs of a
  /// pipeline with several micro-batches, whose dim 0 holds `micro_batches`
  /// blocks of `shape`, one per call (micro-batch), in order.
  Shape rankShape;
  /// The whole tensor (what the user's .npy files and a parameter's source
  /// hold): `rankShape`, or with the split dimension multiplied by the size
  /// of the split axis.
  Shape globalShape;
  /// Present only for split tensors (inputs, outputs, and parameters of
  /// which each rank takes a block; their source holds `globalShape`).
  std::optional<SplitDesc> split;
  /// A second split, of `split`'s block (the manifest's "split" as a list
  /// of two): ZeRO's data-parallel blocks (dim 0) of a tensor-parallel block,
  /// PyTorch FSDP2's layout over TP. Only on parameters, optimizer states
  /// and their updates.
  std::optional<SplitDesc> innerSplit;
  /// Present exactly for parameters.
  std::optional<TensorSource> source;
  /// The element type of the parameter's source bytes (`source_dtype`;
  /// `dtype` when absent). float32 sources of float16/bfloat16 parameters are
  /// converted when loaded (GPU precision, docs/design/gpu-backend.md).
  DType sourceDType = DType::Float32;
  /// For activations: the pipeline stage it comes from or goes to.
  int64_t peerStage = -1;

  /// Training: whether a parameter is trained (`trainable`).
  bool trainable = false;
  /// Optimizer states: the role ("momentum", "exp_avg", "exp_avg_sq") and
  /// the parameter it belongs to (`of`).
  std::string role, of;
  /// Updates: the argument whose next value this result is (`updates`).
  std::string updates;
  /// The grid axes that cut this tensor (none, one or two).
  std::vector<GridAxis> splitAxes() const;
  /// The cuts that give the rank at \p coords its block of `globalShape`
  /// on \p grid (empty: it holds the whole).
  std::vector<BlockCut> cutsAt(const GridVector &grid,
                               const GridVector &coords) const;
  /// The box of `globalShape` the rank at \p coords holds.
  TensorBox boxAt(const GridVector &grid, const GridVector &coords) const;
  /// True if the rank at \p coords holds the copy of its block that is
  /// written or gathered: coordinate 0 on every axis of \p axes (those
  /// that replicate the tensor) that does not cut it.
  bool isFirstCopyAt(const GridVector &coords,
                     const std::vector<GridAxis> &axes) const;
  bool isActivation() const {
    return kind == ArgumentKind::ActivationIn ||
           kind == ArgumentKind::ActivationOut;
  }
};

/// One native program (a shared library and its entry symbol).
struct ProgramDesc {
  std::string name;
  /// Absolute, or relative to the artifact directory.
  std::string library;
  std::string entry;
  /// `device_code`: the program's device binaries (e.g.
  /// "device/stage0.sm_90.cubin"), for inspection only: the library embeds
  /// and loads them itself. Empty when absent.
  std::vector<std::string> deviceCode;
  /// Its entry's arguments in call order: the program's own "arguments", or
  /// the manifest's.
  std::vector<ArgumentDesc> arguments;
  /// The pipeline stage whose ranks run it: their pp coordinate (0 without
  /// a pipeline; -1 if no rank runs it).
  int64_t stage = 0;
  /// Pipeline-parallel training: "forward" or "backward" for the programs a
  /// stage runs once per micro-batch, "eval" for the one --eval-data runs
  /// once per held-out micro-batch (the `stage` key gives its stage; no
  /// rank runs it as its step); empty otherwise.
  std::string phase;
};

/// What kind of machine an artifact runs on.
enum class TargetKind { Cpu, Cuda };

/// "cpu" or "cuda".
std::string_view targetKindName(TargetKind kind);

/// The manifest's `target` (absent: the CPU).
struct TargetDesc {
  TargetKind kind = TargetKind::Cpu;
  /// The GPU architecture the device code is compiled for ("sm_90"); empty
  /// on the CPU or when not given.
  std::string arch;
  /// "fp32", "bf16" or "fp16"; empty when not given.
  std::string precision;
};

/// How the stages of a pipeline go over the micro-batches.
struct PipelineDesc {
  /// The number of stages: grid.pp.
  int64_t stages = 1;
  /// Calls of each stage's program per step; the rank's inputs and outputs
  /// hold one micro-batch per call along dim 0.
  int64_t microBatches = 1;
  /// Dim 0 of every input and output `shape` when microBatches > 1.
  int64_t microBatchSize = 1;
  ScheduleKind schedule = ScheduleKind::OneFOneB;
  /// Model chunks per stage (Megatron-LM's interleaved 1F1B; training
  /// only): pp rank s runs the forward and backward programs of virtual
  /// stages s, s + stages, ..., whose `stage` (and their activations'
  /// `peer_stage`) count virtual stages. 1: one chunk per stage.
  int64_t virtualStages = 1;
  /// The number of virtual stages: stages * virtualStages.
  int64_t chunkStages() const { return stages * virtualStages; }
};

/// Which program a rank runs, and where it sits in the grid.
struct RankDesc {
  int64_t rank = 0;
  std::string program;
  /// Its coordinate on each grid axis, indexed by GridAxis.
  GridVector coords{};
};

/// The `training` key of a training artifact.
struct TrainingDesc {
  /// The output holding the step's loss.
  std::string loss;
  /// Samples per optimizer step (dim 0 of every data input).
  int64_t globalBatch = 1;
  /// Tokens per sample for sequence models, or 0.
  int64_t tokensPerSample = 0;
  /// The inference model without the updated initializers, completed by
  /// --save-onnx (docs/design/training-artifact.md), resolved against the
  /// artifact directory; empty when the artifact has none.
  std::string inferenceTemplate;
  /// The program computing the loss for --eval-data (Dropout off, BatchNorm
  /// on its running statistics); empty when the artifact has none.
  std::string evalProgram;
  /// Why it has none, when the compiler said (`eval_unavailable`).
  std::string evalUnavailable;
  /// fp16 loss scaling's smallest scale (`loss_scaling.min_loss_scale`); set
  /// exactly when the program scales its loss and skips overflowing steps.
  std::optional<double> minLossScale;
};

/// A parsed, validated manifest.json.
struct Manifest {
  /// Present exactly for training artifacts (`"mode": "train"`).
  std::optional<TrainingDesc> training;
  /// The file it was read from, for messages.
  std::string path;
  int64_t version = ManifestVersion;
  std::string model;
  /// The SHA-256 of the model file when compiled (`model_sha256`; empty when
  /// absent), recorded in checkpoints.
  std::string modelSha256;
  std::string cluster;
  /// Where the programs run (the `target` key; absent: the CPU).
  TargetDesc target;
  int64_t worldSize = 1;
  /// Ranks per grid axis, indexed by GridAxis; their product is worldSize.
  /// Without a "grid" key: {worldSize, 1, 1}.
  GridVector grid{1, 1, 1};
  std::vector<ProgramDesc> programs;
  /// One entry per rank 0..worldSize-1, sorted by rank.
  std::vector<RankDesc> ranks;
  /// The top-level "arguments", in the entry's call order: those of every
  /// program without its own (empty if every program has its own).
  std::vector<ArgumentDesc> arguments;
  /// Present when the ranks run pipeline stages (the "pipeline" key).
  std::optional<PipelineDesc> pipeline;

  /// Calls of each program per step: the pipeline's micro-batches, or 1.
  int64_t microBatches() const { return pipeline ? pipeline->microBatches : 1; }

  /// The program rank \p rank runs (rank must be in [0, worldSize)).
  const ProgramDesc &programForRank(int64_t rank) const;
  /// Pipeline-parallel training: stage \p stage's program of \p phase
  /// ("forward", "backward"), or null.
  const ProgramDesc *phaseProgram(int64_t stage, std::string_view phase) const;
  /// Whether the ranks train a pipeline: each stage runs a forward and a
  /// backward program per micro-batch, then its step.
  bool isPipelineTraining() const {
    return training && pipeline && phaseProgram(0, "forward");
  }
};

/// Parses and validates manifest text. \p path is used only in messages.
/// Throws Error naming the file and the offending key (e.g.
/// "arguments[2].shape[1]") for invalid JSON, missing keys, wrong types and
/// inconsistent values.
Manifest parseManifest(std::string_view text, const std::string &path);

/// Reads and parses the manifest file at \p path.
Manifest readManifest(const std::string &path);

} // namespace autopar::runtime

#endif // AUTOPAR_RUNTIME_MANIFEST_H
