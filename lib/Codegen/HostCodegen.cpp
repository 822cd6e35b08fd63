//===- HostCodegen.cpp - native code for the host reference path ---------===//

#include "tessera/Codegen/HostCodegen.h"
#include "tessera/Runtime/FileUtils.h"
#include "tessera/Codegen/Passes.h"

#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/BufferizationToMemRef/BufferizationToMemRef.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MathToFuncs/MathToFuncs.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVMPass.h"
#include "mlir/Dialect/Arith/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/FuncBufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Linalg/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "mlir/Transforms/Passes.h"

#include "tessera/Runtime/JIT.h"
#include "tessera/Runtime/MachineProgram.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Signals.h"
#include "llvm/Support/Threading.h"
#include "llvm/Support/xxhash.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"

#include <atomic>
#include <optional>
#include <set>
#include <cstring>
#include <thread>

using namespace mlir;

namespace tessera {

void registerCodegenDialects(DialectRegistry &registry) {
  registry.insert<bufferization::BufferizationDialect, memref::MemRefDialect,
                  scf::SCFDialect, cf::ControlFlowDialect, LLVM::LLVMDialect>();
  arith::registerBufferizableOpInterfaceExternalModels(registry);
  linalg::registerBufferizableOpInterfaceExternalModels(registry);
  tensor::registerBufferizableOpInterfaceExternalModels(registry);
  bufferization::func_ext::registerBufferizableOpInterfaceExternalModels(registry);
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
}

namespace {
/// The signature the runtime checks a vertex kernel's uses against: its
/// leading index arguments are loop offsets, the rest buffers (storage
/// bits of their elements: an i1 is a byte).
runtime::KernelSignature signatureOf(func::FuncOp kernel) {
  runtime::KernelSignature signature;
  for (Type t : kernel.getArgumentTypes()) {
    auto memref = dyn_cast<MemRefType>(t);
    if (!memref) {
      ++signature.loopOffsets;
      continue;
    }
    runtime::KernelSignature::Buffer buffer;
    buffer.elementBits = (memref.getElementTypeBitWidth() + 7) / 8 * 8;
    for (int64_t size : memref.getShape())
      buffer.sizes.push_back(ShapedType::isDynamic(size) ? runtime::KernelSignature::kDynamic
                                                         : size);
    signature.buffers.push_back(std::move(buffer));
  }
  return signature;
}

/// Marks @main for a C-callable wrapper taking memref descriptors, and
/// records each vertex kernel's signature in its code.
struct EmitCInterface : PassWrapper<EmitCInterface, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(EmitCInterface)
  StringRef getArgument() const override { return "codegen-emit-c-interface"; }
  void runOnOperation() override {
    // Vertex kernels are called through the same kind of packed entry, and
    // carry their signature beside it: a constant `<kernel>_signature` the
    // runtime reads from the code, not from the (forgeable) metadata.
    OpBuilder b = OpBuilder::atBlockEnd(getOperation().getBody());
    auto i64 = b.getI64Type();
    for (auto f : llvm::to_vector(getOperation().getOps<func::FuncOp>())) {
      if (!f->hasAttr("ipu.vertex"))
        continue;
      f->setAttr("llvm.emit_c_interface", UnitAttr::get(&getContext()));
      std::vector<int64_t> words = signatureOf(f).encode();
      auto n = static_cast<int64_t>(words.size());
      LLVM::GlobalOp::create(b, f.getLoc(), LLVM::LLVMArrayType::get(i64, n),
                             /*isConstant=*/true, LLVM::Linkage::External,
                             runtime::KernelSignature::symbolFor((f.getSymName() + "_entry").str()),
                             DenseElementsAttr::get(RankedTensorType::get({n}, i64),
                                                    ArrayRef<int64_t>(words)));
    }
    auto main = getOperation().lookupSymbol<func::FuncOp>("main");
    if (!main)
      return;
    main->setAttr("llvm.emit_c_interface", UnitAttr::get(&getContext()));
    // Names were recorded in the executable's metadata; LLVM has no use
    // for them on parameters.
    for (unsigned i = 0; i < main.getNumArguments(); ++i)
      main.setArgAttrs(i, DictionaryAttr::get(&getContext()));
    for (unsigned i = 0; i < main.getNumResults(); ++i)
      main.setResultAttrs(i, DictionaryAttr::get(&getContext()));
  }
};
} // namespace

