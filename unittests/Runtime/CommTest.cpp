//===- CommTest.cpp - MpiCommunicator and the autopar_rt_* entry points ---===//
//
// Runs under mpirun (ctest starts it on 1, 2 and 4 ranks, label "mpi"). Every
// rank fills its buffers with values that depend only on its world rank, so
// each rank can compute what every collective must return by itself, on the
// communicators of several grids (dp, tp or pp alone, and the 2-D grids of
// 4 ranks), for each element type, and with MPI calls cut into pieces.
//
// A failed expectation on one rank can desynchronize the collectives of the
// others; the watchdog (20 s) then ends the run instead of letting it hang.
//
//===----------------------------------------------------------------------===//

#include "autopar/runtime/Collectives.h"
#include "autopar/runtime/Communicator.h"
#include "autopar/runtime/Error.h"
#include "autopar/runtime/Fatal.h"
#include "autopar/runtime/MpiCommunicator.h"
#include "autopar/runtime/StagingCommunicator.h"
#include "autopar/runtime/Watchdog.h"
#include "autopar/runtime/World.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <vector>

using namespace autopar::runtime;

namespace {

MpiEnvironment *mpi = nullptr;
int64_t worldRank = 0, worldSize = 1;

/// The grids worth testing on this many ranks.
std::vector<GridVector> gridsFor(int64_t size) {
  std::vector<GridVector> grids = {{size, 1, 1}, {1, size, 1}, {1, 1, size}};
  if (size == 4)
    grids.insert(grids.end(), {{2, 2, 1}, {2, 1, 2}, {1, 2, 2}});
  return grids;
}

std::unique_ptr<MpiCommunicator> communicatorFor(const GridVector &grid) {
  std::vector<GridVector> coords;
  for (int64_t r = 0; r < worldSize; ++r)
    coords.push_back(defaultCoordsOf(grid, r));
  return MpiCommunicator::create(grid, coords);
}

std::string gridName(const GridVector &grid) {
  return "grid dp " + std::to_string(grid[0]) + " x tp " +
         std::to_string(grid[1]) + " x pp " + std::to_string(grid[2]);
}

/// The world ranks of this rank's group in \p scope, by index in the group.
std::vector<int64_t> members(const Communicator &comm, CommScope scope) {
  std::vector<int64_t> ranks;
  if (scope == CommScope::World) {
    for (int64_t r = 0; r < worldSize; ++r)
      ranks.push_back(r);
    return ranks;
  }
  size_t axis = static_cast<size_t>(scope);
  const GridVector &mine = comm.coordsOf(worldRank);
  ranks.assign(static_cast<size_t>(comm.scopeSize(scope)), -1);
  for (int64_t r = 0; r < worldSize; ++r) {
    const GridVector &c = comm.coordsOf(r);
    bool same = true;
    for (size_t a = 0; a < NumGridAxes; ++a)
      same = same && (a == axis || c[a] == mine[a]);
    if (same)
      ranks[static_cast<size_t>(c[axis])] = r;
  }
  return ranks;
}

/// The value world rank \p rank contributes at element \p i: small integers,
/// exact in every element type, so sums compare exactly.
template <typename T> T valueOf(int64_t rank, int64_t i) {
  return static_cast<T>(rank * 100 + (i * 7) % 23 - 5);
}

template <typename T> std::vector<T> dataOf(int64_t rank, int64_t count) {
  std::vector<T> data(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i)
    data[static_cast<size_t>(i)] = valueOf<T>(rank, i);
  return data;
}

template <typename T> DType dtypeOf();
template <> DType dtypeOf<float>() { return DType::Float32; }
template <> DType dtypeOf<double>() { return DType::Float64; }
template <> DType dtypeOf<int32_t>() { return DType::Int32; }
template <> DType dtypeOf<int64_t>() { return DType::Int64; }

/// Checks every collective of \p comm on every scope for element type T,
/// with \p n elements per rank (or per block).
template <typename T> void checkCollectives(Communicator &comm, int64_t n) {
  DType dtype = dtypeOf<T>();
  for (int s = 0; s < NumCommScopes; ++s) {
    CommScope scope = static_cast<CommScope>(s);
    SCOPED_TRACE("scope " + std::string(commScopeName(scope)) + ", n " +
                 std::to_string(n));
    std::vector<int64_t> group = members(comm, scope);
    int64_t p = static_cast<int64_t>(group.size());
    int64_t me = comm.scopeRank(scope);
    ASSERT_EQ(group[static_cast<size_t>(me)], worldRank);
    std::vector<T> mine = dataOf<T>(worldRank, n);

    // all_reduce: sum and max, out of place and in place.
    std::vector<T> sum(mine.size()), max(mine.size()), inPlace = mine;
    comm.allReduce(mine.data(), sum.data(), n, dtype, ReduceOp::Sum, scope);
    comm.allReduce(mine.data(), max.data(), n, dtype, ReduceOp::Max, scope);
    comm.allReduce(inPlace.data(), inPlace.data(), n, dtype, ReduceOp::Sum,
                   scope);
    for (int64_t i = 0; i < n; ++i) {
      T expectedSum = 0, expectedMax = valueOf<T>(group[0], i);
      for (int64_t r : group) {
        expectedSum += valueOf<T>(r, i);
        expectedMax = std::max(expectedMax, valueOf<T>(r, i));
      }
      ASSERT_EQ(sum[i], expectedSum) << "all_reduce sum, element " << i;
      ASSERT_EQ(max[i], expectedMax) << "all_reduce max, element " << i;
      ASSERT_EQ(inPlace[i], expectedSum) << "in-place all_reduce " << i;
    }

    // all_gather and gather: block q is group member q's data.
    std::vector<T> gathered(static_cast<size_t>(n * p));
    comm.allGather(mine.data(), gathered.data(), n, dtype, scope);
    std::vector<T> atRoot(static_cast<size_t>(n * p));
    comm.gather(mine.data(), atRoot.data(), n, dtype, p - 1, scope);
    for (int64_t q = 0; q < p; ++q)
      for (int64_t i = 0; i < n; ++i) {
        T expected = valueOf<T>(group[q], i);
        ASSERT_EQ(gathered[q * n + i], expected) << "all_gather " << q;
        if (me == p - 1) {
          ASSERT_EQ(atRoot[q * n + i], expected) << "gather " << q;
        }
      }

    // reduce_scatter: block `me` of the sum over the group of everyone's
    // n * p elements.
    std::vector<T> whole = dataOf<T>(worldRank, n * p), part(mine.size());
    comm.reduceScatter(whole.data(), part.data(), n, dtype, ReduceOp::Sum,
                       scope);
    for (int64_t i = 0; i < n; ++i) {
      T expected = 0;
      for (int64_t r : group)
        expected += valueOf<T>(r, me * n + i);
      ASSERT_EQ(part[i], expected) << "reduce_scatter, element " << i;
    }

    // all_to_all: block q of my out is block `me` of member q's in.
    std::vector<T> exchanged(whole.size());
    comm.allToAll(whole.data(), exchanged.data(), n, dtype, scope);
    for (int64_t q = 0; q < p; ++q)
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(exchanged[q * n + i], valueOf<T>(group[q], me * n + i))
            << "all_to_all block " << q;

    // scatter from the first member: I get block `me` of its n * p.
    std::vector<T> scattered(mine.size());
    std::vector<T> source = dataOf<T>(group[0], n * p);
    comm.scatter(me == 0 ? source.data() : nullptr, scattered.data(), n, dtype,
                 0, scope);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(scattered[i], valueOf<T>(group[0], me * n + i)) << "scatter";

    // broadcast from the last member.
    std::vector<T> broadcast = mine;
    comm.broadcast(broadcast.data(), n, dtype, p - 1, scope);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(broadcast[i], valueOf<T>(group[p - 1], i)) << "broadcast";

    // send / recv around a ring (even members send first).
    if (p > 1) {
      std::vector<T> received(mine.size());
      int64_t next = (me + 1) % p, previous = (me + p - 1) % p;
      if (me % 2 == 0) {
        comm.send(mine.data(), n, dtype, next, scope);
        comm.recv(received.data(), n, dtype, previous, scope);
      } else {
        comm.recv(received.data(), n, dtype, previous, scope);
        comm.send(mine.data(), n, dtype, next, scope);
      }
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(received[i], valueOf<T>(group[previous], i)) << "recv";
    }
  }
}

/// exchange() around the pipeline ring of \p comm (scope PP): each rank sends
/// two messages to the next stage and one to the previous, and receives
/// theirs, all at once, as 1F1B's steady state does (blocking sends both
/// ways could wait for each other). Messages larger than MPI's eager limit
/// make such a deadlock likely, so \p n is large.
void checkExchangeRing(Communicator &comm, int64_t n) {
  int64_t p = comm.scopeSize(CommScope::PP);
  if (p < 2)
    return;
  int64_t me = comm.scopeRank(CommScope::PP);
  int64_t next = (me + 1) % p, previous = (me + p - 1) % p;
  std::vector<int64_t> group = members(comm, CommScope::PP);
  std::vector<float> forward = dataOf<float>(worldRank, n);
  std::vector<int64_t> tags = dataOf<int64_t>(worldRank + 1000, 3);
  std::vector<float> backward = dataOf<float>(worldRank + 2000, n / 2);
  std::vector<float> gotForward(forward.size()), gotBackward(backward.size());
  std::vector<int64_t> gotTags(tags.size());
  int64_t sendsBefore = comm.getStats()[static_cast<size_t>(CommScope::PP)]
                                       [static_cast<size_t>(CommOp::Send)]
                                           .calls;
  comm.exchange({{forward.data(), n, DType::Float32, next},
                 {tags.data(), 3, DType::Int64, next},
                 {backward.data(), n / 2, DType::Float32, previous}},
                {{gotForward.data(), n, DType::Float32, previous},
                 {gotTags.data(), 3, DType::Int64, previous},
                 {gotBackward.data(), n / 2, DType::Float32, next}},
                CommScope::PP);
  int64_t from = group[static_cast<size_t>(previous)];
  int64_t back = group[static_cast<size_t>(next)];
  EXPECT_EQ(gotForward, dataOf<float>(from, n));
  EXPECT_EQ(gotTags, dataOf<int64_t>(from + 1000, 3));
  EXPECT_EQ(gotBackward, dataOf<float>(back + 2000, n / 2));
  // Each message counts as a call.
  EXPECT_EQ(comm.getStats()[static_cast<size_t>(CommScope::PP)]
                           [static_cast<size_t>(CommOp::Send)]
                               .calls,
            sendsBefore + 3);
}

TEST(CommTest, EveryCollectiveOnEveryGridAndType) {
  for (const GridVector &grid : gridsFor(worldSize)) {
    SCOPED_TRACE(gridName(grid));
    std::unique_ptr<MpiCommunicator> comm = communicatorFor(grid);
    checkCollectives<float>(*comm, 5);
    checkCollectives<double>(*comm, 3);
    checkCollectives<int32_t>(*comm, 4);
    checkCollectives<int64_t>(*comm, 1);
    checkCollectives<float>(*comm, 0);
  }
}

TEST(CommTest, ExchangesWithBothNeighboursAtOnce) {
  for (const GridVector &grid : gridsFor(worldSize)) {
    SCOPED_TRACE(gridName(grid));
    std::unique_ptr<MpiCommunicator> comm = communicatorFor(grid);
    checkExchangeRing(*comm, 1 << 16);
  }
}

TEST(CommTest, CutsLargeOperationsIntoPieces) {
  // MPI counts are int; pretend they end at 3 elements.
  Communicator::setMaxElementsPerCall(3);
  std::unique_ptr<MpiCommunicator> comm =
      communicatorFor(gridsFor(worldSize).back());
  checkCollectives<float>(*comm, 10);
  checkCollectives<int64_t>(*comm, 3);
  Communicator::setMaxElementsPerCall(0); // Back to the default.
}

TEST(CommTest, CountsCallsBusBytesAndTime) {
  std::unique_ptr<MpiCommunicator> comm = communicatorFor({worldSize, 1, 1});
  std::vector<float> data(100, 1.0f), gathered(100 * worldSize);
  comm->allReduce(data.data(), data.data(), 100, DType::Float32, ReduceOp::Sum,
                  CommScope::DP);
  comm->allReduce(data.data(), data.data(), 100, DType::Float32, ReduceOp::Sum,
                  CommScope::DP);
  comm->allGather(data.data(), gathered.data(), 100, DType::Float32,
                  CommScope::DP);
  double n = static_cast<double>(worldSize);
  const CommCounter &reduce =
      comm->getStats()[static_cast<size_t>(CommScope::DP)]
                      [static_cast<size_t>(CommOp::AllReduce)];
  EXPECT_EQ(reduce.calls, 2);
  EXPECT_DOUBLE_EQ(reduce.busBytes, 2 * 400 * 2 * (n - 1) / n);
  EXPECT_GE(reduce.seconds, 0.0);
  const CommCounter &gather =
      comm->getStats()[static_cast<size_t>(CommScope::DP)]
                      [static_cast<size_t>(CommOp::AllGather)];
  EXPECT_EQ(gather.calls, 1);
  EXPECT_DOUBLE_EQ(gather.busBytes, 400 * n * (n - 1) / n);

  // The table holds what was counted (maxima over ranks).
  double values[NumCommStatValues];
  flattenCommStats(comm->getStats(), values);
  comm->maxOverWorld(values, NumCommStatValues);
  std::string table = formatCommStats(unflattenCommStats(values));
  EXPECT_NE(table.find("dp     all_reduce               2"), std::string::npos)
      << table;
  EXPECT_EQ(table.find("all_to_all"), std::string::npos) << table;
}

TEST(CommTest, RejectsBadArguments) {
  std::unique_ptr<MpiCommunicator> comm = communicatorFor({worldSize, 1, 1});
  std::vector<uint8_t> flags(4, 1);
  try {
    comm->allReduce(flags.data(), flags.data(), 4, DType::Bool, ReduceOp::Sum,
                    CommScope::DP);
    ADD_FAILURE() << "reduced bools";
  } catch (const Error &error) {
    EXPECT_NE(std::string(error.what()).find("cannot reduce bool tensors"),
              std::string::npos)
        << error.what();
  }
  try {
    comm->send(flags.data(), 4, DType::UInt8, comm->scopeRank(CommScope::DP),
               CommScope::DP);
    ADD_FAILURE() << "sent to itself";
  } catch (const Error &error) {
    EXPECT_NE(std::string(error.what()).find("is not another rank"),
              std::string::npos)
        << error.what();
  }
  try {
    comm->broadcast(flags.data(), 4, DType::UInt8, worldSize, CommScope::DP);
    ADD_FAILURE() << "broadcast from a rank that does not exist";
  } catch (const Error &error) {
    EXPECT_NE(std::string(error.what())
                  .find("broadcast on axis dp: rank " +
                        std::to_string(worldSize) + " is not a rank"),
              std::string::npos)
        << error.what();
  }
}

//===----------------------------------------------------------------------===//
// The entry points, with dimensions other than 0 and strided views
//===----------------------------------------------------------------------===//

struct Desc2 {
  float *allocated, *aligned;
  int64_t offset, sizes[2], strides[2];
};

Desc2 dense(std::vector<float> &data, int64_t rows, int64_t cols) {
  EXPECT_EQ(data.size(), static_cast<size_t>(rows * cols));
  return {data.data(), data.data(), 0, {rows, cols}, {cols, 1}};
}

/// Member q's [rows, cols] block: element (i, j) = valueOf(q, i * cols + j).
float blockValue(int64_t rank, int64_t cols, int64_t i, int64_t j) {
  return valueOf<float>(rank, i * cols + j);
}

/// Every entry point along dimensions 0 and 1, with a strided view, on
/// \p comm (grid \p grid).
void checkEntryPoints(Communicator *comm, const GridVector &grid) {
  setActiveCommunicator(comm);
  for (int64_t axis = 0; axis < NumGridAxes; ++axis) {
    CommScope scope = static_cast<CommScope>(axis);
    SCOPED_TRACE(gridName(grid) + ", axis " +
                 std::string(commScopeName(scope)));
    std::vector<int64_t> group = members(*comm, scope);
    int64_t p = static_cast<int64_t>(group.size()), me = comm->scopeRank(scope);
    EXPECT_EQ(autopar_rt_grid_coord(axis),
              defaultCoordsOf(grid, worldRank)[static_cast<size_t>(axis)]);
    const int64_t rows = 2, cols = 2 * p;
    std::vector<float> x(rows * cols);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        x[i * cols + j] = blockValue(worldRank, cols, i, j);
    Desc2 dx = dense(x, rows, cols);
    UnrankedMemRef ux{2, &dx};

    // all_gather along dim 1: [rows, cols * p], member q's x at columns q.
    std::vector<float> cat(rows * cols * p);
    Desc2 dcat = dense(cat, rows, cols * p);
    UnrankedMemRef ucat{2, &dcat};
    _mlir_ciface_autopar_rt_all_gather_f32(&ux, &ucat, axis, 1);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols * p; ++j)
        ASSERT_EQ(cat[i * cols * p + j],
                  blockValue(group[j / cols], cols, i, j % cols))
            << "all_gather dim 1 at " << i << "," << j;

    // reduce_scatter along dim 1 into a transposed (strided) view.
    std::vector<float> partT(cols / p * rows);
    Desc2 dpart{partT.data(), partT.data(), 0, {rows, cols / p}, {1, rows}};
    UnrankedMemRef upart{2, &dpart};
    _mlir_ciface_autopar_rt_reduce_scatter_f32(&ux, &upart, axis, 1);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols / p; ++j) {
        float expected = 0;
        for (int64_t r : group)
          expected += blockValue(r, cols, i, me * (cols / p) + j);
        ASSERT_EQ(partT[j * rows + i], expected)
            << "reduce_scatter dim 1 at " << i << "," << j;
      }

