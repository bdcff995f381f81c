//===- FuzzOnnx.cpp - Fuzz the ONNX importer ------------------------------===//
//
// Feeds each input to the importer as a binary .onnx file, as autopar-compile
// and autopar-opt do, then verifies, prints and re-parses the module (what
// autopar-opt does with it). The weight locator, which autopar-compile runs on
// the same file to find the parameters' bytes, reads it too. Diagnostics are
// the expected outcome for bad input and are swallowed; a crash, a sanitizer
// report, a leak or a timeout is a bug. Set AUTOPAR_FUZZ_VERBOSE=1 to print the
// diagnostics (useful when replaying one input).
//
//===----------------------------------------------------------------------===//

#include "FuzzUtil.h"

#include "autopar/Import/OnnxImporter.h"
#include "autopar/Import/WeightLocator.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

using namespace mlir;

static bool verbose() {
  static bool value = [] {
    const char *v = std::getenv("AUTOPAR_FUZZ_VERBOSE");
    return v && *v && *v != '0';
  }();
  return value;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  DialectRegistry registry;
  autopar::registerImportDialects(registry);
  MLIRContext context(registry, MLIRContext::Threading::DISABLED);
  context.loadAllAvailableDialects();
  ScopedDiagnosticHandler handler(&context, [](Diagnostic &diag) {
    if (verbose())
      llvm::errs() << diag.getLocation() << ": " << diag << "\n";
    return success();
  });

  static const std::string path = autopar::fuzz::scratchDir() + "/model.onnx";
  autopar::fuzz::writeFile(path, data, size);
  if (auto located = autopar::locateInitializers(path); !located)
    llvm::consumeError(located.takeError());

  autopar::ImportOptions options;
  llvm::StringRef buffer(reinterpret_cast<const char *>(data), size);
  OwningOpRef<ModuleOp> module = autopar::importOnnxBuffer(
      &context, buffer, "fuzz.onnx", /*isText=*/false, options);
  if (!module)
    return 0;
  if (failed(verify(*module))) {
    // The importer produced invalid IR: autopar-opt reports it, but passes
    // run on it could crash. Not a crash here; shown when verbose.
    if (verbose())
      llvm::errs()
          << "autopar-fuzz-onnx: the imported module does not verify\n";
    return 0;
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os, OpPrintingFlags().enableDebugInfo());
  OwningOpRef<ModuleOp> reparsed =
      parseSourceString<ModuleOp>(text, ParserConfig(&context));
  if (!reparsed && verbose())
    llvm::errs() << "autopar-fuzz-onnx: the printed module does not parse\n";
  return 0;
}
