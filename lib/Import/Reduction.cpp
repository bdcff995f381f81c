//===- Reduction.cpp - ONNX Reduction ops -----------------------------------------===//

#include "ImporterImpl.h"

using namespace mlir;
namespace autopar::import {

void registerReductionConverters(ConverterRegistry &registry) {}

} // namespace autopar::import
