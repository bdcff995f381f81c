//===- Program.h - An executable program of one rank ------------*- C++ -*-===//
//
// A backend-independent view of "the code a rank runs": the CPU backend loads
// a shared library; a CUDA backend will load a module and launch on a stream.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_PROGRAM_H
#define AUTOPAR_RUNTIME_PROGRAM_H

namespace autopar::runtime {

/// The native code of one program.
class Program {
public:
  virtual ~Program() = default;

  /// Runs the entry point once. args[i] points to the buffer of the manifest's
  /// arguments[i], as artifact.md specifies.
  virtual void run(void **args) = 0;
};

} // namespace autopar::runtime

#endif // AUTOPAR_RUNTIME_PROGRAM_H
