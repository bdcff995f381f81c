//===- TrainCliTest.cpp - autopar-run --train end to end ------------------===//
//
// Runs the real autopar-run on a hand-built training artifact whose program
// is Inputs/train_linear.c (linear regression, SGD with momentum, a rate
// that depends on the step, a non-trainable updated counter): checkpoints,
// --resume (bitwise equal to an uninterrupted run), every damaged-checkpoint
// error, a save killed half-way, --keep-checkpoints and --shuffle, without
// the compiler; and the same artifact as a GPU target on the fake CUDA
// driver, with an eval program, against the CPU run bit for bit.
//
//===----------------------------------------------------------------------===//

#include "autopar/runtime/Crc32.h"
#include "autopar/runtime/Npy.h"

#include "TestUtil.h"

#include "gtest/gtest.h"

#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

using namespace autopar::runtime;
using namespace autopar::runtime::test;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

/// Samples in the data: 4 batches of 2 per epoch.
constexpr int Samples = 8;

class TrainCliTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::vector<float> weights = {0.5f, -0.25f, 0.125f, 0.0f, 0.0f};
    writeFile(artifact.file("weights.bin"), bytesOf(weights));
    fs::copy_file(std::string(AUTOPAR_TEST_STAGE_DIR) + "/train_linear.so",
                  artifact.file("stage0.so"));
    manifest = json::parse(R"({
      "format": "autopar-artifact", "version": 1, "model": "linear.onnx",
      "cluster": "local:1", "world_size": 1, "mode": "train",
      "training": {"loss": "loss", "global_batch": 2},
      "programs": [{"name": "stage0", "library": "stage0.so", "entry": "autopar_entry"}],
      "ranks": [{"rank": 0, "program": "stage0"}],
      "arguments": [
        {"kind": "parameter", "name": "w", "dtype": "float32", "shape": [3],
         "trainable": true, "source": {"file": "weights.bin", "offset": 0, "length": 12}},
        {"kind": "parameter", "name": "b", "dtype": "float32", "shape": [1],
         "trainable": true, "source": {"file": "weights.bin", "offset": 12, "length": 4}},
        {"kind": "parameter", "name": "seen", "dtype": "float32", "shape": [1],
         "trainable": false, "source": {"file": "weights.bin", "offset": 16, "length": 4}},
        {"kind": "optimizer_state", "name": "w.momentum", "role": "momentum", "of": "w",
         "dtype": "float32", "shape": [3]},
        {"kind": "optimizer_state", "name": "b.momentum", "role": "momentum", "of": "b",
         "dtype": "float32", "shape": [1]},
        {"kind": "step", "name": "step", "dtype": "int64", "shape": []},
        {"kind": "input", "name": "x", "dtype": "float32", "shape": [2, 3]},
        {"kind": "input", "name": "y", "dtype": "float32", "shape": [2]},
        {"kind": "output", "name": "loss", "dtype": "float32", "shape": []},
        {"kind": "metric", "name": "lr", "dtype": "float32", "shape": []},
        {"kind": "metric", "name": "grad_norm", "dtype": "float32", "shape": []},
        {"kind": "update", "name": "w.next", "updates": "w", "dtype": "float32", "shape": [3]},
        {"kind": "update", "name": "b.next", "updates": "b", "dtype": "float32", "shape": [1]},
        {"kind": "update", "name": "seen.next", "updates": "seen", "dtype": "float32", "shape": [1]},
        {"kind": "update", "name": "w.momentum.next", "updates": "w.momentum",
         "dtype": "float32", "shape": [3]},
        {"kind": "update", "name": "b.momentum.next", "updates": "b.momentum",
         "dtype": "float32", "shape": [1]}
      ]})");
    saveManifest();
    // y = 1 + x . (2, -1, 0.5), every sample distinct.
    std::vector<float> x, y;
    for (int i = 0; i < Samples; ++i) {
      float a = 0.1f * i, b = 1.0f - 0.2f * i, c = (i % 3) - 1.0f;
      x.insert(x.end(), {a, b, c});
      y.push_back(1.0f + 2 * a - b + 0.5f * c);
    }
    fs::create_directory(data());
    writeNpy(data() + "/x.npy", DType::Float32, {Samples, 3}, x.data());
    writeNpy(data() + "/y.npy", DType::Float32, {Samples}, y.data());
  }

  void saveManifest() {
    writeFile(artifact.file("manifest.json"), manifest.dump(2));
  }

  std::string data() const { return work.file("data"); }
  std::string ckpt() const { return work.file("ckpt"); }

  /// autopar-run ARTIFACT --train --data DATA \p args, outside any launcher.
  CommandResult train(const std::string &args, const std::string &env = "") {
    return runCommand(
        "env -u OMPI_COMM_WORLD_SIZE -u OMPI_COMM_WORLD_RANK -u PMI_SIZE "
        "-u PMI_RANK -u SLURM_NTASKS -u SLURM_STEP_NUM_TASKS -u SLURM_PROCID " +
        env + " " + shellQuote(AUTOPAR_RUN_PATH) + " " +
        shellQuote(artifact.path()) + " --train --data " + shellQuote(data()) +
        " " + args);
  }

  /// Trains with \p args and expects success.
  CommandResult trainOk(const std::string &args, const std::string &env = "") {
    CommandResult result = train(args, env);
    EXPECT_EQ(result.exitCode, 0) << args << "\n" << result.out << result.err;
    return result;
  }

  /// The metrics records of \p path.
  std::vector<json> metrics(const std::string &path) {
    std::vector<json> records;
    std::istringstream lines(readFile(path));
    for (std::string line; std::getline(lines, line);)
      records.push_back(json::parse(line));
    return records;
  }

  /// Expects the step, loss, lr and grad_norm of \p a and \p b to be
  /// bitwise equal (the records print floats with 9 digits, which round
  /// trip).
  void expectSameSteps(const std::vector<json> &a, const std::vector<json> &b) {
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i)
      for (const char *key : {"step", "loss", "lr", "grad_norm"}) {
        if (a[i][key].is_number_integer()) {
          EXPECT_EQ(a[i][key], b[i][key]) << key << " of record " << i;
          continue;
        }
        float x = a[i][key].get<float>(), y = b[i][key].get<float>();
        EXPECT_EQ(std::memcmp(&x, &y, sizeof(float)), 0)
            << key << " of record " << i << ": " << x << " vs " << y;
      }
  }

  void expectSameOutputs(const std::string &a, const std::string &b) {
    for (const char *name : {"w.npy", "b.npy", "seen.npy"})
      EXPECT_EQ(readFile(a + "/" + name), readFile(b + "/" + name)) << name;
  }

  json readMetadata(int64_t step) {
    char name[32];
    std::snprintf(name, sizeof(name), "/step-%08lld/metadata.json",
                  static_cast<long long>(step));
    return json::parse(readFile(ckpt() + name));
  }

  std::string stepDir(int64_t step) {
    char name[32];
    std::snprintf(name, sizeof(name), "/step-%08lld",
                  static_cast<long long>(step));
    return ckpt() + name;
  }

  /// The offset in rank-00000.bin of tensor \p name at step \p step.
  size_t chunkOffset(int64_t step, const std::string &name) {
    json meta = readMetadata(step);
    for (const json &tensor : meta["tensors"])
      if (tensor["name"] == name)
        return tensor["chunks"][0]["offset_bytes"].get<size_t>();
    ADD_FAILURE() << "no tensor " << name;
    return 0;
  }

  TempDir artifact, work;
  json manifest;
};

