// autopar-lower-contractions-to-cpu-kernels: f32 matmul and batch_matmul (B
// transposed as a view) and NCHW and grouped convolutions on memrefs become
// calls to the BLAS kernels, the _overwrite_ ones after a zero fill; other
// element types and maps, and ops on tensors, stay linalg.
// RUN: autopar-opt %s --autopar-lower-contractions-to-cpu-kernels --split-input-file | FileCheck %s

// An f32 matmul on memrefs becomes a call to the BLAS-backed kernel; operands
// are cast to fully dynamic strided memrefs so that one declaration serves
// every shape and view.
// CHECK-LABEL: func.func private @autopar_cpu_matmul_f32
// CHECK-SAME: (memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?x?xf32, strided<[?, ?], offset: ?>>)
// CHECK-SAME: attributes {llvm.emit_c_interface}
// CHECK-LABEL: func.func @matmul
// CHECK-SAME: (%[[A:.*]]: memref<4x8xf32>, %[[B:.*]]: memref<8x16xf32>, %[[C:.*]]: memref<4x16xf32>)
// CHECK-DAG: %[[CA:.*]] = memref.cast %[[A]]
// CHECK-DAG: %[[CB:.*]] = memref.cast %[[B]]
// CHECK-DAG: %[[CC:.*]] = memref.cast %[[C]]
// CHECK: call @autopar_cpu_matmul_f32(%[[CA]], %[[CB]], %[[CC]])
// CHECK-NOT: linalg.matmul
func.func @matmul(%a: memref<4x8xf32>, %b: memref<8x16xf32>, %c: memref<4x16xf32>) {
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x16xf32>) outs(%c : memref<4x16xf32>)
  return
}

// -----

// Batched products go to the batched kernel.
// CHECK-LABEL: func.func @batch_matmul
// CHECK: call @autopar_cpu_batch_matmul_f32
func.func @batch_matmul(%a: memref<2x4x8xf32>, %b: memref<2x8x16xf32>, %c: memref<2x4x16xf32>) {
  linalg.batch_matmul ins(%a, %b : memref<2x4x8xf32>, memref<2x8x16xf32>) outs(%c : memref<2x4x16xf32>)
  return
}

// -----

// A batched product with B's matrix dims swapped (a batched matmul's
// adjoint) calls the same kernel on a transposed view of B.
// CHECK-LABEL: func.func @batch_matmul_transposed_b
// CHECK-SAME: (%[[A:[^:]*]]: memref<2x4x8xf32>, %[[B:[^:]*]]: memref<2x16x8xf32>, %[[C:[^:]*]]: memref<2x4x16xf32>)
// CHECK: %[[BT:.*]] = memref.transpose %[[B]] (d0, d1, d2) -> (d0, d2, d1) : memref<2x16x8xf32> to memref<2x8x16xf32, strided<[128, 1, 8]>>
// CHECK-DAG: %[[A1:.*]] = memref.cast %[[A]]
// CHECK-DAG: %[[B1:.*]] = memref.cast %[[BT]]
// CHECK-DAG: %[[C1:.*]] = memref.cast %[[C]]
// CHECK: call @autopar_cpu_batch_matmul_f32(%[[A1]], %[[B1]], %[[C1]])
func.func @batch_matmul_transposed_b(%a: memref<2x4x8xf32>, %b: memref<2x16x8xf32>, %c: memref<2x4x16xf32>) {
  linalg.batch_matmul indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>,
                                       affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>,
                                       affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>]
      ins(%a, %b : memref<2x4x8xf32>, memref<2x16x8xf32>) outs(%c : memref<2x4x16xf32>)
  return
}

// -----

