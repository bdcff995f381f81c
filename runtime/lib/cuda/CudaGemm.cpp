//===- CudaGemm.cpp - C += A * B with cuBLASLt ----------------------------===//
//
// Each distinct problem (types, transposes, sizes, leading dimensions, batch
// strides, pointer alignments) is described to cuBLASLt once: its matmul
// descriptor, layouts and the heuristic's algorithm are cached, so that a
// step's GEMMs after the first cost one cublasLtMatmul call each.
//
//===----------------------------------------------------------------------===//

#include "autopar/runtime/cuda/CudaKernels.h"

#include "CudaDevice.h"

#include "autopar/runtime/Error.h"
#include "autopar/runtime/cuda/GemmPlan.h"

#include <cublasLt.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdlib>
#include <exception>
#include <unordered_map>
#include <vector>

using namespace autopar::runtime;
using namespace autopar::runtime::cuda;

namespace {

/// The element types of one kernel family.
struct GemmTypes {
  cudaDataType_t ab, c;
  size_t abSize, cSize;
};

constexpr GemmTypes F32F32{CUDA_R_32F, CUDA_R_32F, 4, 4};
constexpr GemmTypes Bf16F32{CUDA_R_16BF, CUDA_R_32F, 2, 4};
constexpr GemmTypes Bf16Bf16{CUDA_R_16BF, CUDA_R_16BF, 2, 2};
constexpr GemmTypes F16F32{CUDA_R_16F, CUDA_R_32F, 2, 4};
constexpr GemmTypes F16F16{CUDA_R_16F, CUDA_R_16F, 2, 2};

void checkBlas(cublasStatus_t status, const char *call) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw Error(std::string(call) +
                " failed: " + cublasLtGetStatusString(status) + " (" +
                cublasLtGetStatusName(status) + ")");
}

/// The largest power of two (at most 256) that divides \p value.
uint32_t powerOfTwoIn(uint64_t value) {
  uint64_t lowest = value & (~value + 1);
  return value == 0 ? 256u
                    : static_cast<uint32_t>(std::min<uint64_t>(lowest, 256));
}

/// What cuBLASLt may assume of the alignment of every matrix of \p m: its
/// address, and with several batches the byte offset between them.
uint32_t alignmentOf(const StoredMatrix &m, int64_t batch, size_t elementSize) {
  uint32_t alignment = powerOfTwoIn(reinterpret_cast<uintptr_t>(m.data));
  if (batch > 1)
    alignment =
        std::min(alignment, powerOfTwoIn(static_cast<uint64_t>(m.batchStride) *
                                         elementSize));
  return alignment;
}

/// Everything that makes two GEMMs the same problem for cuBLASLt.
struct GemmKey {
  const GemmTypes *types;
  bool transX, transY;
  int64_t m, n, k, batch;
  int64_t ldx, ldy, ldd, strideX, strideY, strideD;
  uint32_t alignX, alignY, alignD;

  /// The fields as one array, for comparing and hashing.
  std::array<int64_t, 16> values() const {
    return {reinterpret_cast<intptr_t>(types),
            transX,
            transY,
            m,
            n,
            k,
            batch,
            ldx,
            ldy,
            ldd,
            strideX,
            strideY,
            strideD,
            alignX,
            alignY,
            alignD};
  }
  bool operator==(const GemmKey &other) const {
    return values() == other.values();
  }
};

struct GemmKeyHash {
  size_t operator()(const GemmKey &key) const {
    size_t hash = 1469598103934665603ull; // FNV-1a over the fields
    for (int64_t value : key.values())
      hash = (hash ^ static_cast<size_t>(value)) * 1099511628211ull;
    return hash;
  }
};

