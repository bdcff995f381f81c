//===- CliTest.cpp - autopar-run end to end -------------------------------===//
//
// Runs the real autopar-run binary on a hand-built artifact: a manifest, a
// weights file and a stage library compiled from Inputs/linear_add.c, which
// calls the runtime's matmul kernel the way generated code does. This covers
// dlopen, kernel export, weight mapping, .npy I/O and the CLI's error paths
// without the compiler.
//
//===----------------------------------------------------------------------===//

#include "autopar/runtime/Npy.h"

#include "TestUtil.h"

#include "gtest/gtest.h"

#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>

using namespace autopar::runtime;
using namespace autopar::runtime::test;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

constexpr int M = 2, K = 8, N = 4;

/// A single-rank artifact computing y = x @ fc.weight^T + fc.bias.
class CliTest : public ::testing::Test {
protected:
  void SetUp() override {
    for (int i = 0; i < N * K; ++i)
      weight.push_back(0.25f * static_cast<float>(i % 7) - 0.5f);
    for (int j = 0; j < N; ++j)
      bias.push_back(static_cast<float>(j));
    // Some leading bytes, as parameters inside an .onnx file would have.
    writeFile(artifact.file("weights.bin"),
              std::string(8, '\x7f') + bytesOf(weight) + bytesOf(bias));
    fs::copy_file(std::string(AUTOPAR_TEST_STAGE_DIR) + "/linear_add.so",
                  artifact.file("stage0.so"));
    manifest = json::parse(R"({
      "format": "autopar-artifact", "version": 1, "model": "linear.onnx",
      "cluster": "local:1", "world_size": 1,
      "programs": [{"name": "stage0", "library": "stage0.so", "entry": "autopar_entry"}],
      "ranks": [{"rank": 0, "program": "stage0"}],
      "arguments": [
        {"kind": "parameter", "name": "fc.weight", "dtype": "float32", "shape": [4, 8],
         "source": {"file": "weights.bin", "offset": 8, "length": 128}},
        {"kind": "parameter", "name": "fc.bias", "dtype": "float32", "shape": [4],
         "source": {"file": "", "offset": 136, "length": 16}},
        {"kind": "input", "name": "x", "dtype": "float32", "shape": [2, 8]},
        {"kind": "output", "name": "y", "dtype": "float32", "shape": [2, 4]}
      ]})");
    // One absolute source path, one relative: both must resolve.
    manifest["arguments"][1]["source"]["file"] = artifact.file("weights.bin");
    saveManifest();
  }

  void saveManifest() {
    writeFile(artifact.file("manifest.json"), manifest.dump(2));
  }

  /// Runs autopar-run with \p args, outside of any launcher unless \p env
  /// sets launcher variables.
  CommandResult run(const std::string &args, const std::string &env = "") {
    std::string command =
        "env -u OMPI_COMM_WORLD_SIZE -u OMPI_COMM_WORLD_RANK -u PMI_SIZE "
        "-u PMI_RANK -u SLURM_NTASKS -u SLURM_STEP_NUM_TASKS -u SLURM_PROCID " +
        env + " " + shellQuote(AUTOPAR_RUN_PATH) + " " + args;
    return runCommand(command);
  }

  std::vector<float> readFloats(const std::string &path, const Shape &shape) {
    NpyArray array = readNpy(path);
    EXPECT_EQ(array.dtype, DType::Float32);
    EXPECT_EQ(array.shape, shape);
    std::vector<float> values(array.data.size() / sizeof(float));
    std::memcpy(values.data(), array.data.data(), array.data.size());
    return values;
  }

  void expectLinear(const std::vector<float> &x, const std::vector<float> &y) {
    ASSERT_EQ(x.size(), size_t(M * K));
    ASSERT_EQ(y.size(), size_t(M * N));
    for (int i = 0; i < M; ++i) {
      for (int j = 0; j < N; ++j) {
        double expected = bias[j];
        for (int p = 0; p < K; ++p)
          expected += double(x[i * K + p]) * weight[j * K + p];
        EXPECT_NEAR(y[i * N + j], expected, 1e-5) << i << "," << j;
      }
    }
  }

  void expectError(const CommandResult &result, const std::string &expected) {
    expectRunError(result, expected);
  }

  TempDir artifact, work;
  std::vector<float> weight, bias;
  json manifest;
};

