//===- OpCostTest.cpp - FLOPs and bytes of parsed linalg/tensor ops -------===//

#include "autopar/Planner/OpCost.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include "gtest/gtest.h"

using namespace mlir;
using namespace autopar;

namespace {

class OpCostTest : public ::testing::Test {
protected:
  OpCostTest() {
    context.loadDialect<func::FuncDialect, linalg::LinalgDialect,
                        tensor::TensorDialect, arith::ArithDialect,
                        math::MathDialect>();
  }

  /// Parses the module `source` and returns the first op
  /// named `name`.
  Operation *parseAndFind(StringRef source, StringRef name) {
    module = parseSourceString<ModuleOp>(source, ParserConfig(&context));
    EXPECT_TRUE(module) << source.str();
    if (!module)
      return nullptr;
    Operation *found = nullptr;
    module->walk([&](Operation *op) {
      if (!found && op->getName().getStringRef() == name)
        found = op;
    });
    EXPECT_TRUE(found) << "no " << name.str();
    return found;
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

// C[128x64] += A[128x256] B[256x64]: 2MNK FLOPs, smallest dim 64; the
// matmul reads its accumulator.
TEST_F(OpCostTest, Matmul) {
  Operation *op = parseAndFind(R"mlir(
    func.func @f(%a: tensor<128x256xf32>, %b: tensor<256x64xf32>,
                 %c: tensor<128x64xf32>) -> tensor<128x64xf32> {
      %0 = linalg.matmul ins(%a, %b : tensor<128x256xf32>, tensor<256x64xf32>)
                         outs(%c : tensor<128x64xf32>) -> tensor<128x64xf32>
      return %0 : tensor<128x64xf32>
    })mlir",
                               "linalg.matmul");
  ASSERT_TRUE(op);
  OpCost cost = getOpCost(op);
  EXPECT_EQ(cost.kind, ComputeKind::Gemm);
  EXPECT_EQ(cost.flops, 2.0 * 128 * 64 * 256);
  EXPECT_EQ(cost.minDim, 64);
  EXPECT_EQ(cost.bytesRead, (128 * 256 + 256 * 64 + 128 * 64) * 4.0);
  EXPECT_EQ(cost.bytesWritten, 128 * 64 * 4.0);
  EXPECT_TRUE(cost.executes);
}

// The batch dimension is no GEMM dimension: minDim = min(M, N, K).
TEST_F(OpCostTest, BatchMatmul) {
  Operation *op = parseAndFind(R"mlir(
    func.func @f(%a: tensor<4x32x16xbf16>, %b: tensor<4x16x8xbf16>,
                 %c: tensor<4x32x8xbf16>) -> tensor<4x32x8xbf16> {
      %0 = linalg.batch_matmul
             ins(%a, %b : tensor<4x32x16xbf16>, tensor<4x16x8xbf16>)
             outs(%c : tensor<4x32x8xbf16>) -> tensor<4x32x8xbf16>
      return %0 : tensor<4x32x8xbf16>
    })mlir",
                               "linalg.batch_matmul");
  ASSERT_TRUE(op);
  OpCost cost = getOpCost(op);
  EXPECT_EQ(cost.flops, 2.0 * 4 * 32 * 8 * 16);
  EXPECT_EQ(cost.minDim, 8);
  EXPECT_EQ(cost.bytesWritten, 4 * 32 * 8 * 2.0);
}

// One addf per element; the init comes from tensor.empty and is not read.
TEST_F(OpCostTest, ElementwiseAdd) {
  Operation *op = parseAndFind(R"mlir(
    #id = affine_map<(d0, d1) -> (d0, d1)>
    func.func @f(%a: tensor<1024x512xf32>, %b: tensor<1024x512xf32>)
        -> tensor<1024x512xf32> {
      %e = tensor.empty() : tensor<1024x512xf32>
      %0 = linalg.generic {indexing_maps = [#id, #id, #id],
                           iterator_types = ["parallel", "parallel"]}
          ins(%a, %b : tensor<1024x512xf32>, tensor<1024x512xf32>)
          outs(%e : tensor<1024x512xf32>) {
        ^bb0(%x: f32, %y: f32, %o: f32):
          %s = arith.addf %x, %y : f32
          linalg.yield %s : f32
      } -> tensor<1024x512xf32>
      return %0 : tensor<1024x512xf32>
    })mlir",
                               "linalg.generic");
  ASSERT_TRUE(op);
  OpCost cost = getOpCost(op);
  double n = 1024.0 * 512;
  EXPECT_EQ(cost.kind, ComputeKind::Elementwise);
  EXPECT_EQ(cost.flops, n);
  EXPECT_EQ(cost.bytesRead, 2 * n * 4);
  EXPECT_EQ(cost.bytesWritten, n * 4);
  EXPECT_EQ(cost.minDim, 0);
}

// A body of several ops: x * (tanh(x) + 1) counts 3 per element; the
// constant is not arithmetic.
TEST_F(OpCostTest, ElementwiseBodyOpsAreCounted) {
  Operation *op = parseAndFind(R"mlir(
    #id = affine_map<(d0) -> (d0)>
    func.func @f(%a: tensor<100xf32>) -> tensor<100xf32> {
      %e = tensor.empty() : tensor<100xf32>
      %0 = linalg.generic {indexing_maps = [#id, #id],
                           iterator_types = ["parallel"]}
          ins(%a : tensor<100xf32>) outs(%e : tensor<100xf32>) {
        ^bb0(%x: f32, %o: f32):
          %one = arith.constant 1.0 : f32
          %t = math.tanh %x : f32
          %p = arith.addf %t, %one : f32
          %m = arith.mulf %x, %p : f32
          linalg.yield %m : f32
      } -> tensor<100xf32>
      return %0 : tensor<100xf32>
    })mlir",
                               "linalg.generic");
  ASSERT_TRUE(op);
  EXPECT_EQ(getOpCost(op).flops, 300);
}

// NCHW 1x3x32x32 * FCHW 16x3x3x3 -> 1x16x30x30. As an implicit GEMM:
// M = 900 output pixels, N = 16 channels, K = 27 taps.
TEST_F(OpCostTest, Convolution) {
  Operation *op = parseAndFind(R"mlir(
    func.func @f(%i: tensor<1x3x32x32xf32>, %w: tensor<16x3x3x3xf32>,
                 %o: tensor<1x16x30x30xf32>) -> tensor<1x16x30x30xf32> {
      %0 = linalg.conv_2d_nchw_fchw
             ins(%i, %w : tensor<1x3x32x32xf32>, tensor<16x3x3x3xf32>)
             outs(%o : tensor<1x16x30x30xf32>) -> tensor<1x16x30x30xf32>
      return %0 : tensor<1x16x30x30xf32>
    })mlir",
                               "linalg.conv_2d_nchw_fchw");
  ASSERT_TRUE(op);
  OpCost cost = getOpCost(op);
  EXPECT_EQ(cost.kind, ComputeKind::Gemm);
  EXPECT_EQ(cost.flops, 2.0 * 16 * 30 * 30 * 3 * 3 * 3);
  EXPECT_EQ(cost.minDim, 16);
}

