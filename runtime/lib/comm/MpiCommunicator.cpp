//===- MpiCommunicator.cpp - Collectives over MPI -------------------------===//
//
// MPI counts are int. Operations on more elements than maxElementsPerCall()
// are cut into pieces: element-wise ones (all_reduce, broadcast, send/recv)
// piece by piece in place, block-wise ones (all_gather, reduce_scatter,
// all_to_all, scatter, gather) through a staging buffer holding the same
// piece of every rank's block.
//
//===----------------------------------------------------------------------===//

#include "autopar/runtime/MpiCommunicator.h"

#include "autopar/runtime/Error.h"
#include "autopar/runtime/Fatal.h"

#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

namespace autopar::runtime {

namespace {

bool initializedHere = false;
bool canAbortFromAnyThread = false;

void check(int rc, const char *call) {
  if (rc == MPI_SUCCESS)
    return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  throw Error(std::string(call) + " failed: " + std::string(text, length));
}

/// fatalError's exit under MPI: MPI_Abort ends every rank. Without
/// MPI_THREAD_MULTIPLE only the main thread may call MPI, so other threads
/// (the watchdog) exit instead, and the launcher, seeing a rank fail, ends
/// the rest.
void abortWorld() {
  if (canAbortFromAnyThread)
    MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

MPI_Datatype mpiType(DType dtype) {
  switch (dtype) {
  case DType::Float32:
    return MPI_FLOAT;
  case DType::Float64:
    return MPI_DOUBLE;
  case DType::Float16:
  case DType::BFloat16:
  case DType::UInt16:
    return MPI_UINT16_T; // Moved, never reduced (Communicator checks).
  case DType::Int64:
    return MPI_INT64_T;
  case DType::Int32:
    return MPI_INT32_T;
  case DType::Int16:
    return MPI_INT16_T;
  case DType::Int8:
    return MPI_INT8_T;
  case DType::UInt64:
    return MPI_UINT64_T;
  case DType::UInt32:
    return MPI_UINT32_T;
  case DType::UInt8:
  case DType::Bool:
    return MPI_UINT8_T;
  }
  return MPI_BYTE;
}

MPI_Op mpiOp(ReduceOp op) { return op == ReduceOp::Sum ? MPI_SUM : MPI_MAX; }

const char *at(const void *base, int64_t elements, size_t elementSize) {
  return static_cast<const char *>(base) +
         static_cast<size_t>(elements) * elementSize;
}
char *at(void *base, int64_t elements, size_t elementSize) {
  return static_cast<char *>(base) +
         static_cast<size_t>(elements) * elementSize;
}

/// Calls \p fn(offset, length) for consecutive pieces of [0, count) of at
/// most \p piece elements (once, with length 0, if count is 0).
template <typename Fn> void forEachPiece(int64_t count, int64_t piece, Fn fn) {
  int64_t offset = 0;
  do {
    int64_t length = std::min(piece, count - offset);
    fn(offset, static_cast<int>(length));
    offset += length;
  } while (offset < count);
}

/// Piece size for staged block-wise operations: bounded, so that the staging
/// buffer (one piece per rank) stays small.
int64_t stagedPiece() {
  return std::min<int64_t>(Communicator::maxElementsPerCall(), 1 << 24);
}

} // namespace

struct MpiCommunicator::Comms {
  MPI_Comm scopes[NumCommScopes] = {MPI_COMM_NULL, MPI_COMM_NULL, MPI_COMM_NULL,
                                    MPI_COMM_WORLD};
  MPI_Comm operator[](CommScope scope) const {
    return scopes[static_cast<size_t>(scope)];
  }
};

MpiEnvironment::MpiEnvironment(const WorldInfo &world) {
#ifdef OMPI_MAJOR_VERSION
  // Under srun without PMIx, Open MPI's MPI_Init aborts with a page that
  // blames its own build; say what to do before calling it.
  if (std::optional<std::string> error = srunWithoutPmix(
          world, [](const char *name) { return std::getenv(name); }))
    throw Error(*error);
#endif
  int provided = MPI_THREAD_SINGLE;
  int argc = 0;
  char **argv = nullptr;
  check(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided),
        "MPI_Init_thread");
  initializedHere = true;
  canAbortFromAnyThread = provided >= MPI_THREAD_MULTIPLE;
  setFatalExit(abortWorld);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

