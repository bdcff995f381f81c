// autopar-differentiate: the loss and the gradients of the trained
// parameters replace @main's results; each adjoint is a structured op over
// the forward op's domain.
// RUN: autopar-opt %s -split-input-file -autopar-differentiate -verify-diagnostics | FileCheck %s

// A matmul's adjoint is a matmul with transposed maps (BLAS on CPU); the
// sum's adjoint broadcasts dL/dloss = 1 back over the reduced dims; the input
// x is not a parameter and gets no gradient.
// CHECK-LABEL: func.func @main
// CHECK-SAME: %[[W:.*]]: tensor<3x2xf32> {autopar.dtype = "float32", autopar.parameter = "w", autopar.trainable}
// CHECK-SAME: -> (tensor<f32> {autopar.output = "loss"}, tensor<3x2xf32> {autopar.dtype = "float32", autopar.gradient = "w", autopar.output = "w.grad"})
// CHECK: %[[Y:.*]] = linalg.matmul ins(%[[X:.*]], %[[W]] :
// CHECK: %[[LOSS:.*]] = linalg.reduce ins(%[[Y]] :
// CHECK: %[[ONE:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<f32>)
// CHECK: %[[DY:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]{{.*}} ins(%[[ONE]] :
// CHECK: %[[DW:.*]] = linalg.matmul indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}] ins(%[[X]], %[[DY]] : tensor<4x3xf32>, tensor<4x2xf32>)
// CHECK: return %[[LOSS]], %[[DW]] : tensor<f32>, tensor<3x2xf32>
func.func @main(%w: tensor<3x2xf32> {autopar.dtype = "float32", autopar.parameter = "w"},
                %x: tensor<4x3xf32> {autopar.dtype = "float32", autopar.input = "x"})
    -> (tensor<f32> {autopar.output = "loss"}) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x2xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<4x2xf32>) -> tensor<4x2xf32>
  %y = linalg.matmul ins(%x, %w : tensor<4x3xf32>, tensor<3x2xf32>) outs(%init : tensor<4x2xf32>) -> tensor<4x2xf32>
  %s = tensor.empty() : tensor<f32>
  %sinit = linalg.fill ins(%zero : f32) outs(%s : tensor<f32>) -> tensor<f32>
  %loss = linalg.reduce ins(%y : tensor<4x2xf32>) outs(%sinit : tensor<f32>) dimensions = [0, 1]
    (%in: f32, %acc: f32) {
      %r = arith.addf %in, %acc : f32
      linalg.yield %r : f32
    }
  return %loss : tensor<f32>
}

// -----

