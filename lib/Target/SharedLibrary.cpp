//===- SharedLibrary.cpp - A lowered program as a loadable .so ------------===//

#include "autopar/Target/SharedLibrary.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"

using namespace mlir;
namespace autopar {

LogicalResult emitSharedLibrary(ModuleOp module, llvm::StringRef soPath,
                                const SharedLibraryOptions &options,
                                std::string &error) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  registerBuiltinDialectTranslation(*module.getContext());
  registerLLVMDialectTranslation(*module.getContext());

  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, llvmContext, "autopar");
  if (!llvmModule) {
    error = "translation to LLVM IR failed";
    return failure();
  }

  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  std::string lookupError;
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, lookupError);
  if (!target) {
    error = "no LLVM target for " + triple.str() + ": " + lookupError;
    return failure();
  }
  std::string cpu = options.cpu;
  std::string features;
  if (cpu == "native") {
    cpu = llvm::sys::getHostCPUName().str();
    llvm::SubtargetFeatures subtarget;
    for (const auto &feature : llvm::sys::getHostCPUFeatures())
      subtarget.AddFeature(feature.getKey(), feature.getValue());
    features = subtarget.getString();
  }
  llvm::TargetOptions targetOptions;
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, cpu, features, targetOptions, llvm::Reloc::PIC_));
  llvmModule->setDataLayout(machine->createDataLayout());
  llvmModule->setTargetTriple(triple);

  auto optimize = makeOptimizingTransformer(options.optLevel, /*sizeLevel=*/0,
                                            machine.get());
  if (llvm::Error err = optimize(llvmModule.get())) {
    error = "LLVM optimization failed: " + llvm::toString(std::move(err));
    return failure();
  }
  if (!options.llvmIRPath.empty()) {
    std::error_code ec;
    llvm::raw_fd_ostream os(options.llvmIRPath, ec);
    if (!ec)
      llvmModule->print(os, nullptr);
  }

  std::string objPath = (soPath + ".o").str();
  {
    std::error_code ec;
    llvm::ToolOutputFile obj(objPath, ec, llvm::sys::fs::OF_None);
    if (ec) {
      error = "cannot write " + objPath + ": " + ec.message();
      return failure();
    }
    llvm::legacy::PassManager codegen;
    if (machine->addPassesToEmitFile(codegen, obj.os(), nullptr,
                                     llvm::CodeGenFileType::ObjectFile)) {
      error = "the target cannot emit object files";
      return failure();
    }
    codegen.run(*llvmModule);
    obj.keep();
  }

  // Link with the system driver: it knows where libc/libm live.
  auto cc = llvm::sys::findProgramByName("cc");
  if (!cc) {
    error = "no C compiler driver 'cc' on PATH to link the shared library "
            "(install build-essential)";
    return failure();
  }
  std::string out = soPath.str();
  llvm::SmallVector<llvm::StringRef> args = {*cc, "-shared", "-o",
                                             out, objPath,   "-lm"};
  std::string execError;
  int rc =
      llvm::sys::ExecuteAndWait(*cc, args, std::nullopt, {}, 0, 0, &execError);
  llvm::sys::fs::remove(objPath);
  if (rc != 0) {
    error = "linking " + out + " with " + *cc + " failed" +
            (execError.empty() ? "" : ": " + execError);
    return failure();
  }
  return success();
}

} // namespace autopar