TEST_F(TrainCliTest, PrintsOneLinePerStepWhenNotATerminal) {
  CommandResult result = trainOk("--steps 3");
  EXPECT_NE(result.out.find("training to step 3 on 8 samples (4 batches of "
                            "2 per epoch)"),
            std::string::npos)
      << result.out;
  for (const char *line :
       {"step 1/3  loss ", "step 2/3  loss ", "step 3/3  loss "})
    EXPECT_NE(result.out.find(line), std::string::npos) << result.out;
  EXPECT_EQ(result.out.find('\r'), std::string::npos);
}

TEST_F(TrainCliTest, ShowsOneProgressLineOnATerminal) {
  // script(1) gives autopar-run a terminal as stdout.
  std::string log = work.file("typescript");
  std::string command =
      "env -u OMPI_COMM_WORLD_SIZE -u PMI_SIZE -u SLURM_PROCID " +
      shellQuote(AUTOPAR_RUN_PATH) + " " + shellQuote(artifact.path()) +
      " --train --data " + shellQuote(data()) + " --steps 3";
  CommandResult result = runCommand("script -qec " + shellQuote(command) + " " +
                                    shellQuote(log) + " </dev/null");
  if (result.exitCode != 0)
    GTEST_SKIP() << "script(1) cannot make a terminal here: " << result.err;
  std::string shown = readFile(log);
  EXPECT_NE(shown.find("\rstep 3/3  loss "), std::string::npos) << shown;
  EXPECT_NE(shown.find("ETA "), std::string::npos) << shown;
  EXPECT_EQ(shown.find("step 1/3  loss 0"), shown.find("step 1/3  loss "))
      << shown;
  EXPECT_EQ(shown.find("samples/s"), std::string::npos) << shown;
}

