//===- Fatal.h - Errors that end the whole run ------------------*- C++ -*-===//
//
// Most errors are thrown as Error and reported by autopar-run's main. Some
// cannot be thrown: inside kernels and collectives called from generated code
// (no unwind tables), in the watchdog thread, in signal handlers. These print
// one "autopar-run: error: ..." line and end the process in a way that ends
// the other ranks too: under MPI, MPI_Abort; alone, exit status 1.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_FATAL_H
#define AUTOPAR_RUNTIME_FATAL_H

#include <cstdint>
#include <string>

namespace autopar::runtime {

/// "autopar-run: error: ", or "autopar-run: error: rank R: " once
/// setErrorRank was called (every multi-rank run does, so that interleaved
/// messages of many ranks say whose they are).
std::string errorPrefix();
void setErrorRank(int64_t rank);

/// Prints errorPrefix() + \p message and a newline to stderr, flushes stdout
/// and stderr, and ends the run through the handler set by setFatalExit
/// (default: std::_Exit(1)). Thread-safe; only the first caller prints.
[[noreturn]] void fatalError(const std::string &message);

/// Sets how fatalError ends the process; \p exitFn must not return.
void setFatalExit(void (*exitFn)());

/// Sets what fatalError runs after printing and before ending the process
/// (null: nothing): releasing what the abrupt end would strand, such as
/// NCCL communicators (ncclCommAbort). It must return, and soon.
void setFatalCleanup(void (*cleanupFn)());

} // namespace autopar::runtime

#endif // AUTOPAR_RUNTIME_FATAL_H
