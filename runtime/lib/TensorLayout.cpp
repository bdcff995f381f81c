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

namespace {

/// Copies between the strided view at \p strided and the dense buffer at
/// \p dense, towards the dense one if \p toDense, run by run of the last
/// dimension: a contiguous run is one row of copy2D, a strided one has a
/// row per element.
void copyRuns(const char *strided, const char *dense, const int64_t *sizes,
              const int64_t *strides, int rank, size_t elementSize,
              bool toDense, const ByteCopier &copier) {
  int64_t es = static_cast<int64_t>(elementSize);
  forEachRow(sizes, strides, rank, elementSize,
             [&](int64_t offset, size_t at, int64_t count, int64_t step) {
               bool contiguous = step == es;
               size_t width =
                   contiguous ? size_t(count) * elementSize : elementSize;
               size_t rows = contiguous ? 1 : size_t(count);
               int64_t stridedPitch = contiguous ? 0 : step;
               int64_t densePitch = contiguous ? 0 : es;
               char *s = const_cast<char *>(strided) + offset;
               char *d = const_cast<char *>(dense) + at;
               if (toDense)
                 copier.copy2D(d, densePitch, s, stridedPitch, width, rows);
               else
                 copier.copy2D(s, stridedPitch, d, densePitch, width, rows);
             });
}

} // namespace

void copyStridedToDense(const void *src, const int64_t *sizes,
                        const int64_t *strides, int rank, size_t elementSize,
                        void *dense, const ByteCopier &copier) {
  copyRuns(static_cast<const char *>(src), static_cast<const char *>(dense),
           sizes, strides, rank, elementSize, /*toDense=*/true, copier);
}

void copyDenseToStrided(const void *dense, const int64_t *sizes,
                        const int64_t *strides, int rank, size_t elementSize,
                        void *dst, const ByteCopier &copier) {
  copyRuns(static_cast<const char *>(dst), static_cast<const char *>(dense),
           sizes, strides, rank, elementSize, /*toDense=*/false, copier);
}

TensorBox cutBox(const Shape &whole, const std::vector<BlockCut> &cuts,
                 const std::string &what) {
  TensorBox box{Shape(whole.size(), 0), whole};
  for (const BlockCut &cut : cuts) {
    if (cut.dim < 0 || cut.dim >= static_cast<int64_t>(whole.size()))
      throw Error(what + ": dimension " + std::to_string(cut.dim) +
                  " is out of range for shape " + formatShape(whole));
    auto d = static_cast<size_t>(cut.dim);
    if (cut.parts < 1 || box.sizes[d] % cut.parts != 0)
      throw Error(what + ": dimension " + std::to_string(cut.dim) +
                  " of the block " + formatShape(box.sizes) + " of " +
                  formatShape(whole) + " does not split into " +
                  std::to_string(cut.parts) + " equal blocks");
    if (cut.index < 0 || cut.index >= cut.parts)
      throw Error(what + ": block " + std::to_string(cut.index) +
                  " is outside its " + std::to_string(cut.parts) + " blocks");
    box.sizes[d] /= cut.parts;
    box.offsets[d] += cut.index * box.sizes[d];
  }
  return box;
}

namespace {

/// Row-major strides (in elements) of \p shape, and the element offset of
/// \p box's corner in it.
std::pair<std::vector<int64_t>, int64_t>
stridesAndCorner(const Shape &shape, const TensorBox &box) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    strides[d - 1] = strides[d] * shape[d];
  int64_t corner = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    corner += box.offsets[d] * strides[d];
  return {strides, corner};
}

} // namespace

void packBox(const void *whole, const Shape &wholeShape, const TensorBox &box,
             size_t elementSize, void *block) {
  auto [strides, corner] = stridesAndCorner(wholeShape, box);
  copyStridedToDense(static_cast<const char *>(whole) +
                         static_cast<size_t>(corner) * elementSize,
                     box.sizes.data(), strides.data(),
                     static_cast<int>(box.sizes.size()), elementSize, block);
}

void unpackBox(const void *block, const TensorBox &box, const Shape &wholeShape,
               size_t elementSize, void *whole) {
  auto [strides, corner] = stridesAndCorner(wholeShape, box);
  copyDenseToStrided(block, box.sizes.data(), strides.data(),
                     static_cast<int>(box.sizes.size()), elementSize,
                     static_cast<char *>(whole) +
                         static_cast<size_t>(corner) * elementSize);
}

} // namespace autopar::runtime
