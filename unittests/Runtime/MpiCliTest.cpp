//===- MpiCliTest.cpp - autopar-run on several ranks under mpirun ---------===//
//
// Hand-built multi-rank artifacts (stage libraries from Inputs/*.c) run by
// the real autopar-run under mpirun on 1, 2 and 4 ranks:
//  - data parallelism: scattering a split input and gathering a split
//    output gives what one rank computes on the whole batch;
//  - every collective entry point called from a stage, against references
//    computed here from the global inputs;
//  - tensor parallelism (grid dp x tp): parameters split over tp, each rank
//    mapping its block, outputs replicated over tp or split over it;
//  - a wrong number of ranks is reported by every rank;
//  - faults: a rank that fails, hangs or is killed ends every rank, with a
//    message naming it, well within the timeout.
//
//===----------------------------------------------------------------------===//

#include "autopar/runtime/Npy.h"

#include "TestUtil.h"

#include "gtest/gtest.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <dlfcn.h>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <unistd.h>

using namespace autopar::runtime;
using namespace autopar::runtime::test;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

constexpr int K = 8, N = 4, Batch = 8;

class MpiCliTest : public ::testing::Test {
protected:
  void SetUp() override {
    for (int i = 0; i < N * K; ++i)
      weight.push_back(0.25f * static_cast<float>(i % 7) - 0.5f);
    for (int j = 0; j < N; ++j)
      bias.push_back(static_cast<float>(j));
    writeFile(artifact.file("weights.bin"), bytesOf(weight) + bytesOf(bias));
  }

  /// The manifest of a dp-only artifact of \p ranks ranks running \p library.
  json manifestFor(int ranks, const std::string &library) {
    json manifest = {{"format", "autopar-artifact"},
                     {"version", 1},
                     {"model", "test.onnx"},
                     {"cluster", "local:" + std::to_string(ranks)},
                     {"world_size", ranks},
                     {"grid", {{"dp", ranks}, {"tp", 1}, {"pp", 1}}},
                     {"programs",
                      {{{"name", "stage0"},
                        {"library", library},
                        {"entry", "autopar_entry"}}}},
                     {"ranks", json::array()},
                     {"arguments", json::array()}};
    for (int r = 0; r < ranks; ++r)
      manifest["ranks"].push_back(
          {{"rank", r},
           {"program", "stage0"},
           {"coords", {{"dp", r}, {"tp", 0}, {"pp", 0}}}});
    return manifest;
  }

  static json argument(const char *kind, const char *name, const char *dtype,
                       std::vector<int64_t> shape) {
    return {{"kind", kind}, {"name", name}, {"dtype", dtype}, {"shape", shape}};
  }

  /// \p arg split over dp along \p dim into \p ranks blocks.
  static json split(json arg, int dim, int ranks) {
    std::vector<int64_t> global = arg["shape"];
    global[dim] *= ranks;
    arg["global_shape"] = global;
    arg["split"] = {{"axis", "dp"}, {"dim", dim}};
    return arg;
  }

  /// Writes ARTIFACT/<ranks>/ running stage library \p stage with
  /// \p arguments after the two parameters of linear_add.
  std::string writeArtifact(int ranks, const std::string &stage,
                            const json &arguments, bool parameters) {
    std::string dir = artifact.file(std::to_string(ranks) + "-" + stage);
    fs::create_directories(dir);
    fs::copy_file(std::string(AUTOPAR_TEST_STAGE_DIR) + "/" + stage + ".so",
                  dir + "/stage0.so", fs::copy_options::overwrite_existing);
    json manifest = manifestFor(ranks, "stage0.so");
    if (parameters) {
      json w = argument("parameter", "fc.weight", "float32", {N, K});
      w["source"] = {
          {"file", "../weights.bin"}, {"offset", 0}, {"length", 128}};
      json b = argument("parameter", "fc.bias", "float32", {N});
      b["source"] = {
          {"file", "../weights.bin"}, {"offset", 128}, {"length", 16}};
      manifest["arguments"].push_back(w);
      manifest["arguments"].push_back(b);
    }
    for (const json &arg : arguments)
      manifest["arguments"].push_back(arg);
    writeFile(dir + "/manifest.json", manifest.dump(2));
    return dir;
  }

  /// The data-parallel linear layer of dp_linear.c on \p ranks ranks.
  std::string dpLinear(int ranks) {
    int rows = Batch / ranks;
    return writeArtifact(
        ranks, "dp_linear_" + std::to_string(ranks),
        {split(argument("input", "x", "float32", {rows, K}), 0, ranks),
         split(argument("output", "y", "float32", {rows, N}), 0, ranks)},
        /*parameters=*/true);
  }