// The body is differentiated by the chain rule: d tanh(b * x)/d b =
// (1 - tanh^2) * x, summed over the broadcast dim (a reduction loop).
// CHECK-LABEL: func.func @main
// CHECK: %[[T:.*]] = linalg.generic {{.*}} ins(%[[X:.*]], %[[B:.*]] : tensor<4x2xf32>, tensor<2xf32>)
// CHECK: linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}, #{{.*}}], iterator_types = ["reduction", "parallel"]} ins(%[[X]], %[[B]], %{{.*}} : tensor<4x2xf32>, tensor<2xf32>, tensor<4x2xf32>) outs(%{{.*}} : tensor<2xf32>)
// CHECK: ^bb0(%[[XS:.*]]: f32, %[[BS:.*]]: f32, %[[G:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK:   %[[P:.*]] = arith.mulf %[[XS]], %[[BS]] :
// CHECK:   %[[TS:.*]] = math.tanh %[[P]]
// CHECK:   %[[SQ:.*]] = arith.mulf %[[TS]], %[[TS]]
// CHECK:   %[[D:.*]] = arith.subf %{{.*}}, %[[SQ]]
// CHECK:   %[[GD:.*]] = arith.mulf %[[G]], %[[D]]
// CHECK:   %[[GX:.*]] = arith.mulf %[[GD]], %[[XS]] :
// CHECK:   %[[SUM:.*]] = arith.addf %[[ACC]], %[[GX]] :
// CHECK:   linalg.yield %[[SUM]]
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
#all = affine_map<(d0, d1) -> ()>
func.func @main(%b: tensor<2xf32> {autopar.dtype = "float32", autopar.parameter = "b"},
                %x: tensor<4x2xf32> {autopar.dtype = "float32", autopar.input = "x"})
    -> (tensor<f32> {autopar.output = "loss"}) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x2xf32>
  %t = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %b : tensor<4x2xf32>, tensor<2xf32>) outs(%e : tensor<4x2xf32>) {
  ^bb0(%xs: f32, %bs: f32, %o: f32):
    %p = arith.mulf %xs, %bs : f32
    %th = math.tanh %p : f32
    linalg.yield %th : f32
  } -> tensor<4x2xf32>
  %s = tensor.empty() : tensor<f32>
  %sinit = linalg.fill ins(%zero : f32) outs(%s : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [#id, #all], iterator_types = ["reduction", "reduction"]}
      ins(%t : tensor<4x2xf32>) outs(%sinit : tensor<f32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.addf %acc, %in : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A max reduction routes the gradient to the element equal to the maximum.
// Every loop indexes w, so the adjoint writes each element once: its init
// is an empty tensor and its body yields the routed value (no accumulation).
// CHECK-LABEL: func.func @main
// CHECK: %[[M:.*]] = linalg.reduce ins(%[[W:.*]] : tensor<3xf32>)
// CHECK: %[[E:.*]] = tensor.empty() : tensor<3xf32>
// CHECK: linalg.generic {{.*}} ins(%[[W]], %{{.*}}, %[[M]] : tensor<3xf32>, tensor<f32>, tensor<f32>) outs(%[[E]] : tensor<3xf32>)
// CHECK: ^bb0(%[[IN:.*]]: f32, %[[G:.*]]: f32, %[[MAX:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK:   %[[HIT:.*]] = arith.cmpf oeq, %[[IN]], %[[MAX]]
// CHECK:   %[[ROUTED:.*]] = arith.select %[[HIT]], %[[G]], %{{.*}}
// CHECK-NEXT: linalg.yield %[[ROUTED]] : f32
func.func @main(%w: tensor<3xf32> {autopar.dtype = "float32", autopar.parameter = "w"})
    -> (tensor<f32> {autopar.output = "loss"}) {
  %ninf = arith.constant 0xFF800000 : f32
  %s = tensor.empty() : tensor<f32>
  %init = linalg.fill ins(%ninf : f32) outs(%s : tensor<f32>) -> tensor<f32>
  %m = linalg.reduce ins(%w : tensor<3xf32>) outs(%init : tensor<f32>) dimensions = [0]
    (%in: f32, %acc: f32) {
      %r = arith.maximumf %in, %acc : f32
      linalg.yield %r : f32
    }
  return %m : tensor<f32>
}

// -----

// Reshapes and slices get their linear transposes.
// CHECK-LABEL: func.func @main
// CHECK: %[[C:.*]] = tensor.collapse_shape %[[W:.*]] {{\[}}[0, 1]] : tensor<2x3xf32> into tensor<6xf32>
// CHECK: %[[S:.*]] = tensor.extract_slice %[[C]][1] [4] [1]
// CHECK: %[[DS:.*]] = tensor.insert_slice %{{.*}} into %{{.*}}[1] [4] [1] : tensor<4xf32> into tensor<6xf32>
// CHECK: %[[DW:.*]] = tensor.expand_shape %[[DS]] {{\[}}[0, 1]] output_shape [2, 3] : tensor<6xf32> into tensor<2x3xf32>
// CHECK: return %{{.*}}, %[[DW]]
func.func @main(%w: tensor<2x3xf32> {autopar.dtype = "float32", autopar.parameter = "w"})
    -> (tensor<f32> {autopar.output = "loss"}) {
  %zero = arith.constant 0.0 : f32
  %c = tensor.collapse_shape %w [[0, 1]] : tensor<2x3xf32> into tensor<6xf32>
  %sl = tensor.extract_slice %c[1] [4] [1] : tensor<6xf32> to tensor<4xf32>
  %s = tensor.empty() : tensor<f32>
  %init = linalg.fill ins(%zero : f32) outs(%s : tensor<f32>) -> tensor<f32>
  %loss = linalg.reduce ins(%sl : tensor<4xf32>) outs(%init : tensor<f32>) dimensions = [0]
    (%in: f32, %acc: f32) {
      %r = arith.addf %in, %acc : f32
      linalg.yield %r : f32
    }
  return %loss : tensor<f32>
}

// -----

// Every op without a rule is listed in one error, with its ONNX node.
// expected-error-re @+1 {{cannot differentiate the loss: 2 op(s) on the path from the parameters to the loss have no gradient rule:{{[[:space:]]+}}linalg.generic from ONNX node(s) 'Atan_2', 'Atan_1'{{[[:space:]]+}}freeze the parameters}}
func.func @main(%w: tensor<4xf32> {autopar.dtype = "float32", autopar.parameter = "w"})
    -> (tensor<f32> {autopar.output = "loss"}) {
  %zero = arith.constant 0.0 : f32
  %s = tensor.empty() : tensor<f32>
  %init = linalg.fill ins(%zero : f32) outs(%s : tensor<f32>) -> tensor<f32>
  %e = tensor.empty() : tensor<4xf32>
  %r1 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%w : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%in: f32, %o: f32):
    %q = math.atan %in : f32
    linalg.yield %q : f32
  } -> tensor<4xf32> loc("Atan_1")
  %r2 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%r1 : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%in: f32, %o: f32):
    %q = math.atan %in : f32
    linalg.yield %q : f32
  } -> tensor<4xf32> loc("Atan_2")
  %loss = linalg.reduce ins(%r2 : tensor<4xf32>) outs(%init : tensor<f32>) dimensions = [0]
    (%in: f32, %acc: f32) {
      %r = arith.addf %in, %acc : f32
      linalg.yield %r : f32
    }
  return %loss : tensor<f32>
}

