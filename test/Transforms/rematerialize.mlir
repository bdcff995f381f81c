// autopar-rematerialize: the backward of a differentiated @main recomputes
// the forward values the mode says, from clones placed before their first
// backward use; the forward's own values are then read by the forward only.
// RUN: autopar-opt %s -split-input-file -autopar-rematerialize="mode=selective" | FileCheck %s --check-prefix=SELECTIVE
// RUN: autopar-opt %s -split-input-file -autopar-rematerialize="mode=full" | FileCheck %s --check-prefix=FULL
// RUN: autopar-opt %s -split-input-file -autopar-rematerialize="mode=none" | FileCheck %s --check-prefix=NONE
// RUN: not autopar-opt %s -split-input-file -autopar-rematerialize="mode=most" 2>&1 | FileCheck %s --check-prefix=MODE

#map = affine_map<(d0, d1) -> (d0, d1)>
#scalar = affine_map<(d0, d1) -> ()>
// A GEMM, a ReLU of it, a sum as the loss; the backward reads the ReLU's
// input (a GEMM output) and its output.
// SELECTIVE-LABEL: func.func @main
// SELECTIVE: %[[MM:.*]] = linalg.matmul
// SELECTIVE: %[[RELU:.*]] = linalg.generic {{.*}} ins(%[[MM]] : tensor<2x2xf32>)
// SELECTIVE: %[[LOSS:.*]] = linalg.generic {{.*}} ins(%[[RELU]] : tensor<2x2xf32>)
// The backward: the ReLU again (memory-bound), the GEMM's output kept.
// SELECTIVE: %[[AGAIN:.*]] = linalg.generic {{.*}} ins(%[[MM]] : tensor<2x2xf32>) {{.*}}{autopar.recomputed}
// SELECTIVE-NOT: linalg.matmul
// SELECTIVE: linalg.generic {{.*}} ins(%[[AGAIN]], %[[MM]] : tensor<2x2xf32>, tensor<2x2xf32>)
// SELECTIVE: return %[[LOSS]]

// Full: the GEMM's output and then the ReLU's are each the only value of
// the data live (segment boundaries, Megatron's checkpoints): both kept,
// nothing recomputed.
// FULL-LABEL: func.func @main
// FULL-NOT: autopar.recomputed
// FULL: return

// NONE-LABEL: func.func @main
// NONE-NOT: autopar.recomputed
// MODE: autopar-rematerialize: mode must be none, selective or full, not 'most'
func.func @main(%w: tensor<2x2xf32> {autopar.parameter = "w", autopar.trainable}, %x: tensor<2x2xf32> {autopar.input = "x"})
    -> (tensor<f32> {autopar.output = "loss"}, tensor<2x2xf32> {autopar.gradient = "w"}) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x2xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x2xf32>) -> tensor<2x2xf32>
  %mm = linalg.matmul ins(%x, %w : tensor<2x2xf32>, tensor<2x2xf32>) outs(%z : tensor<2x2xf32>) -> tensor<2x2xf32>
  %relu = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%mm : tensor<2x2xf32>) outs(%e : tensor<2x2xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.maximumf %a, %zero : f32
    linalg.yield %m : f32
  } -> tensor<2x2xf32>
  %s0 = tensor.empty() : tensor<f32>
  %s = linalg.fill ins(%zero : f32) outs(%s0 : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [#map, #scalar], iterator_types = ["reduction", "reduction"]} ins(%relu : tensor<2x2xf32>) outs(%s : tensor<f32>) {
  ^bb0(%a: f32, %o: f32):
    %p = arith.addf %a, %o : f32
    linalg.yield %p : f32
  } -> tensor<f32>
  // The backward: d relu = (relu > 0) where mm is read too.
  %g = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]} ins(%relu, %mm : tensor<2x2xf32>, tensor<2x2xf32>) outs(%e : tensor<2x2xf32>) {
  ^bb0(%r: f32, %v: f32, %o: f32):
    %c = arith.cmpf ogt, %r, %zero : f32
    %one = arith.constant 1.0 : f32
    %d = arith.select %c, %one, %zero : f32
    %dv = arith.mulf %d, %v : f32
    linalg.yield %dv : f32
  } -> tensor<2x2xf32>
  return %loss, %g : tensor<f32>, tensor<2x2xf32>
}

// -----

