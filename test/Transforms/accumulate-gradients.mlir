// autopar-accumulate-gradients: a differentiated @main for one micro-batch
// becomes @main_micro_batch, called once per micro-batch by a new @main that
// takes the whole batch; the loss and gradients are normalised as one big
// batch's: num / den losses by the sum of den, sums summed, others averaged;
// BatchNorm-style updates carried; Dropout seeds differ per micro-batch.
// RUN: autopar-opt %s -split-input-file -verify-diagnostics --autopar-accumulate-gradients=micro-batches=3 | FileCheck %s
// RUN: not autopar-opt %s -split-input-file --autopar-accumulate-gradients=micro-batches=0 2>&1 | FileCheck %s --check-prefix=ZERO
// ZERO: error: autopar-accumulate-gradients: micro-batches must be at least 1, not 0

// A mean over valid targets: loss = num / den, den from the labels only.
// The micro-batch divides by one and returns den; the step divides the sums.
// CHECK-LABEL: func.func private @main_micro_batch
// CHECK-SAME: (%{{.*}}: tensor<4xf32>, %{{.*}}: tensor<2x4xf32>, %{{.*}}: tensor<2xf32>) -> (tensor<f32>, tensor<4xf32>, tensor<f32>)
// CHECK-NOT: autopar.
// CHECK: %[[ONE:.*]] = arith.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[NUM:.*]] = linalg.generic {{.*}} ins(%arg0 : tensor<4xf32>)
// CHECK: %[[DEN:.*]] = linalg.generic {{.*}} ins(%arg2 : tensor<2xf32>)
// CHECK: %[[LOSS:.*]] = linalg.generic {{.*}} ins(%[[NUM]], %[[ONE]] : tensor<f32>, tensor<f32>)
// CHECK: %[[GRAD:.*]] = linalg.generic {{.*}} ins(%[[ONE]] : tensor<f32>)
// CHECK: return %[[LOSS]], %[[GRAD]], %[[DEN]]
// CHECK-LABEL: func.func @main
// CHECK-SAME: %[[W:[^:]*]]: tensor<4xf32> {autopar.parameter = "w", autopar.trainable}
// CHECK-SAME: %[[X:[^:]*]]: tensor<6x4xf32> {autopar.input = "x"}
// CHECK-SAME: %[[Y:[^:]*]]: tensor<6xf32> {autopar.input = "y"}
// CHECK-SAME: -> (tensor<f32> {autopar.output = "loss"}, tensor<4xf32> {autopar.gradient = "w", autopar.output = "w.grad"})
// CHECK: %[[C3:.*]] = arith.constant 3 : index
// CHECK: %[[SUMS:.*]]:3 = scf.for %[[K:.*]] = %{{.*}} to %[[C3]] step %{{.*}} iter_args(%[[L:.*]] = %{{.*}}, %[[G:.*]] = %{{.*}}, %[[D:.*]] = %{{.*}})
// CHECK: %[[XK:.*]] = tensor.extract_slice %[[X]][%{{.*}}, 0] [2, 4] [1, 1]
// CHECK: %[[YK:.*]] = tensor.extract_slice %[[Y]][%{{.*}}] [2] [1]
// CHECK: %[[R:.*]]:3 = func.call @main_micro_batch(%[[W]], %[[XK]], %[[YK]])
// CHECK: linalg.generic {{.*}} ins(%[[R]]#0 : tensor<f32>) outs(%[[L]] : tensor<f32>)
// CHECK: arith.addf
// CHECK: linalg.generic {{.*}} ins(%[[R]]#1 : tensor<4xf32>) outs(%[[G]] : tensor<4xf32>)
// CHECK: linalg.generic {{.*}} ins(%[[R]]#2 : tensor<f32>) outs(%[[D]] : tensor<f32>)
// CHECK: scf.yield
// CHECK: %[[LOSS:.*]] = linalg.generic {{.*}} ins(%[[SUMS]]#2 : tensor<f32>) outs(%[[SUMS]]#0 : tensor<f32>)
// CHECK: arith.divf
// CHECK: %[[GRAD:.*]] = linalg.generic {{.*}} ins(%[[SUMS]]#2 : tensor<f32>) outs(%[[SUMS]]#1 : tensor<4xf32>)
// CHECK: arith.divf
// CHECK: return %[[LOSS]], %[[GRAD]]

