/* A data-parallel stage that fails on purpose, for the fault tests:
 * y = all_reduce(x) over dp, x and y [2, 8] float32.
 *
 * If AUTOPAR_TEST_FAULT_RANK names this rank (OMPI_COMM_WORLD_RANK under
 * mpirun, SLURM_PROCID under srun), then
 * before the all_reduce it
 *   AUTOPAR_TEST_FAULT=hang:  sleeps for an hour (a rank that hangs),
 *   AUTOPAR_TEST_FAULT=kill:  raise(SIGKILL)  (a rank that dies silently),
 * while the other ranks wait for it in the all_reduce. If
 * AUTOPAR_TEST_PID_DIR is set, every rank first writes its process id to
 * AUTOPAR_TEST_PID_DIR/<rank>.pid, so that the test can check that none
 * survives. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
  void *allocated;
  void *aligned;
  int64_t offset;
  int64_t sizes[2];
  int64_t strides[2];
} Desc2;

typedef struct {
  int64_t rank;
  void *descriptor;
} Unranked;

void _mlir_ciface_autopar_rt_all_reduce_f32(Unranked *, Unranked *, int64_t);

void autopar_entry(void **args) {
  const char *rankText = getenv("OMPI_COMM_WORLD_RANK");
  if (!rankText)
    rankText = getenv("SLURM_PROCID"); /* srun sets no OMPI_COMM_WORLD_RANK */
  int rank = rankText ? atoi(rankText) : 0;
  const char *pidDir = getenv("AUTOPAR_TEST_PID_DIR");
  if (pidDir) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/%d.pid", pidDir, rank);
    FILE *file = fopen(path, "w");
    if (file) {
      fprintf(file, "%d\n", (int)getpid());
      fclose(file);
    }
  }
  const char *faultRank = getenv("AUTOPAR_TEST_FAULT_RANK");
  const char *fault = getenv("AUTOPAR_TEST_FAULT");
  if (fault && faultRank && atoi(faultRank) == rank) {
    if (strcmp(fault, "hang") == 0)
      sleep(3600);
    else if (strcmp(fault, "kill") == 0)
      raise(SIGKILL);
  }
  Desc2 dx = {args[0], args[0], 0, {2, 8}, {8, 1}};
  Desc2 dy = {args[1], args[1], 0, {2, 8}, {8, 1}};
  Unranked ux = {2, &dx}, uy = {2, &dy};
  _mlir_ciface_autopar_rt_all_reduce_f32(&ux, &uy, 0);
}