#map = affine_map<(d0) -> (d0)>
// A value the trained parameter does not flow into (a scale computed from
// the input, as a mean's count of valid targets) is kept: only %wx, which
// w flows into, is recomputed.
// FULL-LABEL: func.func @main
// FULL: %[[SCALE:.*]] = linalg.generic {{.*}} ins(%arg1 : tensor<4xf32>)
// FULL: %[[WX:.*]] = linalg.generic {{.*}} ins(%arg0, %arg1 : tensor<4xf32>, tensor<4xf32>)
// FULL: %[[WX2:.*]] = linalg.generic {{.*}} ins(%arg0, %arg1 : tensor<4xf32>, tensor<4xf32>) {{.*}}{autopar.recomputed}
// FULL-NOT: autopar.recomputed
// FULL: ins(%[[WX2]], %[[SCALE]] : tensor<4xf32>, tensor<4xf32>)
func.func @main(%w: tensor<4xf32> {autopar.parameter = "w", autopar.trainable}, %x: tensor<4xf32> {autopar.input = "x"})
    -> (tensor<4xf32> {autopar.output = "loss"}, tensor<4xf32> {autopar.gradient = "w"}) {
  %e = tensor.empty() : tensor<4xf32>
  %scale = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %a : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  %wx = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]} ins(%w, %x : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  %g = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]} ins(%wx, %scale : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.divf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  return %wx, %g : tensor<4xf32>, tensor<4xf32>
}

// -----

#map = affine_map<(d0, d1) -> (d0, d1)>
#scalar = affine_map<(d0, d1) -> ()>
// Under a tensor-parallel plan: the parameter's annotation is how it is laid
// out, not a computation, so it is not cloned (a second annotation of %w
// would come after uses the first one serves); the recomputed GEMM reads
// the one annotation, and an annotation of a recomputed value is cloned
// with it.
// FULL-LABEL: func.func @main
// FULL: %[[W:.*]] = shard.shard %arg0 to
// FULL: %[[MM:.*]] = linalg.matmul ins(%arg1, %[[W]] :
// FULL: %[[MMA:.*]] = shard.shard %[[MM]] to
// FULL: %[[MM2:.*]] = linalg.matmul {autopar.recomputed} ins(%arg1, %[[W]] :
// FULL: shard.shard %[[MM2]] to {{.*}}{autopar.recomputed}
// FULL-NOT: shard.shard %arg0
shard.grid @autopar_grid(shape = 1x2)
func.func @main(%w: tensor<2x2xf32> {autopar.parameter = "w", autopar.trainable}, %x: tensor<2x2xf32> {autopar.input = "x"})
    -> (tensor<f32> {autopar.output = "loss"}, tensor<2x2xf32> {autopar.gradient = "w"}) {
  %zero = arith.constant 0.0 : f32
  %sw = shard.sharding @autopar_grid split_axes = [[], [1]] : !shard.sharding
  %wa = shard.shard %w to %sw : tensor<2x2xf32>
  %e = tensor.empty() : tensor<2x2xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x2xf32>) -> tensor<2x2xf32>
  // A value of the data live across the GEMM: its output is no segment
  // boundary.
  %t = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<2x2xf32>) outs(%e : tensor<2x2xf32>) {
  ^bb0(%a: f32, %o: f32):
    %ex = math.exp %a : f32
    linalg.yield %ex : f32
  } -> tensor<2x2xf32>
  %mm = linalg.matmul ins(%x, %wa : tensor<2x2xf32>, tensor<2x2xf32>) outs(%z : tensor<2x2xf32>) -> tensor<2x2xf32>
  %mma = shard.shard %mm to %sw : tensor<2x2xf32>
  %s0 = tensor.empty() : tensor<f32>
  %s = linalg.fill ins(%zero : f32) outs(%s0 : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [#map, #map, #scalar], iterator_types = ["reduction", "reduction"]} ins(%mma, %t : tensor<2x2xf32>, tensor<2x2xf32>) outs(%s : tensor<f32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %ab = arith.addf %a, %b : f32
    %p = arith.addf %ab, %o : f32
    linalg.yield %p : f32
  } -> tensor<f32>
  // The backward reads the annotated GEMM output.
  %g = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%mma : tensor<2x2xf32>) outs(%e : tensor<2x2xf32>) {
  ^bb0(%v: f32, %o: f32):
    %dv = arith.mulf %v, %v : f32
    linalg.yield %dv : f32
  } -> tensor<2x2xf32>
  return %loss, %g : tensor<f32>, tensor<2x2xf32>
}

