//===- StagingCommunicator.cpp - Device collectives over the host ---------===//

#include "autopar/runtime/StagingCommunicator.h"

namespace autopar::runtime {

namespace {

GridVector gridOf(const Communicator &comm) {
  return {comm.scopeSize(CommScope::DP), comm.scopeSize(CommScope::TP),
          comm.scopeSize(CommScope::PP)};
}

std::vector<GridVector> allCoords(const Communicator &comm) {
  std::vector<GridVector> coords;
  for (int64_t r = 0; r < comm.worldSize(); ++r)
    coords.push_back(comm.coordsOf(r));
  return coords;
}

bool is16BitFloat(DType dtype) {
  return dtype == DType::Float16 || dtype == DType::BFloat16;
}

/// \p buffer, grown to at least \p bytes.
char *reserve(HostBuffer &buffer, size_t bytes) {
  if (buffer.size() < bytes || !buffer.data())
    buffer = HostBuffer(bytes);
  return static_cast<char *>(buffer.data());
}

size_t bytesOf(int64_t count, DType dtype) {
  return static_cast<size_t>(count) * dtypeSize(dtype);
}

} // namespace

StagingCommunicator::StagingCommunicator(Communicator &host,
                                         MemorySpace &device)
    : Communicator(host.worldRank(), gridOf(host), allCoords(host)), host(host),
      device(device) {}

void StagingCommunicator::maxOverWorld(double *values, int count) {
  host.maxOverWorld(values, count);
}

bool StagingCommunicator::canReduce(DType dtype) const {
  if (is16BitFloat(dtype))
    return host.canReduce(DType::Float32);
  return host.canReduce(dtype);
}

template <typename HostOp>
void StagingCommunicator::relay(const void *in, int64_t inCount, void *out,
                                int64_t outCount, DType dtype, bool widen,
                                bool inPlace, HostOp hostOp) {
  widen = widen && is16BitFloat(dtype);
  DType hostType = widen ? DType::Float32 : dtype;
  char *input = reserve(hostIn, bytesOf(inCount, hostType));
  char *output =
      inPlace ? input : reserve(hostOut, bytesOf(outCount, hostType));
  if (in && inCount > 0) {
    if (widen) {
      char *bits = reserve(raw, bytesOf(inCount, dtype));
      device.copyToHost(bits, in, bytesOf(inCount, dtype));
      convertToFloat32(bits, dtype, inCount, reinterpret_cast<float *>(input));
    } else {
      device.copyToHost(input, in, bytesOf(inCount, dtype));
    }
  }
  hostOp(input, output, hostType);
  if (!out || outCount == 0)
    return;
  if (widen) {
    char *bits = reserve(raw, bytesOf(outCount, dtype));
    convertFromFloat32(reinterpret_cast<const float *>(output), outCount, dtype,
                       bits);
    device.copyFromHost(out, bits, bytesOf(outCount, dtype));
  } else {
    device.copyFromHost(out, output, bytesOf(outCount, dtype));
  }
}

void StagingCommunicator::doAllReduce(const void *in, void *out, int64_t count,
                                      DType dtype, ReduceOp op,
                                      CommScope scope) {
  relay(in, count, out, count, dtype, /*widen=*/true, /*inPlace=*/false,
        [&](const void *hin, void *hout, DType type) {
          host.allReduce(hin, hout, count, type, op, scope);
        });
}

void StagingCommunicator::doAllGather(const void *in, void *out,
                                      int64_t countPerRank, DType dtype,
                                      CommScope scope) {
  relay(in, countPerRank, out, countPerRank * scopeSize(scope), dtype, false,
        false, [&](const void *hin, void *hout, DType type) {
          host.allGather(hin, hout, countPerRank, type, scope);
        });
}

void StagingCommunicator::doReduceScatter(const void *in, void *out,
                                          int64_t countPerRank, DType dtype,
                                          ReduceOp op, CommScope scope) {
  relay(in, countPerRank * scopeSize(scope), out, countPerRank, dtype,
        /*widen=*/true, false, [&](const void *hin, void *hout, DType type) {
          host.reduceScatter(hin, hout, countPerRank, type, op, scope);
        });
}

void StagingCommunicator::doAllToAll(const void *in, void *out,
                                     int64_t countPerRank, DType dtype,
                                     CommScope scope) {
  int64_t count = countPerRank * scopeSize(scope);
  relay(in, count, out, count, dtype, false, false,
        [&](const void *hin, void *hout, DType type) {
          host.allToAll(hin, hout, countPerRank, type, scope);
        });
}

void StagingCommunicator::doBroadcast(void *buffer, int64_t count, DType dtype,
                                      int64_t root, CommScope scope) {
  // Only the root's bytes matter on the way in.
  bool isRoot = scopeRank(scope) == root;
  relay(isRoot ? buffer : nullptr, count, buffer, count, dtype, false,
        /*inPlace=*/true, [&](const void *, void *hout, DType type) {
          host.broadcast(hout, count, type, root, scope);
        });
}

void StagingCommunicator::doSend(const void *buffer, int64_t count, DType dtype,
                                 int64_t peer, CommScope scope) {
  relay(buffer, count, nullptr, 0, dtype, false, false,
        [&](const void *hin, void *, DType type) {
          host.send(hin, count, type, peer, scope);
        });
}

void StagingCommunicator::doRecv(void *buffer, int64_t count, DType dtype,
                                 int64_t peer, CommScope scope) {
  relay(nullptr, 0, buffer, count, dtype, false, false,
        [&](const void *, void *hout, DType type) {
          host.recv(hout, count, type, peer, scope);
        });
}

void StagingCommunicator::doExchange(const std::vector<Message> &sends,
                                     const std::vector<Message> &receives,
                                     CommScope scope) {
  // One host buffer per message: all of them are in flight at once.
  std::vector<HostBuffer> staged;
  std::vector<Message> hostSends, hostReceives;
  for (const Message &m : sends) {
    staged.emplace_back(bytesOf(m.count, m.dtype));
    device.copyToHost(staged.back().data(), m.buffer,
                      bytesOf(m.count, m.dtype));
    hostSends.push_back({staged.back().data(), m.count, m.dtype, m.peer});
  }
  for (const Message &m : receives) {
    staged.emplace_back(bytesOf(m.count, m.dtype));
    hostReceives.push_back({staged.back().data(), m.count, m.dtype, m.peer});
  }
  host.exchange(hostSends, hostReceives, scope);
  for (size_t i = 0; i < receives.size(); ++i)
    device.copyFromHost(receives[i].buffer, hostReceives[i].buffer,
                        bytesOf(receives[i].count, receives[i].dtype));
}

void StagingCommunicator::doScatter(const void *in, void *out,
                                    int64_t countPerRank, DType dtype,
                                    int64_t root, CommScope scope) {
  bool isRoot = scopeRank(scope) == root;
  relay(isRoot ? in : nullptr, isRoot ? countPerRank * scopeSize(scope) : 0,
        out, countPerRank, dtype, false, false,
        [&](const void *hin, void *hout, DType type) {
          host.scatter(hin, hout, countPerRank, type, root, scope);
        });
}

void StagingCommunicator::doGather(const void *in, void *out,
                                   int64_t countPerRank, DType dtype,
                                   int64_t root, CommScope scope) {
  bool isRoot = scopeRank(scope) == root;
  relay(in, countPerRank, isRoot ? out : nullptr,
        isRoot ? countPerRank * scopeSize(scope) : 0, dtype, false, false,
        [&](const void *hin, void *hout, DType type) {
          host.gather(hin, hout, countPerRank, type, root, scope);
        });
}

} // namespace autopar::runtime
