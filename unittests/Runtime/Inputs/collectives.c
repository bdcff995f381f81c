/* A stage that calls every collective entry point the way generated code
 * does (MLIR's C interface, unranked memrefs), on RANKS ranks of a dp-only
 * grid. The test compares its outputs with references computed from the
 * global input on one process.
 *
 * Arguments (R = 8 / RANKS rows per rank, C = 8 columns):
 *   0 x        input  float32 [R, C]  split dp dim 0 (global [8, 8])
 *   1 ids      input  int64   [R, C]  split dp dim 0 (global [8, 8])
 *   2 col      input  float32 [8, C / RANKS]  split dp dim 1 (global [8, 8])
 *   3 sum      output float32 [R, C]          all_reduce (sum) of x
 *   4 max      output float32 [R, C]          all_reduce_max of x
 *   5 sum_t    output float32 [C, R]          all_reduce of x^T, a strided view
 *   6 cat0     output float32 [8, C]          all_gather of x along dim 0
 *   7 cat1     output float32 [R, C * RANKS] all_gather of x along dim 1
 *   8 part     output float32 [R, C / RANKS]  split dp dim 1: reduce_scatter
 *                                             of x along dim 1
 *   9 a2a      output float32 [8, C / RANKS]  split dp dim 1: all_to_all of x,
 *                                             split dim 1, concat dim 0
 *  10 bcast    output float32 [R, C]          x of the last rank, broadcast
 *  11 ring     output float32 [R, C]  split dp dim 0: x of the previous rank,
 *                                             by send/recv (x itself if alone)
 *  12 ids_sum  output int64   [R, C]          all_reduce of ids
 *  13 col_cat  output float32 [8, C]          all_gather of col along dim 1
 * Outputs without a split are written from rank 0. */
#include <stdint.h>
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

#define DECLARE(T)                                                             \
  void _mlir_ciface_autopar_rt_all_reduce_##T(Unranked *, Unranked *,          \
                                              int64_t);                        \
  void _mlir_ciface_autopar_rt_all_reduce_max_##T(Unranked *, Unranked *,      \
                                                  int64_t);                    \
  void _mlir_ciface_autopar_rt_all_gather_##T(Unranked *, Unranked *, int64_t, \
                                              int64_t);                        \
  void _mlir_ciface_autopar_rt_reduce_scatter_##T(Unranked *, Unranked *,      \
                                                  int64_t, int64_t);           \
  void _mlir_ciface_autopar_rt_all_to_all_##T(Unranked *, Unranked *, int64_t, \
                                              int64_t, int64_t);               \
  void _mlir_ciface_autopar_rt_broadcast_##T(Unranked *, int64_t, int64_t);    \
  void _mlir_ciface_autopar_rt_send_##T(Unranked *, int64_t, int64_t);         \
  void _mlir_ciface_autopar_rt_recv_##T(Unranked *, int64_t, int64_t);
DECLARE(f32)
DECLARE(i64)

enum { P = RANKS, R = 8 / RANKS, C = 8, DP = 0 };

/* A dense row-major [rows, cols] memref of data. */
static Desc2 dense(void *data, int64_t rows, int64_t cols) {
  Desc2 d = {data, data, 0, {rows, cols}, {cols, 1}};
  return d;
}

static int myRank(void) {
  const char *text = getenv("OMPI_COMM_WORLD_RANK");
  return text ? atoi(text) : 0;
}

void autopar_entry(void **args) {
  float *x = args[0];
  int64_t *ids = args[1];
  Desc2 dx = dense(x, R, C), dids = dense(ids, R, C);
  Unranked ux = {2, &dx}, uids = {2, &dids};

  Desc2 dsum = dense(args[3], R, C), dmax = dense(args[4], R, C);
  Unranked usum = {2, &dsum}, umax = {2, &dmax};
  _mlir_ciface_autopar_rt_all_reduce_f32(&ux, &usum, DP);
  _mlir_ciface_autopar_rt_all_reduce_max_f32(&ux, &umax, DP);

  /* x^T as a view: sizes [C, R], strides [1, C]. */
  Desc2 dxt = {x, x, 0, {C, R}, {1, C}};
  Desc2 dsumt = dense(args[5], C, R);
  Unranked uxt = {2, &dxt}, usumt = {2, &dsumt};
  _mlir_ciface_autopar_rt_all_reduce_f32(&uxt, &usumt, DP);

  Desc2 dcat0 = dense(args[6], R * P, C), dcat1 = dense(args[7], R, C * P);
  Unranked ucat0 = {2, &dcat0}, ucat1 = {2, &dcat1};
  _mlir_ciface_autopar_rt_all_gather_f32(&ux, &ucat0, DP, 0);
  _mlir_ciface_autopar_rt_all_gather_f32(&ux, &ucat1, DP, 1);

  Desc2 dpart = dense(args[8], R, C / P);
  Unranked upart = {2, &dpart};
  _mlir_ciface_autopar_rt_reduce_scatter_f32(&ux, &upart, DP, 1);

  Desc2 da2a = dense(args[9], R * P, C / P);
  Unranked ua2a = {2, &da2a};
  _mlir_ciface_autopar_rt_all_to_all_f32(&ux, &ua2a, DP, 1, 0);

  float *bcast = args[10];
  memcpy(bcast, x, sizeof(float) * R * C);
  Desc2 dbcast = dense(bcast, R, C);
  Unranked ubcast = {2, &dbcast};
  _mlir_ciface_autopar_rt_broadcast_f32(&ubcast, DP, P - 1);

  float *ring = args[11];
  Desc2 dring = dense(ring, R, C);
  Unranked uring = {2, &dring};
  int rank = myRank();
  if (P == 1) {
    memcpy(ring, x, sizeof(float) * R * C);
  } else if (rank % 2 == 0) {
    _mlir_ciface_autopar_rt_send_f32(&ux, (rank + 1) % P, DP);
    _mlir_ciface_autopar_rt_recv_f32(&uring, (rank + P - 1) % P, DP);
  } else {
    _mlir_ciface_autopar_rt_recv_f32(&uring, (rank + P - 1) % P, DP);
    _mlir_ciface_autopar_rt_send_f32(&ux, (rank + 1) % P, DP);
  }

  Desc2 didsum = dense(args[12], R, C);
  Unranked uidsum = {2, &didsum};
  _mlir_ciface_autopar_rt_all_reduce_i64(&uids, &uidsum, DP);

  Desc2 dcol = dense(args[2], 8, C / P), dcolcat = dense(args[13], 8, C);
  Unranked ucol = {2, &dcol}, ucolcat = {2, &dcolcat};
  _mlir_ciface_autopar_rt_all_gather_f32(&ucol, &ucolcat, DP, 1);
}
