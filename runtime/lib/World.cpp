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
  // Slurm exports SLURM_NTASKS to the whole job, but srun sets
  // SLURM_STEP_NUM_TASKS to the size of this step, which is what counts.
  const LauncherVars launchers[] = {
      {{"OMPI_COMM_WORLD_SIZE"}, "OMPI_COMM_WORLD_RANK"},
      {{"PMI_SIZE"}, "PMI_RANK"},
      {{"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"}, "SLURM_PROCID"},
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

WorldInfo detectWorld() {
  return detectWorld([](const char *name) { return std::getenv(name); });
}

} // namespace autopar::runtime
