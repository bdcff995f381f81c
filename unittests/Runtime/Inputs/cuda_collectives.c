/* A cuda stage that calls collective entry points on device buffers only
 * (runs on a real GPU: CudaDeviceTest), on RANKS ranks of a dp grid.
 *
 * Arguments (R = 8 / RANKS rows per rank, C = 8):
 *   0 x     input  float32  [R, C]        split dp dim 0
 *   1 xb    input  bfloat16 [R, C]        split dp dim 0
 *   2 sum   output float32  [R, C]        all_reduce of x
 *   3 cat0  output float32  [8, C]        all_gather of x along dim 0
 *   4 cat1  output float32  [R, C*RANKS]  all_gather of x along dim 1
 *                                         (blocks strided in the output)
 *   5 sumb  output bfloat16 [R, C]        all_reduce of xb (16-bit floats)
 *   6 sumt  output float32  [C, R]        all_reduce into a transposed view
 */
#include <stdint.h>

enum { P = RANKS, R = 8 / RANKS, C = 8, DP = 0 };

typedef struct {
  void *allocated, *aligned;
  int64_t offset, sizes[2], strides[2];
} Desc2;
typedef struct {
  int64_t rank;
  void *descriptor;
} Unranked;

void _mlir_ciface_autopar_rt_all_reduce_f32(Unranked *, Unranked *, int64_t);
void _mlir_ciface_autopar_rt_all_reduce_bf16(Unranked *, Unranked *, int64_t);
void _mlir_ciface_autopar_rt_all_gather_f32(Unranked *, Unranked *, int64_t,
                                            int64_t);

static Desc2 dense(void *data, int64_t rows, int64_t cols) {
  Desc2 d = {data, data, 0, {rows, cols}, {cols, 1}};
  return d;
}

void autopar_entry(void **args) {
  Desc2 dx = dense(args[0], R, C), dxb = dense(args[1], R, C);
  Unranked ux = {2, &dx}, uxb = {2, &dxb};
  Desc2 dsum = dense(args[2], R, C), dcat0 = dense(args[3], R * P, C);
  Desc2 dcat1 = dense(args[4], R, C * P), dsumb = dense(args[5], R, C);
  Desc2 dsumt = {args[6], args[6], 0, {R, C}, {1, R}};
  Unranked usum = {2, &dsum}, ucat0 = {2, &dcat0}, ucat1 = {2, &dcat1};
  Unranked usumb = {2, &dsumb}, usumt = {2, &dsumt};
  _mlir_ciface_autopar_rt_all_reduce_f32(&ux, &usum, DP);
  _mlir_ciface_autopar_rt_all_gather_f32(&ux, &ucat0, DP, 0);
  _mlir_ciface_autopar_rt_all_gather_f32(&ux, &ucat1, DP, 1);
  _mlir_ciface_autopar_rt_all_reduce_bf16(&uxb, &usumb, DP);
  _mlir_ciface_autopar_rt_all_reduce_f32(&ux, &usumt, DP);
}