/// What cuBLASLt needs to run one problem.
class GemmRecipe {
public:
  GemmRecipe(cublasLtHandle_t handle, const GemmKey &key, size_t workspace) {
    checkBlas(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
              "cublasLtMatmulDescCreate");
    cublasOperation_t opX = key.transX ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opY = key.transY ? CUBLAS_OP_T : CUBLAS_OP_N;
    setDesc(CUBLASLT_MATMUL_DESC_TRANSA, opX);
    setDesc(CUBLASLT_MATMUL_DESC_TRANSB, opY);
    x = layout(key.types->ab, key.transX ? key.k : key.m,
               key.transX ? key.m : key.k, key.ldx, key.batch, key.strideX);
    y = layout(key.types->ab, key.transY ? key.n : key.k,
               key.transY ? key.k : key.n, key.ldy, key.batch, key.strideY);
    d = layout(key.types->c, key.m, key.n, key.ldd, key.batch, key.strideD);

    cublasLtMatmulPreference_t preference = nullptr;
    checkBlas(cublasLtMatmulPreferenceCreate(&preference),
              "cublasLtMatmulPreferenceCreate");
    auto setPreference = [&](cublasLtMatmulPreferenceAttributes_t attribute,
                             const auto &value) {
      checkBlas(cublasLtMatmulPreferenceSetAttribute(preference, attribute,
                                                     &value, sizeof(value)),
                "cublasLtMatmulPreferenceSetAttribute");
    };
    uint64_t workspaceBytes = workspace;
    setPreference(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, workspaceBytes);
    // Views into a buffer need not be 256-byte aligned, which cuBLASLt
    // otherwise assumes.
    setPreference(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.alignX);
    setPreference(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.alignY);
    setPreference(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.alignD);
    setPreference(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.alignD);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
        handle, desc, x, y, d, d, preference, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(preference);
    checkBlas(status, "cublasLtMatmulAlgoGetHeuristic");
    if (found == 0)
      throw Error("cuBLASLt has no algorithm for this GEMM (m " +
                  std::to_string(key.m) + ", n " + std::to_string(key.n) +
                  ", k " + std::to_string(key.k) + ", batch " +
                  std::to_string(key.batch) + ")");
    algo = result.algo;
  }

  ~GemmRecipe() {
    for (cublasLtMatrixLayout_t layout : {x, y, d})
      if (layout)
        cublasLtMatrixLayoutDestroy(layout);
    if (desc)
      cublasLtMatmulDescDestroy(desc);
  }
  GemmRecipe(const GemmRecipe &) = delete;
  GemmRecipe &operator=(const GemmRecipe &) = delete;

  /// C += A * B (alpha 1, beta 1, D in place of C), or C = A * B (beta 0:
  /// the compiler's overwrite kernels, whose output needs no zero fill).
  void run(CudaDevice &device, const ColumnMajorGemm &gemm,
           bool accumulate) const {
    const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    size_t workspaceBytes = 0;
    void *workspace = device.gemmWorkspace(workspaceBytes);
    checkBlas(cublasLtMatmul(device.blas(), desc, &one, gemm.x.data, x,
                             gemm.y.data, y, &beta, gemm.d.data, d,
                             const_cast<char *>(gemm.d.data), d, &algo,
                             workspace, workspaceBytes, device.stream()),
              "cublasLtMatmul");
  }

private:
  template <typename T>
  void setDesc(cublasLtMatmulDescAttributes_t attribute, const T &value) {
    checkBlas(
        cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(value)),
        "cublasLtMatmulDescSetAttribute");
  }

  static cublasLtMatrixLayout_t layout(cudaDataType_t type, int64_t rows,
                                       int64_t cols, int64_t ld, int64_t batch,
                                       int64_t stride) {
    cublasLtMatrixLayout_t layout = nullptr;
    checkBlas(cublasLtMatrixLayoutCreate(&layout, type, uint64_t(rows),
                                         uint64_t(cols), ld),
              "cublasLtMatrixLayoutCreate");
    if (batch > 1) {
      int32_t count = static_cast<int32_t>(batch);
      checkBlas(cublasLtMatrixLayoutSetAttribute(
                    layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                    sizeof(count)),
                "cublasLtMatrixLayoutSetAttribute");
      checkBlas(cublasLtMatrixLayoutSetAttribute(
                    layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                    &stride, sizeof(stride)),
                "cublasLtMatrixLayoutSetAttribute");
    }
    return layout;
  }

  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t x = nullptr, y = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