  /// mpirun -np \p ranks autopar-run ARGS, with \p env before it. Each
  /// test's launches keep OpenMPI's session directory under their own work
  /// directory: two test processes whose first launches meet in the shared
  /// /tmp/ompi.HOST.UID race to create it, and the loser fails ("mkdir ...
  /// File exists", OpenMPI 4.1).
  CommandResult mpirun(int ranks, const std::string &args,
                       const std::string &env = "") {
    std::string flags = " --oversubscribe";
    if (geteuid() == 0)
      flags += " --allow-run-as-root";
    Clock::time_point start = Clock::now();
    CommandResult result = runCommand(
        "ulimit -c 0; env -u OMPI_COMM_WORLD_SIZE -u PMI_SIZE -u SLURM_NTASKS "
        "-u SLURM_STEP_NUM_TASKS OPENBLAS_NUM_THREADS=1 "
        "OMPI_MCA_orte_tmpdir_base=" +
        shellQuote(work.path()) + " " + env + " " +
        shellQuote(AUTOPAR_MPIEXEC) + flags + " -np " + std::to_string(ranks) +
        " " + shellQuote(AUTOPAR_RUN_PATH) + " " + args);
    seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return result;
  }

  template <typename T>
  std::vector<T> readTensor(const std::string &path, DType dtype,
                            const Shape &shape) {
    NpyArray array = readNpy(path);
    EXPECT_EQ(array.dtype, dtype) << path;
    EXPECT_EQ(array.shape, shape) << path;
    std::vector<T> values(array.data.size() / sizeof(T));
    std::memcpy(values.data(), array.data.data(), array.data.size());
    return values;
  }

  std::vector<float> readFloats(const std::string &path, const Shape &shape) {
    return readTensor<float>(path, DType::Float32, shape);
  }

  /// Expects every process id written by fault.c under \p dir to be gone.
  void expectNoSurvivors(const std::string &dir, int ranks) {
    for (int r = 0; r < ranks; ++r) {
      std::ifstream file(dir + "/" + std::to_string(r) + ".pid");
      int pid = 0;
      if (!(file >> pid))
        continue; // That rank never reached its step.
      // A zombie (not reaped by a container's init) has exited too. A rank
      // the launcher has just killed may still be tearing down (state D,
      // its memory gone) when mpirun returns: give it a moment.
      std::string text;
      bool alive = true;
      Clock::time_point deadline = Clock::now() + std::chrono::seconds(2);
      while (true) {
        std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
        text.clear();
        std::getline(stat, text);
        size_t paren = text.rfind(')');
        alive = paren != std::string::npos && paren + 2 < text.size() &&
                text[paren + 2] != 'Z';
        if (!alive || Clock::now() >= deadline)
          break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      EXPECT_FALSE(alive) << "rank " << r << " (pid " << pid
                          << ") still runs: " << text;
      if (alive)
        kill(pid, SIGKILL);
    }
  }

  /// Runs collectives.c on 1, 2 and 4 ranks and checks every output; on the
  /// fake GPU driver (a cuda artifact, device buffers) with \p onFakeGpu,
  /// and \p env before autopar-run.
  void checkCollectiveEntryPoints(bool onFakeGpu, const std::string &env);

  /// LD_LIBRARY_PATH=<the fake driver's directory>.
  static std::string fakeDriver() {
    return "LD_LIBRARY_PATH=" + shellQuote(AUTOPAR_FAKE_CUDA_DRIVER_DIR);
  }

  /// Makes the artifact in \p dir a cuda one.
  static void targetCuda(const std::string &dir) {
    json manifest = json::parse(readFile(dir + "/manifest.json"));
    manifest["target"] = {{"kind", "cuda"}, {"arch", "sm_90"}};
    writeFile(dir + "/manifest.json", manifest.dump(2));
  }

  using Clock = std::chrono::steady_clock;
  TempDir artifact, work;
  std::vector<float> weight, bias;
  /// Wall time of the last mpirun.
  double seconds = 0;
};

TEST_F(MpiCliTest, DataParallelRunsMatchOneRank) {
  std::string alone = work.file("alone");
  CommandResult reference =
      runCommand("env -u OMPI_COMM_WORLD_SIZE -u PMI_SIZE -u SLURM_NTASKS "
                 "-u SLURM_STEP_NUM_TASKS " +
                 shellQuote(AUTOPAR_RUN_PATH) + " " + shellQuote(dpLinear(1)) +
                 " --outputs " + shellQuote(alone));
  ASSERT_EQ(reference.exitCode, 0) << reference.out << reference.err;
  std::vector<float> x = readFloats(alone + "/x.npy", {Batch, K});
  std::vector<float> y = readFloats(alone + "/y.npy", {Batch, N});
  for (int i = 0; i < Batch; ++i)
    for (int j = 0; j < N; ++j) {
      double expected = bias[j];
      for (int p = 0; p < K; ++p)
        expected += double(x[i * K + p]) * weight[j * K + p];
      ASSERT_NEAR(y[i * N + j], expected, 1e-5) << i << "," << j;
    }

  for (int ranks : {1, 2, 4}) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks");
    std::string out = work.file("out" + std::to_string(ranks));
    CommandResult result =
        mpirun(ranks, shellQuote(dpLinear(ranks)) + " --steps 2 --outputs " +
                          shellQuote(out));
    ASSERT_EQ(result.exitCode, 0) << result.out << result.err;
    EXPECT_EQ(result.err, "");
    // Only rank 0 speaks.
    EXPECT_EQ(std::count(result.out.begin(), result.out.end(), '\n'), 6)
        << result.out;
    if (ranks > 1)
      EXPECT_NE(result.out.find("world_size " + std::to_string(ranks) +
                                " (dp " + std::to_string(ranks) +
                                " x tp 1 x pp 1)"),
                std::string::npos)
          << result.out;
    EXPECT_NE(result.out.find("step 2/2: "), std::string::npos) << result.out;
    // The same seed draws the same global inputs on any number of ranks.
    EXPECT_EQ(readFile(out + "/x.npy"), readFile(alone + "/x.npy"));
    std::vector<float> yRanks = readFloats(out + "/y.npy", {Batch, N});
    for (size_t i = 0; i < y.size(); ++i)
      ASSERT_NEAR(yRanks[i], y[i], 1e-6) << i;
  }

