//===- Communicator.h - Collectives among the ranks of a grid ---*- C++ -*-===//
//
// One object per rank gives the runtime and the generated code its
// collectives: for each grid axis (dp, tp, pp) a communicator among the ranks
// that share the other two coordinates, plus the whole world for the
// runtime's own traffic (scattering inputs, gathering outputs).
//
// All operations work on contiguous buffers of `count` elements of a DType.
// Data movement accepts every DType; reductions accept float32, float64 and
// the integer types. Every call is counted (calls, bus bytes, seconds, per
// axis and operation, see CommStats) and runs under the watchdog, if one is
// set, so that a peer that never arrives ends the run with an error instead
// of a hang.
//
// Buffers live in the communicator's MemorySpace: host memory for
// LocalCommunicator (a world of one, no MPI) below and MpiCommunicator
// (MpiCommunicator.h); a GPU's memory for StagingCommunicator
// (StagingCommunicator.h, device buffers relayed over a host communicator)
// and the NCCL one of the CUDA runtime (runtime/lib/cuda).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_COMMUNICATOR_H
#define AUTOPAR_RUNTIME_COMMUNICATOR_H

#include "autopar/runtime/DType.h"
#include "autopar/runtime/Grid.h"
#include "autopar/runtime/MemorySpace.h"

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace autopar::runtime {

class Watchdog;

/// Where a collective runs: one grid axis, or the whole world.
enum class CommScope : uint8_t { DP = 0, TP = 1, PP = 2, World = 3 };

constexpr int NumCommScopes = 4;

/// The scope of grid axis \p axis.
inline CommScope scopeOf(GridAxis axis) { return static_cast<CommScope>(axis); }

/// "dp", "tp", "pp" or "world".
std::string_view commScopeName(CommScope scope);

enum class ReduceOp : uint8_t { Sum, Max };

/// The operations a Communicator counts.
enum class CommOp : uint8_t {
  AllReduce,
  AllGather,
  ReduceScatter,
  AllToAll,
  Broadcast,
  Send,
  Recv,
  Scatter,
  Gather,
};

constexpr int NumCommOps = 9;

/// "all_reduce", "all_gather", ...
std::string_view commOpName(CommOp op);

/// Totals of one operation on one scope, on this rank.
struct CommCounter {
  int64_t calls = 0;
  /// Bus bytes, as NVIDIA's nccl-tests define them (doc/PERFORMANCE.md): the
  /// bytes one rank's busiest link carries with an optimal (ring) algorithm.
  /// With n ranks and S the operation's size in bytes:
  ///   all_reduce      S = buffer             bus = S * 2(n-1)/n
  ///   all_gather      S = output (n blocks)  bus = S * (n-1)/n
  ///   reduce_scatter  S = input  (n blocks)  bus = S * (n-1)/n
  ///   all_to_all      S = input  (n blocks)  bus = S * (n-1)/n
  ///   scatter, gather S = root's buffer      bus = S * (n-1)/n
  ///   broadcast       S = buffer             bus = S  (0 if n = 1)
  ///   send, recv      S = buffer             bus = S
  /// Dividing by seconds gives nccl-tests' "busbw", comparable to link speed.
  double busBytes = 0;
  /// Wall time inside the calls, waiting for peers included.
  double seconds = 0;
};

/// This rank's counters, indexed [scope][op].
using CommStats =
    std::array<std::array<CommCounter, NumCommOps>, NumCommScopes>;

/// This rank's collectives. Not thread-safe: one thread (the one running the
/// program) calls it. Errors (a bad argument, a failing MPI call) throw Error.
class Communicator {
public:
  virtual ~Communicator();

  int64_t worldRank() const { return rank; }
  int64_t worldSize() const { return size; }
  /// Number of ranks in \p scope.
  int64_t scopeSize(CommScope scope) const {
    return scopeSizes[static_cast<size_t>(scope)];
  }
  /// This rank's index in \p scope: its coordinate on a grid axis, its world
  /// rank for World.
  int64_t scopeRank(CommScope scope) const {
    return scopeRanks[static_cast<size_t>(scope)];
  }
  /// The grid coordinates of world rank \p worldRank.
  const GridVector &coordsOf(int64_t worldRank) const;

  /// out = op over the scope's ranks of in, elementwise. \p in may equal
  /// \p out (in place).
  void allReduce(const void *in, void *out, int64_t count, DType dtype,
                 ReduceOp op, CommScope scope);
  /// out (n * countPerRank) = the concatenation of every rank's in, in rank
  /// order.
  void allGather(const void *in, void *out, int64_t countPerRank, DType dtype,
                 CommScope scope);
  /// in holds n blocks of countPerRank; out = the sum over ranks of block
  /// scopeRank.
  void reduceScatter(const void *in, void *out, int64_t countPerRank,
                     DType dtype, ReduceOp op, CommScope scope);
  /// in and out hold n blocks of countPerRank: block j of rank i's in becomes
  /// block i of rank j's out.
  void allToAll(const void *in, void *out, int64_t countPerRank, DType dtype,
                CommScope scope);
  /// buffer of rank \p root (a scope rank) is copied to every rank's buffer.
  void broadcast(void *buffer, int64_t count, DType dtype, int64_t root,
                 CommScope scope);
  /// Blocking send to, and receive from, scope rank \p peer (not this rank).
  void send(const void *buffer, int64_t count, DType dtype, int64_t peer,
            CommScope scope);
  void recv(void *buffer, int64_t count, DType dtype, int64_t peer,
            CommScope scope);
  /// One message of exchange(): \p count elements at \p buffer, to or from
  /// scope rank \p peer.
  struct Message {
    void *buffer = nullptr;
    int64_t count = 0;
    DType dtype = DType::Float32;
    int64_t peer = 0;
  };
  /// Sends every one of \p sends and receives every one of \p receives,
  /// all started before any is waited for (Megatron's batched p2p), so that
  /// two neighbours that send to each other, as the stages of a 1F1B
  /// pipeline do in its steady state, cannot deadlock. Counted as one send
  /// or recv per message. Implementations without it throw.
  void exchange(const std::vector<Message> &sends,
                const std::vector<Message> &receives, CommScope scope);
  /// Block r of root's \p in (n blocks, read on root only) goes to scope rank
  /// r's \p out.
  void scatter(const void *in, void *out, int64_t countPerRank, DType dtype,
               int64_t root, CommScope scope);
  /// Every rank's \p in becomes block r of root's \p out (written on root
  /// only).
  void gather(const void *in, void *out, int64_t countPerRank, DType dtype,
              int64_t root, CommScope scope);

  /// Replaces values[i] by its maximum over all ranks, on every rank. For the
  /// runtime's bookkeeping (step times, statistics); not counted.
  virtual void maxOverWorld(double *values, int count) = 0;

  /// Where the buffers of every operation live (host memory unless
  /// overridden).
  virtual MemorySpace &memory() { return hostMemory(); }

  /// True if all_reduce and reduce_scatter accept \p dtype: float32, float64
  /// and the integer types, unless overridden.
  virtual bool canReduce(DType dtype) const;

  /// Runs every later call under \p watchdog (may be null: none).
  void setWatchdog(Watchdog *dog) { watchdog = dog; }

  /// Brings the counters up to date: an implementation whose operations
  /// finish after they return (NCCL, on a GPU stream) adds their times once
  /// they have finished. Call before getStats() after the last step.
  virtual void settleStats() {}

  const CommStats &getStats() const { return stats; }

  /// The largest number of elements one MPI call moves; larger operations are
  /// cut into pieces (MPI counts are int). Tests lower it to exercise that.
  static void setMaxElementsPerCall(int64_t count);
  static int64_t maxElementsPerCall();

protected:
  /// \p coords: the grid coordinates of every world rank.
  Communicator(int64_t rank, const GridVector &grid,
               std::vector<GridVector> coords);

  virtual void doAllReduce(const void *in, void *out, int64_t count,
                           DType dtype, ReduceOp op, CommScope scope) = 0;
  virtual void doAllGather(const void *in, void *out, int64_t countPerRank,
                           DType dtype, CommScope scope) = 0;
  virtual void doReduceScatter(const void *in, void *out, int64_t countPerRank,
                               DType dtype, ReduceOp op, CommScope scope) = 0;
  virtual void doAllToAll(const void *in, void *out, int64_t countPerRank,
                          DType dtype, CommScope scope) = 0;
  virtual void doBroadcast(void *buffer, int64_t count, DType dtype,
                           int64_t root, CommScope scope) = 0;
  virtual void doSend(const void *buffer, int64_t count, DType dtype,
                      int64_t peer, CommScope scope) = 0;
  virtual void doRecv(void *buffer, int64_t count, DType dtype, int64_t peer,
                      CommScope scope) = 0;
  virtual void doScatter(const void *in, void *out, int64_t countPerRank,
                         DType dtype, int64_t root, CommScope scope) = 0;
  /// exchange(); the default throws (a communicator without non-blocking
  /// point-to-point messages).
  virtual void doExchange(const std::vector<Message> &sends,
                          const std::vector<Message> &receives,
                          CommScope scope);
  virtual void doGather(const void *in, void *out, int64_t countPerRank,
                        DType dtype, int64_t root, CommScope scope) = 0;

  /// Called before each operation starts its clock: a GPU communicator waits
  /// here for the work that produces the operation's input, so that its
  /// time is not counted as communication.
  virtual void beforeCall() {}
  /// True if the implementation measures the seconds of its operations
  /// itself (addSeconds) rather than by the wall time inside the calls.
  virtual bool timesItself() const { return false; }
  /// Adds \p seconds to the counter of \p op on \p scope.
  void addSeconds(CommScope scope, CommOp op, double seconds);
  Watchdog *getWatchdog() const { return watchdog; }

private:
  class Call;
  void checkPeer(const char *what, int64_t peer, CommScope scope,
                 bool allowSelf) const;

  int64_t rank, size;
  std::array<int64_t, NumCommScopes> scopeSizes{}, scopeRanks{};
  std::vector<GridVector> coords;
  Watchdog *watchdog = nullptr;
  CommStats stats{};
};

/// Declares, in the class body of a Communicator implementation, the
/// operations it implements (all of them).
#define AUTOPAR_COMMUNICATOR_OPERATIONS                                        \
  void doAllReduce(const void *in, void *out, int64_t count, DType dtype,      \
                   ReduceOp op, CommScope scope) override;                     \
  void doAllGather(const void *in, void *out, int64_t countPerRank,            \
                   DType dtype, CommScope scope) override;                     \
  void doReduceScatter(const void *in, void *out, int64_t countPerRank,        \
                       DType dtype, ReduceOp op, CommScope scope) override;    \
  void doAllToAll(const void *in, void *out, int64_t countPerRank,             \
                  DType dtype, CommScope scope) override;                      \
  void doBroadcast(void *buffer, int64_t count, DType dtype, int64_t root,     \
                   CommScope scope) override;                                  \
  void doSend(const void *buffer, int64_t count, DType dtype, int64_t peer,    \
              CommScope scope) override;                                       \
  void doRecv(void *buffer, int64_t count, DType dtype, int64_t peer,          \
              CommScope scope) override;                                       \
  void doScatter(const void *in, void *out, int64_t countPerRank, DType dtype, \
                 int64_t root, CommScope scope) override;                      \
  void doGather(const void *in, void *out, int64_t countPerRank, DType dtype,  \
                int64_t root, CommScope scope) override;

/// A world of one rank, without MPI: every scope has one member, collectives
/// copy in to out. send and recv have no peer and throw.
class LocalCommunicator : public Communicator {
public:
  LocalCommunicator();
  void maxOverWorld(double *, int) override {}

protected:
  void doAllReduce(const void *in, void *out, int64_t count, DType dtype,
                   ReduceOp op, CommScope scope) override;
  void doAllGather(const void *in, void *out, int64_t countPerRank, DType dtype,
                   CommScope scope) override;
  void doReduceScatter(const void *in, void *out, int64_t countPerRank,
                       DType dtype, ReduceOp op, CommScope scope) override;
  void doAllToAll(const void *in, void *out, int64_t countPerRank, DType dtype,
                  CommScope scope) override;
  void doBroadcast(void *, int64_t, DType, int64_t, CommScope) override {}
  void doSend(const void *, int64_t, DType, int64_t, CommScope) override;
  void doRecv(void *, int64_t, DType, int64_t, CommScope) override;
  void doScatter(const void *in, void *out, int64_t countPerRank, DType dtype,
                 int64_t root, CommScope scope) override;
  void doGather(const void *in, void *out, int64_t countPerRank, DType dtype,
                int64_t root, CommScope scope) override;
};

/// The communicator the collective entry points (autopar_rt_*) use; set by
/// autopar-run before the first step. Null before that.
Communicator *activeCommunicator();
void setActiveCommunicator(Communicator *communicator);

/// Formats \p stats, maxima over all ranks, as the --comm-stats table: one
/// line per scope and operation that was called.
std::string formatCommStats(const CommStats &stats);

/// The same as JSON, for tools that compare it with the plan report's
/// "predicted_collectives": {"steps": steps, "collectives": {scope: {op:
/// {"calls", "bus_bytes", "seconds"}}}}, only operations that were called.
std::string formatCommStatsJson(const CommStats &stats, int64_t steps);

/// The stats as a flat array of doubles (for maxOverWorld) and back.
constexpr int NumCommStatValues = NumCommScopes * NumCommOps * 3;
void flattenCommStats(const CommStats &stats, double *values);
CommStats unflattenCommStats(const double *values);

} // namespace autopar::runtime

#endif // AUTOPAR_RUNTIME_COMMUNICATOR_H
