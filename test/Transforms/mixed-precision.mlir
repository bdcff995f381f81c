// autopar-mixed-precision: parameters and stored activations in bf16 (or f16),
// GEMMs on low-typed operands into f32, reductions and graph outputs in f32;
// keep-parameters f32-gemms keeps f32 master weights and f32 GEMM operands,
// f32-loss-head keeps the loss in f32; an unknown type is refused.
// RUN: autopar-opt %s --pass-pipeline='builtin.module(func.func(autopar-mixed-precision))' --split-input-file | FileCheck %s
// RUN: autopar-opt %s --pass-pipeline='builtin.module(func.func(autopar-mixed-precision{type=f16}))' --split-input-file | FileCheck %s --check-prefix=F16
// RUN: autopar-opt %s --pass-pipeline='builtin.module(func.func(autopar-mixed-precision{keep-parameters f32-gemms}))' --split-input-file | FileCheck %s --check-prefix=TRAIN
// RUN: autopar-opt %s --pass-pipeline='builtin.module(func.func(autopar-mixed-precision{keep-parameters f32-loss-head}))' --split-input-file | FileCheck %s --check-prefix=HEAD
// RUN: not autopar-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(autopar-mixed-precision{type=fp8}))' 2>&1 | FileCheck %s --check-prefix=TYPE
// TYPE: for the --type option: Cannot find option named 'fp8'!

#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (j)>