  // Global inputs from files reach the right ranks.
  fs::create_directories(work.file("in"));
  std::vector<float> given(Batch * K);
  for (int i = 0; i < Batch * K; ++i)
    given[i] = static_cast<float>(i % 11) / 4.0f;
  writeNpy(work.file("in/x.npy"), DType::Float32, {Batch, K}, given.data());
  std::string out = work.file("from-files");
  CommandResult result = mpirun(4, shellQuote(dpLinear(4)) + " --inputs " +
                                       shellQuote(work.file("in")) +
                                       " --outputs " + shellQuote(out));
  ASSERT_EQ(result.exitCode, 0) << result.out << result.err;
  std::vector<float> fromFiles = readFloats(out + "/y.npy", {Batch, N});
  for (int i = 0; i < Batch; ++i)
    for (int j = 0; j < N; ++j) {
      double expected = bias[j];
      for (int p = 0; p < K; ++p)
        expected += double(given[i * K + p]) * weight[j * K + p];
      ASSERT_NEAR(fromFiles[i * N + j], expected, 1e-5) << i << "," << j;
    }
}

/// Element (i, j) of a row-major [rows, cols] matrix.
template <typename T> T at(const std::vector<T> &m, int cols, int i, int j) {
  return m[static_cast<size_t>(i * cols + j)];
}

void MpiCliTest::checkCollectiveEntryPoints(bool onFakeGpu,
                                            const std::string &env) {
  const int C = 8;
  for (int p : {1, 2, 4}) {
    SCOPED_TRACE(std::to_string(p) + " ranks");
    const int R = Batch / p;
    json args = {
        split(argument("input", "x", "float32", {R, C}), 0, p),
        split(argument("input", "ids", "int64", {R, C}), 0, p),
        split(argument("input", "col", "float32", {Batch, C / p}), 1, p),
        argument("output", "sum", "float32", {R, C}),
        argument("output", "max", "float32", {R, C}),
        argument("output", "sum_t", "float32", {C, R}),
        argument("output", "cat0", "float32", {Batch, C}),
        argument("output", "cat1", "float32", {R, C * p}),
        split(argument("output", "part", "float32", {R, C / p}), 1, p),
        split(argument("output", "a2a", "float32", {Batch, C / p}), 1, p),
        argument("output", "bcast", "float32", {R, C}),
        split(argument("output", "ring", "float32", {R, C}), 0, p),
        argument("output", "ids_sum", "int64", {R, C}),
        argument("output", "col_cat", "float32", {Batch, C})};
    std::string dir = writeArtifact(p, "collectives_" + std::to_string(p), args,
                                    /*parameters=*/false);
    if (onFakeGpu)
      targetCuda(dir);
    std::string out = work.file("collectives" + std::to_string(p));
    CommandResult result =
        mpirun(p,
               shellQuote(dir) + " --steps 2 --comm-stats --outputs " +
                   shellQuote(out),
               env);
    ASSERT_EQ(result.exitCode, 0) << result.out << result.err;

    std::vector<float> x = readFloats(out + "/x.npy", {Batch, C});
    std::vector<int64_t> ids =
        readTensor<int64_t>(out + "/ids.npy", DType::Int64, {Batch, C});
    std::vector<float> col = readFloats(out + "/col.npy", {Batch, C});
    // Block q of x: rows [q*R, (q+1)*R).
    auto block = [&](int q, int i, int j) { return at(x, C, q * R + i, j); };
    std::vector<float> sum = readFloats(out + "/sum.npy", {R, C}),
                       max = readFloats(out + "/max.npy", {R, C}),
                       sumT = readFloats(out + "/sum_t.npy", {C, R}),
                       cat0 = readFloats(out + "/cat0.npy", {Batch, C}),
                       cat1 = readFloats(out + "/cat1.npy", {R, C * p}),
                       part = readFloats(out + "/part.npy", {R, C}),
                       a2a = readFloats(out + "/a2a.npy", {Batch, C}),
                       bcast = readFloats(out + "/bcast.npy", {R, C}),
                       ring = readFloats(out + "/ring.npy", {Batch, C}),
                       colCat = readFloats(out + "/col_cat.npy", {Batch, C});
    std::vector<int64_t> idsSum =
        readTensor<int64_t>(out + "/ids_sum.npy", DType::Int64, {R, C});
    for (int i = 0; i < R; ++i) {
      for (int j = 0; j < C; ++j) {
        double expectedSum = 0;
        float expectedMax = block(0, i, j);
        int64_t expectedIds = 0;
        for (int q = 0; q < p; ++q) {
          expectedSum += block(q, i, j);
          expectedMax = std::max(expectedMax, block(q, i, j));
          expectedIds += at(ids, C, q * R + i, j);
        }
        EXPECT_NEAR(at(sum, C, i, j), expectedSum, 1e-5) << "sum " << i << j;
        EXPECT_EQ(at(max, C, i, j), expectedMax) << "max " << i << j;
        EXPECT_NEAR(at(sumT, R, j, i), expectedSum, 1e-5) << "sum_t";
        EXPECT_NEAR(at(part, C, i, j), expectedSum, 1e-5) << "part";
        EXPECT_EQ(at(idsSum, C, i, j), expectedIds) << "ids_sum";
        EXPECT_EQ(at(bcast, C, i, j), block(p - 1, i, j)) << "bcast";
        for (int q = 0; q < p; ++q)
          EXPECT_EQ(at(cat1, C * p, i, q * C + j), block(q, i, j)) << "cat1";
      }
    }
    EXPECT_EQ(cat0, x);
    EXPECT_EQ(a2a, x);
    EXPECT_EQ(colCat, col);
    for (int q = 0; q < p; ++q)
      for (int i = 0; i < R; ++i)
        for (int j = 0; j < C; ++j)
          EXPECT_EQ(at(ring, C, q * R + i, j), block((q + p - 1) % p, i, j))
              << "ring block " << q;

    // Two steps of 4 all_reduce calls each; one send and one recv a step.
    EXPECT_NE(result.out.find("dp     all_reduce               8"),
              std::string::npos)
        << result.out;
    if (p > 1)
      EXPECT_NE(result.out.find("dp     send                     2"),
                std::string::npos)
          << result.out;
  }
}