// -----

#map = affine_map<(d0, d1) -> (d0, d1)>
#scalar = affine_map<(d0, d1) -> ()>
// Selective under a tensor-parallel plan: the ReLU reads the GEMM's output
// all-gathered (a user's annotation replicating a split value). The backward
// recomputes the ReLU from the split GEMM output it keeps, gathering it again
// (the annotation cloned with the ReLU), rather than keep the gathered
// tensor: what is kept is each value as the op that made it laid it out,
// as the planner prices it. The parameter's annotation is not cloned.
// FULL-LABEL: func.func @main
// SELECTIVE-LABEL: func.func @main
// SELECTIVE: %[[SPLIT:.*]] = shard.sharding @autopar_grid split_axes = {{\[\[}}], [1]]
// SELECTIVE: %[[WHOLE:.*]] = shard.sharding @autopar_grid split_axes = {{\[\[}}]]
// SELECTIVE: %[[W:.*]] = shard.shard %arg0 to %[[SPLIT]]
// SELECTIVE: %[[MM:.*]] = linalg.matmul ins(%arg1, %[[W]] :
// SELECTIVE: %[[MMA:.*]] = shard.shard %[[MM]] to %[[SPLIT]] :
// SELECTIVE: %[[GATHERED:.*]] = shard.shard %[[MMA]] to %[[WHOLE]] annotate_for_users :
// SELECTIVE: %[[RELU:.*]] = linalg.generic {{.*}} ins(%[[GATHERED]] :
// The backward: the GEMM's output annotated again (its annotation goes with
// the clones that read it; autopar-unify-result-annotations keeps one), then
// gathered again; the GEMM itself is kept.
// SELECTIVE-NOT: linalg.matmul
// SELECTIVE-NOT: shard.shard %arg0
// SELECTIVE: %[[MMA2:.*]] = shard.shard %[[MM]] to %[[SPLIT]] {autopar.recomputed}
// SELECTIVE-NEXT: %[[AGAIN:.*]] = shard.shard %[[MMA2]] to %[[WHOLE]] annotate_for_users {autopar.recomputed}
// SELECTIVE: %[[RELU2:.*]] = linalg.generic {{.*}} ins(%[[AGAIN]] : {{.*}}{autopar.recomputed}
// SELECTIVE: linalg.generic {{.*}} ins(%[[RELU2]] :
// SELECTIVE: return
shard.grid @autopar_grid(shape = 1x2)
func.func @main(%w: tensor<2x2xf32> {autopar.parameter = "w", autopar.trainable}, %x: tensor<2x2xf32> {autopar.input = "x"})
    -> (tensor<f32> {autopar.output = "loss"}, tensor<2x2xf32> {autopar.gradient = "w"}) {
  %zero = arith.constant 0.0 : f32
  %sw = shard.sharding @autopar_grid split_axes = [[], [1]] : !shard.sharding
  %sr = shard.sharding @autopar_grid split_axes = [[]] : !shard.sharding
  %wa = shard.shard %w to %sw : tensor<2x2xf32>
  %e = tensor.empty() : tensor<2x2xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x2xf32>) -> tensor<2x2xf32>
  %mm = linalg.matmul ins(%x, %wa : tensor<2x2xf32>, tensor<2x2xf32>) outs(%z : tensor<2x2xf32>) -> tensor<2x2xf32>
  %mma = shard.shard %mm to %sw : tensor<2x2xf32>
  %mmu = shard.shard %mma to %sr annotate_for_users : tensor<2x2xf32>
  %relu = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%mmu : tensor<2x2xf32>) outs(%e : tensor<2x2xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.maximumf %a, %zero : f32
    linalg.yield %r : f32
  } -> tensor<2x2xf32>
  %s0 = tensor.empty() : tensor<f32>
  %s = linalg.fill ins(%zero : f32) outs(%s0 : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [#map, #scalar], iterator_types = ["reduction", "reduction"]} ins(%relu : tensor<2x2xf32>) outs(%s : tensor<f32>) {
  ^bb0(%a: f32, %o: f32):
    %p = arith.addf %a, %o : f32
    linalg.yield %p : f32
  } -> tensor<f32>
  // The backward reads the ReLU's output.
  %g = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%relu : tensor<2x2xf32>) outs(%e : tensor<2x2xf32>) {
  ^bb0(%v: f32, %o: f32):
    %dv = arith.mulf %v, %v : f32
    linalg.yield %dv : f32
  } -> tensor<2x2xf32>
  return %loss, %g : tensor<f32>, tensor<2x2xf32>
}

