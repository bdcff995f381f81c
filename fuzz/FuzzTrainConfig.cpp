//===- FuzzTrainConfig.cpp - Fuzz the training config reader --------------===//
//
// parseTrainConfig() on the input (the file of `--train-config`), and on
// success what autopar-compile derives from it: the manifest's optimizer and
// scheduler records and autopar-apply-optimizer's options. An error result
// is the expected outcome for bad input.
//
//===----------------------------------------------------------------------===//

#include "autopar/Driver/TrainConfig.h"

#include "llvm/Support/raw_ostream.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  llvm::Expected<autopar::TrainConfig> config =
      autopar::parseTrainConfig(text, "fuzz-config.json");
  if (!config) {
    llvm::consumeError(config.takeError());
    return 0;
  }
  std::string out;
  llvm::raw_string_ostream os(out);
  os << llvm::json::Value(config->optimizerJson());
  os << llvm::json::Value(config->schedulerJson());
  os << config->applyOptimizerOptions();
  return 0;
}
