//===- ParallelLoopCalls.cpp - outlined parallel loops on the threads -----===//
//
// See Passes.td. The runtime entry takes a C function pointer and one
// context pointer, so each parallel loop function gets a companion that
// unpacks its arguments (memref descriptors expanded to scalars by
// func-to-llvm) from a struct the caller fills on its stack.
//
//===----------------------------------------------------------------------===//

#include "autopar/Conversion/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/SymbolTable.h"

namespace autopar {
#define GEN_PASS_DEF_PARALLELLOOPCALLS
#include "autopar/Conversion/Passes.h.inc"
} // namespace autopar

using namespace mlir;

namespace {

/// The runtime's `void autopar_cpu_parallel_for(void (*)(void *, int64_t,
/// int64_t), void *, int64_t iterations, int64_t work)`.
constexpr llvm::StringLiteral kParallelFor = "autopar_cpu_parallel_for";

struct ParallelLoopCallsPass
    : autopar::impl::ParallelLoopCallsBase<ParallelLoopCallsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    SmallVector<LLVM::LLVMFuncOp> loops;
    module.walk([&](LLVM::LLVMFuncOp f) {
      if (f->hasAttr(autopar::kParallelRangeAttr))
        loops.push_back(f);
    });
    if (loops.empty())
      return;

    auto ptr = LLVM::LLVMPointerType::get(ctx);
    auto i64 = IntegerType::get(ctx, 64);
    auto voidType = LLVM::LLVMVoidType::get(ctx);
    OpBuilder b(ctx);
    auto runtime = module.lookupSymbol<LLVM::LLVMFuncOp>(kParallelFor);
    if (!runtime) {
      b.setInsertionPointToEnd(module.getBody());
      runtime = LLVM::LLVMFuncOp::create(
          b, module.getLoc(), kParallelFor,
          LLVM::LLVMFunctionType::get(voidType, {ptr, ptr, i64, i64}));
    }

    for (LLVM::LLVMFuncOp loop : loops) {
      auto range =
          loop->getAttrOfType<DenseI64ArrayAttr>(autopar::kParallelRangeAttr);
      loop->removeAttr(autopar::kParallelRangeAttr);
      ArrayRef<Type> argTypes = loop.getArgumentTypes();
      if (!range || range.size() != 2 || argTypes.size() < 2 ||
          argTypes.back() != i64 || argTypes[argTypes.size() - 2] != i64) {
        loop.emitError("autopar-parallel-loop-calls: '")
            << autopar::kParallelRangeAttr
            << "' needs array<i64: iterations, work> and two trailing i64 "
               "arguments (the range)";
        return signalPassFailure();
      }
      // The calls to rewrite, before the wrapper adds its own.
      SmallVector<LLVM::CallOp> calls;
      module.walk([&](LLVM::CallOp call) {
        if (call.getCallee() == loop.getName())
          calls.push_back(call);
      });
      ArrayRef<Type> packedTypes = argTypes.drop_back(2);
      auto context = LLVM::LLVMStructType::getLiteral(ctx, packedTypes);
      Location loc = loop.getLoc();

      // @f_range(ptr context, i64 first, i64 last): @f(context..., first,
      // last).
      b.setInsertionPointAfter(loop);
      auto wrapper = LLVM::LLVMFuncOp::create(
          b, loc, (loop.getName() + "_range").str(),
          LLVM::LLVMFunctionType::get(voidType, {ptr, i64, i64}),
          LLVM::Linkage::Internal);
      Block *body = wrapper.addEntryBlock(b);
      b.setInsertionPointToStart(body);
      SmallVector<Value> args;
      for (auto [i, type] : llvm::enumerate(packedTypes)) {
        Value field = LLVM::GEPOp::create(
            b, loc, ptr, context, body->getArgument(0),
            ArrayRef<LLVM::GEPArg>{0, static_cast<int32_t>(i)});
        args.push_back(LLVM::LoadOp::create(b, loc, type, field));
      }
      args.push_back(body->getArgument(1));
      args.push_back(body->getArgument(2));
      LLVM::CallOp::create(b, loc, loop, args);
      LLVM::ReturnOp::create(b, loc, ValueRange{});

      // Each call: the arguments into a struct in the caller's frame, and
      // the runtime runs the range.
      for (LLVM::CallOp call : calls) {
        auto caller = call->getParentOfType<LLVM::LLVMFuncOp>();
        Location callLoc = call.getLoc();
        b.setInsertionPointToStart(&caller.getBody().front());
        Value one =
            LLVM::ConstantOp::create(b, callLoc, i64, b.getI64IntegerAttr(1));
        Value frame = LLVM::AllocaOp::create(b, callLoc, ptr, context, one);
        b.setInsertionPoint(call);
        for (auto [i, operand] :
             llvm::enumerate(call.getArgOperands().drop_back(2))) {
          Value field = LLVM::GEPOp::create(
              b, callLoc, ptr, context, frame,
              ArrayRef<LLVM::GEPArg>{0, static_cast<int32_t>(i)});
          LLVM::StoreOp::create(b, callLoc, operand, field);
        }
        Value function =
            LLVM::AddressOfOp::create(b, callLoc, ptr, wrapper.getName());
        Value iterations = LLVM::ConstantOp::create(
            b, callLoc, i64, b.getI64IntegerAttr(range[0]));
        Value work = LLVM::ConstantOp::create(b, callLoc, i64,
                                              b.getI64IntegerAttr(range[1]));
        LLVM::CallOp::create(b, callLoc, runtime,
                             ValueRange{function, frame, iterations, work});
        call.erase();
      }
    }
  }
};

} // namespace
