//===- FuzzCheckpoint.cpp - Fuzz checkpoint metadata loading --------------===//
//
// A real checkpoint of a small training state (a parameter, a ZeRO-style
// block of an optimizer state, a scalar) is written once with
// writeCheckpoint(); each input then replaces its metadata.json, and
// readCheckpoint() loads it into the same tensors, as `autopar-run --train
// --resume` does. runtime::Error is the expected outcome; anything else
// escaping is a bug.
//
// When AUTOPAR_FUZZ_SEED_DIR is set, the valid metadata.json is copied there
// (scripts/fuzz.sh seeds the corpus with it).
//
//===----------------------------------------------------------------------===//

#include "FuzzUtil.h"

#include "autopar/runtime/Checkpoint.h"
#include "autopar/runtime/Error.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

using namespace autopar::runtime;

namespace {

struct Fixture {
  std::vector<float> w, wExpAvg, scale;
  std::vector<CheckpointTensor> tensors;
  std::string stepDir;
  std::string hash = "fnv1a64:00000000deadbeef";

  Fixture() : w(12), wExpAvg(6), scale(1) {
    for (size_t i = 0; i < w.size(); ++i)
      w[i] = float(i);
    for (size_t i = 0; i < wExpAvg.size(); ++i)
      wExpAvg[i] = 0.5f * float(i);
    scale[0] = 2.0f;

    CheckpointTensor param;
    param.name = "w";
    param.kind = "param";
    param.shape = {4, 3};
    param.data = w.data();
    CheckpointTensor state;
    state.name = "w.exp_avg";
    state.kind = "exp_avg";
    state.of = "w";
    state.shape = {4, 3};
    state.data = wExpAvg.data();
    state.blockLevels = {{0, 2}};
    state.blockIndex = 1;
    CheckpointTensor scalar;
    scalar.name = "scale";
    scalar.kind = "state";
    scalar.shape = {};
    scalar.data = scale.data();
    tensors = {param, state, scalar};

    CheckpointInfo info;
    info.step = 7;
    info.position = {1, 2};
    info.samplesConsumed = 56;
    info.shuffleSeed = 1234;
    info.randomSeed = 99;
    info.dataDir = "data";
    info.samplesPerEpoch = 32;
    info.globalBatch = 8;
    info.modelHash = hash;
    info.model = "model.onnx";
    info.cluster = "local:1";
    std::string dir = autopar::fuzz::scratchDir() + "/ckpt";
    stepDir = writeCheckpoint(dir, info, tensors);

    if (const char *seedDir = std::getenv("AUTOPAR_FUZZ_SEED_DIR")) {
      std::error_code error;
      std::filesystem::copy_file(
          stepDir + "/metadata.json",
          std::string(seedDir) + "/checkpoint-metadata.json",
          std::filesystem::copy_options::overwrite_existing, error);
      if (error)
        std::fprintf(stderr, "autopar-fuzz-checkpoint: cannot seed %s: %s\n",
                     seedDir, error.message().c_str());
    }
  }
};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static Fixture fixture;
  autopar::fuzz::writeFile(fixture.stepDir + "/metadata.json", data, size);
  try {
    readCheckpoint(fixture.stepDir, fixture.hash, fixture.tensors);
  } catch (const Error &) {
  }
  return 0;
}