TEST_F(CliTest, RunsWithRandomInputsAndWritesThem) {
  std::string out = work.file("out");
  CommandResult result = run(shellQuote(artifact.path()) + " --outputs " +
                             shellQuote(out) + " --steps 3");
  ASSERT_EQ(result.exitCode, 0) << result.out << result.err;
  EXPECT_EQ(result.err, "");
  for (const char *line :
       {"step 1/3: ", "step 2/3: ", "step 3/3: ", "throughput: ", " steps/s",
        "random inputs (seed 0)"})
    EXPECT_NE(result.out.find(line), std::string::npos) << result.out;
  std::vector<float> x = readFloats(out + "/x.npy", {M, K});
  for (float v : x) {
    EXPECT_GE(v, -1.0f);
    EXPECT_LT(v, 1.0f);
  }
  expectLinear(x, readFloats(out + "/y.npy", {M, N}));

  // Same seed, same inputs; another seed, other inputs.
  std::string again = work.file("again"), other = work.file("other");
  ASSERT_EQ(run(shellQuote(artifact.path()) + " --outputs=" + again).exitCode,
            0);
  ASSERT_EQ(run(shellQuote(artifact.path()) + " --seed 5 --outputs " + other)
                .exitCode,
            0);
  EXPECT_EQ(readFile(out + "/x.npy"), readFile(again + "/x.npy"));
  EXPECT_NE(readFile(out + "/x.npy"), readFile(other + "/x.npy"));
}

TEST_F(CliTest, ReadsInputsFromNpyFiles) {
  std::vector<float> x(M * K);
  for (int i = 0; i < M * K; ++i)
    x[i] = static_cast<float>(i) / 16.0f;
  fs::create_directory(work.file("in"));
  writeNpy(work.file("in/x.npy"), DType::Float32, {M, K}, x.data());
  std::string out = work.file("out");
  CommandResult result =
      run(shellQuote(artifact.path()) + " --inputs " +
          shellQuote(work.file("in")) + " --outputs " + shellQuote(out));
  ASSERT_EQ(result.exitCode, 0) << result.out << result.err;
  expectLinear(x, readFloats(out + "/y.npy", {M, N}));
  // Given inputs are not copied to the outputs.
  EXPECT_FALSE(fs::exists(out + "/x.npy"));
}

TEST_F(CliTest, RunsWithoutOutputsDirectory) {
  CommandResult result = run(shellQuote(artifact.path()));
  EXPECT_EQ(result.exitCode, 0) << result.err;
  EXPECT_NE(result.out.find("step 1/1: "), std::string::npos);
}

TEST_F(CliTest, RejectsInputsOfTheWrongTypeOrShape) {
  fs::create_directory(work.file("in"));
  std::vector<double> wide(M * K, 0.5);
  writeNpy(work.file("in/x.npy"), DType::Float64, {M, K}, wide.data());
  std::string inputs = " --inputs " + shellQuote(work.file("in"));
  expectError(run(shellQuote(artifact.path()) + inputs),
              "input 'x': " + work.file("in/x.npy") +
                  " holds float64 [2, 8], expected float32 [2, 8]");

  std::vector<float> flat(M * K, 0.5f);
  writeNpy(work.file("in/x.npy"), DType::Float32, {M * K}, flat.data());
  expectError(run(shellQuote(artifact.path()) + inputs),
              "holds float32 [16], expected float32 [2, 8]");

  fs::remove(work.file("in/x.npy"));
  expectError(run(shellQuote(artifact.path()) + inputs),
              "input 'x': missing file " + work.file("in/x.npy"));

  expectError(run(shellQuote(artifact.path()) + " --inputs " +
                  shellQuote(work.file("nowhere"))),
              "inputs directory " + work.file("nowhere") + " does not exist");
}

