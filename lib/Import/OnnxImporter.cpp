//===- OnnxImporter.cpp - ONNX graph walk and NodeContext -----------------===//
//
// Walks the (topologically sorted) ONNX graph once, converting node by node.
// Parameters become `@main` arguments first, then graph inputs; graph outputs
// are its results. Shape computations fold on the host through ConstTensor, so
// every emitted tensor type is static.
//
//===----------------------------------------------------------------------===//

#include "autopar/Import/OnnxImporter.h"
#include "ImporterImpl.h"
#include "Npy.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include "onnx/defs/parser.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <onnx/defs/schema.h>

using namespace mlir;
namespace autopar {

void registerImportDialects(DialectRegistry &registry) {
  // The autopar dialect owns (and verifies) the attributes the import sets.
  // shard: a data-parallel replica's BatchNorm statistics are all-reduced.
  registry.insert<AutoparDialect, arith::ArithDialect, func::FuncDialect,
                  linalg::LinalgDialect, math::MathDialect, shard::ShardDialect,
                  tensor::TensorDialect>();
}

LogicalResult parseInputShapeFlag(llvm::StringRef flag, ImportOptions &options,
                                  std::string &error) {
  auto [name, dims] = flag.rsplit('=');
  if (name.empty() || dims.data() == nullptr || flag.find('=') == flag.npos) {
    error = "--input-shape expects NAME=D0xD1x..., got '" + flag.str() + "'";
    return failure();
  }
  llvm::SmallVector<int64_t> shape;
  if (!dims.empty() && dims != "scalar") {
    llvm::SmallVector<llvm::StringRef> parts;
    dims.split(parts, 'x');
    for (llvm::StringRef part : parts) {
      int64_t d;
      if (part.trim().getAsInteger(10, d) || d < 0) {
        error = "--input-shape " + flag.str() + ": '" + part.str() +
                "' is not a non-negative integer dimension";
        return failure();
      }
      shape.push_back(d);
    }
  }
  options.inputShapes[name] = shape;
  return success();
}

LogicalResult parseConstInputFlag(llvm::StringRef flag, ImportOptions &options,
                                  std::string &error) {
  auto [name, path] = flag.split('=');
  if (name.empty() || path.empty()) {
    error = "--const-input expects NAME=FILE.npy, got '" + flag.str() + "'";
    return failure();
  }
  options.constantInputs[name] = path.str();
  return success();
}

namespace import {

/// Walks one ONNX graph and builds `@main`.
class GraphImporter {
public:
  GraphImporter(MLIRContext *ctx, const onnx::ModelProto &model,
                llvm::StringRef path, const ImportOptions &options)
      : ctx(ctx), model(model), path(path.str()), options(options),
        builder(ctx) {
    modelDir = llvm::sys::path::parent_path(path).str();
  }

  OwningOpRef<ModuleOp> run();

  TensorValue &lookup(llvm::StringRef name) { return values[name]; }
  const ImportOptions &getOptions() const { return options; }
  /// New values of parameters after a training step, in the order recorded.
  llvm::SmallVector<std::pair<std::string, Value>> stateUpdates;
  Value materialize(TensorValue &tensor, Location loc);
  const std::string &getPath() const { return path; }
  static std::string describe(const onnx::NodeProto &node, int index);

  /// Node description used in errors, for the node being converted.
  std::string currentNode;

private:
  LogicalResult declareArguments(func::FuncOp func);
  LogicalResult convertNode(const onnx::NodeProto &node, int index);
  /// Whether every node of the graph has an op type autopar converts: if
  /// not, one error listing every node that has not, by op type.
  LogicalResult checkOpTypes();
  /// Whether `node` has the inputs and outputs its ONNX schema requires at
  /// the model's opset (an error naming the node and the missing ones).
  LogicalResult checkArity(const onnx::NodeProto &node);
  InFlightDiagnostic emitModelError(const llvm::Twine &message) {
    return mlir::emitError(FileLineColLoc::get(ctx, path, 0, 0))
           << path << ": " << message;
  }

