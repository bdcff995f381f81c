//===- CudaDeviceTest.cpp - autopar-run on a real GPU ---------------------===//
//
// What only a GPU can check: the cuBLASLt GEMMs (every type pair, row-major
// and transposed operands, batched, no TF32), bfloat16 parameters converted
// on upload, and the program's collectives on device memory through NCCL
// (a world of one, AUTOPAR_COLLECTIVES=nccl) and over MPI with host staging
// (two ranks on one GPU, or NCCL when the machine has two).
//
// Without a usable GPU the whole program exits 77, which ctest reports as
// skipped (label "cuda", SKIP_RETURN_CODE 77).
//
// The build's paths are compiled in; AUTOPAR_RUN_PATH, AUTOPAR_MPIEXEC and
// AUTOPAR_TEST_STAGE_DIR in the environment override them, so that the test
// runs on a GPU machine that received the binaries but not the build tree
// (bench/gpu/roundtrip.py).
//
//===----------------------------------------------------------------------===//

#include "autopar/runtime/DType.h"
#include "autopar/runtime/Npy.h"

#include "TestUtil.h"

#include "gtest/gtest.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <filesystem>
#include <unistd.h>

using namespace autopar::runtime;
using namespace autopar::runtime::test;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

/// True if the driver loads and sees a GPU.
bool haveGpu() {
  void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!driver)
    return false;
  using Init = int (*)(unsigned);
  using Count = int (*)(int *);
  auto init = reinterpret_cast<Init>(dlsym(driver, "cuInit"));
  auto count = reinterpret_cast<Count>(dlsym(driver, "cuDeviceGetCount"));
  int devices = 0;
  return init && count && init(0) == 0 && count(&devices) == 0 && devices > 0;
}

/// The environment's value of `name`, else the path the build compiled in.
std::string setting(const char *name, const char *compiledIn) {
  const char *value = std::getenv(name);
  return value && *value ? value : compiledIn;
}

std::string runPath() { return setting("AUTOPAR_RUN_PATH", AUTOPAR_RUN_PATH); }
std::string mpiexecPath() {
  return setting("AUTOPAR_MPIEXEC", AUTOPAR_MPIEXEC);
}
std::string stageDir() {
  return setting("AUTOPAR_TEST_STAGE_DIR", AUTOPAR_TEST_STAGE_DIR);
}

constexpr int M = 3, K = 5, N = 4;
/// A product whose output rows (1025 floats) are not 16-byte aligned and
/// large enough (4 MiB) for the runtime's padded-output path.
constexpr int BM = 1024, BK = 64, BN = 1025;

/// Values with many mantissa bits, so that TF32 (10 bits) would show.
std::vector<float> values(size_t count, float seed) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i)
    v[i] = std::sin(seed + 0.7312345f * static_cast<float>(i)) * 1.2345678f;
  return v;
}

std::vector<uint16_t> toBits(const std::vector<float> &v, DType dtype) {
  std::vector<uint16_t> bits(v.size());
  convertFromFloat32(v.data(), static_cast<int64_t>(v.size()), dtype,
                     bits.data());
  return bits;
}

std::vector<float> fromBits(const std::vector<uint16_t> &bits, DType dtype) {
  std::vector<float> v(bits.size());
  convertToFloat32(bits.data(), dtype, static_cast<int64_t>(bits.size()),
                   v.data());
  return v;
}

/// Row-major [m, n] = [m, k] * [k, n], in double.
std::vector<double> product(const std::vector<float> &a,
                            const std::vector<float> &b, int m, int k, int n,
                            size_t offsetA = 0, size_t offsetB = 0) {
  std::vector<double> c(static_cast<size_t>(m * n));
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j)
      for (int p = 0; p < k; ++p)
        c[i * n + j] +=
            double(a[offsetA + i * k + p]) * double(b[offsetB + p * n + j]);
  return c;
}

class CudaDeviceTest : public ::testing::Test {
protected:
  json manifest(int ranks, const json &arguments) {
    json m = {{"format", "autopar-artifact"},
              {"version", 1},
              {"model", "test.onnx"},
              {"cluster", "dgx-h100:" + std::to_string(ranks)},
              {"world_size", ranks},
              {"target", {{"kind", "cuda"}, {"arch", "sm_90"}}},
              {"programs",
               {{{"name", "stage0"},
                 {"library", "stage0.so"},
                 {"entry", "autopar_entry"}}}},
              {"ranks", json::array()},
              {"arguments", arguments}};
    for (int r = 0; r < ranks; ++r)
      m["ranks"].push_back({{"rank", r}, {"program", "stage0"}});
    return m;
  }