TEST_F(CliTest, RejectsAWorldSizeMismatch) {
  // Multi-rank launches are tested under mpirun (MpiCliTest).
  manifest["world_size"] = 2;
  manifest["ranks"].push_back({{"rank", 1}, {"program", "stage0"}});
  saveManifest();
  expectError(run(shellQuote(artifact.path())),
              "compiled for world_size 2 (" + artifact.file("manifest.json") +
                  "), but autopar-run was started as a single process "
                  "without a launcher; launch it with mpirun -np 2");
  // A launcher of one process: a world of one, not started with MPI.
  expectError(run(shellQuote(artifact.path()),
                  "OMPI_COMM_WORLD_SIZE=1 OMPI_COMM_WORLD_RANK=0"),
              "compiled for world_size 2 (" + artifact.file("manifest.json") +
                  "), but the launcher started 1 process (from "
                  "OMPI_COMM_WORLD_SIZE/OMPI_COMM_WORLD_RANK)");
}

TEST_F(CliTest, RefusesALauncherOfAnotherMpi) {
  // Launcher variables without a launcher: to this autopar-run's MPI each
  // process is alone, as under another MPI's mpiexec. Every process says so.
  for (const char *rank : {"0", "1"}) {
    CommandResult result =
        run(shellQuote(artifact.path()),
            std::string("OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=") + rank);
    expectError(result, std::string("rank ") + rank +
                            ": MPI says this is rank 0 of 1, but the "
                            "launcher's environment (OMPI_COMM_WORLD_SIZE/"
                            "OMPI_COMM_WORLD_RANK) says rank " +
                            rank +
                            " of 2; autopar-run was built with another "
                            "MPI than the one that launched it");
  }
  expectError(run(shellQuote(artifact.path()), "PMI_SIZE=4 PMI_RANK=3"),
              "rank 3: MPI says this is rank 0 of 1, but the launcher's "
              "environment (PMI_SIZE/PMI_RANK) says rank 3 of 4");
}

TEST_F(CliTest, AnSbatchScriptIsNoLaunch) {
  // `sbatch -n 2` runs its script once with the allocation's SLURM_NTASKS:
  // autopar-run started there without srun is one process.
  CommandResult result =
      run(shellQuote(artifact.path()), "SLURM_NTASKS=2 SLURM_PROCID=0 "
                                       "SLURM_JOB_ID=7 SLURM_LOCALID=0");
  EXPECT_EQ(result.exitCode, 0) << result.err;
  EXPECT_NE(result.out.find("world_size 1"), std::string::npos) << result.out;
}

TEST_F(CliTest, NamesAnSrunStepWithoutPmix) {
#ifndef AUTOPAR_TEST_OPEN_MPI
  GTEST_SKIP() << "autopar-run is not built with Open MPI";
#endif
  manifest["world_size"] = 2;
  manifest["ranks"].push_back({{"rank", 1}, {"program", "stage0"}});
  saveManifest();
  // What srun --mpi=none gives each task; before MPI_Init, every rank
  // says what to do instead of Open MPI's abort.
  for (const char *rank : {"0", "1"}) {
    CommandResult result =
        run(shellQuote(artifact.path()),
            std::string("-u PMIX_RANK -u SLURM_MPI_TYPE SLURM_STEP_NUM_TASKS=2 "
                        "SLURM_NTASKS=2 SLURM_STEP_ID=0 SLURM_JOB_ID=7 "
                        "SLURM_PROCID=") +
                rank);
    expectError(result, std::string("rank ") + rank +
                            ": srun started this rank without an MPI plugin "
                            "(--mpi=none), but Open MPI finds the other ranks "
                            "under srun only through Slurm's PMIx plugin");
    EXPECT_NE(result.err.find("launch with srun --mpi=pmix"), std::string::npos)
        << result.err;
  }
}

