//===- FuzzNpy.cpp - Fuzz both .npy readers -------------------------------===//
//
// The compiler's reader (--const-input, lib/Import/Npy.cpp) and the
// runtime's (autopar-run --inputs and datasets, runtime/lib/Npy.cpp) read
// the same bytes from a file. Errors (a failure result, runtime::Error) are
// the expected outcome; anything else escaping is a bug.
//
//===----------------------------------------------------------------------===//

#include "FuzzUtil.h"
#include "Npy.h"

#include "autopar/runtime/Error.h"
#include "autopar/runtime/Npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const std::string path = autopar::fuzz::scratchDir() + "/input.npy";
  autopar::fuzz::writeFile(path, data, size);

  autopar::import::ConstTensor tensor;
  std::string error;
  (void)autopar::import::readNpyFile(path, tensor, error);

  try {
    autopar::runtime::readNpyLayout(path);
    autopar::runtime::readNpy(path);
  } catch (const autopar::runtime::Error &) {
  }
  return 0;
}
