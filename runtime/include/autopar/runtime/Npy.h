//===- Npy.h - NumPy .npy files ---------------------------------*- C++ -*-===//
//
// Inputs and outputs of autopar-run are .npy files, so that NumPy, PyTorch and
// onnxruntime scripts read and write them directly. Only little-endian, C-order
// arrays of the artifact's element types are supported. NumPy has no bfloat16:
// such tensors are stored as '<u2' (their raw bits).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_NPY_H
#define AUTOPAR_RUNTIME_NPY_H

#include "autopar/runtime/DType.h"
#include "autopar/runtime/HostBuffer.h"
#include "autopar/runtime/Tensor.h"

#include <string>

namespace autopar::runtime {

/// The contents of a .npy file.
struct NpyArray {
  /// The element type as stored: a '<u2' file reads as UInt16, even if it holds
  /// bfloat16 bits.
  DType dtype = DType::Float32;
  Shape shape;
  /// numElements(shape) * dtypeSize(dtype) bytes, row-major.
  HostBuffer data;
};

/// The dtype a tensor of \p dtype has in a .npy file: UInt16 for BFloat16,
/// \p dtype itself otherwise.
DType npyStorageDType(DType dtype);

/// The NumPy descr string ('<f4', '|b1', ...) written for \p dtype.
std::string npyDescr(DType dtype);

/// Where the array of a .npy file lies in it.
struct NpyLayout {
  /// As NpyArray::dtype.
  DType dtype = DType::Float32;
  Shape shape;
  /// The byte offset of the data in the file, and its size
  /// (numElements(shape) * dtypeSize(dtype), row-major).
  int64_t dataOffset = 0;
  int64_t dataBytes = 0;
};

/// Reads and checks only the header of a .npy file, and that the file holds
/// exactly the data the header announces, so that the data can be
/// memory-mapped rather than read. Throws Error as readNpy does.
NpyLayout readNpyLayout(const std::string &path);

/// Reads a .npy file (format versions 1, 2 and 3). Throws Error naming \p path
/// if the file is missing, truncated, Fortran-ordered, big-endian or of an
/// unsupported dtype.
NpyArray readNpy(const std::string &path);

/// Writes a dense row-major tensor as a version 1 .npy file (version 2 if the
/// header needs it). Throws Error naming \p path if it cannot be written.
void writeNpy(const std::string &path, DType dtype, const Shape &shape,
              const void *data);

} // namespace autopar::runtime

#endif // AUTOPAR_RUNTIME_NPY_H