TEST_F(CliTest, ReportsBadArtifacts) {
  expectError(run(shellQuote(work.file("nothing"))),
              "artifact directory " + work.file("nothing") + " does not exist");
  expectError(run(shellQuote(work.path())),
              work.file("manifest.json") + ": cannot open");

  json good = manifest;
  manifest["arguments"][0]["source"]["offset"] = 100;
  saveManifest();
  expectError(run(shellQuote(artifact.path())),
              "parameter 'fc.weight': bytes [100, 228) lie outside " +
                  artifact.file("weights.bin") + " (152 bytes)");

  manifest = good;
  manifest["programs"][0]["entry"] = "no_such_entry";
  saveManifest();
  expectError(run(shellQuote(artifact.path())),
              "program library " + artifact.file("stage0.so") +
                  " has no entry point 'no_such_entry'");

  manifest = good;
  manifest["programs"][0]["library"] = "missing.so";
  saveManifest();
  expectError(run(shellQuote(artifact.path())),
              "cannot load program library " + artifact.file("missing.so"));

  manifest = good;
  manifest["arguments"][2].erase("shape");
  saveManifest();
  expectError(run(shellQuote(artifact.path())),
              artifact.file("manifest.json") +
                  ": missing key 'arguments[2].shape'");
}

TEST_F(CliTest, ReportsAnUnresolvedKernelAtLoadTime) {
  fs::copy_file(std::string(AUTOPAR_TEST_STAGE_DIR) + "/missing_kernel.so",
                artifact.file("stage0.so"),
                fs::copy_options::overwrite_existing);
  expectError(run(shellQuote(artifact.path())),
              "_mlir_ciface_autopar_cpu_no_such_kernel");
}

TEST_F(CliTest, NamesTheProgramAndStepThatCrashed) {
  fs::copy_file(std::string(AUTOPAR_TEST_STAGE_DIR) + "/crash.so",
                artifact.file("stage0.so"),
                fs::copy_options::overwrite_existing);
  CommandResult result =
      runCommand("ulimit -c 0; env -u OMPI_COMM_WORLD_SIZE -u PMI_SIZE -u "
                 "SLURM_NTASKS -u SLURM_STEP_NUM_TASKS " +
                 shellQuote(AUTOPAR_RUN_PATH) + " " +
                 shellQuote(artifact.path()) + " --steps 2");
  EXPECT_NE(result.exitCode, 0);
  EXPECT_NE(result.err.find("autopar-run: error: program 'stage0' (stage0.so) "
                            "crashed (SIGSEGV) in step 1; this is a bug in "
                            "the compiled program"),
            std::string::npos)
      << result.err;
}

TEST_F(CliTest, ExportsTheKernels) {
  // The stage library leaves the kernels undefined: autopar-run must export
  // all of them, or real artifacts fail to load.
  CommandResult result =
      runCommand("nm -D --defined-only " + shellQuote(AUTOPAR_RUN_PATH));
  ASSERT_EQ(result.exitCode, 0) << result.err;
  for (const char *symbol :
       {"_mlir_ciface_autopar_cpu_matmul_f32",
        "_mlir_ciface_autopar_cpu_batch_matmul_f32",
        "_mlir_ciface_autopar_cpu_conv2d_nchw_f32",
        "_mlir_ciface_autopar_cpu_conv2d_ngchw_f32",
        "_mlir_ciface_autopar_cpu_matmul_overwrite_f32",
        "_mlir_ciface_autopar_cpu_batch_matmul_overwrite_f32",
        "_mlir_ciface_autopar_cpu_conv2d_nchw_overwrite_f32",
        "_mlir_ciface_autopar_cpu_conv2d_ngchw_overwrite_f32"})
    EXPECT_NE(result.out.find(symbol), std::string::npos) << symbol;
  // And every collective entry point (artifact.md) for every element type.
  for (const char *type : {"f32", "f64", "i32", "i64"})
    for (const char *op :
         {"all_reduce", "all_reduce_max", "all_gather", "reduce_scatter",
          "all_to_all", "broadcast", "send", "recv"}) {
      std::string symbol =
          std::string("_mlir_ciface_autopar_rt_") + op + "_" + type + "\n";
      EXPECT_NE(result.out.find(symbol), std::string::npos) << symbol;
    }
  EXPECT_NE(result.out.find("autopar_rt_grid_coord\n"), std::string::npos);
}

