// autopar-lower-collectives-to-runtime: each shard collective becomes a call
// to autopar_rt_<op>_<type> on unranked buffers with the grid axis and dims,
// grid queries constants or autopar_rt_grid_coord, all_slice a slice, a sliced
// sum a reduce-scatter; every unsupported collective is reported.
// RUN: autopar-opt %s --split-input-file --verify-diagnostics --autopar-lower-collectives-to-runtime | FileCheck %s

// Each collective becomes: its operand as a buffer, a fresh result buffer, a
// runtime call taking both as unranked memrefs plus the grid axis and dims,
// and the result buffer as a tensor again.
// CHECK-DAG: func.func private @autopar_rt_all_reduce_f32(memref<*xf32>, memref<*xf32>, i64) attributes {llvm.emit_c_interface}
// CHECK-DAG: func.func private @autopar_rt_all_gather_f32(memref<*xf32>, memref<*xf32>, i64, i64) attributes {llvm.emit_c_interface}
// CHECK-DAG: func.func private @autopar_rt_reduce_scatter_f32(memref<*xf32>, memref<*xf32>, i64, i64) attributes {llvm.emit_c_interface}
// CHECK-DAG: func.func private @autopar_rt_all_to_all_f32(memref<*xf32>, memref<*xf32>, i64, i64, i64) attributes {llvm.emit_c_interface}
// CHECK-DAG: func.func private @autopar_rt_all_reduce_max_i64(memref<*xi64>, memref<*xi64>, i64) attributes {llvm.emit_c_interface}
// CHECK-DAG: func.func private @autopar_rt_grid_coord(i64) -> i64
// CHECK-LABEL: func.func @collectives
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>, %[[I:.*]]: tensor<4xi64>)
// CHECK: %[[IN:.*]] = bufferization.to_buffer %[[X]] read_only : tensor<4x8xf32> to memref<4x8xf32>
// CHECK: %[[OUT:.*]] = memref.alloc() : memref<4x8xf32>
// CHECK: %[[INU:.*]] = memref.cast %[[IN]] : memref<4x8xf32> to memref<*xf32>
// CHECK: %[[OUTU:.*]] = memref.cast %[[OUT]] : memref<4x8xf32> to memref<*xf32>
// CHECK: %[[TP:.*]] = arith.constant 1 : i64
// CHECK: call @autopar_rt_all_reduce_f32(%[[INU]], %[[OUTU]], %[[TP]])
// CHECK: %[[SUM:.*]] = bufferization.to_tensor %[[OUT]] restrict writable : memref<4x8xf32> to tensor<4x8xf32>
// CHECK: memref.alloc() : memref<4x32xf32>
// CHECK: call @autopar_rt_all_gather_f32(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (memref<*xf32>, memref<*xf32>, i64, i64) -> ()
// CHECK: memref.alloc() : memref<1x8xf32>
// CHECK: call @autopar_rt_reduce_scatter_f32
// CHECK: memref.alloc() : memref<1x32xf32>
// CHECK: call @autopar_rt_all_to_all_f32
// CHECK: call @autopar_rt_all_reduce_max_i64
// CHECK: %[[C:.*]] = call @autopar_rt_grid_coord(%{{.*}}) : (i64) -> i64
// CHECK: %[[CI:.*]] = arith.index_cast %[[C]] : i64 to index
// CHECK: %[[N:.*]] = arith.constant 4 : index
// CHECK: return %[[SUM]], {{.*}}, %[[CI]], %[[N]]
shard.grid @grid(shape = 2x4)
func.func @collectives(%x: tensor<4x8xf32>, %i: tensor<4xi64>)
    -> (tensor<4x8xf32>, tensor<4x32xf32>, tensor<1x8xf32>, tensor<1x32xf32>, tensor<4xi64>, index, index) {
  %0 = shard.all_reduce %x on @grid grid_axes = [1] : tensor<4x8xf32> -> tensor<4x8xf32>
  %1 = shard.all_gather %x on @grid grid_axes = [1] gather_axis = 1 : tensor<4x8xf32> -> tensor<4x32xf32>
  %2 = shard.reduce_scatter %x on @grid grid_axes = [1] scatter_axis = 0 : tensor<4x8xf32> -> tensor<1x8xf32>
  %3 = shard.all_to_all %x on @grid grid_axes = [1] split_axis = 0 concat_axis = 1 : tensor<4x8xf32> -> tensor<1x32xf32>
  %4 = shard.all_reduce %i on @grid grid_axes = [1] reduction = max : tensor<4xi64> -> tensor<4xi64>
  %5 = shard.process_multi_index on @grid axes = [1] : index
  %6 = shard.grid_shape @grid axes = [1] : index
  return %0, %1, %2, %3, %4, %5, %6 : tensor<4x8xf32>, tensor<4x32xf32>, tensor<1x8xf32>, tensor<1x32xf32>, tensor<4xi64>, index, index
}

// -----

