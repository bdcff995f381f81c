//===- HostBuffer.h - Aligned host memory -----------------------*- C++ -*-===//

#ifndef AUTOPAR_RUNTIME_HOSTBUFFER_H
#define AUTOPAR_RUNTIME_HOSTBUFFER_H

#include <cstddef>
#include <cstdlib>
#include <memory>

namespace autopar::runtime {

/// An owned, zero-initialized block of host memory aligned to 64 bytes (a cache
/// line, and enough for any vector load generated code may use).
class HostBuffer {
public:
  static constexpr size_t Alignment = 64;

  HostBuffer() = default;
  /// Allocates \p bytes zeroed bytes; throws Error if memory is exhausted.
  explicit HostBuffer(size_t bytes);

  void *data() { return storage.get(); }
  const void *data() const { return storage.get(); }
  size_t size() const { return bytes; }

private:
  struct Free {
    void operator()(void *p) const { std::free(p); }
  };
  std::unique_ptr<void, Free> storage;
  size_t bytes = 0;
};

} // namespace autopar::runtime

#endif // AUTOPAR_RUNTIME_HOSTBUFFER_H
