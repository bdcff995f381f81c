//===- TensorLayout.cpp - Blocks and strided views of dense tensors -------===//

#include "autopar/runtime/TensorLayout.h"

#include "autopar/runtime/Error.h"

#include <cstring>
#include <vector>

namespace autopar::runtime {

BlockSplit::BlockSplit(const Shape &whole, int64_t dim, int64_t parts,
                       size_t elementSize, const std::string &what) {
  int64_t rank = static_cast<int64_t>(whole.size());
  if (dim < 0 || dim >= rank)
    throw Error(what + ": dimension " + std::to_string(dim) +
                " is out of range for shape " + formatShape(whole));
  if (parts < 1 || whole[dim] % parts != 0)
    throw Error(what + ": dimension " + std::to_string(dim) + " of shape " +
                formatShape(whole) + " does not split into " +
                std::to_string(parts) + " equal blocks");
  for (int64_t d = 0; d < dim; ++d)
    outer *= static_cast<size_t>(whole[d]);
  rowBytes = elementSize;
  for (int64_t d = dim; d < rank; ++d)
    rowBytes *= static_cast<size_t>(whole[d]);
  blockRowBytes = rowBytes / static_cast<size_t>(parts);
}

namespace {
class HostCopier : public ByteCopier {
public:
  void copy2D(void *dst, int64_t dstPitch, const void *src, int64_t srcPitch,
              size_t width, size_t rows) const override {
    char *to = static_cast<char *>(dst);
    const char *from = static_cast<const char *>(src);
    for (size_t r = 0; r < rows; ++r)
      std::memcpy(to + static_cast<int64_t>(r) * dstPitch,
                  from + static_cast<int64_t>(r) * srcPitch, width);
  }
};
} // namespace

const ByteCopier &hostCopier() {
  static const HostCopier copier;
  return copier;
}

void BlockSplit::pack(const void *whole, int64_t index, void *block,
                      const ByteCopier &copier) const {
  const char *from = static_cast<const char *>(whole) +
                     static_cast<size_t>(index) * blockRowBytes;
  copier.copy2D(block, static_cast<int64_t>(blockRowBytes), from,
                static_cast<int64_t>(rowBytes), blockRowBytes, outer);
}

void BlockSplit::unpack(const void *block, int64_t index, void *whole,
                        const ByteCopier &copier) const {
  char *to =
      static_cast<char *>(whole) + static_cast<size_t>(index) * blockRowBytes;
  copier.copy2D(to, static_cast<int64_t>(rowBytes), block,
                static_cast<int64_t>(blockRowBytes), blockRowBytes, outer);
}

bool isDenseRowMajor(const int64_t *sizes, const int64_t *strides, int rank) {
  int64_t expected = 1;
  for (int d = rank - 1; d >= 0; --d) {
    if (sizes[d] != 1 && strides[d] != expected)
      return false;
    expected *= sizes[d];
  }
  return true;
}

namespace {

/// Visits every element of the view in row-major order, calling
/// copy(stridedByteOffset, denseByteOffset) once per run of the last
/// dimension.
template <typename Fn>
void forEachRow(const int64_t *sizes, const int64_t *strides, int rank,
                size_t elementSize, Fn copy) {
  for (int d = 0; d < rank; ++d)
    if (sizes[d] == 0)
      return;
  if (rank == 0) {
    copy(0, 0, 1, 0);
    return;
  }
  std::vector<int64_t> index(static_cast<size_t>(rank), 0);
  int64_t last = sizes[rank - 1], lastStride = strides[rank - 1];
  size_t dense = 0;
  for (;;) {
    int64_t offset = 0;
    for (int d = 0; d < rank - 1; ++d)
      offset += index[d] * strides[d];
    copy(offset * static_cast<int64_t>(elementSize), dense, last,
         lastStride * static_cast<int64_t>(elementSize));
    dense += static_cast<size_t>(last) * elementSize;
    int d = rank - 2;
    for (; d >= 0; --d) {
      if (++index[d] < sizes[d])
        break;
      index[d] = 0;
    }
    if (d < 0)
      return;
  }
}

} // namespace

void copyStridedToDense(const void *src, const int64_t *sizes,
                        const int64_t *strides, int rank, size_t elementSize,
                        void *dense, const ByteCopier &copier) {
  const char *from = static_cast<const char *>(src);
  char *to = static_cast<char *>(dense);
  int64_t es = static_cast<int64_t>(elementSize);
  forEachRow(sizes, strides, rank, elementSize,
             [&](int64_t offset, size_t at, int64_t count, int64_t step) {
               // A contiguous run is one row; a strided one, one row per
               // element.
               if (step == es)
                 copier.copy2D(to + at, 0, from + offset, 0,
                               static_cast<size_t>(count) * elementSize, 1);
               else
                 copier.copy2D(to + at, es, from + offset, step, elementSize,
                               static_cast<size_t>(count));
             });
}

void copyDenseToStrided(const void *dense, const int64_t *sizes,
                        const int64_t *strides, int rank, size_t elementSize,
                        void *dst, const ByteCopier &copier) {
  const char *from = static_cast<const char *>(dense);
  char *to = static_cast<char *>(dst);
  int64_t es = static_cast<int64_t>(elementSize);
  forEachRow(sizes, strides, rank, elementSize,
             [&](int64_t offset, size_t at, int64_t count, int64_t step) {
               if (step == es)
                 copier.copy2D(to + offset, 0, from + at, 0,
                               static_cast<size_t>(count) * elementSize, 1);
               else
                 copier.copy2D(to + offset, step, from + at, es, elementSize,
                               static_cast<size_t>(count));
             });
}

} // namespace autopar::runtime