  void writeArtifact(const std::string &stage, const json &m) {
    fs::copy_file(stageDir() + "/" + stage + ".so", artifact.file("stage0.so"),
                  fs::copy_options::overwrite_existing);
    writeFile(artifact.file("manifest.json"), m.dump(2));
  }

  static json arg(const char *kind, const char *name, const char *dtype,
                  std::vector<int64_t> shape) {
    return {{"kind", kind}, {"name", name}, {"dtype", dtype}, {"shape", shape}};
  }

  template <typename T>
  void input(const std::string &name, DType dtype, const Shape &shape,
             const std::vector<T> &data) {
    fs::create_directories(work.file("in"));
    writeNpy(work.file("in/" + name + ".npy"), dtype, shape, data.data());
  }

  template <typename T> std::vector<T> output(const std::string &name) {
    NpyArray array = readNpy(work.file("out/" + name + ".npy"));
    std::vector<T> data(array.data.size() / sizeof(T));
    std::memcpy(data.data(), array.data.data(), array.data.size());
    return data;
  }

  CommandResult run(int ranks, const std::string &env) {
    std::string args = shellQuote(artifact.path()) + " --steps 2 --inputs " +
                       shellQuote(work.file("in")) + " --outputs " +
                       shellQuote(work.file("out")) + " --comm-stats";
    std::string clean = "env -u OMPI_COMM_WORLD_SIZE -u PMI_SIZE -u "
                        "SLURM_NTASKS -u SLURM_STEP_NUM_TASKS " +
                        env + " ";
    if (ranks == 1)
      return runCommand(clean + shellQuote(runPath()) + " " + args);
    std::string flags = geteuid() == 0 ? " --allow-run-as-root" : "";
    return runCommand(clean + shellQuote(mpiexecPath()) + flags +
                      " --oversubscribe -np " + std::to_string(ranks) + " " +
                      shellQuote(runPath()) + " " + args);
  }

  void prepareGemms();
  void checkGemms(const std::string &env);

  TempDir artifact, work;
};

void expectNear(const std::vector<float> &got, const std::vector<double> &want,
                double relative, const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], relative * (1.0 + std::fabs(want[i])))
        << what << " element " << i;
}

/// Writes the cuda_gemm stage's artifact and inputs.
void CudaDeviceTest::prepareGemms() {
  std::vector<float> a = values(M * K, 0.1f), b = values(K * N, 0.2f);
  std::vector<float> bt(N * K);
  for (int p = 0; p < K; ++p)
    for (int j = 0; j < N; ++j)
      bt[j * K + p] = b[p * N + j];
  std::vector<float> a3 = values(2 * M * K, 0.3f), b3 = values(2 * K * N, 0.4f);
  // bbf is a parameter: float32 in the file, bfloat16 on the GPU.
  writeFile(artifact.file("bbf.bin"), bytesOf(b));
  json bbf = arg("parameter", "bbf", "bfloat16", {K, N});
  bbf["source_dtype"] = "float32";
  bbf["source"] = {{"file", "bbf.bin"}, {"offset", 0}, {"length", K * N * 4}};
  json arguments = {arg("input", "a", "float32", {M, K}),
                    arg("input", "b", "float32", {K, N}),
                    arg("input", "bt", "float32", {N, K}),
                    arg("input", "abf", "bfloat16", {M, K}),
                    bbf,
                    arg("input", "a3", "float32", {2, M, K}),
                    arg("input", "b3", "float32", {2, K, N}),
                    arg("input", "ah", "float16", {M, K}),
                    arg("input", "bh", "float16", {K, N}),
                    arg("output", "y0", "float32", {M, N}),
                    arg("output", "y1", "float32", {M, N}),
                    arg("output", "y2", "float32", {N, M}),
                    arg("output", "y3", "float32", {M, N}),
                    arg("output", "y4", "bfloat16", {M, N}),
                    arg("output", "y5", "float32", {2, M, N}),
                    arg("output", "y6", "float32", {M, N}),
                    arg("output", "y7", "float16", {M, N}),
                    arg("output", "y8", "float32", {M, N}),
                    arg("output", "y9", "float32", {2, M, N}),
                    arg("output", "y10", "float32", {M, 2}),
                    arg("input", "a2", "float32", {BM, BK}),
                    arg("input", "b2", "float32", {BK, BN}),
                    arg("output", "y11", "float32", {BM, BN})};
  writeArtifact("cuda_gemm", manifest(1, arguments));
  input("a", DType::Float32, {M, K}, a);
  input("b", DType::Float32, {K, N}, b);
  input("bt", DType::Float32, {N, K}, bt);
  input("abf", DType::BFloat16, {M, K}, toBits(a, DType::BFloat16));
  input("a3", DType::Float32, {2, M, K}, a3);
  input("b3", DType::Float32, {2, K, N}, b3);
  input("ah", DType::Float16, {M, K}, toBits(a, DType::Float16));
  input("bh", DType::Float16, {K, N}, toBits(b, DType::Float16));
  std::vector<float> a2 = values(BM * BK, 0.5f), b2 = values(BK * BN, 0.6f);
  input("a2", DType::Float32, {BM, BK}, a2);
  input("b2", DType::Float32, {BK, BN}, b2);
}