TEST_F(MpiCliTest, CollectiveEntryPointsMatchReferences) {
  checkCollectiveEntryPoints(/*onFakeGpu=*/false, "");
}

#ifdef AUTOPAR_HAVE_CUDA_RUNTIME

// The same program as a cuda artifact on the fake driver: its buffers are
// device buffers, staged through the host by the device communicator
// (ranks share the one fake GPU), strided views copied by the device.
TEST_F(MpiCliTest, CollectiveEntryPointsOnDeviceBuffersMatchReferences) {
  checkCollectiveEntryPoints(/*onFakeGpu=*/true, fakeDriver());
}

TEST_F(MpiCliTest, DeviceCollectivesNameHowTheyCommunicate) {
  std::string dir = dpLinear(2);
  targetCuda(dir);
  CommandResult shared = mpirun(2, shellQuote(dir), fakeDriver());
  ASSERT_EQ(shared.exitCode, 0) << shared.out << shared.err;
  EXPECT_NE(shared.out.find("collectives: MPI, staged through host memory "
                            "(ranks 0 and 1 share a GPU)"),
            std::string::npos)
      << shared.out;

  CommandResult asked =
      mpirun(2, shellQuote(dir),
             fakeDriver() + " FAKE_CUDA_DEVICES=2 AUTOPAR_COLLECTIVES=mpi");
  ASSERT_EQ(asked.exitCode, 0) << asked.out << asked.err;
  EXPECT_NE(asked.out.find("(AUTOPAR_COLLECTIVES=mpi on rank 0)"),
            std::string::npos)
      << asked.out;
  EXPECT_NE(asked.out.find("GPU 0 of 2"), std::string::npos) << asked.out;

  CommandResult refused =
      mpirun(2, shellQuote(dir), fakeDriver() + " AUTOPAR_COLLECTIVES=nccl");
  EXPECT_NE(refused.exitCode, 0);
  EXPECT_NE(refused.err.find("AUTOPAR_COLLECTIVES=nccl, but ranks 0 and 1 "
                             "share a GPU, which NCCL does not allow"),
            std::string::npos)
      << refused.err;
}

TEST_F(MpiCliTest, EveryRankSaysThatThereIsNoDriver) {
  if (void *driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL)) {
    dlclose(driver);
    GTEST_SKIP() << "this machine has an NVIDIA driver";
  }
  std::string dir = dpLinear(2);
  targetCuda(dir);
  CommandResult result = mpirun(2, shellQuote(dir));
  EXPECT_NE(result.exitCode, 0);
  for (int rank : {0, 1})
    EXPECT_NE(result.err.find("autopar-run: error: rank " +
                              std::to_string(rank) +
                              ": no NVIDIA driver found (libcuda.so.1)"),
              std::string::npos)
        << result.err;
}

#endif

/// The tensor-parallel MLP of tp_mlp.c on a grid of \p dp x \p tp ranks.
class MpiTensorParallelTest : public MpiCliTest {
protected:
  static constexpr int H = 8;

