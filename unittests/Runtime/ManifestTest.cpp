//===- ManifestTest.cpp - manifest.json parsing and validation ------------===//

#include "autopar/runtime/Manifest.h"
#include "autopar/runtime/Error.h"

#include "TestUtil.h"

#include "gtest/gtest.h"

#include <filesystem>

#include <nlohmann/json.hpp>

using namespace autopar::runtime;
using namespace autopar::runtime::test;
using nlohmann::json;

namespace {

/// The example manifest of docs/design/artifact.md.
json exampleManifest() {
  return json::parse(R"({
    "format": "autopar-artifact",
    "version": 1,
    "model": "/abs/path/model.onnx",
    "cluster": "local:1",
    "world_size": 1,
    "programs": [ { "name": "stage0", "library": "stage0.so", "entry": "autopar_entry" } ],
    "ranks": [ { "rank": 0, "program": "stage0" } ],
    "arguments": [
      { "kind": "parameter", "name": "fc.weight", "dtype": "float32", "shape": [4, 8],
        "source": { "file": "/abs/path/model.onnx", "offset": 1234, "length": 128 } },
      { "kind": "input",  "name": "x", "dtype": "float32", "shape": [2, 8] },
      { "kind": "output", "name": "y", "dtype": "float32", "shape": [2, 4] }
    ]
  })");
}

const std::string Path = "/artifacts/a/manifest.json";

std::string parseError(const json &manifest) {
  try {
    parseManifest(manifest.dump(), Path);
  } catch (const Error &error) {
    return error.what();
  }
  return "(no error)";
}

/// Expects \p manifest to be rejected with a message that names the file and
/// contains \p expected.
void expectError(const json &manifest, const std::string &expected) {
  std::string message = parseError(manifest);
  EXPECT_EQ(message.rfind(Path + ": ", 0), 0u) << message;
  EXPECT_NE(message.find(expected), std::string::npos)
      << "expected \"" << expected << "\" in: " << message;
}

TEST(ManifestTest, ParsesTheDocumentedExample) {
  Manifest manifest = parseManifest(exampleManifest().dump(), Path);
  EXPECT_EQ(manifest.path, Path);
  EXPECT_EQ(manifest.version, 1);
  EXPECT_EQ(manifest.model, "/abs/path/model.onnx");
  EXPECT_EQ(manifest.cluster, "local:1");
  EXPECT_EQ(manifest.worldSize, 1);
  ASSERT_EQ(manifest.programs.size(), 1u);
  EXPECT_EQ(manifest.programs[0].library, "stage0.so");
  EXPECT_EQ(manifest.programs[0].entry, "autopar_entry");
  EXPECT_EQ(manifest.programForRank(0).name, "stage0");
  ASSERT_EQ(manifest.arguments.size(), 3u);
  const ArgumentDesc &weight = manifest.arguments[0];
  EXPECT_EQ(weight.kind, ArgumentKind::Parameter);
  EXPECT_EQ(weight.name, "fc.weight");
  EXPECT_EQ(weight.dtype, DType::Float32);
  EXPECT_EQ(weight.shape, (Shape{4, 8}));
  ASSERT_TRUE(weight.source);
  EXPECT_EQ(weight.source->file, "/abs/path/model.onnx");
  EXPECT_EQ(weight.source->offset, 1234);
  EXPECT_EQ(weight.source->length, 128);
  EXPECT_EQ(manifest.arguments[1].kind, ArgumentKind::Input);
  EXPECT_FALSE(manifest.arguments[1].source);
  EXPECT_EQ(manifest.arguments[2].kind, ArgumentKind::Output);
}

TEST(ManifestTest, IgnoresUnknownKeysAndAcceptsScalars) {
  json manifest = exampleManifest();
  manifest["future_key"] = {1, 2};
  manifest["arguments"][1]["shape"] = json::array();
  manifest["arguments"][1]["layout"] = "row-major";
  Manifest parsed = parseManifest(manifest.dump(), Path);
  EXPECT_TRUE(parsed.arguments[1].shape.empty());
}

TEST(ManifestTest, ReportsEachMissingTopLevelKey) {
  for (const char *key : {"format", "version", "model", "cluster", "programs",
                          "ranks", "arguments"}) {
    json manifest = exampleManifest();
    manifest.erase(key);
    expectError(manifest, std::string("missing key '") + key + "'");
  }
}

TEST(ManifestTest, ReportsNestedMissingKeysByPath) {
  json manifest = exampleManifest();
  manifest["arguments"][1].erase("dtype");
  expectError(manifest, "missing key 'arguments[1].dtype'");

  manifest = exampleManifest();
  manifest["arguments"][0]["source"].erase("offset");
  expectError(manifest, "missing key 'arguments[0].source.offset'");

  manifest = exampleManifest();
  manifest["arguments"][0].erase("source");
  expectError(manifest, "missing key 'arguments[0].source'");

  manifest = exampleManifest();
  manifest["programs"][0].erase("entry");
  expectError(manifest, "missing key 'programs[0].entry'");

  manifest = exampleManifest();
  manifest["ranks"][0].erase("program");
  expectError(manifest, "missing key 'ranks[0].program'");
}

TEST(ManifestTest, ReportsWrongTypesAndValues) {
  struct Case {
    const char *pointer;
    json value;
    const char *expected;
  } cases[] = {
      {"/world_size", "2", "'world_size' must be an integer, got string \"2\""},
      {"/world_size", 0, "'world_size' must be at least 1, got 0"},
      {"/version", 2, "manifest version 2 is not supported"},
      {"/format", "onnx",
       "'format' is \"onnx\", expected \"autopar-artifact\""},
      {"/model", 3, "'model' must be a string, got number 3"},
      {"/programs", json::object(), "'programs' must be an array"},
      {"/programs", json::array(), "'programs' must list at least one program"},
      {"/programs/0/library", "", "'programs[0].library' must not be empty"},
      {"/arguments/1/shape/1", -1,
       "'arguments[1].shape[1]' must be at least 0"},
      {"/arguments/1/shape/1", 4.5,
       "'arguments[1].shape[1]' must be an integer, got number 4.5"},
      {"/arguments/1/shape", "2x8", "'arguments[1].shape' must be an array"},
      {"/arguments/1/dtype", "float",
       "'arguments[1].dtype' is \"float\", expected one of float32, float64"},
      {"/arguments/1/kind", "weight",
       "'arguments[1].kind' is \"weight\", expected \"parameter\""},
      {"/arguments/1/source",
       json{{"file", "w.bin"}, {"offset", 0}, {"length", 64}},
       "'arguments[1].source' is only allowed on parameters"},
      {"/arguments/0/source/length", -5,
       "'arguments[0].source.length' must be at least 0"},
      {"/arguments/2", 7, "'arguments[2]' must be an object"},
      {"/ranks/0/rank", 1, "'ranks[0].rank' is 1, but world_size is 1"},
      {"/ranks/0/program", "stage9",
       "'ranks[0].program' names program 'stage9', which 'programs' lacks"},
      {"/arguments/2/name", "x", "(no error)"}, // Input and output may share.
      {"/arguments/1/shape/0", 9223372036854775807LL, "too many elements"},
  };
  for (const Case &c : cases) {
    json manifest = exampleManifest();
    manifest[json::json_pointer(c.pointer)] = c.value;
    SCOPED_TRACE(c.pointer);
    if (std::string(c.expected) == "(no error)")
      EXPECT_EQ(parseError(manifest), "(no error)");
    else
      expectError(manifest, c.expected);
  }
}

