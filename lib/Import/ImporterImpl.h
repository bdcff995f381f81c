//===- ImporterImpl.h - Internals shared by the ONNX op converters -*- C++ -*-//
//
// The importer walks an ONNX graph in order and hands each node to the
// converter registered for its op type. A converter reads its inputs and
// attributes through a NodeContext and sets its outputs there. Values known at
// import time (Constant nodes, Shape of static tensors, small integer
// initializers) are kept as ConstTensor so that shape computations fold on the
// host and every shape in the emitted IR is static.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_LIB_IMPORT_IMPORTERIMPL_H
#define AUTOPAR_LIB_IMPORT_IMPORTERIMPL_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringMap.h"

#include "onnx/onnx_pb.h"

#include <optional>
#include <string>
#include <vector>

namespace autopar::import {

/// ONNX element type, an `onnx::TensorProto_DataType` value.
using OnnxDType = int32_t;

/// Classification of ONNX element types.
bool isFloatDType(OnnxDType t);
bool isSignedIntDType(OnnxDType t);
bool isUnsignedIntDType(OnnxDType t);
bool isBoolDType(OnnxDType t);
/// NumPy-style name ("float32", "int64", "bool", ...), or "<type N>".
std::string dtypeName(OnnxDType t);
/// The MLIR element type for an ONNX type (integers are signless); null if
/// autopar does not support it.
mlir::Type getElementType(mlir::MLIRContext *ctx, OnnxDType t);
/// Element size in bytes, or 0 when unsupported.
int64_t dtypeSize(OnnxDType t);

/// A tensor whose contents are known at import time. Integers and bools live
/// in `ints`, floating-point values in `floats` (exact for every ONNX float
/// type), so host folding of int64 shape data is exact.
struct ConstTensor {
  OnnxDType dtype = onnx::TensorProto_DataType_UNDEFINED;
  llvm::SmallVector<int64_t> shape;
  std::vector<int64_t> ints;
  std::vector<double> floats;

  int64_t numElements() const;
  bool isFloat() const { return isFloatDType(dtype); }
  double getDouble(int64_t i) const {
    return isFloat() ? floats[i] : static_cast<double>(ints[i]);
  }
  int64_t getInt(int64_t i) const {
    return isFloat() ? static_cast<int64_t>(floats[i]) : ints[i];
  }
  /// A tensor of `shape`/`dtype` with room for its elements.
  static ConstTensor zeros(OnnxDType dtype, llvm::ArrayRef<int64_t> shape);
  /// Stores `v` at `i`, converted to this tensor's type (ints wrap/truncate
  /// as a C cast does, bools become 0/1).
  void set(int64_t i, double v);
  void setInt(int64_t i, int64_t v);
};

/// Reads an ONNX TensorProto's contents (inline, typed fields or external
/// data relative to `modelDir`). Fails with `error` set.
llvm::LogicalResult readTensorProto(const onnx::TensorProto &tensor,
                                    llvm::StringRef modelDir,
                                    ConstTensor &result, std::string &error);

/// Everything the importer knows about one ONNX value.
struct TensorValue {
  OnnxDType dtype = onnx::TensorProto_DataType_UNDEFINED;
  llvm::SmallVector<int64_t> shape;
  /// The SSA value; null while the tensor is only known as a constant.
  mlir::Value value;
  /// The contents, when known at import time.
  std::optional<ConstTensor> constant;
};

class GraphImporter;

/// The view of one ONNX node that converters work with.
class NodeContext {
public:
  NodeContext(GraphImporter &importer, const onnx::NodeProto &node,
              mlir::OpBuilder &builder, mlir::Location loc,
              int64_t opsetVersion)
      : importer(importer), node(node), builder(builder), loc(loc),
        opset(opsetVersion) {}

  const onnx::NodeProto &getNode() const { return node; }
  mlir::OpBuilder &getBuilder() { return builder; }
  mlir::Location getLoc() const { return loc; }
  mlir::MLIRContext *getContext() { return builder.getContext(); }
  /// The model's opset version for the default ONNX domain.
  int64_t getOpset() const { return opset; }