// One communicator per grid axis: a collective over two axes is an error.
shard.grid @grid2(shape = 2x4)
func.func @two_axes(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @below {{collectives over 2 grid axes at once are not supported}}
  %0 = shard.all_reduce %x on @grid2 grid_axes = [0, 1] : tensor<4x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

shard.grid @grid3(shape = 4)
func.func @i16(%x: tensor<4x8xi16>) -> tensor<4x8xi16> {
  // expected-error @below {{all_reduce of 'tensor<4x8xi16>' is not supported (static f32, f64, i32 or i64 tensors; bf16 and f16 run as f32)}}
  %0 = shard.all_reduce %x on @grid3 grid_axes = [0] : tensor<4x8xi16> -> tensor<4x8xi16>
  return %0 : tensor<4x8xi16>
}

// -----

// Mixed precision: a collective of bf16 or f16 values runs on f32, its
// operand widened and its result rounded back (MPI has no 16-bit floats).
// CHECK-LABEL: func.func @half_floats
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xbf16>, %[[Y:.*]]: tensor<4x8xf16>)
// CHECK: %[[XW:.*]] = linalg.generic {{.*}} ins(%[[X]] : tensor<4x8xbf16>) outs(%{{.*}} : tensor<4x8xf32>)
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: %[[XB:.*]] = bufferization.to_buffer %[[XW]]
// CHECK: call @autopar_rt_all_reduce_f32
// CHECK: %[[SUM:.*]] = bufferization.to_tensor
// CHECK: %[[XN:.*]] = linalg.generic {{.*}} ins(%[[SUM]] : tensor<4x8xf32>) outs(%{{.*}} : tensor<4x8xbf16>)
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: linalg.generic {{.*}} ins(%[[Y]] : tensor<4x8xf16>) outs(%{{.*}} : tensor<4x8xf32>)
// CHECK: call @autopar_rt_all_gather_f32
// CHECK: %[[G:.*]] = bufferization.to_tensor {{.*}} : memref<16x8xf32> to tensor<16x8xf32>
// CHECK: %[[YN:.*]] = linalg.generic {{.*}} ins(%[[G]] : tensor<16x8xf32>) outs(%{{.*}} : tensor<16x8xf16>)
// CHECK: return %[[XN]], %[[YN]] : tensor<4x8xbf16>, tensor<16x8xf16>
shard.grid @grid5(shape = 4)
func.func @half_floats(%x: tensor<4x8xbf16>, %y: tensor<4x8xf16>) -> (tensor<4x8xbf16>, tensor<16x8xf16>) {
  %0 = shard.all_reduce %x on @grid5 grid_axes = [0] : tensor<4x8xbf16> -> tensor<4x8xbf16>
  %1 = shard.all_gather %y on @grid5 grid_axes = [0] gather_axis = 0 : tensor<4x8xf16> -> tensor<16x8xf16>
  return %0, %1 : tensor<4x8xbf16>, tensor<16x8xf16>
}

// -----

// Every collective the runtime cannot run is reported, not only the first;
// nothing is rewritten then (the supported gather stays).
shard.grid @grid4(shape = 2x4)
func.func @several(%x: tensor<4x8xi16>, %y: tensor<4x8xf32>) -> (tensor<4x8xi16>, tensor<4x8xf32>, tensor<8x8xf32>) {
  // expected-error @below {{all_reduce of 'tensor<4x8xi16>' is not supported}}
  %0 = shard.all_reduce %x on @grid4 grid_axes = [0] : tensor<4x8xi16> -> tensor<4x8xi16>
  // expected-error @below {{collectives over 2 grid axes at once are not supported}}
  %1 = shard.all_reduce %y on @grid4 grid_axes = [0, 1] : tensor<4x8xf32> -> tensor<4x8xf32>
  %2 = shard.all_gather %y on @grid4 grid_axes = [0] gather_axis = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
  return %0, %1, %2 : tensor<4x8xi16>, tensor<4x8xf32>, tensor<8x8xf32>
}

// -----

// all_slice moves no data: the rank's block at coord * block size.
// CHECK-LABEL: func.func @all_slice
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK: %[[SIZE:.*]] = arith.constant 2 : index
// CHECK: %[[C:.*]] = call @autopar_rt_grid_coord(%{{.*}}) : (i64) -> i64
// CHECK: %[[CI:.*]] = arith.index_cast %[[C]] : i64 to index
// CHECK: %[[OFF:.*]] = arith.muli %[[CI]], %[[SIZE]] : index
// CHECK: %[[S:.*]] = tensor.extract_slice %[[X]][0, %[[OFF]]] [4, 2] [1, 1] : tensor<4x8xf32> to tensor<4x2xf32>
// CHECK: return %[[S]]
shard.grid @grid3(shape = 2x4)
func.func @all_slice(%x: tensor<4x8xf32>) -> tensor<4x2xf32> {
  %0 = shard.all_slice %x on @grid3 grid_axes = [1] slice_axis = 1 : tensor<4x8xf32> -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}

// -----

// A sum all-reduced only to be sliced (how shard-partition turns a partial
// sum into a split) becomes one reduce-scatter; an all-reduce with other
// users stays.
// CHECK-LABEL: func.func @reduce_then_slice
// CHECK-NOT: autopar_rt_all_reduce_f32
// CHECK: memref.alloc() : memref<4x2xf32>
// CHECK: call @autopar_rt_reduce_scatter_f32
// CHECK-NOT: autopar_rt_all_reduce_f32
// CHECK-LABEL: func.func @reduce_used_twice
// CHECK: call @autopar_rt_all_reduce_f32
// CHECK: tensor.extract_slice
shard.grid @grid4(shape = 4)
func.func @reduce_then_slice(%x: tensor<4x8xf32>) -> tensor<4x2xf32> {
  %0 = shard.all_reduce %x on @grid4 grid_axes = [0] : tensor<4x8xf32> -> tensor<4x8xf32>
  %1 = shard.all_slice %0 on @grid4 grid_axes = [0] slice_axis = 1 : tensor<4x8xf32> -> tensor<4x2xf32>
  return %1 : tensor<4x2xf32>
}
func.func @reduce_used_twice(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x2xf32>) {
  %0 = shard.all_reduce %x on @grid4 grid_axes = [0] : tensor<4x8xf32> -> tensor<4x8xf32>
  %1 = shard.all_slice %0 on @grid4 grid_axes = [0] slice_axis = 1 : tensor<4x8xf32> -> tensor<4x2xf32>
  return %0, %1 : tensor<4x8xf32>, tensor<4x2xf32>
}
