// autopar's sharding models for reshapes, slices and pads: a split of a
// group's outermost dim, of a dim a slice takes whole, or of a dim a pad does
// not pad passes through with no collective; a split of an inner, cut or
// padded dim is gathered first.
// RUN: autopar-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(sharding-propagation,shard-partition))' | FileCheck %s

// A split of the outermost dim of a reassociation group passes through
// expand_shape and collapse_shape (attention's [B, S, H*D] <-> [B, S, H, D]
// with the heads split), so partitioning needs no collective around them.
// CHECK-LABEL: func.func @heads
// CHECK-SAME: (%[[X:.*]]: tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
// CHECK: %[[E:.*]] = tensor.expand_shape %[[X]] {{\[\[}}0], [1], [2, 3]] output_shape [2, 8, 2, 16] : tensor<2x8x32xf32> into tensor<2x8x2x16xf32>
// CHECK: %[[C:.*]] = tensor.collapse_shape %[[E]] {{\[\[}}0], [1], [2, 3]] : tensor<2x8x2x16xf32> into tensor<2x8x32xf32>
// CHECK-NOT: shard.all
// CHECK: return %[[C]]
shard.grid @grid(shape = 2)
func.func @heads(%x: tensor<2x8x64xf32>) -> tensor<2x8x64xf32> {
  %s = shard.sharding @grid split_axes = [[], [], [0]] : !shard.sharding
  %xs = shard.shard %x to %s annotate_for_users : tensor<2x8x64xf32>
  %e = tensor.expand_shape %xs [[0], [1], [2, 3]] output_shape [2, 8, 4, 16] : tensor<2x8x64xf32> into tensor<2x8x4x16xf32>
  %c = tensor.collapse_shape %e [[0], [1], [2, 3]] : tensor<2x8x4x16xf32> into tensor<2x8x64xf32>
  %r = shard.shard %c to %s : tensor<2x8x64xf32>
  return %r : tensor<2x8x64xf32>
}

// -----

