/* A stand-in for a compiled stage: y = x @ fc.weight^T + fc.bias, the way a
 * PyTorch Linear layer exports to ONNX (Gemm with transB = 1).
 *
 * Arguments, in the manifest's order:
 *   0: fc.weight  parameter float32 [4, 8]
 *   1: fc.bias    parameter float32 [4]
 *   2: x          input     float32 [2, 8]
 *   3: y          output    float32 [2, 4]
 *
 * Like generated code, it initializes the output, then lets the runtime's
 * matmul kernel accumulate into it, passing the weight as a transposed
 * (column-major) view. The kernel is left undefined here; autopar-run
 * provides it. */
#include <stdint.h>

typedef struct {
  float *allocated;
  float *aligned;
  int64_t offset;
  int64_t sizes[2];
  int64_t strides[2];
} MemRef2;

void _mlir_ciface_autopar_cpu_matmul_f32(MemRef2 *a, MemRef2 *b, MemRef2 *c);

enum { M = 2, K = 8, N = 4 };

void autopar_entry(void **args) {
  float *weight = args[0], *bias = args[1], *x = args[2], *y = args[3];
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j)
      y[i * N + j] = bias[j];
  MemRef2 a = {x, x, 0, {M, K}, {K, 1}};
  MemRef2 b = {weight, weight, 0, {K, N}, {1, K}}; /* weight^T */
  MemRef2 c = {y, y, 0, {M, N}, {N, 1}};
  _mlir_ciface_autopar_cpu_matmul_f32(&a, &b, &c);
}
