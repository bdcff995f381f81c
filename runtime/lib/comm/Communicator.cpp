//===- Communicator.cpp - Collectives among the ranks of a grid -----------===//
//
// The checks, counters and watchdog scopes every implementation shares; the
// implementations only move bytes (the do* methods).
//
//===----------------------------------------------------------------------===//

#include "autopar/runtime/Communicator.h"

#include "autopar/runtime/Error.h"
#include "autopar/runtime/Watchdog.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <limits>

namespace autopar::runtime {

namespace {

int64_t maxElements = std::numeric_limits<int>::max();

Communicator *active = nullptr;

std::string describeScope(CommScope scope) {
  return scope == CommScope::World
             ? "among all ranks"
             : "on axis " + std::string(commScopeName(scope));
}

/// Bus bytes of one call (see CommCounter): \p bytes is S.
double busBytes(CommOp op, double bytes, int64_t ranks) {
  double n = static_cast<double>(ranks);
  switch (op) {
  case CommOp::AllReduce:
    return bytes * 2 * (n - 1) / n;
  case CommOp::AllGather:
  case CommOp::ReduceScatter:
  case CommOp::AllToAll:
  case CommOp::Scatter:
  case CommOp::Gather:
    return bytes * (n - 1) / n;
  case CommOp::Broadcast:
    return ranks > 1 ? bytes : 0;
  case CommOp::Send:
  case CommOp::Recv:
    return bytes;
  }
  return 0;
}

void checkCount(const char *what, int64_t count) {
  if (count < 0)
    throw Error(std::string(what) + ": negative element count " +
                std::to_string(count));
}

/// The reducible types among all of them, for messages.
std::string reducibleTypes(const Communicator &comm) {
  std::string names;
  for (int t = 0; t <= static_cast<int>(DType::Bool); ++t)
    if (comm.canReduce(static_cast<DType>(t)))
      names += (names.empty() ? "" : ", ") +
               std::string(dtypeName(static_cast<DType>(t)));
  return names;
}

void checkReducible(const Communicator &comm, const char *what, DType dtype) {
  if (!comm.canReduce(dtype))
    throw Error(
        std::string(what) + ": cannot reduce " + std::string(dtypeName(dtype)) +
        " tensors (this communicator reduces " + reducibleTypes(comm) + ")");
}

} // namespace

std::string_view commScopeName(CommScope scope) {
  return scope == CommScope::World ? "world"
                                   : gridAxisName(static_cast<GridAxis>(scope));
}

std::string_view commOpName(CommOp op) {
  switch (op) {
  case CommOp::AllReduce:
    return "all_reduce";
  case CommOp::AllGather:
    return "all_gather";
  case CommOp::ReduceScatter:
    return "reduce_scatter";
  case CommOp::AllToAll:
    return "all_to_all";
  case CommOp::Broadcast:
    return "broadcast";
  case CommOp::Send:
    return "send";
  case CommOp::Recv:
    return "recv";
  case CommOp::Scatter:
    return "scatter";
  case CommOp::Gather:
    return "gather";
  }
  return "?";
}

/// One counted call: a watchdog scope while it runs, then its time and bus
/// bytes added to the stats.
class Communicator::Call {
public:
  Call(Communicator &comm, CommOp op, CommScope scope, double bytes)
      : comm(comm), op(op), scope(scope), bytes(bytes),
        guard(comm.watchdog,
              comm.watchdog
                  ? std::string(commOpName(op)) + " " + describeScope(scope)
                  : std::string(),
              /*waiting=*/true) {
    comm.beforeCall();
    start = std::chrono::steady_clock::now();
  }