TEST_F(TrainCliTest, ResumeIsBitwiseEqualToAnUninterruptedRun) {
  for (std::string shuffle : {"", " --shuffle 11"}) {
    SCOPED_TRACE("options:" + shuffle);
    fs::remove_all(work.file("straight"));
    fs::remove_all(work.file("resumed"));
    fs::remove_all(ckpt());
    fs::remove(work.file("m1.jsonl"));
    fs::remove(work.file("m2.jsonl"));
    // 6 steps cross an epoch (4 batches); 3 stop in the middle of one.
    trainOk("--steps 6 --metrics " + work.file("m1.jsonl") + " --outputs " +
            work.file("straight") + shuffle);
    trainOk("--steps 3 --metrics " + work.file("m2.jsonl") +
            " --checkpoint-dir " + ckpt() + shuffle);
    EXPECT_EQ(readFile(ckpt() + "/latest"), "step-00000003\n");
    CommandResult resumed =
        trainOk("--steps 6 --resume --metrics " + work.file("m2.jsonl") +
                " --outputs " + work.file("resumed") + " --checkpoint-dir " +
                ckpt() + shuffle);
    EXPECT_NE(resumed.out.find("resumed from " + stepDir(3) +
                               " (step 3, epoch 0, batch 3; this rank read 36 "
                               "of the training state's 36 bytes)"),
              std::string::npos)
        << resumed.out;
    EXPECT_EQ(resumed.out.find("step 3/6"), std::string::npos);
    EXPECT_NE(resumed.out.find("step 4/6"), std::string::npos);
    expectSameSteps(metrics(work.file("m1.jsonl")),
                    metrics(work.file("m2.jsonl")));
    expectSameOutputs(work.file("straight"), work.file("resumed"));
    EXPECT_EQ(readFile(ckpt() + "/latest"), "step-00000006\n");
  }
}

