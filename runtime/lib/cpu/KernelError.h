//===- KernelError.h - Fatal errors inside CPU kernels ----------*- C++ -*-===//

#ifndef AUTOPAR_RUNTIME_CPU_KERNELERROR_H
#define AUTOPAR_RUNTIME_CPU_KERNELERROR_H

#include <string>

namespace autopar::runtime::cpu {

/// Reports a kernel called with inconsistent arguments and exits with status 1.
/// Kernels run inside generated code, which has no unwind tables to throw
/// through, so this is the one place the runtime exits instead of throwing.
[[noreturn]] void kernelFatal(const char *kernel, const std::string &message);

} // namespace autopar::runtime::cpu

#endif // AUTOPAR_RUNTIME_CPU_KERNELERROR_H
