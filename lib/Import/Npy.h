//===- Npy.h - Reading .npy files into import-time constants ----*- C++ -*-===//

#ifndef AUTOPAR_LIB_IMPORT_NPY_H
#define AUTOPAR_LIB_IMPORT_NPY_H

#include "ImporterImpl.h"

namespace autopar::import {

/// Decodes little-endian row-major bytes into `result`, whose dtype and shape
/// are set; fails (with `error`) when the byte count does not match.
llvm::LogicalResult decodeRawTensor(llvm::StringRef raw, ConstTensor &result,
                                    std::string &error);

/// Reads a NumPy .npy file (versions 1-3, little-endian, C order).
llvm::LogicalResult readNpyFile(llvm::StringRef path, ConstTensor &result,
                                std::string &error);

} // namespace autopar::import

#endif // AUTOPAR_LIB_IMPORT_NPY_H
