//===- CudaCliTest.cpp - autopar-run on cuda artifacts, without a GPU -----===//
//
// A cuda artifact (manifest "target": cuda) makes autopar-run load
// libautopar_cuda.so and the NVIDIA driver. Here there is no driver: the
// first tests check the error that every such machine gives; the others
// run the real libautopar_cuda.so on a fake driver (Inputs/
// fake_cuda_driver.cpp, put first on LD_LIBRARY_PATH) with a stage shaped
// like generated GPU code (Inputs/fake_gpu.c). That covers device selection,
// parameter upload with float32 -> bfloat16 conversion, the mgpu* ABI, the
// per-step copies and every error path short of cuBLASLt and NCCL, which
// need a real GPU (ctest -L cuda).
//
//===----------------------------------------------------------------------===//

#include "autopar/runtime/Npy.h"

#include "TestUtil.h"

#include "gtest/gtest.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <dlfcn.h>
#include <filesystem>

using namespace autopar::runtime;
using namespace autopar::runtime::test;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

constexpr int N = 4;

class CudaCliTest : public ::testing::Test {
protected:
  void SetUp() override {
    // w's float32 source: 1 + 2^-8 and 3 + 2^-7 round to 1 and 3 in bfloat16.
    std::vector<float> w = {1.0f + std::ldexp(1.0f, -8), 2.0f, -0.5f,
                            3.0f + std::ldexp(1.0f, -7)};
    std::vector<float> b = {0.5f, -1.0f, 2.0f, 0.0f};
    writeFile(artifact.file("weights.bin"), bytesOf(w) + bytesOf(b));
    fs::create_directories(work.file("in"));
    std::vector<float> x = {1, 2, 3, 4};
    writeNpy(work.file("in/x.npy"), DType::Float32, {N}, x.data());
    useStage("fake_gpu");
    manifest = json::parse(R"({
      "format": "autopar-artifact", "version": 1, "model": "axpy.onnx",
      "cluster": "dgx-h100:1", "world_size": 1,
      "target": {"kind": "cuda", "arch": "sm_90", "precision": "bf16"},
      "programs": [{"name": "stage0", "library": "stage0.so",
                    "entry": "autopar_entry",
                    "device_code": ["device/stage0.sm_90.cubin"]}],
      "ranks": [{"rank": 0, "program": "stage0"}],
      "arguments": [
        {"kind": "parameter", "name": "w", "dtype": "bfloat16",
         "source_dtype": "float32", "shape": [4],
         "source": {"file": "weights.bin", "offset": 0, "length": 16}},
        {"kind": "parameter", "name": "b", "dtype": "float32", "shape": [4],
         "source": {"file": "weights.bin", "offset": 16, "length": 16}},
        {"kind": "input", "name": "x", "dtype": "float32", "shape": [4]},
        {"kind": "output", "name": "y", "dtype": "float32", "shape": [4]}
      ]})");
    writeFile(artifact.file("manifest.json"), manifest.dump(2));
  }

  void useStage(const std::string &stage) {
    fs::copy_file(std::string(AUTOPAR_TEST_STAGE_DIR) + "/" + stage + ".so",
                  artifact.file("stage0.so"),
                  fs::copy_options::overwrite_existing);
  }

  /// autopar-run ARTIFACT ARGS, alone, with \p env; on the fake driver
  /// unless \p fakeDriver is false.
  CommandResult run(const std::string &args, const std::string &env = "",
                    bool fakeDriver = true) {
    std::string path = fakeDriver ? std::string("LD_LIBRARY_PATH=") +
                                        shellQuote(AUTOPAR_FAKE_CUDA_DRIVER_DIR)
                                  : "";
    return runCommand(
        "env -u OMPI_COMM_WORLD_SIZE -u OMPI_COMM_WORLD_RANK -u PMI_SIZE "
        "-u PMI_RANK -u SLURM_NTASKS -u SLURM_STEP_NUM_TASKS -u SLURM_PROCID "
        "-u AUTOPAR_CUDA_RUNTIME -u AUTOPAR_COLLECTIVES " +
        path + " " + env + " " + shellQuote(AUTOPAR_RUN_PATH) + " " +
        shellQuote(artifact.path()) + " " + args);
  }

  void expectError(const CommandResult &result, const std::string &expected) {
    expectRunError(result, expected);
  }

  TempDir artifact, work;
  json manifest;
};

bool hasNvidiaDriver() {
  void *driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (driver)
    dlclose(driver);
  return driver != nullptr;
}

#ifdef AUTOPAR_HAVE_CUDA_RUNTIME

TEST_F(CudaCliTest, WithoutADriverEveryMachineSaysSo) {
  if (hasNvidiaDriver())
    GTEST_SKIP() << "this machine has an NVIDIA driver";
  CommandResult result = run("", "", /*fakeDriver=*/false);
  EXPECT_EQ(result.exitCode, 1);
  EXPECT_EQ(result.err,
            "autopar-run: error: no NVIDIA driver found (libcuda.so.1): this "
            "artifact targets sm_90 GPUs; run it on a machine with an NVIDIA "
            "GPU, or compile for --cluster local:N\n");
}