TEST_F(TrainCliTest, WritesTheDocumentedLayout) {
  trainOk("--steps 5 --checkpoint-dir " + ckpt() + " --checkpoint-every 2");
  EXPECT_EQ(readFile(ckpt() + "/latest"), "step-00000005\n");
  for (int step : {2, 4, 5})
    EXPECT_TRUE(fs::is_directory(stepDir(step))) << step;
  EXPECT_FALSE(fs::exists(stepDir(4) + ".tmp"));
  json meta = readMetadata(4);
  EXPECT_EQ(meta["format"], "autopar-checkpoint");
  EXPECT_EQ(meta["version"], 1);
  EXPECT_EQ(meta["step"], 4);
  EXPECT_EQ(meta["model"], "linear.onnx");
  EXPECT_EQ(meta["model_hash"].get<std::string>().rfind("fnv1a64:", 0), 0u);
  EXPECT_EQ(meta["plan"]["world_size"], 1);
  EXPECT_EQ(meta["plan"]["cluster"], "local:1");
  EXPECT_EQ(meta["data"]["epoch"], 1); // 4 steps: the next batch is (1, 0).
  EXPECT_EQ(meta["data"]["batch_in_epoch"], 0);
  EXPECT_EQ(meta["data"]["samples_consumed"], 8);
  EXPECT_EQ(meta["data"]["samples_per_epoch"], Samples);
  EXPECT_EQ(meta["data"]["global_batch"], 2);
  EXPECT_TRUE(meta["data"]["shuffle_seed"].is_null());
  EXPECT_EQ(meta["data"]["directory"], fs::absolute(data()).string());
  std::string bin = readFile(stepDir(4) + "/rank-00000.bin");
  std::map<std::string, std::string> kinds;
  for (const json &tensor : meta["tensors"]) {
    std::string name = tensor["name"];
    kinds[name] = tensor["kind"];
    EXPECT_EQ(tensor["dtype"], "float32") << name;
    ASSERT_EQ(tensor["chunks"].size(), 1u) << name;
    const json &chunk = tensor["chunks"][0];
    EXPECT_EQ(chunk["file"], "rank-00000.bin");
    EXPECT_EQ(chunk["sizes"], tensor["shape"]);
    EXPECT_EQ(chunk["offsets"], json::array({0}));
    size_t offset = chunk["offset_bytes"],
           bytes = 4 * tensor["shape"][0].get<size_t>();
    EXPECT_EQ(offset % 64, 0u) << name;
    ASSERT_LE(offset + bytes, bin.size()) << name;
    EXPECT_EQ(crc32(0, bin.data() + offset, bytes), chunk["crc32"]) << name;
  }
  EXPECT_EQ(kinds,
            (std::map<std::string, std::string>{{"w", "param"},
                                                {"b", "param"},
                                                {"seen", "state"},
                                                {"w.momentum", "momentum"},
                                                {"b.momentum", "momentum"}}));
  // seen counts the samples: 8 after 4 steps of 2 (it started at 0).
  size_t seen = chunkOffset(4, "seen");
  float value;
  std::memcpy(&value, bin.data() + seen, sizeof(float));
  EXPECT_EQ(value, 8.0f);
}

TEST_F(TrainCliTest, KeepsTheNewestCheckpoints) {
  CommandResult result = trainOk("--steps 7 --checkpoint-dir " + ckpt() +
                                 " --checkpoint-every 2 --keep-checkpoints 2");
  EXPECT_NE(result.out.find("(deleted step-00000002)"), std::string::npos)
      << result.out;
  std::vector<std::string> names;
  for (const fs::directory_entry &entry : fs::directory_iterator(ckpt()))
    names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"latest", "step-00000006",
                                             "step-00000007"}));
}

TEST_F(TrainCliTest, ResumeWithoutACheckpointStartsFromStepZero) {
  CommandResult result =
      trainOk("--steps 2 --resume --checkpoint-dir " + ckpt());
  EXPECT_NE(result.out.find("--resume: no checkpoint in " + ckpt() + " (no " +
                            ckpt() + "/latest); starting from step 0"),
            std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("step 1/2"), std::string::npos);
  EXPECT_EQ(readFile(ckpt() + "/latest"), "step-00000002\n");
  // Without --resume, a run starts over, and says so.
  result = trainOk("--steps 1 --checkpoint-dir " + ckpt());
  EXPECT_NE(result.out.find("already has checkpoints; this run starts from "
                            "step 0 (add --resume"),
            std::string::npos)
      << result.out;
  EXPECT_EQ(readFile(ckpt() + "/latest"), "step-00000001\n");
  result = trainOk("--steps 2 --resume --checkpoint-dir " + ckpt());
  EXPECT_NE(result.out.find("resumed from " + stepDir(1)), std::string::npos);
  // Already at --steps: nothing to train, and no new checkpoint.
  result = trainOk("--steps 2 --resume --checkpoint-dir " + ckpt() +
                   " --outputs " + work.file("out"));
  EXPECT_NE(result.out.find("the checkpoint is at step 2, --steps is 2: "
                            "nothing to train"),
            std::string::npos)
      << result.out;
  EXPECT_EQ(result.out.find("wrote checkpoint"), std::string::npos);
  EXPECT_TRUE(fs::exists(work.file("out/w.npy")));
}

