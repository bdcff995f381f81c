//===- Normalization.cpp - ONNX Normalization ops -----------------------------------------===//

#include "ImporterImpl.h"

using namespace mlir;
namespace autopar::import {

void registerNormalizationConverters(ConverterRegistry &registry) {}

} // namespace autopar::import