    // all_to_all, split dim 1, concat dim 0: out [rows * p, cols / p], rows
    // [q*rows, (q+1)*rows) = member q's columns block `me`.
    std::vector<float> a2a(rows * cols);
    Desc2 da2a = dense(a2a, rows * p, cols / p);
    UnrankedMemRef ua2a{2, &da2a};
    _mlir_ciface_autopar_rt_all_to_all_f32(&ux, &ua2a, axis, 1, 0);
    for (int64_t q = 0; q < p; ++q)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols / p; ++j)
          ASSERT_EQ(a2a[(q * rows + i) * (cols / p) + j],
                    blockValue(group[q], cols, i, me * (cols / p) + j))
              << "all_to_all block " << q << " at " << i << "," << j;

    // And back: split dim 0, concat dim 1 restores x.
    std::vector<float> back(rows * cols);
    Desc2 dback = dense(back, rows, cols);
    UnrankedMemRef uback{2, &dback};
    _mlir_ciface_autopar_rt_all_to_all_f32(&ua2a, &uback, axis, 0, 1);
    EXPECT_EQ(back, x);
  }
  setActiveCommunicator(nullptr);
}

TEST(CommTest, EntryPointsSplitAndConcatenateAlongAnyDimension) {
  // The last grid: on 4 ranks two axes of 2, else one axis of all ranks.
  GridVector grid = gridsFor(worldSize).back();
  std::unique_ptr<MpiCommunicator> comm = communicatorFor(grid);
  checkEntryPoints(comm.get(), grid);
}

