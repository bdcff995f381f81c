//===- Manifest.cpp - The artifact's manifest.json ------------------------===//

#include "autopar/runtime/Manifest.h"

#include "autopar/runtime/Error.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <sstream>

using nlohmann::json;

namespace autopar::runtime {

namespace {

/// Reads typed values out of the manifest's JSON. Every accessor names the
/// key by its full path (e.g. "arguments[2].shape[1]") in its error message,
/// so that a bad manifest points straight at the offending spot.
class ManifestReader {
public:
  explicit ManifestReader(const std::string &path) : path(path) {}

  [[noreturn]] void fail(const std::string &key,
                         const std::string &message) const {
    throw Error(path + ": '" + key + "' " + message);
  }

  const json &member(const json &object, const std::string &where,
                     const char *key) const {
    std::string name = join(where, key);
    auto it = object.find(key);
    if (it == object.end())
      throw Error(path + ": missing key '" + name + "'");
    return *it;
  }

  const json &object(const json &object, const std::string &where,
                     const char *key) const {
    const json &value = member(object, where, key);
    if (!value.is_object())
      fail(join(where, key), "must be an object, got " + describe(value));
    return value;
  }

  const json &array(const json &object, const std::string &where,
                    const char *key) const {
    const json &value = member(object, where, key);
    if (!value.is_array())
      fail(join(where, key), "must be an array, got " + describe(value));
    return value;
  }

  std::string string(const json &object, const std::string &where,
                     const char *key, bool allowEmpty = false) const {
    const json &value = member(object, where, key);
    if (!value.is_string())
      fail(join(where, key), "must be a string, got " + describe(value));
    std::string text = value.get<std::string>();
    if (text.empty() && !allowEmpty)
      fail(join(where, key), "must not be empty");
    return text;
  }

  int64_t integer(const json &value, const std::string &name,
                  int64_t minimum) const {
    if (!value.is_number_integer() ||
        (value.is_number_unsigned() &&
         value.get<uint64_t>() >
             static_cast<uint64_t>(std::numeric_limits<int64_t>::max())))
      fail(name, "must be an integer, got " + describe(value));
    int64_t number = value.get<int64_t>();
    if (number < minimum)
      fail(name, "must be at least " + std::to_string(minimum) + ", got " +
                     std::to_string(number));
    return number;
  }

  int64_t integer(const json &object, const std::string &where, const char *key,
                  int64_t minimum) const {
    return integer(member(object, where, key), join(where, key), minimum);
  }

  static std::string join(const std::string &where, const std::string &key) {
    return where.empty() ? key : where + "." + key;
  }

  static std::string index(const char *key, size_t i) {
    return std::string(key) + "[" + std::to_string(i) + "]";
  }

  const std::string &filePath() const { return path; }