TEST_F(TrainCliTest, ACorruptByteNamesTheTensor) {
  trainOk("--steps 2 --checkpoint-dir " + ckpt());
  std::string path = stepDir(2) + "/rank-00000.bin";
  std::string bin = readFile(path);
  bin[chunkOffset(2, "b.momentum")] ^= 0x01;
  writeFile(path, bin);
  expectRunError(train("--steps 3 --resume --checkpoint-dir " + ckpt()),
                 path + ": tensor 'b.momentum' is corrupt: CRC-32 ");
}

TEST_F(TrainCliTest, ATruncatedFileNamesTheTensor) {
  trainOk("--steps 2 --checkpoint-dir " + ckpt());
  std::string path = stepDir(2) + "/rank-00000.bin";
  fs::resize_file(path, chunkOffset(2, "seen") + 2);
  expectRunError(train("--steps 3 --resume --checkpoint-dir " + ckpt()),
                 path + ": truncated: tensor 'seen' needs bytes [");
  fs::remove(path);
  expectRunError(train("--steps 3 --resume --checkpoint-dir " + ckpt()),
                 path + ": cannot open (tensor 'w')");
}

TEST_F(TrainCliTest, LatestNamingAMissingDirectoryIsAnError) {
  trainOk("--steps 2 --checkpoint-dir " + ckpt());
  writeFile(ckpt() + "/latest", "step-00000009\n");
  expectRunError(train("--steps 3 --resume --checkpoint-dir " + ckpt()),
                 ckpt() + "/latest names step-00000009, but " + stepDir(9) +
                     " does not exist");
  writeFile(ckpt() + "/latest", "garbage\n");
  expectRunError(train("--steps 3 --resume --checkpoint-dir " + ckpt()),
                 "'garbage' is not a step directory name");
}

TEST_F(TrainCliTest, DamagedMetadataIsAnError) {
  trainOk("--steps 2 --checkpoint-dir " + ckpt());
  std::string path = stepDir(2) + "/metadata.json";
  std::string good = readFile(path);
  std::string resume = "--steps 3 --resume --checkpoint-dir " + ckpt();

  writeFile(path, good.substr(0, good.size() / 2));
  expectRunError(train(resume), path + ": not valid JSON: ");

  json meta = json::parse(good);
  meta["tensors"][0]["shape"] = {4};
  writeFile(path, meta.dump());
  expectRunError(train(resume), path + ": tensor 'w' is float32 [4] in the "
                                       "checkpoint, but this artifact's is "
                                       "float32 [3]");

  meta = json::parse(good);
  meta["tensors"][1]["dtype"] = "float64";
  writeFile(path, meta.dump());
  expectRunError(train(resume), path + ": tensor 'b' is float64 [1] in the "
                                       "checkpoint");

  meta = json::parse(good);
  meta["tensors"].erase(2);
  writeFile(path, meta.dump());
  expectRunError(train(resume), path + ": no tensor 'seen' (state)");

  meta = json::parse(good);
  meta["data"]["epoch"] = "one";
  writeFile(path, meta.dump());
  expectRunError(train(resume), path + ": malformed checkpoint metadata: ");

  meta = json::parse(good);
  meta["tensors"][0]["chunks"][0]["sizes"] = {5};
  writeFile(path, meta.dump());
  expectRunError(train(resume),
                 "tensor 'w', chunk 0: offsets [0] and sizes [5] lie outside "
                 "[3]");

  meta = json::parse(good);
  meta["tensors"][0]["chunks"][0]["file"] = "../elsewhere.bin";
  writeFile(path, meta.dump());
  expectRunError(train(resume), "is not a file name in the checkpoint");
}