  void SetUp() override {
    MpiCliTest::SetUp();
    for (int k = 0; k < K; ++k)
      for (int j = 0; j < H; ++j)
        a.push_back(static_cast<float>(k * H + j));
    for (int i = 0; i < H; ++i)
      for (int n = 0; n < N; ++n)
        b.push_back(static_cast<float>(100 + i * N + n));
    writeFile(artifact.file("tp.bin"), bytesOf(a) + bytesOf(b));
  }

  /// \p arg cut over grid axis \p axis (of \p parts ranks) along \p dim.
  static json splitOn(json arg, const char *axis, int dim, int parts) {
    std::vector<int64_t> global = arg["shape"];
    global[dim] *= parts;
    arg["global_shape"] = global;
    arg["split"] = {{"axis", axis}, {"dim", dim}};
    return arg;
  }

  /// The artifact; with \p dpFastest, explicit coordinates that put dp
  /// (not tp) on neighbouring ranks, otherwise none (the default order).
  std::string tpArtifact(int dp, int tp, bool dpFastest) {
    int ranks = dp * tp, rows = Batch / dp, hb = H / tp;
    std::string grid = std::to_string(dp) + "x" + std::to_string(tp);
    std::string dir =
        artifact.file("tp-" + grid + (dpFastest ? "-dp-fastest" : ""));
    fs::create_directories(dir);
    fs::copy_file(std::string(AUTOPAR_TEST_STAGE_DIR) + "/tp_mlp_" + grid +
                      ".so",
                  dir + "/stage0.so", fs::copy_options::overwrite_existing);
    json manifest = manifestFor(ranks, "stage0.so");
    manifest["grid"] = {{"dp", dp}, {"tp", tp}, {"pp", 1}};
    for (int r = 0; r < ranks; ++r) {
      if (dpFastest)
        manifest["ranks"][r]["coords"] = {
            {"dp", r % dp}, {"tp", r / dp}, {"pp", 0}};
      else
        manifest["ranks"][r].erase("coords");
    }
    json wa =
        splitOn(argument("parameter", "a", "float32", {K, hb}), "tp", 1, tp);
    wa["source"] = {
        {"file", "../tp.bin"}, {"offset", 0}, {"length", K * H * 4}};
    json wb =
        splitOn(argument("parameter", "b", "float32", {hb, N}), "tp", 0, tp);
    wb["source"] = {
        {"file", "../tp.bin"}, {"offset", K * H * 4}, {"length", H * N * 4}};
    manifest["arguments"] = {
        wa,
        wb,
        splitOn(argument("input", "x", "float32", {rows, K}), "dp", 0, dp),
        splitOn(argument("output", "y", "float32", {rows, N}), "dp", 0, dp),
        splitOn(argument("output", "h", "float32", {rows, H}), "dp", 0, dp),
        splitOn(argument("output", "hp", "float32", {rows, hb}), "tp", 1, tp),
        splitOn(argument("output", "a_blk", "float32", {K, hb}), "tp", 1, tp),
        splitOn(argument("output", "b_blk", "float32", {hb, N}), "tp", 0, tp)};
    writeFile(dir + "/manifest.json", manifest.dump(2));
    return dir;
  }

  std::vector<float> a, b;
};

TEST_F(MpiTensorParallelTest, SplitParametersAndOutputsMatchReferences) {
  struct Case {
    int dp, tp;
    bool dpFastest;
  } cases[] = {{1, 1, false}, {1, 2, false}, {2, 2, false}, {2, 2, true}};
  for (const Case &c : cases) {
    int ranks = c.dp * c.tp, rows = Batch / c.dp;
    std::string name = std::to_string(c.dp) + "x" + std::to_string(c.tp) +
                       (c.dpFastest ? "-dp-fastest" : "");
    SCOPED_TRACE("grid " + name);
    std::string out = work.file("tp-" + name);
    CommandResult result =
        mpirun(ranks, shellQuote(tpArtifact(c.dp, c.tp, c.dpFastest)) +
                          " --steps 2 --outputs " + shellQuote(out));
    ASSERT_EQ(result.exitCode, 0) << result.out << result.err;
    EXPECT_EQ(result.err, "");
    if (ranks > 1)
      EXPECT_NE(result.out.find("(dp " + std::to_string(c.dp) + " x tp " +
                                std::to_string(c.tp) + " x pp 1)"),
                std::string::npos)
          << result.out;

    std::vector<float> x = readFloats(out + "/x.npy", {Batch, K});
    std::vector<double> h(Batch * H, 0.0), y(Batch * N, 0.0);
    for (int i = 0; i < Batch; ++i)
      for (int j = 0; j < H; ++j)
        for (int k = 0; k < K; ++k)
          h[i * H + j] += double(x[i * K + k]) * a[k * H + j];
    for (int i = 0; i < Batch; ++i)
      for (int n = 0; n < N; ++n)
        for (int j = 0; j < H; ++j)
          y[i * N + n] += h[i * H + j] * b[j * N + n];

    std::vector<float> gotY = readFloats(out + "/y.npy", {Batch, N});
    std::vector<float> gotH = readFloats(out + "/h.npy", {Batch, H});
    std::vector<float> gotHp = readFloats(out + "/hp.npy", {rows, H});
    for (int i = 0; i < Batch * N; ++i)
      ASSERT_NEAR(gotY[i], y[i], 1e-3 * (1 + std::abs(y[i]))) << "y " << i;
    for (int i = 0; i < Batch * H; ++i)
      ASSERT_NEAR(gotH[i], h[i], 1e-4 * (1 + std::abs(h[i]))) << "h " << i;
    // A tp-split output comes from the ranks of dp coordinate 0: its rows
    // are the first block of the batch.
    for (int i = 0; i < rows * H; ++i)
      ASSERT_NEAR(gotHp[i], h[i], 1e-4 * (1 + std::abs(h[i]))) << "hp " << i;
    EXPECT_EQ(readFloats(out + "/a_blk.npy", {K, H}), a);
    EXPECT_EQ(readFloats(out + "/b_blk.npy", {H, N}), b);
  }
}

