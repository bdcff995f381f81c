//===- CrashReport.h - A last word when generated code crashes --*- C++ -*-===//
//
// Bad input never crashes autopar-run, but the loaded program is generated
// code: if it faults, that is a compiler bug, and the user should see which
// program and which step, not only "Segmentation fault".
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CRASHREPORT_H
#define AUTOPAR_RUNTIME_CRASHREPORT_H

#include <cstdint>
#include <string>

namespace autopar::runtime {

/// Installs handlers for SIGSEGV, SIGBUS, SIGFPE and SIGILL that print
/// "autopar-run: error: <what> crashed (<signal>) in step <n> ..." and then
/// re-raise the signal with its default action, so that core dumps and the
/// exit status stay as they were.
void installCrashReport(const std::string &what);

/// The step the report names; 0 before the first step.
void setCrashReportStep(int64_t step);

/// Restores the default actions: after the steps, a crash is no longer the
/// program's.
void removeCrashReport();

} // namespace autopar::runtime

#endif // AUTOPAR_RUNTIME_CRASHREPORT_H