TEST_F(TrainCliTest, ACheckpointOfAnotherModelIsRefused) {
  trainOk("--steps 2 --checkpoint-dir " + ckpt());
  manifest["arguments"][1]["name"] = "bias";
  manifest["arguments"][12]["updates"] = "bias";
  manifest["arguments"][4]["of"] = "bias";
  saveManifest();
  expectRunError(train("--steps 3 --resume --checkpoint-dir " + ckpt()),
                 stepDir(2) + " is a checkpoint of another model (model "
                              "'linear.onnx', model hash fnv1a64:");
}

TEST_F(TrainCliTest, ResumeNeedsTheSameShuffle) {
  trainOk("--steps 2 --checkpoint-dir " + ckpt() + " --shuffle 3");
  expectRunError(train("--steps 3 --resume --checkpoint-dir " + ckpt()),
                 "was written with --shuffle 3, this run has no --shuffle");
  expectRunError(
      train("--steps 3 --resume --shuffle 4 --checkpoint-dir " + ckpt()),
      "was written with --shuffle 3, this run has --shuffle 4");
}

TEST_F(TrainCliTest, AStaleTemporaryDirectoryIsIgnored) {
  trainOk("--steps 2 --checkpoint-dir " + ckpt());
  fs::create_directory(stepDir(3) + ".tmp");
  writeFile(stepDir(3) + ".tmp/rank-00000.bin", "partial");
  CommandResult result =
      trainOk("--steps 4 --resume --checkpoint-dir " + ckpt());
  EXPECT_NE(result.out.find("resumed from " + stepDir(2)), std::string::npos)
      << result.out;
  // The next save clears the leftover.
  EXPECT_FALSE(fs::exists(stepDir(3) + ".tmp"));
  EXPECT_EQ(readFile(ckpt() + "/latest"), "step-00000004\n");
}

TEST_F(TrainCliTest, AKilledSaveLeavesThePreviousCheckpointValid) {
  trainOk("--steps 6 --outputs " + work.file("straight") + " --metrics " +
          work.file("m1.jsonl"));
  // Killed (SIGKILL) while saving step 4: after its .bin, before its
  // metadata and the renames.
  CommandResult killed =
      train("--steps 6 --checkpoint-every 2 --metrics " +
                work.file("m2.jsonl") + " --checkpoint-dir " + ckpt(),
            "AUTOPAR_TEST_CRASH_IN_CHECKPOINT=4");
  EXPECT_NE(killed.exitCode, 0);
  EXPECT_NE(killed.exitCode, 1) << killed.err;
  EXPECT_TRUE(fs::exists(stepDir(4) + ".tmp/rank-00000.bin"));
  EXPECT_FALSE(fs::exists(stepDir(4) + ".tmp/metadata.json"));
  EXPECT_FALSE(fs::exists(stepDir(4)));
  EXPECT_EQ(readFile(ckpt() + "/latest"), "step-00000002\n");

  CommandResult resumed =
      trainOk("--steps 6 --resume --checkpoint-every 2 --metrics " +
              work.file("m2.jsonl") + " --outputs " + work.file("resumed") +
              " --checkpoint-dir " + ckpt());
  EXPECT_NE(resumed.out.find("resumed from " + stepDir(2)), std::string::npos)
      << resumed.out;
  expectSameOutputs(work.file("straight"), work.file("resumed"));
  // Steps 3 and 4 ran twice (and steps 5 and 6, those that finished while
  // step 4's file was written in the background, before the kill); the
  // records of the resumed run are the same.
  std::vector<json> straight = metrics(work.file("m1.jsonl"));
  std::vector<json> twice = metrics(work.file("m2.jsonl"));
  ASSERT_TRUE(twice.size() >= 8u && twice.size() <= 10u) << twice.size();
  twice.erase(twice.begin() + 2, twice.begin() + (twice.size() - 4));
  expectSameSteps(straight, twice);
}