std::unordered_map<GemmKey, std::unique_ptr<GemmRecipe>, GemmKeyHash> &
recipes() {
  static std::unordered_map<GemmKey, std::unique_ptr<GemmRecipe>, GemmKeyHash>
      cache;
  return cache;
}

void runGemmAsIs(CudaDevice &device, const GemmTypes &types,
                 const ColumnMajorGemm &gemm, bool accumulate);

/// AUTOPAR_GEMM_ALIGNMENT_COPIES, read once.
AlignmentCopies alignmentCopiesMode() {
  static const AlignmentCopies mode = [] {
    const char *value = std::getenv("AUTOPAR_GEMM_ALIGNMENT_COPIES");
    std::optional<AlignmentCopies> parsed =
        parseAlignmentCopies(value ? value : "");
    if (!parsed)
      throw Error("AUTOPAR_GEMM_ALIGNMENT_COPIES is '" + std::string(value) +
                  "'; it takes auto (the default), always or never");
    return *parsed;
  }();
  return mode;
}

/// Copies the matrices of \p from into \p to on the device's stream.
void copyMatrices(CudaDevice &device, const StoredMatrix &to,
                  const StoredMatrix &from, int64_t batch, size_t elementSize) {
  for (const StridedCopy &copy : matrixCopies(to, from, batch, elementSize))
    device.copy2D(copy.dst, copy.dstPitch, copy.src, copy.srcPitch, copy.width,
                  copy.rows);
}

void runGemm(CudaDevice &device, const GemmTypes &types,
             const ColumnMajorGemm &gemm, bool accumulate) {
  // cuBLASLt's fast kernels load 16-byte vectors: with GPT-2's vocabulary of
  // 50257 (the logits, their gradient, the LM head's weight) it falls back
  // to sm_75-era align-1 kernels, 16 ms of GPT-2 small's 72 ms training step
  // on an H100. Large products run on copies whose sizes and columns are
  // aligned instead (GemmPlan.h says when and how), and copy the output
  // back.
  AlignmentCopyPlan plan = planAlignmentCopies(
      gemm, types.abSize, types.cSize, accumulate, alignmentCopiesMode());
  if (!plan.any())
    return runGemmAsIs(device, types, gemm, accumulate);
  ColumnMajorGemm aligned = alignedGemm(gemm, plan, types.abSize, types.cSize);
  std::vector<void *> scratches;
  // Gives a copied matrix's layout its scratch and, for an input (or an
  // output the product adds to), its values.
  auto stage = [&](bool copied, const StoredMatrix &m, StoredMatrix &into,
                   size_t elementSize, bool input) {
    if (!copied)
      return;
    void *scratch = device.allocator().allocate(
        packedBytes(into, gemm.batch, elementSize),
        input ? "a GEMM operand padded to aligned columns"
              : "a GEMM output padded to aligned columns");
    scratches.push_back(scratch);
    into.data = static_cast<const char *>(scratch);
    if (input)
      for (const StridedFill &fill :
           paddingFills(into, m, gemm.batch, elementSize))
        AUTOPAR_CU(cuMemsetD2D8Async, reinterpret_cast<CUdeviceptr>(fill.dst),
                   static_cast<size_t>(fill.pitch), 0, fill.width, fill.rows,
                   device.stream());
    if (input || accumulate)
      copyMatrices(device, into, m, gemm.batch, elementSize);
  };
  try {
    stage(plan.x, gemm.x, aligned.x, types.abSize, true);
    stage(plan.y, gemm.y, aligned.y, types.abSize, true);
    stage(plan.d, gemm.d, aligned.d, types.cSize, false);
    runGemmAsIs(device, types, aligned, accumulate);
    if (plan.d)
      copyMatrices(device, gemm.d, aligned.d, gemm.batch, types.cSize);
  } catch (...) {
    for (void *scratch : scratches)
      device.allocator().free(scratch);
    throw;
  }
  // The stream orders the allocator's reuse of a scratch after the work
  // queued on it, as for every buffer of the program.
  for (void *scratch : scratches)
    device.allocator().free(scratch);
}