//===----------------------------------------------------------------------===//
// StagingCommunicator: device buffers relayed over MPI
//===----------------------------------------------------------------------===//

/// Stands in for a GPU's memory: host memory that the staging communicator
/// must nevertheless treat as foreign, moving it only through the space.
class FakeDeviceMemory : public MemorySpace {
public:
  bool isHost() const override { return false; }
  void *allocate(size_t bytes) override { return hostMemory().allocate(bytes); }
  void release(void *data) override { hostMemory().release(data); }
  void copy2D(void *dst, int64_t dstPitch, const void *src, int64_t srcPitch,
              size_t width, size_t rows) const override {
    hostCopier().copy2D(dst, dstPitch, src, srcPitch, width, rows);
  }
  void copyToHost(void *host, const void *from, size_t bytes) override {
    toHost += bytes;
    hostMemory().copyToHost(host, from, bytes);
  }
  void copyFromHost(void *to, const void *host, size_t bytes) override {
    fromHost += bytes;
    hostMemory().copyFromHost(to, host, bytes);
  }
  void synchronize() override { ++synchronizations; }

  size_t toHost = 0, fromHost = 0;
  int synchronizations = 0;
};

TEST(CommTest, StagingCommunicatorRelaysEveryCollective) {
  for (const GridVector &grid : gridsFor(worldSize)) {
    SCOPED_TRACE(gridName(grid) + ", staged");
    std::unique_ptr<MpiCommunicator> host = communicatorFor(grid);
    FakeDeviceMemory device;
    StagingCommunicator comm(*host, device);
    EXPECT_EQ(&comm.memory(), &device);
    EXPECT_EQ(comm.scopeSize(CommScope::TP), grid[1]);
    checkCollectives<float>(comm, 5);
    checkCollectives<int64_t>(comm, 2);
    checkCollectives<float>(comm, 0);
    EXPECT_GT(device.toHost, 0u);
    EXPECT_GT(device.fromHost, 0u);
    // Each call first waits for the device work that produced its input.
    EXPECT_GT(device.synchronizations, 0);
    checkEntryPoints(&comm, grid);
  }
}