TEST_F(CliTest, ParsesTheCommandLine) {
  CommandResult help = run("--help");
  EXPECT_EQ(help.exitCode, 0);
  EXPECT_EQ(help.out.rfind("usage: autopar-run ARTIFACT_DIR", 0), 0u);
  EXPECT_NE(help.out.find("uniform in [-1, 1)"), std::string::npos);

  expectError(run(""), "missing ARTIFACT_DIR (see --help)");
  expectError(run("a b"), "expected one ARTIFACT_DIR, got 'a' and 'b'");
  expectError(run(shellQuote(artifact.path()) + " --bogus"),
              "unknown option '--bogus' (see --help)");
  expectError(run(shellQuote(artifact.path()) + " --steps 0"),
              "--steps expects an integer of at least 1, got '0'");
  expectError(run(shellQuote(artifact.path()) + " --steps three"),
              "--steps expects an integer of at least 1, got 'three'");
  expectError(run(shellQuote(artifact.path()) + " --seed -1"),
              "--seed expects an integer of at least 0, got '-1'");
  expectError(run(shellQuote(artifact.path()) + " --outputs"),
              "--outputs expects a value");
  expectError(run(shellQuote(artifact.path()) + " --timeout -1"),
              "--timeout expects a number of seconds (0 disables the "
              "timeout), got '-1'");
  expectError(run(shellQuote(artifact.path()), "AUTOPAR_TIMEOUT_S=soon"),
              "AUTOPAR_TIMEOUT_S expects a number of seconds (0 disables the "
              "timeout), got 'soon'");
  expectError(run(shellQuote(artifact.path()), "AUTOPAR_CPU_GEMM=mkl"),
              "AUTOPAR_CPU_GEMM expects 'onednn' or 'openblas', got 'mkl'");
  // The banner names the library of the matrix products.
  CommandResult openblas = run(shellQuote(artifact.path()) + " --steps 1",
                               "AUTOPAR_CPU_GEMM=openblas");
  EXPECT_EQ(openblas.exitCode, 0) << openblas.err;
  EXPECT_EQ(openblas.out.find("oneDNN"), std::string::npos) << openblas.out;
  CommandResult byDefault = run(shellQuote(artifact.path()) + " --steps 1");
#if AUTOPAR_TEST_HAVE_ONEDNN
  EXPECT_NE(byDefault.out.find("(oneDNN 2."), std::string::npos)
      << byDefault.out;
  EXPECT_NE(byDefault.out.find(" GEMMs, OpenBLAS "), std::string::npos)
      << byDefault.out;
#else
  EXPECT_EQ(byDefault.out.find("oneDNN"), std::string::npos) << byDefault.out;
  expectError(run(shellQuote(artifact.path()), "AUTOPAR_CPU_GEMM=onednn"),
              "AUTOPAR_CPU_GEMM=onednn, but this autopar-run was built without "
              "oneDNN");
#endif
  expectError(run(shellQuote(artifact.path()) + " --threads 0"),
              "--threads expects an integer of at least 1, got '0'");
  expectError(run(shellQuote(artifact.path()) + " --threads 5000"),
              "--threads expects at most 1024, got '5000'");
  // The banner names the threads: OpenBLAS's and the kernels' are the same.
  CommandResult threaded =
      run(shellQuote(artifact.path()) + " --threads 3 --steps 1");
  EXPECT_EQ(threaded.exitCode, 0) << threaded.err;
  EXPECT_NE(threaded.out.find(", 3 threads)"), std::string::npos)
      << threaded.out;
  // A single rank may have a watchdog too. --comm-stats counts the input's
  // "broadcast" to the one rank, which moves no byte.
  CommandResult watched = run(shellQuote(artifact.path()) +
                              " --timeout=2.5 --comm-stats --steps 2");
  EXPECT_EQ(watched.exitCode, 0) << watched.err;
  EXPECT_NE(watched.out.find("  world  broadcast                1          "
                             "      0 "),
            std::string::npos)
      << watched.out;
}

TEST_F(CliTest, ReportsAnUnwritableOutputsDirectory) {
  writeFile(work.file("file"), "not a directory");
  expectError(run(shellQuote(artifact.path()) + " --outputs " +
                  shellQuote(work.file("file"))),
              "cannot create directory " + work.file("file"));
}

} // namespace
