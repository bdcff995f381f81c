/* A stand-in for a compiled cuda stage, for the fake driver
 * (fake_cuda_driver.cpp): like MLIR's lowering, it loads its GPU module in a
 * constructor (mgpuModuleLoad), and its entry allocates a temporary
 * (mgpuMemAlloc), copies into it (mgpuMemcpy), launches a kernel on the
 * stream of mgpuStreamCreate and frees the temporary. Under the fake driver
 * a "kernel" is a host function, and device memory is host memory.
 *
 * Arguments (N elements each):
 *   0 w  parameter bfloat16 [N]  (converted from a float32 source)
 *   1 b  parameter float32  [N]
 *   2 x  input     float32  [N]
 *   3 y  output    float32  [N]   y = float(w) * x + b
 *
 * -DBAD_IMAGE embeds a module the driver refuses; -DMATMUL_MISMATCH calls
 * the GPU GEMM with operands whose sizes do not agree. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum { N = 4 };

typedef struct {
  const char *name;
  void (*run)(void **params);
} FakeKernel;
typedef struct {
  char magic[16];
  const FakeKernel *kernels;
} FakeModule;

void *mgpuModuleLoad(void *data, size_t size);
void *mgpuModuleGetFunction(void *module, const char *name);
void mgpuLaunchKernel(void *function, intptr_t gx, intptr_t gy, intptr_t gz,
                      intptr_t bx, intptr_t by, intptr_t bz, int32_t smem,
                      void *stream, void **params, void **extra,
                      size_t paramsCount);
void *mgpuStreamCreate(void);
void mgpuStreamSynchronize(void *stream);
void mgpuStreamDestroy(void *stream);
void *mgpuMemAlloc(uint64_t bytes, void *stream, _Bool hostShared);
void mgpuMemFree(void *ptr, void *stream);
void mgpuMemcpy(void *dst, void *src, size_t bytes, void *stream);

static void axpy(void **params) {
  const uint16_t *w = *(const uint16_t **)params[0];
  const float *b = *(const float **)params[1];
  const float *x = *(const float **)params[2];
  float *y = *(float **)params[3];
  for (int i = 0; i < N; ++i) {
    uint32_t bits = (uint32_t)w[i] << 16;
    float weight;
    memcpy(&weight, &bits, sizeof(weight));
    y[i] = weight * x[i] + b[i];
  }
}

static const FakeKernel kernels[] = {{"axpy", axpy}, {NULL, NULL}};
#ifdef BAD_IMAGE
static const FakeModule image = {"not-a-cubin", kernels};
#else
static const FakeModule image = {"fake-cubin", kernels};
#endif
static void *module;

__attribute__((constructor)) static void loadModule(void) {
  module = mgpuModuleLoad((void *)&image, sizeof(image));
}

#ifdef MATMUL_MISMATCH
typedef struct {
  void *allocated, *aligned;
  int64_t offset, sizes[2], strides[2];
} Desc2;
void _mlir_ciface_autopar_cuda_matmul_f32_f32(Desc2 *, Desc2 *, Desc2 *);
#endif

void autopar_entry(void **args) {
  void *stream = mgpuStreamCreate();
  float *x = mgpuMemAlloc(N * sizeof(float), stream, 0);
  mgpuMemcpy(x, args[2], N * sizeof(float), stream);
  void *function = mgpuModuleGetFunction(module, "axpy");
  void *params[] = {&args[0], &args[1], &x, &args[3]};
  mgpuLaunchKernel(function, 1, 1, 1, N, 1, 1, 0, stream, params, NULL, 4);
#ifdef MATMUL_MISMATCH
  Desc2 a = {args[2], args[2], 0, {2, 2}, {2, 1}};
  Desc2 b = {args[1], args[1], 0, {3, 2}, {2, 1}};
  _mlir_ciface_autopar_cuda_matmul_f32_f32(&a, &b, &a);
#endif
  mgpuMemFree(x, stream);
  mgpuStreamSynchronize(stream);
  mgpuStreamDestroy(stream);
}
