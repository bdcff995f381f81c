// autopar.softmax_cross_entropy and its gradient's sharding model: the positions split with
// no collective; the classes split as Megatron's vocabulary-parallel cross-entropy (each rank
// its block of the logits, the labels moved into the block, the log-sum-exps merged by an
// all-reduce max and sum, the label's logit by an all-reduce sum; the gradient needs none).
// RUN: autopar-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(sharding-propagation,autopar-check-partitionable,shard-partition))' | FileCheck %s

// CHECK-LABEL: func.func @vocab
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4x8xf32>, %[[Y:[^:]*]]: tensor<4xi64>) -> (tensor<4xf32>, tensor<4xf32>)
// CHECK-DAG: %[[C8:.*]] = arith.constant 8 : i64
// CHECK-DAG: %[[RANK:.*]] = shard.process_multi_index on @grid axes = [0] : index
// CHECK: %[[R64:.*]] = arith.index_cast %[[RANK]] : index to i64
// CHECK: %[[OFF:.*]] = arith.muli %[[R64]], %[[C8]] : i64
// CHECK: %[[LOCAL:.*]] = linalg.generic {{.*}} ins(%[[Y]] : tensor<4xi64>)
// CHECK: arith.subi %{{.*}}, %[[OFF]] : i64
// CHECK: %[[PART:.*]]:2 = autopar.softmax_cross_entropy ins(%[[X]], %[[LOCAL]] : tensor<4x8xf32>, tensor<4xi64>) outs({{.*}}) {ignore_index = -1 : i64}
// CHECK: %[[PICK:.*]] = linalg.generic {{.*}} ins(%[[PART]]#0, %[[PART]]#1, %[[LOCAL]] :
// CHECK: %[[MAX:.*]] = shard.all_reduce %[[PART]]#1 on @grid grid_axes = [0] reduction = max
// CHECK: %[[EXP:.*]] = linalg.generic {{.*}} ins(%[[PART]]#1, %[[MAX]] :
// CHECK: math.exp
// CHECK: %[[SUM:.*]] = shard.all_reduce %[[EXP]] on @grid grid_axes = [0] :
// CHECK: %[[PICKED:.*]] = shard.all_reduce %[[PICK]] on @grid grid_axes = [0] :
// CHECK: %[[LSE:.*]] = linalg.generic {{.*}} ins(%[[MAX]], %[[SUM]] :
// CHECK: math.log
// CHECK: %[[NLL:.*]] = linalg.generic {{.*}} ins(%[[LSE]], %[[PICKED]], %[[Y]] :
// CHECK: return %[[NLL]], %[[LSE]] : tensor<4xf32>, tensor<4xf32>
shard.grid @grid(shape = 2)
func.func @vocab(%x: tensor<4x16xf32>, %y: tensor<4xi64>) -> (tensor<4xf32>, tensor<4xf32>) {
  %s = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %xs = shard.shard %x to %s annotate_for_users : tensor<4x16xf32>
  %n0 = tensor.empty() : tensor<4xf32>
  %l0 = tensor.empty() : tensor<4xf32>
  %n, %l = autopar.softmax_cross_entropy ins(%xs, %y : tensor<4x16xf32>, tensor<4xi64>) outs(%n0, %l0 : tensor<4xf32>, tensor<4xf32>) {ignore_index = -100 : i64} -> tensor<4xf32>, tensor<4xf32>
  return %n, %l : tensor<4xf32>, tensor<4xf32>
}

// -----

// The positions split: each rank's rows, the same op, no collective.
// CHECK-LABEL: func.func @rows
// CHECK-SAME: (%[[X:[^:]*]]: tensor<2x16xf32>, %[[Y:[^:]*]]: tensor<2xi64>) -> (tensor<2xf32>, tensor<2xf32>)
// CHECK-NOT: shard.
// CHECK: %[[F:.*]]:2 = autopar.softmax_cross_entropy ins(%[[X]], %[[Y]] : tensor<2x16xf32>, tensor<2xi64>) outs({{.*}} : tensor<2xf32>, tensor<2xf32>) {ignore_index = -100 : i64}
// CHECK-NOT: shard.
// CHECK: return %[[F]]#0, %[[F]]#1
shard.grid @grid(shape = 2)
func.func @rows(%x: tensor<4x16xf32>, %y: tensor<4xi64>) -> (tensor<4xf32>, tensor<4xf32>) {
  %s = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %xs = shard.shard %x to %s annotate_for_users : tensor<4x16xf32>
  %n0 = tensor.empty() : tensor<4xf32>
  %l0 = tensor.empty() : tensor<4xf32>
  %n, %l = autopar.softmax_cross_entropy ins(%xs, %y : tensor<4x16xf32>, tensor<4xi64>) outs(%n0, %l0 : tensor<4xf32>, tensor<4xf32>) {ignore_index = -100 : i64} -> tensor<4xf32>, tensor<4xf32>
  return %n, %l : tensor<4xf32>, tensor<4xf32>
}

// -----

// The gradient of a class block: the whole lse and d_nll, the labels moved into the block
// (an ignore_index of 0 is a class: the local op ignores -1 instead), no collective.
// CHECK-LABEL: func.func @grad_vocab
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4x8xf32>, %[[Y:[^:]*]]: tensor<4xi64>, %[[LSE:[^:]*]]: tensor<4xf32>, %[[DN:[^:]*]]: tensor<4xf32>) -> tensor<4x8xf32>
// CHECK-NOT: shard.all
// CHECK: %[[LOCAL:.*]] = linalg.generic {{.*}} ins(%[[Y]] : tensor<4xi64>)
// CHECK: %[[D:.*]] = autopar.softmax_cross_entropy_grad ins(%[[X]], %[[LOCAL]] saved(%[[LSE]], %[[DN]] : tensor<4xf32>, tensor<4xf32>) : tensor<4x8xf32>, tensor<4xi64>) outs(%{{.*}} : tensor<4x8xf32>) {ignore_index = -1 : i64}
// CHECK-NOT: shard.all
// CHECK: return %[[D]] : tensor<4x8xf32>
shard.grid @grid(shape = 2)
func.func @grad_vocab(%x: tensor<4x16xf32>, %y: tensor<4xi64>, %lse: tensor<4xf32>, %dn: tensor<4xf32>) -> tensor<4x16xf32> {
  %s = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %xs = shard.shard %x to %s annotate_for_users : tensor<4x16xf32>
  %d0 = tensor.empty() : tensor<4x16xf32>
  %d = autopar.softmax_cross_entropy_grad ins(%xs, %y saved(%lse, %dn : tensor<4xf32>, tensor<4xf32>) : tensor<4x16xf32>, tensor<4xi64>) outs(%d0 : tensor<4x16xf32>) {ignore_index = 0 : i64} -> tensor<4x16xf32>
  %ds = shard.shard %d to %s : tensor<4x16xf32>
  return %ds : tensor<4x16xf32>
}