/// Runs the cuda_gemm stage with \p env and checks every product.
void CudaDeviceTest::checkGemms(const std::string &env) {
  prepareGemms();
  CommandResult result = run(1, env);
  // The inputs prepareGemms wrote.
  std::vector<float> a = values(M * K, 0.1f), b = values(K * N, 0.2f);
  std::vector<float> a3 = values(2 * M * K, 0.3f), b3 = values(2 * K * N, 0.4f);
  std::vector<float> a2 = values(BM * BK, 0.5f), b2 = values(BK * BN, 0.6f);
  ASSERT_EQ(result.exitCode, 0) << result.out << result.err;
  std::printf("%s", result.out.c_str());

  // float32: no TF32, so errors stay at float32 rounding.
  std::vector<double> ab = product(a, b, M, K, N);
  expectNear(output<float>("y0"), ab, 1e-6, "y0 = a * b");
  expectNear(output<float>("y1"), ab, 1e-6, "y1 = a * bt^T");
  std::vector<float> y2 = output<float>("y2"), y2t(M * N);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j)
      y2t[i * N + j] = y2[j * M + i];
  expectNear(y2t, ab, 1e-6, "y2 = (a * b)^T");
  std::vector<double> batched = product(a3, b3, M, K, N);
  std::vector<double> second = product(a3, b3, M, K, N, M * K, K * N);
  batched.insert(batched.end(), second.begin(), second.end());
  expectNear(output<float>("y5"), batched, 1e-6, "y5 batched");
  // The overwrite kernels (beta 0) replace what C held.
  expectNear(output<float>("y8"), ab, 1e-6, "y8 = a * b over a * b");
  expectNear(output<float>("y9"), batched, 1e-6, "y9 batched over itself");
  expectNear(output<float>("y10"), std::vector<double>(M * 2, 0.0), 0,
             "y10 = an empty sum over ones");
  // Rows of 1025 floats (not 16-byte aligned).
  expectNear(output<float>("y11"), product(a2, b2, BM, BK, BN), 1e-5,
             "y11 = a2 * b2 with unaligned rows");

  // 16-bit inputs, accumulated in float32.
  std::vector<float> abf =
                         fromBits(toBits(a, DType::BFloat16), DType::BFloat16),
                     bbfValues =
                         fromBits(toBits(b, DType::BFloat16), DType::BFloat16);
  std::vector<double> bf = product(abf, bbfValues, M, K, N);
  expectNear(output<float>("y3"), bf, 1e-6, "y3 bf16 -> f32");
  expectNear(fromBits(output<uint16_t>("y4"), DType::BFloat16), bf,
             std::ldexp(1.0, -8), "y4 bf16 -> bf16");
  std::vector<float> ah = fromBits(toBits(a, DType::Float16), DType::Float16),
                     bh = fromBits(toBits(b, DType::Float16), DType::Float16);
  std::vector<double> h = product(ah, bh, M, K, N);
  expectNear(output<float>("y6"), h, 1e-6, "y6 f16 -> f32");
  expectNear(fromBits(output<uint16_t>("y7"), DType::Float16), h,
             std::ldexp(1.0, -11), "y7 f16 -> f16");
}

