// autopar.attention and autopar.attention_grad's sharding model: a split of
// the batch or of the heads reaches every operand and result (a grouped-query
// attention's key/value heads split with the query heads when they divide
// by the split), and each rank runs the op on its blocks with no collective;
// the queries, keys and head dims stay whole (gathered first), and so do a
// mask's broadcast dims.
// RUN: autopar-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(sharding-propagation))' | FileCheck %s --check-prefix=PROP
// RUN: autopar-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(sharding-propagation,autopar-check-partitionable,shard-partition))' | FileCheck %s

// The query's head split reaches the key, the value, both destinations and
// both results.
// PROP-LABEL: func.func @heads
// PROP-SAME: (%[[Q:[^:]*]]: tensor<2x4x16x8xf32>, %[[K:[^:]*]]: tensor<2x4x16x8xf32>, %[[V:[^:]*]]: tensor<2x4x16x8xf32>)
// PROP-DAG: %[[KS:[^ ]*]] = shard.shard %[[K]] to %[[SK:[^ ]*]] annotate_for_users : tensor<2x4x16x8xf32>
// PROP-DAG: %[[SK]] = shard.sharding @grid split_axes = {{\[\[}}], [0]] : !shard.sharding
// PROP-DAG: %[[VS:[^ ]*]] = shard.shard %[[V]] to %[[SV:[^ ]*]] annotate_for_users : tensor<2x4x16x8xf32>
// PROP-DAG: %[[SV]] = shard.sharding @grid split_axes = {{\[\[}}], [0]] : !shard.sharding
// PROP-DAG: %[[O0:[^ ]*]] = tensor.empty() : tensor<2x4x16x8xf32>
// PROP-DAG: shard.shard %[[O0]] to %[[SO:[^ ]*]] : tensor<2x4x16x8xf32>
// PROP-DAG: %[[SO]] = shard.sharding @grid split_axes = {{\[\[}}], [0]] : !shard.sharding
// PROP-DAG: %[[L0:[^ ]*]] = tensor.empty() : tensor<2x4x16xf32>
// PROP-DAG: shard.shard %[[L0]] to %[[SL:[^ ]*]] : tensor<2x4x16xf32>
// PROP-DAG: %[[SL]] = shard.sharding @grid split_axes = {{\[\[}}], [0]] : !shard.sharding
// PROP: %[[A:.*]]:2 = autopar.attention ins(%{{.*}}, %[[KS]], %[[VS]] : {{.*}}) outs(
// PROP-DAG: shard.shard %[[A]]#1 to %[[SR1:[^ ]*]] : tensor<2x4x16xf32>
// PROP-DAG: %[[SR1]] = shard.sharding @grid split_axes = {{\[\[}}], [0]] : !shard.sharding
// PROP-DAG: shard.shard %[[A]]#0 to %[[SR0:[^ ]*]] : tensor<2x4x16x8xf32>
// PROP-DAG: %[[SR0]] = shard.sharding @grid split_axes = {{\[\[}}], [0]] : !shard.sharding
// CHECK-LABEL: func.func @heads
// CHECK-SAME: (%[[Q:[^:]*]]: tensor<2x2x16x8xf32>, %[[K:[^:]*]]: tensor<2x2x16x8xf32>, %[[V:[^:]*]]: tensor<2x2x16x8xf32>)
// CHECK-SAME: -> (tensor<2x2x16x8xf32>, tensor<2x2x16xf32>)
// CHECK-NOT: shard.
// CHECK-DAG: %[[O0:.*]] = tensor.empty() : tensor<2x2x16x8xf32>
// CHECK-DAG: %[[L0:.*]] = tensor.empty() : tensor<2x2x16xf32>
// CHECK: %[[A:.*]]:2 = autopar.attention ins(%[[Q]], %[[K]], %[[V]] : tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>) outs(%[[O0]], %[[L0]] : tensor<2x2x16x8xf32>, tensor<2x2x16xf32>) {causal, scale = 3.500000e-01 : f64} -> tensor<2x2x16x8xf32>, tensor<2x2x16xf32>
// CHECK-NOT: shard.
// CHECK: return %[[A]]#0, %[[A]]#1
shard.grid @grid(shape = 2)
func.func @heads(%q: tensor<2x4x16x8xf32>, %k: tensor<2x4x16x8xf32>, %v: tensor<2x4x16x8xf32>) -> (tensor<2x4x16x8xf32>, tensor<2x4x16xf32>) {
  %s = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %qs = shard.shard %q to %s annotate_for_users : tensor<2x4x16x8xf32>
  %o0 = tensor.empty() : tensor<2x4x16x8xf32>
  %l0 = tensor.empty() : tensor<2x4x16xf32>
  %o, %l = autopar.attention ins(%qs, %k, %v : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) outs(%o0, %l0 : tensor<2x4x16x8xf32>, tensor<2x4x16xf32>) {scale = 0.35 : f64, causal} -> tensor<2x4x16x8xf32>, tensor<2x4x16xf32>
  return %o, %l : tensor<2x4x16x8xf32>, tensor<2x4x16xf32>
}

