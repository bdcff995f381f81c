// autopar-mixed-precision on a GPU (no f32-gemms): a GEMM that starts from
// zero and whose f32 result is only rounded to bf16 writes bf16 itself; a
// GEMM whose result is read in f32 too, or that adds to a non-zero init,
// keeps its f32 result. With f32-gemms (CPU) nothing changes.
// RUN: autopar-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(autopar-mixed-precision{keep-parameters}))' | FileCheck %s
// RUN: autopar-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(autopar-mixed-precision{keep-parameters f32-gemms}))' | FileCheck %s --check-prefix=CPU

// CHECK-LABEL: func.func @only_rounded
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : bf16
// CHECK: %[[INIT:.*]] = linalg.fill ins(%[[ZERO]] : bf16) outs(%{{.*}} : tensor<3x5xbf16>)
// CHECK: %[[Y:.*]] = linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<3x4xbf16>, tensor<4x5xbf16>) outs(%[[INIT]] : tensor<3x5xbf16>) -> tensor<3x5xbf16>
// CHECK-NOT: arith.truncf
// CHECK: return %[[Y]]
// CPU-LABEL: func.func @only_rounded
// CPU: linalg.matmul {{.*}} -> tensor<3x5xf32>
// CPU: arith.truncf
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @only_rounded(%a: tensor<3x4xbf16>, %b: tensor<4x5xbf16>) -> tensor<3x5xbf16> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<3x5xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<3x5xf32>) -> tensor<3x5xf32>
  %y = linalg.matmul ins(%a, %b : tensor<3x4xbf16>, tensor<4x5xbf16>) outs(%init : tensor<3x5xf32>) -> tensor<3x5xf32>
  %le = tensor.empty() : tensor<3x5xbf16>
  %low = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%y : tensor<3x5xf32>) outs(%le : tensor<3x5xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<3x5xbf16>
  return %low : tensor<3x5xbf16>
}

// -----

// CHECK-LABEL: func.func @also_read_in_f32
// CHECK: linalg.matmul {{.*}} -> tensor<3x5xf32>
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @also_read_in_f32(%a: tensor<3x4xbf16>, %b: tensor<4x5xbf16>) -> (tensor<3x5xbf16>, tensor<3xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<3x5xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<3x5xf32>) -> tensor<3x5xf32>
  %y = linalg.matmul ins(%a, %b : tensor<3x4xbf16>, tensor<4x5xbf16>) outs(%init : tensor<3x5xf32>) -> tensor<3x5xf32>
  %le = tensor.empty() : tensor<3x5xbf16>
  %low = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%y : tensor<3x5xf32>) outs(%le : tensor<3x5xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<3x5xbf16>
  %re = tensor.empty() : tensor<3xf32>
  %rinit = linalg.fill ins(%zero : f32) outs(%re : tensor<3xf32>) -> tensor<3xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%y : tensor<3x5xf32>) outs(%rinit : tensor<3xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %in, %acc : f32
    linalg.yield %s : f32
  } -> tensor<3xf32>
  return %low, %sum : tensor<3x5xbf16>, tensor<3xf32>
}

// -----

// CHECK-LABEL: func.func @accumulates
// CHECK: linalg.matmul {{.*}} outs(%{{.*}} : tensor<3x5xf32>) -> tensor<3x5xf32>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @accumulates(%a: tensor<3x4xbf16>, %b: tensor<4x5xbf16>, %c: tensor<3x5xf32>) -> tensor<3x5xbf16> {
  %y = linalg.matmul ins(%a, %b : tensor<3x4xbf16>, tensor<4x5xbf16>) outs(%c : tensor<3x5xf32>) -> tensor<3x5xf32>
  %le = tensor.empty() : tensor<3x5xbf16>
  %low = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%y : tensor<3x5xf32>) outs(%le : tensor<3x5xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<3x5xbf16>
  return %low : tensor<3x5xbf16>
}

// -----

// Rounded after a reshape (the LM head's [N, C] product expanded to
// [B, S, C]): the reshape is recreated on the bf16 product.
// CHECK-LABEL: func.func @rounded_after_reshape
// CHECK: %[[Y:.*]] = linalg.matmul {{.*}} -> tensor<6x5xbf16>
// CHECK: %[[E:.*]] = tensor.expand_shape %[[Y]] {{\[\[}}0, 1], [2]] output_shape [2, 3, 5] : tensor<6x5xbf16> into tensor<2x3x5xbf16>
// CHECK-NOT: arith.truncf
// CHECK: return %[[E]]
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @rounded_after_reshape(%a: tensor<6x4xbf16>, %b: tensor<4x5xbf16>) -> tensor<2x3x5xbf16> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<6x5xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<6x5xf32>) -> tensor<6x5xf32>
  %y = linalg.matmul ins(%a, %b : tensor<6x4xbf16>, tensor<4x5xbf16>) outs(%init : tensor<6x5xf32>) -> tensor<6x5xf32>
  %x = tensor.expand_shape %y [[0, 1], [2]] output_shape [2, 3, 5] : tensor<6x5xf32> into tensor<2x3x5xf32>
  %le = tensor.empty() : tensor<2x3x5xbf16>
  %low = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x : tensor<2x3x5xf32>) outs(%le : tensor<2x3x5xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<2x3x5xbf16>
  return %low : tensor<2x3x5xbf16>
}