TEST(ManifestTest, ChecksRanksAndNames) {
  json manifest = exampleManifest();
  manifest["world_size"] = 2;
  expectError(manifest, "'ranks' has no entry for rank 1 (world_size is 2)");

  manifest["ranks"].push_back({{"rank", 0}, {"program", "stage0"}});
  expectError(manifest, "'ranks[1].rank' repeats rank 0");

  manifest["ranks"][1]["rank"] = 1;
  Manifest parsed = parseManifest(manifest.dump(), Path);
  EXPECT_EQ(parsed.programForRank(1).name, "stage0");

  manifest = exampleManifest();
  manifest["programs"].push_back(manifest["programs"][0]);
  expectError(manifest, "'programs[1].name' repeats program name 'stage0'");

  manifest = exampleManifest();
  manifest["arguments"].push_back(manifest["arguments"][1]);
  expectError(manifest, "'arguments[3].name' repeats input name 'x'");
}

/// The data-parallel example of docs/design/artifact.md, on \p ranks ranks.
json dataParallelManifest(int ranks) {
  json manifest = exampleManifest();
  manifest["world_size"] = ranks;
  manifest["grid"] = {{"dp", ranks}, {"tp", 1}, {"pp", 1}};
  manifest["ranks"] = json::array();
  for (int r = 0; r < ranks; ++r)
    manifest["ranks"].push_back(
        {{"rank", r},
         {"program", "stage0"},
         {"coords", {{"dp", r}, {"tp", 0}, {"pp", 0}}}});
  manifest["arguments"][1]["global_shape"] = {2 * ranks, 8};
  manifest["arguments"][1]["split"] = {{"axis", "dp"}, {"dim", 0}};
  manifest["arguments"][2]["global_shape"] = {2 * ranks, 4};
  manifest["arguments"][2]["split"] = {{"axis", "dp"}, {"dim", 0}};
  return manifest;
}

TEST(ManifestTest, ParsesGridCoordinatesAndSplits) {
  Manifest parsed = parseManifest(dataParallelManifest(4).dump(), Path);
  EXPECT_EQ(parsed.worldSize, 4);
  EXPECT_EQ(parsed.grid, (GridVector{4, 1, 1}));
  EXPECT_EQ(parsed.ranks[3].coords, (GridVector{3, 0, 0}));
  const ArgumentDesc &x = parsed.arguments[1];
  EXPECT_EQ(x.shape, (Shape{2, 8}));
  EXPECT_EQ(x.globalShape, (Shape{8, 8}));
  ASSERT_TRUE(x.split);
  EXPECT_EQ(x.split->axis, GridAxis::DP);
  EXPECT_EQ(x.split->dim, 0);
  // Parameters without a split are whole on every rank.
  EXPECT_FALSE(parsed.arguments[0].split);
  EXPECT_EQ(parsed.arguments[0].globalShape, (Shape{4, 8}));
}

/// The data-parallel example on a grid of dp 2 x tp 2, with fc.weight split
/// over tp along \p dim.
json tensorParallelManifest(int dim) {
  json manifest = dataParallelManifest(4);
  manifest["grid"] = {{"dp", 2}, {"tp", 2}, {"pp", 1}};
  for (int r = 0; r < 4; ++r)
    manifest["ranks"][r]["coords"] = {{"dp", r / 2}, {"tp", r % 2}, {"pp", 0}};
  manifest["arguments"][1]["global_shape"] = {4, 8};
  manifest["arguments"][2]["global_shape"] = {4, 4};
  json &weight = manifest["arguments"][0];
  weight["shape"] = dim == 0 ? json{2, 8} : json{4, 4};
  weight["global_shape"] = {4, 8};
  weight["split"] = {{"axis", "tp"}, {"dim", dim}};
  return manifest;
}

TEST(ManifestTest, ParsesSplitParameters) {
  for (int dim : {0, 1}) {
    SCOPED_TRACE(dim);
    Manifest parsed = parseManifest(tensorParallelManifest(dim).dump(), Path);
    const ArgumentDesc &weight = parsed.arguments[0];
    ASSERT_TRUE(weight.split);
    EXPECT_EQ(weight.split->axis, GridAxis::TP);
    EXPECT_EQ(weight.split->dim, dim);
    EXPECT_EQ(weight.globalShape, (Shape{4, 8}));
    EXPECT_EQ(weight.source->length, 128); // the whole tensor
  }
  // A list of one split is that split.
  json manifest = tensorParallelManifest(1);
  manifest["arguments"][0]["split"] =
      json::array({manifest["arguments"][0]["split"]});
  EXPECT_EQ(parseManifest(manifest.dump(), Path).arguments[0].split->dim, 1);
}

TEST(ManifestTest, ParsesABlockOfABlock) {
  // fc.weight [4, 8] split over tp along dim 1 ([4, 4] per tp rank), each
  // tp block's dim 0 over dp ([2, 4] per rank): ZeRO-3 under tp.
  json manifest = tensorParallelManifest(1);
  json &weight = manifest["arguments"][0];
  weight["shape"] = {2, 4};
  weight["split"] =
      json::array({{{"axis", "tp"}, {"dim", 1}}, {{"axis", "dp"}, {"dim", 0}}});
  Manifest parsed = parseManifest(manifest.dump(), Path);
  const ArgumentDesc &arg = parsed.arguments[0];
  ASSERT_TRUE(arg.split && arg.innerSplit);
  EXPECT_EQ(arg.split->axis, GridAxis::TP);
  EXPECT_EQ(arg.innerSplit->axis, GridAxis::DP);
  EXPECT_EQ(arg.innerSplit->dim, 0);
  EXPECT_EQ(arg.globalShape, (Shape{4, 8}));
  // The rank at dp 1, tp 0 holds rows 2-3 of columns 0-3.
  TensorBox box = arg.boxAt(parsed.grid, GridVector{1, 0, 0});
  EXPECT_EQ(box.offsets, (Shape{2, 0}));
  EXPECT_EQ(box.sizes, (Shape{2, 4}));
  EXPECT_EQ(arg.splitAxes(),
            (std::vector<GridAxis>{GridAxis::TP, GridAxis::DP}));
  EXPECT_TRUE(arg.isFirstCopyAt(GridVector{1, 1, 0},
                                {GridAxis::DP, GridAxis::TP, GridAxis::PP}));

  // A global shape that leaves out one of the two splits.
  weight["global_shape"] = {2, 8};
  expectError(manifest, "'arguments[0].global_shape' is [2, 8], but "
                        "'fc.weight' needs [4, 8] (shape [2, 4] with dim 1 "
                        "times 2, the size of grid axis tp and with dim 0 "
                        "times 2, the size of grid axis dp)");
}