  MLIRContext *ctx;
  const onnx::ModelProto &model;
  std::string path, modelDir;
  const ImportOptions &options;
  OpBuilder builder;
  int64_t opset = 1;
  llvm::StringMap<TensorValue> values;
  /// Outputs of Constant nodes imported as parameters.
  llvm::StringSet<> constantParameters;
};

std::string GraphImporter::describe(const onnx::NodeProto &node, int index) {
  std::string name = node.name().empty()
                         ? "#" + std::to_string(index) + " (unnamed)"
                         : "'" + node.name() + "'";
  return "node " + name + " (" + node.op_type() + ")";
}

Value GraphImporter::materialize(TensorValue &tensor, Location loc) {
  if (!tensor.value && tensor.constant)
    tensor.value = materializeConstant(builder, loc, *tensor.constant,
                                       getElementType(ctx, tensor.dtype));
  return tensor.value;
}

/// Resolves a graph input's shape from `--input-shape` or its static dims.
static FailureOr<llvm::SmallVector<int64_t>>
resolveInputShape(const onnx::ValueInfoProto &input,
                  const ImportOptions &options, std::string &error) {
  auto it = options.inputShapes.find(input.name());
  if (it != options.inputShapes.end())
    return it->second;
  llvm::SmallVector<int64_t> shape;
  const auto &type = input.type().tensor_type();
  if (!type.has_shape()) {
    error = "graph input '" + input.name() +
            "' has no shape in the model; give one with --input-shape " +
            input.name() + "=D0xD1x...";
    return failure();
  }
  for (int i = 0; i < type.shape().dim_size(); ++i) {
    const auto &dim = type.shape().dim(i);
    if (dim.has_dim_value() && dim.dim_value() >= 0) {
      shape.push_back(dim.dim_value());
      continue;
    }
    std::string symbol =
        dim.has_dim_param() ? "'" + dim.dim_param() + "'" : "(unnamed)";
    error = "graph input '" + input.name() + "' has symbolic dim " +
            std::to_string(i) + " " + symbol +
            "; bind every dim with --input-shape " + input.name() +
            "=D0xD1x... (e.g. batch and sequence length)";
    return failure();
  }
  return shape;
}

LogicalResult GraphImporter::declareArguments(func::FuncOp func) {
  const onnx::GraphProto &graph = model.graph();
  llvm::StringMap<const onnx::TensorProto *> initializers;
  for (const onnx::TensorProto &init : graph.initializer())
    initializers[init.name()] = &init;

  // Only initializers that something uses become parameters.
  llvm::StringSet<> used;
  for (const onnx::NodeProto &node : graph.node())
    for (const std::string &in : node.input())
      used.insert(in);
  for (const auto &out : graph.output())
    used.insert(out.name());

  llvm::SmallVector<Type> argTypes;
  llvm::SmallVector<NamedAttribute> argAttrs;
  llvm::SmallVector<DictionaryAttr> argDicts;
  llvm::SmallVector<std::string> argNames;
  auto addArgument = [&](llvm::StringRef name, OnnxDType dtype,
                         llvm::ArrayRef<int64_t> shape, llvm::StringRef kind) {
    Type elementType = getElementType(ctx, dtype);
    argTypes.push_back(RankedTensorType::get(shape, elementType));
    NamedAttribute attrs[] = {
        builder.getNamedAttr(kind, builder.getStringAttr(name)),
        builder.getNamedAttr(attrs::kDType,
                             builder.getStringAttr(dtypeName(dtype)))};
    argDicts.push_back(builder.getDictionaryAttr(attrs));
    argNames.push_back(name.str());
    TensorValue &tv = values[name];
    tv.dtype = dtype;
    tv.shape.assign(shape.begin(), shape.end());
  };

  // Some exporters (Paddle2ONNX, old PyTorch) store weights in Constant
  // nodes. Large floating-point ones are weights too: parameters, whose bytes
  // the runtime maps from the file like an initializer's.
  for (const onnx::NodeProto &node : graph.node()) {
    if (node.op_type() != "Constant" || node.output_size() != 1 ||
        node.attribute_size() != 1 || node.attribute(0).name() != "value" ||
        !node.attribute(0).has_t())
      continue;
    const onnx::TensorProto &t = node.attribute(0).t();
    llvm::SmallVector<int64_t> shape(t.dims().begin(), t.dims().end());
    std::string dimsError; // Reported by the Constant converter.
    if (failed(checkTensorDims(shape, dimsError)) ||
        !isFloatDType(t.data_type()) || !getElementType(ctx, t.data_type()) ||
        getNumElements(shape) <= options.maxFoldedInitializerElements ||
        t.data_location() == onnx::TensorProto_DataLocation_EXTERNAL)
      continue;
    addArgument(node.output(0), t.data_type(), shape, attrs::kParameter);
    constantParameters.insert(node.output(0));
  }

  for (const onnx::TensorProto &init : graph.initializer()) {
    if (!used.contains(init.name()))
      continue;
    OnnxDType dtype = init.data_type();
    if (!getElementType(ctx, dtype))
      return emitModelError("initializer '")
             << init.name() << "' has element type " << dtypeName(dtype)
             << ", which autopar does not support (supported: float32, "
                "float64, float16, bfloat16, int8-64, uint8-64, bool)";
    llvm::SmallVector<int64_t> shape(init.dims().begin(), init.dims().end());
    std::string dimsError;
    if (failed(checkTensorDims(shape, dimsError)))
      return emitModelError("initializer '")
             << init.name() << "' " << dimsError;
    // Small integer initializers are shape data: read them now so shape
    // computations fold. Weights (floats) are never read.
    if (!isFloatDType(dtype) &&
        getNumElements(shape) <= options.maxFoldedInitializerElements) {
      TensorValue &tv = values[init.name()];
      tv.dtype = dtype;
      tv.shape = shape;
      ConstTensor value;
      std::string error;
      if (failed(readTensorProto(init, modelDir, value, error)))
        return emitModelError("initializer '") << init.name() << "' " << error;
      tv.constant = std::move(value);
      continue;
    }
    addArgument(init.name(), dtype, shape, attrs::kParameter);
  }

  // Flags that name no graph input are mistakes; report them first.
  llvm::StringSet<> inputNames;
  for (const onnx::ValueInfoProto &input : graph.input())
    inputNames.insert(input.name());
  auto checkNamed = [&](const auto &map, llvm::StringRef flag) {
    for (const auto &entry : map)
      if (!inputNames.contains(entry.getKey())) {
        std::string known;
        for (const auto &in : graph.input())
          if (!initializers.count(in.name()))
            known += (known.empty() ? "" : ", ") + in.name();
        emitModelError(flag)
            << " names '" << entry.getKey()
            << "', which is not a graph input; inputs: " << known;
        return false;
      }
    return true;
  };
  if (!checkNamed(options.inputShapes, "--input-shape") ||
      !checkNamed(options.constantInputs, "--const-input"))
    return failure();

  for (const onnx::ValueInfoProto &input : graph.input()) {
    if (initializers.count(input.name()))
      continue; // Old-style models also list initializers as inputs.
    if (!input.type().has_tensor_type())
      return emitModelError("graph input '")
             << input.name()
             << "' is not a tensor (sequences, maps and optionals are not "
                "supported)";
    OnnxDType dtype = input.type().tensor_type().elem_type();
    auto frozen = options.constantInputs.find(input.name());
    if (frozen != options.constantInputs.end()) {
      ConstTensor value;
      std::string error;
      if (failed(readNpyFile(frozen->second, value, error)))
        return emitModelError("--const-input ")
               << input.name() << ": " << error;
      if (value.dtype != dtype)
        return emitModelError("--const-input ")
               << input.name() << ": " << frozen->second << " holds "
               << dtypeName(value.dtype) << ", the input is "
               << dtypeName(dtype);
      TensorValue &tv = values[input.name()];
      tv.dtype = dtype;
      tv.shape = value.shape;
      tv.constant = std::move(value);
      continue;
    }
    if (!getElementType(ctx, dtype))
      return emitModelError("graph input '")
             << input.name() << "' has element type " << dtypeName(dtype)
             << ", which autopar does not support (supported: float32, "
                "float64, float16, bfloat16, int8-64, uint8-64, bool)";
    std::string error;
    auto shape = resolveInputShape(input, options, error);
    if (failed(shape))
      return emitModelError(error);
    addArgument(input.name(), dtype, *shape, attrs::kInput);
  }

  func.setFunctionType(FunctionType::get(ctx, argTypes, {}));
  Block *entry = func.addEntryBlock();
  for (auto [i, dict] : llvm::enumerate(argDicts)) {
    func.setArgAttrs(i, dict);
    values[argNames[i]].value = entry->getArgument(i);
  }
  builder.setInsertionPointToEnd(entry);
  return success();
}

LogicalResult GraphImporter::checkOpTypes() {
  const ConverterRegistry &registry = getConverterRegistry();
  // ("domain::op" or "op", the nodes that use it), in graph order.
  llvm::SmallVector<std::pair<std::string, llvm::SmallVector<std::string>>>
      unsupported;
  llvm::StringMap<size_t> position;
  int count = 0;
  const onnx::GraphProto &graph = model.graph();
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto &node = graph.node(i);
    bool foreign = !node.domain().empty() && node.domain() != "ai.onnx";
    if (!foreign && registry.contains(node.op_type()))
      continue;
    std::string key =
        foreign ? node.domain() + "::" + node.op_type() : node.op_type();
    auto [it, added] = position.try_emplace(key, unsupported.size());
    if (added)
      unsupported.push_back({key, {}});
    unsupported[it->second].second.push_back(
        node.name().empty() ? "#" + std::to_string(i) + " (unnamed)"
                            : "'" + node.name() + "'");
    ++count;
  }
  // One node: convertNode's error says what is wrong with it.
  if (count < 2)
    return success();
  llvm::SmallVector<std::string> groups;
  for (auto &[key, nodes] : unsupported)
    groups.push_back("'" + key + "' (" + std::to_string(nodes.size()) +
                     (nodes.size() == 1 ? " node: " : " nodes: ") +
                     llvm::join(nodes, ", ") + ")");
  llvm::SmallVector<llvm::StringRef> names;
  for (const auto &entry : registry)
    names.push_back(entry.getKey());
  llvm::sort(names);
  return emitModelError("")
         << count << " nodes have op types autopar does not support: "
         << llvm::join(groups, "; ")
         << "; autopar supports the default ONNX domain and the op types: "
         << llvm::join(names, " ");
}

LogicalResult GraphImporter::convertNode(const onnx::NodeProto &node,
                                         int index) {
  currentNode = describe(node, index);
  Location loc = NameLoc::get(
      builder.getStringAttr(node.name().empty()
                                ? node.op_type() + "_" + std::to_string(index)
                                : node.name()),
      FileLineColLoc::get(ctx, path, 0, 0));
  if (!node.domain().empty() && node.domain() != "ai.onnx")
    return emitModelError(currentNode)
           << ": domain '" << node.domain()
           << "' is not supported; autopar supports the default ONNX domain";
  for (int i = 0; i < node.input_size(); ++i) {
    if (node.input(i).empty())
      continue;
    auto it = values.find(node.input(i));
    if (it == values.end() || (!it->second.value && !it->second.constant))
      return emitModelError(currentNode)
             << ": input '" << node.input(i)
             << "' is not a graph input, an initializer or the output of an "
                "earlier node (is the graph topologically sorted?)";
  }
  // A Constant node whose value became a parameter is already bound.
  if (node.op_type() == "Constant" && node.output_size() == 1 &&
      constantParameters.contains(node.output(0)))
    return success();
  const ConverterRegistry &registry = getConverterRegistry();
  auto it = registry.find(node.op_type());
  if (it == registry.end()) {
    llvm::SmallVector<llvm::StringRef> names;
    for (const auto &entry : registry)
      names.push_back(entry.getKey());
    llvm::sort(names);
    return emitModelError(currentNode)
           << ": op type '" << node.op_type()
           << "' is not supported by autopar; supported op types: "
           << llvm::join(names, " ");
  }
  if (failed(checkArity(node)))
    return failure();
  NodeContext context(*this, node, builder, loc, opset);
  if (failed(it->second(context)))
    return failure();
  for (int i = 0; i < node.output_size(); ++i) {
    if (node.output(i).empty())
      continue;
    auto out = values.find(node.output(i));
    if (out == values.end() || (!out->second.value && !out->second.constant))
      return emitModelError(currentNode)
             << ": output " << i << " ('" << node.output(i)
             << "') is not supported by autopar's converter for this op";
  }
  return success();
}

LogicalResult GraphImporter::checkArity(const onnx::NodeProto &node) {
  // The operator's schema at the model's opset says which inputs a node
  // must have: converters may then read them without checking (a missing
  // required input would otherwise be an out-of-range access).
  // Past the newest opset this ONNX library knows (opset 18's Reduce* and
  // Pad take one more, optional, input), and for an op the model's opset
  // predates (Mod, from opset 10, in an opset 9 model), the newest schema
  // this library has is checked, and only for the inputs it requires: newer
  // versions of an op add optional inputs, not required ones.
  const auto &versions =
      onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  auto known = versions.find(onnx::ONNX_DOMAIN);
  if (known == versions.end())
    return success();
  int newest = known->second.second;
  const onnx::OpSchema *schema =
      opset <= newest
          ? onnx::OpSchemaRegistry::Schema(node.op_type(), opset, "")
          : nullptr;
  bool exact = schema != nullptr;
  if (!schema)
    schema = onnx::OpSchemaRegistry::Schema(node.op_type(), newest, "");
  if (!schema)
    return success();
  llvm::SmallVector<std::string> missing;
  const std::vector<onnx::OpSchema::FormalParameter> &formals =
      schema->inputs();
  for (size_t i = 0; i < formals.size(); ++i)
    if (formals[i].GetOption() == onnx::OpSchema::Single &&
        (static_cast<int>(i) >= node.input_size() || node.input(i).empty()))
      missing.push_back(formals[i].GetName());
  auto signature = [&] {
    llvm::SmallVector<std::string> names;
    for (const auto &formal : formals)
      names.push_back(
          formal.GetName() +
          (formal.GetOption() == onnx::OpSchema::Optional   ? std::string("?")
           : formal.GetOption() == onnx::OpSchema::Variadic ? std::string("...")
                                                            : std::string()));
    return node.op_type() + "-" + std::to_string(schema->SinceVersion()) +
           " takes (" + llvm::join(names, ", ") + ")";
  };
  if (!missing.empty())
    return emitModelError(currentNode)
           << ": missing required input" << (missing.size() > 1 ? "s " : " ")
           << llvm::join(missing, ", ") << " (" << signature() << ")";
  if (node.input_size() < schema->min_input() ||
      (exact && node.input_size() > schema->max_input()))
    return emitModelError(currentNode)
           << ": " << node.input_size() << " inputs (" << signature() << ": "
           << schema->min_input() << " to " << schema->max_input() << ")";
  if (!exact)
    return success();
  if (node.output_size() < schema->min_output() ||
      node.output_size() > schema->max_output())
    return emitModelError(currentNode)
           << ": " << node.output_size() << " outputs (" << node.op_type()
           << "-" << schema->SinceVersion() << " has " << schema->min_output()
           << " to " << schema->max_output() << ")";
  return success();
}

OwningOpRef<ModuleOp> GraphImporter::run() {
  for (const auto &entry : model.opset_import())
    if (entry.domain().empty() || entry.domain() == "ai.onnx")
      opset = entry.version();

  OwningOpRef<ModuleOp> module =
      ModuleOp::create(FileLineColLoc::get(ctx, path, 0, 0));
  (*module)->setAttr(attrs::kModelPath, builder.getStringAttr(path));
  builder.setInsertionPointToEnd(module->getBody());
  auto func = func::FuncOp::create(builder, module->getLoc(), "main",
                                   FunctionType::get(ctx, {}, {}));
  if (failed(checkOpTypes()) || failed(declareArguments(func)))
    return nullptr;

  const onnx::GraphProto &graph = model.graph();
  for (int i = 0; i < graph.node_size(); ++i)
    if (failed(convertNode(graph.node(i), i)))
      return nullptr;

  llvm::SmallVector<Value> results;
  llvm::SmallVector<DictionaryAttr> resultDicts;
  for (const onnx::ValueInfoProto &output : graph.output()) {
    auto it = values.find(output.name());
    if (it == values.end() || (!it->second.value && !it->second.constant))
      return emitModelError("graph output '")
                 << output.name() << "' is not produced by any node",
             nullptr;
    Value v = materialize(it->second, func.getLoc());
    results.push_back(v);
    NamedAttribute attrs[] = {
        builder.getNamedAttr(attrs::kOutput,
                             builder.getStringAttr(output.name())),
        builder.getNamedAttr(
            attrs::kDType, builder.getStringAttr(dtypeName(it->second.dtype)))};
    resultDicts.push_back(builder.getDictionaryAttr(attrs));
  }
  for (auto &[name, value] : stateUpdates) {
    results.push_back(value);
    NamedAttribute attrs[] = {
        builder.getNamedAttr(attrs::kUpdate, builder.getStringAttr(name)),
        builder.getNamedAttr(attrs::kDType, builder.getStringAttr(dtypeName(
                                                values.lookup(name).dtype)))};
    resultDicts.push_back(builder.getDictionaryAttr(attrs));
  }
  func::ReturnOp::create(builder, func.getLoc(), results);
  func.setFunctionType(FunctionType::get(ctx, func.getArgumentTypes(),
                                         ValueRange(results).getTypes()));
  for (auto [i, dict] : llvm::enumerate(resultDicts))
    func.setResultAttrs(i, dict);
  return module;
}

//===----------------------------------------------------------------------===//
// NodeContext
//===----------------------------------------------------------------------===//

const TensorValue &NodeContext::getInput(int64_t i) const {
  return importer.lookup(node.input(i));
}

Value NodeContext::input(int64_t i) {
  return importer.materialize(importer.lookup(node.input(i)), loc);
}

Value NodeContext::trainingScalar(llvm::StringRef kind) {
  auto func = builder.getInsertionBlock()->getParentOp();
  auto main = dyn_cast<func::FuncOp>(func);
  if (!main)
    main = func->getParentOfType<func::FuncOp>();
  unsigned position = 0;
  for (unsigned i = 0; i < main.getNumArguments(); ++i) {
    if (main.getArgAttr(i, kind))
      return main.getArgument(i);
    if (main.getArgAttr(i, attrs::kParameter) ||
        main.getArgAttr(i, attrs::kStep) || main.getArgAttr(i, attrs::kSeed) ||
        main.getArgAttr(i, attrs::kSampleOffset))
      position = i + 1;
  }
  Builder b(getContext());
  auto type = RankedTensorType::get({}, b.getI64Type());
  NamedAttribute dict[] = {
      b.getNamedAttr(kind, b.getUnitAttr()),
      b.getNamedAttr(attrs::kDType, b.getStringAttr("int64"))};
  if (failed(main.insertArgument(position, type, b.getDictionaryAttr(dict),
                                 main.getLoc())))
    return {};
  return main.getArgument(position);
}

std::optional<int64_t> NodeContext::samplesPerCall() {
  auto func = builder.getInsertionBlock()->getParentOp();
  auto main = dyn_cast<func::FuncOp>(func);
  if (!main)
    main = func->getParentOfType<func::FuncOp>();
  for (unsigned i = 0; i < main.getNumArguments(); ++i)
    if (main.getArgAttr(i, attrs::kInput))
      if (auto type = dyn_cast<RankedTensorType>(main.getArgument(i).getType());
          type && type.getRank() >= 1 && !type.isDynamicDim(0))
        return type.getDimSize(0);
  return std::nullopt;
}

int64_t NodeContext::batchRatio() const {
  return importer.getOptions().batchRatio;
}

bool NodeContext::importsTrainingState() const {
  return importer.getOptions().trainingStateUpdates;
}

bool NodeContext::importsForEval() const {
  return importer.getOptions().evalMode;
}

int64_t NodeContext::dataParallelReplicas() const {
  return std::max<int64_t>(1, importer.getOptions().dataParallelReplicas);
}

FailureOr<bool> NodeContext::updateParameter(int64_t i, Value value) {
  if (!importsTrainingState() || !hasInput(i))
    return false;
  auto arg = dyn_cast_or_null<BlockArgument>(getInput(i).value);
  if (!arg)
    return false;
  auto main = cast<func::FuncOp>(arg.getOwner()->getParentOp());
  if (!main.getArgAttr(arg.getArgNumber(), attrs::kParameter))
    return false;
  for (auto &[name, previous] : importer.stateUpdates)
    if (name == node.input(i))
      return emitError("input ")
             << i << " ('" << node.input(i)
             << "') is also updated by another node; a training step can "
                "update a parameter only once";
  importer.stateUpdates.push_back({node.input(i), value});
  return true;
}

const ConstTensor *NodeContext::inputConstant(int64_t i) const {
  if (!hasInput(i))
    return nullptr;
  const TensorValue &tv = getInput(i);
  return tv.constant ? &*tv.constant : nullptr;
}

FailureOr<const ConstTensor *>
NodeContext::requireConstantInput(int64_t i, llvm::StringRef what,
                                  llvm::StringRef decides) {
  if (const ConstTensor *c = inputConstant(i))
    return c;
  bool shape = decides == "the output shape";
  std::string compiledIn =
      shape ? "autopar compiles static shapes"
            : ("autopar compiles " + decides + " into the program").str();
  if (getInput(i).value && isa<BlockArgument>(getInput(i).value))
    return emitError("input ")
           << i << " ('" << node.input(i) << "', the " << what << ") decides "
           << decides << ", but it is a graph input known only at run time; "
           << compiledIn << ": freeze it with --const-input " << node.input(i)
           << "=FILE.npy";
  return emitError("input ")
         << i << " ('" << node.input(i) << "', the " << what
         << ") must be known at compile time (a constant, an initializer or "
            "computed from shapes); "
         << (shape ? "autopar needs static shapes" : compiledIn);
}

bool NodeContext::allInputsConstant() const {
  for (int64_t i = 0; i < getNumInputs(); ++i)
    if (hasInput(i) && !inputConstant(i))
      return false;
  return true;
}

const onnx::AttributeProto *NodeContext::getAttr(llvm::StringRef name) const {
  for (const onnx::AttributeProto &attr : node.attribute())
    if (attr.name() == name)
      return &attr;
  return nullptr;
}

int64_t NodeContext::getIntAttr(llvm::StringRef name,
                                int64_t defaultValue) const {
  const onnx::AttributeProto *attr = getAttr(name);
  return attr ? attr->i() : defaultValue;
}

std::optional<int64_t>
NodeContext::getOptionalIntAttr(llvm::StringRef name) const {
  if (const onnx::AttributeProto *attr = getAttr(name))
    return attr->i();
  return std::nullopt;
}

float NodeContext::getFloatAttr(llvm::StringRef name,
                                float defaultValue) const {
  const onnx::AttributeProto *attr = getAttr(name);
  return attr ? attr->f() : defaultValue;
}

std::optional<llvm::SmallVector<int64_t>>
NodeContext::getIntsAttr(llvm::StringRef name) const {
  const onnx::AttributeProto *attr = getAttr(name);
  if (!attr)
    return std::nullopt;
  return llvm::SmallVector<int64_t>(attr->ints().begin(), attr->ints().end());
}

std::string NodeContext::getStringAttr(llvm::StringRef name,
                                       llvm::StringRef defaultValue) const {
  const onnx::AttributeProto *attr = getAttr(name);
  return attr ? attr->s() : defaultValue.str();
}

void NodeContext::setOutput(int64_t i, Value value, OnnxDType dtype) {
  TensorValue &tv = importer.lookup(node.output(i));
  tv.value = value;
  tv.dtype = dtype;
  tv.shape.assign(getShape(value).begin(), getShape(value).end());
  tv.constant.reset();
}

void NodeContext::setOutputConstant(int64_t i, ConstTensor value) {
  TensorValue &tv = importer.lookup(node.output(i));
  tv.value = nullptr;
  tv.dtype = value.dtype;
  tv.shape = value.shape;
  tv.constant = std::move(value);
}

InFlightDiagnostic NodeContext::emitError(const llvm::Twine &message) {
  return mlir::emitError(loc) << importer.getPath() << ": "
                              << importer.currentNode << ": " << message;
}

LogicalResult NodeContext::unsupported(const llvm::Twine &message) {
  return emitError(message);
}

FailureOr<int64_t> NodeContext::normalizeAxis(int64_t axis, int64_t rank,
                                              llvm::StringRef what) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1))
    if (!(rank == 0 && (axis == 0 || axis == -1)))
      return emitError(what)
             << " " << axis << " is out of range for rank " << rank
             << " (valid: [" << -rank << ", " << rank - 1 << "])";
  return axis < 0 ? axis + rank : axis;
}

