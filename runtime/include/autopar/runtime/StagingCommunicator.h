//===- StagingCommunicator.h - Device collectives over the host -*- C++ -*-===//
//
// Collectives on buffers of a device's MemorySpace, relayed through a host
// communicator (MPI): each operation copies its input to host memory, runs
// the host operation, and copies the result back. The CUDA runtime uses it
// where NCCL cannot serve: when ranks of a node share one GPU (NCCL refuses
// two ranks on one device), when AUTOPAR_COLLECTIVES=mpi asks for it, and
// for a world of one. It is slower than NCCL (two PCIe copies and a
// host-side reduction per call), but works wherever MPI does.
//
// float16 and bfloat16 reductions, which MPI lacks, are done in float32 on
// the host (more accurately than in 16 bits) and rounded back.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_STAGINGCOMMUNICATOR_H
#define AUTOPAR_RUNTIME_STAGINGCOMMUNICATOR_H

#include "autopar/runtime/Communicator.h"
#include "autopar/runtime/HostBuffer.h"

namespace autopar::runtime {

class StagingCommunicator : public Communicator {
public:
  /// Relays operations on \p device buffers over \p host, which must outlive
  /// this object and has the same world and grid.
  StagingCommunicator(Communicator &host, MemorySpace &device);

  void maxOverWorld(double *values, int count) override;
  MemorySpace &memory() override { return device; }
  /// What the host communicator reduces, and float16 and bfloat16 (in
  /// float32) if it reduces float32.
  bool canReduce(DType dtype) const override;

protected:
  AUTOPAR_COMMUNICATOR_OPERATIONS
  /// Every send copied to the host, one exchange() on the host
  /// communicator, every receive copied back.
  void doExchange(const std::vector<Message> &sends,
                  const std::vector<Message> &receives,
                  CommScope scope) override;

  /// Waits for the device work that produces the operation's input, so that
  /// the operation's time is its own.
  void beforeCall() override { device.synchronize(); }

private:
  /// One relayed operation: \p inCount elements of \p in (null: none) go to
  /// host memory, \p hostOp(hostIn, hostOut, hostType) runs, and \p outCount
  /// elements come back to \p out (null: none). \p widen: reduce 16-bit
  /// floats as float32. \p inPlace: hostIn and hostOut are one buffer.
  template <typename HostOp>
  void relay(const void *in, int64_t inCount, void *out, int64_t outCount,
             DType dtype, bool widen, bool inPlace, HostOp hostOp);

  Communicator &host;
  MemorySpace &device;
  /// Host staging, kept between calls: the operation's raw bytes (when
  /// widening), its input and its output.
  HostBuffer raw, hostIn, hostOut;
};

} // namespace autopar::runtime

#endif // AUTOPAR_RUNTIME_STAGINGCOMMUNICATOR_H