TEST(ManifestTest, ReportsInconsistentParameterSplits) {
  json manifest = tensorParallelManifest(1);
  manifest["arguments"][0]["global_shape"] = {4, 4};
  expectError(manifest, "'arguments[0].global_shape' is [4, 4], but "
                        "'fc.weight' needs [4, 8] (shape [4, 4] with dim 1 "
                        "times 2, the size of grid axis tp)");
  manifest = tensorParallelManifest(1);
  manifest["arguments"][0]["global_shape"] = {2, 8}; // other dims must agree
  expectError(manifest, "'arguments[0].global_shape' is [2, 8], but "
                        "'fc.weight' needs [4, 8]");
  manifest = tensorParallelManifest(0);
  manifest["arguments"][0]["global_shape"] = {4, 8, 1};
  expectError(manifest, "'arguments[0].global_shape' is [4, 8, 1], but "
                        "'fc.weight' needs [4, 8]");
  manifest = tensorParallelManifest(0);
  manifest["arguments"][0]["split"]["axis"] = "xp";
  expectError(manifest, "'arguments[0].split.axis' is \"xp\"");
}

TEST(ManifestTest, DefaultsToOneRankAndWholeTensors) {
  json manifest = exampleManifest();
  manifest.erase("world_size");
  Manifest parsed = parseManifest(manifest.dump(), Path);
  EXPECT_EQ(parsed.worldSize, 1);
  EXPECT_EQ(parsed.grid, (GridVector{1, 1, 1}));
  EXPECT_EQ(parsed.ranks[0].coords, (GridVector{0, 0, 0}));
  EXPECT_EQ(parsed.arguments[1].globalShape, parsed.arguments[1].shape);
  EXPECT_FALSE(parsed.arguments[1].split);

  // Without "grid", the ranks form one dp axis; without "coords", a grid's
  // ranks are numbered tp fastest, then dp, then pp; "global_shape" follows
  // from "split".
  manifest = dataParallelManifest(4);
  manifest.erase("grid");
  for (json &rank : manifest["ranks"])
    rank.erase("coords");
  manifest["arguments"][1].erase("global_shape");
  parsed = parseManifest(manifest.dump(), Path);
  EXPECT_EQ(parsed.grid, (GridVector{4, 1, 1}));
  EXPECT_EQ(parsed.ranks[2].coords, (GridVector{2, 0, 0}));
  EXPECT_EQ(parsed.arguments[1].globalShape, (Shape{8, 8}));

  manifest["grid"] = {{"dp", 1}, {"tp", 2}, {"pp", 2}};
  manifest["arguments"][2].erase("global_shape");
  parsed = parseManifest(manifest.dump(), Path);
  EXPECT_EQ(parsed.arguments[2].globalShape, (Shape{2, 4})); // dp has 1 rank
  EXPECT_EQ(parsed.ranks[1].coords, (GridVector{0, 1, 0}));
  EXPECT_EQ(parsed.ranks[2].coords, (GridVector{0, 0, 1}));
}

TEST(ManifestTest, ReportsBadGridsCoordinatesAndSplits) {
  struct Case {
    const char *pointer;
    json value;
    const char *expected;
  } cases[] = {
      {"/grid/tp", 2,
       "'grid' is dp 4 x tp 2 x pp 1 = 8 ranks, but world_size is 4"},
      {"/grid/pp", 0, "'grid.pp' must be at least 1, got 0"},
      {"/grid", 4, "'grid' must be an object"},
      {"/ranks/1/coords/dp", 4,
       "'ranks[1].coords.dp' is 4, but grid axis dp has 4 ranks"},
      {"/ranks/1/coords/dp", 0,
       "'ranks[1].coords' repeats the coordinates of rank 0"},
      {"/ranks/1/coords", json::array(), "'ranks[1].coords' must be an object"},
      {"/arguments/1/split/axis", "cp",
       "'arguments[1].split.axis' is \"cp\", expected \"dp\", \"tp\" or "
       "\"pp\""},
      {"/arguments/1/split/dim", 2,
       "'arguments[1].split.dim' is 2, but 'x' has rank 2"},
      {"/arguments/1/global_shape", json{8, 4},
       "'arguments[1].global_shape' is [8, 4], but 'x' needs [8, 8] (shape "
       "[2, 8] with dim 0 times 4, the size of grid axis dp)"},
      {"/arguments/0/split", json{{"axis", "dp"}, {"dim", 2}},
       "'arguments[0].split.dim' is 2, but 'fc.weight' has rank 2"},
      {"/arguments/1/split",
       json::array(
           {{{"axis", "dp"}, {"dim", 0}}, {{"axis", "tp"}, {"dim", 1}}}),
       "'arguments[1].split' lists two splits of 'x', which only "
       "parameters, optimizer states and updates may have"},
      {"/arguments/0/split",
       json::array({{{"axis", "dp"}, {"dim", 0}},
                    {{"axis", "tp"}, {"dim", 1}},
                    {{"axis", "pp"}, {"dim", 1}}}),
       "'arguments[0].split' lists 3 splits of 'fc.weight', but autopar-run "
       "supports one split per tensor, or two (a block of a block)"},
      {"/arguments/0/split",
       json::array(
           {{{"axis", "dp"}, {"dim", 0}}, {{"axis", "dp"}, {"dim", 1}}}),
       "'arguments[0].split[1].axis' is \"dp\" again: the two splits of "
       "'fc.weight' must be over different grid axes"},
      {"/arguments/1/split", 3, "'arguments[1].split' must be an object"},
      {"/arguments/0/global_shape", json{8, 8},
       "'arguments[0].global_shape' is [8, 8], but 'fc.weight' needs [4, 8] "
       "(its shape, as it is not split)"},
  };
  for (const Case &c : cases) {
    json manifest = dataParallelManifest(4);
    manifest[json::json_pointer(c.pointer)] = c.value;
    SCOPED_TRACE(c.pointer);
    expectError(manifest, c.expected);
  }
  json manifest = dataParallelManifest(4);
  manifest["ranks"][2].erase("coords");
  expectError(manifest,
              "'ranks[2]' must have \"coords\" if and only if ranks[0] has");
  manifest = dataParallelManifest(4);
  manifest["ranks"][0].erase("coords");
  expectError(manifest,
              "'ranks[1]' must have \"coords\" if and only if ranks[0] has");
}

