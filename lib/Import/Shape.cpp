//===- Shape.cpp - ONNX Shape ops -----------------------------------------===//

#include "ImporterImpl.h"

using namespace mlir;
namespace autopar::import {

void registerShapeConverters(ConverterRegistry &registry) {}

} // namespace autopar::import
