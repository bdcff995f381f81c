//===- CpuProgram.h - A program loaded from a shared library ----*- C++ -*-===//

#ifndef AUTOPAR_RUNTIME_CPUPROGRAM_H
#define AUTOPAR_RUNTIME_CPUPROGRAM_H

#include "autopar/runtime/Program.h"

#include <memory>
#include <string>

namespace autopar::runtime {

/// A CPU program: `void entry(void **args)` in a shared library, dlopen'ed with
/// RTLD_NOW so that a missing kernel symbol is reported at load time rather
/// than as a crash in the middle of a step.
class CpuProgram : public Program {
public:
  using EntryFn = void (*)(void **);

  /// Loads \p libraryPath and resolves \p entry. Throws Error with dlerror()'s
  /// message if either fails.
  static std::unique_ptr<CpuProgram> load(const std::string &libraryPath,
                                          const std::string &entry);
  ~CpuProgram() override;
  CpuProgram(const CpuProgram &) = delete;
  CpuProgram &operator=(const CpuProgram &) = delete;

  void run(void **args) override { entryFn(args); }

private:
  CpuProgram(void *handle, EntryFn entryFn)
      : handle(handle), entryFn(entryFn) {}

  void *handle;
  EntryFn entryFn;
};

} // namespace autopar::runtime

#endif // AUTOPAR_RUNTIME_CPUPROGRAM_H
