//===- LocalCommunicatorTest.cpp - A world of one, without MPI ------------===//
//
// Single-rank runs use LocalCommunicator, so the collective entry points work
// (as copies) in generated code run by a plain `autopar-run ARTIFACT`.
//
//===----------------------------------------------------------------------===//

#include "autopar/runtime/Collectives.h"
#include "autopar/runtime/Communicator.h"
#include "autopar/runtime/Error.h"

#include "gtest/gtest.h"

#include <vector>

using namespace autopar::runtime;

namespace {

struct Desc2 {
  float *allocated, *aligned;
  int64_t offset, sizes[2], strides[2];
};

TEST(LocalCommunicatorTest, EveryScopeHasOneRank) {
  LocalCommunicator comm;
  EXPECT_EQ(comm.worldSize(), 1);
  for (int s = 0; s < NumCommScopes; ++s) {
    EXPECT_EQ(comm.scopeSize(static_cast<CommScope>(s)), 1);
    EXPECT_EQ(comm.scopeRank(static_cast<CommScope>(s)), 0);
  }
  std::vector<double> in = {1, 2, 3}, out(3);
  comm.allReduce(in.data(), out.data(), 3, DType::Float64, ReduceOp::Sum,
                 CommScope::TP);
  EXPECT_EQ(out, in);
  std::vector<double> gathered(3);
  comm.allGather(in.data(), gathered.data(), 3, DType::Float64, CommScope::DP);
  EXPECT_EQ(gathered, in);
  EXPECT_THROW(comm.send(in.data(), 3, DType::Float64, 0, CommScope::PP),
               Error);
  // Nothing moves between ranks: calls count, bus bytes stay 0.
  const CommCounter &reduce =
      comm.getStats()[static_cast<size_t>(CommScope::TP)]
                     [static_cast<size_t>(CommOp::AllReduce)];
  EXPECT_EQ(reduce.calls, 1);
  EXPECT_EQ(reduce.busBytes, 0);
  EXPECT_NE(formatCommStats(comm.getStats()).find("tp     all_reduce"),
            std::string::npos);
  EXPECT_NE(formatCommStats(CommStats{}).find("(no communication)"),
            std::string::npos);
}

TEST(LocalCommunicatorTest, StatsAsJsonListOnlyCalledOperations) {
  CommStats stats{};
  CommCounter &gather = stats[static_cast<size_t>(CommScope::TP)]
                             [static_cast<size_t>(CommOp::AllGather)];
  gather = {2, 8448, 0.5};
  // The shape of the plan report's "predicted_collectives", plus seconds.
  EXPECT_EQ(formatCommStatsJson(stats, 3), "{\n"
                                           "  \"steps\": 3,\n"
                                           "  \"collectives\": {\n"
                                           "    \"tp\": {\n"
                                           "      \"all_gather\": {\n"
                                           "        \"calls\": 2,\n"
                                           "        \"bus_bytes\": 8448.0,\n"
                                           "        \"seconds\": 0.5\n"
                                           "      }\n"
                                           "    }\n"
                                           "  }\n"
                                           "}\n");
  EXPECT_EQ(formatCommStatsJson(CommStats{}, 1),
            "{\n  \"steps\": 1,\n  \"collectives\": {}\n}\n");
}

TEST(LocalCommunicatorTest, EntryPointsCopyThroughStridedViews) {
  LocalCommunicator comm;
  setActiveCommunicator(&comm);
  std::vector<float> x = {1, 2, 3, 4, 5, 6}, y(6, 0);
  Desc2 dx{x.data(), x.data(), 0, {2, 3}, {3, 1}};
  Desc2 dy{y.data(), y.data(), 0, {2, 3}, {1, 2}}; // column-major out
  UnrankedMemRef ux{2, &dx}, uy{2, &dy};
  _mlir_ciface_autopar_rt_all_reduce_f32(&ux, &uy, 1);
  EXPECT_EQ(y, (std::vector<float>{1, 4, 2, 5, 3, 6}));
  std::vector<float> z(6, 0);
  Desc2 dz{z.data(), z.data(), 0, {2, 3}, {3, 1}};
  UnrankedMemRef uz{2, &dz};
  _mlir_ciface_autopar_rt_all_gather_f32(&ux, &uz, 0, 1);
  EXPECT_EQ(z, x);
  EXPECT_EQ(autopar_rt_grid_coord(2), 0);
  setActiveCommunicator(nullptr);
}

TEST(LocalCommunicatorDeathTest, EntryPointsReportCompilerBugs) {
  LocalCommunicator comm;
  setActiveCommunicator(&comm);
  std::vector<float> x(6), y(4);
  Desc2 dx{x.data(), x.data(), 0, {2, 3}, {3, 1}};
  Desc2 dy{y.data(), y.data(), 0, {2, 2}, {2, 1}};
  UnrankedMemRef ux{2, &dx}, uy{2, &dy};
  EXPECT_EXIT(_mlir_ciface_autopar_rt_all_reduce_f32(&ux, &uy, 0),
              ::testing::ExitedWithCode(1),
              "autopar-run: error: autopar_rt_all_reduce_f32: operand shapes "
              "do not agree: in \\[2, 3\\], out \\[2, 2\\]; .* compiler bug");
  EXPECT_EXIT(_mlir_ciface_autopar_rt_all_gather_f32(&ux, &ux, 3, 0),
              ::testing::ExitedWithCode(1),
              "autopar_rt_all_gather_f32: axis 3 is not a grid axis "
              "\\(0 = dp, 1 = tp, 2 = pp\\)");
  EXPECT_EXIT(autopar_rt_grid_coord(-1), ::testing::ExitedWithCode(1),
              "autopar_rt_grid_coord: axis -1 is not a grid axis");
  setActiveCommunicator(nullptr);
  EXPECT_EXIT(_mlir_ciface_autopar_rt_all_reduce_f32(&ux, &ux, 0),
              ::testing::ExitedWithCode(1),
              "no communicator: the program must run under autopar-run");
}

} // namespace