void buildPrepareHostReferencePipeline(OpPassManager &pm) {
  pm.addPass(createHostOneReplica());
  pm.addPass(createExternalizeWeights());
}

void buildHostLoweringPipeline(OpPassManager &pm, int64_t vectorBits) {
  buildPrepareHostReferencePipeline(pm);
  buildLowerToLLVMPipeline(pm, vectorBits);
}

void buildLowerToLLVMPipeline(OpPassManager &pm, int64_t vectorBits) {
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  bufferization::BufferResultsToOutParamsPassOptions outParams;
  outParams.modifyPublicFunctions = true;
  outParams.hoistStaticAllocs = true;
  pm.addPass(bufferization::createBufferResultsToOutParamsPass(outParams));
  bufferization::buildBufferDeallocationPipeline(pm);
  pm.addPass(createConvertBufferizationToMemRefPass());
  pm.addPass(createSparseScatterAdds());
  pm.addPass(createOrderLoopsForVectors());
  pm.addPass(createVectorizeContractions(VectorizeContractionsOptions{vectorBits}));
  pm.addPass(createOutlineHostLoops());
  // Passes that change one function at a time run nested on the functions,
  // which MLIR spreads over the host's threads: the vertex kernels lower
  // beside the host reference's @main instead of after it. Passes that add
  // module-level symbols (helper functions, libm and malloc declarations)
  // stay on the module, in the same order.
  OpPassManager &loops = pm.nest<func::FuncOp>();
  loops.addPass(createConvertLinalgToLoopsPass());
  loops.addPass(memref::createExpandStridedMetadataPass());
  loops.addPass(createLowerAffinePass());
  // Integer powers (math.ipowi) become loops in generated functions.
  pm.addPass(createConvertMathToFuncs());
  // bf16 conversions as integer arithmetic: LLVM would call compiler-rt's
  // __truncsfbf2, which the executable's loader does not provide.
  OpPassManager &scalar = pm.nest<func::FuncOp>();
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true;
  scalar.addPass(arith::createArithExpandOpsPass(expand));
  scalar.addPass(createSCFToControlFlowPass());
  scalar.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  pm.nest<func::FuncOp>().addPass(createConvertVectorToLLVMPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.nest<func::FuncOp>().addPass(createArithToLLVMConversionPass());
  pm.addPass(std::make_unique<EmitCInterface>());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  OpPassManager &llvmFunctions = pm.nest<LLVM::LLVMFuncOp>();
  llvmFunctions.addPass(createConvertIndexToLLVMPass());
  llvmFunctions.addPass(createReconcileUnrealizedCastsPass());
  llvmFunctions.addPass(createCanonicalizerPass());
}

LogicalResult appendLoweredModule(ModuleOp into, ModuleOp from) {
  SymbolTable intoSymbols(into), fromSymbols(from);
  for (Operation &op : llvm::make_early_inc_range(from.getBody()->getOperations())) {
    auto symbol = dyn_cast<SymbolOpInterface>(op);
    Operation *existing = symbol ? intoSymbols.lookup(symbol.getNameAttr()) : nullptr;
    if (!existing)
      continue;
    // Declarations both sides call (free, memrefCopy, libm): one is enough.
    auto declared = dyn_cast<LLVM::LLVMFuncOp>(op);
    auto alsoDeclared = dyn_cast<LLVM::LLVMFuncOp>(existing);
    if (declared && alsoDeclared && declared.isExternal() && alsoDeclared.isExternal()) {
      if (declared.getFunctionType() != alsoDeclared.getFunctionType())
        return declared.emitError("the vertex kernels declare @")
               << declared.getSymName() << " as " << declared.getFunctionType()
               << ", the host reference code as " << alsoDeclared.getFunctionType()
               << " (internal error)";
      fromSymbols.erase(&op);
      continue;
    }
    // Private constants and helpers each side made under the same name.
    if (failed(fromSymbols.renameToUnique(&op, {&intoSymbols})))
      return op.emitError("could not give this symbol a name of its own (internal error)");
  }
  Block *body = into.getBody();
  body->getOperations().splice(body->end(), from.getBody()->getOperations());
  return success();
}

int64_t vectorBitsOf(const HostCPU &cpu) {
  if (llvm::is_contained(cpu.features, "avx512f"))
    return 512;
  if (llvm::is_contained(cpu.features, "avx"))
    return 256;
  return 128;
}

llvm::Expected<HostCPU> resolveHostCPU(llvm::StringRef name) {
  auto fail = [](const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
  };
  llvm::Expected<const llvm::Target *> found = runtime::lookupHostTarget();
  if (!found)
    return found.takeError();
  const llvm::Target *target = *found;
  std::string triple = llvm::sys::getProcessTriple();
  HostCPU cpu;
  std::string featureString;
  if (name == "native") {
    cpu.name = llvm::sys::getHostCPUName().str();
    for (const auto &f : llvm::sys::getHostCPUFeatures())
      featureString += (featureString.empty() ? "" : ",") +
                       std::string(f.second ? "+" : "-") + f.first().str();
  } else {
    cpu.name = name.str();
  }
  // Asked of a generic subtarget first: LLVM warns on stderr when it creates
  // one for a CPU it does not know.
  std::unique_ptr<llvm::MCSubtargetInfo> subtarget(
      target->createMCSubtargetInfo(llvm::Triple(triple), "generic", ""));
  if (subtarget && subtarget->isCPUStringValid(cpu.name))
    subtarget.reset(
        target->createMCSubtargetInfo(llvm::Triple(triple), cpu.name, featureString));
  else
    subtarget.reset();
  if (!subtarget)
    return fail("--host-cpu=" + name + " is not a CPU LLVM knows for " + triple +
                ": use native (this machine), generic (any " + triple +
                " host) or an LLVM CPU name such as x86-64-v3");
  // What the code may use: every feature the CPU (and, for native, this
  // machine) enables; the rest is turned off explicitly when generating code.
  for (const llvm::SubtargetFeatureKV &kv : subtarget->getAllProcessorFeatures())
    (subtarget->getFeatureBits().test(kv.Value) ? cpu.features : cpu.disabled)
        .push_back(kv.Key);
  return cpu;
}

namespace {

bool isVertexFunction(StringRef name) {
  return name.starts_with("vertex_") || name.starts_with("_mlir_ciface_vertex_");
}

/// @main and the parts codegen-outline-host-loops moved out of it: the host
/// reference code, which no kernel calls.
bool isHostReferenceFunction(StringRef name) {
  return name == "main" || name == "_mlir_ciface_main" || name.starts_with("main_part_");
}

/// A vertex function's kernel: `vertex_cs3_0` for itself and its C
/// interface `_mlir_ciface_vertex_cs3_0`, which go in the same part.
StringRef kernelOf(StringRef name) {
  name.consume_front("_mlir_ciface_");
  return name;
}

/// One part of the LLVM-dialect module: the host reference code (@main and
/// its C interface; `kernels` empty) or the vertex kernels in `kernels`.
/// Each part is whole on its own: the IPU model links only the kernels'
/// parts, the host reference runner only the reference code. A kernels'
/// part is built from the ops it needs (declarations, helper functions,
/// globals other than other kernels' signatures, its kernels), not cut from
/// a copy of the whole module: the reference code is most of it.
OwningOpRef<ModuleOp> partition(ModuleOp module, const llvm::StringSet<> &kernels) {
  auto isOtherSignature = [&](Operation &op) {
    auto global = dyn_cast<LLVM::GlobalOp>(op);
    if (!global)
      return false;
    StringRef name = global.getSymName();
    return isVertexFunction(name) && name.consume_back("_signature") &&
           (kernels.empty() || !kernels.contains(name));
  };
  if (kernels.empty()) {
    OwningOpRef<ModuleOp> part = module.clone();
    SmallVector<Operation *> erase;
    for (Operation &op : part->getBody()->getOperations()) {
      auto fn = dyn_cast<LLVM::LLVMFuncOp>(op);
      if ((fn && !fn.isExternal() && isVertexFunction(fn.getSymName())) ||
          isOtherSignature(op))
        erase.push_back(&op);
    }
    for (Operation *op : erase)
      op->erase();
    // Then what only the kernels used (declarations, private helpers and
    // constants): the reference code is the same whether the kernel cache
    // took kernels out before lowering or not.
    for (bool erased = true; erased;) {
      erased = false;
      llvm::StringSet<> used;
      if (auto uses = SymbolTable::getSymbolUses(&part->getBodyRegion()))
        for (const SymbolTable::SymbolUse &use : *uses)
          used.insert(use.getSymbolRef().getRootReference().getValue());
      for (Operation &op : llvm::make_early_inc_range(part->getBody()->getOperations())) {
        bool unusedPrivate = false;
        if (auto fn = dyn_cast<LLVM::LLVMFuncOp>(op))
          unusedPrivate = fn.isExternal() || fn.getLinkage() == LLVM::Linkage::Private ||
                          fn.getLinkage() == LLVM::Linkage::Internal;
        else if (auto global = dyn_cast<LLVM::GlobalOp>(op))
          unusedPrivate = global.getLinkage() == LLVM::Linkage::Private ||
                          global.getLinkage() == LLVM::Linkage::Internal;
        auto symbol = dyn_cast<SymbolOpInterface>(op);
        if (unusedPrivate && symbol && !used.contains(symbol.getName())) {
          op.erase();
          erased = true;
        }
      }
    }
    return part;
  }
  OpBuilder b(module.getContext());
  OwningOpRef<ModuleOp> part = ModuleOp::create(module.getLoc());
  (*part)->setAttrs(module->getAttrDictionary());
  b.setInsertionPointToEnd(part->getBody());
  for (Operation &op : module.getBody()->getOperations()) {
    if (auto fn = dyn_cast<LLVM::LLVMFuncOp>(op); fn && !fn.isExternal()) {
      // Its kernels, and the helpers kernels may call (math.ipowi's loops,
      // generated private to each object); not the reference code.
      StringRef name = fn.getSymName();
      if (isHostReferenceFunction(name) ||
          (isVertexFunction(name) && !kernels.contains(kernelOf(name))))
        continue;
    } else if (isOtherSignature(op)) {
      continue;
    }
    b.clone(op);
  }
  return part;
}

/// The vertex kernels of `module`, by name (`vertex_cs3_0`).
std::vector<std::string> kernelNames(ModuleOp module) {
  std::vector<std::string> names;
  for (auto fn : module.getOps<LLVM::LLVMFuncOp>())
    if (!fn.isExternal() && fn.getSymName().starts_with("vertex_"))
      names.push_back(fn.getSymName().str());
  return names;
}

/// `ops` as printed, every occurrence of `name` (their own) replaced: the
/// code alone, whatever the kernel is called.
std::string codeWithoutName(ArrayRef<Operation *> ops, StringRef name) {
  std::string text;
  llvm::raw_string_ostream os(text);
  // Local scope: the printer would otherwise number the whole module's
  // values for each kernel.
  for (Operation *op : ops)
    op->print(os, OpPrintingFlags().useLocalScope().assumeVerified());
  for (size_t at = text.find(name); at != std::string::npos; at = text.find(name, at + 1))
    text.replace(at, name.size(), "K");
  return text;
}

/// Names each vertex kernel by its code: `vertex_<32 hex digits>` from a
/// 128-bit hash of its functions and signature as printed, its own name
/// left out. Kernels with the same code (after lowering) become one; two
/// different kernels that hash alike keep apart (a suffix). Returns the new
/// name of each old one.
std::map<std::string, std::string> nameKernelsByCode(ModuleOp module) {
  std::map<std::string, std::string> renamed;
  std::map<std::string, std::string> textOfName;
  std::set<std::string> named;
  SymbolTable symbols(module);
  for (const std::string &name : kernelNames(module)) {
    std::string ciface = "_mlir_ciface_" + name;
    std::string signature = runtime::KernelSignature::symbolFor(name + "_entry");
    SmallVector<Operation *, 3> ops;
    for (const std::string &symbol : {name, ciface, signature})
      if (Operation *op = symbols.lookup(symbol))
        ops.push_back(op);
    std::string text = codeWithoutName(ops, name);
    llvm::XXH128_hash_t hash = llvm::xxh3_128bits(llvm::arrayRefFromStringRef(text));
    std::string code = "vertex_" + llvm::utohexstr(hash.high64, true, 16) +
                       llvm::utohexstr(hash.low64, true, 16);
    for (int suffix = 1;; ++suffix) {
      auto [it, added] = textOfName.try_emplace(code, text);
      if (added || it->second == text)
        break;
      code = "vertex_" + llvm::utohexstr(hash.high64, true, 16) +
             llvm::utohexstr(hash.low64, true, 16) + "_" + std::to_string(suffix);
    }
    renamed[name] = code;
    if (!named.insert(code).second) {
      // The same code as a kernel named before: that one serves both.
      for (Operation *op : ops)
        op->erase();
      continue;
    }
    auto rename = [&](Operation *op, StringRef to) {
      SymbolTable::setSymbolName(op, StringAttr::get(module.getContext(), to));
    };
    if (Operation *wrapper = symbols.lookup(ciface)) {
      (void)SymbolTable::replaceAllSymbolUses(StringAttr::get(module.getContext(), name),
                                              StringAttr::get(module.getContext(), code),
                                              wrapper);
      rename(wrapper, "_mlir_ciface_" + code);
    }
    if (Operation *global = symbols.lookup(signature))
      rename(global, runtime::KernelSignature::symbolFor(code + "_entry"));
    rename(symbols.lookup(name), code);
  }
  return renamed;
}

/// The vertex kernels in `parts` groups of about equal size (operations
/// of their LLVM functions), so the groups compile in parallel in about
/// equal times. Largest first, each to the lightest group.
std::vector<llvm::StringSet<>> groupKernels(ModuleOp module, size_t parts) {
  llvm::StringMap<int64_t> size;
  for (auto fn : module.getOps<LLVM::LLVMFuncOp>())
    if (!fn.isExternal() && isVertexFunction(fn.getSymName())) {
      int64_t ops = 0;
      fn.walk([&](Operation *) { ++ops; });
      size[kernelOf(fn.getSymName())] += ops;
    }
  std::vector<std::pair<int64_t, StringRef>> bySize;
  for (auto &entry : size)
    bySize.push_back({entry.second, entry.first()});
  llvm::sort(bySize, [](auto &a, auto &b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  parts = std::max<size_t>(1, std::min(parts, bySize.size()));
  std::vector<llvm::StringSet<>> groups(parts);
  std::vector<int64_t> load(parts, 0);
  for (auto &[ops, name] : bySize) {
    size_t lightest = std::min_element(load.begin(), load.end()) - load.begin();
    groups[lightest].insert(name);
    load[lightest] += ops;
  }
  if (bySize.empty())
    groups.clear();
  return groups;
}

/// Adds the packed entry points: `tessera_main` for the host reference
/// code, `vertex_<cs>_<k>_entry` per vertex kernel, each
/// `void entry(void **args)` where each argument is a pointer to a memref
/// descriptor or to an int64 scalar, so the runtime can call any signature
/// without generating calls itself.
void addPackedEntries(llvm::Module &llvmModule) {
  llvm::SmallVector<std::pair<llvm::Function *, std::string>> entries;
  for (llvm::Function &f : llvmModule) {
    if (f.isDeclaration())
      continue;
    if (f.getName() == "_mlir_ciface_main")
      entries.push_back({&f, "tessera_main"});
    else if (f.getName().starts_with("_mlir_ciface_vertex_"))
      entries.push_back(
          {&f, (f.getName().drop_front(strlen("_mlir_ciface_")) + "_entry").str()});
  }
  for (auto &[callee, name] : entries) {
    llvm::LLVMContext &c = llvmModule.getContext();
    auto *ptr = llvm::PointerType::get(c, 0);
    auto *fnType = llvm::FunctionType::get(llvm::Type::getVoidTy(c), {ptr}, false);
    auto *entry = llvm::Function::Create(fnType, llvm::GlobalValue::ExternalLinkage,
                                         name, &llvmModule);
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(c, "entry", entry));
    llvm::SmallVector<llvm::Value *> args;
    for (unsigned i = 0; i < callee->arg_size(); ++i) {
      llvm::Value *p = b.CreateLoad(ptr, b.CreateConstGEP1_64(ptr, entry->getArg(0), i));
      llvm::Type *t = callee->getArg(i)->getType();
      args.push_back(t->isPointerTy() ? p : b.CreateLoad(t, p));
    }
    b.CreateCall(callee, args);
    b.CreateRetVoid();
  }
}

/// The vertex kernels' object for `cpu`: exactly the resolved features (the
/// CPU name alone would also enable those this machine lacks), plus
/// full-width vectors: vertex kernels' register tiles are as wide as the
/// CPU's vectors (vectorBitsOf), which on a CPU tuned to prefer 256-bit
/// ones (with 512-bit registers) would be split in two.
///
/// Without LLVM's loop unroller: codegen-vectorize-contractions already
/// unrolled each contraction into its register tile, and unrolling the
/// loops around it (a convolution's window, the tile's row blocks) made
/// ResNet-50's kernels 57% more instructions for no speed the IPU model
/// measured, and its compile 11% slower.
llvm::Expected<std::string> compileKernels(llvm::Module &llvmModule, const HostCPU &cpu) {
  std::string features;
  for (const std::string &f : cpu.features)
    features += "+" + f + ",";
  for (const std::string &f : cpu.disabled)
    features += "-" + f + ",";
  features += "-prefer-256-bit";
  return runtime::compileToObject(llvmModule, cpu.name, features, /*unrollLoops=*/false);
}

} // namespace

namespace {

/// Compiles each of `parts` (an LLVM-dialect module each) to an object:
/// translated in turn (they share one MLIRContext), each into an LLVM
/// context of its own, then optimized and compiled on every hardware
/// thread, each thread taking the next part. `objects[i]` gets part i's.
LogicalResult compileParts(ModuleOp module, std::vector<OwningOpRef<ModuleOp>> &parts,
                           const HostCPU &cpu, std::vector<std::string> &objects) {
  std::vector<std::unique_ptr<llvm::LLVMContext>> contexts;
  std::vector<std::unique_ptr<llvm::Module>> llvmModules;
  for (OwningOpRef<ModuleOp> &part : parts) {
    contexts.push_back(std::make_unique<llvm::LLVMContext>());
    llvmModules.push_back(translateModuleToLLVMIR(*part, *contexts.back(), "tessera-kernels"));
    if (!llvmModules.back())
      return module.emitError("could not translate the module to LLVM IR");
    addPackedEntries(*llvmModules.back());
  }
  std::vector<std::string> errors(parts.size());
  objects.assign(parts.size(), std::string());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < llvmModules.size(); i = next++) {
      llvm::Expected<std::string> object = compileKernels(*llvmModules[i], cpu);
      if (object)
        objects[i] = std::move(*object);
      else
        errors[i] = llvm::toString(object.takeError());
    }
  };
  size_t threads = std::min<size_t>(
      llvmModules.size(), llvm::hardware_concurrency().compute_thread_count());
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t)
    pool.emplace_back(work);
  work();
  for (std::thread &t : pool)
    t.join();
  for (const std::string &error : errors)
    if (!error.empty())
      return module.emitError(error);
  return success();
}

