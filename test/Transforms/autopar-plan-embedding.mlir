// autopar-plan of an embedding lookup for training on 8 GPUs: the table is
// split by vocabulary (Megatron's vocabulary-parallel embedding) and the
// lookup becomes autopar.embedding; partitioned and lowered, each rank looks
// up its block of rows and one all-reduce sums the lookups.
// RUN: autopar-opt %s --autopar-plan="cluster=dgx-h100:1 tp=8 mode=train" | FileCheck %s
// RUN: autopar-opt %s --pass-pipeline='builtin.module(autopar-plan{cluster=dgx-h100:1 tp=8 mode=train},func.func(sharding-propagation,autopar-check-partitionable,shard-partition,autopar-lower-embeddings))' | FileCheck %s --check-prefix=PARTITION

// An embedding lookup (ONNX Gather with run-time ids, as the importer writes
// it) in training on 8 GPUs: the search splits the table by vocabulary,
// Megatron's vocabulary-parallel embedding, because each rank then updates
// 1/8 of a 51M-row table, for one all-reduce of the lookup. (The hidden size
// 1020 is no multiple of 8; splitting the ids instead would all-reduce the
// whole table's gradient.) Partitioning needs the table as an operand:
// the lookup becomes autopar.embedding.
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[WTE:.*]]: tensor<50256x1020xf32> {{.*}}, %[[IDX:.*]]: tensor<16x512xi64>
// CHECK: %[[S:.*]] = shard.sharding @autopar_grid split_axes = {{\[\[}}1]]
// CHECK: %[[T:.*]] = shard.shard %[[WTE]] to %[[S]] :
// CHECK: %[[TU:.*]] = shard.shard %[[T]] to %{{.*}} annotate_for_users
// CHECK: %[[E:.*]] = autopar.embedding %[[TU]][%[[IDX]]] {{{.*}}num_rows = 50256 : i64} : tensor<50256x1020xf32>, tensor<16x512xi64> -> tensor<16x512x1020xf32>
// CHECK: shard.shard %[[E]] to %{{.*}} : tensor<16x512x1020xf32>

// Each rank holds 50256 / 8 rows and looks up the ids from its first row.
// PARTITION-LABEL: func.func @main
// PARTITION-SAME: (%{{.*}}: tensor<6282x1020xf32> {{.*}}, %{{.*}}: tensor<16x512xi64>
// PARTITION: shard.process_multi_index on @autopar_grid axes = [1]
// PARTITION: arith.constant 6282 : index
// PARTITION: %[[L:.*]] = linalg.generic
// PARTITION: arith.subi
// PARTITION: shard.all_reduce %[[L]] on @autopar_grid grid_axes = [1] : tensor<16x512x1020xf32>
#ids = affine_map<(d0, d1, d2) -> (d0, d1)>
#out = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
module attributes {autopar.model = "embedding"} {
  func.func @main(%wte: tensor<50256x1020xf32> {autopar.dtype = "float32", autopar.parameter = "wte.weight"},
                  %idx: tensor<16x512xi64> {autopar.dtype = "int64", autopar.input = "idx"})
      -> (tensor<16x512x1020xf32> {autopar.dtype = "float32", autopar.output = "x"}) {
    %e = tensor.empty() : tensor<16x512x1020xf32>
    %x = linalg.generic {indexing_maps = [#ids, #out], iterator_types = ["parallel", "parallel", "parallel"]} ins(%idx : tensor<16x512xi64>) outs(%e : tensor<16x512x1020xf32>) {
    ^bb0(%in: i64, %out: f32):
      %i = arith.index_cast %in : i64 to index
      %rows = arith.constant 50256 : index
      %c0 = arith.constant 0 : index
      %neg = arith.cmpi slt, %i, %c0 : index
      %wrapped = arith.addi %i, %rows : index
      %s = arith.select %neg, %wrapped, %i : index
      %lo = arith.maxsi %s, %c0 : index
      %last = arith.constant 50255 : index
      %row = arith.minsi %lo, %last : index
      %col = linalg.index 2 : index
      %v = tensor.extract %wte[%row, %col] : tensor<50256x1020xf32>
      linalg.yield %v : f32
    } -> tensor<16x512x1020xf32>
    return %x : tensor<16x512x1020xf32>
  }
}
