//===- FuzzManifest.cpp - Fuzz the artifact manifest parser ---------------===//
//
// parseManifest() on the input as manifest.json text, then what autopar-run
// derives from a manifest before it loads any code: each rank's program, the
// training state and its hash. runtime::Error is the expected outcome for a
// bad manifest; anything else escaping is a bug.
//
//===----------------------------------------------------------------------===//

#include "autopar/runtime/Checkpoint.h"
#include "autopar/runtime/Error.h"
#include "autopar/runtime/Manifest.h"

#include <string_view>

using namespace autopar::runtime;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  try {
    Manifest manifest = parseManifest(text, "fuzz/manifest.json");
    for (int64_t rank = 0; rank < manifest.worldSize && rank < 64; ++rank) {
      const ProgramDesc &program = manifest.programForRank(rank);
      if (manifest.training) {
        trainingStateTensors(program.arguments);
        modelHash(program.arguments);
      }
    }
    (void)manifest.isPipelineTraining();
  } catch (const Error &) {
  }
  return 0;
}
