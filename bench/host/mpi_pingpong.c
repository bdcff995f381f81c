/* MPI ping-pong between ranks 0 and 1: the one-way latency of a small
 * message and the bandwidth of a large one through Open MPI's shared-memory
 * transport, which the local:N cluster model uses as its intra-node link
 * (lib/Target/LocalCluster.cpp: kShmGBytesPerS, kShmLatencyUs).
 * Prints "latency_us L" (8 B, median of 2000 round trips / 2) and
 * "bandwidth_gbytes_per_s B" (4 MiB, best of 50 round trips). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return a < b ? -1 : a > b;
}

static double roundTrip(int rank, char *buf, int bytes) {
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  if (rank == 0) {
    MPI_Send(buf, bytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
    MPI_Recv(buf, bytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else if (rank == 1) {
    MPI_Recv(buf, bytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Send(buf, bytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
  }
  return MPI_Wtime() - t0;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2) {
    if (rank == 0)
      fprintf(stderr, "mpi_pingpong: run with exactly 2 ranks (got %d)\n", size);
    MPI_Finalize();
    return 1;
  }
  enum { Small = 8, Large = 4 << 20, SmallReps = 2000, LargeReps = 50 };
  char *buf = calloc(Large, 1);
  double *t = malloc(SmallReps * sizeof(double));
  for (int i = 0; i < 100; ++i) /* warm-up */
    roundTrip(rank, buf, Small);
  for (int i = 0; i < SmallReps; ++i)
    t[i] = roundTrip(rank, buf, Small);
  qsort(t, SmallReps, sizeof(double), cmp);
  double latency = t[SmallReps / 2] / 2;
  double best = 1e30;
  for (int i = 0; i < LargeReps; ++i) {
    double x = roundTrip(rank, buf, Large);
    if (x < best)
      best = x;
  }
  if (rank == 0) {
    printf("latency_us %.3f\n", latency * 1e6);
    printf("bandwidth_gbytes_per_s %.3f\n", 2.0 * Large / best / 1e9);
  }
  free(buf);
  free(t);
  MPI_Finalize();
  return 0;
}
