//===- World.h - Rank and world size from the launcher ----------*- C++ -*-===//
//
// autopar-run is started once per rank by mpirun or srun. Before any MPI is
// initialized, the launcher's environment already says how many processes it
// started and which one this is; that is enough to check the artifact's
// world_size on every rank and fail fast on a mismatch.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_WORLD_H
#define AUTOPAR_RUNTIME_WORLD_H

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace autopar::runtime {

/// This process's place among the launched processes.
struct WorldInfo {
  int64_t rank = 0;
  int64_t size = 1;
  /// Which variables it came from
  /// ("OMPI_COMM_WORLD_SIZE/OMPI_COMM_WORLD_RANK"), or "no launcher" for a
  /// plain single process.
  std::string source = "no launcher";
};

/// Looks up an environment variable; nullptr when unset.
using EnvLookup = std::function<const char *(const char *)>;

/// Reads the world from Open MPI (OMPI_COMM_WORLD_*), PMI (PMI_*, set by MPICH
/// and Intel MPI, and by srun --mpi=pmi2) or an srun step
/// (SLURM_STEP_NUM_TASKS, SLURM_PROCID), in that order; without any of them,
/// a world of one. SLURM_NTASKS alone (an sbatch script, an salloc shell) is
/// not a launch: a world of one. Throws Error if a variable is not a number or
/// the rank is out of range.
WorldInfo detectWorld(const EnvLookup &getEnv);

/// Open MPI (4.1 as Debian builds it, and every 5.x) finds its peers under
/// srun only through Slurm's PMIx plugin; started by srun without it
/// (--mpi=none, often the default, or --mpi=pmi2), its MPI_Init prints a page
/// about rebuilding Open MPI and aborts. For a rank of \p world (more than
/// one) that srun started without a PMIx server (no PMIX_RANK, no
/// OMPI_COMM_WORLD_SIZE), returns the error that says what to do instead;
/// std::nullopt otherwise, or when AUTOPAR_SRUN_PMIX_CHECK=0 (an Open MPI
/// built with Slurm's PMI-1/PMI-2 support). Checked before MPI_Init by
/// MpiEnvironment when autopar-run is built with Open MPI.
std::optional<std::string> srunWithoutPmix(const WorldInfo &world,
                                           const EnvLookup &getEnv);

/// detectWorld on the process environment.
WorldInfo detectWorld();

/// This process's place among the ranks of its node: how each rank picks a
/// GPU (local rank modulo the node's GPUs).
struct NodePlacement {
  int64_t localRank = 0;
  /// Ranks on this node; 0 when the source does not say.
  int64_t localSize = 1;
  /// The variable it came from ("OMPI_COMM_WORLD_LOCAL_RANK"), or how it was
  /// found otherwise ("MPI_COMM_TYPE_SHARED", "single process").
  std::string source = "single process";
};

/// The local rank from Open MPI (OMPI_COMM_WORLD_LOCAL_RANK and _SIZE),
/// MPICH/Hydra (MPI_LOCALRANKID, MPI_LOCALNRANKS) or Slurm (SLURM_LOCALID),
/// in that order; std::nullopt if none is set. Throws Error if a variable is
/// not a number.
std::optional<NodePlacement> detectNodePlacement(const EnvLookup &getEnv);

} // namespace autopar::runtime

#endif // AUTOPAR_RUNTIME_WORLD_H
