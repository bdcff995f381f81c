//===- TensorLayout.h - Blocks and strided views of tensors -----*- C++ -*-===//
//
// Splitting a row-major tensor into equal blocks along one dimension (how
// split inputs are scattered, split outputs gathered, and how all_gather,
// reduce_scatter and all_to_all treat their `dim` arguments), and copying
// between strided views and dense buffers.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_TENSORLAYOUT_H
#define AUTOPAR_RUNTIME_TENSORLAYOUT_H

#include "autopar/runtime/Tensor.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace autopar::runtime {

/// Moves bytes within one kind of memory (host memory, or a GPU's, where the
/// CPU cannot simply memcpy): `rows` rows of `width` bytes, row i from
/// src + i * srcPitch to dst + i * dstPitch (pitches in bytes).
class ByteCopier {
public:
  virtual ~ByteCopier() = default;
  virtual void copy2D(void *dst, int64_t dstPitch, const void *src,
                      int64_t srcPitch, size_t width, size_t rows) const = 0;
};

/// The host's: memcpy.
const ByteCopier &hostCopier();

/// A dense row-major tensor of shape `whole` viewed as `parts` equal blocks
/// along dimension `dim`: block i holds indices [i*s, (i+1)*s) of that
/// dimension, s = whole[dim] / parts, and is itself dense and row-major.
class BlockSplit {
public:
  /// Throws Error (naming \p what) unless 0 <= dim < rank and parts divides
  /// whole[dim].
  BlockSplit(const Shape &whole, int64_t dim, int64_t parts, size_t elementSize,
             const std::string &what);

  /// Bytes of one block.
  size_t blockBytes() const { return outer * blockRowBytes; }
  /// True if block i is simply bytes [i*blockBytes(), (i+1)*blockBytes()) of
  /// the whole (dim 0, or all dims before it of size 1).
  bool blocksAreContiguous() const { return outer == 1; }

  /// Copies block \p index of \p whole to the dense \p block.
  void pack(const void *whole, int64_t index, void *block,
            const ByteCopier &copier = hostCopier()) const;
  /// Copies the dense \p block into block \p index of \p whole.
  void unpack(const void *block, int64_t index, void *whole,
              const ByteCopier &copier = hostCopier()) const;

private:
  size_t outer = 1;         // product of the dims before dim
  size_t rowBytes = 0;      // bytes of whole[dim:] (one "row")
  size_t blockRowBytes = 0; // rowBytes / parts
};

/// Copies the elements of a strided view (sizes, strides in elements) into a
/// dense row-major buffer, or back.
void copyStridedToDense(const void *src, const int64_t *sizes,
                        const int64_t *strides, int rank, size_t elementSize,
                        void *dense, const ByteCopier &copier = hostCopier());
void copyDenseToStrided(const void *dense, const int64_t *sizes,
                        const int64_t *strides, int rank, size_t elementSize,
                        void *dst, const ByteCopier &copier = hostCopier());

/// A box of a row-major tensor: its corner and extent.
struct TensorBox {
  Shape offsets, sizes;
};

/// One cut of a nested split: `parts` equal blocks along dimension `dim` of
/// what the cuts before it left, of which block `index` is kept.
struct BlockCut {
  int64_t dim = 0;
  int64_t parts = 1;
  int64_t index = 0;
};

/// The box of a tensor of shape \p whole that \p cuts leave, applied in
/// order (a tensor-parallel block, then ZeRO's block of it: PyTorch FSDP2's
/// layout over TP). Throws Error (naming \p what) where a dim is out of range
/// or does not divide, or an index is outside its parts.
TensorBox cutBox(const Shape &whole, const std::vector<BlockCut> &cuts,
                 const std::string &what);

/// Copies \p box of the dense row-major \p whole (of shape \p wholeShape)
/// to the dense \p block, or back.
void packBox(const void *whole, const Shape &wholeShape, const TensorBox &box,
             size_t elementSize, void *block);
void unpackBox(const void *block, const TensorBox &box, const Shape &wholeShape,
               size_t elementSize, void *whole);

/// True if \p strides are those of a dense row-major tensor of \p sizes
/// (strides of dimensions of size 1 do not matter).
bool isDenseRowMajor(const int64_t *sizes, const int64_t *strides, int rank);

} // namespace autopar::runtime

#endif // AUTOPAR_RUNTIME_TENSORLAYOUT_H