TEST_F(MpiTensorParallelTest, EveryRankReportsInconsistentSplitMetadata) {
  std::string dir = tpArtifact(1, 2, false);
  json manifest = json::parse(readFile(dir + "/manifest.json"));
  manifest["arguments"][1]["global_shape"] = {4, N}; // [4, 4] is one block
  writeFile(dir + "/manifest.json", manifest.dump());
  CommandResult result = mpirun(2, shellQuote(dir) + " --timeout 30");
  EXPECT_NE(result.exitCode, 0);
  for (int r = 0; r < 2; ++r)
    EXPECT_NE(result.err.find("autopar-run: error: rank " + std::to_string(r) +
                              ": " + dir +
                              "/manifest.json: 'arguments[1].global_shape' is "
                              "[4, 4], but 'b' needs [8, 4] (shape [4, 4] "
                              "with dim 0 times 2, the size of grid axis tp)"),
              std::string::npos)
        << "rank " << r << ":\n"
        << result.err;

  // The source holds the whole tensor: a length of one block is refused.
  manifest = json::parse(readFile(dir + "/manifest.json"));
  manifest["arguments"][1].erase("global_shape");
  manifest["arguments"][1]["source"]["length"] = 64;
  writeFile(dir + "/manifest.json", manifest.dump());
  result = mpirun(2, shellQuote(dir) + " --timeout 30");
  EXPECT_NE(result.exitCode, 0);
  EXPECT_NE(result.err.find("parameter 'b': source length 64 bytes does not "
                            "match its global type float32 [8, 4] (128 bytes"),
            std::string::npos)
      << result.err;
}

/// The three-stage pipeline of pipe_stage.c on dp x 3 ranks: each replica
/// runs 4 micro-batches of 2 rows per step.
class MpiPipelineTest : public MpiCliTest {
protected:
  static constexpr int MB = 2, C = 4, Stages = 3, MicroBatches = 4;

  std::string pipelineArtifact(int dp, const std::string &schedule) {
    int ranks = dp * Stages, rows = MB * MicroBatches * dp;
    std::string dir =
        artifact.file("pipe-" + std::to_string(dp) + "-" + schedule);
    fs::create_directories(dir);
    json manifest = manifestFor(ranks, "unused.so");
    manifest["grid"] = {{"dp", dp}, {"tp", 1}, {"pp", Stages}};
    manifest["pipeline"] = {{"stages", Stages},
                            {"micro_batches", MicroBatches},
                            {"micro_batch_size", MB},
                            {"schedule", schedule}};
    manifest.erase("arguments");
    auto tensor = [&](const char *kind, const char *name) {
      json arg = argument(kind, name, "float32", {MB, C});
      if (dp > 1)
        arg = split(arg, 0, dp);
      arg["global_shape"] = {rows, C};
      return arg;
    };
    auto activation = [&](const char *kind, const char *name, int peer) {
      json arg = argument(kind, name, "float32", {MB, C});
      arg["peer_stage"] = peer;
      return arg;
    };
    json arguments[Stages] = {
        {tensor("input", "x"), activation("activation_out", "a", 1),
         activation("activation_out", "b", 1), tensor("output", "early")},
        {activation("activation_in", "a", 0),
         activation("activation_in", "b", 0),
         activation("activation_out", "c", 2),
         activation("activation_out", "b", 2)},
        {tensor("input", "x"), activation("activation_in", "c", 1),
         activation("activation_in", "b", 1), tensor("output", "y")}};
    manifest["programs"] = json::array();
    for (int s = 0; s < Stages; ++s) {
      std::string name = "stage" + std::to_string(s);
      fs::copy_file(std::string(AUTOPAR_TEST_STAGE_DIR) + "/pipe_stage" +
                        std::to_string(s) + ".so",
                    dir + "/" + name + ".so",
                    fs::copy_options::overwrite_existing);
      manifest["programs"].push_back({{"name", name},
                                      {"library", name + ".so"},
                                      {"entry", "autopar_entry"},
                                      {"arguments", arguments[s]}});
    }
    for (int r = 0; r < ranks; ++r)
      manifest["ranks"][r] = {
          {"rank", r},
          {"program", "stage" + std::to_string(r / dp)},
          {"coords", {{"dp", r % dp}, {"tp", 0}, {"pp", r / dp}}}};
    writeFile(dir + "/manifest.json", manifest.dump(2));
    return dir;
  }