  int size = 0, rank = 0;
  check(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size");
  check(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
  if (size != world.size || rank != world.rank) {
    // Every process is alone in its MPI world: each reports, none aborts.
    MPI_Finalize();
    initializedHere = false;
    setFatalExit([] { std::_Exit(1); });
    throw Error("MPI says this is rank " + std::to_string(rank) + " of " +
                std::to_string(size) + ", but the launcher's environment (" +
                world.source + ") says rank " + std::to_string(world.rank) +
                " of " + std::to_string(world.size) +
                "; autopar-run was built with another MPI than the one "
                "that launched it (use that MPI's mpirun, or srun with the "
                "PMI plugin it needs: --mpi=pmix for Open MPI)");
  }
}

MpiEnvironment::~MpiEnvironment() {
  setFatalExit([] { std::_Exit(1); });
  MPI_Finalize();
  initializedHere = false;
}

bool MpiEnvironment::isInitialized() { return initializedHere; }

std::vector<int64_t> MpiEnvironment::ranksWhere(bool condition) const {
  int size = 0;
  check(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size");
  int mine = condition ? 1 : 0;
  std::vector<int> all(static_cast<size_t>(size));
  check(
      MPI_Allgather(&mine, 1, MPI_INT, all.data(), 1, MPI_INT, MPI_COMM_WORLD),
      "MPI_Allgather");
  std::vector<int64_t> ranks;
  for (int r = 0; r < size; ++r)
    if (all[static_cast<size_t>(r)])
      ranks.push_back(r);
  return ranks;
}

int64_t MpiEnvironment::ranksOnThisNode() const {
  return nodePlacement().localSize;
}

NodePlacement MpiEnvironment::nodePlacement() const {
  int worldRank = 0;
  check(MPI_Comm_rank(MPI_COMM_WORLD, &worldRank), "MPI_Comm_rank");
  MPI_Comm node = MPI_COMM_NULL;
  check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, worldRank,
                            MPI_INFO_NULL, &node),
        "MPI_Comm_split_type");
  int size = 1, rank = 0;
  MPI_Comm_size(node, &size);
  MPI_Comm_rank(node, &rank);
  MPI_Comm_free(&node);
  NodePlacement placement;
  placement.localRank = rank;
  placement.localSize = size;
  placement.source = "MPI_COMM_TYPE_SHARED";
  return placement;
}

std::unique_ptr<MpiCommunicator>
MpiCommunicator::create(const GridVector &grid,
                        std::vector<GridVector> coords) {
  if (!initializedHere)
    throw Error("internal error: MpiCommunicator without MpiEnvironment");
  int size = 0, rank = 0;
  check(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size");
  check(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
  if (static_cast<int64_t>(coords.size()) != size)
    throw Error("internal error: " + std::to_string(coords.size()) +
                " grid coordinates for " + std::to_string(size) + " ranks");

  auto comms = std::make_unique<Comms>();
  const GridVector &mine = coords[static_cast<size_t>(rank)];
  for (int axis = 0; axis < NumGridAxes; ++axis) {
    // Color: the coordinates on the other two axes; key: this axis'.
    int color = 0;
    for (int other = 0; other < NumGridAxes; ++other)
      if (other != axis)
        color = color * static_cast<int>(grid[other]) +
                static_cast<int>(mine[other]);
    check(MPI_Comm_split(MPI_COMM_WORLD, color, static_cast<int>(mine[axis]),
                         &comms->scopes[axis]),
          "MPI_Comm_split");
    int axisSize = 0;
    check(MPI_Comm_size(comms->scopes[axis], &axisSize), "MPI_Comm_size");
    if (axisSize != grid[axis])
      throw Error("grid axis " +
                  std::string(gridAxisName(static_cast<GridAxis>(axis))) +
                  " of rank " + std::to_string(rank) + " has " +
                  std::to_string(axisSize) + " ranks, expected " +
                  std::to_string(grid[axis]) + " (inconsistent coordinates)");
  }
  return std::unique_ptr<MpiCommunicator>(
      new MpiCommunicator(rank, grid, std::move(coords), std::move(comms)));
}

MpiCommunicator::MpiCommunicator(int64_t rank, const GridVector &grid,
                                 std::vector<GridVector> coords,
                                 std::unique_ptr<Comms> comms)
    : Communicator(rank, grid, std::move(coords)), comms(std::move(comms)) {}

MpiCommunicator::~MpiCommunicator() {
  for (int axis = 0; axis < NumGridAxes; ++axis)
    if (comms->scopes[axis] != MPI_COMM_NULL)
      MPI_Comm_free(&comms->scopes[axis]);
}

void MpiCommunicator::maxOverWorld(double *values, int count) {
  check(MPI_Allreduce(MPI_IN_PLACE, values, count, MPI_DOUBLE, MPI_MAX,
                      MPI_COMM_WORLD),
        "MPI_Allreduce");
}

void MpiCommunicator::doAllReduce(const void *in, void *out, int64_t count,
                                  DType dtype, ReduceOp op, CommScope scope) {
  size_t es = dtypeSize(dtype);
  forEachPiece(count, maxElementsPerCall(), [&](int64_t offset, int length) {
    const void *send = in == out ? MPI_IN_PLACE : at(in, offset, es);
    check(MPI_Allreduce(send, at(out, offset, es), length, mpiType(dtype),
                        mpiOp(op), (*comms)[scope]),
          "MPI_Allreduce");
  });
}

void MpiCommunicator::doBroadcast(void *buffer, int64_t count, DType dtype,
                                  int64_t root, CommScope scope) {
  size_t es = dtypeSize(dtype);
  forEachPiece(count, maxElementsPerCall(), [&](int64_t offset, int length) {
    check(MPI_Bcast(at(buffer, offset, es), length, mpiType(dtype),
                    static_cast<int>(root), (*comms)[scope]),
          "MPI_Bcast");
  });
}

void MpiCommunicator::doSend(const void *buffer, int64_t count, DType dtype,
                             int64_t peer, CommScope scope) {
  size_t es = dtypeSize(dtype);
  forEachPiece(count, maxElementsPerCall(), [&](int64_t offset, int length) {
    check(MPI_Send(at(buffer, offset, es), length, mpiType(dtype),
                   static_cast<int>(peer), 0, (*comms)[scope]),
          "MPI_Send");
  });
}

void MpiCommunicator::doRecv(void *buffer, int64_t count, DType dtype,
                             int64_t peer, CommScope scope) {
  size_t es = dtypeSize(dtype);
  forEachPiece(count, maxElementsPerCall(), [&](int64_t offset, int length) {
    check(MPI_Recv(at(buffer, offset, es), length, mpiType(dtype),
                   static_cast<int>(peer), 0, (*comms)[scope],
                   MPI_STATUS_IGNORE),
          "MPI_Recv");
  });
}

void MpiCommunicator::doExchange(const std::vector<Message> &sends,
                                 const std::vector<Message> &receives,
                                 CommScope scope) {
  std::vector<MPI_Request> requests;
  MPI_Comm comm = (*comms)[scope];
  for (const Message &m : receives) {
    size_t es = dtypeSize(m.dtype);
    forEachPiece(
        m.count, maxElementsPerCall(), [&](int64_t offset, int length) {
          requests.emplace_back();
          check(MPI_Irecv(at(m.buffer, offset, es), length, mpiType(m.dtype),
                          static_cast<int>(m.peer), 0, comm, &requests.back()),
                "MPI_Irecv");
        });
  }
  for (const Message &m : sends) {
    size_t es = dtypeSize(m.dtype);
    forEachPiece(
        m.count, maxElementsPerCall(), [&](int64_t offset, int length) {
          requests.emplace_back();
          check(MPI_Isend(at(m.buffer, offset, es), length, mpiType(m.dtype),
                          static_cast<int>(m.peer), 0, comm, &requests.back()),
                "MPI_Isend");
        });
  }
  check(MPI_Waitall(static_cast<int>(requests.size()), requests.data(),
                    MPI_STATUSES_IGNORE),
        "MPI_Waitall");
}

void MpiCommunicator::doAllGather(const void *in, void *out,
                                  int64_t countPerRank, DType dtype,
                                  CommScope scope) {
  MPI_Datatype type = mpiType(dtype);
  MPI_Comm comm = (*comms)[scope];
  if (countPerRank <= maxElementsPerCall()) {
    int n = static_cast<int>(countPerRank);
    check(MPI_Allgather(in, n, type, out, n, type, comm), "MPI_Allgather");
    return;
  }
  size_t es = dtypeSize(dtype);
  int64_t ranks = scopeSize(scope), piece = stagedPiece();
  std::vector<char> stage(static_cast<size_t>(ranks * piece) * es);
  forEachPiece(countPerRank, piece, [&](int64_t offset, int length) {
    check(MPI_Allgather(at(in, offset, es), length, type, stage.data(), length,
                        type, comm),
          "MPI_Allgather");
    for (int64_t r = 0; r < ranks; ++r)
      std::memcpy(at(out, r * countPerRank + offset, es),
                  at(stage.data(), r * length, es), length * es);
  });
}

void MpiCommunicator::doReduceScatter(const void *in, void *out,
                                      int64_t countPerRank, DType dtype,
                                      ReduceOp op, CommScope scope) {
  MPI_Datatype type = mpiType(dtype);
  MPI_Comm comm = (*comms)[scope];
  if (countPerRank <= maxElementsPerCall()) {
    check(MPI_Reduce_scatter_block(in, out, static_cast<int>(countPerRank),
                                   type, mpiOp(op), comm),
          "MPI_Reduce_scatter_block");
    return;
  }
  size_t es = dtypeSize(dtype);
  int64_t ranks = scopeSize(scope), piece = stagedPiece();
  std::vector<char> stage(static_cast<size_t>(ranks * piece) * es);
  forEachPiece(countPerRank, piece, [&](int64_t offset, int length) {
    for (int64_t r = 0; r < ranks; ++r)
      std::memcpy(at(stage.data(), r * length, es),
                  at(in, r * countPerRank + offset, es), length * es);
    check(MPI_Reduce_scatter_block(stage.data(), at(out, offset, es), length,
                                   type, mpiOp(op), comm),
          "MPI_Reduce_scatter_block");
  });
}

void MpiCommunicator::doAllToAll(const void *in, void *out,
                                 int64_t countPerRank, DType dtype,
                                 CommScope scope) {
  MPI_Datatype type = mpiType(dtype);
  MPI_Comm comm = (*comms)[scope];
  if (countPerRank <= maxElementsPerCall()) {
    int n = static_cast<int>(countPerRank);
    check(MPI_Alltoall(in, n, type, out, n, type, comm), "MPI_Alltoall");
    return;
  }
  size_t es = dtypeSize(dtype);
  int64_t ranks = scopeSize(scope), piece = stagedPiece();
  std::vector<char> sendStage(static_cast<size_t>(ranks * piece) * es);
  std::vector<char> recvStage(sendStage.size());
  forEachPiece(countPerRank, piece, [&](int64_t offset, int length) {
    for (int64_t r = 0; r < ranks; ++r)
      std::memcpy(at(sendStage.data(), r * length, es),
                  at(in, r * countPerRank + offset, es), length * es);
    check(MPI_Alltoall(sendStage.data(), length, type, recvStage.data(), length,
                       type, comm),
          "MPI_Alltoall");
    for (int64_t r = 0; r < ranks; ++r)
      std::memcpy(at(out, r * countPerRank + offset, es),
                  at(recvStage.data(), r * length, es), length * es);
  });
}

void MpiCommunicator::doScatter(const void *in, void *out, int64_t countPerRank,
                                DType dtype, int64_t root, CommScope scope) {
  MPI_Datatype type = mpiType(dtype);
  MPI_Comm comm = (*comms)[scope];
  int rootRank = static_cast<int>(root);
  if (countPerRank <= maxElementsPerCall()) {
    int n = static_cast<int>(countPerRank);
    check(MPI_Scatter(in, n, type, out, n, type, rootRank, comm),
          "MPI_Scatter");
    return;
  }
  size_t es = dtypeSize(dtype);
  bool isRoot = scopeRank(scope) == root;
  int64_t ranks = scopeSize(scope), piece = stagedPiece();
  std::vector<char> stage(isRoot ? static_cast<size_t>(ranks * piece) * es : 0);
  forEachPiece(countPerRank, piece, [&](int64_t offset, int length) {
    if (isRoot)
      for (int64_t r = 0; r < ranks; ++r)
        std::memcpy(at(stage.data(), r * length, es),
                    at(in, r * countPerRank + offset, es), length * es);
    check(MPI_Scatter(stage.data(), length, type, at(out, offset, es), length,
                      type, rootRank, comm),
          "MPI_Scatter");
  });
}

void MpiCommunicator::doGather(const void *in, void *out, int64_t countPerRank,
                               DType dtype, int64_t root, CommScope scope) {
  MPI_Datatype type = mpiType(dtype);
  MPI_Comm comm = (*comms)[scope];
  int rootRank = static_cast<int>(root);
  if (countPerRank <= maxElementsPerCall()) {
    int n = static_cast<int>(countPerRank);
    check(MPI_Gather(in, n, type, out, n, type, rootRank, comm), "MPI_Gather");
    return;
  }
  size_t es = dtypeSize(dtype);
  bool isRoot = scopeRank(scope) == root;
  int64_t ranks = scopeSize(scope), piece = stagedPiece();
  std::vector<char> stage(isRoot ? static_cast<size_t>(ranks * piece) * es : 0);
  forEachPiece(countPerRank, piece, [&](int64_t offset, int length) {
    check(MPI_Gather(at(in, offset, es), length, type, stage.data(), length,
                     type, rootRank, comm),
          "MPI_Gather");
    if (isRoot)
      for (int64_t r = 0; r < ranks; ++r)
        std::memcpy(at(out, r * countPerRank + offset, es),
                    at(stage.data(), r * length, es), length * es);
  });
}

} // namespace autopar::runtime
