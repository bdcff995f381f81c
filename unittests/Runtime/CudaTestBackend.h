//===- CudaTestBackend.h - The device tests' one GPU ------------*- C++ -*-===//
//
// AutoparCudaDeviceTests loads libautopar_cuda.so once, as autopar-run does
// (a process has one CUDA device); every test file takes the backend from
// here (CudaAttentionTest.cpp opens it on first use).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_UNITTESTS_RUNTIME_CUDATESTBACKEND_H
#define AUTOPAR_UNITTESTS_RUNTIME_CUDATESTBACKEND_H

#include "autopar/runtime/DeviceBackend.h"

/// The test process's CUDA backend, with libautopar_cuda.so loaded
/// RTLD_GLOBAL (its entry points are found with dlsym(RTLD_DEFAULT, ...)).
autopar::runtime::DeviceBackend &cudaTestBackend();

#endif // AUTOPAR_UNITTESTS_RUNTIME_CUDATESTBACKEND_H
