//===- Attributes.h - The autopar.* attributes ------------------*- C++ -*-===//
//
// The names of the attributes the importer and the passes put on `@main`,
// its arguments and results, and on ops. They are the dialect's discardable
// attributes (AutoparOps.td), which also fixes their types: the dialect's
// verifier rejects an `autopar.stage` that is not an integer, say.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_DIALECT_ATTRIBUTES_H
#define AUTOPAR_DIALECT_ATTRIBUTES_H

#include "autopar/Dialect/AutoparOps.h"

#include <string>

#include <optional>
#include <string>

namespace autopar {

/// Attribute names the importer (and the passes noted) put on `@main`, its
/// arguments and results.
/// The artifact writer and later passes rely on them.
namespace attrs {
/// Argument that is an ONNX initializer (a model parameter): its name.
inline constexpr llvm::StringLiteral kParameter =
    AutoparDialect::ParameterAttrHelper::getNameStr();
/// Argument that is a graph input: its ONNX name.
inline constexpr llvm::StringLiteral kInput =
    AutoparDialect::InputAttrHelper::getNameStr();
/// Result that is a graph output: its ONNX name.
inline constexpr llvm::StringLiteral kOutput =
    AutoparDialect::OutputAttrHelper::getNameStr();
/// ONNX element type name of an argument/result ("float32", "uint8", ...).
/// MLIR integers are signless, so this keeps signedness for the runtime.
inline constexpr llvm::StringLiteral kDType =
    AutoparDialect::DtypeAttrHelper::getNameStr();
/// Module attribute: path of the imported ONNX file.
inline constexpr llvm::StringLiteral kModelPath =
    AutoparDialect::ModelAttrHelper::getNameStr();
/// Pipeline stage of an op of `@main` (i64), set by `autopar-plan`.
inline constexpr llvm::StringLiteral kStage =
    AutoparDialect::StageAttrHelper::getNameStr();
/// Argument of a pipeline stage's `@main` that the previous stage sends, and
/// result that the stage sends on (`autopar-split-pipeline-stages`): the
/// tensor's name, shared by sender and receiver.
inline constexpr llvm::StringLiteral kActivationIn =
    AutoparDialect::ActivationInAttrHelper::getNameStr();
inline constexpr llvm::StringLiteral kActivationOut =
    AutoparDialect::ActivationOutAttrHelper::getNameStr();
/// With an activation: the stage (i64) it comes from or goes to.
inline constexpr llvm::StringLiteral kPeerStage =
    AutoparDialect::PeerStageAttrHelper::getNameStr();

// A training step's signature (autopar-differentiate,
// autopar-apply-optimizer; docs/design/training-artifact.md).
/// A parameter that is trained (unit).
inline constexpr llvm::StringLiteral kTrainable =
    AutoparDialect::TrainableAttrHelper::getNameStr();
/// A result that is the gradient of the named parameter.
inline constexpr llvm::StringLiteral kGradient =
    AutoparDialect::GradientAttrHelper::getNameStr();
/// An optimizer state argument: its role ("momentum", "exp_avg",
/// "exp_avg_sq").
inline constexpr llvm::StringLiteral kOptimizerState =
    AutoparDialect::OptimizerStateAttrHelper::getNameStr();
/// With an optimizer state: the parameter it belongs to.
inline constexpr llvm::StringLiteral kStateOf =
    AutoparDialect::StateOfAttrHelper::getNameStr();
/// The 1-based step number argument (unit).
inline constexpr llvm::StringLiteral kStep =
    AutoparDialect::StepAttrHelper::getNameStr();
/// The run's random seed argument (unit): with the step, the node and the
/// element index it decides every dropout mask.
inline constexpr llvm::StringLiteral kSeed =
    AutoparDialect::SeedAttrHelper::getNameStr();
/// The first sample's index in the global batch of the call's batch (unit;
/// an int64 scalar argument): with it training-mode Dropout indexes its
/// masks by global sample, so that every plan draws one rank's masks.
/// Internal to the step: autopar-accumulate-gradients replaces it.
inline constexpr llvm::StringLiteral kSampleOffset =
    AutoparDialect::SampleOffsetAttrHelper::getNameStr();
/// Pipeline-parallel training: a forward value a stage's backward reads
/// (the forward's result, the backward's argument), kept per micro-batch by
/// the runtime; its name, unique in the stage.
inline constexpr llvm::StringLiteral kResidual =
    AutoparDialect::ResidualAttrHelper::getNameStr();
/// Pipeline-parallel training: an argument holding a sum over the step's
/// micro-batches (a gradient, the loss); its name. A result marked
/// `autopar.update` with that name is its next value.
inline constexpr llvm::StringLiteral kAccumulator =
    AutoparDialect::AccumulatorAttrHelper::getNameStr();
/// autopar-rematerialize: an op the backward recomputes (a clone of a
/// forward op; unit), kept apart from it by CSE.
inline constexpr llvm::StringLiteral kRecomputed =
    AutoparDialect::RecomputedAttrHelper::getNameStr();
/// A scalar metric result: its name ("lr", "grad_norm").
inline constexpr llvm::StringLiteral kMetric =
    AutoparDialect::MetricAttrHelper::getNameStr();
/// A result holding the new value of the named parameter or optimizer state.
inline constexpr llvm::StringLiteral kUpdate =
    AutoparDialect::UpdateAttrHelper::getNameStr();
/// The generic that multiplies the loss by fp16's loss scale (unit).
inline constexpr llvm::StringLiteral kLossScaling =
    AutoparDialect::LossScalingAttrHelper::getNameStr();
/// A parameter argument that is one of this many blocks (dim 0) of the
/// parameter, one per data-parallel replica (ZeRO-3; i64).
inline constexpr llvm::StringLiteral kZeroBlocks =
    AutoparDialect::ZeroBlocksAttrHelper::getNameStr();
/// A parameter argument that is this rank's block of a tensor-parallel
/// split (axis 1 of @autopar_grid) along this dim (i64): a pipeline stage's
/// programs are partitioned on their own, so the stage's step learns so.
inline constexpr llvm::StringLiteral kTensorParallelSplit =
    AutoparDialect::TpSplitAttrHelper::getNameStr();
/// A pipeline stage's step: this trained parameter is also held by an
/// earlier stage (tied weights), whose copy counts in the global gradient
/// norm; the copies' gradients are summed over the stages (unit).
inline constexpr llvm::StringLiteral kTiedCopy =
    AutoparDialect::TiedCopyAttrHelper::getNameStr();
/// The module's chosen plan (a dictionary: dp, tp, pp, zero_stage, ...).
inline constexpr llvm::StringLiteral kPlan =
    AutoparDialect::PlanAttrHelper::getNameStr();
} // namespace attrs

/// The `autopar.dtype` of an element type: NumPy's name ("float32",
/// "bfloat16", "bool", "int64", ...), as manifests write it. MLIR integers
/// are signless: a signless integer is named as signed. None for other types.
std::optional<std::string> dtypeAttrName(mlir::Type elementType);

/// The ONNX node an op was imported from (its NameLoc), or "".
std::string onnxNodeName(mlir::Operation *op);

} // namespace autopar

#endif // AUTOPAR_DIALECT_ATTRIBUTES_H