  //===------------------------------------------------------------------===//
  // Inputs. Optional inputs may be absent (missing or named "").
  //===------------------------------------------------------------------===//
  int64_t getNumInputs() const { return node.input_size(); }
  bool hasInput(int64_t i) const {
    return i < node.input_size() && !node.input(i).empty();
  }
  const TensorValue &getInput(int64_t i) const;
  OnnxDType inputDType(int64_t i) const { return getInput(i).dtype; }
  llvm::ArrayRef<int64_t> inputShape(int64_t i) const {
    return getInput(i).shape;
  }
  int64_t inputRank(int64_t i) const { return getInput(i).shape.size(); }
  /// The input as an SSA value; constants are materialized on first use.
  mlir::Value input(int64_t i);
  /// The input's contents when known at import time, else null.
  const ConstTensor *inputConstant(int64_t i) const;
  /// Like inputConstant, but reports an error naming `what` when the input is
  /// not known at import time (e.g. a Reshape target computed at run time).
  /// `decides` says what the input decides that must be compiled in; a graph
  /// input is told to be frozen with --const-input.
  llvm::FailureOr<const ConstTensor *>
  requireConstantInput(int64_t i, llvm::StringRef what,
                       llvm::StringRef decides = "the output shape");
  /// True when every present input is known at import time.
  bool allInputsConstant() const;

  /// The step's int64 scalar argument marked `kind` (attrs::kStep,
  /// attrs::kSeed or attrs::kSampleOffset), added to the function on first
  /// use, after the parameters: training-mode ops (Dropout) read the run's
  /// seed, the step number and the call's first global sample.
  mlir::Value trainingScalar(llvm::StringRef kind);

  /// The samples one call of the program takes: dim 0 of the first graph
  /// input (the batch), if there is one.
  std::optional<int64_t> samplesPerCall();

  /// Whether the import is for a training step (ImportOptions::
  /// trainingStateUpdates).
  bool importsTrainingState() const;

  /// Whether the import is for evaluation (ImportOptions::evalMode).
  bool importsForEval() const;

  /// The data-parallel replicas whose batch statistics are shared
  /// (ImportOptions::dataParallelReplicas; 1 normally).
  int64_t dataParallelReplicas() const;

  /// How many times smaller the batch is than the one the file was exported
  /// at (ImportOptions::batchRatio; 1 normally).
  int64_t batchRatio() const;

  /// When input `i` is a parameter and the import is for a training step,
  /// records `value` as its value after this step (a result marked
  /// attrs::kUpdate). Returns whether it was recorded; fails (with an error)
  /// when another node already updates that parameter.
  llvm::FailureOr<bool> updateParameter(int64_t i, mlir::Value value);

  //===------------------------------------------------------------------===//
  // Attributes.
  //===------------------------------------------------------------------===//
  const onnx::AttributeProto *getAttr(llvm::StringRef name) const;
  bool hasAttr(llvm::StringRef name) const { return getAttr(name); }
  int64_t getIntAttr(llvm::StringRef name, int64_t defaultValue) const;
  std::optional<int64_t> getOptionalIntAttr(llvm::StringRef name) const;
  float getFloatAttr(llvm::StringRef name, float defaultValue) const;
  std::optional<llvm::SmallVector<int64_t>>
  getIntsAttr(llvm::StringRef name) const;
  std::string getStringAttr(llvm::StringRef name,
                            llvm::StringRef defaultValue) const;

  //===------------------------------------------------------------------===//
  // Outputs.
  //===------------------------------------------------------------------===//
  int64_t getNumOutputs() const { return node.output_size(); }
  bool hasOutput(int64_t i) const {
    return i < node.output_size() && !node.output(i).empty();
  }
  /// Binds output `i` to `value`, whose ONNX element type is `dtype`.
  void setOutput(int64_t i, mlir::Value value, OnnxDType dtype);
  /// Binds output `i` to a tensor known at import time.
  void setOutputConstant(int64_t i, ConstTensor value);

