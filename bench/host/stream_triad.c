/* STREAM-style triad (a[i] = b[i] + s * c[i]) on one thread: the memory
 * bandwidth one core sustains, which the local:N cluster model
 * (lib/Target/LocalCluster.cpp) multiplies by the cores a rank owns.
 * Arrays of 3 x 64 MiB (well past the caches); the best of 10 passes, bytes
 * counted as STREAM does (2 reads + 1 write per element).
 * Usage: stream_triad [MiB per array]  -> prints "triad_gbytes_per_s G" */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  size_t mib = argc > 1 ? (size_t)atol(argv[1]) : 64;
  size_t n = mib * 1024 * 1024 / sizeof(double);
  double *a = malloc(n * sizeof(double)), *b = malloc(n * sizeof(double)),
         *c = malloc(n * sizeof(double));
  if (!a || !b || !c) {
    fprintf(stderr, "stream_triad: cannot allocate 3 x %zu MiB\n", mib);
    return 1;
  }
  for (size_t i = 0; i < n; ++i) {
    a[i] = 0;
    b[i] = 1.0 + (double)(i % 7);
    c[i] = 2.0;
  }
  double best = 1e30, s = 3.0;
  for (int pass = 0; pass < 10; ++pass) {
    double t0 = now();
    for (size_t i = 0; i < n; ++i)
      a[i] = b[i] + s * c[i];
    double t = now() - t0;
    if (t < best)
      best = t;
  }
  /* Use the result so the loop is not optimized away. */
  double check = 0;
  for (size_t i = 0; i < n; i += 4096)
    check += a[i];
  printf("triad_gbytes_per_s %.3f\n", 3.0 * n * sizeof(double) / best / 1e9);
  fprintf(stderr, "checksum %g\n", check);
  free(a);
  free(b);
  free(c);
  return 0;
}