/// The pipeline example of docs/design/artifact.md: 2 stages, each on 2
/// data-parallel ranks, 2 micro-batches of 2 per replica.
json pipelineManifest() {
  return json::parse(R"({
    "format": "autopar-artifact",
    "version": 1,
    "model": "/abs/path/model.onnx",
    "cluster": "local:4",
    "world_size": 4,
    "grid": { "dp": 2, "tp": 1, "pp": 2 },
    "pipeline": { "stages": 2, "micro_batches": 2, "micro_batch_size": 2,
                  "schedule": "1f1b" },
    "programs": [
      { "name": "stage0", "library": "stage0.so", "entry": "autopar_entry",
        "arguments": [
          { "kind": "parameter", "name": "fc1.weight", "dtype": "float32",
            "shape": [8, 8],
            "source": { "file": "model.onnx", "offset": 0, "length": 256 } },
          { "kind": "input", "name": "x", "dtype": "float32", "shape": [2, 8],
            "global_shape": [8, 8], "split": { "axis": "dp", "dim": 0 } },
          { "kind": "activation_out", "name": "/fc1/Relu", "dtype": "float32",
            "shape": [2, 8], "peer_stage": 1 } ] },
      { "name": "stage1", "library": "stage1.so", "entry": "autopar_entry",
        "arguments": [
          { "kind": "parameter", "name": "fc2.weight", "dtype": "float32",
            "shape": [4, 8],
            "source": { "file": "model.onnx", "offset": 256, "length": 128 } },
          { "kind": "activation_in", "name": "/fc1/Relu", "dtype": "float32",
            "shape": [2, 8], "peer_stage": 0 },
          { "kind": "output", "name": "y", "dtype": "float32", "shape": [2, 4],
            "global_shape": [8, 4], "split": { "axis": "dp", "dim": 0 } } ] } ],
    "ranks": [
      { "rank": 0, "program": "stage0", "coords": { "dp": 0, "tp": 0, "pp": 0 } },
      { "rank": 1, "program": "stage0", "coords": { "dp": 1, "tp": 0, "pp": 0 } },
      { "rank": 2, "program": "stage1", "coords": { "dp": 0, "tp": 0, "pp": 1 } },
      { "rank": 3, "program": "stage1", "coords": { "dp": 1, "tp": 0, "pp": 1 } } ]
  })");
}

TEST(ManifestTest, ParsesPipelines) {
  Manifest parsed = parseManifest(pipelineManifest().dump(), Path);
  ASSERT_TRUE(parsed.pipeline);
  EXPECT_EQ(parsed.pipeline->stages, 2);
  EXPECT_EQ(parsed.pipeline->microBatches, 2);
  EXPECT_EQ(parsed.pipeline->microBatchSize, 2);
  EXPECT_EQ(parsed.pipeline->schedule, ScheduleKind::OneFOneB);
  EXPECT_EQ(parsed.microBatches(), 2);
  EXPECT_TRUE(parsed.arguments.empty());
  EXPECT_EQ(parsed.programForRank(3).name, "stage1");
  EXPECT_EQ(parsed.programs[0].stage, 0);
  EXPECT_EQ(parsed.programs[1].stage, 1);
  const ArgumentDesc &x = parsed.programs[0].arguments[1];
  EXPECT_EQ(x.shape, (Shape{2, 8}));
  EXPECT_EQ(x.rankShape, (Shape{4, 8})); // both micro-batches
  EXPECT_EQ(x.globalShape, (Shape{8, 8}));
  const ArgumentDesc &sent = parsed.programs[0].arguments[2];
  EXPECT_EQ(sent.kind, ArgumentKind::ActivationOut);
  EXPECT_EQ(sent.peerStage, 1);
  EXPECT_EQ(sent.rankShape, sent.shape);
  EXPECT_EQ(parsed.programs[1].arguments[1].kind, ArgumentKind::ActivationIn);

  // With one micro-batch, inputs and outputs are as without a pipeline: a
  // scalar output, an input whose dim 0 is the replica's batch.
  json one = pipelineManifest();
  one["pipeline"]["micro_batches"] = 1;
  one["programs"][0]["arguments"][1]["shape"] = {4, 8};
  json &y = one["programs"][1]["arguments"][2];
  y["shape"] = json::array();
  y.erase("split");
  y.erase("global_shape");
  parsed = parseManifest(one.dump(), Path);
  EXPECT_EQ(parsed.programs[0].arguments[1].rankShape, (Shape{4, 8}));
  EXPECT_EQ(parsed.programs[1].arguments[2].rankShape, Shape{});

  // A program without its own list takes the top-level one.
  json manifest = pipelineManifest();
  manifest["grid"] = {{"dp", 4}, {"tp", 1}, {"pp", 1}};
  manifest["pipeline"]["stages"] = 1;
  manifest["arguments"] = {manifest["programs"][0]["arguments"][1]};
  manifest["programs"].erase(1);
  manifest["programs"][0].erase("arguments");
  for (json &rank : manifest["ranks"]) {
    rank["program"] = "stage0";
    rank["coords"] = {{"dp", rank["rank"]}, {"tp", 0}, {"pp", 0}};
  }
  manifest["arguments"][0]["global_shape"] = {16, 8};
  parsed = parseManifest(manifest.dump(), Path);
  EXPECT_EQ(parsed.programs[0].arguments.size(), 1u);
  EXPECT_EQ(parsed.programs[0].arguments[0].globalShape, (Shape{16, 8}));
}

/// A pipeline-parallel training artifact (docs/design/training-artifact.md):
/// 2 stages, 2 micro-batches of 1; each stage's ranks run its step, and its
/// forward and backward per micro-batch.
json trainingPipelineManifest() {
  return json::parse(R"({
    "format": "autopar-artifact", "version": 1, "model": "/abs/m.onnx",
    "cluster": "local:2", "world_size": 2, "mode": "train",
    "training": { "loss": "loss", "global_batch": 2 },
    "grid": { "dp": 1, "tp": 1, "pp": 2 },
    "pipeline": { "stages": 2, "micro_batches": 2, "micro_batch_size": 1,
                  "schedule": "gpipe" },
    "programs": [
      { "name": "stage0", "library": "stage0.so", "entry": "autopar_entry",
        "arguments": [
          { "kind": "parameter", "name": "w", "dtype": "float32", "shape": [4],
            "trainable": true,
            "source": { "file": "model.onnx", "offset": 0, "length": 16 } },
          { "kind": "accumulator", "name": "w.grad", "dtype": "float32",
            "shape": [4] },
          { "kind": "input", "name": "x", "dtype": "float32", "shape": [1, 4],
            "global_shape": [2, 4] },
          { "kind": "output", "name": "loss", "dtype": "float32", "shape": [] },
          { "kind": "update", "name": "w.next", "updates": "w",
            "dtype": "float32", "shape": [4] } ] },
      { "name": "stage1", "library": "stage1.so", "entry": "autopar_entry",
        "arguments": [
          { "kind": "accumulator", "name": "loss.sum", "dtype": "float32",
            "shape": [] },
          { "kind": "output", "name": "loss", "dtype": "float32", "shape": [] } ] },
      { "name": "stage0.forward", "library": "f0.so", "entry": "autopar_entry",
        "phase": "forward", "stage": 0,
        "arguments": [
          { "kind": "input", "name": "x", "dtype": "float32", "shape": [1, 4],
            "global_shape": [2, 4] },
          { "kind": "activation_out", "name": "h", "dtype": "float32",
            "shape": [1, 4], "peer_stage": 1 },
          { "kind": "residual", "name": "residual.0", "dtype": "float32",
            "shape": [1, 4] } ] },
      { "name": "stage0.backward", "library": "b0.so", "entry": "autopar_entry",
        "phase": "backward", "stage": 0,
        "arguments": [
          { "kind": "residual", "name": "residual.0", "dtype": "float32",
            "shape": [1, 4] },
          { "kind": "activation_in", "name": "h.grad", "dtype": "float32",
            "shape": [1, 4], "peer_stage": 1 } ] },
      { "name": "stage1.forward", "library": "f1.so", "entry": "autopar_entry",
        "phase": "forward", "stage": 1,
        "arguments": [
          { "kind": "activation_in", "name": "h", "dtype": "float32",
            "shape": [1, 4], "peer_stage": 0 },
          { "kind": "sample_offset", "name": "sample_offset", "dtype": "int64",
            "shape": [] } ] },
      { "name": "stage1.backward", "library": "b1.so", "entry": "autopar_entry",
        "phase": "backward", "stage": 1,
        "arguments": [
          { "kind": "activation_out", "name": "h.grad", "dtype": "float32",
            "shape": [1, 4], "peer_stage": 0 } ] } ],
    "ranks": [
      { "rank": 0, "program": "stage0", "coords": { "dp": 0, "tp": 0, "pp": 0 } },
      { "rank": 1, "program": "stage1", "coords": { "dp": 0, "tp": 0, "pp": 1 } } ]
  })");
}

