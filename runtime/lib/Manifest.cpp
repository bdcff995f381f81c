//===- Manifest.cpp - The artifact's manifest.json ------------------------===//

#include "autopar/runtime/Manifest.h"

#include "autopar/runtime/Error.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
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
    const json *splitValue = &value["split"];
    // One split per tensor: a list of several (a block over dp and tp at
    // once) is not supported yet; a list of one is that one.
    if (splitValue->is_array()) {
      if (splitValue->size() != 1)
        reader.fail(at, "lists " + std::to_string(splitValue->size()) +
                            " splits of '" + arg.name +
                            "', but autopar-run supports exactly one split "
                            "per tensor (one axis, one dimension)");
      splitValue = &(*splitValue)[0];
      at += "[0]";
    }
    if (!splitValue->is_object())
      reader.fail(at, "must be an object, got " +
                          ManifestReader::describe(*splitValue));
    const json &split = *splitValue;
    SplitDesc desc;
    desc.axis = parseAxis(reader, split, at);
    desc.dim = reader.integer(split, at, "dim", 0);
    if (desc.dim >= static_cast<int64_t>(arg.shape.size()))
      reader.fail(at + ".dim", "is " + std::to_string(desc.dim) + ", but '" +
                                   arg.name + "' has rank " +
                                   std::to_string(arg.shape.size()));
    arg.split = desc;
  }
  Shape expected = arg.shape;
  std::string how;
  if (arg.split) {
    int64_t parts = grid[static_cast<size_t>(arg.split->axis)];
    expected[arg.split->dim] *= parts;
    how = " (shape " + formatShape(arg.shape) + " with dim " +
          std::to_string(arg.split->dim) + " times " + std::to_string(parts) +
          ", the size of grid axis " +
          std::string(gridAxisName(arg.split->axis)) + ")";
  }
  if (value.contains("global_shape")) {
    Shape given = parseShape(reader, value, where, "global_shape");
    if (given != expected)
      reader.fail(where + ".global_shape",
                  "is " + formatShape(given) + ", but '" + arg.name +
                      "' needs " + formatShape(expected) +
                      (arg.split ? how : " (its shape, as it is not split)"));
  }
  arg.globalShape = expected;
  byteSize(arg.dtype, arg.globalShape,
           reader.filePath() + ": '" + where + ".global_shape' ('" + arg.name +
               "')");
}

ArgumentDesc parseArgument(const ManifestReader &reader, const json &value,
                           const std::string &where, const GridVector &grid) {
  if (!value.is_object())
    reader.fail(where,
                "must be an object, got " + ManifestReader::describe(value));
  ArgumentDesc arg;
  std::string kind = reader.string(value, where, "kind");
  if (kind == "parameter")
    arg.kind = ArgumentKind::Parameter;
  else if (kind == "input")
    arg.kind = ArgumentKind::Input;
  else if (kind == "output")
    arg.kind = ArgumentKind::Output;
  else
    reader.fail(where + ".kind", "is \"" + kind +
                                     "\", expected \"parameter\", \"input\" "
                                     "or \"output\"");
  arg.name = reader.string(value, where, "name");

  arg.dtype = parseDTypeKey(reader, value, where, "dtype");
  arg.sourceDType = arg.dtype;

  arg.shape = parseShape(reader, value, where, "shape");
  byteSize(arg.dtype, arg.shape,
           reader.filePath() + ": '" + where + "' ('" + arg.name + "')");
  parseDistribution(reader, value, where, grid, arg);

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

} // namespace

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
  }
  return "argument";
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
  } catch (const json::parse_error &error) {
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
  manifest.cluster = reader.string(root, "", "cluster");
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

  const json &programs = reader.array(root, "", "programs");
  if (programs.empty())
    reader.fail("programs", "must list at least one program");
  std::set<std::string> programNames;
  for (size_t i = 0; i < programs.size(); ++i) {
    std::string where = ManifestReader::index("programs", i);
    if (!programs[i].is_object())
      reader.fail(where, "must be an object, got " +
                             ManifestReader::describe(programs[i]));
    ProgramDesc program{reader.string(programs[i], where, "name"),
                        reader.string(programs[i], where, "library"),
                        reader.string(programs[i], where, "entry"),
                        parseDeviceCode(reader, programs[i], where)};
    if (!programNames.insert(program.name).second)
      reader.fail(where + ".name",
                  "repeats program name '" + program.name + "'");
    manifest.programs.push_back(program);
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
    manifest.ranks[static_cast<size_t>(rank)] = RankDesc{rank, program, coords};
  }
  for (size_t rank = 0; rank < seen.size(); ++rank)
    if (!seen[rank])
      reader.fail("ranks", "has no entry for rank " + std::to_string(rank) +
                               " (world_size is " +
                               std::to_string(manifest.worldSize) + ")");

  const json &arguments = reader.array(root, "", "arguments");
  std::set<std::pair<ArgumentKind, std::string>> argumentNames;
  for (size_t i = 0; i < arguments.size(); ++i) {
    std::string where = ManifestReader::index("arguments", i);
    ArgumentDesc arg =
        parseArgument(reader, arguments[i], where, manifest.grid);
    if (!argumentNames.insert({arg.kind, arg.name}).second)
      reader.fail(where + ".name", "repeats " +
                                       std::string(argumentKindName(arg.kind)) +
                                       " name '" + arg.name + "'");
    manifest.arguments.push_back(std::move(arg));
  }
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
