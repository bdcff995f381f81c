//===- KernelError.h - Fatal errors inside CPU kernels ----------*- C++ -*-===//

#ifndef AUTOPAR_RUNTIME_CPU_KERNELERROR_H
#define AUTOPAR_RUNTIME_CPU_KERNELERROR_H

#include <string>

namespace autopar::runtime::cpu {

/// Reports a kernel called with inconsistent arguments and ends the run
/// (fatalError: exit status 1, or MPI_Abort in a multi-rank run).
/// Kernels run inside generated code, which has no unwind tables to throw
/// through, so it ends the run instead of throwing.
[[noreturn]] void kernelFatal(const char *kernel, const std::string &message);

} // namespace autopar::runtime::cpu

#endif // AUTOPAR_RUNTIME_CPU_KERNELERROR_H