TEST(ManifestTest, ParsesTrainingPipelines) {
  Manifest parsed = parseManifest(trainingPipelineManifest().dump(), Path);
  EXPECT_TRUE(parsed.isPipelineTraining());
  EXPECT_EQ(parsed.programForRank(1).name, "stage1");
  EXPECT_EQ(parsed.programs[1].stage, 1);
  const ProgramDesc *forward = parsed.phaseProgram(1, "forward");
  ASSERT_NE(forward, nullptr);
  EXPECT_EQ(forward->name, "stage1.forward");
  EXPECT_EQ(forward->arguments[1].kind, ArgumentKind::SampleOffset);
  const ProgramDesc *backward = parsed.phaseProgram(0, "backward");
  ASSERT_NE(backward, nullptr);
  EXPECT_EQ(backward->arguments[0].kind, ArgumentKind::Residual);
  EXPECT_EQ(backward->arguments[1].peerStage, 1);
  EXPECT_EQ(parsed.programs[0].arguments[1].kind, ArgumentKind::Accumulator);
  // The step's loss is one per step, not one per micro-batch; its inputs
  // hold every micro-batch.
  EXPECT_EQ(parsed.programs[0].arguments[3].rankShape, Shape{});
  EXPECT_EQ(parsed.programs[0].arguments[2].rankShape, (Shape{2, 4}));
  EXPECT_EQ(parsed.phaseProgram(2, "forward"), nullptr);
  EXPECT_FALSE(
      parseManifest(pipelineManifest().dump(), Path).isPipelineTraining());
}

/// The training pipeline with an eval program per stage (--eval-data).
json trainingPipelineWithEval() {
  json manifest = trainingPipelineManifest();
  manifest["training"]["eval_program"] = "stage0.eval";
  manifest["programs"].push_back(json::parse(R"({
    "name": "stage0.eval", "library": "e0.so", "entry": "autopar_entry",
    "phase": "eval", "stage": 0,
    "arguments": [
      { "kind": "parameter", "name": "w", "dtype": "float32", "shape": [4],
        "trainable": true,
        "source": { "file": "model.onnx", "offset": 0, "length": 16 } },
      { "kind": "input", "name": "x", "dtype": "float32", "shape": [1, 4],
        "global_shape": [2, 4] },
      { "kind": "activation_out", "name": "e", "dtype": "float32",
        "shape": [1, 4], "peer_stage": 1 } ] })"));
  manifest["programs"].push_back(json::parse(R"({
    "name": "stage1.eval", "library": "e1.so", "entry": "autopar_entry",
    "phase": "eval", "stage": 1,
    "arguments": [
      { "kind": "activation_in", "name": "e", "dtype": "float32",
        "shape": [1, 4], "peer_stage": 0 },
      { "kind": "output", "name": "loss", "dtype": "float32", "shape": [] },
      { "kind": "output", "name": "loss.denominator", "dtype": "float32",
        "shape": [] } ] })"));
  return manifest;
}

TEST(ManifestTest, ParsesTrainingPipelineEvalPrograms) {
  Manifest parsed = parseManifest(trainingPipelineWithEval().dump(), Path);
  EXPECT_TRUE(parsed.isPipelineTraining());
  ASSERT_TRUE(parsed.training);
  EXPECT_EQ(parsed.training->evalProgram, "stage0.eval");
  const ProgramDesc *eval = parsed.phaseProgram(1, "eval");
  ASSERT_NE(eval, nullptr);
  EXPECT_EQ(eval->name, "stage1.eval");
  EXPECT_EQ(eval->arguments[0].kind, ArgumentKind::ActivationIn);
  EXPECT_EQ(eval->arguments[0].peerStage, 0);
  // Each eval input holds every micro-batch of the rank's batch, as the
  // forward's do.
  EXPECT_EQ(parsed.phaseProgram(0, "eval")->arguments[1].rankShape,
            (Shape{2, 4}));
}

TEST(ManifestTest, ReportsBadTrainingPipelineEvalPrograms) {
  // Stage 1's eval program receives what stage 0's sends, in order.
  json manifest = trainingPipelineWithEval();
  manifest["programs"][7]["arguments"][0]["shape"] = {1, 8};
  expectError(manifest, "'programs[7].arguments[0]' receives activation_in "
                        "'e' (float32 [1, 8]) where program 'stage0.eval' "
                        "sends activation_out 'e' (float32 [1, 4])");
  // Activations go forward, as the forwards' do.
  manifest = trainingPipelineWithEval();
  manifest["programs"][6]["arguments"][2]["peer_stage"] = 0;
  expectError(manifest, "'programs[6].arguments[2].peer_stage' is 0, but "
                        "program 'stage0.eval' runs stage 0, whose "
                        "activations go to stage 1");
  // Every stage has one when stage 0 has.
  manifest = trainingPipelineWithEval();
  manifest["programs"].erase(7);
  expectError(manifest, "'programs' has no eval program for pipeline stage 1");
}

TEST(ManifestTest, ReportsBadTrainingPipelines) {
  struct Case {
    const char *pointer;
    json value;
    const char *expected;
  } cases[] = {
      {"/programs/2/phase", "sideways",
       "'programs[2].phase' is \"sideways\", expected \"forward\", "
       "\"backward\" or \"eval\""},
      {"/programs/2/stage", 2,
       "'programs[2].stage' is 2, but the pipeline has 2 stages"},
      {"/ranks/1/program", "stage1.forward",
       "'ranks[1].program' is 'stage1.forward', a forward program, which "
       "ranks run per micro-batch beside their step, not as it"},
      // A backward's cotangents come from the next stage.
      {"/programs/3/arguments/1/peer_stage", 0,
       "'programs[3].arguments[1].peer_stage' is 0, but program "
       "'stage0.backward' runs stage 0, whose cotangents come from stage 1"},
      {"/programs/5/arguments/0/name", "g",
       "'programs[3].arguments[1]' receives activation_in 'h.grad' (float32 "
       "[1, 4]) where program 'stage1.backward' sends activation_out 'g'"},
  };
  for (const Case &c : cases) {
    json manifest = trainingPipelineManifest();
    manifest[json::json_pointer(c.pointer)] = c.value;
    SCOPED_TRACE(c.pointer);
    expectError(manifest, c.expected);
  }
  json manifest = trainingPipelineManifest();
  manifest["programs"].erase(4);
  expectError(manifest,
              "'programs' has no forward program for pipeline stage 1");
  // A step exchanges nothing; a phase needs a training pipeline.
  manifest = trainingPipelineManifest();
  manifest["programs"][1]["arguments"].push_back(
      manifest["programs"][4]["arguments"][0]);
  expectError(manifest, "'programs[1].arguments[2]' is activation_in 'h' "
                        "(float32 [1, 4]) of program 'stage1', a training "
                        "pipeline's step, which exchanges no activations");
  manifest = pipelineManifest();
  manifest["programs"][0]["phase"] = "forward";
  expectError(manifest, "'programs[0].phase' is only allowed in a training "
                        "artifact with a \"pipeline\"");
}