const ConverterRegistry &getConverterRegistry() {
  static const ConverterRegistry registry = [] {
    ConverterRegistry r;
    registerElementwiseConverters(r);
    registerContractionConverters(r);
    registerShapeConverters(r);
    registerReductionConverters(r);
    registerNormalizationConverters(r);
    registerConvolutionConverters(r);
    registerResizeConverters(r);
    registerLossConverters(r);
    return r;
  }();
  return registry;
}

} // namespace import

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

OwningOpRef<ModuleOp> importOnnxBuffer(MLIRContext *context,
                                       llvm::StringRef buffer,
                                       llvm::StringRef bufferName, bool isText,
                                       const ImportOptions &options) {
  DialectRegistry registry;
  registerImportDialects(registry);
  context->appendDialectRegistry(registry);
  context->loadAllAvailableDialects();

  Location fileLoc = FileLineColLoc::get(context, bufferName, 0, 0);
  onnx::ModelProto model;
  if (isText) {
    onnx::Status status =
        onnx::OnnxParser::Parse(model, std::string(buffer).c_str());
    if (!status.IsOK()) {
      emitError(fileLoc) << bufferName << ": not valid ONNX text syntax: "
                         << status.ErrorMessage();
      return nullptr;
    }
  } else {
    google::protobuf::io::ArrayInputStream raw(buffer.data(), buffer.size());
    google::protobuf::io::CodedInputStream coded(&raw);
    coded.SetTotalBytesLimit(INT32_MAX);
    if (!model.ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage()) {
      emitError(fileLoc)
          << bufferName
          << ": not a valid ONNX model (protobuf parse failed: the file is "
             "truncated, corrupt, or not an .onnx file)";
      return nullptr;
    }
  }
  if (!model.has_graph()) {
    emitError(fileLoc) << bufferName << ": the ONNX model has no graph";
    return nullptr;
  }
  import::GraphImporter importer(context, model, bufferName, options);
  return importer.run();
}

OwningOpRef<ModuleOp> importOnnxFile(MLIRContext *context, llvm::StringRef path,
                                     const ImportOptions &options) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer) {
    emitError(FileLineColLoc::get(context, path, 0, 0))
        << path << ": cannot open the model: " << buffer.getError().message();
    return nullptr;
  }
  return importOnnxBuffer(context, (*buffer)->getBuffer(), path,
                          path.ends_with(".onnxtxt"), options);
}

} // namespace autopar