// -----

// expected-error @+1 {{no loss: none of the model's outputs ('y') is a float scalar}}
func.func @main(%w: tensor<4xf32> {autopar.dtype = "float32", autopar.parameter = "w"})
    -> (tensor<4xf32> {autopar.output = "y"}) {
  return %w : tensor<4xf32>
}

// -----

// expected-error @+1 {{the loss 'loss' does not depend on any float parameter, so there is nothing to train}}
func.func @main(%w: tensor<4xf32> {autopar.dtype = "float32", autopar.parameter = "w"},
                %x: tensor<f32> {autopar.dtype = "float32", autopar.input = "x"})
    -> (tensor<f32> {autopar.output = "loss"}) {
  return %x : tensor<f32>
}

// -----

// An embedding lookup (the importer's Gather: clamped id, tensor.extract of
// the table) has a scatter-add adjoint written as a one-hot reduction over
// (row, ids..., row dims), with the ids' loops reduced and the id clamped as
// the forward clamps it. A float buffer read only by a comparison (a causal
// mask through Equal + Where) carries no gradient and is not trained.
#ids = affine_map<(d0, d1, d2) -> (d0, d1)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#m2 = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[IDS:.*]] = affine_map<(d0, d1, d2, d3) -> (d1, d2)>
// CHECK-DAG: #[[DY:.*]] = affine_map<(d0, d1, d2, d3) -> (d1, d2, d3)>
// CHECK-DAG: #[[TABLE:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d3)>
// CHECK-LABEL: func.func @main
// CHECK-SAME: %[[T:[^:]*]]: tensor<5x3xf32> {autopar.dtype = "float32", autopar.parameter = "wte", autopar.trainable}
// CHECK-SAME: %[[MASK:[^:]*]]: tensor<2x3xf32> {autopar.dtype = "float32", autopar.parameter = "mask"}
// CHECK-SAME: %[[I:[^:]*]]: tensor<2x4xi64>
// CHECK-SAME: -> (tensor<f32> {autopar.output = "loss"}, tensor<5x3xf32> {autopar.dtype = "float32", autopar.gradient = "wte", autopar.output = "wte.grad"})
// CHECK: %[[ZERO:.*]] = linalg.fill {{.*}} -> tensor<5x3xf32>
// CHECK: %[[DT:.*]] = linalg.generic {indexing_maps = [#[[IDS]], #[[DY]], #[[TABLE]]], iterator_types = ["parallel", "reduction", "reduction", "parallel"]}
// CHECK-SAME: ins(%[[I]], %{{.*}} : tensor<2x4xi64>, tensor<2x4x3xf32>) outs(%[[ZERO]] : tensor<5x3xf32>)
// CHECK: ^bb0(%[[ID:.*]]: i64, %[[G:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK:   %[[CAST:.*]] = arith.index_cast %[[ID]] : i64 to index
// CHECK:   %[[CLAMPED:.*]] = arith.minsi %{{.*}}, %c4 : index
// CHECK:   %[[ROW:.*]] = linalg.index 0 : index
// CHECK:   %[[HIT:.*]] = arith.cmpi eq, %[[CLAMPED]], %[[ROW]] : index
// CHECK:   %[[PICK:.*]] = arith.select %[[HIT]], %[[G]], %{{.*}} : f32
// CHECK:   %[[SUM:.*]] = arith.addf %[[ACC]], %[[PICK]] : f32
// CHECK:   linalg.yield %[[SUM]] : f32
// CHECK: return %{{.*}}, %[[DT]] : tensor<f32>, tensor<5x3xf32>
func.func @main(%table: tensor<5x3xf32> {autopar.dtype = "float32", autopar.parameter = "wte"},
                %mask: tensor<2x3xf32> {autopar.dtype = "float32", autopar.parameter = "mask"},
                %ids: tensor<2x4xi64> {autopar.dtype = "int64", autopar.input = "ids"})
    -> (tensor<f32> {autopar.output = "loss"}) {
  %e = tensor.empty() : tensor<2x4x3xf32>
  %rows = linalg.generic {indexing_maps = [#ids, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%ids : tensor<2x4xi64>) outs(%e : tensor<2x4x3xf32>) {
  ^bb0(%id: i64, %out: f32):
    %c0 = arith.constant 0 : index
    %c5 = arith.constant 5 : index
    %c4 = arith.constant 4 : index
    %i = arith.index_cast %id : i64 to index
    %neg = arith.cmpi slt, %i, %c0 : index
    %wrapped = arith.addi %i, %c5 : index
    %s = arith.select %neg, %wrapped, %i : index
    %lo = arith.maxsi %s, %c0 : index
    %hi = arith.minsi %lo, %c4 : index
    %col = linalg.index 2 : index
    %v = tensor.extract %table[%hi, %col] : tensor<5x3xf32>
    linalg.yield %v : f32
  } -> tensor<2x4x3xf32>
  // where(mask == 0, 0, 1) broadcast over the rows: no gradient to the mask.
  %be = tensor.empty() : tensor<2x3xi1>
  %keep = linalg.generic {indexing_maps = [#m2, #m2], iterator_types = ["parallel", "parallel"]}
      ins(%mask : tensor<2x3xf32>) outs(%be : tensor<2x3xi1>) {
  ^bb0(%m: f32, %out: i1):
    %z = arith.constant 0.0 : f32
    %c = arith.cmpf one, %m, %z : f32
    linalg.yield %c : i1
  } -> tensor<2x3xi1>
  %masked = linalg.generic {indexing_maps = [#id3, affine_map<(d0, d1, d2) -> (d0, d2)>, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%rows, %keep : tensor<2x4x3xf32>, tensor<2x3xi1>) outs(%e : tensor<2x4x3xf32>) {
  ^bb0(%r: f32, %k: i1, %out: f32):
    %z = arith.constant 0.0 : f32
    %sel = arith.select %k, %r, %z : f32
    %sq = arith.mulf %sel, %sel : f32
    linalg.yield %sq : f32
  } -> tensor<2x4x3xf32>
  %zero = arith.constant 0.0 : f32
  %s0 = tensor.empty() : tensor<f32>
  %sinit = linalg.fill ins(%zero : f32) outs(%s0 : tensor<f32>) -> tensor<f32>
  %loss = linalg.reduce ins(%masked : tensor<2x4x3xf32>) outs(%sinit : tensor<f32>) dimensions = [0, 1, 2]
    (%in: f32, %acc: f32) {
      %r = arith.addf %in, %acc : f32
      linalg.yield %r : f32
    }
  return %loss : tensor<f32>
}

// -----

// A convolution's adjoints are convolutions (named ops, so that they reach
// the runtime's im2col + GEMM kernel): the input's, of dY spread by the
// strides and padded by the filter, with the filter flipped and its channel
// dims swapped; the filter's, of the input with batch and channels swapped
// by dY as the filter, with strides and dilations exchanged.
// CHECK-DAG: #[[FLIP:.*]] = affine_map<(d0, d1, d2, d3) -> (d1, d0, -d2 + 2, -d3 + 2)>
// CHECK-DAG: #[[SWAP:.*]] = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2, d3)>
// CHECK-LABEL: func.func @main
// CHECK-SAME: %[[X:[^:]*]]: tensor<1x2x5x5xf32> {autopar.dtype = "float32", autopar.parameter = "x", autopar.trainable}
// CHECK-SAME: %[[W:[^:]*]]: tensor<3x2x3x3xf32> {autopar.dtype = "float32", autopar.parameter = "w", autopar.trainable}
// CHECK: %[[SPREAD:.*]] = tensor.insert_slice %[[DY:.*]] into %{{.*}}[0, 0, 2, 2] [1, 3, 2, 2] [1, 1, 2, 2] : tensor<1x3x2x2xf32> into tensor<1x3x7x7xf32>
// CHECK: %[[FLIPPED:.*]] = linalg.generic {indexing_maps = [#[[FLIP]], #{{.*}}], {{.*}} ins(%[[W]] : tensor<3x2x3x3xf32>) outs(%{{.*}} : tensor<2x3x3x3xf32>)
// CHECK: %[[DX:.*]] = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%[[SPREAD]], %[[FLIPPED]] : tensor<1x3x7x7xf32>, tensor<2x3x3x3xf32>) outs(%{{.*}} : tensor<1x2x5x5xf32>)
// CHECK: %[[XT:.*]] = linalg.generic {indexing_maps = [#[[SWAP]], #{{.*}}], {{.*}} ins(%[[X]] : tensor<1x2x5x5xf32>) outs(%{{.*}} : tensor<2x1x5x5xf32>)
// CHECK: %[[DYT:.*]] = linalg.generic {indexing_maps = [#[[SWAP]], #{{.*}}], {{.*}} ins(%[[DY]] : tensor<1x3x2x2xf32>) outs(%{{.*}} : tensor<3x1x2x2xf32>)
// CHECK: %[[DWT:.*]] = linalg.conv_2d_nchw_fchw {dilations = dense<2> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%[[XT]], %[[DYT]] : tensor<2x1x5x5xf32>, tensor<3x1x2x2xf32>) outs(%{{.*}} : tensor<2x3x3x3xf32>)
// CHECK: %[[DW:.*]] = linalg.generic {indexing_maps = [#[[SWAP]], #{{.*}}], {{.*}} ins(%[[DWT]] : tensor<2x3x3x3xf32>) outs(%{{.*}} : tensor<3x2x3x3xf32>)
// CHECK: return %{{.*}}, %[[DX]], %[[DW]]
func.func @main(%x: tensor<1x2x5x5xf32> {autopar.dtype = "float32", autopar.parameter = "x"},
                %w: tensor<3x2x3x3xf32> {autopar.dtype = "float32", autopar.parameter = "w"})
    -> (tensor<f32> {autopar.output = "loss"}) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x3x2x2xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x3x2x2xf32>) -> tensor<1x3x2x2xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>}
      ins(%x, %w : tensor<1x2x5x5xf32>, tensor<3x2x3x3xf32>) outs(%init : tensor<1x3x2x2xf32>) -> tensor<1x3x2x2xf32>
  %s = tensor.empty() : tensor<f32>
  %sinit = linalg.fill ins(%zero : f32) outs(%s : tensor<f32>) -> tensor<f32>
  %loss = linalg.reduce ins(%y : tensor<1x3x2x2xf32>) outs(%sinit : tensor<f32>) dimensions = [0, 1, 2, 3]
    (%in: f32, %acc: f32) {
      %r = arith.mulf %in, %in : f32
      %t = arith.addf %r, %acc : f32
      linalg.yield %t : f32
    }
  return %loss : tensor<f32>
}

// -----

// A grouped convolution's adjoints are grouped convolutions, per group as
// above: the input's with the filter flipped and its channel dims swapped
// within each group ([G, C/G, F/G, KH, KW]); the filter's of the input as
// [C/G, G, N, H, W] by dY as [G, F/G, N, OH, OW], permuted back.
// CHECK-DAG: #[[GFLIP:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d2, d1, -d3 + 2, -d4 + 2)>
// CHECK-DAG: #[[GX:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d2, d1, d0, d3, d4)>
// CHECK-LABEL: func.func @main
// CHECK-SAME: %[[X:[^:]*]]: tensor<1x2x2x5x5xf32>
// CHECK-SAME: %[[W:[^:]*]]: tensor<2x3x2x3x3xf32>
// CHECK: %[[SPREAD:.*]] = tensor.insert_slice %{{.*}} into %{{.*}}[0, 0, 0, 2, 2] [1, 2, 3, 2, 2] [1, 1, 1, 2, 2] : tensor<1x2x3x2x2xf32> into tensor<1x2x3x7x7xf32>
// CHECK: %[[FLIPPED:.*]] = linalg.generic {indexing_maps = [#[[GFLIP]], #{{.*}}], {{.*}} ins(%[[W]] : tensor<2x3x2x3x3xf32>) outs(%{{.*}} : tensor<2x2x3x3x3xf32>)
// CHECK: %[[DX:.*]] = linalg.conv_2d_ngchw_gfchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%[[SPREAD]], %[[FLIPPED]] : tensor<1x2x3x7x7xf32>, tensor<2x2x3x3x3xf32>) outs(%{{.*}} : tensor<1x2x2x5x5xf32>)
// CHECK: %[[XT:.*]] = linalg.generic {indexing_maps = [#[[GX]], #{{.*}}], {{.*}} ins(%[[X]] : tensor<1x2x2x5x5xf32>) outs(%{{.*}} : tensor<2x2x1x5x5xf32>)
// CHECK: %[[DWT:.*]] = linalg.conv_2d_ngchw_gfchw {dilations = dense<2> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%[[XT]], %{{.*}} : tensor<2x2x1x5x5xf32>, tensor<2x3x1x2x2xf32>) outs(%{{.*}} : tensor<2x2x3x3x3xf32>)
// CHECK: %[[DW:.*]] = linalg.generic {{.*}} ins(%[[DWT]] : tensor<2x2x3x3x3xf32>) outs(%{{.*}} : tensor<2x3x2x3x3xf32>)
// CHECK: return %{{.*}}, %[[DX]], %[[DW]]
func.func @main(%x: tensor<1x2x2x5x5xf32> {autopar.dtype = "float32", autopar.parameter = "x"},
                %w: tensor<2x3x2x3x3xf32> {autopar.dtype = "float32", autopar.parameter = "w"})
    -> (tensor<f32> {autopar.output = "loss"}) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x2x3x2x2xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x2x3x2x2xf32>) -> tensor<1x2x3x2x2xf32>
  %y = linalg.conv_2d_ngchw_gfchw {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>}
      ins(%x, %w : tensor<1x2x2x5x5xf32>, tensor<2x3x2x3x3xf32>) outs(%init : tensor<1x2x3x2x2xf32>) -> tensor<1x2x3x2x2xf32>
  %s = tensor.empty() : tensor<f32>
  %sinit = linalg.fill ins(%zero : f32) outs(%s : tensor<f32>) -> tensor<f32>
  %loss = linalg.reduce ins(%y : tensor<1x2x3x2x2xf32>) outs(%sinit : tensor<f32>) dimensions = [0, 1, 2, 3, 4]
    (%in: f32, %acc: f32) {
      %r = arith.mulf %in, %in : f32
      %t = arith.addf %r, %acc : f32
      linalg.yield %t : f32
    }
  return %loss : tensor<f32>
}

