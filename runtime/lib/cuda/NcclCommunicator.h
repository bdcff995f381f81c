//===- NcclCommunicator.h - Collectives on GPU memory with NCCL -*- C++ -*-===//
//
// The program's collectives on a GPU: one NCCL communicator for the world,
// bootstrapped with an ncclUniqueId that rank 0 broadcasts over MPI, and one
// per grid axis split from it (ncclCommSplit, by the other two coordinates,
// ordered by this one), as MpiCommunicator splits MPI_COMM_WORLD.
//
// Operations are queued on the rank's compute stream, behind the kernels
// that produce their inputs, and return at once; their time is measured
// with a pair of events each and counted once they have finished
// (settleStats). While the host waits for the stream (CudaDevice::
// synchronize), the communicator names the pending operation to the
// watchdog and polls NCCL for asynchronous errors (a peer that died). On an
// error, or when the run ends fatally (a timeout), every NCCL communicator
// is aborted (ncclCommAbort) before the ranks are ended.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CUDA_NCCLCOMMUNICATOR_H
#define AUTOPAR_RUNTIME_CUDA_NCCLCOMMUNICATOR_H

#include "CudaDevice.h"

#include "autopar/runtime/Communicator.h"

#include <nccl.h>

#include <deque>
#include <memory>
#include <vector>

namespace autopar::runtime::cuda {

class NcclCommunicator : public Communicator, public StreamObserver {
public:
  /// Creates the world and axis communicators. Collective over all ranks;
  /// \p host (MPI, same grid) must outlive the communicator: it serves
  /// maxOverWorld. Throws Error.
  static std::unique_ptr<NcclCommunicator> create(CudaDevice &device,
                                                  Communicator &host);
  ~NcclCommunicator() override;

  void maxOverWorld(double *values, int count) override;
  MemorySpace &memory() override { return device; }
  /// NCCL reduces floats of 16, 32 and 64 bits and 8/32/64-bit integers.
  bool canReduce(DType dtype) const override;
  void settleStats() override { settle(/*wait=*/true); }

  // StreamObserver
  std::string pendingOperation() override;
  void checkAsyncErrors() override;
  Watchdog *watchdog() override { return getWatchdog(); }

protected:
  AUTOPAR_COMMUNICATOR_OPERATIONS
  /// Megatron's batched p2p: every send and receive in one NCCL group, so
  /// that two neighbours sending to each other (1F1B) both proceed.
  void doExchange(const std::vector<Message> &sends,
                  const std::vector<Message> &receives,
                  CommScope scope) override;
  bool timesItself() const override { return true; }

private:
  /// One queued operation and the events around it.
  struct Pending {
    CommOp op;
    CommScope scope;
    /// `ready`: the compute stream reached the call; `start`/`stop` bracket
    /// the collective on the communication stream (timing).
    CUevent ready, start, stop;
  };

  NcclCommunicator(CudaDevice &device, Communicator &host);
  /// Queues \p call(comm, stream) between two events; checks its result.
  template <typename Enqueue>
  void enqueue(CommOp op, CommScope scope, Enqueue call);
  /// Counts the time of finished operations; with \p wait, of all.
  void settle(bool wait);
  CUevent takeEvent();
  /// Throws Error for \p result of \p op on \p scope, after aborting NCCL.
  void check(ncclResult_t result, CommOp op, CommScope scope);

  CudaDevice &device;
  Communicator &host;
  ncclComm_t comms[NumCommScopes] = {nullptr, nullptr, nullptr, nullptr};
  std::deque<Pending> pending;
  std::vector<CUevent> spareEvents;
};

/// "NCCL 2.28.9".
std::string ncclVersionText();

} // namespace autopar::runtime::cuda

#endif // AUTOPAR_RUNTIME_CUDA_NCCLCOMMUNICATOR_H
