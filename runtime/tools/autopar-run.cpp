//===- autopar-run.cpp - Execute an autopar artifact ----------------------===//
//
// autopar-run ARTIFACT_DIR [--inputs DIR] [--outputs DIR] [--steps N]
//                          [--seed N]
//
// Started once per rank by mpirun / srun, or alone for a single rank. The
// user-facing contract is docs INTERFACES.md ("autopar-run"); the artifact
// format is docs/design/artifact.md.
//
//===----------------------------------------------------------------------===//

#include "autopar/runtime/CpuBlas.h"
#include "autopar/runtime/CrashReport.h"
#include "autopar/runtime/Error.h"
#include "autopar/runtime/Session.h"
#include "autopar/runtime/World.h"

#include <malloc.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <optional>
#include <string>
#include <unistd.h>
#include <vector>

using namespace autopar::runtime;

namespace {

const char *const Usage =
    R"(usage: autopar-run ARTIFACT_DIR [--inputs DIR] [--outputs DIR] [--steps N] [--seed N]

Runs an artifact written by autopar-compile. Launch one process per rank with
mpirun or srun, or a single process for a single-rank artifact; the number of
processes must equal the artifact's world_size.

options:
  --inputs DIR    read each graph input from DIR/<input name>.npy; dtype and
                  shape must match the artifact exactly (bfloat16 as uint16)
  --outputs DIR   rank 0 writes each graph output to DIR/<output name>.npy
                  (DIR is created); random inputs are written there as well
  --steps N       run N steps (default 1), printing the time of each
  --seed N        seed of the random inputs (default 0)
  -h, --help      print this help

Without --inputs, inputs are drawn at random, reproducibly from the seed and
the input's name: floating-point values uniform in [-1, 1), integers uniform
in [0, 10) (so that token ids and labels stay in range), bools 0 or 1.
A '/' in a tensor name becomes '_' in its file name.
)";

struct Options {
  std::string artifactDir;
  std::optional<std::string> inputsDir;
  std::optional<std::string> outputsDir;
  int64_t steps = 1;
  uint64_t seed = 0;
  bool help = false;
};

uint64_t parseNumber(const std::string &option, const std::string &text,
                     uint64_t minimum) {
  size_t used = 0;
  unsigned long long value = 0;
  bool ok = !text.empty() && text[0] >= '0' && text[0] <= '9';
  if (ok) {
    try {
      value = std::stoull(text, &used);
    } catch (...) {
      ok = false;
    }
  }
  if (!ok || used != text.size() || value < minimum)
    throw Error(option + " expects an integer of at least " +
                std::to_string(minimum) + ", got '" + text + "'");
  return value;
}

Options parseOptions(int argc, char **argv) {
  Options options;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      options.help = true;
      return options;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      positional.push_back(arg);
      continue;
    }
    // Accept both "--steps 3" and "--steps=3".
    std::string name = arg, value;
    bool hasValue = false;
    if (size_t equals = arg.find('='); equals != std::string::npos) {
      name = arg.substr(0, equals);
      value = arg.substr(equals + 1);
      hasValue = true;
    }
    if (name != "--inputs" && name != "--outputs" && name != "--steps" &&
        name != "--seed")
      throw Error("unknown option '" + arg + "' (see --help)");
    if (!hasValue) {
      if (i + 1 >= argc)
        throw Error(name + " expects a value (see --help)");
      value = argv[++i];
    }
    if (name == "--inputs")
      options.inputsDir = value;
    else if (name == "--outputs")
      options.outputsDir = value;
    else if (name == "--steps")
      options.steps = static_cast<int64_t>(parseNumber(name, value, 1));
    else
      options.seed = parseNumber(name, value, 0);
  }
  if (positional.empty())
    throw Error("missing ARTIFACT_DIR (see --help)");
  if (positional.size() > 1)
    throw Error("expected one ARTIFACT_DIR, got '" + positional[0] + "' and '" +
                positional[1] + "' (see --help)");
  options.artifactDir = positional[0];
  return options;
}