TEST(CommTest, StagingCommunicatorExchangesThroughTheHost) {
  for (const GridVector &grid : gridsFor(worldSize)) {
    SCOPED_TRACE(gridName(grid) + ", staged");
    std::unique_ptr<MpiCommunicator> host = communicatorFor(grid);
    FakeDeviceMemory device;
    StagingCommunicator comm(*host, device);
    checkExchangeRing(comm, 1 << 16);
    if (grid[2] > 1) {
      // Three messages out, three back.
      size_t bytes = 4 * (1 << 16) + 8 * 3 + 4 * (1 << 15);
      EXPECT_EQ(device.toHost, bytes);
      EXPECT_EQ(device.fromHost, bytes);
    }
  }
}

TEST(CommTest, StagingCommunicatorReduces16BitFloatsInFloat32) {
  std::unique_ptr<MpiCommunicator> host = communicatorFor({worldSize, 1, 1});
  FakeDeviceMemory device;
  StagingCommunicator comm(*host, device);
  // MPI cannot reduce 16-bit floats; the staging communicator can.
  EXPECT_FALSE(host->canReduce(DType::BFloat16));
  EXPECT_TRUE(comm.canReduce(DType::BFloat16));
  EXPECT_TRUE(comm.canReduce(DType::Float16));
  EXPECT_FALSE(comm.canReduce(DType::Bool));
  const int64_t n = 6;
  for (DType dtype : {DType::BFloat16, DType::Float16}) {
    SCOPED_TRACE(std::string(dtypeName(dtype)));
    uint16_t (*toBits)(float) =
        dtype == DType::BFloat16 ? floatToBFloat16Bits : floatToFloat16Bits;
    // Small values: the sums are exact in 16 bits.
    std::vector<uint16_t> mine(n), sum(n), max(n);
    for (int64_t i = 0; i < n; ++i)
      mine[i] = toBits(0.5f * static_cast<float>(worldRank + i));
    comm.allReduce(mine.data(), sum.data(), n, dtype, ReduceOp::Sum,
                   CommScope::DP);
    comm.allReduce(mine.data(), max.data(), n, dtype, ReduceOp::Max,
                   CommScope::DP);
    for (int64_t i = 0; i < n; ++i) {
      float expected = 0;
      for (int64_t r = 0; r < worldSize; ++r)
        expected += 0.5f * static_cast<float>(r + i);
      EXPECT_EQ(sum[i], toBits(expected)) << "sum, element " << i;
      EXPECT_EQ(max[i], toBits(0.5f * static_cast<float>(worldSize - 1 + i)))
          << "max, element " << i;
    }
  }
  try {
    std::vector<uint16_t> bits(4);
    host->allReduce(bits.data(), bits.data(), 4, DType::BFloat16, ReduceOp::Sum,
                    CommScope::DP);
    ADD_FAILURE() << "MPI reduced bfloat16";
  } catch (const Error &error) {
    EXPECT_NE(std::string(error.what())
                  .find("cannot reduce bfloat16 tensors (this communicator "
                        "reduces float32, float64, int64"),
              std::string::npos)
        << error.what();
  }
}

