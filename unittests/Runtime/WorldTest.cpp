//===- WorldTest.cpp - Rank and world size from launcher variables --------===//

#include "autopar/runtime/World.h"
#include "autopar/runtime/Error.h"

#include "gtest/gtest.h"

#include <map>
#include <string>

using namespace autopar::runtime;

namespace {

WorldInfo detect(const std::map<std::string, std::string> &env) {
  return detectWorld([&](const char *name) -> const char * {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(WorldTest, NoLauncherIsAWorldOfOne) {
  WorldInfo world = detect({});
  EXPECT_EQ(world.size, 1);
  EXPECT_EQ(world.rank, 0);
  EXPECT_EQ(world.source, "no launcher");
}

TEST(WorldTest, ReadsEachLauncher) {
  WorldInfo ompi =
      detect({{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "3"}});
  EXPECT_EQ(ompi.size, 4);
  EXPECT_EQ(ompi.rank, 3);
  EXPECT_EQ(ompi.source, "OMPI_COMM_WORLD_SIZE/OMPI_COMM_WORLD_RANK");

  WorldInfo pmi = detect({{"PMI_SIZE", "2"}, {"PMI_RANK", "1"}});
  EXPECT_EQ(pmi.size, 2);
  EXPECT_EQ(pmi.rank, 1);

  WorldInfo slurm = detect({{"SLURM_NTASKS", "16"},
                            {"SLURM_STEP_NUM_TASKS", "16"},
                            {"SLURM_PROCID", "5"}});
  EXPECT_EQ(slurm.size, 16);
  EXPECT_EQ(slurm.rank, 5);
  EXPECT_EQ(slurm.source, "SLURM_STEP_NUM_TASKS/SLURM_PROCID");
}

TEST(WorldTest, AnSbatchScriptIsOneProcess) {
  // `sbatch -n 2` runs its script once, with the allocation's SLURM_NTASKS
  // and SLURM_PROCID=0 but no step: autopar-run started there without srun
  // or mpirun is a world of one (not rank 0 of 2, waiting for a peer).
  WorldInfo world = detect({{"SLURM_NTASKS", "2"},
                            {"SLURM_NPROCS", "2"},
                            {"SLURM_PROCID", "0"},
                            {"SLURM_LOCALID", "0"},
                            {"SLURM_JOB_ID", "19"}});
  EXPECT_EQ(world.size, 1);
  EXPECT_EQ(world.rank, 0);
  EXPECT_EQ(world.source, "no launcher");
}

TEST(WorldTest, PrefersMpiAndTheSlurmStep) {
  // mpirun inside a Slurm allocation: the MPI world is what counts.
  WorldInfo world = detect({{"SLURM_NTASKS", "8"},
                            {"SLURM_PROCID", "0"},
                            {"OMPI_COMM_WORLD_SIZE", "2"},
                            {"OMPI_COMM_WORLD_RANK", "1"}});
  EXPECT_EQ(world.size, 2);
  // srun of a smaller step inside a bigger allocation.
  world = detect({{"SLURM_NTASKS", "8"},
                  {"SLURM_STEP_NUM_TASKS", "4"},
                  {"SLURM_PROCID", "2"}});
  EXPECT_EQ(world.size, 4);
  EXPECT_EQ(world.rank, 2);
}

TEST(WorldTest, RejectsGarbage) {
  EXPECT_THROW(detect({{"PMI_SIZE", "two"}}), Error);
  EXPECT_THROW(detect({{"PMI_SIZE", "2x"}}), Error);
  EXPECT_THROW(detect({{"PMI_SIZE", "-2"}}), Error);
  EXPECT_THROW(detect({{"PMI_SIZE", "2"}, {"PMI_RANK", "2"}}), Error);
  EXPECT_THROW(detect({{"PMI_SIZE", "0"}}), Error);
  try {
    detect({{"OMPI_COMM_WORLD_SIZE", ""}});
    FAIL();
  } catch (const Error &error) {
    EXPECT_NE(std::string(error.what()).find("OMPI_COMM_WORLD_SIZE=''"),
              std::string::npos);
  }
}

std::optional<std::string>
pmixError(const std::map<std::string, std::string> &env) {
  EnvLookup getEnv = [&](const char *name) -> const char * {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  return srunWithoutPmix(detectWorld(getEnv), getEnv);
}

TEST(WorldTest, SrunWithoutPmixIsNamedBeforeMpiInit) {
  // What srun -n 2 puts in each task's environment (Slurm 22.05).
  std::map<std::string, std::string> step = {{"SLURM_STEP_NUM_TASKS", "2"},
                                             {"SLURM_NTASKS", "2"},
                                             {"SLURM_PROCID", "1"},
                                             {"SLURM_STEP_ID", "0"}};
  // --mpi=none (Slurm's default MpiDefault): no PMI at all.
  std::optional<std::string> error = pmixError(step);
  ASSERT_TRUE(error);
  EXPECT_NE(error->find("srun started this rank without an MPI plugin "
                        "(--mpi=none)"),
            std::string::npos)
      << *error;
  EXPECT_NE(error->find("launch with srun --mpi=pmix"), std::string::npos)
      << *error;

  // --mpi=pmi2: PMI_SIZE/PMI_RANK give the world, but Open MPI wants PMIx.
  std::map<std::string, std::string> pmi2 = step;
  pmi2.insert({{"SLURM_MPI_TYPE", "pmi2"},
               {"PMI_SIZE", "2"},
               {"PMI_RANK", "1"},
               {"PMI_FD", "5"}});
  error = pmixError(pmi2);
  ASSERT_TRUE(error);
  EXPECT_NE(error->find("srun started this rank with --mpi=pmi2"),
            std::string::npos)
      << *error;

  // --mpi=pmix: fine.
  std::map<std::string, std::string> pmix = step;
  pmix.insert({{"SLURM_MPI_TYPE", "pmix"}, {"PMIX_RANK", "1"}});
  EXPECT_FALSE(pmixError(pmix));

  // The check can be turned off (an Open MPI built with Slurm's PMI-2).
  pmi2["AUTOPAR_SRUN_PMIX_CHECK"] = "0";
  EXPECT_FALSE(pmixError(pmi2));
}

TEST(WorldTest, OnlySrunStepsOfSeveralRanksNeedPmix) {
  // One task needs no MPI at all.
  EXPECT_FALSE(
      pmixError({{"SLURM_STEP_NUM_TASKS", "1"}, {"SLURM_PROCID", "0"}}));
  // mpirun inside an allocation (or inside a one-task srun step).
  EXPECT_FALSE(pmixError({{"SLURM_STEP_NUM_TASKS", "1"},
                          {"SLURM_PROCID", "0"},
                          {"OMPI_COMM_WORLD_SIZE", "4"},
                          {"OMPI_COMM_WORLD_RANK", "2"}}));
  // mpiexec of another MPI outside Slurm.
  EXPECT_FALSE(pmixError({{"PMI_SIZE", "2"}, {"PMI_RANK", "0"}}));
  // An sbatch script: no step.
  EXPECT_FALSE(pmixError({{"SLURM_NTASKS", "4"}, {"SLURM_PROCID", "0"}}));
}

std::optional<NodePlacement>
detectNode(const std::map<std::string, std::string> &env) {
  return detectNodePlacement([&](const char *name) -> const char * {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(WorldTest, ReadsTheLocalRankOfEachLauncher) {
  EXPECT_FALSE(detectNode({}));
  std::optional<NodePlacement> ompi =
      detectNode({{"OMPI_COMM_WORLD_LOCAL_RANK", "3"},
                  {"OMPI_COMM_WORLD_LOCAL_SIZE", "8"},
                  {"SLURM_LOCALID", "1"}});
  ASSERT_TRUE(ompi);
  EXPECT_EQ(ompi->localRank, 3);
  EXPECT_EQ(ompi->localSize, 8);
  EXPECT_EQ(ompi->source, "OMPI_COMM_WORLD_LOCAL_RANK");

  std::optional<NodePlacement> hydra =
      detectNode({{"MPI_LOCALRANKID", "1"}, {"MPI_LOCALNRANKS", "2"}});
  ASSERT_TRUE(hydra);
  EXPECT_EQ(hydra->localRank, 1);
  EXPECT_EQ(hydra->localSize, 2);

  // Slurm does not say how many share the node.
  std::optional<NodePlacement> slurm = detectNode({{"SLURM_LOCALID", "5"}});
  ASSERT_TRUE(slurm);
  EXPECT_EQ(slurm->localRank, 5);
  EXPECT_EQ(slurm->localSize, 0);
  EXPECT_EQ(slurm->source, "SLURM_LOCALID");

  EXPECT_THROW(detectNode({{"SLURM_LOCALID", "x"}}), Error);
}

} // namespace