/// Restarts autopar-run with OPENBLAS_CORETYPE set when OpenBLAS did not
/// recognize the CPU and chose kernels several times slower than it has (see
/// CpuBlas.h). OpenBLAS reads the variable only when it is loaded, before
/// main, hence a fresh process. A user's own OPENBLAS_CORETYPE is left alone,
/// which also ends the recursion. If exec fails, the run goes on as it is.
void useFasterBlasKernels(char **argv) {
  if (std::getenv("OPENBLAS_CORETYPE"))
    return;
  std::optional<std::string> core = preferredOpenBlasCoreType();
  if (!core)
    return;
  setenv("OPENBLAS_CORETYPE", core->c_str(), 1);
  std::fflush(nullptr);
  execv("/proc/self/exe", argv);
}

int run(const Options &options) {
  WorldInfo world = detectWorld();
  std::unique_ptr<Session> session = Session::open(options.artifactDir, world);
  const Manifest &manifest = session->getManifest();
  bool leader = world.rank == 0;
  if (leader)
    std::printf("autopar-run: %s: world_size %lld, program '%s' (%s)\n",
                options.artifactDir.c_str(),
                static_cast<long long>(manifest.worldSize),
                manifest.programForRank(world.rank).name.c_str(),
                describeBlas().c_str());

  if (options.inputsDir) {
    session->readInputs(*options.inputsDir);
  } else {
    session->randomizeInputs(options.seed);
    if (leader)
      std::printf("autopar-run: random inputs (seed %llu)\n",
                  static_cast<unsigned long long>(options.seed));
    if (leader && options.outputsDir)
      session->writeInputs(*options.outputsDir);
  }

  const ProgramDesc &program = manifest.programForRank(world.rank);
  installCrashReport("program '" + program.name + "' (" + program.library +
                     ")");
  using Clock = std::chrono::steady_clock;
  double totalMs = 0, firstMs = 0;
  for (int64_t step = 1; step <= options.steps; ++step) {
    setCrashReportStep(step);
    Clock::time_point start = Clock::now();
    session->runStep();
    double ms =
        std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    totalMs += ms;
    if (step == 1)
      firstMs = ms;
    if (leader) {
      std::printf("step %lld/%lld: %.3f ms\n", static_cast<long long>(step),
                  static_cast<long long>(options.steps), ms);
      std::fflush(stdout);
    }
  }
  removeCrashReport();
  if (leader) {
    double meanMs = totalMs / static_cast<double>(options.steps);
    std::printf("throughput: %.3f steps/s (mean %.3f ms over %lld steps",
                meanMs > 0 ? 1000.0 / meanMs : 0.0, meanMs,
                static_cast<long long>(options.steps));
    if (options.steps > 1) {
      // The first step also pays for page faults on the mapped weights.
      double steadyMs =
          (totalMs - firstMs) / static_cast<double>(options.steps - 1);
      std::printf("; %.3f steps/s after the first",
                  steadyMs > 0 ? 1000.0 / steadyMs : 0.0);
    }
    std::printf(")\n");
  }

  if (leader && options.outputsDir) {
    session->writeOutputs(*options.outputsDir);
    std::printf("autopar-run: wrote outputs to %s\n",
                options.outputsDir->c_str());
  }
  return 0;
}

} // namespace

/// Generated code allocates its temporaries with malloc and frees them every
/// step. glibc serves large blocks with mmap and returns them with munmap, so
/// each step would fault every page of every temporary in again (measured:
/// 6% of a small GPT's time). Keeping them on the heap reuses the pages.
static void keepTemporariesOnTheHeap() {
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

int main(int argc, char **argv) {
  keepTemporariesOnTheHeap();
  try {
    Options options = parseOptions(argc, argv);
    if (options.help) {
      std::fputs(Usage, stdout);
      return 0;
    }
    useFasterBlasKernels(argv);
    return run(options);
  } catch (const std::bad_alloc &) {
    std::fprintf(stderr, "autopar-run: error: out of memory\n");
  } catch (const std::exception &error) {
    std::fprintf(stderr, "autopar-run: error: %s\n", error.what());
  } catch (...) {
    std::fprintf(stderr, "autopar-run: error: unknown failure\n");
  }
  return 1;
}