// Convolutions pass their strides (h, w) and dilations (h, w) as i64
// arguments, in that order; h and w differ here, so a swap would show.
// CHECK-LABEL: func.func @conv
// CHECK-SAME: (%[[I:[^:]*]]: memref<1x3x9x9xf32>, %[[F:[^:]*]]: memref<4x3x3x3xf32>, %[[O:[^:]*]]: memref<1x4x4x2xf32>)
// CHECK-DAG: %[[TWO:.*]] = arith.constant 2 : i64
// CHECK-DAG: %[[THREE:.*]] = arith.constant 3 : i64
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1 : i64
// CHECK-DAG: %[[CI:.*]] = memref.cast %[[I]]
// CHECK-DAG: %[[CF:.*]] = memref.cast %[[F]]
// CHECK-DAG: %[[CO:.*]] = memref.cast %[[O]]
// CHECK: call @autopar_cpu_conv2d_nchw_f32(%[[CI]], %[[CF]], %[[CO]], %[[TWO]], %[[THREE]], %[[ONE]], %[[TWO]])
func.func @conv(%i: memref<1x3x9x9xf32>, %f: memref<4x3x3x3xf32>, %o: memref<1x4x4x2xf32>) {
  linalg.conv_2d_nchw_fchw {strides = dense<[2, 3]> : tensor<2xi64>, dilations = dense<[1, 2]> : tensor<2xi64>}
    ins(%i, %f : memref<1x3x9x9xf32>, memref<4x3x3x3xf32>) outs(%o : memref<1x4x4x2xf32>)
  return
}

// -----

// Grouped convolutions use the grouped kernel.
// CHECK-LABEL: func.func @grouped_conv
// CHECK: call @autopar_cpu_conv2d_ngchw_f32
func.func @grouped_conv(%i: memref<1x2x3x8x8xf32>, %f: memref<2x4x3x3x3xf32>, %o: memref<1x2x4x6x6xf32>) {
  linalg.conv_2d_ngchw_gfchw {strides = dense<1> : tensor<2xi64>, dilations = dense<1> : tensor<2xi64>}
    ins(%i, %f : memref<1x2x3x8x8xf32>, memref<2x4x3x3x3xf32>) outs(%o : memref<1x2x4x6x6xf32>)
  return
}

// -----

// Other element types keep their linalg form (they lower to loops).
// CHECK-LABEL: func.func @integer_matmul
// CHECK: linalg.matmul
// CHECK-NOT: call
func.func @integer_matmul(%a: memref<4x8xi32>, %b: memref<8x16xi32>, %c: memref<4x16xi32>) {
  linalg.matmul ins(%a, %b : memref<4x8xi32>, memref<8x16xi32>) outs(%c : memref<4x16xi32>)
  return
}

// -----

// Ops on tensors are left alone: the pass runs after bufferization.
// CHECK-LABEL: func.func @on_tensors
// CHECK: linalg.matmul
func.func @on_tensors(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %c: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %r = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%c : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}

// -----

// A transposed B (a Gemm with transB=1: weights stored [N, K]) is passed as a
// transposed view; nothing is copied.
// CHECK-LABEL: func.func @matmul_transpose_b
// CHECK-SAME: (%[[A:.*]]: memref<4x8xf32>, %[[B:.*]]: memref<16x8xf32>, %[[C:.*]]: memref<4x16xf32>)
// CHECK: %[[BT:.*]] = memref.transpose %[[B]] (d0, d1) -> (d1, d0) : memref<16x8xf32> to memref<8x16xf32, strided<[1, 8]>>
// CHECK: %[[CBT:.*]] = memref.cast %[[BT]]
// CHECK: call @autopar_cpu_matmul_f32(%{{.*}}, %[[CBT]], %{{.*}})
func.func @matmul_transpose_b(%a: memref<4x8xf32>, %b: memref<16x8xf32>, %c: memref<4x16xf32>) {
  linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
    ins(%a, %b : memref<4x8xf32>, memref<16x8xf32>) outs(%c : memref<4x16xf32>)
  return
}

// -----

// Any other map (here a broadcast B) keeps the linalg form.
// CHECK-LABEL: func.func @matmul_broadcast_b
// CHECK: linalg.matmul
// CHECK-NOT: call
func.func @matmul_broadcast_b(%a: memref<4x8xf32>, %b: memref<8xf32>, %c: memref<4x16xf32>) {
  linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k)>, affine_map<(m, n, k) -> (m, n)>]
    ins(%a, %b : memref<4x8xf32>, memref<8xf32>) outs(%c : memref<4x16xf32>)
  return
}

// -----