/// The cache entry of kernel `name` (named by its code) under `cache`.
std::string cacheEntryPath(const KernelCache &cache, StringRef name) {
  llvm::SmallString<256> path(cache.directory);
  std::string key = cache.identity + "\n" + name.str();
  llvm::sys::path::append(
      path, llvm::utohexstr(llvm::xxh3_64bits(llvm::arrayRefFromStringRef(key)),
                            /*LowerCase=*/true, /*Width=*/16) +
                ".o");
  return std::string(path);
}

/// A kernel's code before lowering: its function as printed, its own name
/// left out. Lowering is a function of it and of the compiler build (part
/// of the cache's identity), so it decides the object.
std::string codeBeforeLowering(func::FuncOp kernel) {
  return codeWithoutName({kernel.getOperation()}, kernel.getSymName());
}

/// The index entry that maps the kernel whose code before lowering is
/// `code` to its object's name.
std::string indexEntryPath(const KernelCache &cache, StringRef code) {
  std::string key = cache.identity + "\nbefore lowering\n" + code.str();
  llvm::XXH128_hash_t hash = llvm::xxh3_128bits(llvm::arrayRefFromStringRef(key));
  llvm::SmallString<256> path(cache.directory);
  llvm::sys::path::append(path, llvm::utohexstr(hash.high64, true, 16) +
                                    llvm::utohexstr(hash.low64, true, 16) + ".name");
  return std::string(path);
}