// -----

#map = affine_map<(d0, d1) -> (d0, d1)>
#scalar = affine_map<(d0, d1) -> ()>
// Full under a tensor-parallel plan: every value is read through its
// annotations, a result annotation and one per user, so liveness goes by the
// value they annotate. The GEMM's output and the residual add's are each the
// one value of the data live: both kept (no boundary would be found if each
// annotation counted as a value of its own, and the whole forward would be
// recomputed at the backward's start); the two tanh are made again from them.
// FULL-LABEL: func.func @main
// FULL: %[[H:.*]] = linalg.matmul
// FULL: linalg.generic {{.*}} ins(%{{.*}} : tensor<2x2xf32>)
// FULL: math.tanh
// FULL: %[[RES:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<2x2xf32>, tensor<2x2xf32>)
// FULL: arith.addf
// The backward:
// FULL: shard.shard %[[H]] to %{{.*}} {autopar.recomputed}
// FULL: math.tanh
// FULL: shard.shard %[[RES]] to %{{.*}} {autopar.recomputed}
// FULL: math.tanh
// FULL-NOT: linalg.matmul
// FULL-NOT: arith.addf
// FULL: return
shard.grid @autopar_grid(shape = 1x2)
func.func @main(%w: tensor<2x2xf32> {autopar.parameter = "w", autopar.trainable}, %x: tensor<2x2xf32> {autopar.input = "x"})
    -> (tensor<f32> {autopar.output = "loss"}, tensor<2x2xf32> {autopar.gradient = "w"}) {
  %zero = arith.constant 0.0 : f32
  %sr = shard.sharding @autopar_grid split_axes = [[]] : !shard.sharding
  %wa = shard.shard %w to %sr : tensor<2x2xf32>
  %wu = shard.shard %wa to %sr annotate_for_users : tensor<2x2xf32>
  %e = tensor.empty() : tensor<2x2xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x2xf32>) -> tensor<2x2xf32>
  %h = linalg.matmul ins(%x, %wu : tensor<2x2xf32>, tensor<2x2xf32>) outs(%z : tensor<2x2xf32>) -> tensor<2x2xf32>
  %ha = shard.shard %h to %sr : tensor<2x2xf32>
  %hu1 = shard.shard %ha to %sr annotate_for_users : tensor<2x2xf32>
  %hu2 = shard.shard %ha to %sr annotate_for_users : tensor<2x2xf32>
  %t = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%hu1 : tensor<2x2xf32>) outs(%e : tensor<2x2xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.tanh %a : f32
    linalg.yield %r : f32
  } -> tensor<2x2xf32>
  %ta = shard.shard %t to %sr : tensor<2x2xf32>
  %tu = shard.shard %ta to %sr annotate_for_users : tensor<2x2xf32>
  %res = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]} ins(%tu, %hu2 : tensor<2x2xf32>, tensor<2x2xf32>) outs(%e : tensor<2x2xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.addf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<2x2xf32>
  %ra = shard.shard %res to %sr : tensor<2x2xf32>
  %ru1 = shard.shard %ra to %sr annotate_for_users : tensor<2x2xf32>
  %ru2 = shard.shard %ra to %sr annotate_for_users : tensor<2x2xf32>
  %u = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%ru1 : tensor<2x2xf32>) outs(%e : tensor<2x2xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.tanh %a : f32
    linalg.yield %r : f32
  } -> tensor<2x2xf32>
  %ua = shard.shard %u to %sr : tensor<2x2xf32>
  %uu = shard.shard %ua to %sr annotate_for_users : tensor<2x2xf32>
  %s0 = tensor.empty() : tensor<f32>
  %s = linalg.fill ins(%zero : f32) outs(%s0 : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [#map, #map, #scalar], iterator_types = ["reduction", "reduction"]} ins(%uu, %ru2 : tensor<2x2xf32>, tensor<2x2xf32>) outs(%s : tensor<f32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %ab = arith.mulf %a, %b : f32
    %p = arith.addf %ab, %o : f32
    linalg.yield %p : f32
  } -> tensor<f32>
  // The backward reads tanh's outputs (the derivative 1 - y^2).
  %g = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]} ins(%ta, %ua : tensor<2x2xf32>, tensor<2x2xf32>) outs(%e : tensor<2x2xf32>) {
  ^bb0(%v: f32, %y: f32, %o: f32):
    %dv = arith.mulf %v, %y : f32
    linalg.yield %dv : f32
  } -> tensor<2x2xf32>
  return %loss, %g : tensor<f32>, tensor<2x2xf32>
}