// -----

// A head split of the output propagates backwards to the query, key and
// value; the unused log-sum-exp (inference) takes its destination's block.
// PROP-LABEL: func.func @from_output
// PROP-SAME: (%[[Q:[^:]*]]: tensor<1x4x8x8xf32>, %[[K:[^:]*]]: tensor<1x4x8x8xf32>, %[[V:[^:]*]]: tensor<1x4x8x8xf32>)
// PROP-DAG: shard.shard %[[Q]] to %[[SQ:[^ ]*]] annotate_for_users : tensor<1x4x8x8xf32>
// PROP-DAG: %[[SQ]] = shard.sharding @grid split_axes = {{\[\[}}], [0]] : !shard.sharding
// PROP-DAG: shard.shard %[[K]] to %[[SK:[^ ]*]] annotate_for_users : tensor<1x4x8x8xf32>
// PROP-DAG: %[[SK]] = shard.sharding @grid split_axes = {{\[\[}}], [0]] : !shard.sharding
// PROP-DAG: shard.shard %[[V]] to %[[SV:[^ ]*]] annotate_for_users : tensor<1x4x8x8xf32>
// PROP-DAG: %[[SV]] = shard.sharding @grid split_axes = {{\[\[}}], [0]] : !shard.sharding
// CHECK-LABEL: func.func @from_output
// CHECK-SAME: (%[[Q:[^:]*]]: tensor<1x2x8x8xf32>, %[[K:[^:]*]]: tensor<1x2x8x8xf32>, %[[V:[^:]*]]: tensor<1x2x8x8xf32>)
// CHECK-SAME: -> tensor<1x2x8x8xf32>
// CHECK: %[[A:.*]]:2 = autopar.attention ins(%[[Q]], %[[K]], %[[V]] : {{.*}}) outs(%{{.*}}, %{{.*}} : tensor<1x2x8x8xf32>, tensor<1x2x8xf32>) {{.*}} -> tensor<1x2x8x8xf32>, tensor<1x2x8xf32>
// CHECK-NOT: shard.
// CHECK: return %[[A]]#0
shard.grid @grid(shape = 2)
func.func @from_output(%q: tensor<1x4x8x8xf32>, %k: tensor<1x4x8x8xf32>, %v: tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32> {
  %s = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %o0 = tensor.empty() : tensor<1x4x8x8xf32>
  %l0 = tensor.empty() : tensor<1x4x8xf32>
  %o, %l = autopar.attention ins(%q, %k, %v : tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>) outs(%o0, %l0 : tensor<1x4x8x8xf32>, tensor<1x4x8xf32>) {scale = 0.35 : f64} -> tensor<1x4x8x8xf32>, tensor<1x4x8xf32>
  %os = shard.shard %o to %s : tensor<1x4x8x8xf32>
  return %os : tensor<1x4x8x8xf32>
}

// -----

// Grouped-query attention, 8 query heads over 2 key/value heads split in
// two: each rank holds 4 query heads and the key/value head they read.
// PROP-LABEL: func.func @gqa
// PROP-SAME: (%[[Q:[^:]*]]: tensor<1x8x16x8xf32>, %[[K:[^:]*]]: tensor<1x2x32x8xf32>, %[[V:[^:]*]]: tensor<1x2x32x4xf32>)
// PROP-DAG: shard.shard %[[K]] to %[[SK:[^ ]*]] annotate_for_users : tensor<1x2x32x8xf32>
// PROP-DAG: %[[SK]] = shard.sharding @grid split_axes = {{\[\[}}], [0]] : !shard.sharding
// PROP-DAG: shard.shard %[[V]] to %[[SV:[^ ]*]] annotate_for_users : tensor<1x2x32x4xf32>
// PROP-DAG: %[[SV]] = shard.sharding @grid split_axes = {{\[\[}}], [0]] : !shard.sharding
// CHECK-LABEL: func.func @gqa
// CHECK-SAME: (%[[Q:[^:]*]]: tensor<1x4x16x8xf32>, %[[K:[^:]*]]: tensor<1x1x32x8xf32>, %[[V:[^:]*]]: tensor<1x1x32x4xf32>)
// CHECK-SAME: -> (tensor<1x4x16x4xf32>, tensor<1x4x16xf32>)
// CHECK-NOT: shard.
// CHECK: %[[A:.*]]:2 = autopar.attention ins(%[[Q]], %[[K]], %[[V]] : tensor<1x4x16x8xf32>, tensor<1x1x32x8xf32>, tensor<1x1x32x4xf32>) outs(%{{.*}}, %{{.*}} : tensor<1x4x16x4xf32>, tensor<1x4x16xf32>)
// CHECK-NOT: shard.
// CHECK: return %[[A]]#0, %[[A]]#1
shard.grid @grid(shape = 2)
func.func @gqa(%q: tensor<1x8x16x8xf32>, %k: tensor<1x2x32x8xf32>, %v: tensor<1x2x32x4xf32>) -> (tensor<1x8x16x4xf32>, tensor<1x8x16xf32>) {
  %s = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %qs = shard.shard %q to %s annotate_for_users : tensor<1x8x16x8xf32>
  %o0 = tensor.empty() : tensor<1x8x16x4xf32>
  %l0 = tensor.empty() : tensor<1x8x16xf32>
  %o, %l = autopar.attention ins(%qs, %k, %v : tensor<1x8x16x8xf32>, tensor<1x2x32x8xf32>, tensor<1x2x32x4xf32>) outs(%o0, %l0 : tensor<1x8x16x4xf32>, tensor<1x8x16xf32>) {scale = 0.35 : f64} -> tensor<1x8x16x4xf32>, tensor<1x8x16xf32>
  return %o, %l : tensor<1x8x16x4xf32>, tensor<1x8x16xf32>
}

// -----

// 6 query heads over 3 key/value heads cannot split in two (a rank's query
// heads would read the other rank's key/value head): the heads stay whole
// and the split query is gathered first.
// PROP-LABEL: func.func @gqa_indivisible
// PROP-SAME: (%[[Q:[^:]*]]: tensor<1x6x16x8xf32>, %[[K:[^:]*]]: tensor<1x3x16x8xf32>, %[[V:[^:]*]]: tensor<1x3x16x8xf32>)
// PROP-DAG: shard.shard %[[K]] to %[[SK:[^ ]*]] annotate_for_users : tensor<1x3x16x8xf32>
// PROP-DAG: %[[SK]] = shard.sharding @grid split_axes = {{\[\[}}]] : !shard.sharding
// CHECK-LABEL: func.func @gqa_indivisible
// CHECK-SAME: (%[[Q:[^:]*]]: tensor<1x3x16x8xf32>, %[[K:[^:]*]]: tensor<1x3x16x8xf32>, %[[V:[^:]*]]: tensor<1x3x16x8xf32>)
// CHECK-SAME: -> (tensor<1x6x16x8xf32>, tensor<1x6x16xf32>)
// CHECK: %[[G:.*]] = shard.all_gather %[[Q]] on @grid grid_axes = [0] gather_axis = 1 : tensor<1x3x16x8xf32> -> tensor<1x6x16x8xf32>
// CHECK: autopar.attention ins(%{{.*}}, %[[K]], %[[V]] : tensor<1x6x16x8xf32>, tensor<1x3x16x8xf32>, tensor<1x3x16x8xf32>) outs(%{{.*}}, %{{.*}} : tensor<1x6x16x8xf32>, tensor<1x6x16xf32>)
shard.grid @grid(shape = 2)
func.func @gqa_indivisible(%q: tensor<1x6x16x8xf32>, %k: tensor<1x3x16x8xf32>, %v: tensor<1x3x16x8xf32>) -> (tensor<1x6x16x8xf32>, tensor<1x6x16xf32>) {
  %s = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %qs = shard.shard %q to %s annotate_for_users : tensor<1x6x16x8xf32>
  %o0 = tensor.empty() : tensor<1x6x16x8xf32>
  %l0 = tensor.empty() : tensor<1x6x16xf32>
  %o, %l = autopar.attention ins(%qs, %k, %v : tensor<1x6x16x8xf32>, tensor<1x3x16x8xf32>, tensor<1x3x16x8xf32>) outs(%o0, %l0 : tensor<1x6x16x8xf32>, tensor<1x6x16xf32>) {scale = 0.35 : f64} -> tensor<1x6x16x8xf32>, tensor<1x6x16xf32>
  return %o, %l : tensor<1x6x16x8xf32>, tensor<1x6x16xf32>
}

// -----

// The batch over one grid axis and the heads over the other: the mask's
// batch dim follows, its broadcast head dim and whole queries and keys stay.
// PROP-LABEL: func.func @batch_and_heads_mask
// PROP-SAME: %[[M:[^:]*]]: tensor<4x1x16x16xf32>
// PROP-DAG: shard.shard %[[M]] to %[[SM:[^ ]*]] annotate_for_users : tensor<4x1x16x16xf32>
// PROP-DAG: %[[SM]] = shard.sharding @grid split_axes = {{\[\[}}0]] : !shard.sharding
// PROP-DAG: shard.shard %{{.*}} to %[[SK:[^ ]*]] annotate_for_users : tensor<4x4x16x8xf32>
// PROP-DAG: %[[SK]] = shard.sharding @grid split_axes = {{\[\[}}0], [1]] : !shard.sharding
// CHECK-LABEL: func.func @batch_and_heads_mask
// CHECK-SAME: (%[[Q:[^:]*]]: tensor<2x2x16x8xf32>, %[[K:[^:]*]]: tensor<2x2x16x8xf32>, %[[V:[^:]*]]: tensor<2x2x16x8xf32>, %[[M:[^:]*]]: tensor<2x1x16x16xf32>)
// CHECK-NOT: shard.
// CHECK: %[[A:.*]]:2 = autopar.attention ins(%[[Q]], %[[K]], %[[V]] mask %[[M]] : tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x1x16x16xf32>) outs(%{{.*}}, %{{.*}} : tensor<2x2x16x8xf32>, tensor<2x2x16xf32>)
// CHECK-NOT: shard.
// CHECK: return %[[A]]#0, %[[A]]#1
shard.grid @grid(shape = 2x2)
func.func @batch_and_heads_mask(%q: tensor<4x4x16x8xf32>, %k: tensor<4x4x16x8xf32>, %v: tensor<4x4x16x8xf32>, %m: tensor<4x1x16x16xf32>) -> (tensor<4x4x16x8xf32>, tensor<4x4x16xf32>) {
  %s = shard.sharding @grid split_axes = [[0], [1]] : !shard.sharding
  %qs = shard.shard %q to %s annotate_for_users : tensor<4x4x16x8xf32>
  %o0 = tensor.empty() : tensor<4x4x16x8xf32>
  %l0 = tensor.empty() : tensor<4x4x16xf32>
  %o, %l = autopar.attention ins(%qs, %k, %v mask %m : tensor<4x4x16x8xf32>, tensor<4x4x16x8xf32>, tensor<4x4x16x8xf32>, tensor<4x1x16x16xf32>) outs(%o0, %l0 : tensor<4x4x16x8xf32>, tensor<4x4x16xf32>) {scale = 0.35 : f64} -> tensor<4x4x16x8xf32>, tensor<4x4x16xf32>
  return %o, %l : tensor<4x4x16x8xf32>, tensor<4x4x16xf32>
}

// -----

// A batch split alone, with a mask over all heads broadcast over the batch
// (a causal constant): the mask stays whole.
// PROP-LABEL: func.func @batch
// PROP-SAME: %[[M:[^:]*]]: tensor<1x2x8x8xf32>
// PROP-DAG: shard.shard %[[M]] to %[[SM:[^ ]*]] annotate_for_users : tensor<1x2x8x8xf32>
// PROP-DAG: %[[SM]] = shard.sharding @grid split_axes = {{\[\[}}]] : !shard.sharding
// CHECK-LABEL: func.func @batch
// CHECK-SAME: (%[[Q:[^:]*]]: tensor<2x2x8x8xf32>, %[[K:[^:]*]]: tensor<2x2x8x8xf32>, %[[M:[^:]*]]: tensor<1x2x8x8xf32>)
// CHECK-SAME: -> tensor<2x2x8x8xf32>
// CHECK-NOT: shard.
// CHECK: %[[A:.*]]:2 = autopar.attention ins(%[[Q]], %[[K]], %[[K]] mask %[[M]] : tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>, tensor<1x2x8x8xf32>) outs(%{{.*}}, %{{.*}} : tensor<2x2x8x8xf32>, tensor<2x2x8xf32>)
// CHECK: return %[[A]]#0
shard.grid @grid(shape = 2)
func.func @batch(%q: tensor<4x2x8x8xf32>, %k: tensor<4x2x8x8xf32>, %m: tensor<1x2x8x8xf32>) -> tensor<4x2x8x8xf32> {
  %s = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %qs = shard.shard %q to %s annotate_for_users : tensor<4x2x8x8xf32>
  %o0 = tensor.empty() : tensor<4x2x8x8xf32>
  %l0 = tensor.empty() : tensor<4x2x8xf32>
  %o, %l = autopar.attention ins(%qs, %k, %k mask %m : tensor<4x2x8x8xf32>, tensor<4x2x8x8xf32>, tensor<4x2x8x8xf32>, tensor<1x2x8x8xf32>) outs(%o0, %l0 : tensor<4x2x8x8xf32>, tensor<4x2x8xf32>) {scale = 0.35 : f64} -> tensor<4x2x8x8xf32>, tensor<4x2x8xf32>
  return %o : tensor<4x2x8x8xf32>
}

// -----

// Queries split (sequence parallelism) would need the other ranks' keys:
// the query is gathered first and the attention runs on whole tensors.
// CHECK-LABEL: func.func @queries_split
// CHECK-SAME: (%[[Q:[^:]*]]: tensor<1x4x8x8xf32>, %[[K:[^:]*]]: tensor<1x4x16x8xf32>)
// CHECK: %[[G:.*]] = shard.all_gather %[[Q]] on @grid grid_axes = [0] gather_axis = 2 : tensor<1x4x8x8xf32> -> tensor<1x4x16x8xf32>
// CHECK: autopar.attention ins(%{{.*}}, %[[K]], %[[K]] : tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) outs(%{{.*}}, %{{.*}} : tensor<1x4x16x8xf32>, tensor<1x4x16xf32>)
shard.grid @grid(shape = 2)
func.func @queries_split(%q: tensor<1x4x16x8xf32>, %k: tensor<1x4x16x8xf32>) -> tensor<1x4x16x8xf32> {
  %s = shard.sharding @grid split_axes = [[], [], [0]] : !shard.sharding
  %qs = shard.shard %q to %s annotate_for_users : tensor<1x4x16x8xf32>
  %o0 = tensor.empty() : tensor<1x4x16x8xf32>
  %l0 = tensor.empty() : tensor<1x4x16xf32>
  %o, %l = autopar.attention ins(%qs, %k, %k : tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) outs(%o0, %l0 : tensor<1x4x16x8xf32>, tensor<1x4x16xf32>) {scale = 0.35 : f64} -> tensor<1x4x16x8xf32>, tensor<1x4x16xf32>
  return %o : tensor<1x4x16x8xf32>
}

// -----

// The gradient: a head split of d_out reaches the forward's operands, its
// saved out and lse, the mask's head dim (its batch dim broadcasts) and the
// three gradients; the key/value gradients sum over the query heads of their
// group, which are on the same rank.
// PROP-LABEL: func.func @grad
// PROP-SAME: (%[[Q:[^:]*]]: tensor<2x8x16x8xf32>, %[[K:[^:]*]]: tensor<2x4x16x8xf32>, %[[V:[^:]*]]: tensor<2x4x16x8xf32>, %[[M:[^:]*]]: tensor<1x8x16x16xf32>, %[[O:[^:]*]]: tensor<2x8x16x8xf32>, %[[L:[^:]*]]: tensor<2x8x16xf32>
// PROP-DAG: shard.shard %[[M]] to %[[SM:[^ ]*]] annotate_for_users : tensor<1x8x16x16xf32>
// PROP-DAG: %[[SM]] = shard.sharding @grid split_axes = {{\[\[}}], [0]] : !shard.sharding
// PROP-DAG: shard.shard %[[L]] to %[[SL:[^ ]*]] annotate_for_users : tensor<2x8x16xf32>
// PROP-DAG: %[[SL]] = shard.sharding @grid split_axes = {{\[\[}}], [0]] : !shard.sharding
// PROP: %[[G:.*]]:3 = autopar.attention_grad
// PROP-DAG: shard.shard %[[G]]#1 to %[[SDK:[^ ]*]] : tensor<2x4x16x8xf32>
// PROP-DAG: %[[SDK]] = shard.sharding @grid split_axes = {{\[\[}}], [0]] : !shard.sharding
// CHECK-LABEL: func.func @grad
// CHECK-SAME: (%[[Q:[^:]*]]: tensor<2x4x16x8xf32>, %[[K:[^:]*]]: tensor<2x2x16x8xf32>, %[[V:[^:]*]]: tensor<2x2x16x8xf32>, %[[M:[^:]*]]: tensor<1x4x16x16xf32>, %[[O:[^:]*]]: tensor<2x4x16x8xf32>, %[[L:[^:]*]]: tensor<2x4x16xf32>, %[[DO:[^:]*]]: tensor<2x4x16x8xf32>)
// CHECK-SAME: -> (tensor<2x4x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>)
// CHECK-NOT: shard.
// CHECK: %[[G:.*]]:3 = autopar.attention_grad ins(%[[Q]], %[[K]], %[[V]] mask %[[M]] saved(%[[O]], %[[L]], %[[DO]] : tensor<2x4x16x8xf32>, tensor<2x4x16xf32>, tensor<2x4x16x8xf32>) : tensor<2x4x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>, tensor<1x4x16x16xf32>) outs(%{{.*}}, %{{.*}}, %{{.*}} : tensor<2x4x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>) {causal, scale = 3.500000e-01 : f64} -> tensor<2x4x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>
// CHECK-NOT: shard.
// CHECK: return %[[G]]#0, %[[G]]#1, %[[G]]#2
shard.grid @grid(shape = 2)
func.func @grad(%q: tensor<2x8x16x8xf32>, %k: tensor<2x4x16x8xf32>, %v: tensor<2x4x16x8xf32>, %m: tensor<1x8x16x16xf32>, %o: tensor<2x8x16x8xf32>, %l: tensor<2x8x16xf32>, %do: tensor<2x8x16x8xf32>) -> (tensor<2x8x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) {
  %s = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %dos = shard.shard %do to %s annotate_for_users : tensor<2x8x16x8xf32>
  %dq0 = tensor.empty() : tensor<2x8x16x8xf32>
  %dk0 = tensor.empty() : tensor<2x4x16x8xf32>
  %dv0 = tensor.empty() : tensor<2x4x16x8xf32>
  %dq, %dk, %dv = autopar.attention_grad ins(%q, %k, %v mask %m saved(%o, %l, %dos : tensor<2x8x16x8xf32>, tensor<2x8x16xf32>, tensor<2x8x16x8xf32>) : tensor<2x8x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<1x8x16x16xf32>) outs(%dq0, %dk0, %dv0 : tensor<2x8x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) {scale = 0.35 : f64, causal} -> tensor<2x8x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>
  return %dq, %dk, %dv : tensor<2x8x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>
}