TEST_F(TrainCliTest, CheckpointFlagsNeedTheirCompanions) {
  expectRunError(train("--steps 2 --resume"),
                 "--resume needs --checkpoint-dir D");
  expectRunError(train("--steps 2 --checkpoint-every 2"),
                 "--checkpoint-every needs --checkpoint-dir D");
  expectRunError(train("--steps 2 --keep-checkpoints 0 --checkpoint-dir x"),
                 "--keep-checkpoints expects an integer of at least 1");
  expectRunError(train("--steps 2 --checkpoint-block-bytes 4096"),
                 "--checkpoint-block-bytes needs --checkpoint-dir D");
  expectRunError(
      train("--steps 2 --checkpoint-block-bytes 32 --checkpoint-dir x"),
      "--checkpoint-block-bytes expects an integer of at least 64");
  CommandResult inference =
      runCommand(shellQuote(AUTOPAR_RUN_PATH) + " " +
                 shellQuote(artifact.path()) + " --shuffle 3");
  expectRunError(inference, "--shuffle needs --train");
}

TEST_F(TrainCliTest, EvalAndSaveOnnxNeedWhatTheyUse) {
  expectRunError(train("--steps 2 --eval-every 2"),
                 "--eval-every needs --eval-data DIR");
  // The stand-in step has neither an eval program nor an inference template
  // (as artifacts of an older autopar-compile): both are refused before
  // step 1, saying to recompile.
  expectRunError(train("--steps 2 --eval-data " + shellQuote(data())),
                 "has no eval program");
  // The compiler said why it wrote none (a tp plan the eval program could
  // not follow): the error gives its reason.
  manifest["training"]["eval_unavailable"] =
      "the eval program's tensor-parallel plan holds parameter 'w' as [2]";
  saveManifest();
  expectRunError(train("--steps 2 --eval-data " + shellQuote(data())),
                 "has no eval program: the eval program's tensor-parallel "
                 "plan holds parameter 'w' as [2]");
  manifest["training"].erase("eval_unavailable");
  saveManifest();
  expectRunError(
      train("--steps 2 --save-onnx " + shellQuote(work.file("model.onnx"))),
      "has no inference template");
  for (const char *flag : {"--eval-data d", "--save-onnx m.onnx"}) {
    CommandResult inference =
        runCommand(shellQuote(AUTOPAR_RUN_PATH) + " " +
                   shellQuote(artifact.path()) + " " + flag);
    expectRunError(inference,
                   std::string(flag).substr(0, std::string(flag).find(' ')) +
                       " needs --train");
  }
}

#ifdef AUTOPAR_HAVE_CUDA_RUNTIME

/// The same artifact as a GPU target, run by the real libautopar_cuda.so on
/// the fake driver (Inputs/fake_cuda_driver.cpp: device memory is host
/// memory, so the stand-in step runs unchanged), with an eval program
/// (Inputs/eval_linear.c) that reads the step's parameters on the device.
class GpuTrainCliTest : public TrainCliTest {
protected:
  void SetUp() override {
    TrainCliTest::SetUp();
    fs::copy_file(std::string(AUTOPAR_TEST_STAGE_DIR) + "/eval_linear.so",
                  artifact.file("eval.so"));
    json arguments = manifest["arguments"];
    manifest.erase("arguments");
    manifest["programs"][0]["arguments"] = arguments;
    manifest["programs"].push_back(json::parse(R"({
      "name": "eval", "library": "eval.so", "entry": "autopar_entry",
      "arguments": [
        {"kind": "parameter", "name": "w", "dtype": "float32", "shape": [3],
         "source": {"file": "weights.bin", "offset": 0, "length": 12}},
        {"kind": "parameter", "name": "b", "dtype": "float32", "shape": [1],
         "source": {"file": "weights.bin", "offset": 12, "length": 4}},
        {"kind": "input", "name": "x", "dtype": "float32", "shape": [2, 3]},
        {"kind": "input", "name": "y", "dtype": "float32", "shape": [2]},
        {"kind": "output", "name": "loss", "dtype": "float32", "shape": []}
      ]})"));
    manifest["training"]["eval_program"] = "eval";
    cpuManifest = manifest;
    manifest["cluster"] = "dgx-h100:1";
    manifest["target"] = json::parse(
        R"({"kind": "cuda", "arch": "sm_90", "precision": "fp32"})");
    saveManifest();
  }