TEST_F(CudaCliTest, RunsAProgramOnTheDevice) {
  std::string out = work.file("out");
  CommandResult result =
      run("--steps 3 --inputs " + shellQuote(work.file("in")) + " --outputs " +
          shellQuote(out));
  ASSERT_EQ(result.exitCode, 0) << result.out << result.err;
  EXPECT_EQ(result.err, "");
  EXPECT_NE(result.out.find("program 'stage0' (Fake GPU (GPU 0 of 1, sm_90, "
                            "1.0 GiB))"),
            std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("collectives: none between ranks (a single "
                            "rank); step times include copying the inputs to "
                            "the GPU, not the outputs back (once, at the "
                            "end)"),
            std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("step 3/3: "), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("device memory: peak "), std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("more in use on the device"), std::string::npos)
      << result.out;
  NpyArray y = readNpy(out + "/y.npy");
  ASSERT_EQ(y.shape, (Shape{N}));
  std::vector<float> values(N);
  std::memcpy(values.data(), y.data.data(), sizeof(float) * N);
  // w arrives as bfloat16: 1 + 2^-8 -> 1, 3 + 2^-7 -> 3.
  EXPECT_EQ(values, (std::vector<float>{1.5f, 3.0f, 0.5f, 12.0f}));
}

TEST_F(CudaCliTest, PicksTheGpuOfItsLocalRankAndChecksItsArchitecture) {
  // A lone process is local rank 0: GPU 0 of 2.
  CommandResult result = run("", "FAKE_CUDA_DEVICES=2");
  ASSERT_EQ(result.exitCode, 0) << result.out << result.err;
  EXPECT_NE(result.out.find("GPU 0 of 2"), std::string::npos) << result.out;

  expectError(run("", "FAKE_CUDA_SM=80"),
              "this artifact's GPU code targets sm_90, but Fake GPU (GPU 0 of "
              "1, sm_80, 1.0 GiB) cannot run it");
  // Code for sm_90 runs on later minor versions of the same major one.
  EXPECT_EQ(run("", "FAKE_CUDA_SM=91").exitCode, 0);
  manifest["target"]["arch"] = "sm_90a";
  writeFile(artifact.file("manifest.json"), manifest.dump(2));
  expectError(run("", "FAKE_CUDA_SM=91"), "targets sm_90a, but Fake GPU");
}

TEST_F(CudaCliTest, ReportsDeviceErrorsClearly) {
  expectError(run("", "FAKE_CUDA_NO_DEVICE=1"),
              "no usable NVIDIA GPU: cuInit failed: no CUDA-capable device is "
              "detected (CUDA_ERROR_NO_DEVICE); this artifact targets sm_90 "
              "GPUs");
  expectError(run("", "FAKE_CUDA_DEVICES=0"),
              "no usable NVIDIA GPU: the driver sees none");
  expectError(run("", "FAKE_CUDA_FAULT=1"),
              "the GPU failed while running this rank's work: an illegal "
              "memory access was encountered (CUDA_ERROR_ILLEGAL_ADDRESS)");
  expectError(
      run("", "FAKE_CUDA_MEMORY=1000"),
      "out of GPU memory allocating 16 bytes for parameter 'b' (512 bytes in "
      "use by this rank; the device has 488 bytes free of 1000 bytes)");
  expectError(run("", "AUTOPAR_COLLECTIVES=gloo"),
              "AUTOPAR_COLLECTIVES='gloo': expected 'nccl', 'mpi' or 'auto'");
  expectError(run("", "AUTOPAR_CUDA_RUNTIME=/nonexistent/libautopar_cuda.so"),
              "this artifact runs on NVIDIA GPUs (" +
                  artifact.file("manifest.json") +
                  " says \"target\": {\"kind\": \"cuda\"}), but the CUDA "
                  "runtime cannot be loaded: /nonexistent/libautopar_cuda.so");
}

TEST_F(CudaCliTest, ReportsProgramErrorsClearly) {
  useStage("fake_gpu_bad_image");
  expectError(run(""),
              "cannot load the GPU code of program 'stage0': cuModuleLoadData "
              "failed: device kernel image is invalid "
              "(CUDA_ERROR_INVALID_IMAGE); the artifact's GPU code targets "
              "sm_90, this is Fake GPU");
  useStage("fake_gpu_matmul_mismatch");
  expectError(run(""), "autopar_cuda_matmul_f32_f32: operand sizes do not "
                       "agree: A [2, 2] x B [3, 2] -> C [2, 2]");
}

#else // No libautopar_cuda.so in this build.

TEST_F(CudaCliTest, WithoutTheCudaRuntimeSaysHowToGetIt) {
  CommandResult result = run("", "", /*fakeDriver=*/false);
  EXPECT_EQ(result.exitCode, 1);
  EXPECT_NE(result.err.find("but the CUDA runtime cannot be loaded"),
            std::string::npos)
      << result.err;
  EXPECT_NE(result.err.find("build autopar with the CUDA toolkit"),
            std::string::npos)
      << result.err;
}

#endif

} // namespace
