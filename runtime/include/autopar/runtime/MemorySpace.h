//===- MemorySpace.h - Host or device memory, as collectives see it -*- C++
//-*-//
//
// On the CPU, the buffers generated code hands to the collectives are host
// memory; on a GPU they are device memory, which the host cannot read. The
// collective entry points (Collectives.h) stage strided views and
// non-contiguous blocks through scratch buffers, and a communicator that
// relays device buffers over the host (StagingCommunicator) copies them out
// and back: both do it through the MemorySpace of the active communicator.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_MEMORYSPACE_H
#define AUTOPAR_RUNTIME_MEMORYSPACE_H

#include "autopar/runtime/TensorLayout.h"

#include <cstddef>
#include <utility>

namespace autopar::runtime {

/// One kind of memory: allocation of scratch buffers, copies within it
/// (ByteCopier::copy2D) and to and from the host. Copies within the space may
/// complete later (a GPU's are ordered on its stream); copies to and from the
/// host have completed when they return. Errors throw Error.
class MemorySpace : public ByteCopier {
public:
  /// True for host memory, which the CPU may dereference.
  virtual bool isHost() const = 0;
  /// Scratch memory of at least \p bytes, until release().
  virtual void *allocate(size_t bytes) = 0;
  virtual void release(void *data) = 0;
  /// Copies \p bytes from \p from in this space to \p host, after all work
  /// already queued on the space (a GPU stream) has written them.
  virtual void copyToHost(void *host, const void *from, size_t bytes) = 0;
  /// Copies \p bytes from \p host to \p to in this space.
  virtual void copyFromHost(void *to, const void *host, size_t bytes) = 0;
  /// Waits until the work queued on this space so far has finished.
  virtual void synchronize() {}
};

/// Host memory (malloc, memcpy).
MemorySpace &hostMemory();

/// A scratch buffer of a MemorySpace, released when the object dies.
class ScratchBuffer {
public:
  ScratchBuffer() = default;
  ScratchBuffer(MemorySpace &space, size_t bytes)
      : space(&space), buffer(space.allocate(bytes)) {}
  ~ScratchBuffer() {
    if (buffer)
      space->release(buffer);
  }
  ScratchBuffer(ScratchBuffer &&other) noexcept
      : space(other.space), buffer(other.buffer) {
    other.buffer = nullptr;
  }
  ScratchBuffer &operator=(ScratchBuffer &&other) noexcept {
    std::swap(space, other.space);
    std::swap(buffer, other.buffer);
    return *this;
  }

  char *data() const { return static_cast<char *>(buffer); }

private:
  MemorySpace *space = nullptr;
  void *buffer = nullptr;
};

} // namespace autopar::runtime

#endif // AUTOPAR_RUNTIME_MEMORYSPACE_H
