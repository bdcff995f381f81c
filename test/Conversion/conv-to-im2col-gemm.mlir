// autopar-conv-to-im2col-gemm: a 2-D NCHW convolution becomes an im2col
// linalg.generic and a GEMM named op (linalg.matmul at batch 1, a
// batch_matmul of the broadcast filter otherwise); dilated and grouped
// convolutions keep their linalg form.
// RUN: autopar-opt %s --autopar-conv-to-im2col-gemm --split-input-file | FileCheck %s

// Batch 1: the patches are gathered into a column tensor and the convolution
// becomes a plain matmul of the flattened filter (4 x 3*3*3) by the columns
// (27 x 4*4), written into the flattened output.
// CHECK-LABEL: func.func @conv
// CHECK-SAME: (%[[I:.*]]: tensor<1x3x9x9xf32>, %[[F:.*]]: tensor<4x3x3x3xf32>, %[[O:.*]]: tensor<1x4x4x4xf32>)
// CHECK-DAG: %[[F2:.*]] = tensor.collapse_shape %[[F]] {{\[\[}}0], [1, 2, 3]] : tensor<4x3x3x3xf32> into tensor<4x27xf32>
// CHECK-DAG: %[[O3:.*]] = tensor.collapse_shape %[[O]] {{\[\[}}0], [1], [2, 3]] : tensor<1x4x4x4xf32> into tensor<1x4x16xf32>
// CHECK: %[[COL:.*]] = linalg.generic {{.*}} ins(%[[I]] : tensor<1x3x9x9xf32>) outs(%{{.*}} : tensor<1x27x16xf32>)
// CHECK-DAG: %[[COL2:.*]] = tensor.collapse_shape %[[COL]] {{.*}} into tensor<27x16xf32>
// CHECK-DAG: %[[O2:.*]] = tensor.collapse_shape %[[O3]] {{.*}} into tensor<4x16xf32>
// CHECK: %[[MM:.*]] = linalg.matmul ins(%[[F2]], %[[COL2]] : tensor<4x27xf32>, tensor<27x16xf32>) outs(%[[O2]] : tensor<4x16xf32>)
// CHECK: %[[E:.*]] = tensor.expand_shape %[[MM]] {{.*}} into tensor<1x4x16xf32>
// CHECK: %[[R:.*]] = tensor.expand_shape %[[E]] {{.*}} into tensor<1x4x4x4xf32>
// CHECK: return %[[R]]
// CHECK-NOT: linalg.conv_2d_nchw_fchw
func.func @conv(%i: tensor<1x3x9x9xf32>, %f: tensor<4x3x3x3xf32>, %o: tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32> {
  %r = linalg.conv_2d_nchw_fchw {strides = dense<2> : tensor<2xi64>, dilations = dense<1> : tensor<2xi64>}
    ins(%i, %f : tensor<1x3x9x9xf32>, tensor<4x3x3x3xf32>) outs(%o : tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  return %r : tensor<1x4x4x4xf32>
}

// -----

// A larger batch: the filter is broadcast over it and the product is a
// batch_matmul, which the GEMM lowering hands to the batched kernel.
// CHECK-LABEL: func.func @conv_batch
// CHECK: %[[F2:.*]] = tensor.collapse_shape %{{.*}} : tensor<4x3x3x3xf32> into tensor<4x27xf32>
// CHECK: %[[COL:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<2x27x49xf32>)
// CHECK: %[[FB:.*]] = linalg.broadcast ins(%[[F2]] : tensor<4x27xf32>) outs(%{{.*}} : tensor<2x4x27xf32>) dimensions = [0]
// CHECK: linalg.batch_matmul ins(%[[FB]], %[[COL]] : tensor<2x4x27xf32>, tensor<2x27x49xf32>) outs(%{{.*}} : tensor<2x4x49xf32>)
// CHECK-NOT: linalg.conv_2d_nchw_fchw
func.func @conv_batch(%i: tensor<2x3x9x9xf32>, %f: tensor<4x3x3x3xf32>, %o: tensor<2x4x7x7xf32>) -> tensor<2x4x7x7xf32> {
  %r = linalg.conv_2d_nchw_fchw {strides = dense<1> : tensor<2xi64>, dilations = dense<1> : tensor<2xi64>}
    ins(%i, %f : tensor<2x3x9x9xf32>, tensor<4x3x3x3xf32>) outs(%o : tensor<2x4x7x7xf32>) -> tensor<2x4x7x7xf32>
  return %r : tensor<2x4x7x7xf32>
}

// -----

// Dilated convolutions are not supported by upstream's im2col: they stay
// (and become GPU loops).
// CHECK-LABEL: func.func @dilated
// CHECK: linalg.conv_2d_nchw_fchw
// CHECK-NOT: linalg.matmul
func.func @dilated(%i: tensor<1x3x9x9xf32>, %f: tensor<4x3x3x3xf32>, %o: tensor<1x4x5x5xf32>) -> tensor<1x4x5x5xf32> {
  %r = linalg.conv_2d_nchw_fchw {strides = dense<1> : tensor<2xi64>, dilations = dense<2> : tensor<2xi64>}
    ins(%i, %f : tensor<1x3x9x9xf32>, tensor<4x3x3x3xf32>) outs(%o : tensor<1x4x5x5xf32>) -> tensor<1x4x5x5xf32>
  return %r : tensor<1x4x5x5xf32>
}

// -----

// Grouped convolutions have no upstream im2col: they stay too.
// CHECK-LABEL: func.func @grouped
// CHECK: linalg.conv_2d_ngchw_gfchw
func.func @grouped(%i: tensor<1x2x3x8x8xf32>, %f: tensor<2x4x3x3x3xf32>, %o: tensor<1x2x4x6x6xf32>) -> tensor<1x2x4x6x6xf32> {
  %r = linalg.conv_2d_ngchw_gfchw {strides = dense<1> : tensor<2xi64>, dilations = dense<1> : tensor<2xi64>}
    ins(%i, %f : tensor<1x2x3x8x8xf32>, tensor<2x4x3x3x3xf32>) outs(%o : tensor<1x2x4x6x6xf32>) -> tensor<1x2x4x6x6xf32>
  return %r : tensor<1x2x4x6x6xf32>
}