// Splitting an inner dim of a group would interleave the blocks: the reshape
// runs replicated and the split tensor is gathered first.
// CHECK-LABEL: func.func @inner_dim
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK: %[[G:.*]] = shard.all_gather %[[X]] on @grid2 grid_axes = [0] gather_axis = 1 : tensor<4x8xf32> -> tensor<4x16xf32>
// CHECK: tensor.collapse_shape {{.*}} : tensor<4x16xf32> into tensor<64xf32>
shard.grid @grid2(shape = 2)
func.func @inner_dim(%x: tensor<4x16xf32>) -> tensor<64xf32> {
  %s = shard.sharding @grid2 split_axes = [[], [0]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<4x16xf32>
  %c = tensor.collapse_shape %xs [[0, 1]] : tensor<4x16xf32> into tensor<64xf32>
  return %c : tensor<64xf32>
}

// -----

// A slice that takes a split dim whole slices each rank's block with the same
// offsets on the other dims (ONNX Slice/Split along another dim).
// CHECK-LABEL: func.func @slice_kept_dim
// CHECK-SAME: (%[[X:.*]]: tensor<4x12xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: %[[S:.*]] = tensor.extract_slice %[[X]][0, 4] [4, 4] [1, 1] : tensor<4x12xf32> to tensor<4x4xf32>
// CHECK-NEXT: return %[[S]]
shard.grid @grid3(shape = 2)
func.func @slice_kept_dim(%x: tensor<8x12xf32>) -> tensor<8x4xf32> {
  %s = shard.sharding @grid3 split_axes = [[0]] : !shard.sharding
  %xs = shard.shard %x to %s annotate_for_users : tensor<8x12xf32>
  %v = tensor.extract_slice %xs[0, 4] [8, 4] [1, 1] : tensor<8x12xf32> to tensor<8x4xf32>
  %r = shard.shard %v to %s : tensor<8x4xf32>
  return %r : tensor<8x4xf32>
}

// -----

// A dim the slice cuts cannot stay split: it is gathered first.
// CHECK-LABEL: func.func @slice_cut_dim
// CHECK-SAME: (%[[X:.*]]: tensor<8x6xf32>)
// CHECK: %[[G:.*]] = shard.all_gather %[[X]] on @grid4 grid_axes = [0] gather_axis = 1 : tensor<8x6xf32> -> tensor<8x12xf32>
// CHECK: tensor.extract_slice %{{.*}}[0, 4] [8, 4] [1, 1] : tensor<8x12xf32> to tensor<8x4xf32>
shard.grid @grid4(shape = 2)
func.func @slice_cut_dim(%x: tensor<8x12xf32>) -> tensor<8x4xf32> {
  %s = shard.sharding @grid4 split_axes = [[], [0]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<8x12xf32>
  %v = tensor.extract_slice %xs[0, 4] [8, 4] [1, 1] : tensor<8x12xf32> to tensor<8x4xf32>
  return %v : tensor<8x4xf32>
}

// -----

// Rank-reducing: one part of a [batch, seq, part, width] projection
// (autopar-expose-projection-parts) with the width split stays split.
// CHECK-LABEL: func.func @slice_rank_reducing
// CHECK-SAME: (%[[X:.*]]: tensor<2x8x3x8xf32>) -> tensor<2x8x8xf32>
// CHECK-NEXT: %[[S:.*]] = tensor.extract_slice %[[X]][0, 0, 1, 0] [2, 8, 1, 8] [1, 1, 1, 1] : tensor<2x8x3x8xf32> to tensor<2x8x8xf32>
// CHECK-NEXT: return %[[S]]
shard.grid @grid5(shape = 2)
func.func @slice_rank_reducing(%x: tensor<2x8x3x16xf32>) -> tensor<2x8x16xf32> {
  %s = shard.sharding @grid5 split_axes = [[], [], [], [0]] : !shard.sharding
  %xs = shard.shard %x to %s annotate_for_users : tensor<2x8x3x16xf32>
  %v = tensor.extract_slice %xs[0, 0, 1, 0] [2, 8, 1, 16] [1, 1, 1, 1] : tensor<2x8x3x16xf32> to tensor<2x8x16xf32>
  %r = shard.sharding @grid5 split_axes = [[], [], [0]] : !shard.sharding
  %vs = shard.shard %v to %r : tensor<2x8x16xf32>
  return %vs : tensor<2x8x16xf32>
}

// -----

// Convolution padding: a split of a dim it does not pad (the channels)
// passes through.
// CHECK-LABEL: func.func @pad_channels
// CHECK-SAME: (%[[X:.*]]: tensor<1x2x6x6xf32>) -> tensor<1x2x8x8xf32>
// CHECK-NOT: shard.all
// CHECK: %[[P:.*]] = tensor.pad %[[X]] low[0, 0, 1, 1] high[0, 0, 1, 1]
// CHECK: } : tensor<1x2x6x6xf32> to tensor<1x2x8x8xf32>
// CHECK-NEXT: return %[[P]]
shard.grid @grid6(shape = 2)
func.func @pad_channels(%x: tensor<1x4x6x6xf32>) -> tensor<1x4x8x8xf32> {
  %s = shard.sharding @grid6 split_axes = [[], [0]] : !shard.sharding
  %xs = shard.shard %x to %s annotate_for_users : tensor<1x4x6x6xf32>
  %c = arith.constant 0.0 : f32
  %p = tensor.pad %xs low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %c : f32
  } : tensor<1x4x6x6xf32> to tensor<1x4x8x8xf32>
  %r = shard.shard %p to %s : tensor<1x4x8x8xf32>
  return %r : tensor<1x4x8x8xf32>
}

// -----

// A padded dim would need the neighbours' edges: it is gathered first.
// CHECK-LABEL: func.func @pad_padded_dim
// CHECK-SAME: (%[[X:.*]]: tensor<1x4x3x6xf32>)
// CHECK: shard.all_gather %[[X]] on @grid7 grid_axes = [0] gather_axis = 2 : tensor<1x4x3x6xf32> -> tensor<1x4x6x6xf32>
// CHECK: tensor.pad
// CHECK: } : tensor<1x4x6x6xf32> to tensor<1x4x8x8xf32>
shard.grid @grid7(shape = 2)
func.func @pad_padded_dim(%x: tensor<1x4x6x6xf32>) -> tensor<1x4x8x8xf32> {
  %s = shard.sharding @grid7 split_axes = [[], [], [0]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<1x4x6x6xf32>
  %c = arith.constant 0.0 : f32
  %p = tensor.pad %xs low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %c : f32
  } : tensor<1x4x6x6xf32> to tensor<1x4x8x8xf32>
  return %p : tensor<1x4x8x8xf32>
}

// -----

// tensor.insert_slice (the gradient of a slice): a split of a dim it writes
// whole passes through, each rank inserting its block of the source into its
// block of the destination, with no collective.
// CHECK-LABEL: func.func @insert_whole_dim
// CHECK-SAME: (%[[SRC:.*]]: tensor<4x4xf32>, %[[DST:.*]]: tensor<4x12xf32>)
// CHECK: %[[I:.*]] = tensor.insert_slice %[[SRC]] into %[[DST]][0, 8] [4, 4] [1, 1] : tensor<4x4xf32> into tensor<4x12xf32>
// CHECK-NOT: shard.all
// CHECK: return %[[I]]
shard.grid @grid(shape = 2)
func.func @insert_whole_dim(%src: tensor<8x4xf32>, %dst: tensor<8x12xf32>) -> tensor<8x12xf32> {
  %s = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %srcs = shard.shard %src to %s annotate_for_users : tensor<8x4xf32>
  %dsts = shard.shard %dst to %s annotate_for_users : tensor<8x12xf32>
  %i = tensor.insert_slice %srcs into %dsts[0, 8] [8, 4] [1, 1] : tensor<8x4xf32> into tensor<8x12xf32>
  %r = shard.shard %i to %s : tensor<8x12xf32>
  return %r : tensor<8x12xf32>
}

// -----

// A split of the dim it writes part of (the fused QKV dim) would not hold
// the part: source and destination are gathered, the insert runs whole.
// CHECK-LABEL: func.func @insert_cut_dim
// CHECK-SAME: (%[[SRC:.*]]: tensor<8x2xf32>, %[[DST:.*]]: tensor<8x6xf32>)
// CHECK-DAG: %[[GS:.*]] = shard.all_gather %[[SRC]] on @grid grid_axes = [0] gather_axis = 1 : tensor<8x2xf32> -> tensor<8x4xf32>
// CHECK-DAG: %[[GD:.*]] = shard.all_gather %[[DST]] on @grid grid_axes = [0] gather_axis = 1 : tensor<8x6xf32> -> tensor<8x12xf32>
// CHECK-DAG: %[[CS:.*]] = tensor.cast %[[GS]]
// CHECK-DAG: %[[CD:.*]] = tensor.cast %[[GD]]
// CHECK: tensor.insert_slice %[[CS]] into %[[CD]][0, 8] [8, 4] [1, 1] : tensor<8x4xf32> into tensor<8x12xf32>
shard.grid @grid(shape = 2)
func.func @insert_cut_dim(%src: tensor<8x4xf32>, %dst: tensor<8x12xf32>) -> tensor<8x12xf32> {
  %s = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %srcs = shard.shard %src to %s : tensor<8x4xf32>
  %dsts = shard.shard %dst to %s : tensor<8x12xf32>
  %i = tensor.insert_slice %srcs into %dsts[0, 8] [8, 4] [1, 1] : tensor<8x4xf32> into tensor<8x12xf32>
  return %i : tensor<8x12xf32>
}

// -----

// A body that reads its position (linalg.index: Dropout's mask hashes the
// global element index) would see a rank's local positions if its loop were
// split: that loop stays whole and the split input is gathered first.
// CHECK-LABEL: func.func @indexed_loop
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>) -> tensor<8xf32>
// CHECK: %[[G:.*]] = shard.all_gather %[[X]] on @grid grid_axes = [0] gather_axis = 0 : tensor<4xf32> -> tensor<8xf32>
// CHECK: linalg.generic {{.*}} ins(%{{.*}} : tensor<8xf32>)
// CHECK: linalg.index 0
shard.grid @grid(shape = 2)
func.func @indexed_loop(%x: tensor<8xf32>) -> tensor<8xf32> {
  %s = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<8xf32>
  %e = tensor.empty() : tensor<8xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%xs : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %i = linalg.index 0 : index
    %c = arith.index_cast %i : index to i64
    %f = arith.sitofp %c : i64 to f32
    %r = arith.addf %in, %f : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// A sum over the data-parallel replicas (grid axis 0) of a block split over
// tp (axis 1): each tp rank sums its own block with the replicas holding it.
// CHECK-LABEL: func.func @all_reduce_of_block
// CHECK-SAME: (%[[X:.*]]: tensor<8x2xf32>) -> tensor<8x2xf32>
// CHECK: %[[R:.*]] = shard.all_reduce %[[X]] on @grid2d grid_axes = [0] : tensor<8x2xf32> -> tensor<8x2xf32>
// CHECK-NOT: shard.all_gather
// CHECK: return %[[R]]
shard.grid @grid2d(shape = 2x2)
func.func @all_reduce_of_block(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %s = shard.sharding @grid2d split_axes = [[], [1]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<8x4xf32>
  %r = shard.all_reduce %xs on @grid2d grid_axes = [0] : tensor<8x4xf32> -> tensor<8x4xf32>
  return %r : tensor<8x4xf32>
}