  //===------------------------------------------------------------------===//
  // Errors: every message names the model file and the node.
  //===------------------------------------------------------------------===//
  /// "<file>: node '<name>' (<OpType>): " + message.
  mlir::InFlightDiagnostic emitError(const llvm::Twine &message);
  /// Reports an unsupported feature: what it is and what is supported.
  llvm::LogicalResult unsupported(const llvm::Twine &message);
  /// Normalizes a possibly negative axis against `rank`, reporting an error
  /// when it is out of range.
  llvm::FailureOr<int64_t> normalizeAxis(int64_t axis, int64_t rank,
                                         llvm::StringRef what = "axis");

private:
  GraphImporter &importer;
  const onnx::NodeProto &node;
  mlir::OpBuilder &builder;
  mlir::Location loc;
  int64_t opset;
};

/// Converts one node; emits diagnostics and returns failure on errors.
using OpConverter = llvm::LogicalResult (*)(NodeContext &);
using ConverterRegistry = llvm::StringMap<OpConverter>;

// Each op family registers its converters (one file each).
void registerElementwiseConverters(ConverterRegistry &registry);
void registerContractionConverters(ConverterRegistry &registry);
void registerShapeConverters(ConverterRegistry &registry);
void registerReductionConverters(ConverterRegistry &registry);
void registerNormalizationConverters(ConverterRegistry &registry);
void registerResizeConverters(ConverterRegistry &registry);
void registerConvolutionConverters(ConverterRegistry &registry);
void registerLossConverters(ConverterRegistry &registry);

/// ONNX Dropout: the identity for inference, a counter-based random mask in
/// training mode (Dropout.cpp); registered with the elementwise ops.
llvm::LogicalResult convertDropout(NodeContext &ctx);

/// All converters, built once.
const ConverterRegistry &getConverterRegistry();

//===----------------------------------------------------------------------===//
// IR building helpers shared by the converters (Builders.cpp).
//===----------------------------------------------------------------------===//

/// Scalar body of an elementwise op: maps the operands' elements (already of
/// the operand element types) to the result element.
using ScalarBodyFn = llvm::function_ref<mlir::Value(
    mlir::OpBuilder &, mlir::Location, mlir::ValueRange)>;

/// ONNX multidirectional broadcasting of shapes; failure if incompatible.
llvm::FailureOr<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<llvm::SmallVector<int64_t>> shapes);

/// `tensor.empty` of the given shape and element type.
mlir::Value createEmptyTensor(mlir::OpBuilder &b, mlir::Location loc,
                              llvm::ArrayRef<int64_t> shape,
                              mlir::Type elementType);
/// A tensor filled with `value` (linalg.fill over tensor.empty).
mlir::Value createFilledTensor(mlir::OpBuilder &b, mlir::Location loc,
                               llvm::ArrayRef<int64_t> shape,
                               mlir::Type elementType, mlir::Value value);
/// A scalar constant of `type` (float or integer, i1 included) equal to `v`.
mlir::Value createScalarConstant(mlir::OpBuilder &b, mlir::Location loc,
                                 mlir::Type type, double v);
/// The lowest / highest value of `type` (-inf/+inf for floats); MLIR
/// integers are signless, so the caller says whether it is unsigned.
mlir::Value createLowestValue(mlir::OpBuilder &b, mlir::Location loc,
                              mlir::Type type, bool isUnsigned = false);
mlir::Value createHighestValue(mlir::OpBuilder &b, mlir::Location loc,
                               mlir::Type type, bool isUnsigned = false);

/// A `linalg.generic` computing `body` elementwise over `operands`, which are
/// broadcast (ONNX rules) to `resultShape`. Size-1 broadcast dims are
/// collapsed away so that every indexing map is a projected permutation.
mlir::Value createElementwise(mlir::OpBuilder &b, mlir::Location loc,
                              mlir::ValueRange operands,
                              llvm::ArrayRef<int64_t> resultShape,
                              mlir::Type resultElementType, ScalarBodyFn body);

/// Materializes `value` broadcast to `shape` (a copy).
mlir::Value broadcastTo(mlir::OpBuilder &b, mlir::Location loc,
                        mlir::Value value, llvm::ArrayRef<int64_t> shape);

/// ONNX Max and Min of two scalars of element type `t` (float: NaN-propagating
/// maximumf/minimumf; unsigned and bool: unsigned; else signed)
/// (Builders.cpp).
mlir::Value maxBody(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                    mlir::Value y, OnnxDType t);
mlir::Value minBody(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                    mlir::Value y, OnnxDType t);