// -----

// A sum over data-parallel replicas (the statistics of a replica's
// BatchNorm): every replica's loss reads the sum, so the adjoint of a
// replica's input is the replicas' sum of the result's adjoint, another
// all-reduce.
// CHECK-LABEL: func.func @main
// CHECK-SAME: %[[W:[^:]*]]: tensor<4xf32> {autopar.dtype = "float32", autopar.parameter = "w", autopar.trainable}
// CHECK: %[[S:.*]] = shard.all_reduce %[[W]] on @autopar_grid grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
// CHECK: %[[LOSS:.*]] = linalg.reduce ins(%[[S]] :
// CHECK: %[[DS:.*]] = linalg.generic {{.*}}iterator_types = ["parallel"]
// CHECK: %[[DW:.*]] = shard.all_reduce %[[DS]] on @autopar_grid grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
// CHECK: return %[[LOSS]], %[[DW]] : tensor<f32>, tensor<4xf32>
module {
  shard.grid @autopar_grid(shape = 2)
  func.func @main(%w: tensor<4xf32> {autopar.dtype = "float32", autopar.parameter = "w"})
      -> (tensor<f32> {autopar.output = "loss"}) {
    %zero = arith.constant 0.0 : f32
    %sum = shard.all_reduce %w on @autopar_grid grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    %s = tensor.empty() : tensor<f32>
    %sinit = linalg.fill ins(%zero : f32) outs(%s : tensor<f32>) -> tensor<f32>
    %loss = linalg.reduce ins(%sum : tensor<4xf32>) outs(%sinit : tensor<f32>) dimensions = [0]
      (%in: f32, %acc: f32) {
        %r = arith.addf %in, %acc : f32
        linalg.yield %r : f32
      }
    return %loss : tensor<f32>
  }
}
