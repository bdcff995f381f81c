/* A tensor-parallel stand-in for a compiled stage on a grid of DP x TP ranks
 * (pp 1), as upstream MLIR's shard-partition would emit it for a two-layer
 * MLP in Megatron-LM's layout: the first weight split by columns, the second
 * by rows.
 *
 * Global sizes: batch 8, K = 8, H = 8, N = 4; per rank R = 8 / DP rows of
 * the batch and HB = H / TP hidden columns.
 *
 * Arguments:
 *   0 a      parameter [K, HB]  global [K, H], split tp dim 1 (strided block)
 *   1 b      parameter [HB, N]  global [H, N], split tp dim 0 (contiguous)
 *   2 x      input  [R, K]   split dp dim 0 (the same block on every tp rank)
 *   3 y      output [R, N]   split dp dim 0: all_reduce over tp of
 *                            (x @ a) @ b (replicated over tp)
 *   4 h      output [R, H]   split dp dim 0: all_gather over tp, along dim 1,
 *                            of x @ a (replicated over tp)
 *   5 hp     output [R, HB]  split tp dim 1: this rank's x @ a
 *   6 a_blk  output [K, HB]  split tp dim 1: a as this rank sees it
 *   7 b_blk  output [HB, N]  split tp dim 0: b as this rank sees it
 *
 * The test stores a[k][j] = k * H + j and b[i][n] = 100 + i * N + n in the
 * file; each rank checks that it got its block (autopar_rt_grid_coord) and
 * exits with status 3, naming what is wrong, if not. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

void _mlir_ciface_autopar_cpu_matmul_f32(Desc2 *a, Desc2 *b, Desc2 *c);
void _mlir_ciface_autopar_rt_all_reduce_f32(Unranked *, Unranked *, int64_t);
void _mlir_ciface_autopar_rt_all_gather_f32(Unranked *, Unranked *, int64_t,
                                            int64_t);
int64_t autopar_rt_grid_coord(int64_t axis);

enum { R = 8 / DP, K = 8, H = 8, HB = H / TP, N = 4, AXIS_TP = 1 };

static Desc2 dense(void *data, int64_t rows, int64_t cols) {
  Desc2 d = {data, data, 0, {rows, cols}, {cols, 1}};
  return d;
}

static void check(float got, float expected, const char *what, int i, int j) {
  if (got == expected)
    return;
  fprintf(stderr, "tp_mlp: tp rank %lld: %s[%d][%d] is %g, expected %g\n",
          (long long)autopar_rt_grid_coord(AXIS_TP), what, i, j, got, expected);
  exit(3);
}

void autopar_entry(void **args) {
  float *a = args[0], *b = args[1], *x = args[2], *y = args[3], *h = args[4],
        *hp = args[5], *aBlk = args[6], *bBlk = args[7];
  int64_t t = autopar_rt_grid_coord(AXIS_TP);

  for (int k = 0; k < K; ++k)
    for (int j = 0; j < HB; ++j)
      check(a[k * HB + j], (float)(k * H + t * HB + j), "a", k, j);
  for (int i = 0; i < HB; ++i)
    for (int n = 0; n < N; ++n)
      check(b[i * N + n], (float)(100 + (t * HB + i) * N + n), "b", i, n);
  memcpy(aBlk, a, sizeof(float) * K * HB);
  memcpy(bBlk, b, sizeof(float) * HB * N);

  /* hp = x @ a (this rank's columns of the hidden layer). */
  memset(hp, 0, sizeof(float) * R * HB);
  Desc2 dx = dense(x, R, K), da = dense(a, K, HB), dhp = dense(hp, R, HB);
  _mlir_ciface_autopar_cpu_matmul_f32(&dx, &da, &dhp);

  /* h = all columns, gathered over tp. */
  Desc2 dh = dense(h, R, H);
  Unranked uhp = {2, &dhp}, uh = {2, &dh};
  _mlir_ciface_autopar_rt_all_gather_f32(&uhp, &uh, AXIS_TP, 1);

  /* y = sum over tp of hp @ b (row-parallel), in place. */
  memset(y, 0, sizeof(float) * R * N);
  Desc2 db = dense(b, HB, N), dy = dense(y, R, N);
  _mlir_ciface_autopar_cpu_matmul_f32(&dhp, &db, &dy);
  Unranked uy = {2, &dy};
  _mlir_ciface_autopar_rt_all_reduce_f32(&uy, &uy, AXIS_TP);
}
