//===- KernelError.cpp - Fatal errors inside CPU kernels ------------------===//

#include "KernelError.h"

#include <cstdio>
#include <cstdlib>

namespace autopar::runtime::cpu {

void kernelFatal(const char *kernel, const std::string &message) {
  std::fflush(stdout);
  std::fprintf(stderr, "autopar-run: error: %s: %s\n", kernel, message.c_str());
  std::fflush(stderr);
  // _Exit: other threads (OpenBLAS workers) may still be running; skip the
  // static destructors they could race with.
  std::_Exit(1);
}

} // namespace autopar::runtime::cpu
