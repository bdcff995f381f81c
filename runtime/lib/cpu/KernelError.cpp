//===- KernelError.cpp - Fatal errors inside CPU kernels ------------------===//

#include "KernelError.h"

#include "autopar/runtime/Fatal.h"

namespace autopar::runtime::cpu {

void kernelFatal(const char *kernel, const std::string &message) {
  // fatalError exits without running static destructors (OpenBLAS worker
  // threads may still be running) and, under MPI, ends the other ranks too.
  fatalError(std::string(kernel) + ": " + message);
}

void shapeMismatch(const char *kernel, const std::string &detail) {
  kernelFatal(kernel, "operand sizes do not agree: " + detail +
                          "; the generated program is inconsistent, which "
                          "is a compiler bug");
}

} // namespace autopar::runtime::cpu
