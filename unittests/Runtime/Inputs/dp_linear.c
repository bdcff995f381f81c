/* The data-parallel stand-in for a compiled stage: linear_add.c's
 * y = x @ fc.weight^T + fc.bias on this rank's ROWS rows of the batch.
 * Built once per world size (ROWS = 8 / ranks), as the compiler would emit
 * one program per plan.
 *
 * Arguments: fc.weight [4, 8], fc.bias [4] (parameters, whole on every rank),
 * x [ROWS, 8] (input, split over dp along dim 0),
 * y [ROWS, 4] (output, split over dp along dim 0). */
#include <stdint.h>

typedef struct {
  float *allocated;
  float *aligned;
  int64_t offset;
  int64_t sizes[2];
  int64_t strides[2];
} MemRef2;

void _mlir_ciface_autopar_cpu_matmul_f32(MemRef2 *a, MemRef2 *b, MemRef2 *c);

enum { M = ROWS, K = 8, N = 4 };

void autopar_entry(void **args) {
  float *weight = args[0], *bias = args[1], *x = args[2], *y = args[3];
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j)
      y[i * N + j] = bias[j];
  MemRef2 a = {x, x, 0, {M, K}, {K, 1}};
  MemRef2 b = {weight, weight, 0, {K, N}, {1, K}};
  MemRef2 c = {y, y, 0, {M, N}, {N, 1}};
  _mlir_ciface_autopar_cpu_matmul_f32(&a, &b, &c);
}
