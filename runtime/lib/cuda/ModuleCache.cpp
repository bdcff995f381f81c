//===- ModuleCache.cpp - GPU modules of the program, loaded once ----------===//

#include "ModuleCache.h"

#include "Driver.h"

#include "autopar/runtime/Error.h"

namespace autopar::runtime::cuda {

ModuleCache::~ModuleCache() {
  for (auto &[data, module] : modules)
    if (module)
      driver().cuModuleUnload(module);
}

CUmodule ModuleCache::load(const void *data, bool jit) {
  auto it = modules.find(data);
  if (it != modules.end())
    return it->second;
  CUmodule module = nullptr;
  CUresult result;
  char log[4096] = {0};
  if (jit) {
    // PTX: the driver compiles it for this GPU, and its log says why not.
    CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER,
                              CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *values[] = {log, reinterpret_cast<void *>(sizeof(log))};
    result = driver().cuModuleLoadDataEx(&module, data, 2, options, values);
  } else {
    result = driver().cuModuleLoadData(&module, data);
  }
  if (result != CUDA_SUCCESS) {
    if (loadError.empty()) {
      loadError = std::string(jit ? "cuModuleLoadDataEx" : "cuModuleLoadData") +
                  " failed: " + describeCudaError(result);
      if (result == CUDA_ERROR_NO_BINARY_FOR_GPU ||
          result == CUDA_ERROR_INVALID_IMAGE)
        loadError += "; the artifact's GPU code targets " +
                     (target.empty() ? std::string("another GPU") : target) +
                     ", this is " + device;
      if (log[0])
        loadError += "; JIT log: " + std::string(log);
    }
    return nullptr;
  }
  modules.emplace(data, module);
  return module;
}

void ModuleCache::checkLoaded(const std::string &program) {
  if (loadError.empty())
    return;
  std::string message =
      "cannot load the GPU code of program '" + program + "': " + loadError;
  loadError.clear();
  throw Error(message);
}

CUfunction ModuleCache::function(CUmodule module, const char *name) {
  auto key = std::make_pair(module, name);
  auto it = functions.find(key);
  if (it != functions.end())
    return it->second;
  if (!module)
    throw Error(std::string("kernel '") + name +
                "' is in a GPU module that failed to load");
  CUfunction function = nullptr;
  CUresult result = driver().cuModuleGetFunction(&function, module, name);
  if (result != CUDA_SUCCESS)
    throw Error(std::string("cuModuleGetFunction failed for kernel '") + name +
                "': " + describeCudaError(result));
  functions.emplace(key, function);
  return function;
}

void ModuleCache::allowSharedMemory(CUfunction function, int32_t bytes) {
  constexpr int32_t DefaultLimit = 48 * 1024;
  if (bytes <= DefaultLimit)
    return;
  int32_t &allowed = sharedMemory[function];
  if (bytes <= allowed)
    return;
  AUTOPAR_CU(cuFuncSetAttribute, function,
             CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes);
  allowed = bytes;
}

} // namespace autopar::runtime::cuda