/// The training pipeline interleaved over 2 model chunks per stage: 4
/// virtual stages, chunk c of stage s at c * 2 + s, each with a forward that
/// sends `h<v>` on and a backward that sends its cotangent back.
json interleavedPipelineManifest() {
  json manifest = trainingPipelineManifest();
  manifest["pipeline"]["schedule"] = "1f1b";
  manifest["pipeline"]["virtual_stages"] = 2;
  json programs =
      json::array({manifest["programs"][0], manifest["programs"][1]});
  auto activation = [](const char *kind, const std::string &name,
                       int64_t peer) {
    return json{{"kind", kind},
                {"name", name},
                {"dtype", "float32"},
                {"shape", {1, 4}},
                {"peer_stage", peer}};
  };
  for (int64_t v = 0; v < 4; ++v) {
    std::string name =
        "stage" + std::to_string(v % 2) + ".chunk" + std::to_string(v / 2);
    json forward = {{"name", name + ".forward"},
                    {"library", name + ".f.so"},
                    {"entry", "autopar_entry"},
                    {"phase", "forward"},
                    {"stage", v},
                    {"arguments", json::array()}};
    json backward = forward;
    backward["name"] = name + ".backward";
    backward["library"] = name + ".b.so";
    backward["phase"] = "backward";
    std::string in = "h" + std::to_string(v - 1), out = "h" + std::to_string(v);
    if (v > 0) {
      forward["arguments"].push_back(activation("activation_in", in, v - 1));
      backward["arguments"].push_back(
          activation("activation_out", in + ".grad", v - 1));
    }
    if (v < 3) {
      forward["arguments"].push_back(activation("activation_out", out, v + 1));
      backward["arguments"].push_back(
          activation("activation_in", out + ".grad", v + 1));
    }
    programs.push_back(forward);
    programs.push_back(backward);
  }
  manifest["programs"] = programs;
  return manifest;
}

TEST(ManifestTest, ParsesInterleavedPipelines) {
  Manifest parsed = parseManifest(interleavedPipelineManifest().dump(), Path);
  ASSERT_TRUE(parsed.pipeline);
  EXPECT_EQ(parsed.pipeline->virtualStages, 2);
  EXPECT_EQ(parsed.pipeline->chunkStages(), 4);
  EXPECT_TRUE(parsed.isPipelineTraining());
  // Phase programs are found by their virtual stage; chunk 1 of stage 0
  // receives from virtual stage 1, which stage 1 runs.
  const ProgramDesc *forward = parsed.phaseProgram(2, "forward");
  ASSERT_NE(forward, nullptr);
  EXPECT_EQ(forward->name, "stage0.chunk1.forward");
  EXPECT_EQ(forward->arguments[0].peerStage, 1);
  EXPECT_EQ(parsed.programForRank(1).name, "stage1");
  // Without the key, one chunk.
  EXPECT_EQ(parseManifest(trainingPipelineManifest().dump(), Path)
                .pipeline->virtualStages,
            1);
}

TEST(ManifestTest, ReportsBadInterleavedPipelines) {
  struct Case {
    const char *pointer;
    json value;
    const char *expected;
  } cases[] = {
      {"/pipeline/virtual_stages", 0,
       "'pipeline.virtual_stages' must be at least 1, got 0"},
      {"/pipeline/schedule", "gpipe",
       "'pipeline.virtual_stages' is 2: virtual stages (the interleaved "
       "schedule) need the 1f1b schedule, not gpipe"},
      {"/pipeline/micro_batches", 3,
       "'pipeline.virtual_stages' is 2: the interleaved schedule runs "
       "micro-batches in groups of the 2 pipeline stages; 3 micro-batches "
       "are not a multiple"},
      {"/programs/8/stage", 4,
       "'programs[8].stage' is 4, but the pipeline has 4 virtual stages"},
      // Virtual stage 2's activations come from virtual stage 1.
      {"/programs/6/arguments/0/peer_stage", 0,
       "'programs[6].arguments[0].peer_stage' is 0, but program "
       "'stage0.chunk1.forward' runs stage 2, whose activations come from "
       "stage 1"},
  };
  for (const Case &c : cases) {
    json manifest = interleavedPipelineManifest();
    manifest[json::json_pointer(c.pointer)] = c.value;
    SCOPED_TRACE(c.pointer);
    expectError(manifest, c.expected);
  }
  // Every virtual stage has its programs.
  json manifest = interleavedPipelineManifest();
  manifest["programs"].erase(8);
  expectError(manifest,
              "'programs' has no forward program for pipeline stage 3");
  // Inference pipelines run no interleaved schedule.
  manifest = pipelineManifest();
  manifest["pipeline"]["virtual_stages"] = 2;
  manifest["pipeline"]["schedule"] = "1f1b";
  manifest["pipeline"]["micro_batches"] = 2;
  expectError(manifest, "'pipeline.virtual_stages' is 2, but virtual stages "
                        "(the interleaved 1F1B schedule) are for training "
                        "pipelines");
}