// A depthwise convolution reduces over no channel: no GEMM, 2 FLOPs per tap.
TEST_F(OpCostTest, DepthwiseConvolutionIsNoGemm) {
  Operation *op = parseAndFind(R"mlir(
    func.func @f(%i: tensor<1x10x10x8xf32>, %w: tensor<3x3x8xf32>,
                 %o: tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32> {
      %0 = linalg.depthwise_conv_2d_nhwc_hwc
             {dilations = dense<1> : tensor<2xi64>,
              strides = dense<1> : tensor<2xi64>}
             ins(%i, %w : tensor<1x10x10x8xf32>, tensor<3x3x8xf32>)
             outs(%o : tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32>
      return %0 : tensor<1x8x8x8xf32>
    })mlir",
                               "linalg.depthwise_conv_2d_nhwc_hwc");
  ASSERT_TRUE(op);
  OpCost cost = getOpCost(op);
  EXPECT_EQ(cost.kind, ComputeKind::Elementwise);
  EXPECT_EQ(cost.flops, 2.0 * 8 * 8 * 8 * 3 * 3);
  EXPECT_EQ(cost.minDim, 0);
}

// Max pooling multiplies nothing: one maximumf per window tap.
TEST_F(OpCostTest, MaxPoolingIsNoGemm) {
  Operation *op = parseAndFind(R"mlir(
    func.func @f(%i: tensor<1x4x8x8xf32>, %k: tensor<2x2xf32>,
                 %o: tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32> {
      %0 = linalg.pooling_nchw_max
             {dilations = dense<1> : tensor<2xi64>,
              strides = dense<2> : tensor<2xi64>}
             ins(%i, %k : tensor<1x4x8x8xf32>, tensor<2x2xf32>)
             outs(%o : tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
      return %0 : tensor<1x4x4x4xf32>
    })mlir",
                               "linalg.pooling_nchw_max");
  ASSERT_TRUE(op);
  OpCost cost = getOpCost(op);
  EXPECT_EQ(cost.kind, ComputeKind::Elementwise);
  EXPECT_EQ(cost.flops, 4.0 * 4 * 4 * 2 * 2);
}

TEST_F(OpCostTest, ReshapesAndConstantsAreFree) {
  Operation *op = parseAndFind(R"mlir(
    func.func @f(%a: tensor<8x64xf32>) -> tensor<8x4x16xf32> {
      %0 = tensor.expand_shape %a [[0], [1, 2]] output_shape [8, 4, 16]
             : tensor<8x64xf32> into tensor<8x4x16xf32>
      return %0 : tensor<8x4x16xf32>
    })mlir",
                               "tensor.expand_shape");
  ASSERT_TRUE(op);
  OpCost cost = getOpCost(op);
  EXPECT_FALSE(cost.executes);
  EXPECT_EQ(cost.bytesRead + cost.bytesWritten + cost.flops, 0);

  Operation *cst = parseAndFind(R"mlir(
    func.func @f() -> tensor<4xf32> {
      %0 = arith.constant dense<1.0> : tensor<4xf32>
      return %0 : tensor<4xf32>
    })mlir",
                                "arith.constant");
  ASSERT_TRUE(cst);
  EXPECT_FALSE(getOpCost(cst).executes);
}