// -----

#map = affine_map<(d0, d1) -> (d0, d1)>
#scalar = affine_map<(d0, d1) -> ()>
// Full recomputation keeps the segment boundaries: a residual block's output
// (the only value of the data live after it) is kept; the GEMM and the ReLU
// inside the block, while the residual's input is live too, are recomputed.
// (The arguments are kept whatever the mode, and are not counted live.)
// FULL-LABEL: func.func @main
// FULL: %[[H:.*]] = linalg.generic {{.*}} ins(%arg1 : tensor<2x2xf32>)
// FULL: %[[MM:.*]] = linalg.matmul ins(%[[H]], %arg0
// FULL: %[[RELU:.*]] = linalg.generic {{.*}} ins(%[[MM]] : tensor<2x2xf32>)
// FULL: %[[RES:.*]] = linalg.generic {{.*}} ins(%[[RELU]], %[[H]] : tensor<2x2xf32>, tensor<2x2xf32>)
// FULL: %[[LOSS:.*]] = linalg.generic {{.*}} ins(%[[RES]] : tensor<2x2xf32>)
// FULL: %[[MM2:.*]] = linalg.matmul {autopar.recomputed} ins(%[[H]], %arg0
// FULL-NOT: autopar.recomputed
// FULL: linalg.generic {{.*}} ins(%[[RES]], %[[MM2]] : tensor<2x2xf32>, tensor<2x2xf32>)
func.func @main(%w: tensor<2x2xf32> {autopar.parameter = "w", autopar.trainable}, %x: tensor<2x2xf32> {autopar.input = "x"})
    -> (tensor<f32> {autopar.output = "loss"}, tensor<2x2xf32> {autopar.gradient = "w"}) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x2xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x2xf32>) -> tensor<2x2xf32>
  %h = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<2x2xf32>) outs(%e : tensor<2x2xf32>) {
  ^bb0(%a: f32, %o: f32):
    %two = arith.addf %a, %a : f32
    linalg.yield %two : f32
  } -> tensor<2x2xf32>
  %mm = linalg.matmul ins(%h, %w : tensor<2x2xf32>, tensor<2x2xf32>) outs(%z : tensor<2x2xf32>) -> tensor<2x2xf32>
  %relu = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%mm : tensor<2x2xf32>) outs(%e : tensor<2x2xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.maximumf %a, %zero : f32
    linalg.yield %m : f32
  } -> tensor<2x2xf32>
  %res = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]} ins(%relu, %h : tensor<2x2xf32>, tensor<2x2xf32>) outs(%e : tensor<2x2xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %p = arith.addf %a, %b : f32
    linalg.yield %p : f32
  } -> tensor<2x2xf32>
  %s0 = tensor.empty() : tensor<f32>
  %s = linalg.fill ins(%zero : f32) outs(%s0 : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [#map, #scalar], iterator_types = ["reduction", "reduction"]} ins(%res : tensor<2x2xf32>) outs(%s : tensor<f32>) {
  ^bb0(%a: f32, %o: f32):
    %sq = arith.mulf %a, %a : f32
    %p = arith.addf %sq, %o : f32
    linalg.yield %p : f32
  } -> tensor<f32>
  // The backward reads the block's output and the GEMM's.
  %g = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]} ins(%res, %mm : tensor<2x2xf32>, tensor<2x2xf32>) outs(%e : tensor<2x2xf32>) {
  ^bb0(%r: f32, %v: f32, %o: f32):
    %dv = arith.mulf %r, %v : f32
    linalg.yield %dv : f32
  } -> tensor<2x2xf32>
  return %loss, %g : tensor<f32>, tensor<2x2xf32>
}
