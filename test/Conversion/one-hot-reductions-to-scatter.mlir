// autopar-one-hot-reductions-to-scatter: an embedding's gradient, written by
// autopar-differentiate as a one-hot reduction over (row, token, column),
// becomes a scatter-add over (token, column): atomic adds in a parallel loop
// for the GPU, a sequential loop nest with load/add/store for the CPU. Other
// reductions are left alone.

// RUN: autopar-opt %s -split-input-file \
// RUN:   -pass-pipeline='builtin.module(func.func(autopar-one-hot-reductions-to-scatter))' \
// RUN:   | FileCheck %s --check-prefix=ATOMIC
// RUN: autopar-opt %s -split-input-file \
// RUN:   -pass-pipeline='builtin.module(func.func(autopar-one-hot-reductions-to-scatter{atomic=false}))' \
// RUN:   | FileCheck %s --check-prefix=SEQ

// The form EmbeddingAdjoint.cpp writes (ids wrapped from the back and
// clamped into the table), its constants inside the body as built.
// ATOMIC-LABEL: func.func @embedding_gradient
// ATOMIC-SAME: (%[[IDS:.*]]: memref<2x3xi64>, %[[DY:.*]]: memref<2x3x4xf32>, %[[OUT:.*]]: memref<10x4xf32>)
// ATOMIC-DAG: %[[C0:.*]] = arith.constant 0 : index
// ATOMIC-DAG: %[[ROWS:.*]] = arith.constant 10 : index
// ATOMIC: scf.parallel (%[[N:.*]], %[[T:.*]], %[[H:.*]]) = (%{{.*}}) to (%{{.*}}) step
// ATOMIC: %[[ID:.*]] = memref.load %[[IDS]][%[[N]], %[[T]]]
// ATOMIC: %[[V:.*]] = memref.load %[[DY]][%[[N]], %[[T]], %[[H]]]
// ATOMIC: %[[CAST:.*]] = arith.index_cast %[[ID]]
// ATOMIC: %[[ROW:.*]] = arith.minsi
// ATOMIC: %[[GE:.*]] = arith.cmpi sge, %[[ROW]], %[[C0]]
// ATOMIC: %[[LT:.*]] = arith.cmpi slt, %[[ROW]], %[[ROWS]]
// ATOMIC: %[[IN:.*]] = arith.andi %[[GE]], %[[LT]]
// ATOMIC: scf.if %[[IN]] {
// ATOMIC-NEXT: memref.atomic_rmw addf %[[V]], %[[OUT]][%[[ROW]], %[[H]]]
// ATOMIC-NOT: linalg.generic

