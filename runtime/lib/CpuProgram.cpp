//===- CpuProgram.cpp - A program loaded from a shared library ------------===//

#include "autopar/runtime/CpuProgram.h"

#include "autopar/runtime/Error.h"

#include <dlfcn.h>

namespace autopar::runtime {

namespace {
std::string lastDlError() {
  const char *message = dlerror();
  return message ? message : "unknown error";
}
} // namespace

std::unique_ptr<CpuProgram> CpuProgram::load(const std::string &libraryPath,
                                             const std::string &entry) {
  // dlopen searches the library path for a name without a '/': never do that
  // for an artifact's own library.
  std::string path = libraryPath.find('/') == std::string::npos
                         ? "./" + libraryPath
                         : libraryPath;
  dlerror();
  // RTLD_NOW: an unresolved kernel fails here, with its name, not mid-step.
  // RTLD_LOCAL: programs of different stages may define the same symbols.
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    throw Error("cannot load program library " + libraryPath + ": " +
                lastDlError());
  dlerror();
  void *symbol = dlsym(handle, entry.c_str());
  if (!symbol) {
    std::string message = lastDlError();
    dlclose(handle);
    throw Error("program library " + libraryPath + " has no entry point '" +
                entry + "': " + message);
  }
  return std::unique_ptr<CpuProgram>(
      new CpuProgram(handle, reinterpret_cast<EntryFn>(symbol)));
}

CpuProgram::~CpuProgram() { dlclose(handle); }

} // namespace autopar::runtime