// Parameters are stored in bf16 (their autopar.dtype says so); the graph
// input stays f32 and is truncated for the GEMM; both GEMMs take bf16
// operands and accumulate into f32; the bias + ReLU kernel reads the GEMM's
// f32 result and the bf16 bias (extended in its body) and stores its result
// in bf16, which the second GEMM reads directly. The output stays f32.
// CHECK-LABEL: func.func @mlp
// CHECK-SAME: (%[[W:.*]]: tensor<8x16xbf16> {autopar.dtype = "bfloat16", autopar.parameter = "w"},
// CHECK-SAME: %[[B:.*]]: tensor<16xbf16> {autopar.dtype = "bfloat16", autopar.parameter = "b"},
// CHECK-SAME: %[[W2:.*]]: tensor<16x4xbf16> {autopar.dtype = "bfloat16", autopar.parameter = "w2"},
// CHECK-SAME: %[[X:.*]]: tensor<4x8xf32> {autopar.dtype = "float32", autopar.input = "x"})
// CHECK-SAME: -> (tensor<4x4xf32>
// CHECK: %[[XT:.*]] = linalg.generic {{.*}} ins(%[[X]] : tensor<4x8xf32>) outs(%{{.*}} : tensor<4x8xbf16>)
// CHECK: arith.truncf
// CHECK: %[[MM:.*]] = linalg.matmul ins(%[[XT]], %[[W]] : tensor<4x8xbf16>, tensor<8x16xbf16>) outs(%{{.*}} : tensor<4x16xf32>)
// CHECK: %[[H:.*]] = linalg.generic {{.*}} ins(%[[MM]], %[[B]] : tensor<4x16xf32>, tensor<16xbf16>) outs(%{{.*}} : tensor<4x16xbf16>)
// CHECK-NEXT: ^bb0(%{{.*}}: f32, %[[BB:.*]]: bf16, %{{.*}}: bf16):
// CHECK-NEXT: %[[BF:.*]] = arith.extf %[[BB]] : bf16 to f32
// CHECK: %[[T:.*]] = arith.truncf %{{.*}} : f32 to bf16
// CHECK-NEXT: linalg.yield %[[T]] : bf16
// CHECK: %[[Y:.*]] = linalg.matmul ins(%[[H]], %[[W2]] : tensor<4x16xbf16>, tensor<16x4xbf16>) outs(%{{.*}} : tensor<4x4xf32>)
// CHECK: return %[[Y]] : tensor<4x4xf32>
// TRAIN-LABEL: func.func @mlp
// Training (keep-parameters f32-gemms): the parameters stay f32 (master
// weights); a GEMM reads each operand rounded to bf16 and extended back to
// f32 (CPU kernels are f32): the same products as a bf16 GEMM.
// TRAIN-SAME: (%[[W:.*]]: tensor<8x16xf32> {autopar.dtype = "float32", autopar.parameter = "w"},
// TRAIN-SAME: %[[B:.*]]: tensor<16xf32> {autopar.dtype = "float32", autopar.parameter = "b"},
// TRAIN: %[[XT:.*]] = linalg.generic {{.*}} ins(%{{.*}} : tensor<4x8xf32>) outs(%{{.*}} : tensor<4x8xbf16>)
// TRAIN: %[[XE:.*]] = linalg.generic {{.*}} ins(%[[XT]] : tensor<4x8xbf16>) outs(%{{.*}} : tensor<4x8xf32>)
// TRAIN: arith.extf
// TRAIN: %[[WT:.*]] = linalg.generic {{.*}} ins(%[[W]] : tensor<8x16xf32>) outs(%{{.*}} : tensor<8x16xbf16>)
// TRAIN: arith.truncf
// TRAIN: %[[WE:.*]] = linalg.generic {{.*}} ins(%[[WT]] : tensor<8x16xbf16>) outs(%{{.*}} : tensor<8x16xf32>)
// TRAIN: linalg.matmul ins(%[[XE]], %[[WE]] : tensor<4x8xf32>, tensor<8x16xf32>) outs(%{{.*}} : tensor<4x16xf32>)
// The bias + ReLU kernel still stores its result in bf16, reading the f32 bias.
// TRAIN: linalg.generic {{.*}} ins(%{{.*}}, %[[B]] : tensor<4x16xf32>, tensor<16xf32>) outs(%{{.*}} : tensor<4x16xbf16>)
// F16-LABEL: func.func @mlp
// F16-SAME: tensor<8x16xf16> {autopar.dtype = "float16", autopar.parameter = "w"}
// F16: linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<4x16xf16>, tensor<16x4xf16>) outs(%{{.*}} : tensor<4x4xf32>)
func.func @mlp(%w: tensor<8x16xf32> {autopar.dtype = "float32", autopar.parameter = "w"},
               %b: tensor<16xf32> {autopar.dtype = "float32", autopar.parameter = "b"},
               %w2: tensor<16x4xf32> {autopar.dtype = "float32", autopar.parameter = "w2"},
               %x: tensor<4x8xf32> {autopar.dtype = "float32", autopar.input = "x"})
    -> (tensor<4x4xf32> {autopar.dtype = "float32", autopar.output = "y"}) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%f : tensor<4x16xf32>) -> tensor<4x16xf32>
  %h = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm, %b : tensor<4x16xf32>, tensor<16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    %r = arith.maximumf %s, %zero : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  %e2 = tensor.empty() : tensor<4x4xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<4x4xf32>) -> tensor<4x4xf32>
  %y = linalg.matmul ins(%h, %w2 : tensor<4x16xf32>, tensor<16x4xf32>) outs(%f2 : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

#id = affine_map<(i, j) -> (i, j)>
#rows = affine_map<(i, j) -> (i)>

// A reduction (a softmax's row sum) reads the bf16 exp in its body and keeps
// its f32 accumulator; a reshape carries the bf16 type to its consumer; the
// kernel whose result is returned (through a reshape) keeps f32.
// CHECK-LABEL: func.func @reduction
// CHECK: %[[EXP:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<4x16xbf16>)
// CHECK: math.exp
// CHECK: arith.truncf
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[EXP]] : tensor<4x16xbf16>) outs(%{{.*}} : tensor<4xf32>)
// CHECK-NEXT: ^bb0(%[[IN:.*]]: bf16, %{{.*}}: f32):
// CHECK-NEXT: arith.extf %[[IN]] : bf16 to f32
// CHECK: %[[FLAT:.*]] = tensor.collapse_shape %[[EXP]] {{.*}} : tensor<4x16xbf16> into tensor<64xbf16>
// CHECK: %[[OUT:.*]] = linalg.generic {{.*}} ins(%[[FLAT]] : tensor<64xbf16>) outs(%{{.*}} : tensor<64xf32>)
// CHECK-NOT: arith.truncf
// CHECK: %[[R:.*]] = tensor.expand_shape %[[OUT]] {{.*}} into tensor<4x16xf32>
// CHECK: return %[[SUM]], %[[R]] : tensor<4xf32>, tensor<4x16xf32>
func.func @reduction(%x: tensor<4x16xf32> {autopar.dtype = "float32", autopar.input = "x"})
    -> (tensor<4xf32>, tensor<4x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %two = arith.constant 2.0 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %exp = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.exp %a : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  %e1 = tensor.empty() : tensor<4xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4xf32>) -> tensor<4xf32>
  %sum = linalg.generic {indexing_maps = [#id, #rows], iterator_types = ["parallel", "reduction"]}
      ins(%exp : tensor<4x16xf32>) outs(%f1 : tensor<4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %flat = tensor.collapse_shape %exp [[0, 1]] : tensor<4x16xf32> into tensor<64xf32>
  %e2 = tensor.empty() : tensor<64xf32>
  %out = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      ins(%flat : tensor<64xf32>) outs(%e2 : tensor<64xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %two : f32
    linalg.yield %m : f32
  } -> tensor<64xf32>
  %r = tensor.expand_shape %out [[0, 1]] output_shape [4, 16] : tensor<64xf32> into tensor<4x16xf32>
  return %sum, %r : tensor<4xf32>, tensor<4x16xf32>
}

// -----

// Consumers that cannot read bf16 themselves (here a kernel updating the
// parameter in place: its destination) get an explicit f32 copy; integer
// tensors are left alone.
// CHECK-LABEL: func.func @other_consumers
// CHECK-SAME: (%[[P:.*]]: tensor<4xbf16> {{.*}}, %[[I:.*]]: tensor<4xi32> {autopar.dtype = "int32", autopar.parameter = "i"})
// CHECK: %[[COPY:.*]] = linalg.generic {{.*}} ins(%[[P]] : tensor<4xbf16>) outs(%{{.*}} : tensor<4xf32>)
// CHECK: arith.extf
// CHECK: linalg.generic {{.*}} outs(%[[COPY]] : tensor<4xf32>)
func.func @other_consumers(%p: tensor<4xf32> {autopar.dtype = "float32", autopar.parameter = "p"},
                           %i: tensor<4xi32> {autopar.dtype = "int32", autopar.parameter = "i"})
    -> (tensor<4xf32>, tensor<4xi32>) {
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      ins(%i : tensor<4xi32>) outs(%p : tensor<4xf32>) {
  ^bb0(%a: i32, %o: f32):
    %c = arith.sitofp %a : i32 to f32
    %s = arith.addf %c, %o : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %r, %i : tensor<4xf32>, tensor<4xi32>
}

// -----

#id = affine_map<(i, j) -> (i, j)>
#all = affine_map<(i, j) -> ()>

// f32-loss-head: what the returned scalar (the loss) is computed from after
// the last GEMM keeps f32 (the per-sample values and their sum), as autocast
// computes losses in f32; an activation before the GEMM is still stored in
// bf16. Without the option the per-sample values are bf16.
// HEAD-LABEL: func.func @loss_head
// HEAD: %[[ACT:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<4x8xbf16>)
// HEAD: linalg.matmul
// HEAD: %[[PER:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<4x3xf32>)
// HEAD-NOT: arith.truncf
// HEAD: math.exp
// HEAD: linalg.generic {{.*}} ins(%[[PER]] : tensor<4x3xf32>) outs(%{{.*}} : tensor<f32>)
// CHECK-LABEL: func.func @loss_head
// CHECK: linalg.matmul
// CHECK: %[[PER:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<4x3xbf16>)
// CHECK: linalg.generic {{.*}} ins(%[[PER]] : tensor<4x3xbf16>) outs(%{{.*}} : tensor<f32>)
func.func @loss_head(%w: tensor<8x3xf32> {autopar.dtype = "float32", autopar.parameter = "w"},
                     %x: tensor<4x8xf32> {autopar.dtype = "float32", autopar.input = "x"})
    -> (tensor<f32> {autopar.dtype = "float32", autopar.output = "loss"}) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %act = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.maximumf %a, %zero : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %e1 = tensor.empty() : tensor<4x3xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4x3xf32>) -> tensor<4x3xf32>
  %logits = linalg.matmul ins(%act, %w : tensor<4x8xf32>, tensor<8x3xf32>) outs(%f1 : tensor<4x3xf32>) -> tensor<4x3xf32>
  %per = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%logits : tensor<4x3xf32>) outs(%e1 : tensor<4x3xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.exp %a : f32
    linalg.yield %r : f32
  } -> tensor<4x3xf32>
  %e2 = tensor.empty() : tensor<f32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [#id, #all], iterator_types = ["reduction", "reduction"]}
      ins(%per : tensor<4x3xf32>) outs(%f2 : tensor<f32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %o : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %loss : tensor<f32>
}
