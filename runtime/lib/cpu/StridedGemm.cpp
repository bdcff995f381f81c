//===- StridedGemm.cpp - Matrix multiply on strided views -----------------===//

#include "StridedGemm.h"

#include "KernelError.h"
#include "Multiversion.h"
#include "OneDnn.h"
#include "Scratch.h"
#include "ThreadPool.h"

#include "autopar/runtime/MatrixLayout.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <string>

namespace autopar::runtime::cpu {

namespace {

using BlasOperand = MatrixLayout;

BlasOperand classify(const MatrixView &v) {
  return classifyMatrix(v.rows, v.cols, v.rowStride, v.colStride);
}

/// Copies \p v into dense row-major storage at \p out.
AUTOPAR_MULTIVERSION void pack(const MatrixView &v, float *out) {
  // Walk the source along its smaller stride, which is the cache-friendly
  // order for the reads (the writes are sequential either way per row).
  if (std::abs(v.colStride) <= std::abs(v.rowStride)) {
    for (int64_t i = 0; i < v.rows; ++i) {
      const float *row = v.data + i * v.rowStride;
      float *dst = out + i * v.cols;
      for (int64_t j = 0; j < v.cols; ++j)
        dst[j] = row[j * v.colStride];
    }
  } else {
    for (int64_t j = 0; j < v.cols; ++j) {
      const float *col = v.data + j * v.colStride;
      for (int64_t i = 0; i < v.rows; ++i)
        out[i * v.cols + j] = col[i * v.rowStride];
    }
  }
}

/// Copies dense row-major \p in back into view \p v.
AUTOPAR_MULTIVERSION void unpack(const float *in, const MatrixView &v) {
  for (int64_t i = 0; i < v.rows; ++i)
    for (int64_t j = 0; j < v.cols; ++j)
      v.data[i * v.rowStride + j * v.colStride] = in[i * v.cols + j];
}

/// \p v as BLAS sees it: as is, or packed into \p slot.
MatrixView blasReady(const MatrixView &v, ScratchSlot slot,
                     BlasOperand &operand) {
  operand = classify(v);
  if (operand.order != MatrixOrder::None)
    return v;
  float *dense = scratch(slot, static_cast<size_t>(v.rows * v.cols));
  pack(v, dense);
  operand = {MatrixOrder::RowMajor, std::max<int64_t>(v.cols, 1)};
  return {dense, v.rows, v.cols, v.cols, 1};
}

void checkBlasInt(int64_t value, const char *kernel) {
  if (value > std::numeric_limits<blasint>::max())
    kernelFatal(kernel,
                "dimension " + std::to_string(value) +
                    " exceeds what this BLAS supports (" +
                    std::to_string(std::numeric_limits<blasint>::max()) + ")");
}

CBLAS_TRANSPOSE transposeFlag(const BlasOperand &operand) {
  return operand.order == MatrixOrder::RowMajor ? CblasNoTrans : CblasTrans;
}

/// y[0, j] = sum_p x[0, p] * mat[p, j] + beta * y[0, j] with cblas_sgemv, for a
/// product with a single row. sgemm would pack all of `mat` first, which for a
/// weight matrix costs as much again as the whole product. False if BLAS cannot
/// take the views as they are.
bool gemv(const MatrixView &x, const MatrixView &mat, const MatrixView &y,
          float beta, const char *kernel) {
  int64_t k = mat.rows, n = mat.cols;
  int64_t incx = k == 1 ? 1 : x.colStride;
  int64_t incy = n == 1 ? 1 : y.colStride;
  BlasOperand om = classify(mat);
  if (incx < 1 || incy < 1 || om.order == MatrixOrder::None)
    return false;
  for (int64_t value : {k, n, om.ld, incx, incy})
    checkBlasInt(value, kernel);
  // Some BLAS builds scale y by beta = 0 instead of overwriting it, which
  // keeps a NaN that uninitialised memory may hold: clear y explicitly.
  if (beta == 0.0f) {
    for (int64_t j = 0; j < n; ++j)
      y.data[j * incy] = 0.0f;
    beta = 1.0f;
  }
  // A row-major [k, n] matrix needs y = mat^T x; a column-major one is a
  // row-major [n, k] matrix, mat^T, and needs y = (mat^T) x.
  bool rowMajor = om.order == MatrixOrder::RowMajor;
  cblas_sgemv(CblasRowMajor, rowMajor ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(rowMajor ? k : n),
              static_cast<blasint>(rowMajor ? n : k), 1.0f, mat.data,
              static_cast<blasint>(om.ld), x.data, static_cast<blasint>(incx),
              beta, y.data, static_cast<blasint>(incy));
  return true;
}

/// C = op(A) op(B) + beta C with oneDNN's sgemm (OneDnn.h), row-major like
/// cblas_sgemm below, on the kernel threads: C's rows (or columns, when it
/// has more of those) in blocks of 16, each thread one oneDNN call on its
/// blocks with an OpenMP team of one. oneDNN runs the kernels it generates
/// for this CPU (AVX-512 where there is one), where OpenBLAS 0.3.21 runs its
/// AVX2 ones on many AVX-512 CPUs: about twice as fast there. Its own
/// OpenMP threads would be a third pool beside OpenBLAS's and the kernel
/// threads, and on a 2-core VM the pools' waiting took the cores from each
/// other. Each element of C is one thread's full sum over k.
void oneDnnGemm(OneDnnSgemm sgemm, const MatrixView &a, const BlasOperand &oa,
                const MatrixView &b, const BlasOperand &ob, const MatrixView &c,
                const BlasOperand &oc, int64_t m, int64_t n, int64_t k,
                float beta, const char *kernel) {
  bool aRowMajor = oa.order == MatrixOrder::RowMajor;
  bool bRowMajor = ob.order == MatrixOrder::RowMajor;
  bool byRows = m >= n;
  constexpr int64_t Unit = 16;
  int64_t count = byRows ? m : n, units = (count + Unit - 1) / Unit;
  std::atomic<int> failure{0};
  parallelFor(units, Unit * k * (byRows ? n : m), [&](int64_t u0, int64_t u1) {
    // OpenMP's team size is each thread's own setting: set once per thread.
    thread_local bool teamOfOne = (setOneDnnThreads(1), true);
    (void)teamOfOne;
    int64_t lo = u0 * Unit, hi = std::min(count, u1 * Unit);
    // Rows lo..hi of op(A) and C, or columns lo..hi of op(B) and C.
    const float *pa = a.data, *pb = b.data;
    float *pc = c.data;
    int64_t bm = m, bn = n;
    if (byRows) {
      pa += aRowMajor ? lo * oa.ld : lo;
      pc += lo * oc.ld;
      bm = hi - lo;
    } else {
      pb += bRowMajor ? lo : lo * ob.ld;
      pc += lo;
      bn = hi - lo;
    }
    if (int status = sgemm(aRowMajor ? 'N' : 'T', bRowMajor ? 'N' : 'T', bm, bn,
                           k, 1.0f, pa, oa.ld, pb, ob.ld, beta, pc, oc.ld))
      failure = status;
  });
  if (failure)
    kernelFatal(kernel, "oneDNN's sgemm failed (status " +
                            std::to_string(failure.load()) + ") on [" +
                            std::to_string(m) + ", " + std::to_string(k) +
                            "] x [" + std::to_string(k) + ", " +
                            std::to_string(n) +
                            "]; AUTOPAR_CPU_GEMM=openblas runs it on OpenBLAS");
}

} // namespace

void gemm(const MatrixView &a, const MatrixView &b, const MatrixView &c,
          float beta, const char *kernel) {
  int64_t m = c.rows, n = c.cols, k = a.cols;
  if (m == 0 || n == 0)
    return;
  if (k == 0) { // An empty sum: C = beta * C.
    if (beta == 0.0f)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j)
          c.data[i * c.rowStride + j * c.colStride] = 0.0f;
    return;
  }
  if (m == 1 && gemv(a, b, c, beta, kernel))
    return;
  if (n == 1 && // C^T = B^T A^T, where B^T has the single row.
      gemv(b.transposed(), a.transposed(), c.transposed(), beta, kernel))
    return;

