//===- KernelError.h - Fatal errors inside CPU kernels ----------*- C++ -*-===//

#ifndef AUTOPAR_RUNTIME_CPU_KERNELERROR_H
#define AUTOPAR_RUNTIME_CPU_KERNELERROR_H

#include "autopar/runtime/CpuKernels.h"

#include <string>

namespace autopar::runtime::cpu {

/// Reports a kernel called with inconsistent arguments and ends the run
/// (fatalError: exit status 1, or MPI_Abort in a multi-rank run).
/// Kernels run inside generated code, which has no unwind tables to throw
/// through, so it ends the run instead of throwing.
[[noreturn]] void kernelFatal(const char *kernel, const std::string &message);

/// kernelFatal for operands whose sizes do not agree: `detail` says which,
/// and the message says the generated program is at fault.
[[noreturn]] void shapeMismatch(const char *kernel, const std::string &detail);

/// "[d0, d1, ...]": a descriptor's sizes, for error messages.
template <typename T, int Rank>
std::string formatSizes(const MemRefDescriptor<T, Rank> &m) {
  std::string text = "[";
  for (int i = 0; i < Rank; ++i)
    text += std::to_string(m.sizes[i]) + (i + 1 < Rank ? ", " : "]");
  return text;
}

} // namespace autopar::runtime::cpu

#endif // AUTOPAR_RUNTIME_CPU_KERNELERROR_H