void runGemmAsIs(CudaDevice &device, const GemmTypes &types,
                 const ColumnMajorGemm &gemm, bool accumulate) {
  if (gemm.batch > INT32_MAX)
    throw Error("a batch of " + std::to_string(gemm.batch) +
                " matrices is more than cuBLASLt takes");
  GemmKey key;
  key.types = &types;
  key.transX = gemm.x.transposed;
  key.transY = gemm.y.transposed;
  key.m = gemm.m;
  key.n = gemm.n;
  key.k = gemm.k;
  key.batch = gemm.batch;
  key.ldx = gemm.x.ld;
  key.ldy = gemm.y.ld;
  key.ldd = gemm.d.ld;
  key.strideX = gemm.x.batchStride;
  key.strideY = gemm.y.batchStride;
  key.strideD = gemm.d.batchStride;
  key.alignX = alignmentOf(gemm.x, gemm.batch, types.abSize);
  key.alignY = alignmentOf(gemm.y, gemm.batch, types.abSize);
  key.alignD = alignmentOf(gemm.d, gemm.batch, types.cSize);
  auto &cache = recipes();
  auto it = cache.find(key);
  if (it == cache.end()) {
    size_t workspaceBytes = 0;
    device.gemmWorkspace(workspaceBytes);
    it = cache
             .emplace(key, std::make_unique<GemmRecipe>(device.blas(), key,
                                                        workspaceBytes))
             .first;
  }
  it->second->run(device, gemm, accumulate);
}

std::string formatSizes(const int64_t *sizes, int rank) {
  std::string text = "[";
  for (int i = 0; i < rank; ++i)
    text += (i ? ", " : "") + std::to_string(sizes[i]);
  return text + "]";
}

/// Zeroes `batch` matrices of \p c's view (the result of an empty sum), a
/// contiguous run at a time: rows of a row-major view, columns of a
/// transposed one, else elements.
void zeroMatrices(CudaDevice &device, const MatrixOperand &c, int64_t batch,
                  size_t elementSize) {
  bool rowsContiguous = c.colStride == 1, colsContiguous = c.rowStride == 1;
  int64_t runs = rowsContiguous   ? c.rows
                 : colsContiguous ? c.cols
                                  : c.rows * c.cols;
  int64_t runLength = rowsContiguous ? c.cols : colsContiguous ? c.rows : 1;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t r = 0; r < runs; ++r) {
      int64_t element = rowsContiguous   ? r * c.rowStride
                        : colsContiguous ? r * c.colStride
                                         : (r / c.cols) * c.rowStride +
                                               (r % c.cols) * c.colStride;
      const char *start =
          c.data + (b * c.batchStride + element) * int64_t(elementSize);
      AUTOPAR_CU(cuMemsetD8Async, reinterpret_cast<CUdeviceptr>(start), 0,
                 size_t(runLength) * elementSize, device.stream());
    }
}

/// The matrices of a rank-2 or rank-3 (batch leading) descriptor.
template <int Rank>
MatrixOperand operandOf(const MemRefDescriptor<char, Rank> &m,
                        size_t elementSize) {
  constexpr int R = Rank - 2;
  MatrixOperand operand;
  operand.data = m.aligned + m.offset * static_cast<int64_t>(elementSize);
  operand.rows = m.sizes[R];
  operand.cols = m.sizes[R + 1];
  operand.rowStride = m.strides[R];
  operand.colStride = m.strides[R + 1];
  operand.batchStride = Rank == 3 ? m.strides[0] : 0;
  return operand;
}

