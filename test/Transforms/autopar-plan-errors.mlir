// Plans that cannot exist are errors saying why.
// RUN: autopar-opt %s --split-input-file --verify-diagnostics --autopar-plan="cluster=dgx-h100:1 dp=3"
// RUN: not autopar-opt %s --split-input-file --autopar-plan="cluster=no-such-node:2" 2>&1 | FileCheck %s --check-prefix=PRESET
// Enum options are typed: a value that is not one of them is refused by name.
// RUN: not autopar-opt %s --split-input-file --autopar-plan="mode=inference" 2>&1 | FileCheck %s --check-prefix=MODE
// RUN: not autopar-opt %s --split-input-file --autopar-plan="recompute=some" 2>&1 | FileCheck %s --check-prefix=RECOMPUTE
// MODE: for the --mode option: Cannot find option named 'inference'!
// RECOMPUTE: for the --recompute option: Cannot find option named 'some'!

// expected-error @below {{autopar-plan: --dp=3 does not divide the world size 8 of the cluster}}
module {
  func.func @main(%x: tensor<8x16xf32> {autopar.dtype = "float32", autopar.input = "X"}) -> tensor<8x16xf32> {
    return %x : tensor<8x16xf32>
  }
}

// -----

// expected-error @below {{autopar-plan: no func.func @main to plan}}
module {
}
// PRESET: autopar-plan: --cluster 'no-such-node:2': unknown preset 'no-such-node'; presets: local:N, dgx-a100-40gb:NODES