// Whole rows of a row-major tensor are a view; a column block is a copy.
TEST_F(OpCostTest, ExtractSlice) {
  const char *source = R"mlir(
    func.func @f(%a: tensor<16x32xf32>) -> (tensor<4x32xf32>, tensor<16x8xf32>) {
      %rows = tensor.extract_slice %a[4, 0] [4, 32] [1, 1]
                : tensor<16x32xf32> to tensor<4x32xf32>
      %cols = tensor.extract_slice %a[0, 8] [16, 8] [1, 1]
                : tensor<16x32xf32> to tensor<16x8xf32>
      return %rows, %cols : tensor<4x32xf32>, tensor<16x8xf32>
    })mlir";
  Operation *rows = parseAndFind(source, "tensor.extract_slice");
  ASSERT_TRUE(rows);
  EXPECT_FALSE(getOpCost(rows).executes);
  Operation *cols = rows->getNextNode();
  OpCost cost = getOpCost(cols);
  EXPECT_TRUE(cost.executes);
  EXPECT_EQ(cost.flops, 0);
  EXPECT_EQ(cost.bytesRead, 16 * 8 * 4.0);
  EXPECT_EQ(cost.bytesWritten, 16 * 8 * 4.0);
}

TEST_F(OpCostTest, ConcatMovesBytes) {
  Operation *op = parseAndFind(R"mlir(
    func.func @f(%a: tensor<2x8xf16>, %b: tensor<3x8xf16>) -> tensor<5x8xf16> {
      %0 = tensor.concat dim(0) %a, %b
             : (tensor<2x8xf16>, tensor<3x8xf16>) -> tensor<5x8xf16>
      return %0 : tensor<5x8xf16>
    })mlir",
                               "tensor.concat");
  ASSERT_TRUE(op);
  OpCost cost = getOpCost(op);
  EXPECT_EQ(cost.flops, 0);
  EXPECT_EQ(cost.bytesRead, 5 * 8 * 2.0);
  EXPECT_EQ(cost.bytesWritten, 5 * 8 * 2.0);
}

} // namespace