TEST(ManifestTest, ReportsBadPipelines) {
  struct Case {
    const char *pointer;
    json value;
    const char *expected;
  } cases[] = {
      {"/pipeline/stages", 3,
       "'pipeline.stages' is 3, but grid.pp is 2 (one stage per pp "
       "coordinate)"},
      {"/pipeline/micro_batches", 0,
       "'pipeline.micro_batches' must be at least 1, got 0"},
      {"/pipeline/schedule", "zb",
       "'pipeline.schedule' is \"zb\", expected \"gpipe\" or \"1f1b\""},
      {"/programs/1/arguments/1/peer_stage", 1,
       "'programs[1].arguments[1].peer_stage' is 1, but program 'stage1' runs "
       "stage 1, whose activations come from stage 0"},
      {"/programs/1/arguments/1/peer_stage", 2,
       "'programs[1].arguments[1].peer_stage' is 2, but the pipeline has 2 "
       "stages"},
      {"/programs/1/arguments/1/name", "h",
       "'programs[1].arguments[1]' receives activation_in 'h' (float32 [2, "
       "8]) where program 'stage0' sends activation_out '/fc1/Relu' (float32 "
       "[2, 8])"},
      {"/programs/1/arguments/1/shape", json{2, 4},
       "receives activation_in '/fc1/Relu' (float32 [2, 4]) where"},
      {"/programs/0/arguments/2/split", json{{"axis", "dp"}, {"dim", 0}},
       "'programs[0].arguments[2].split' is not allowed on activations"},
      {"/programs/0/arguments/1/peer_stage", 1,
       "'programs[0].arguments[1].peer_stage' is only allowed on activations, "
       "but 'x' is of kind \"input\""},
      {"/programs/0/arguments/1/shape", json{4, 8},
       "'programs[0].arguments[1].shape' is [4, 8], but 'x', an input of a "
       "pipeline of 2 micro-batches, must hold one micro-batch of 2 along dim "
       "0"},
      {"/programs/0/arguments/1/global_shape", json{4, 8},
       "'programs[0].arguments[1].global_shape' is [4, 8], but 'x' needs [8, "
       "8] (shape [2, 8] with dim 0 times 2, the micro-batches, with dim 0 "
       "times 2, the size of grid axis dp)"},
      {"/programs/0/arguments/1/split/dim", 1,
       "'programs[0].arguments[1].split.dim' is 1, but 'x' holds several "
       "micro-batches along dim 0"},
      {"/programs/1/arguments/2/kind", "weights",
       "'programs[1].arguments[2].kind' is \"weights\", expected "
       "\"parameter\", \"input\", \"output\", \"activation_in\", "
       "\"activation_out\", \"optimizer_state\", \"step\", \"seed\", "
       "\"metric\", \"update\", \"sample_offset\", \"residual\" or "
       "\"accumulator\""},
      {"/ranks/1/program", "stage1",
       "'ranks[1].program' is 'stage1', but another rank of pipeline stage 0 "
       "runs 'stage0' (each stage has one program)"},
      {"/ranks/3/program", "stage0",
       "'ranks[3].program' is 'stage0' on pipeline stage 1, but another rank "
       "runs it on stage 0"},
  };
  for (const Case &c : cases) {
    json manifest = pipelineManifest();
    manifest[json::json_pointer(c.pointer)] = c.value;
    SCOPED_TRACE(c.pointer);
    expectError(manifest, c.expected);
  }

  json manifest = pipelineManifest();
  manifest["programs"][1]["arguments"].erase(1);
  expectError(manifest, "'programs[0].arguments[2]' sends activation_out "
                        "'/fc1/Relu' (float32 [2, 8]) to stage 1, but program "
                        "'stage1' receives only 0 activation(s)");
  manifest = pipelineManifest();
  manifest["programs"][0]["arguments"].erase(2);
  expectError(manifest, "'programs[1].arguments[1]' receives activation_in "
                        "'/fc1/Relu' (float32 [2, 8]) from stage 0, but "
                        "program 'stage0' sends only 0 activation(s)");
  manifest = pipelineManifest();
  manifest.erase("pipeline");
  // Without micro-batches, x's blocks are its shape.
  expectError(manifest, "'programs[0].arguments[1].global_shape' is [8, 8], "
                        "but 'x' needs [4, 8]");
  manifest["programs"][0]["arguments"][1]["shape"] = {4, 8};
  expectError(manifest, "'programs[0].arguments[2].kind' is "
                        "\"activation_out\", which needs a \"pipeline\"");
  manifest = pipelineManifest();
  manifest["programs"][1].erase("arguments");
  expectError(manifest, "missing key 'arguments'");
  manifest = pipelineManifest();
  manifest["programs"][0]["arguments"].push_back(
      manifest["programs"][1]["arguments"][2]);
  expectError(manifest, "'programs[1].arguments[2]' is output 'y', which "
                        "program 'stage0' of another pipeline stage produces "
                        "too; each output comes from one stage");
  manifest = pipelineManifest();
  json x = manifest["programs"][0]["arguments"][1];
  x.erase("split");
  x.erase("global_shape");
  manifest["programs"][1]["arguments"].push_back(x);
  expectError(manifest, "'programs[1].arguments[3]' describes input 'x' "
                        "(float32 [2, 8]) unlike another program");
}

TEST(ManifestTest, ReportsInvalidJson) {
  std::string message;
  try {
    parseManifest("{\"format\": ", Path);
  } catch (const Error &error) {
    message = error.what();
  }
  EXPECT_EQ(message.rfind(Path + ": invalid JSON: ", 0), 0u) << message;
  EXPECT_NE(parseError(json::array()).find("must hold a JSON object"),
            std::string::npos);
}

// Found by autopar-fuzz-manifest (Inputs/fuzz/manifest-number-overflow.json):
// a number too large for a double ("tp": 1e3004) made nlohmann::json throw
// out_of_range, not parse_error, which escaped parseManifest and aborted
// autopar-run.
TEST(ManifestTest, ReportsNumbersTooLargeForADouble) {
  for (std::string text :
       {readFile(AUTOPAR_RUNTIME_TEST_INPUTS
                 "/fuzz/manifest-number-overflow.json"),
        std::string(
            "{\"format\": \"autopar-artifact\", \"version\": 1e400}")}) {
    std::string message = "(no error)";
    try {
      parseManifest(text, Path);
    } catch (const Error &error) {
      message = error.what();
    }
    EXPECT_EQ(message.rfind(Path + ": invalid JSON: ", 0), 0u) << message;
    EXPECT_NE(message.find("number overflow"), std::string::npos) << message;
  }
}

TEST(ManifestTest, ReadsFilesAndReportsMissingOnes) {
  TempDir dir;
  writeFile(dir.file("manifest.json"), exampleManifest().dump(2));
  EXPECT_EQ(readManifest(dir.file("manifest.json")).arguments.size(), 3u);
  try {
    readManifest(dir.file("nope.json"));
    FAIL() << "expected an error";
  } catch (const Error &error) {
    EXPECT_NE(
        std::string(error.what()).find(dir.file("nope.json") + ": cannot open"),
        std::string::npos)
        << error.what();
  }
}

TEST(ManifestTest, ParsesTheTargetAndDeviceCode) {
  // Without "target", an artifact is the CPU's.
  Manifest parsed = parseManifest(exampleManifest().dump(), Path);
  EXPECT_EQ(parsed.target.kind, TargetKind::Cpu);
  EXPECT_TRUE(parsed.target.arch.empty());
  EXPECT_TRUE(parsed.programs[0].deviceCode.empty());

  json manifest = exampleManifest();
  manifest["target"] = {
      {"kind", "cuda"}, {"arch", "sm_90"}, {"precision", "bf16"}};
  manifest["programs"][0]["device_code"] = {"device/stage0.sm_90.cubin"};
  parsed = parseManifest(manifest.dump(), Path);
  EXPECT_EQ(parsed.target.kind, TargetKind::Cuda);
  EXPECT_EQ(targetKindName(parsed.target.kind), "cuda");
  EXPECT_EQ(parsed.target.arch, "sm_90");
  EXPECT_EQ(parsed.target.precision, "bf16");
  EXPECT_EQ(parsed.programs[0].deviceCode,
            std::vector<std::string>{"device/stage0.sm_90.cubin"});

  manifest["target"] = {{"kind", "cpu"}};
  EXPECT_EQ(parseManifest(manifest.dump(), Path).target.kind, TargetKind::Cpu);
}