#id = affine_map<(d0) -> (d0)>
#red = affine_map<(d0) -> ()>
#scalar = affine_map<() -> ()>
func.func @main(%w: tensor<4xf32> {autopar.parameter = "w", autopar.trainable},
                %x: tensor<2x4xf32> {autopar.input = "x"},
                %y: tensor<2xf32> {autopar.input = "y"})
    -> (tensor<f32> {autopar.output = "loss"},
        tensor<4xf32> {autopar.gradient = "w", autopar.output = "w.grad"}) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %num = linalg.generic {indexing_maps = [#id, #red], iterator_types = ["reduction"]}
      ins(%w : tensor<4xf32>) outs(%z : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  %den = linalg.generic {indexing_maps = [#id, #red], iterator_types = ["reduction"]}
      ins(%y : tensor<2xf32>) outs(%z : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [#scalar, #scalar, #scalar], iterator_types = []}
      ins(%num, %den : tensor<f32>, tensor<f32>) outs(%e : tensor<f32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.divf %a, %b : f32
    linalg.yield %d : f32
  } -> tensor<f32>
  %ge = tensor.empty() : tensor<4xf32>
  %grad = linalg.generic {indexing_maps = [#red, #id], iterator_types = ["parallel"]}
      ins(%den : tensor<f32>) outs(%ge : tensor<4xf32>) {
  ^bb0(%b: f32, %o: f32):
    %one = arith.constant 1.0 : f32
    %d = arith.divf %one, %b : f32
    linalg.yield %d : f32
  } -> tensor<4xf32>
  return %loss, %grad : tensor<f32>, tensor<4xf32>
}

// -----

// fp16's loss scaling (a multiply marked autopar.loss_scaling) is looked
// through: the loss under it is still num / den.
// CHECK-LABEL: func.func private @main_micro_batch
// CHECK: %[[ONE:.*]] = arith.constant dense<1.000000e+00> : tensor<f32>
// CHECK: linalg.generic {{.*}} ins(%{{.*}}, %[[ONE]] : tensor<f32>, tensor<f32>)
// CHECK-LABEL: func.func @main
// CHECK: %[[SUMS:.*]]:3 = scf.for
// CHECK: linalg.generic {{.*}} ins(%[[SUMS]]#2 : tensor<f32>) outs(%[[SUMS]]#0 : tensor<f32>)

#id = affine_map<(d0) -> (d0)>
#red = affine_map<(d0) -> ()>
#scalar = affine_map<() -> ()>
func.func @main(%w: tensor<4xf32> {autopar.parameter = "w", autopar.trainable},
                %y: tensor<2xf32> {autopar.input = "y"})
    -> (tensor<f32> {autopar.output = "loss"},
        tensor<4xf32> {autopar.gradient = "w", autopar.output = "w.grad"}) {
  %zero = arith.constant 0.0 : f32
  %scale = arith.constant 1024.0 : f32
  %e = tensor.empty() : tensor<f32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %num = linalg.generic {indexing_maps = [#id, #red], iterator_types = ["reduction"]}
      ins(%w : tensor<4xf32>) outs(%z : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  %den = linalg.generic {indexing_maps = [#id, #red], iterator_types = ["reduction"]}
      ins(%y : tensor<2xf32>) outs(%z : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [#scalar, #scalar, #scalar], iterator_types = []}
      ins(%num, %den : tensor<f32>, tensor<f32>) outs(%e : tensor<f32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.divf %a, %b : f32
    linalg.yield %d : f32
  } -> tensor<f32>
  %scaled = linalg.generic {indexing_maps = [#scalar, #scalar], iterator_types = []}
      ins(%loss : tensor<f32>) outs(%e : tensor<f32>) attrs = {autopar.loss_scaling} {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %scale : f32
    linalg.yield %m : f32
  } -> tensor<f32>
  return %scaled, %w : tensor<f32>, tensor<4xf32>
}

// -----

// A denominator that depends on a trained parameter is not a count: the
// loss is a mean of the micro-batches' (divided by 3), and the micro-batch
// keeps its division.
// CHECK-LABEL: func.func private @main_micro_batch
// CHECK-NOT: dense<1.0
// CHECK: return %{{.*}}, %{{.*}} : tensor<f32>, tensor<4xf32>
// CHECK-LABEL: func.func @main
// CHECK: %[[SUMS:.*]]:2 = scf.for
// CHECK: %[[THREE:.*]] = arith.constant dense<3.000000e+00> : tensor<f32>
// CHECK: linalg.generic {{.*}} ins(%[[THREE]] : tensor<f32>) outs(%[[SUMS]]#0 : tensor<f32>)
// CHECK: linalg.generic {{.*}} ins(%[[THREE]] : tensor<f32>) outs(%[[SUMS]]#1 : tensor<4xf32>)

#id = affine_map<(d0) -> (d0)>
#red = affine_map<(d0) -> ()>
#scalar = affine_map<() -> ()>
func.func @main(%w: tensor<4xf32> {autopar.parameter = "w", autopar.trainable},
                %x: tensor<2x4xf32> {autopar.input = "x"})
    -> (tensor<f32> {autopar.output = "loss"},
        tensor<4xf32> {autopar.gradient = "w", autopar.output = "w.grad"}) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %num = linalg.generic {indexing_maps = [#id, #red], iterator_types = ["reduction"]}
      ins(%w : tensor<4xf32>) outs(%z : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [#scalar, #scalar, #scalar], iterator_types = []}
      ins(%num, %num : tensor<f32>, tensor<f32>) outs(%e : tensor<f32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.divf %a, %b : f32
    linalg.yield %d : f32
  } -> tensor<f32>
  %ge = tensor.empty() : tensor<4xf32>
  %grad = linalg.fill ins(%zero : f32) outs(%ge : tensor<4xf32>) -> tensor<4xf32>
  return %loss, %grad : tensor<f32>, tensor<4xf32>
}

// -----

// A sum is summed (no division); a parameter the forward updates (a running
// mean) is carried from one micro-batch to the next and returned; the seed
// passes unchanged and micro-batch k's sample offset (Dropout's masks by
// global sample) is k x 2, its first sample; @main loses the offset.
// CHECK-LABEL: func.func @main
// CHECK-SAME: %[[W:[^:]*]]: tensor<4xf32> {autopar.parameter = "w", autopar.trainable}
// CHECK-SAME: %[[RM:[^:]*]]: tensor<4xf32> {autopar.parameter = "rm"}
// CHECK-SAME: %[[SEED:[^:]*]]: tensor<i64> {autopar.seed}
// CHECK-SAME: %[[X:[^:]*]]: tensor<6x4xf32> {autopar.input = "x"})
// CHECK: %[[NONE:.*]] = arith.constant 0 : i64
// CHECK: %[[SUMS:.*]]:3 = scf.for %[[K:[^ ]*]] = {{.*}} iter_args(%[[L:.*]] = %{{.*}}, %[[G:.*]] = %{{.*}}, %[[STATE:.*]] = %[[RM]])
// CHECK: %[[KI:.*]] = arith.index_cast %[[K]] : index to i64
// CHECK: %[[C2:.*]] = arith.constant 2 : i64
// CHECK: %[[MUL:.*]] = arith.muli %[[KI]], %[[C2]]
// CHECK: %[[FIRST:.*]] = arith.addi %[[NONE]], %[[MUL]]
// CHECK: %[[OFF:.*]] = tensor.from_elements %[[FIRST]] : tensor<i64>
// CHECK: %[[R:.*]]:3 = func.call @main_micro_batch(%[[W]], %[[STATE]], %[[SEED]], %[[OFF]], %{{.*}})
// CHECK: scf.yield %{{.*}}, %{{.*}}, %[[R]]#2
// CHECK-NOT: arith.divf
// CHECK: return %[[SUMS]]#0, %[[SUMS]]#1, %[[SUMS]]#2

#id = affine_map<(d0) -> (d0)>
#red = affine_map<(d0) -> ()>
func.func @main(%w: tensor<4xf32> {autopar.parameter = "w", autopar.trainable},
                %rm: tensor<4xf32> {autopar.parameter = "rm"},
                %seed: tensor<i64> {autopar.seed},
                %offset: tensor<i64> {autopar.sample_offset},
                %x: tensor<2x4xf32> {autopar.input = "x"})
    -> (tensor<f32> {autopar.output = "loss"},
        tensor<4xf32> {autopar.gradient = "w", autopar.output = "w.grad"},
        tensor<4xf32> {autopar.update = "rm"}) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [#id, #red], iterator_types = ["reduction"]}
      ins(%w : tensor<4xf32>) outs(%z : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %loss, %w, %w : tensor<f32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// expected-error @+1 {{@main must be differentiated first (autopar-differentiate): its first result is the loss}}
func.func @main(%w: tensor<4xf32> {autopar.parameter = "w"})
    -> (tensor<4xf32> {autopar.gradient = "w"}) {
  return %w : tensor<4xf32>
}

// -----

// expected-error @+1 {{gradient accumulation: input 'n' has no batch dim to cut into micro-batches}}
func.func @main(%n: tensor<f32> {autopar.input = "n"})
    -> (tensor<f32> {autopar.output = "loss"}) {
  return %n : tensor<f32>
}