  ~Call() {
    CommCounter &counter =
        comm.stats[static_cast<size_t>(scope)][static_cast<size_t>(op)];
    counter.calls += 1;
    counter.busBytes += busBytes(op, bytes, comm.scopeSize(scope));
    if (!comm.timesItself())
      counter.seconds += std::chrono::duration<double>(
                             std::chrono::steady_clock::now() - start)
                             .count();
  }

private:
  Communicator &comm;
  CommOp op;
  CommScope scope;
  double bytes;
  Watchdog::Scope guard;
  std::chrono::steady_clock::time_point start;
};

Communicator::Communicator(int64_t rank, const GridVector &grid,
                           std::vector<GridVector> allCoords)
    : rank(rank), size(static_cast<int64_t>(allCoords.size())),
      coords(std::move(allCoords)) {
  for (int axis = 0; axis < NumGridAxes; ++axis) {
    scopeSizes[axis] = grid[axis];
    scopeRanks[axis] = coords[static_cast<size_t>(rank)][axis];
  }
  scopeSizes[static_cast<size_t>(CommScope::World)] = size;
  scopeRanks[static_cast<size_t>(CommScope::World)] = rank;
}

Communicator::~Communicator() = default;

bool Communicator::canReduce(DType dtype) const {
  return dtype == DType::Float32 || dtype == DType::Float64 || isInteger(dtype);
}

void Communicator::addSeconds(CommScope scope, CommOp op, double seconds) {
  stats[static_cast<size_t>(scope)][static_cast<size_t>(op)].seconds += seconds;
}

const GridVector &Communicator::coordsOf(int64_t worldRank) const {
  return coords.at(static_cast<size_t>(worldRank));
}

void Communicator::setMaxElementsPerCall(int64_t count) {
  maxElements = count > 0 ? count : std::numeric_limits<int>::max();
}

int64_t Communicator::maxElementsPerCall() { return maxElements; }

void Communicator::checkPeer(const char *what, int64_t peer, CommScope scope,
                             bool allowSelf) const {
  if (peer < 0 || peer >= scopeSize(scope) ||
      (!allowSelf && peer == scopeRank(scope)))
    throw Error(std::string(what) + " " + describeScope(scope) + ": rank " +
                std::to_string(peer) + " is not " +
                (allowSelf ? "a rank" : "another rank") + " of the " +
                std::to_string(scopeSize(scope)) + " there (this is rank " +
                std::to_string(scopeRank(scope)) + ")");
}

void Communicator::allReduce(const void *in, void *out, int64_t count,
                             DType dtype, ReduceOp op, CommScope scope) {
  checkCount("all_reduce", count);
  checkReducible(*this, "all_reduce", dtype);
  Call call(*this, CommOp::AllReduce, scope,
            double(count) * double(dtypeSize(dtype)));
  doAllReduce(in, out, count, dtype, op, scope);
}

void Communicator::allGather(const void *in, void *out, int64_t countPerRank,
                             DType dtype, CommScope scope) {
  checkCount("all_gather", countPerRank);
  Call call(*this, CommOp::AllGather, scope,
            double(countPerRank) * double(scopeSize(scope)) *
                double(dtypeSize(dtype)));
  doAllGather(in, out, countPerRank, dtype, scope);
}

void Communicator::reduceScatter(const void *in, void *out,
                                 int64_t countPerRank, DType dtype, ReduceOp op,
                                 CommScope scope) {
  checkCount("reduce_scatter", countPerRank);
  checkReducible(*this, "reduce_scatter", dtype);
  Call call(*this, CommOp::ReduceScatter, scope,
            double(countPerRank) * double(scopeSize(scope)) *
                double(dtypeSize(dtype)));
  doReduceScatter(in, out, countPerRank, dtype, op, scope);
}

void Communicator::allToAll(const void *in, void *out, int64_t countPerRank,
                            DType dtype, CommScope scope) {
  checkCount("all_to_all", countPerRank);
  Call call(*this, CommOp::AllToAll, scope,
            double(countPerRank) * double(scopeSize(scope)) *
                double(dtypeSize(dtype)));
  doAllToAll(in, out, countPerRank, dtype, scope);
}

void Communicator::broadcast(void *buffer, int64_t count, DType dtype,
                             int64_t root, CommScope scope) {
  checkCount("broadcast", count);
  checkPeer("broadcast", root, scope, /*allowSelf=*/true);
  Call call(*this, CommOp::Broadcast, scope,
            double(count) * double(dtypeSize(dtype)));
  doBroadcast(buffer, count, dtype, root, scope);
}

void Communicator::send(const void *buffer, int64_t count, DType dtype,
                        int64_t peer, CommScope scope) {
  checkCount("send", count);
  checkPeer("send", peer, scope, /*allowSelf=*/false);
  Call call(*this, CommOp::Send, scope,
            double(count) * double(dtypeSize(dtype)));
  doSend(buffer, count, dtype, peer, scope);
}

void Communicator::recv(void *buffer, int64_t count, DType dtype, int64_t peer,
                        CommScope scope) {
  checkCount("recv", count);
  checkPeer("recv", peer, scope, /*allowSelf=*/false);
  Call call(*this, CommOp::Recv, scope,
            double(count) * double(dtypeSize(dtype)));
  doRecv(buffer, count, dtype, peer, scope);
}

void Communicator::exchange(const std::vector<Message> &sends,
                            const std::vector<Message> &receives,
                            CommScope scope) {
  if (sends.empty() && receives.empty())
    return;
  double sent = 0, received = 0;
  for (const Message &m : sends) {
    checkCount("send", m.count);
    checkPeer("send", m.peer, scope, /*allowSelf=*/false);
    sent += double(m.count) * double(dtypeSize(m.dtype));
  }
  for (const Message &m : receives) {
    checkCount("recv", m.count);
    checkPeer("recv", m.peer, scope, /*allowSelf=*/false);
    received += double(m.count) * double(dtypeSize(m.dtype));
  }
  auto start = std::chrono::steady_clock::now();
  {
    Watchdog::Scope guard(
        watchdog, watchdog ? "exchange " + describeScope(scope) : std::string(),
        /*waiting=*/true);
    beforeCall();
    start = std::chrono::steady_clock::now();
    doExchange(sends, receives, scope);
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  // Each message is a call; the wall time goes to the sends, or to the
  // receives when nothing is sent.
  auto &row = stats[static_cast<size_t>(scope)];
  CommCounter &send = row[static_cast<size_t>(CommOp::Send)];
  CommCounter &recv = row[static_cast<size_t>(CommOp::Recv)];
  send.calls += static_cast<int64_t>(sends.size());
  send.busBytes += sent;
  recv.calls += static_cast<int64_t>(receives.size());
  recv.busBytes += received;
  if (!timesItself())
    (sends.empty() ? recv : send).seconds += seconds;
}

void Communicator::doExchange(const std::vector<Message> &,
                              const std::vector<Message> &, CommScope scope) {
  throw Error("this communicator cannot exchange point-to-point messages "
              "both ways at once (" +
              describeScope(scope) +
              "), which a pipeline-parallel training step needs; it runs on "
              "MPI ranks");
}

void Communicator::scatter(const void *in, void *out, int64_t countPerRank,
                           DType dtype, int64_t root, CommScope scope) {
  checkCount("scatter", countPerRank);
  checkPeer("scatter", root, scope, /*allowSelf=*/true);
  Call call(*this, CommOp::Scatter, scope,
            double(countPerRank) * double(scopeSize(scope)) *
                double(dtypeSize(dtype)));
  doScatter(in, out, countPerRank, dtype, root, scope);
}

void Communicator::gather(const void *in, void *out, int64_t countPerRank,
                          DType dtype, int64_t root, CommScope scope) {
  checkCount("gather", countPerRank);
  checkPeer("gather", root, scope, /*allowSelf=*/true);
  Call call(*this, CommOp::Gather, scope,
            double(countPerRank) * double(scopeSize(scope)) *
                double(dtypeSize(dtype)));
  doGather(in, out, countPerRank, dtype, root, scope);
}

//===----------------------------------------------------------------------===//
// LocalCommunicator
//===----------------------------------------------------------------------===//

namespace {
void copyElements(const void *in, void *out, int64_t count, DType dtype) {
  if (in != out && count > 0)
    std::memcpy(out, in, static_cast<size_t>(count) * dtypeSize(dtype));
}
} // namespace

LocalCommunicator::LocalCommunicator()
    : Communicator(0, GridVector{1, 1, 1}, {GridVector{0, 0, 0}}) {}

void LocalCommunicator::doAllReduce(const void *in, void *out, int64_t count,
                                    DType dtype, ReduceOp, CommScope) {
  copyElements(in, out, count, dtype);
}

void LocalCommunicator::doAllGather(const void *in, void *out,
                                    int64_t countPerRank, DType dtype,
                                    CommScope) {
  copyElements(in, out, countPerRank, dtype);
}

void LocalCommunicator::doReduceScatter(const void *in, void *out,
                                        int64_t countPerRank, DType dtype,
                                        ReduceOp, CommScope) {
  copyElements(in, out, countPerRank, dtype);
}

void LocalCommunicator::doAllToAll(const void *in, void *out,
                                   int64_t countPerRank, DType dtype,
                                   CommScope) {
  copyElements(in, out, countPerRank, dtype);
}

void LocalCommunicator::doSend(const void *, int64_t, DType, int64_t,
                               CommScope) {
  throw Error("send: a single-rank run has no peer"); // checkPeer refuses.
}

void LocalCommunicator::doRecv(void *, int64_t, DType, int64_t, CommScope) {
  throw Error("recv: a single-rank run has no peer");
}

void LocalCommunicator::doScatter(const void *in, void *out,
                                  int64_t countPerRank, DType dtype, int64_t,
                                  CommScope) {
  copyElements(in, out, countPerRank, dtype);
}

void LocalCommunicator::doGather(const void *in, void *out,
                                 int64_t countPerRank, DType dtype, int64_t,
                                 CommScope) {
  copyElements(in, out, countPerRank, dtype);
}

//===----------------------------------------------------------------------===//
// The active communicator and the statistics table
//===----------------------------------------------------------------------===//

Communicator *activeCommunicator() { return active; }

void setActiveCommunicator(Communicator *communicator) {
  active = communicator;
}

void flattenCommStats(const CommStats &stats, double *values) {
  for (int s = 0; s < NumCommScopes; ++s) {
    for (int o = 0; o < NumCommOps; ++o) {
      const CommCounter &c = stats[s][o];
      double *at = values + (s * NumCommOps + o) * 3;
      at[0] = static_cast<double>(c.calls);
      at[1] = c.busBytes;
      at[2] = c.seconds;
    }
  }
}

CommStats unflattenCommStats(const double *values) {
  CommStats stats{};
  for (int s = 0; s < NumCommScopes; ++s) {
    for (int o = 0; o < NumCommOps; ++o) {
      const double *at = values + (s * NumCommOps + o) * 3;
      stats[s][o] = {static_cast<int64_t>(at[0]), at[1], at[2]};
    }
  }
  return stats;
}

std::string formatCommStats(const CommStats &stats) {
  std::string text =
      "communication (per rank, maximum over ranks; bus bytes as nccl-tests "
      "count them):\n";
  char line[160];
  std::snprintf(line, sizeof(line), "  %-6s %-15s %10s %16s %12s %12s\n",
                "axis", "op", "calls", "bus_bytes", "seconds", "busbw_GB/s");
  text += line;
  bool any = false;
  for (int s = 0; s < NumCommScopes; ++s) {
    for (int o = 0; o < NumCommOps; ++o) {
      const CommCounter &c = stats[s][o];
      if (c.calls == 0)
        continue;
      any = true;
      double bandwidth = c.seconds > 0 ? c.busBytes / c.seconds / 1e9 : 0.0;
      std::snprintf(
          line, sizeof(line),
          "  %-6s %-15s %10" PRId64 " %16.0f %12.6f %12.3f\n",
          std::string(commScopeName(static_cast<CommScope>(s))).c_str(),
          std::string(commOpName(static_cast<CommOp>(o))).c_str(), c.calls,
          c.busBytes, c.seconds, bandwidth);
      text += line;
    }
  }
  if (!any)
    text += "  (no communication)\n";
  return text;
}

std::string formatCommStatsJson(const CommStats &stats, int64_t steps) {
  nlohmann::ordered_json scopes = nlohmann::ordered_json::object();
  for (int s = 0; s < NumCommScopes; ++s) {
    for (int o = 0; o < NumCommOps; ++o) {
      const CommCounter &c = stats[s][o];
      if (c.calls == 0)
        continue;
      std::string scope(commScopeName(static_cast<CommScope>(s)));
      std::string op(commOpName(static_cast<CommOp>(o)));
      scopes[scope][op] = {{"calls", c.calls},
                           {"bus_bytes", c.busBytes},
                           {"seconds", c.seconds}};
    }
  }
  nlohmann::ordered_json json = {{"steps", steps}, {"collectives", scopes}};
  return json.dump(2) + "\n";
}

} // namespace autopar::runtime
