// autopar-lower-embeddings after partitioning: with the table split by
// vocabulary, each rank looks up the ids in its block of rows (zero for the
// others) and one all-reduce sums the lookups; with the ids split, each rank
// reads the whole table (no offset, no mask, no collective).
// RUN: autopar-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(sharding-propagation,shard-partition,autopar-lower-embeddings))' | FileCheck %s

// Megatron's vocabulary-parallel embedding: each rank holds a block of the
// table's rows, looks up the ids in its block (zeros for the others) and one
// all-reduce sums the ranks' lookups.
// CHECK-LABEL: func.func @vocabulary
// CHECK-SAME: (%[[T:.*]]: tensor<4x4xf32>, %[[IDS:.*]]: tensor<2x3xi64>) -> tensor<2x3x4xf32>
// CHECK: %[[RANK:.*]] = shard.process_multi_index on @grid axes = [0]
// CHECK: %[[ROWS:.*]] = arith.constant 4 : index
// CHECK: %[[FIRST:.*]] = arith.muli %[[RANK]], %[[ROWS]]
// CHECK: %[[L:.*]] = linalg.generic {{.*}} ins(%[[IDS]] : tensor<2x3xi64>)
// The id as ONNX Gather takes it (negative from the end, clamped) ...
// CHECK: arith.minsi %{{.*}}, %c7
// ... then in this rank's rows, or zero.
// CHECK: %[[ROW:.*]] = arith.subi %{{.*}}, %[[FIRST]]
// CHECK: %[[IN:.*]] = arith.andi
// CHECK: %[[V:.*]] = tensor.extract %[[T]]
// CHECK: arith.select %[[IN]], %[[V]], %{{.*}} : f32
// CHECK: shard.all_reduce %[[L]] on @grid grid_axes = [0] : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
shard.grid @grid(shape = 2)
func.func @vocabulary(%t: tensor<8x4xf32>, %ids: tensor<2x3xi64>) -> tensor<2x3x4xf32> {
  %s = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %ts = shard.shard %t to %s : tensor<8x4xf32>
  %r = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %is = shard.shard %ids to %r : tensor<2x3xi64>
  %tu = shard.shard %ts to %s annotate_for_users : tensor<8x4xf32>
  %e = autopar.embedding %tu[%is] {num_rows = 8 : i64} : tensor<8x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
  %es = shard.shard %e to %r : tensor<2x3x4xf32>
  return %es : tensor<2x3x4xf32>
}

// -----

// Splitting the ids splits the result the same way; each rank reads the
// whole table, as the importer's lookup does (no offset, no mask).
// CHECK-LABEL: func.func @ids
// CHECK-SAME: (%[[T:.*]]: tensor<8x4xf32>, %[[IDS:.*]]: tensor<2x2xi64>) -> tensor<2x2x4xf32>
// CHECK-NOT: shard.
// CHECK-NOT: arith.subi
// CHECK: %[[I:.*]] = arith.minsi %{{.*}}, %c7
// CHECK: %[[D:.*]] = linalg.index 2
// CHECK: tensor.extract %[[T]][%[[I]], %[[D]]] : tensor<8x4xf32>
// CHECK-NOT: shard.
shard.grid @grid2(shape = 2)
func.func @ids(%t: tensor<8x4xf32>, %ids: tensor<2x4xi64>) -> tensor<2x4x4xf32> {
  %r = shard.sharding @grid2 split_axes = [[]] : !shard.sharding
  %ts = shard.shard %t to %r : tensor<8x4xf32>
  %s = shard.sharding @grid2 split_axes = [[], [0]] : !shard.sharding
  %is = shard.shard %ids to %s : tensor<2x4xi64>
  %e = autopar.embedding %ts[%is] {num_rows = 8 : i64} : tensor<8x4xf32>, tensor<2x4xi64> -> tensor<2x4x4xf32>
  %es = shard.shard %e to %s : tensor<2x4x4xf32>
  return %es : tensor<2x4x4xf32>
}