  /// The calls and bus bytes of one --comm-stats line, e.g. "pp recv".
  static std::pair<int64_t, double> commStat(const std::string &out,
                                             const std::string &axis,
                                             const std::string &op) {
    std::istringstream lines(out);
    std::string line;
    while (std::getline(lines, line)) {
      std::istringstream words(line);
      std::string a, o;
      int64_t calls = 0;
      double bytes = 0;
      if (words >> a >> o >> calls >> bytes && a == axis && o == op)
        return {calls, bytes};
    }
    return {0, 0};
  }

  /// Runs the pipeline on 1 x 3 and 2 x 3 ranks (on the fake GPU driver
  /// with \p onFakeGpu) and checks its outputs and its sends and receives.
  void checkStagesPassEveryMicroBatchAlong(bool onFakeGpu);
};

void MpiPipelineTest::checkStagesPassEveryMicroBatchAlong(bool onFakeGpu) {
  struct Case {
    int dp;
    const char *schedule;
  } cases[] = {{1, "1f1b"}, {2, "gpipe"}};
  for (const Case &c : cases) {
    int rows = MB * MicroBatches * c.dp;
    SCOPED_TRACE("dp " + std::to_string(c.dp) + ", " + c.schedule);
    std::string out = work.file("pipe-out-" + std::to_string(c.dp));
    std::string dir = pipelineArtifact(c.dp, c.schedule);
    if (onFakeGpu)
      targetCuda(dir);
    CommandResult result =
        mpirun(c.dp * Stages,
               shellQuote(dir) + " --steps 2 --comm-stats --outputs " +
                   shellQuote(out),
               onFakeGpu ? fakeDriver() : "");
    ASSERT_EQ(result.exitCode, 0) << result.out << result.err;
    EXPECT_EQ(result.err, "");
    EXPECT_NE(result.out.find("x pp 3)"), std::string::npos) << result.out;
    if (onFakeGpu) {
      EXPECT_NE(result.out.find("collectives: MPI, staged through host memory"),
                std::string::npos)
          << result.out;
    }

    std::vector<float> x = readFloats(out + "/x.npy", {rows, C});
    std::vector<float> y = readFloats(out + "/y.npy", {rows, C});
    std::vector<float> early = readFloats(out + "/early.npy", {rows, C});
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_FLOAT_EQ(y[i], (2 * x[i] + 1) * (x[i] + 1) + x[i]) << i;
      ASSERT_EQ(early[i], -x[i]) << i;
    }
    // Per step and micro-batch, stages 1 and 2 each receive two
    // activations of MB x C floats, and stages 0 and 1 send two. On a GPU
    // the device communicator counts them, so they went through it.
    int64_t calls = 2 * MicroBatches * 2;
    EXPECT_EQ(commStat(result.out, "pp", "recv"),
              std::make_pair(calls, double(calls * MB * C * 4)))
        << result.out;
    EXPECT_EQ(commStat(result.out, "pp", "send"),
              std::make_pair(calls, double(calls * MB * C * 4)))
        << result.out;
  }
}

TEST_F(MpiPipelineTest, StagesPassEveryMicroBatchAlong) {
  checkStagesPassEveryMicroBatchAlong(/*onFakeGpu=*/false);
}

#ifdef AUTOPAR_HAVE_CUDA_RUNTIME

// The same pipeline as a cuda artifact on the fake driver: each stage's
// inputs and outputs are copied to and from the device whole and its
// program runs on each micro-batch's block there; the activations live on
// the device and go through the device communicator (MPI staged through the
// host, as the ranks share the one fake GPU).
TEST_F(MpiPipelineTest, StagesPassEveryMicroBatchAlongOnDeviceBuffers) {
  checkStagesPassEveryMicroBatchAlong(/*onFakeGpu=*/true);
}

#endif

TEST_F(MpiPipelineTest, AMissingStageLibraryIsReported) {
  std::string dir = pipelineArtifact(1, "1f1b");
  fs::remove(dir + "/stage2.so");
  CommandResult result = mpirun(Stages, shellQuote(dir) + " --timeout 30");
  EXPECT_NE(result.exitCode, 0);
  EXPECT_NE(result.err.find("autopar-run: error: rank 2: cannot load program "
                            "library " +
                            dir + "/stage2.so"),
            std::string::npos)
      << result.err;
  EXPECT_NE(result.err.find("autopar-run: error: rank 0: stopping: 1 rank (2) "
                            "failed to load the artifact"),
            std::string::npos)
      << result.err;
}

TEST_F(MpiCliTest, EveryRankReportsAWrongWorldSize) {
  std::string dir = dpLinear(2);
  CommandResult result = mpirun(4, shellQuote(dir));
  EXPECT_NE(result.exitCode, 0);
  for (int r = 0; r < 4; ++r)
    EXPECT_NE(result.err.find("autopar-run: error: rank " + std::to_string(r) +
                              ": the artifact was compiled for world_size 2 (" +
                              dir +
                              "/manifest.json), but the launcher "
                              "started 4 processes"),
              std::string::npos)
        << "rank " << r << ":\n"
        << result.err;
}