  static std::string describe(const json &value) {
    std::string text = value.dump();
    if (text.size() > 40)
      text = text.substr(0, 37) + "...";
    return std::string(value.type_name()) + " " + text;
  }

private:
  const std::string &path;
};

Shape parseShape(const ManifestReader &reader, const json &value,
                 const std::string &where, const char *key) {
  const json &dims = reader.array(value, where, key);
  Shape shape;
  for (size_t i = 0; i < dims.size(); ++i)
    shape.push_back(reader.integer(
        dims[i], ManifestReader::join(where, ManifestReader::index(key, i)),
        0));
  return shape;
}

GridAxis parseAxis(const ManifestReader &reader, const json &object,
                   const std::string &where) {
  std::string name = reader.string(object, where, "axis");
  std::optional<GridAxis> axis = parseGridAxis(name);
  if (!axis)
    reader.fail(where + ".axis",
                "is \"" + name + "\", expected \"dp\", \"tp\" or \"pp\"");
  return *axis;
}

DType parseDTypeKey(const ManifestReader &reader, const json &value,
                    const std::string &where, const char *key) {
  std::string name = reader.string(value, where, key);
  std::optional<DType> parsed = parseDType(name);
  if (!parsed)
    reader.fail(ManifestReader::join(where, key),
                "is \"" + name + "\", expected one of " + allDTypeNames());
  return *parsed;
}

/// The optional "target" (docs/design/gpu-backend.md); absent: the CPU.
TargetDesc parseTarget(const ManifestReader &reader, const json &root) {
  TargetDesc target;
  if (!root.contains("target"))
    return target;
  const json &object = reader.object(root, "", "target");
  std::string kind = reader.string(object, "target", "kind");
  if (kind == "cuda")
    target.kind = TargetKind::Cuda;
  else if (kind != "cpu")
    reader.fail("target.kind", "is \"" + kind +
                                   "\", but this autopar-run runs only "
                                   "\"cpu\" and \"cuda\" artifacts");
  if (object.contains("arch"))
    target.arch = reader.string(object, "target", "arch");
  if (object.contains("precision")) {
    target.precision = reader.string(object, "target", "precision");
    if (target.precision != "fp32" && target.precision != "bf16" &&
        target.precision != "fp16")
      reader.fail("target.precision",
                  "is \"" + target.precision +
                      "\", expected \"fp32\", \"bf16\" or \"fp16\"");
  }
  return target;
}

/// A program's optional "device_code": a list of file names.
std::vector<std::string> parseDeviceCode(const ManifestReader &reader,
                                         const json &program,
                                         const std::string &where) {
  std::vector<std::string> files;
  if (!program.contains("device_code"))
    return files;
  const json &list = reader.array(program, where, "device_code");
  for (size_t i = 0; i < list.size(); ++i) {
    std::string at =
        ManifestReader::join(where, ManifestReader::index("device_code", i));
    if (!list[i].is_string() || list[i].get<std::string>().empty())
      reader.fail(at, "must be a non-empty string, got " +
                          ManifestReader::describe(list[i]));
    files.push_back(list[i].get<std::string>());
  }
  return files;
}

/// The optional "split" and "global_shape" of an argument (see artifact.md).
void parseDistribution(const ManifestReader &reader, const json &value,
                       const std::string &where, const GridVector &grid,
                       ArgumentDesc &arg) {
  if (value.contains("split")) {
    std::string at = where + ".split";
    const json &splitValue = value["split"];
    // One split, or a list of one or two: the second cuts the first's block
    // (ZeRO's blocks of a tensor-parallel block).
    std::vector<std::pair<const json *, std::string>> listed;
    if (splitValue.is_array()) {
      if (splitValue.empty() || splitValue.size() > 2)
        reader.fail(at, "lists " + std::to_string(splitValue.size()) +
                            " splits of '" + arg.name +
                            "', but autopar-run supports one split per "
                            "tensor, or two (a block of a block)");
      for (size_t i = 0; i < splitValue.size(); ++i)
        listed.push_back({&splitValue[i], at + ManifestReader::index("", i)});
    } else {
      listed.push_back({&splitValue, at});
    }
    std::vector<SplitDesc> splits;
    for (auto &[entry, entryAt] : listed) {
      if (!entry->is_object())
        reader.fail(entryAt, "must be an object, got " +
                                 ManifestReader::describe(*entry));
      SplitDesc desc;
      desc.axis = parseAxis(reader, *entry, entryAt);
      desc.dim = reader.integer(*entry, entryAt, "dim", 0);
      if (desc.dim >= static_cast<int64_t>(arg.shape.size()))
        reader.fail(entryAt + ".dim", "is " + std::to_string(desc.dim) +
                                          ", but '" + arg.name + "' has rank " +
                                          std::to_string(arg.shape.size()));
      if (desc.dim != 0 && arg.rankShape != arg.shape)
        reader.fail(entryAt + ".dim",
                    "is " + std::to_string(desc.dim) + ", but '" + arg.name +
                        "' holds several micro-batches along dim 0, so it "
                        "can be split only along dim 0");
      splits.push_back(desc);
    }
    if (splits.size() == 2) {
      if (splits[0].axis == splits[1].axis)
        reader.fail(at + "[1].axis",
                    "is \"" + std::string(gridAxisName(splits[1].axis)) +
                        "\" again: the two splits of '" + arg.name +
                        "' must be over different grid axes");
      if (arg.kind != ArgumentKind::Parameter &&
          arg.kind != ArgumentKind::OptimizerState &&
          arg.kind != ArgumentKind::Update)
        reader.fail(at, "lists two splits of '" + arg.name +
                            "', which only parameters, optimizer states and "
                            "updates may have");
      arg.innerSplit = splits[1];
    }
    arg.split = splits[0];
  }
  Shape expected = arg.rankShape;
  std::string how = " (shape " + formatShape(arg.shape);
  if (arg.rankShape != arg.shape)
    how += " with dim 0 times " +
           std::to_string(arg.rankShape[0] / arg.shape[0]) +
           ", the micro-batches,";
  bool first = true;
  for (const std::optional<SplitDesc> &split : {arg.split, arg.innerSplit}) {
    if (!split)
      continue;
    int64_t parts = grid[static_cast<size_t>(split->axis)];
    expected[split->dim] *= parts;
    how += std::string(first ? "" : " and") + " with dim " +
           std::to_string(split->dim) + " times " + std::to_string(parts) +
           ", the size of grid axis " + std::string(gridAxisName(split->axis));
    first = false;
  }
  how += ")";
  if (value.contains("global_shape")) {
    Shape given = parseShape(reader, value, where, "global_shape");
    if (given != expected)
      reader.fail(where + ".global_shape",
                  "is " + formatShape(given) + ", but '" + arg.name +
                      "' needs " + formatShape(expected) +
                      (arg.split || arg.rankShape != arg.shape
                           ? how
                           : " (its shape, as it is not split)"));
  }
  arg.globalShape = expected;
  byteSize(arg.dtype, arg.globalShape,
           reader.filePath() + ": '" + where + ".global_shape' ('" + arg.name +
               "')");
}

/// "parameter", "input", ...: every kind, for parsing.
constexpr ArgumentKind AllArgumentKinds[] = {
    ArgumentKind::Parameter,     ArgumentKind::Input,
    ArgumentKind::Output,        ArgumentKind::ActivationIn,
    ArgumentKind::ActivationOut, ArgumentKind::OptimizerState,
    ArgumentKind::Step,          ArgumentKind::Seed,
    ArgumentKind::Metric,        ArgumentKind::Update,
    ArgumentKind::SampleOffset,  ArgumentKind::Residual,
    ArgumentKind::Accumulator};

ArgumentDesc parseArgument(const ManifestReader &reader, const json &value,
                           const std::string &where, const GridVector &grid,
                           const std::optional<PipelineDesc> &pipeline,
                           bool training) {
  if (!value.is_object())
    reader.fail(where,
                "must be an object, got " + ManifestReader::describe(value));
  ArgumentDesc arg;
  std::string kind = reader.string(value, where, "kind");
  bool known = false;
  std::string expected;
  for (ArgumentKind k : AllArgumentKinds) {
    if (!expected.empty())
      expected += k == AllArgumentKinds[std::size(AllArgumentKinds) - 1]
                      ? " or "
                      : ", ";
    expected += "\"" + std::string(argumentKindName(k)) + "\"";
    if (argumentKindName(k) == kind) {
      arg.kind = k;
      known = true;
    }
  }
  if (!known)
    reader.fail(where + ".kind", "is \"" + kind + "\", expected " + expected);
  arg.name = reader.string(value, where, "name");

  arg.dtype = parseDTypeKey(reader, value, where, "dtype");
  arg.sourceDType = arg.dtype;

  arg.shape = parseShape(reader, value, where, "shape");
  byteSize(arg.dtype, arg.shape,
           reader.filePath() + ": '" + where + "' ('" + arg.name + "')");
  arg.rankShape = arg.shape;

  if (arg.isActivation()) {
    // One micro-batch passed between neighbouring stages: never split, and
    // never read from a file.
    if (!pipeline)
      reader.fail(where + ".kind",
                  "is \"" + kind +
                      "\", which needs a \"pipeline\" (activations pass "
                      "between pipeline stages)");
    for (const char *key : {"split", "global_shape", "source", "source_dtype"})
      if (value.contains(key))
        reader.fail(where + "." + key, "is not allowed on activations ('" +
                                           arg.name + "' is an " + kind + ")");
    arg.peerStage = reader.integer(value, where, "peer_stage", 0);
    if (arg.peerStage >= pipeline->chunkStages())
      reader.fail(
          where + ".peer_stage",
          "is " + std::to_string(arg.peerStage) + ", but the pipeline has " +
              std::to_string(pipeline->chunkStages()) +
              (pipeline->virtualStages > 1 ? " virtual" : "") + " stages");
    arg.globalShape = arg.shape;
    return arg;
  }
  if (value.contains("peer_stage"))
    reader.fail(where + ".peer_stage", "is only allowed on activations, but '" +
                                           arg.name + "' is of kind \"" + kind +
                                           "\"");

  // A training pipeline's outputs are the step's (the loss), not one per
  // micro-batch.
  bool microBatched = pipeline && pipeline->microBatches > 1 &&
                      (arg.kind == ArgumentKind::Input ||
                       (arg.kind == ArgumentKind::Output && !training));
  if (microBatched) {
    if (arg.shape.empty() || arg.shape[0] != pipeline->microBatchSize)
      reader.fail(where + ".shape",
                  "is " + formatShape(arg.shape) + ", but '" + arg.name +
                      "', an " + kind + " of a pipeline of " +
                      std::to_string(pipeline->microBatches) +
                      " micro-batches, must hold one micro-batch of " +
                      std::to_string(pipeline->microBatchSize) +
                      " along dim 0 (pipeline.micro_batch_size)");
    if (__builtin_mul_overflow(arg.shape[0], pipeline->microBatches,
                               &arg.rankShape[0]))
      reader.fail(where + ".shape",
                  "times pipeline.micro_batches is too large");
  }
  parseDistribution(reader, value, where, grid, arg);

  if (arg.kind == ArgumentKind::Parameter && value.contains("trainable")) {
    if (!value["trainable"].is_boolean())
      reader.fail(where + ".trainable", "must be true or false");
    arg.trainable = value["trainable"].get<bool>();
  }
  if (arg.kind == ArgumentKind::OptimizerState) {
    arg.role = reader.string(value, where, "role");
    arg.of = reader.string(value, where, "of");
  }
  if (arg.kind == ArgumentKind::Update)
    arg.updates = reader.string(value, where, "updates");

  bool hasSource = value.contains("source");
  if (arg.kind == ArgumentKind::Parameter) {
    const json &source = reader.object(value, where, "source");
    std::string at = where + ".source";
    arg.source = TensorSource{reader.string(source, at, "file"),
                              reader.integer(source, at, "offset", 0),
                              reader.integer(source, at, "length", 0)};
  } else if (hasSource) {
    reader.fail(where + ".source", "is only allowed on parameters, but '" +
                                       arg.name + "' is an " + kind);
  }
  if (value.contains("source_dtype")) {
    if (arg.kind != ArgumentKind::Parameter)
      reader.fail(where + ".source_dtype",
                  "is only allowed on parameters, but '" + arg.name +
                      "' is an " + kind);
    arg.sourceDType = parseDTypeKey(reader, value, where, "source_dtype");
    // The runtime converts only what GPU precision needs: float32 weights
    // stored as float16 or bfloat16.
    if (arg.sourceDType != arg.dtype && !(arg.sourceDType == DType::Float32 &&
                                          isConvertibleFromFloat32(arg.dtype)))
      reader.fail(where + ".source_dtype",
                  "is \"" + std::string(dtypeName(arg.sourceDType)) +
                      "\", but '" + arg.name + "' has dtype \"" +
                      std::string(dtypeName(arg.dtype)) +
                      "\"; autopar-run converts only float32 sources to "
                      "float16 or bfloat16");
  }
  return arg;
}

/// The list at \p where (e.g. "programs[1].arguments"): each argument, and
/// no two of one kind with one name.
std::vector<ArgumentDesc>
parseArgumentList(const ManifestReader &reader, const json &list,
                  const std::string &where, const GridVector &grid,
                  const std::optional<PipelineDesc> &pipeline, bool training) {
  std::vector<ArgumentDesc> arguments;
  std::set<std::pair<ArgumentKind, std::string>> names;
  for (size_t i = 0; i < list.size(); ++i) {
    std::string at = where + "[" + std::to_string(i) + "]";
    ArgumentDesc arg =
        parseArgument(reader, list[i], at, grid, pipeline, training);
    if (!names.insert({arg.kind, arg.name}).second)
      reader.fail(at + ".name", "repeats " +
                                    std::string(argumentKindName(arg.kind)) +
                                    " name '" + arg.name + "'");
    arguments.push_back(std::move(arg));
  }
  return arguments;
}

std::optional<PipelineDesc> parsePipeline(const ManifestReader &reader,
                                          const json &root,
                                          const GridVector &grid) {
  if (!root.contains("pipeline"))
    return std::nullopt;
  const json &value = reader.object(root, "", "pipeline");
  PipelineDesc pipeline;
  pipeline.stages = reader.integer(value, "pipeline", "stages", 1);
  int64_t pp = grid[static_cast<size_t>(GridAxis::PP)];
  if (pipeline.stages != pp)
    reader.fail("pipeline.stages",
                "is " + std::to_string(pipeline.stages) + ", but grid.pp is " +
                    std::to_string(pp) + " (one stage per pp coordinate)");
  pipeline.microBatches = reader.integer(value, "pipeline", "micro_batches", 1);
  pipeline.microBatchSize =
      reader.integer(value, "pipeline", "micro_batch_size", 1);
  std::string schedule = reader.string(value, "pipeline", "schedule");
  std::optional<ScheduleKind> kind = parseScheduleKind(schedule);
  if (!kind)
    reader.fail("pipeline.schedule",
                "is \"" + schedule + "\", expected \"gpipe\" or \"1f1b\"");
  pipeline.schedule = *kind;
  if (value.contains("virtual_stages")) {
    pipeline.virtualStages =
        reader.integer(value, "pipeline", "virtual_stages", 1);
    if (std::optional<std::string> why = pipelineScheduleError(
            pipeline.schedule, pipeline.stages, pipeline.microBatches,
            pipeline.virtualStages))
      reader.fail("pipeline.virtual_stages",
                  "is " + std::to_string(pipeline.virtualStages) + ": " + *why);
  }
  return pipeline;
}

std::string describeArgument(const ArgumentDesc &arg) {
  return std::string(argumentKindName(arg.kind)) + " '" + arg.name + "' (" +
         std::string(dtypeName(arg.dtype)) + " " + formatShape(arg.shape) + ")";
}

/// Checks what the programs of a pipeline exchange: each stage receives from
/// the previous one exactly what it sends, in the same order (the runtime
/// sends and receives in argument order), and each graph output comes from
/// one stage. A training pipeline's forward programs send forward, its
/// backward programs send the cotangents back to the previous stage, and its
/// steps exchange nothing. \p where[p]: the key of program p's argument list.
void checkPipeline(const ManifestReader &reader, const Manifest &manifest,
                   const std::vector<std::string> &where) {
  const int64_t stages = manifest.pipeline->stages;
  bool training = std::any_of(
      manifest.programs.begin(), manifest.programs.end(),
      [](const ProgramDesc &program) { return !program.phase.empty(); });
  std::vector<size_t> programOfStage(static_cast<size_t>(stages));
  std::map<std::string, size_t> outputProgram;
  for (size_t p = 0; p < manifest.programs.size(); ++p) {
    const ProgramDesc &program = manifest.programs[p];
    if (program.stage < 0)
      continue;
    if (program.phase.empty())
      programOfStage[static_cast<size_t>(program.stage)] = p;
    bool backward = program.phase == "backward";
    for (size_t i = 0; i < program.arguments.size(); ++i) {
      const ArgumentDesc &arg = program.arguments[i];
      std::string at = where[p] + "[" + std::to_string(i) + "]";
      if (arg.kind == ArgumentKind::Output && !training) {
        auto [it, inserted] = outputProgram.emplace(arg.name, p);
        if (!inserted && manifest.programs[it->second].stage != program.stage)
          reader.fail(at, "is output '" + arg.name + "', which program '" +
                              manifest.programs[it->second].name +
                              "' of another pipeline stage produces too; "
                              "each output comes from one stage");
      }
      if (!arg.isActivation())
        continue;
      if (training && program.phase.empty())
        reader.fail(at, "is " + describeArgument(arg) + " of program '" +
                            program.name +
                            "', a training pipeline's step, which exchanges "
                            "no activations (its forward and backward do)");
      bool in = arg.kind == ArgumentKind::ActivationIn;
      int64_t peer = program.stage + ((in != backward) ? -1 : 1);
      if (arg.peerStage != peer)
        reader.fail(at + ".peer_stage",
                    "is " + std::to_string(arg.peerStage) + ", but program '" +
                        program.name + "' runs stage " +
                        std::to_string(program.stage) + ", whose " +
                        (backward ? "cotangents " : "activations ") +
                        (in ? "come from" : "go to") + " stage " +
                        std::to_string(peer) +
                        " (stages exchange with their neighbours only)");
    }
  }
  // What program `from` sends, program `to` receives, in order.
  auto chain = [&](size_t from, size_t to, int64_t fromStage, int64_t toStage) {
    std::vector<size_t> sends, receives;
    for (size_t i = 0; i < manifest.programs[from].arguments.size(); ++i)
      if (manifest.programs[from].arguments[i].kind ==
          ArgumentKind::ActivationOut)
        sends.push_back(i);
    for (size_t i = 0; i < manifest.programs[to].arguments.size(); ++i)
      if (manifest.programs[to].arguments[i].kind == ArgumentKind::ActivationIn)
        receives.push_back(i);
    for (size_t k = 0; k < std::max(sends.size(), receives.size()); ++k) {
      if (k >= receives.size())
        reader.fail(
            where[from] + "[" + std::to_string(sends[k]) + "]",
            "sends " +
                describeArgument(manifest.programs[from].arguments[sends[k]]) +
                " to stage " + std::to_string(toStage) + ", but program '" +
                manifest.programs[to].name + "' receives only " +
                std::to_string(receives.size()) + " activation(s)");
      const ArgumentDesc &received =
          manifest.programs[to].arguments[receives[k]];
      std::string at = where[to] + "[" + std::to_string(receives[k]) + "]";
      if (k >= sends.size())
        reader.fail(at, "receives " + describeArgument(received) +
                            " from stage " + std::to_string(fromStage) +
                            ", but program '" + manifest.programs[from].name +
                            "' sends only " + std::to_string(sends.size()) +
                            " activation(s)");
      const ArgumentDesc &sent = manifest.programs[from].arguments[sends[k]];
      if (sent.name != received.name || sent.dtype != received.dtype ||
          sent.shape != received.shape)
        reader.fail(at, "receives " + describeArgument(received) +
                            " where program '" + manifest.programs[from].name +
                            "' sends " + describeArgument(sent) +
                            " (a stage receives in order what its neighbour "
                            "sends)");
    }
  };
  if (!training && manifest.pipeline->virtualStages > 1)
    reader.fail("pipeline.virtual_stages",
                "is " + std::to_string(manifest.pipeline->virtualStages) +
                    ", but virtual stages (the interleaved 1F1B schedule) "
                    "are for training pipelines; this artifact's programs "
                    "have no forward and backward phases");
  if (!training) {
    for (int64_t s = 0; s + 1 < stages; ++s)
      chain(programOfStage[static_cast<size_t>(s)],
            programOfStage[static_cast<size_t>(s + 1)], s, s + 1);
    return;
  }
  auto phaseIndex = [&](int64_t stage, const char *phase) {
    for (size_t p = 0; p < manifest.programs.size(); ++p)
      if (manifest.programs[p].stage == stage &&
          manifest.programs[p].phase == phase)
        return p;
    reader.fail("programs", "has no " + std::string(phase) +
                                " program for pipeline stage " +
                                std::to_string(stage) +
                                " (a training pipeline runs one per stage)");
  };
  for (int64_t s = 0; s + 1 < manifest.pipeline->chunkStages(); ++s) {
    chain(phaseIndex(s, "forward"), phaseIndex(s + 1, "forward"), s, s + 1);
    chain(phaseIndex(s + 1, "backward"), phaseIndex(s, "backward"), s + 1, s);
  }
  // --eval-data: every stage's eval program, sending forward as the
  // forwards do.
  if (manifest.phaseProgram(0, "eval"))
    for (int64_t s = 0; s + 1 < manifest.pipeline->chunkStages(); ++s)
      chain(phaseIndex(s, "eval"), phaseIndex(s + 1, "eval"), s, s + 1);
}

/// Inputs and outputs of one name must describe one tensor in every program.
void checkSharedTensors(const ManifestReader &reader, const Manifest &manifest,
                        const std::vector<std::string> &where) {
  std::map<std::pair<ArgumentKind, std::string>, const ArgumentDesc *> first;
  for (size_t p = 0; p < manifest.programs.size(); ++p)
    for (size_t i = 0; i < manifest.programs[p].arguments.size(); ++i) {
      const ArgumentDesc &arg = manifest.programs[p].arguments[i];
      if (arg.kind != ArgumentKind::Input && arg.kind != ArgumentKind::Output)
        continue;
      auto [it, inserted] = first.emplace(std::pair(arg.kind, arg.name), &arg);
      const ArgumentDesc &other = *it->second;
      auto same = [](const std::optional<SplitDesc> &a,
                     const std::optional<SplitDesc> &b) {
        return a.has_value() == b.has_value() &&
               (!a || (a->axis == b->axis && a->dim == b->dim));
      };
      bool sameSplit = same(arg.split, other.split) &&
                       same(arg.innerSplit, other.innerSplit);
      if (!inserted && (arg.dtype != other.dtype || arg.shape != other.shape ||
                        arg.globalShape != other.globalShape || !sameSplit))
        reader.fail(where[p] + "[" + std::to_string(i) + "]",
                    "describes " + describeArgument(arg) +
                        " unlike another program, which has " +
                        describeArgument(other) +
                        " (with the same global shape and split)");
    }
}

} // namespace

std::vector<GridAxis> ArgumentDesc::splitAxes() const {
  std::vector<GridAxis> axes;
  for (const std::optional<SplitDesc> &s : {split, innerSplit})
    if (s)
      axes.push_back(s->axis);
  return axes;
}

std::vector<BlockCut> ArgumentDesc::cutsAt(const GridVector &grid,
                                           const GridVector &coords) const {
  std::vector<BlockCut> cuts;
  for (const std::optional<SplitDesc> &s : {split, innerSplit})
    if (s) {
      auto axis = static_cast<size_t>(s->axis);
      cuts.push_back({s->dim, grid[axis], coords[axis]});
    }
  return cuts;
}

TensorBox ArgumentDesc::boxAt(const GridVector &grid,
                              const GridVector &coords) const {
  return cutBox(globalShape, cutsAt(grid, coords),
                std::string(argumentKindName(kind)) + " '" + name + "'");
}

bool ArgumentDesc::isFirstCopyAt(const GridVector &coords,
                                 const std::vector<GridAxis> &axes) const {
  std::vector<GridAxis> cutting = splitAxes();
  for (GridAxis axis : axes)
    if (coords[static_cast<size_t>(axis)] != 0 &&
        std::find(cutting.begin(), cutting.end(), axis) == cutting.end())
      return false;
  return true;
}

std::string_view targetKindName(TargetKind kind) {
  return kind == TargetKind::Cuda ? "cuda" : "cpu";
}

std::string_view argumentKindName(ArgumentKind kind) {
  switch (kind) {
  case ArgumentKind::Parameter:
    return "parameter";
  case ArgumentKind::Input:
    return "input";
  case ArgumentKind::Output:
    return "output";
  case ArgumentKind::ActivationIn:
    return "activation_in";
  case ArgumentKind::ActivationOut:
    return "activation_out";
  case ArgumentKind::OptimizerState:
    return "optimizer_state";
  case ArgumentKind::Step:
    return "step";
  case ArgumentKind::Seed:
    return "seed";
  case ArgumentKind::Metric:
    return "metric";
  case ArgumentKind::Update:
    return "update";
  case ArgumentKind::SampleOffset:
    return "sample_offset";
  case ArgumentKind::Residual:
    return "residual";
  case ArgumentKind::Accumulator:
    return "accumulator";
  }
  return "argument";
}

const ProgramDesc *Manifest::phaseProgram(int64_t stage,
                                          std::string_view phase) const {
  for (const ProgramDesc &program : programs)
    if (program.stage == stage && program.phase == phase)
      return &program;
  return nullptr;
}

const ProgramDesc &Manifest::programForRank(int64_t rank) const {
  const std::string &name = ranks.at(static_cast<size_t>(rank)).program;
  for (const ProgramDesc &program : programs)
    if (program.name == name)
      return program;
  throw Error(path + ": rank " + std::to_string(rank) +
              " runs unknown program '" + name +
              "'"); // Unreachable after parseManifest's checks.
}

Manifest parseManifest(std::string_view text, const std::string &path) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception &error) {
    // parse_error, and out_of_range for a number too large for a double
    // (1e400).
    throw Error(path + ": invalid JSON: " + error.what());
  }
  if (!root.is_object())
    throw Error(path + ": must hold a JSON object, got " +
                ManifestReader::describe(root));

  ManifestReader reader(path);
  Manifest manifest;
  manifest.path = path;

  std::string format = reader.string(root, "", "format");
  if (format != "autopar-artifact")
    reader.fail("format",
                "is \"" + format + "\", expected \"autopar-artifact\"");
  manifest.version = reader.integer(root, "", "version", 1);
  if (manifest.version != ManifestVersion)
    throw Error(path + ": manifest version " +
                std::to_string(manifest.version) +
                " is not supported; this autopar-run reads version " +
                std::to_string(ManifestVersion) +
                " (use autopar-run and autopar-compile from the same build)");
  manifest.model = reader.string(root, "", "model");
  if (root.contains("model_sha256"))
    manifest.modelSha256 = reader.string(root, "", "model_sha256");
  manifest.cluster = reader.string(root, "", "cluster");
  std::string mode =
      root.contains("mode") ? reader.string(root, "", "mode") : "infer";
  if (mode != "infer" && mode != "train")
    reader.fail("mode", "is \"" + mode + "\", expected \"infer\" or \"train\"");
  if (mode == "train") {
    const json &training = reader.object(root, "", "training");
    TrainingDesc desc;
    desc.loss = reader.string(training, "training", "loss");
    desc.globalBatch = reader.integer(training, "training", "global_batch", 1);
    if (training.contains("tokens_per_sample"))
      desc.tokensPerSample =
          reader.integer(training, "training", "tokens_per_sample", 0);
    if (training.contains("eval_program"))
      desc.evalProgram = reader.string(training, "training", "eval_program");
    if (training.contains("eval_unavailable"))
      desc.evalUnavailable =
          reader.string(training, "training", "eval_unavailable");
    if (training.contains("loss_scaling")) {
      const json &scaling = reader.object(training, "training", "loss_scaling");
      if (!scaling.contains("min_loss_scale") ||
          !scaling["min_loss_scale"].is_number())
        reader.fail("training.loss_scaling.min_loss_scale", "must be a number");
      else
        desc.minLossScale = scaling["min_loss_scale"].get<double>();
    }
    if (training.contains("inference_template")) {
      std::string file =
          reader.string(training, "training", "inference_template");
      std::filesystem::path p(file);
      desc.inferenceTemplate =
          p.is_absolute()
              ? file
              : (std::filesystem::path(path).parent_path() / p).string();
    }
    manifest.training = desc;
  }
  manifest.target = parseTarget(reader, root);
  // Optional since multi-rank artifacts: absent means one rank.
  if (root.contains("world_size"))
    manifest.worldSize = reader.integer(root, "", "world_size", 1);
  manifest.grid = {manifest.worldSize, 1, 1};
  if (root.contains("grid")) {
    const json &grid = reader.object(root, "", "grid");
    for (GridAxis axis : {GridAxis::DP, GridAxis::TP, GridAxis::PP})
      manifest.grid[static_cast<size_t>(axis)] = reader.integer(
          grid, "grid", std::string(gridAxisName(axis)).c_str(), 1);
    const GridVector &g = manifest.grid;
    int64_t product = 0;
    bool overflow = __builtin_mul_overflow(g[0], g[1], &product) ||
                    __builtin_mul_overflow(product, g[2], &product);
    if (overflow || product != manifest.worldSize)
      reader.fail("grid",
                  "is dp " + std::to_string(g[0]) + " x tp " +
                      std::to_string(g[1]) + " x pp " + std::to_string(g[2]) +
                      " = " +
                      (overflow ? "too many" : std::to_string(product)) +
                      " ranks, but world_size is " +
                      std::to_string(manifest.worldSize));
  }

  manifest.pipeline = parsePipeline(reader, root, manifest.grid);

  const json &programs = reader.array(root, "", "programs");
  // Where each program's arguments are: its own list, or the top-level one.
  std::vector<std::string> argumentsKey;
  if (programs.empty())
    reader.fail("programs", "must list at least one program");
  std::set<std::string> programNames;
  for (size_t i = 0; i < programs.size(); ++i) {
    std::string where = ManifestReader::index("programs", i);
    if (!programs[i].is_object())
      reader.fail(where, "must be an object, got " +
                             ManifestReader::describe(programs[i]));
    ProgramDesc program;
    program.name = reader.string(programs[i], where, "name");
    program.library = reader.string(programs[i], where, "library");
    program.entry = reader.string(programs[i], where, "entry");
    program.deviceCode = parseDeviceCode(reader, programs[i], where);
    if (!programNames.insert(program.name).second)
      reader.fail(where + ".name",
                  "repeats program name '" + program.name + "'");
    // With a pipeline, the ranks that run a program tell its stage; a
    // training pipeline's per-micro-batch programs say it themselves.
    program.stage = manifest.pipeline ? -1 : 0;
    if (programs[i].contains("phase")) {
      program.phase = reader.string(programs[i], where, "phase");
      if (program.phase != "forward" && program.phase != "backward" &&
          program.phase != "eval")
        reader.fail(where + ".phase", "is \"" + program.phase +
                                          "\", expected \"forward\", "
                                          "\"backward\" or \"eval\"");
      if (!manifest.pipeline || !manifest.training)
        reader.fail(where + ".phase",
                    "is only allowed in a training artifact with a "
                    "\"pipeline\"");
      program.stage = reader.integer(programs[i], where, "stage", 0);
      const PipelineDesc &pipeline = *manifest.pipeline;
      if (program.stage >= pipeline.chunkStages())
        reader.fail(
            where + ".stage",
            "is " + std::to_string(program.stage) + ", but the pipeline has " +
                std::to_string(pipeline.chunkStages()) +
                (pipeline.virtualStages > 1 ? " virtual" : "") + " stages");
    }
    argumentsKey.push_back("arguments");
    if (programs[i].contains("arguments")) {
      argumentsKey.back() = where + ".arguments";
      program.arguments = parseArgumentList(
          reader, reader.array(programs[i], where, "arguments"),
          argumentsKey.back(), manifest.grid, manifest.pipeline,
          manifest.training.has_value());
    }
    manifest.programs.push_back(std::move(program));
  }

  const json &ranks = reader.array(root, "", "ranks");
  manifest.ranks.resize(static_cast<size_t>(manifest.worldSize));
  std::vector<bool> seen(manifest.ranks.size(), false);
  // With explicit coordinates: which rank sits at each grid point.
  std::vector<int64_t> owners(manifest.ranks.size(), -1);
  bool ranksHaveCoords = false;
  for (size_t i = 0; i < ranks.size(); ++i) {
    std::string where = ManifestReader::index("ranks", i);
    if (!ranks[i].is_object())
      reader.fail(where, "must be an object, got " +
                             ManifestReader::describe(ranks[i]));
    int64_t rank = reader.integer(ranks[i], where, "rank", 0);
    if (rank >= manifest.worldSize)
      reader.fail(where + ".rank", "is " + std::to_string(rank) +
                                       ", but world_size is " +
                                       std::to_string(manifest.worldSize));
    if (seen[static_cast<size_t>(rank)])
      reader.fail(where + ".rank", "repeats rank " + std::to_string(rank));
    seen[static_cast<size_t>(rank)] = true;
    std::string program = reader.string(ranks[i], where, "program");
    if (!programNames.count(program))
      reader.fail(where + ".program",
                  "names program '" + program + "', which 'programs' lacks");
    GridVector coords = defaultCoordsOf(manifest.grid, rank);
    bool hasCoords = ranks[i].is_object() && ranks[i].contains("coords");
    if (i == 0)
      ranksHaveCoords = hasCoords;
    else if (hasCoords != ranksHaveCoords)
      reader.fail(where, "must have \"coords\" if and only if ranks[0] has");
    if (hasCoords) {
      const json &object = reader.object(ranks[i], where, "coords");
      for (GridAxis axis : {GridAxis::DP, GridAxis::TP, GridAxis::PP}) {
        std::string key(gridAxisName(axis));
        size_t a = static_cast<size_t>(axis);
        coords[a] = reader.integer(object, where + ".coords", key.c_str(), 0);
        if (coords[a] >= manifest.grid[a])
          reader.fail(where + ".coords." + key,
                      "is " + std::to_string(coords[a]) + ", but grid axis " +
                          key + " has " + std::to_string(manifest.grid[a]) +
                          " rank" + (manifest.grid[a] == 1 ? "" : "s"));
      }
      int64_t point = defaultRankOf(manifest.grid, coords);
      if (owners[static_cast<size_t>(point)] >= 0)
        reader.fail(where + ".coords",
                    "repeats the coordinates of rank " +
                        std::to_string(owners[static_cast<size_t>(point)]));
      owners[static_cast<size_t>(point)] = rank;
    }
    if (manifest.pipeline) {
      // One program per stage, run by every rank of that stage.
      int64_t stage = coords[static_cast<size_t>(GridAxis::PP)];
      for (ProgramDesc &desc : manifest.programs) {
        bool mine = desc.name == program;
        if (mine && !desc.phase.empty())
          reader.fail(where + ".program",
                      "is '" + program + "', a " + desc.phase +
                          " program, which ranks run per micro-batch beside "
                          "their step, not as it");
        if (!desc.phase.empty())
          continue;
        if (mine && desc.stage >= 0 && desc.stage != stage)
          reader.fail(where + ".program",
                      "is '" + program + "' on pipeline stage " +
                          std::to_string(stage) +
                          ", but another rank runs it on stage " +
                          std::to_string(desc.stage) +
                          " (each stage has its own program)");
        if (!mine && desc.stage == stage)
          reader.fail(where + ".program", "is '" + program +
                                              "', but another rank of pipeline "
                                              "stage " +
                                              std::to_string(stage) +
                                              " runs '" + desc.name +
                                              "' (each stage has one program)");
        if (mine)
          desc.stage = stage;
      }
    }
    manifest.ranks[static_cast<size_t>(rank)] = RankDesc{rank, program, coords};
  }
  for (size_t rank = 0; rank < seen.size(); ++rank)
    if (!seen[rank])
      reader.fail("ranks", "has no entry for rank " + std::to_string(rank) +
                               " (world_size is " +
                               std::to_string(manifest.worldSize) + ")");

  // Optional when every program lists its own arguments.
  bool allOwn =
      std::all_of(argumentsKey.begin(), argumentsKey.end(),
                  [](const std::string &key) { return key != "arguments"; });
  if (!allOwn || root.contains("arguments"))
    manifest.arguments = parseArgumentList(
        reader, reader.array(root, "", "arguments"), "arguments", manifest.grid,
        manifest.pipeline, manifest.training.has_value());
  for (size_t p = 0; p < manifest.programs.size(); ++p)
    if (argumentsKey[p] == "arguments")
      manifest.programs[p].arguments = manifest.arguments;
  checkSharedTensors(reader, manifest, argumentsKey);
  if (manifest.pipeline)
    checkPipeline(reader, manifest, argumentsKey);
  return manifest;
}

Manifest readManifest(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  if (!file)
    throw Error(path + ": cannot open: " + std::strerror(errno) +
                " (is this a directory written by autopar-compile?)");
  std::ostringstream text;
  text << file.rdbuf();
  return parseManifest(text.str(), path);
}

} // namespace autopar::runtime