/// C += A * B (\p accumulate) or C = A * B for one kernel of the family
/// \p types.
template <int Rank>
void gemmEntry(const char *kernel, const GemmTypes &types, bool accumulate,
               const MemRefDescriptor<char, Rank> *a,
               const MemRefDescriptor<char, Rank> *b,
               const MemRefDescriptor<char, Rank> *c) {
  try {
    CudaDevice &device = deviceFor(kernel);
    MatrixOperand va = operandOf(*a, types.abSize),
                  vb = operandOf(*b, types.abSize),
                  vc = operandOf(*c, types.cSize);
    int64_t batch = Rank == 3 ? c->sizes[0] : 1;
    bool batchesAgree =
        Rank == 2 || (a->sizes[0] == batch && b->sizes[0] == batch);
    if (!batchesAgree || va.rows != vc.rows || vb.cols != vc.cols ||
        va.cols != vb.rows)
      throw Error("operand sizes do not agree: A " +
                  formatSizes(a->sizes, Rank) + " x B " +
                  formatSizes(b->sizes, Rank) + " -> C " +
                  formatSizes(c->sizes, Rank) +
                  "; the generated program is inconsistent, which is a "
                  "compiler bug");
    if (vc.rows == 0 || vc.cols == 0 || batch == 0)
      return; // No output.
    if (va.cols == 0) {
      // An empty sum: C += 0 changes nothing, C = 0 zeroes C.
      if (!accumulate)
        zeroMatrices(device, vc, batch, types.cSize);
      return;
    }
    std::string error;
    std::optional<ColumnMajorGemm> gemm = planGemm(va, vb, vc, batch, error);
    if (!gemm)
      throw Error("unsupported operand: " + error +
                  "; the GPU kernels take row-major or transposed views, "
                  "which the compiler must pass");
    runGemm(device, types, *gemm, accumulate);
  } catch (const std::exception &error) {
    entryFatal(kernel, error.what());
  }
}

} // namespace

#define AUTOPAR_DEFINE_CUDA_GEMMS(SUFFIX, TYPES)                               \
  void _mlir_ciface_autopar_cuda_matmul_##SUFFIX(                              \
      MemRefDescriptor<char, 2> *a, MemRefDescriptor<char, 2> *b,              \
      MemRefDescriptor<char, 2> *c) {                                          \
    gemmEntry<2>("autopar_cuda_matmul_" #SUFFIX, TYPES, true, a, b, c);        \
  }                                                                            \
  void _mlir_ciface_autopar_cuda_batch_matmul_##SUFFIX(                        \
      MemRefDescriptor<char, 3> *a, MemRefDescriptor<char, 3> *b,              \
      MemRefDescriptor<char, 3> *c) {                                          \
    gemmEntry<3>("autopar_cuda_batch_matmul_" #SUFFIX, TYPES, true, a, b, c);  \
  }                                                                            \
  void _mlir_ciface_autopar_cuda_matmul_overwrite_##SUFFIX(                    \
      MemRefDescriptor<char, 2> *a, MemRefDescriptor<char, 2> *b,              \
      MemRefDescriptor<char, 2> *c) {                                          \
    gemmEntry<2>("autopar_cuda_matmul_overwrite_" #SUFFIX, TYPES, false, a, b, \
                 c);                                                           \
  }                                                                            \
  void _mlir_ciface_autopar_cuda_batch_matmul_overwrite_##SUFFIX(              \
      MemRefDescriptor<char, 3> *a, MemRefDescriptor<char, 3> *b,              \
      MemRefDescriptor<char, 3> *c) {                                          \
    gemmEntry<3>("autopar_cuda_batch_matmul_overwrite_" #SUFFIX, TYPES, false, \
                 a, b, c);                                                     \
  }

extern "C" {
AUTOPAR_DEFINE_CUDA_GEMMS(f32_f32, F32F32)
AUTOPAR_DEFINE_CUDA_GEMMS(bf16_f32, Bf16F32)
AUTOPAR_DEFINE_CUDA_GEMMS(bf16_bf16, Bf16Bf16)
AUTOPAR_DEFINE_CUDA_GEMMS(f16_f32, F16F32)
AUTOPAR_DEFINE_CUDA_GEMMS(f16_f16, F16F16)
} // extern "C"