// A zero fill of the output right before a product (views and constants in
// between touch no memory) is dropped: the overwrite kernel stores the sum.
// CHECK-LABEL: func.func @matmul_into_zeros
// CHECK-SAME: (%[[A:[^:]*]]: memref<4x8xf32>, %[[B:[^:]*]]: memref<8x16xf32>, %[[C:[^:]*]]: memref<4x16xf32>)
// CHECK-NOT: linalg.fill
// CHECK: call @autopar_cpu_matmul_overwrite_f32
// CHECK-NOT: linalg.fill
// CHECK: return
func.func @matmul_into_zeros(%a: memref<4x8xf32>, %b: memref<8x16xf32>, %c: memref<4x16xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<4x16xf32>)
  %bt = memref.cast %b : memref<8x16xf32> to memref<8x16xf32>
  linalg.matmul ins(%a, %bt : memref<4x8xf32>, memref<8x16xf32>) outs(%c : memref<4x16xf32>)
  return
}

// -----

// The same for batched products and both convolutions.
// CHECK-LABEL: func.func @others_into_zeros
// CHECK-NOT: linalg.fill
// CHECK: call @autopar_cpu_batch_matmul_overwrite_f32
// CHECK: call @autopar_cpu_conv2d_nchw_overwrite_f32
// CHECK: call @autopar_cpu_conv2d_ngchw_overwrite_f32
func.func @others_into_zeros(%a: memref<2x4x8xf32>, %b: memref<2x8x16xf32>, %c: memref<2x4x16xf32>,
                             %i: memref<1x3x9x9xf32>, %f: memref<4x3x3x3xf32>, %o: memref<1x4x4x4xf32>,
                             %gi: memref<1x2x3x8x8xf32>, %gf: memref<2x4x3x3x3xf32>, %go: memref<1x2x4x6x6xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<2x4x16xf32>)
  linalg.batch_matmul ins(%a, %b : memref<2x4x8xf32>, memref<2x8x16xf32>) outs(%c : memref<2x4x16xf32>)
  linalg.fill ins(%zero : f32) outs(%o : memref<1x4x4x4xf32>)
  linalg.conv_2d_nchw_fchw {strides = dense<2> : tensor<2xi64>, dilations = dense<1> : tensor<2xi64>}
    ins(%i, %f : memref<1x3x9x9xf32>, memref<4x3x3x3xf32>) outs(%o : memref<1x4x4x4xf32>)
  linalg.fill ins(%zero : f32) outs(%go : memref<1x2x4x6x6xf32>)
  linalg.conv_2d_ngchw_gfchw {strides = dense<1> : tensor<2xi64>, dilations = dense<1> : tensor<2xi64>}
    ins(%gi, %gf : memref<1x2x3x8x8xf32>, memref<2x4x3x3x3xf32>) outs(%go : memref<1x2x4x6x6xf32>)
  return
}

// -----

// The fill stays, and the product accumulates, when the fill is not of
// zeros, is of another buffer, or something that touches memory comes in
// between (here a copy that reads the zeros).
// CHECK-LABEL: func.func @fills_that_stay
// CHECK-SAME: (%[[A:[^:]*]]: memref<4x8xf32>, %[[B:[^:]*]]: memref<8x16xf32>, %[[C:[^:]*]]: memref<4x16xf32>, %[[D:[^:]*]]: memref<4x16xf32>)
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[C]] : memref<4x16xf32>)
// CHECK: call @autopar_cpu_matmul_f32
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[D]] : memref<4x16xf32>)
// CHECK: call @autopar_cpu_matmul_f32
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[C]] : memref<4x16xf32>)
// CHECK: memref.copy %[[C]], %[[D]]
// CHECK: call @autopar_cpu_matmul_f32
// CHECK-NOT: overwrite
func.func @fills_that_stay(%a: memref<4x8xf32>, %b: memref<8x16xf32>, %c: memref<4x16xf32>, %d: memref<4x16xf32>) {
  %one = arith.constant 1.0 : f32
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%one : f32) outs(%c : memref<4x16xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x16xf32>) outs(%c : memref<4x16xf32>)
  linalg.fill ins(%zero : f32) outs(%d : memref<4x16xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x16xf32>) outs(%c : memref<4x16xf32>)
  linalg.fill ins(%zero : f32) outs(%c : memref<4x16xf32>)
  memref.copy %c, %d : memref<4x16xf32> to memref<4x16xf32>
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x16xf32>) outs(%c : memref<4x16xf32>)
  return
}