TEST_F(CudaDeviceTest, GemmsOfEveryTypeAndLayout) { checkGemms(""); }

// Every misaligned matrix of every product through an aligned scratch (in
// the default mode only large products take that path).
TEST_F(CudaDeviceTest, GemmsThroughAlignedCopies) {
  checkGemms("AUTOPAR_GEMM_ALIGNMENT_COPIES=always");
}

TEST_F(CudaDeviceTest, GemmsRefuseAnUnknownAlignmentMode) {
  prepareGemms();
  CommandResult result = run(1, "AUTOPAR_GEMM_ALIGNMENT_COPIES=sometimes");
  EXPECT_NE(result.exitCode, 0);
  EXPECT_NE(result.err.find("AUTOPAR_GEMM_ALIGNMENT_COPIES is 'sometimes'; "
                            "it takes auto (the default), always or never"),
            std::string::npos)
      << result.out << result.err;
}

/// cuda_collectives on several ranks: outputs, and how they communicated.
class CudaCollectivesTest : public CudaDeviceTest {
public:
  void check(int ranks, const std::string &env,
             const std::string &expectedComm) {
    const int R = 8 / ranks, C = 8;
    auto split = [&](json a) {
      std::vector<int64_t> global = a["shape"];
      global[0] *= ranks;
      a["global_shape"] = global;
      a["split"] = {{"axis", "dp"}, {"dim", 0}};
      return a;
    };
    json arguments = {split(arg("input", "x", "float32", {R, C})),
                      split(arg("input", "xb", "bfloat16", {R, C})),
                      arg("output", "sum", "float32", {R, C}),
                      arg("output", "cat0", "float32", {8, C}),
                      arg("output", "cat1", "float32", {R, C * ranks}),
                      arg("output", "sumb", "bfloat16", {R, C}),
                      arg("output", "sumt", "float32", {C, R})};
    writeArtifact("cuda_collectives_" + std::to_string(ranks),
                  manifest(ranks, arguments));
    // Small integers: sums are exact, in bfloat16 too.
    std::vector<float> x(8 * C);
    for (int i = 0; i < 8 * C; ++i)
      x[i] = static_cast<float>(i % 13 - 6);
    input("x", DType::Float32, {8, C}, x);
    input("xb", DType::BFloat16, {8, C}, toBits(x, DType::BFloat16));
    CommandResult result = run(ranks, env);
    ASSERT_EQ(result.exitCode, 0) << result.out << result.err;
    std::printf("%s", result.out.c_str());
    EXPECT_NE(result.out.find("collectives: " + expectedComm),
              std::string::npos)
        << result.out;

    std::vector<double> sum(R * C);
    for (int q = 0; q < ranks; ++q)
      for (int i = 0; i < R * C; ++i)
        sum[i] += x[q * R * C + i];
    expectNear(output<float>("sum"), sum, 0, "sum");
    expectNear(fromBits(output<uint16_t>("sumb"), DType::BFloat16), sum, 0,
               "bf16 sum");
    std::vector<float> sumt = output<float>("sumt"), back(R * C);
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < C; ++j)
        back[i * C + j] = sumt[j * R + i];
    expectNear(back, sum, 0, "sum into a transposed view");
    EXPECT_EQ(output<float>("cat0"), x);
    std::vector<float> cat1 = output<float>("cat1");
    for (int i = 0; i < R; ++i)
      for (int q = 0; q < ranks; ++q)
        for (int j = 0; j < C; ++j)
          ASSERT_EQ(cat1[i * C * ranks + q * C + j], x[(q * R + i) * C + j])
              << "cat1 " << i << " " << q << " " << j;
  }
};

TEST_F(CudaCollectivesTest, NcclInAWorldOfOne) {
  check(1, "AUTOPAR_COLLECTIVES=nccl", "NCCL ");
}

TEST_F(CudaCollectivesTest, TwoRanksStagedOrNccl) {
  // Both ranks on GPU 0 of a one-GPU machine share it: MPI with staging.
  // On a machine with two GPUs each rank has its own: NCCL.
  check(2, "", "");
  check(2, "AUTOPAR_COLLECTIVES=mpi", "MPI, staged through host memory");
}

} // namespace

int main(int argc, char **argv) {
  if (!haveGpu()) {
    std::printf("skipped: no usable NVIDIA GPU\n");
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