/// Converts a scalar between ONNX element types with ONNX Cast semantics.
mlir::Value castScalar(mlir::OpBuilder &b, mlir::Location loc,
                       mlir::Value value, OnnxDType from, OnnxDType to);

/// Reshapes a static tensor with the same number of elements, using one
/// collapse_shape or expand_shape where possible, else collapse to 1-D and
/// expand.
mlir::Value reshapeTensor(mlir::OpBuilder &b, mlir::Location loc,
                          mlir::Value value, llvm::ArrayRef<int64_t> shape);

/// Reshapes `x` to `split`, permutes its dims by `perm` (one
/// linalg.transpose) and reshapes the result to `shape`: DepthToSpace and
/// SpaceToDepth move blocks of elements between the channel and the spatial
/// dims this way, ConvTranspose swaps its filter's channel dims per group.
mlir::Value reshapeTransposeReshape(mlir::OpBuilder &b, mlir::Location loc,
                                    mlir::Value x,
                                    llvm::ArrayRef<int64_t> split,
                                    llvm::ArrayRef<int64_t> perm,
                                    llvm::ArrayRef<int64_t> shape);

/// `x` (float, of ONNX type `type`) contracted along dim `dim` with the
/// constant in x out matrix `weights` (row-major):
/// result[..., o, ...] = sum_i x[..., i, ...] * weights[i * out + o]. One
/// generic with projected-permutation maps, so it has a gradient: Resize's
/// interpolation and ConvTranspose's filter flip are such linear maps.
mlir::Value contractAlongDim(mlir::OpBuilder &b, mlir::Location loc,
                             mlir::Value x, int64_t dim,
                             llvm::ArrayRef<float> weights, int64_t out,
                             OnnxDType type);

/// `arith.constant dense<...>` holding `value` as `elementType`.
mlir::Value materializeConstant(mlir::OpBuilder &b, mlir::Location loc,
                                const ConstTensor &value,
                                mlir::Type elementType);

/// Shape of a ranked tensor value.
inline llvm::ArrayRef<int64_t> getShape(mlir::Value v) {
  return llvm::cast<mlir::RankedTensorType>(v.getType()).getShape();
}
inline mlir::Type getElementTypeOf(mlir::Value v) {
  return llvm::cast<mlir::RankedTensorType>(v.getType()).getElementType();
}
int64_t getNumElements(llvm::ArrayRef<int64_t> shape);
/// Checks the dims a file gives a tensor (an initializer, a Constant, a .npy
/// header): none negative, and at most 2^62 elements of up to 8 bytes in
/// all, so that element counts and byte sizes cannot overflow. Sets `error`
/// (a phrase such as "has a negative dimension -3") on failure.
llvm::LogicalResult checkTensorDims(llvm::ArrayRef<int64_t> shape,
                                    std::string &error);

//===----------------------------------------------------------------------===//
// Reductions shared by the reduction, normalization and pooling converters
// (Reduction.cpp).
//===----------------------------------------------------------------------===//

/// How a reduction combines elements; Mean is a Sum divided by the count.
enum class ReductionKind { Sum, Mean, Max };

/// Reduces `input` over `dims` (sorted, unique) with one `linalg.reduce` over
/// an init filled with the identity (0, or the lowest value for Max); the
/// result drops the reduced dims. `isUnsigned` selects unsigned integer
/// max/division. With no dims the input is returned unchanged.
mlir::Value createReduction(mlir::OpBuilder &b, mlir::Location loc,
                            mlir::Value input, llvm::ArrayRef<int64_t> dims,
                            ReductionKind kind, bool isUnsigned = false);

/// Re-inserts the reduced `dims` (sorted positions in the unreduced shape) as
/// size-1 dims with one `tensor.expand_shape` (keepdims).
mlir::Value expandReducedDims(mlir::OpBuilder &b, mlir::Location loc,
                              mlir::Value reduced,
                              llvm::ArrayRef<int64_t> dims);

/// softmax(x) = exp(x - max) / sum(exp(x - max)) over `dims`;
/// log-softmax(x) = (x - max) - log(sum(exp(x - max))) (Normalization.cpp).
mlir::Value buildSoftmax(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                         llvm::ArrayRef<int64_t> dims, bool isLog);

} // namespace autopar::import

#endif // AUTOPAR_LIB_IMPORT_IMPORTERIMPL_H