/// Whether the cache entry at `path` can only have been written by this
/// user (or is not there); if not, it is left unread and the first such
/// entry's error is recorded in `cache.refusal`.
bool trustedEntry(KernelCache &cache, StringRef path) {
  if (!llvm::sys::fs::exists(path))
    return true;
  std::string why = runtime::whyUntrusted(path);
  if (why.empty())
    return true;
  if (cache.refusal.empty())
    cache.refusal = runtime::untrustedCacheMessage(path, why);
  return false;
}

/// The object of the kernel named `name` by its code, if the cache holds an
/// entry that defines its entry point (anything else, a damaged file, is
/// compiled again and replaced).
std::optional<std::string> cachedObject(KernelCache &cache, StringRef name) {
  std::string path = cacheEntryPath(cache, name);
  if (!trustedEntry(cache, path))
    return std::nullopt;
  auto entry = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                           /*RequiresNullTerminator=*/false);
  if (!entry || !(*entry)->getBuffer().contains((name + "_entry").str()))
    return std::nullopt;
  return (*entry)->getBuffer().str();
}

} // namespace

void takeCachedKernels(ModuleOp module, KernelCache &cache) {
  for (auto kernel : llvm::make_early_inc_range(module.getOps<func::FuncOp>())) {
    if (!kernel->hasAttr("ipu.vertex"))
      continue;
    // Its text must be all of its code: a kernel naming another symbol
    // (whose definition the text leaves out) is lowered and found by its
    // code after.
    if (std::optional<SymbolTable::UseRange> uses = SymbolTable::getSymbolUses(kernel);
        !uses || !uses->empty())
      continue;
    std::string name = kernel.getSymName().str();
    std::string key = indexEntryPath(cache, codeBeforeLowering(kernel));
    if (!trustedEntry(cache, key))
      continue;
    // An index entry holds one name by code: vertex_ and 32 hex digits (a
    // suffix when two codes hashed alike).
    auto entry = llvm::MemoryBuffer::getFile(key, /*IsText=*/true);
    StringRef code = entry ? (*entry)->getBuffer().trim() : StringRef();
    bool named = code.consume_front("vertex_") && code.size() >= 32 &&
                 llvm::all_of(code, [](char c) { return llvm::isHexDigit(c) || c == '_'; });
    std::optional<std::string> object =
        named ? cachedObject(cache, ("vertex_" + code).str()) : std::nullopt;
    if (!object) {
      cache.keysBeforeLowering[name] = key;
      continue;
    }
    std::string codeName = ("vertex_" + code).str();
    cache.foundNames[name] = codeName;
    // Counted per distinct code, as emitHostObjects counts what it finds
    // and compiles.
    if (cache.foundObjects.try_emplace(codeName, std::move(*object)).second) {
      ++cache.hits;
      ++cache.hitsBeforeLowering;
    }
    kernel->erase();
  }
}

