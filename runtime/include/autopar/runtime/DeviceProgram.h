//===- DeviceProgram.h - A program that runs on a GPU -----------*- C++ -*-===//
//
// The code of a cuda program is host code too (stage0.so, loaded like a CPU
// program): its entry queues the kernels, GEMMs and collectives of one step
// on the device's stream and returns. A DeviceProgram runs it and waits for
// the device, so that a step is done when run() returns.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_DEVICEPROGRAM_H
#define AUTOPAR_RUNTIME_DEVICEPROGRAM_H

#include "autopar/runtime/DeviceBackend.h"
#include "autopar/runtime/Program.h"

#include <memory>

namespace autopar::runtime {

class DeviceProgram : public Program {
public:
  /// \p host: the program library's entry (a CpuProgram); \p device must
  /// outlive the program.
  DeviceProgram(std::unique_ptr<Program> host, DeviceBackend &device)
      : host(std::move(host)), device(device) {}

  /// Runs the entry point with \p args (device pointers) and waits for the
  /// device; throws Error if a kernel or collective failed.
  void run(void **args) override {
    host->run(args);
    device.synchronize();
  }

private:
  std::unique_ptr<Program> host;
  DeviceBackend &device;
};

} // namespace autopar::runtime

#endif // AUTOPAR_RUNTIME_DEVICEPROGRAM_H