TEST(ManifestTest, ReportsBadTargets) {
  struct Case {
    json target;
    std::string expected;
  } cases[] = {
      {{{"kind", "rocm"}},
       "'target.kind' is \"rocm\", but this autopar-run runs only \"cpu\" "
       "and \"cuda\" artifacts"},
      {json::object(), "missing key 'target.kind'"},
      {"cuda", "'target' must be an object"},
      {{{"kind", "cuda"}, {"arch", 90}}, "'target.arch' must be a string"},
      {{{"kind", "cuda"}, {"precision", "int8"}},
       "'target.precision' is \"int8\", expected \"fp32\", \"bf16\" or "
       "\"fp16\""},
  };
  for (const Case &c : cases) {
    json manifest = exampleManifest();
    manifest["target"] = c.target;
    expectError(manifest, c.expected);
  }
  json manifest = exampleManifest();
  manifest["programs"][0]["device_code"] = {"a.cubin", 3};
  expectError(manifest,
              "'programs[0].device_code[1]' must be a non-empty string");
  manifest["programs"][0]["device_code"] = "a.cubin";
  expectError(manifest, "'programs[0].device_code' must be an array");
}

TEST(ManifestTest, ParsesSourceDTypes) {
  json manifest = exampleManifest();
  Manifest parsed = parseManifest(manifest.dump(), Path);
  // Without source_dtype, the source holds the parameter's own type.
  EXPECT_EQ(parsed.arguments[0].sourceDType, DType::Float32);

  manifest["arguments"][0]["dtype"] = "bfloat16";
  manifest["arguments"][0]["source_dtype"] = "float32";
  parsed = parseManifest(manifest.dump(), Path);
  EXPECT_EQ(parsed.arguments[0].dtype, DType::BFloat16);
  EXPECT_EQ(parsed.arguments[0].sourceDType, DType::Float32);
  manifest["arguments"][0]["dtype"] = "float16";
  EXPECT_EQ(parseManifest(manifest.dump(), Path).arguments[0].dtype,
            DType::Float16);

  manifest["arguments"][0]["dtype"] = "int8";
  expectError(manifest, "'arguments[0].source_dtype' is \"float32\", but "
                        "'fc.weight' has dtype \"int8\"; autopar-run "
                        "converts only float32 sources to float16 or "
                        "bfloat16");
  manifest["arguments"][0]["dtype"] = "bfloat16";
  manifest["arguments"][0]["source_dtype"] = "float64";
  expectError(manifest, "'arguments[0].source_dtype' is \"float64\"");
  manifest["arguments"][0]["source_dtype"] = "double";
  expectError(manifest,
              "'arguments[0].source_dtype' is \"double\", expected one of");

  manifest = exampleManifest();
  manifest["arguments"][1]["source_dtype"] = "float32";
  expectError(manifest, "'arguments[1].source_dtype' is only allowed on "
                        "parameters, but 'x' is an input");
}

} // namespace

namespace {

/// A training step's manifest (docs/design/training-artifact.md).
json trainingManifest() {
  json m = exampleManifest();
  m["mode"] = "train";
  m["training"] = {{"loss", "loss"}, {"global_batch", 2}};
  m["arguments"] = json::parse(R"([
    { "kind": "parameter", "name": "fc.weight", "dtype": "float32", "shape": [4, 8],
      "trainable": true,
      "source": { "file": "/abs/path/model.onnx", "offset": 1234, "length": 128 } },
    { "kind": "optimizer_state", "name": "fc.weight.momentum", "role": "momentum",
      "of": "fc.weight", "dtype": "float32", "shape": [4, 8] },
    { "kind": "step", "name": "step", "dtype": "int64", "shape": [] },
    { "kind": "seed", "name": "seed", "dtype": "int64", "shape": [] },
    { "kind": "input", "name": "x", "dtype": "float32", "shape": [2, 8] },
    { "kind": "output", "name": "loss", "dtype": "float32", "shape": [] },
    { "kind": "metric", "name": "lr", "dtype": "float32", "shape": [] },
    { "kind": "update", "name": "fc.weight.next", "updates": "fc.weight",
      "dtype": "float32", "shape": [4, 8] }
  ])");
  return m;
}

TEST(ManifestTest, ParsesATrainingStep) {
  Manifest manifest = parseManifest(trainingManifest().dump(), Path);
  ASSERT_TRUE(manifest.training);
  EXPECT_EQ(manifest.training->loss, "loss");
  EXPECT_EQ(manifest.training->globalBatch, 2);
  const std::vector<ArgumentDesc> &args = manifest.arguments;
  ASSERT_EQ(args.size(), 8u);
  EXPECT_TRUE(args[0].trainable);
  EXPECT_EQ(args[1].kind, ArgumentKind::OptimizerState);
  EXPECT_EQ(args[1].role, "momentum");
  EXPECT_EQ(args[1].of, "fc.weight");
  EXPECT_EQ(args[2].kind, ArgumentKind::Step);
  EXPECT_EQ(args[3].kind, ArgumentKind::Seed);
  EXPECT_EQ(args[6].kind, ArgumentKind::Metric);
  EXPECT_EQ(args[7].kind, ArgumentKind::Update);
  EXPECT_EQ(args[7].updates, "fc.weight");
  EXPECT_FALSE(parseManifest(exampleManifest().dump(), Path).training);
  EXPECT_EQ(manifest.training->inferenceTemplate, "");
}

TEST(ManifestTest, TheInferenceTemplateIsRelativeToTheArtifact) {
  json m = trainingManifest();
  m["training"]["inference_template"] = "inference-template.onnx";
  Manifest manifest = parseManifest(m.dump(), Path);
  EXPECT_EQ(
      manifest.training->inferenceTemplate,
      (std::filesystem::path(Path).parent_path() / "inference-template.onnx")
          .string());
  m["training"]["inference_template"] = 3;
  expectError(m, "training.inference_template");
  m = trainingManifest();
  m["training"]["eval_program"] = "eval";
  EXPECT_EQ(parseManifest(m.dump(), Path).training->evalProgram, "eval");
}

TEST(ManifestTest, TrainingKeysAreChecked) {
  json m = trainingManifest();
  m["mode"] = "learn";
  expectError(m, "'mode' is \"learn\", expected \"infer\" or \"train\"");
  m = trainingManifest();
  m.erase("training");
  expectError(m, "training");
  m = trainingManifest();
  m["arguments"][7].erase("updates");
  expectError(m, "arguments[7].updates");
  m = trainingManifest();
  m["arguments"][0]["trainable"] = "yes";
  expectError(m, "'arguments[0].trainable' must be true or false");
  m = trainingManifest();
  m["arguments"][1].erase("of");
  expectError(m, "arguments[1].of");
  // fp16 loss scaling: the smallest scale is read; a scaling without one is
  // an error naming the key.
  m = trainingManifest();
  EXPECT_FALSE(parseManifest(m.dump(), Path).training->minLossScale);
  m["training"]["loss_scaling"] = {{"dynamic", true}, {"min_loss_scale", 2.0}};
  EXPECT_EQ(parseManifest(m.dump(), Path).training->minLossScale, 2.0);
  m["training"]["loss_scaling"] = {{"dynamic", true}};
  expectError(m, "training.loss_scaling.min_loss_scale");
}

} // namespace