// SEQ-LABEL: func.func @embedding_gradient
// SEQ-SAME: (%[[IDS:.*]]: memref<2x3xi64>, %[[DY:.*]]: memref<2x3x4xf32>, %[[OUT:.*]]: memref<10x4xf32>)
// SEQ: scf.for %[[N:.*]] =
// SEQ-NEXT: scf.for %[[T:.*]] =
// SEQ-NEXT: scf.for %[[H:.*]] =
// SEQ: %[[V:.*]] = memref.load %[[DY]][%[[N]], %[[T]], %[[H]]]
// SEQ: %[[ROW:.*]] = arith.minsi
// SEQ: scf.if
// SEQ-NEXT: %[[OLD:.*]] = memref.load %[[OUT]][%[[ROW]], %[[H]]]
// SEQ-NEXT: %[[SUM:.*]] = arith.addf %[[OLD]], %[[V]]
// SEQ-NEXT: memref.store %[[SUM]], %[[OUT]][%[[ROW]], %[[H]]]
// SEQ-NOT: scf.parallel
// SEQ-NOT: linalg.generic
#ids = affine_map<(v, n, t, h) -> (n, t)>
#dy = affine_map<(v, n, t, h) -> (n, t, h)>
#out = affine_map<(v, n, t, h) -> (v, h)>
func.func @embedding_gradient(%ids: memref<2x3xi64>, %dy: memref<2x3x4xf32>, %out: memref<10x4xf32>) {
  linalg.generic {indexing_maps = [#ids, #dy, #out], iterator_types = ["parallel", "reduction", "reduction", "parallel"]}
      ins(%ids, %dy : memref<2x3xi64>, memref<2x3x4xf32>) outs(%out : memref<10x4xf32>) {
  ^bb0(%id: i64, %g: f32, %acc: f32):
    %c0 = arith.constant 0 : index
    %c10 = arith.constant 10 : index
    %c9 = arith.constant 9 : index
    %zero = arith.constant 0.0 : f32
    %i = arith.index_cast %id : i64 to index
    %neg = arith.cmpi slt, %i, %c0 : index
    %wrapped = arith.addi %i, %c10 : index
    %w = arith.select %neg, %wrapped, %i : index
    %lo = arith.maxsi %w, %c0 : index
    %row = arith.minsi %lo, %c9 : index
    %v = linalg.index 0 : index
    %hit = arith.cmpi eq, %row, %v : index
    %picked = arith.select %hit, %g, %zero : f32
    %sum = arith.addf %acc, %picked : f32
    linalg.yield %sum : f32
  }
  return
}

// -----

// Mixed precision: a bf16 gradient extended into the f32 table's gradient
// (constants hoisted out of the body, as canonicalize leaves them). The
// extension moves into the scatter.
// ATOMIC-LABEL: func.func @extended_value
// ATOMIC: scf.parallel (%[[T:.*]], %[[H:.*]]) =
// ATOMIC: %[[V:.*]] = memref.load %{{.*}}[%[[T]], %[[H]]] : memref<5x4xbf16>
// ATOMIC: %[[E:.*]] = arith.extf %[[V]] : bf16 to f32
// ATOMIC: memref.atomic_rmw addf %[[E]], %{{.*}}[%{{.*}}, %[[H]]] : (f32, memref<7x4xf32>)

// SEQ-LABEL: func.func @extended_value
// SEQ: %[[E:.*]] = arith.extf
// SEQ: %[[OLD:.*]] = memref.load
// SEQ-NEXT: arith.addf %[[OLD]], %[[E]] : f32
#ids = affine_map<(v, t, h) -> (t)>
#dy = affine_map<(v, t, h) -> (t, h)>
#out = affine_map<(v, t, h) -> (v, h)>
func.func @extended_value(%ids: memref<5xi32>, %dy: memref<5x4xbf16>, %out: memref<7x4xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [#ids, #dy, #out], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%ids, %dy : memref<5xi32>, memref<5x4xbf16>) outs(%out : memref<7x4xf32>) {
  ^bb0(%id: i32, %g: bf16, %acc: f32):
    %row = arith.index_cast %id : i32 to index
    %v = linalg.index 0 : index
    %hit = arith.cmpi eq, %v, %row : index
    %ge = arith.extf %g : bf16 to f32
    %picked = arith.select %hit, %ge, %zero : f32
    %sum = arith.addf %acc, %picked : f32
    linalg.yield %sum : f32
  }
  return
}

// -----

// Not one-hot: the select's false branch is not zero, so rows that miss
// receive something too. Left alone.
// ATOMIC-LABEL: func.func @nonzero_otherwise
// ATOMIC: linalg.generic
// ATOMIC-NOT: memref.atomic_rmw
// SEQ-LABEL: func.func @nonzero_otherwise
// SEQ: linalg.generic
#ids = affine_map<(v, t, h) -> (t)>
#dy = affine_map<(v, t, h) -> (t, h)>
#out = affine_map<(v, t, h) -> (v, h)>
func.func @nonzero_otherwise(%ids: memref<5xi32>, %dy: memref<5x4xf32>, %out: memref<7x4xf32>) {
  %one = arith.constant 1.0 : f32
  linalg.generic {indexing_maps = [#ids, #dy, #out], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%ids, %dy : memref<5xi32>, memref<5x4xf32>) outs(%out : memref<7x4xf32>) {
  ^bb0(%id: i32, %g: f32, %acc: f32):
    %row = arith.index_cast %id : i32 to index
    %v = linalg.index 0 : index
    %hit = arith.cmpi eq, %v, %row : index
    %picked = arith.select %hit, %g, %one : f32
    %sum = arith.addf %acc, %picked : f32
    linalg.yield %sum : f32
  }
  return
}

// -----

// Not one-hot: the body does more than pick the value (it squares it). Left
// alone rather than dropping the multiplication.
// ATOMIC-LABEL: func.func @extra_work
// ATOMIC: linalg.generic
// ATOMIC-NOT: memref.atomic_rmw
// SEQ-LABEL: func.func @extra_work
// SEQ: linalg.generic
#ids = affine_map<(v, t, h) -> (t)>
#dy = affine_map<(v, t, h) -> (t, h)>
#out = affine_map<(v, t, h) -> (v, h)>
func.func @extra_work(%ids: memref<5xi32>, %dy: memref<5x4xf32>, %out: memref<7x4xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [#ids, #dy, #out], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%ids, %dy : memref<5xi32>, memref<5x4xf32>) outs(%out : memref<7x4xf32>) {
  ^bb0(%id: i32, %g: f32, %acc: f32):
    %row = arith.index_cast %id : i32 to index
    %v = linalg.index 0 : index
    %hit = arith.cmpi eq, %v, %row : index
    %sq = arith.mulf %g, %g : f32
    %picked = arith.select %hit, %sq, %zero : f32
    %sum = arith.addf %acc, %picked : f32
    linalg.yield %sum : f32
  }
  return
}

// -----

// Not a scatter: the value is read along the row loop too (a masked
// diagonal-like read), so the row is not only chosen by the index. Left
// alone.
// ATOMIC-LABEL: func.func @value_reads_row
// ATOMIC: linalg.generic
// ATOMIC-NOT: memref.atomic_rmw
// SEQ-LABEL: func.func @value_reads_row
// SEQ: linalg.generic
#ids = affine_map<(v, t, h) -> (t)>
#dy = affine_map<(v, t, h) -> (v, h)>
#out = affine_map<(v, t, h) -> (v, h)>
func.func @value_reads_row(%ids: memref<5xi32>, %dy: memref<7x4xf32>, %out: memref<7x4xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [#ids, #dy, #out], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%ids, %dy : memref<5xi32>, memref<7x4xf32>) outs(%out : memref<7x4xf32>) {
  ^bb0(%id: i32, %g: f32, %acc: f32):
    %row = arith.index_cast %id : i32 to index
    %v = linalg.index 0 : index
    %hit = arith.cmpi eq, %v, %row : index
    %picked = arith.select %hit, %g, %zero : f32
    %sum = arith.addf %acc, %picked : f32
    linalg.yield %sum : f32
  }
  return
}