  BlasOperand oc = classify(c);
  if (oc.order == MatrixOrder::ColMajor) {
    // C^T = B^T A^T, with C^T row-major.
    gemm(b.transposed(), a.transposed(), c.transposed(), beta, kernel);
    return;
  }
  if (oc.order == MatrixOrder::None) {
    float *dense = scratch(ScratchSlot::GemmC, static_cast<size_t>(m * n));
    if (beta != 0.0f)
      pack(c, dense);
    gemm(a, b, {dense, m, n, n, 1}, beta, kernel);
    unpack(dense, c);
    return;
  }

  BlasOperand oa, ob;
  MatrixView ra = blasReady(a, ScratchSlot::GemmA, oa);
  MatrixView rb = blasReady(b, ScratchSlot::GemmB, ob);
  if (OneDnnSgemm sgemm = oneDnnSgemm()) {
    oneDnnGemm(sgemm, ra, oa, rb, ob, c, oc, m, n, k, beta, kernel);
    return;
  }
  for (int64_t value : {m, n, k, oa.ld, ob.ld, oc.ld})
    checkBlasInt(value, kernel);
  cblas_sgemm(CblasRowMajor, transposeFlag(oa), transposeFlag(ob),
              static_cast<blasint>(m), static_cast<blasint>(n),
              static_cast<blasint>(k), 1.0f, ra.data,
              static_cast<blasint>(oa.ld), rb.data, static_cast<blasint>(ob.ld),
              beta, c.data, static_cast<blasint>(oc.ld));
}

} // namespace autopar::runtime::cpu