/// On ranks other than 0, print only failures, each with the rank.
class FailurePrinter : public ::testing::EmptyTestEventListener {
  void OnTestPartResult(const ::testing::TestPartResult &result) override {
    if (result.failed())
      std::fprintf(stderr, "rank %lld: %s:%d: %s\n",
                   static_cast<long long>(worldRank),
                   result.file_name() ? result.file_name() : "?",
                   result.line_number(), result.message());
  }
};

} // namespace

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  WorldInfo world = detectWorld();
  worldRank = world.rank;
  worldSize = world.size;
  std::unique_ptr<MpiEnvironment> environment;
  try {
    environment = std::make_unique<MpiEnvironment>(world);
  } catch (const Error &error) {
    fatalError(error.what());
  }
  mpi = environment.get();
  setErrorRank(worldRank);
  if (worldRank != 0) {
    ::testing::TestEventListeners &listeners =
        ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter);
  }
  int failed = 0;
  {
    // A rank whose test failed halfway leaves the others waiting.
    Watchdog watchdog(20);
    Watchdog::Scope scope(&watchdog, "the communicator tests");
    failed = RUN_ALL_TESTS();
  }
  // Every rank must agree on the verdict, or mpirun reports the wrong one.
  int anyFailed = static_cast<int>(mpi->ranksWhere(failed != 0).size());
  environment.reset();
  return anyFailed ? 1 : 0;
}