  /// The environment that puts the fake driver first.
  static std::string onFakeGpu() {
    return "-u AUTOPAR_CUDA_RUNTIME LD_LIBRARY_PATH=" +
           shellQuote(AUTOPAR_FAKE_CUDA_DRIVER_DIR);
  }

  json cpuManifest;
};

TEST_F(GpuTrainCliTest, TrainsAndEvaluatesAsOnTheCpu) {
  std::string evalFlags = " --eval-data " + shellQuote(data()) +
                          " --eval-every 2 --steps 5 --metrics ";
  CommandResult gpu = trainOk(evalFlags + work.file("gpu.jsonl") +
                                  " --outputs " + work.file("gpu-out"),
                              onFakeGpu());
  EXPECT_NE(gpu.out.find("sm_90"), std::string::npos) << gpu.out;
  EXPECT_NE(gpu.out.find("eval after step 4"), std::string::npos) << gpu.out;
  // What the step needed of the device, beside the plan's prediction.
  EXPECT_NE(gpu.out.find("autopar-run: device memory: peak "),
            std::string::npos)
      << gpu.out;
  EXPECT_NE(gpu.out.find("MiB more in use on the device"), std::string::npos)
      << gpu.out;
  manifest = cpuManifest;
  saveManifest();
  trainOk(evalFlags + work.file("cpu.jsonl") + " --outputs " +
          work.file("cpu-out"));
  // Steps, evals and trained parameters bitwise equal: the step counter
  // and the batch reach the device every step, the metrics come back, the
  // update buffers trade places with the parameters and optimizer states on
  // the device, and --outputs and the eval program read the trained values.
  std::vector<json> onGpu = metrics(work.file("gpu.jsonl")),
                    onCpu = metrics(work.file("cpu.jsonl"));
  ASSERT_EQ(onGpu.size(), onCpu.size());
  EXPECT_EQ(onGpu.size(), 5u + 3u); // 5 steps, evals after 2, 4 and 5.
  std::vector<json> gpuSteps, cpuSteps;
  for (size_t i = 0; i < onGpu.size(); ++i) {
    if (onCpu[i].contains("eval_loss")) {
      EXPECT_EQ(onGpu[i]["eval_loss"], onCpu[i]["eval_loss"]) << i;
      EXPECT_EQ(onGpu[i]["step"], onCpu[i]["step"]) << i;
      continue;
    }
    gpuSteps.push_back(onGpu[i]);
    cpuSteps.push_back(onCpu[i]);
  }
  expectSameSteps(gpuSteps, cpuSteps);
  expectSameOutputs(work.file("gpu-out"), work.file("cpu-out"));
}

TEST_F(GpuTrainCliTest, ResumeRestoresTheDeviceState) {
  trainOk("--steps 6 --metrics " + work.file("m1.jsonl") + " --outputs " +
              work.file("straight"),
          onFakeGpu());
  trainOk("--steps 3 --metrics " + work.file("m2.jsonl") +
              " --checkpoint-dir " + ckpt(),
          onFakeGpu());
  // The momentum saved from the device is what the resumed step reads.
  trainOk("--steps 6 --resume --metrics " + work.file("m2.jsonl") +
              " --outputs " + work.file("resumed") + " --checkpoint-dir " +
              ckpt(),
          onFakeGpu());
  expectSameSteps(metrics(work.file("m1.jsonl")),
                  metrics(work.file("m2.jsonl")));
  expectSameOutputs(work.file("straight"), work.file("resumed"));
}

#endif // AUTOPAR_HAVE_CUDA_RUNTIME

} // namespace