std::unique_ptr<llvm::Module> translateHostReference(ModuleOp module,
                                                     llvm::LLVMContext &context) {
  if (!module.lookupSymbol<LLVM::LLVMFuncOp>("_mlir_ciface_main")) {
    module.emitError("no C interface for @main was generated");
    return nullptr;
  }
  std::unique_ptr<llvm::Module> reference =
      translateModuleToLLVMIR(module, context, "tessera-reference");
  if (!reference) {
    module.emitError("could not translate the module to LLVM IR");
    return nullptr;
  }
  addPackedEntries(*reference);
  reference->setTargetTriple(llvm::Triple(llvm::sys::getProcessTriple()));
  return reference;
}

FailureOr<HostCode> emitHostObjects(ModuleOp module, const HostCPU &cpu,
                                    TimingScope *timing, KernelCache *cache) {
  TimingScope none;
  TimingScope &parent = timing ? *timing : none;
  HostCode code;
  TimingScope namingTimer = parent.nest("name the vertex kernels by their code");
  std::map<std::string, std::string> renamed = nameKernelsByCode(module);
  for (auto &[from, to] : renamed)
    code.entryNames[from + "_entry"] = to + "_entry";
  if (cache)
    for (auto &[from, to] : cache->foundNames)
      code.entryNames[from + "_entry"] = to + "_entry";
  namingTimer.stop();

  TimingScope kernelTimer = parent.nest("vertex kernels: translate, O2 and instruction selection");
  if (!cache) {
    // The kernels in one group per hardware thread, so that they compile in
    // parallel in about equal times.
    std::vector<OwningOpRef<ModuleOp>> parts;
    for (const llvm::StringSet<> &group :
         groupKernels(module, llvm::hardware_concurrency().compute_thread_count()))
      parts.push_back(partition(module, group));
    if (failed(compileParts(module, parts, cpu, code.objects)))
      return failure();
    return code;
  }
  // With the cache: an object per kernel, found (before lowering, or now
  // by its code) or compiled and stored.
  std::map<std::string, std::string> objects = std::move(cache->foundObjects);
  cache->foundObjects.clear();
  std::vector<std::string> missing;
  for (const std::string &name : kernelNames(module)) {
    if (objects.count(name))
      continue; // lowered to the code of a kernel found before lowering
    if (std::optional<std::string> object = cachedObject(*cache, name)) {
      objects[name] = std::move(*object);
      ++cache->hits;
    } else {
      missing.push_back(name);
    }
  }
  if (!cache->refusal.empty())
    return module.emitError(cache->refusal);
  std::vector<OwningOpRef<ModuleOp>> parts;
  for (const std::string &name : missing) {
    llvm::StringSet<> one;
    one.insert(name);
    parts.push_back(partition(module, one));
  }
  std::vector<std::string> compiled;
  if (failed(compileParts(module, parts, cpu, compiled)))
    return failure();
  bool storing = !missing.empty() || !cache->keysBeforeLowering.empty();
  if (storing) {
    using namespace llvm::sys::fs;
    std::error_code ec = create_directories(
        cache->directory, /*IgnoreExisting=*/true,
        static_cast<perms>(owner_all | group_read | group_exe | others_read | others_exe));
    if (ec || !llvm::sys::fs::is_directory(cache->directory))
      cache->warning = "cannot create the kernel cache " + cache->directory + ": " +
                       (ec ? ec.message() : std::string("a file of that name is in the way"));
  }
  for (auto [name, object] : llvm::zip(missing, compiled)) {
    if (cache->warning.empty())
      if (llvm::Error err = runtime::writeFileAtomically(cacheEntryPath(*cache, name), object,
                                                          runtime::kCodeFileMode))
        cache->warning = "could not store a kernel in the cache: " + llvm::toString(std::move(err));
    objects[name] = std::move(object);
    ++cache->misses;
  }
  // The index: each kernel lowered here, by its code before lowering, to
  // its object's name (written after the object, so an entry names an
  // object that is there).
  for (auto &[from, key] : cache->keysBeforeLowering) {
    auto to = renamed.find(from);
    if (to == renamed.end() || !objects.count(to->second) || !cache->warning.empty())
      continue;
    if (llvm::Error err = runtime::writeFileAtomically(key, to->second + "\n", runtime::kCodeFileMode))
      cache->warning = "could not store a kernel in the cache: " + llvm::toString(std::move(err));
  }
  cache->keysBeforeLowering.clear();
  // By name: the executable does not depend on which kernels were cached.
  for (auto &entry : objects)
    code.objects.push_back(std::move(entry.second));
  return code;
}

} // namespace tessera
