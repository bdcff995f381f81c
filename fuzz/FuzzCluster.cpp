//===- FuzzCluster.cpp - Fuzz the cluster JSON reader ---------------------===//
//
// parseClusterJson() on the input (the file of `--cluster FILE.json`), and
// on success what the planner first asks of the cluster. An error result is
// the expected outcome for bad input.
//
//===----------------------------------------------------------------------===//

#include "autopar/Planner/Cluster.h"

#include "llvm/Support/raw_ostream.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  llvm::Expected<autopar::ClusterSpec> cluster =
      autopar::parseClusterJson(text, "fuzz-cluster.json");
  if (!cluster) {
    llvm::consumeError(cluster.takeError());
    return 0;
  }
  (void)cluster->defaultPrecision();
  std::string out;
  llvm::raw_string_ostream os(out);
  os << autopar::clusterToJson(*cluster);
  return 0;
}
