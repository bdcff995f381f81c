//===- Convolution.cpp - ONNX Convolution ops -----------------------------------------===//

#include "ImporterImpl.h"

using namespace mlir;
namespace autopar::import {

void registerConvolutionConverters(ConverterRegistry &registry) {}

} // namespace autopar::import
