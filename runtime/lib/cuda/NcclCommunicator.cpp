//===- NcclCommunicator.cpp - Collectives on GPU memory with NCCL ---------===//

#include "NcclCommunicator.h"

#include "autopar/runtime/Error.h"
#include "autopar/runtime/Fatal.h"

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

namespace autopar::runtime::cuda {

namespace {

/// Queued operations whose events are kept before the oldest are waited
/// for (normally they are counted long before, as they finish).
constexpr size_t MaxPending = 4096;

/// The communicators fatalError aborts (one NcclCommunicator per process).
std::atomic<ncclComm_t *> liveComms{nullptr};

/// fatalError's cleanup: abort every NCCL communicator, so that kernels
/// waiting for a dead peer end and the GPU is released. ncclCommAbort should
/// not block, but the run must end regardless: give it a few seconds.
void abortLiveComms() {
  ncclComm_t *comms = liveComms.exchange(nullptr);
  if (!comms)
    return;
  std::packaged_task<void()> abort([comms] {
    for (int s = 0; s < NumCommScopes; ++s)
      if (comms[s])
        ncclCommAbort(comms[s]);
  });
  std::future<void> done = abort.get_future();
  std::thread worker(std::move(abort));
  if (done.wait_for(std::chrono::seconds(5)) == std::future_status::ready)
    worker.join();
  else
    worker.detach();
}

std::string describe(CommOp op, CommScope scope) {
  return std::string(commOpName(op)) +
         (scope == CommScope::World
              ? " among all ranks"
              : " on axis " + std::string(commScopeName(scope))) +
         " (NCCL)";
}

ncclDataType_t ncclType(DType dtype) {
  switch (dtype) {
  case DType::Float32:
    return ncclFloat32;
  case DType::Float64:
    return ncclFloat64;
  case DType::Float16:
    return ncclFloat16;
  case DType::BFloat16:
    return ncclBfloat16;
  case DType::Int64:
    return ncclInt64;
  case DType::Int32:
    return ncclInt32;
  case DType::Int8:
    return ncclInt8;
  case DType::UInt64:
    return ncclUint64;
  case DType::UInt32:
    return ncclUint32;
  case DType::UInt8:
  case DType::Bool:
  case DType::Int16:
  case DType::UInt16:
    break; // Moved as bytes, never reduced (canReduce).
  }
  return ncclUint8;
}

ncclRedOp_t ncclOp(ReduceOp op) {
  return op == ReduceOp::Sum ? ncclSum : ncclMax;
}

/// Data movement does not look at values: count bytes.
size_t bytes(int64_t count, DType dtype) {
  return static_cast<size_t>(count) * dtypeSize(dtype);
}

/// NCCL's last message for \p comm (may be null), if any.
std::string lastError(ncclComm_t comm) {
  const char *text = ncclGetLastError(comm);
  return text ? text : "";
}

} // namespace

std::string ncclVersionText() {
  int version = 0;
  ncclGetVersion(&version);
  // NCCL >= 2.9 encodes X.Y.Z as X*10000 + Y*100 + Z.
  return "NCCL " + std::to_string(version / 10000) + "." +
         std::to_string(version / 100 % 100) + "." +
         std::to_string(version % 100);
}

NcclCommunicator::NcclCommunicator(CudaDevice &device, Communicator &host)
    : Communicator(host.worldRank(),
                   {host.scopeSize(CommScope::DP),
                    host.scopeSize(CommScope::TP),
                    host.scopeSize(CommScope::PP)},
                   [&] {
                     std::vector<GridVector> coords;
                     for (int64_t r = 0; r < host.worldSize(); ++r)
                       coords.push_back(host.coordsOf(r));
                     return coords;
                   }()),
      device(device), host(host) {}

std::unique_ptr<NcclCommunicator> NcclCommunicator::create(CudaDevice &device,
                                                           Communicator &host) {
  std::unique_ptr<NcclCommunicator> self(new NcclCommunicator(device, host));
  int rank = static_cast<int>(host.worldRank());
  int size = static_cast<int>(host.worldSize());
  ncclUniqueId id{};
  if (rank == 0)
    self->check(ncclGetUniqueId(&id), CommOp::Broadcast, CommScope::World);
  // Rank 0's id reaches the others over the host communicator (MPI on CPU
  // ranks): the CUDA backend itself calls no MPI.
  if (size > 1)
    host.broadcast(&id, sizeof(id), DType::UInt8, 0, CommScope::World);
  ncclComm_t &world = self->comms[static_cast<size_t>(CommScope::World)];
  ncclResult_t result = ncclCommInitRank(&world, size, id, rank);
  if (result != ncclSuccess)
    throw Error("ncclCommInitRank failed for rank " + std::to_string(rank) +
                " of " + std::to_string(size) + ": " +
                ncclGetErrorString(result) + " (" + lastError(nullptr) + ")");
  const GridVector &mine = host.coordsOf(rank);
  for (int axis = 0; axis < NumGridAxes; ++axis) {
    // Color: the coordinates on the other two axes; key: this axis'.
    int color = 0;
    for (int other = 0; other < NumGridAxes; ++other)
      if (other != axis)
        color = color * static_cast<int>(
                            host.scopeSize(static_cast<CommScope>(other))) +
                static_cast<int>(mine[other]);
    result = ncclCommSplit(world, color, static_cast<int>(mine[axis]),
                           &self->comms[axis], nullptr);
    if (result != ncclSuccess)
      throw Error("ncclCommSplit failed for grid axis " +
                  std::string(gridAxisName(static_cast<GridAxis>(axis))) +
                  ": " + ncclGetErrorString(result) + " (" + lastError(world) +
                  ")");
  }
  liveComms = self->comms;
  setFatalCleanup(abortLiveComms);
  device.setObserver(self.get());
  return self;
}

NcclCommunicator::~NcclCommunicator() {
  device.setObserver(nullptr);
  liveComms = nullptr;
  setFatalCleanup(nullptr);
  try {
    device.synchronize();
    settle(/*wait=*/true);
  } catch (const std::exception &) {
    // Ending anyway; the communicators go below.
  }
  for (ncclComm_t comm : comms)
    if (comm)
      ncclCommDestroy(comm);
  for (const Pending &p : pending)
    for (CUevent event : {p.ready, p.start, p.stop})
      driver().cuEventDestroy(event);
  for (CUevent event : spareEvents)
    driver().cuEventDestroy(event);
}

void NcclCommunicator::maxOverWorld(double *values, int count) {
  host.maxOverWorld(values, count);
}

bool NcclCommunicator::canReduce(DType dtype) const {
  switch (dtype) {
  case DType::Float32:
  case DType::Float64:
  case DType::Float16:
  case DType::BFloat16:
  case DType::Int64:
  case DType::Int32:
  case DType::Int8:
  case DType::UInt64:
  case DType::UInt32:
  case DType::UInt8:
    return true;
  default:
    return false;
  }
}

void NcclCommunicator::check(ncclResult_t result, CommOp op, CommScope scope) {
  if (result == ncclSuccess)
    return;
  ncclComm_t comm = comms[static_cast<size_t>(scope)];
  std::string detail = lastError(comm);
  throw Error(describe(op, scope) + " failed: " + ncclGetErrorString(result) +
              (detail.empty() ? "" : " (" + detail + ")"));
}

CUevent NcclCommunicator::takeEvent() {
  if (!spareEvents.empty()) {
    CUevent event = spareEvents.back();
    spareEvents.pop_back();
    return event;
  }
  CUevent event = nullptr;
  AUTOPAR_CU(cuEventCreate, &event, CU_EVENT_DEFAULT); // Timed.
  return event;
}

template <typename Enqueue>
void NcclCommunicator::enqueue(CommOp op, CommScope scope, Enqueue call) {
  settle(/*wait=*/pending.size() >= MaxPending);
  Pending p{op, scope, takeEvent(), takeEvent(), takeEvent()};
  // NCCL runs on its own stream, after the compute work that produced its
  // input; the compute stream waits for it before going on. Compute queued
  // by then that does not depend on the result is free to overlap (the
  // caching allocator's stream-ordered reuse stays correct: the compute
  // stream frees nothing the collective still reads before the wait).
  CUstream compute = device.stream(), comm = device.communicationStream();
  AUTOPAR_CU(cuEventRecord, p.ready, compute);
  AUTOPAR_CU(cuStreamWaitEvent, comm, p.ready, 0);
  AUTOPAR_CU(cuEventRecord, p.start, comm);
  check(call(comms[static_cast<size_t>(scope)],
             reinterpret_cast<cudaStream_t>(comm)),
        op, scope);
  AUTOPAR_CU(cuEventRecord, p.stop, comm);
  AUTOPAR_CU(cuStreamWaitEvent, compute, p.stop, 0);
  pending.push_back(p);
}

void NcclCommunicator::settle(bool wait) {
  while (!pending.empty()) {
    Pending &p = pending.front();
    CUresult state = wait ? driver().cuEventSynchronize(p.stop)
                          : driver().cuEventQuery(p.stop);
    if (state == CUDA_ERROR_NOT_READY)
      return;
    checkCuda(state, wait ? "cuEventSynchronize" : "cuEventQuery");
    float ms = 0;
    AUTOPAR_CU(cuEventElapsedTime, &ms, p.start, p.stop);
    addSeconds(p.scope, p.op, ms / 1000.0);
    spareEvents.insert(spareEvents.end(), {p.ready, p.start, p.stop});
    pending.pop_front();
  }
}

std::string NcclCommunicator::pendingOperation() {
  for (const Pending &p : pending)
    if (driver().cuEventQuery(p.stop) == CUDA_ERROR_NOT_READY)
      return describe(p.op, p.scope);
  return "";
}

void NcclCommunicator::checkAsyncErrors() {
  for (int s = 0; s < NumCommScopes; ++s) {
    ncclResult_t state = ncclSuccess;
    if (!comms[s] || ncclCommGetAsyncError(comms[s], &state) != ncclSuccess)
      continue;
    if (state == ncclSuccess || state == ncclInProgress)
      continue;
    std::string pendingOp = pendingOperation();
    std::string detail = lastError(comms[s]);
    abortLiveComms(); // Kernels waiting for the failed peer end now.
    throw Error("NCCL failed on " +
                (s == static_cast<int>(CommScope::World)
                     ? std::string("the world communicator")
                     : "axis " + std::string(commScopeName(
                                     static_cast<CommScope>(s)))) +
                ": " + ncclGetErrorString(state) +
                (detail.empty() ? "" : " (" + detail + ")") +
                (pendingOp.empty() ? "" : ", in " + pendingOp));
  }
}

void NcclCommunicator::doAllReduce(const void *in, void *out, int64_t count,
                                   DType dtype, ReduceOp op, CommScope scope) {
  enqueue(CommOp::AllReduce, scope, [&](ncclComm_t comm, cudaStream_t s) {
    return ncclAllReduce(in, out, size_t(count), ncclType(dtype), ncclOp(op),
                         comm, s);
  });
}

void NcclCommunicator::doAllGather(const void *in, void *out,
                                   int64_t countPerRank, DType dtype,
                                   CommScope scope) {
  enqueue(CommOp::AllGather, scope, [&](ncclComm_t comm, cudaStream_t s) {
    return ncclAllGather(in, out, bytes(countPerRank, dtype), ncclUint8, comm,
                         s);
  });
}

void NcclCommunicator::doReduceScatter(const void *in, void *out,
                                       int64_t countPerRank, DType dtype,
                                       ReduceOp op, CommScope scope) {
  enqueue(CommOp::ReduceScatter, scope, [&](ncclComm_t comm, cudaStream_t s) {
    return ncclReduceScatter(in, out, size_t(countPerRank), ncclType(dtype),
                             ncclOp(op), comm, s);
  });
}

void NcclCommunicator::doAllToAll(const void *in, void *out,
                                  int64_t countPerRank, DType dtype,
                                  CommScope scope) {
  enqueue(CommOp::AllToAll, scope, [&](ncclComm_t comm, cudaStream_t s) {
    return ncclAlltoAll(in, out, bytes(countPerRank, dtype), ncclUint8, comm,
                        s);
  });
}

void NcclCommunicator::doBroadcast(void *buffer, int64_t count, DType dtype,
                                   int64_t root, CommScope scope) {
  enqueue(CommOp::Broadcast, scope, [&](ncclComm_t comm, cudaStream_t s) {
    return ncclBroadcast(buffer, buffer, bytes(count, dtype), ncclUint8,
                         static_cast<int>(root), comm, s);
  });
}

void NcclCommunicator::doSend(const void *buffer, int64_t count, DType dtype,
                              int64_t peer, CommScope scope) {
  enqueue(CommOp::Send, scope, [&](ncclComm_t comm, cudaStream_t s) {
    return ncclSend(buffer, bytes(count, dtype), ncclUint8,
                    static_cast<int>(peer), comm, s);
  });
}

void NcclCommunicator::doRecv(void *buffer, int64_t count, DType dtype,
                              int64_t peer, CommScope scope) {
  enqueue(CommOp::Recv, scope, [&](ncclComm_t comm, cudaStream_t s) {
    return ncclRecv(buffer, bytes(count, dtype), ncclUint8,
                    static_cast<int>(peer), comm, s);
  });
}

void NcclCommunicator::doExchange(const std::vector<Message> &sends,
                                  const std::vector<Message> &receives,
                                  CommScope scope) {
  enqueue(sends.empty() ? CommOp::Recv : CommOp::Send, scope,
          [&](ncclComm_t comm, cudaStream_t s) {
            ncclResult_t result = ncclGroupStart();
            for (const Message &m : sends)
              if (result == ncclSuccess)
                result = ncclSend(m.buffer, bytes(m.count, m.dtype), ncclUint8,
                                  static_cast<int>(m.peer), comm, s);
            for (const Message &m : receives)
              if (result == ncclSuccess)
                result = ncclRecv(m.buffer, bytes(m.count, m.dtype), ncclUint8,
                                  static_cast<int>(m.peer), comm, s);
            // The group is closed even after a failed call, so that NCCL is
            // left usable for the error report.
            ncclResult_t end = ncclGroupEnd();
            return result != ncclSuccess ? result : end;
          });
}

void NcclCommunicator::doScatter(const void *in, void *out,
                                 int64_t countPerRank, DType dtype,
                                 int64_t root, CommScope scope) {
  enqueue(CommOp::Scatter, scope, [&](ncclComm_t comm, cudaStream_t s) {
    return ncclScatter(in, out, bytes(countPerRank, dtype), ncclUint8,
                       static_cast<int>(root), comm, s);
  });
}

void NcclCommunicator::doGather(const void *in, void *out, int64_t countPerRank,
                                DType dtype, int64_t root, CommScope scope) {
  enqueue(CommOp::Gather, scope, [&](ncclComm_t comm, cudaStream_t s) {
    return ncclGather(in, out, bytes(countPerRank, dtype), ncclUint8,
                      static_cast<int>(root), comm, s);
  });
}

} // namespace autopar::runtime::cuda