TEST_F(MpiCliTest, ALoadErrorOnOneRankStopsAll) {
  // Rank 2's program is missing: it says so, rank 0 names it, all exit.
  std::string dir = dpLinear(4);
  json manifest = json::parse(readFile(dir + "/manifest.json"));
  manifest["programs"].push_back({{"name", "stage1"},
                                  {"library", "missing.so"},
                                  {"entry", "autopar_entry"}});
  manifest["ranks"][2]["program"] = "stage1";
  writeFile(dir + "/manifest.json", manifest.dump());
  CommandResult result = mpirun(4, shellQuote(dir) + " --timeout 30");
  EXPECT_NE(result.exitCode, 0);
  EXPECT_NE(result.err.find("autopar-run: error: rank 2: cannot load program "
                            "library " +
                            dir + "/missing.so"),
            std::string::npos)
      << result.err;
  EXPECT_NE(result.err.find("autopar-run: error: rank 0: stopping: 1 rank (2) "
                            "failed to load the artifact"),
            std::string::npos)
      << result.err;
  EXPECT_LT(seconds, 15);
}

TEST_F(MpiCliTest, ABadInputOnRankZeroStopsAll) {
  fs::create_directories(work.file("in"));
  std::vector<double> wide(Batch * K, 0.5);
  writeNpy(work.file("in/x.npy"), DType::Float64, {Batch, K}, wide.data());
  CommandResult result =
      mpirun(4, shellQuote(dpLinear(4)) + " --timeout 30 --inputs " +
                    shellQuote(work.file("in")));
  EXPECT_NE(result.exitCode, 0);
  EXPECT_NE(result.err.find("autopar-run: error: rank 0: input 'x': " +
                            work.file("in/x.npy") +
                            " holds float64 [8, 8], expected float32 [8, 8]"),
            std::string::npos)
      << result.err;
  EXPECT_LT(seconds, 15); // MPI_Abort, not the watchdog.
}

/// The fault stage on \p ranks ranks: y = all_reduce(x), [2, 8] per rank.
class MpiFaultTest : public MpiCliTest {
protected:
  std::string faultArtifact(int ranks) {
    return writeArtifact(
        ranks, "fault",
        {split(argument("input", "x", "float32", {2, 8}), 0, ranks),
         argument("output", "y", "float32", {2, 8})},
        /*parameters=*/false);
  }
  std::string faultEnv(const char *fault, int rank) {
    fs::create_directories(work.file("pids"));
    return std::string("AUTOPAR_TEST_FAULT=") + fault +
           " AUTOPAR_TEST_FAULT_RANK=" + std::to_string(rank) +
           " AUTOPAR_TEST_PID_DIR=" + shellQuote(work.file("pids"));
  }
};

TEST_F(MpiFaultTest, RunsWithoutAFault) {
  CommandResult result = mpirun(2, shellQuote(faultArtifact(2)) + " --steps 3");
  EXPECT_EQ(result.exitCode, 0) << result.out << result.err;
}

TEST_F(MpiFaultTest, AHungRankIsNamedAndEveryRankEnds) {
  const double timeout = 2;
  CommandResult result =
      mpirun(4, shellQuote(faultArtifact(4)) + " --timeout 2 --steps 3",
             faultEnv("hang", 1));
  EXPECT_NE(result.exitCode, 0);
  // Rank 1 is busy in its own code, the others wait for it in the
  // all_reduce and allow a second more: rank 1 reports first.
  EXPECT_NE(result.err.find("autopar-run: error: rank 1: timed out after 2 s "
                            "in step 1\n"),
            std::string::npos)
      << result.err;
  EXPECT_LT(seconds, timeout + 5);
  expectNoSurvivors(work.file("pids"), 4);
}

TEST_F(MpiFaultTest, TheTimeoutComesFromTheEnvironmentToo) {
  CommandResult result = mpirun(2, shellQuote(faultArtifact(2)),
                                faultEnv("hang", 0) + " AUTOPAR_TIMEOUT_S=1");
  EXPECT_NE(result.exitCode, 0);
  EXPECT_NE(result.err.find("autopar-run: error: rank 0: timed out after 1 s "
                            "in step 1\n"),
            std::string::npos)
      << result.err;
  EXPECT_LT(seconds, 1 + 5);
  expectNoSurvivors(work.file("pids"), 2);
}

TEST_F(MpiFaultTest, AKilledRankEndsEveryRank) {
  const double timeout = 5;
  CommandResult result = mpirun(
      4, shellQuote(faultArtifact(4)) + " --timeout 5", faultEnv("kill", 3));
  EXPECT_NE(result.exitCode, 0);
  // Rank 3 could not speak; the launcher (or, failing that, the watchdog of
  // a rank waiting for it) names it.
  bool named =
      result.err.find("rank 3") != std::string::npos ||
      result.err.find("timed out after 5 s in step 1, waiting in all_reduce "
                      "on axis dp") != std::string::npos;
  EXPECT_TRUE(named) << result.err;
  EXPECT_LT(seconds, timeout + 5);
  expectNoSurvivors(work.file("pids"), 4);
}

} // namespace
