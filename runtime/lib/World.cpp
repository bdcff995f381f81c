//===- World.cpp - Rank and world size from the launcher ------------------===//

#include "autopar/runtime/World.h"

#include "autopar/runtime/Error.h"

#include <cstdlib>
#include <optional>

namespace autopar::runtime {

namespace {

/// The variables one launcher family sets, most specific first.
struct LauncherVars {
  std::initializer_list<const char *> size;
  const char *rank;
};

int64_t parseCount(const char *name, const char *text) {
  std::string value(text);
  size_t used = 0;
  long long number = -1;
  try {
    number = std::stoll(value, &used);
  } catch (...) {
    used = 0;
  }
  if (used == 0 || used != value.size() || number < 0)
    throw Error("environment variable " + std::string(name) + "='" + value +
                "' is not a non-negative integer");
  return number;
}

} // namespace

WorldInfo detectWorld(const EnvLookup &getEnv) {
  // Slurm: only srun's tasks are ranks. SLURM_STEP_NUM_TASKS is the size of
  // this srun step. SLURM_NTASKS (with SLURM_PROCID=0) is the allocation's
  // and is set in an sbatch script and an salloc shell too, where a plain
  // `autopar-run ART` is one process, not rank 0 of SLURM_NTASKS.
  const LauncherVars launchers[] = {
      {{"OMPI_COMM_WORLD_SIZE"}, "OMPI_COMM_WORLD_RANK"},
      {{"PMI_SIZE"}, "PMI_RANK"},
      {{"SLURM_STEP_NUM_TASKS"}, "SLURM_PROCID"},
  };
  for (const LauncherVars &launcher : launchers) {
    const char *sizeName = nullptr;
    const char *sizeText = nullptr;
    for (const char *name : launcher.size) {
      if ((sizeText = getEnv(name))) {
        sizeName = name;
        break;
      }
    }
    if (!sizeText)
      continue;
    const char *rankText = getEnv(launcher.rank);
    WorldInfo world;
    world.size = parseCount(sizeName, sizeText);
    world.rank = rankText ? parseCount(launcher.rank, rankText) : 0;
    world.source = std::string(sizeName) + "/" + launcher.rank;
    if (world.size < 1 || world.rank >= world.size)
      throw Error("launcher environment is inconsistent: rank " +
                  std::to_string(world.rank) + " of " +
                  std::to_string(world.size) + " (from " + world.source + ")");
    return world;
  }
  return WorldInfo{};
}

std::optional<NodePlacement> detectNodePlacement(const EnvLookup &getEnv) {
  struct LocalVars {
    const char *rank;
    const char *size; // May be null: the launcher does not say.
  };
  const LocalVars launchers[] = {
      {"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
      {"MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
      {"SLURM_LOCALID", nullptr},
  };
  for (const LocalVars &launcher : launchers) {
    const char *rankText = getEnv(launcher.rank);
    if (!rankText)
      continue;
    NodePlacement placement;
    placement.localRank = parseCount(launcher.rank, rankText);
    const char *sizeText = launcher.size ? getEnv(launcher.size) : nullptr;
    placement.localSize = sizeText ? parseCount(launcher.size, sizeText) : 0;
    placement.source = launcher.rank;
    return placement;
  }
  return std::nullopt;
}

std::optional<std::string> srunWithoutPmix(const WorldInfo &world,
                                           const EnvLookup &getEnv) {
  if (world.size < 2 || !getEnv("SLURM_STEP_NUM_TASKS") ||
      getEnv("OMPI_COMM_WORLD_SIZE") || getEnv("PMIX_RANK"))
    return std::nullopt;
  const char *skip = getEnv("AUTOPAR_SRUN_PMIX_CHECK");
  if (skip && std::string(skip) == "0")
    return std::nullopt;
  const char *type = getEnv("SLURM_MPI_TYPE");
  std::string how = type && *type ? "with --mpi=" + std::string(type)
                                  : "without an MPI plugin (--mpi=none)";
  return "srun started this rank " + how +
         ", but Open MPI finds the other ranks under srun only through "
         "Slurm's PMIx plugin (PMIX_RANK is not set): launch with srun "
         "--mpi=pmix (srun --mpi=list shows the plugins), or set "
         "MpiDefault=pmix in slurm.conf; AUTOPAR_SRUN_PMIX_CHECK=0 skips "
         "this check";
}

WorldInfo detectWorld() {
  return detectWorld([](const char *name) { return std::getenv(name); });
}

} // namespace autopar::runtime
