//===- HostCodegen.cpp - native code for the host reference path ---------===//

#include "tessera/Codegen/HostCodegen.h"
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

#include "llvm/Bitcode/BitcodeWriter.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/Support/Threading.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"

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

void buildHostLoweringPipeline(OpPassManager &pm) {
  pm.addPass(createHostOneReplica());
  pm.addPass(createExternalizeWeights());
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
  pm.addPass(createVectorizeContractions());
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
/// parts, the host reference runner only the reference code.
OwningOpRef<ModuleOp> partition(ModuleOp module, const llvm::StringSet<> &kernels) {
  OwningOpRef<ModuleOp> part = module.clone();
  SmallVector<Operation *> erase;
  for (auto fn : part->getOps<LLVM::LLVMFuncOp>()) {
    StringRef name = fn.getSymName();
    if (fn.isExternal())
      continue;
    bool keep = kernels.empty() ? !isVertexFunction(name)
                                : !isHostReferenceFunction(name) &&
                                      (!isVertexFunction(name) ||
                                       kernels.contains(kernelOf(name)));
    if (!keep)
      erase.push_back(fn);
  }
  // A kernel's signature goes with its kernel.
  for (auto global : part->getOps<LLVM::GlobalOp>()) {
    StringRef name = global.getSymName();
    if (isVertexFunction(name) && name.consume_back("_signature") &&
        (kernels.empty() || !kernels.contains(name)))
      erase.push_back(global);
  }
  for (Operation *op : erase)
    op->erase();
  return part;
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
/// full-width vectors: vertex kernels' register tiles are 512-bit vectors,
/// which CPUs tuned to prefer 256-bit ones would split in two.
llvm::Expected<std::string> compileKernels(llvm::Module &llvmModule, const HostCPU &cpu) {
  std::string features;
  for (const std::string &f : cpu.features)
    features += "+" + f + ",";
  for (const std::string &f : cpu.disabled)
    features += "-" + f + ",";
  features += "-prefer-256-bit";
  return runtime::compileToObject(llvmModule, cpu.name, features);
}

} // namespace

FailureOr<HostCode> emitHostObjects(ModuleOp module, const HostCPU &cpu,
                                    TimingScope *timing) {
  TimingScope none;
  TimingScope &parent = timing ? *timing : none;
  if (!module.lookupSymbol<LLVM::LLVMFuncOp>("_mlir_ciface_main"))
    return module.emitError("no C interface for @main was generated");
  // The host reference code is only translated: stored as bitcode, it is
  // optimized and compiled when a run asks for it (tessera-run --reference),
  // not by every compile. It is most of the native code -- one function of
  // every op at full size, 91 of maxvit_t's 113 s of compile -- and the IPU
  // model never runs it.
  HostCode code;
  TimingScope translateTimer = parent.nest("translate to LLVM IR");
  llvm::LLVMContext referenceContext;
  OwningOpRef<ModuleOp> reference = partition(module, llvm::StringSet<>());
  std::unique_ptr<llvm::Module> referenceModule =
      translateModuleToLLVMIR(*reference, referenceContext, "tessera-reference");
  if (!referenceModule)
    return module.emitError("could not translate the module to LLVM IR");
  addPackedEntries(*referenceModule);
  referenceModule->setTargetTriple(llvm::Triple(llvm::sys::getProcessTriple()));
  llvm::raw_string_ostream bitcode(code.referenceBitcode);
  llvm::WriteBitcodeToFile(*referenceModule, bitcode);
  // The kernels in one group per hardware thread, each its own module and
  // LLVM context, so that they compile in parallel.
  std::vector<llvm::StringSet<>> groups =
      groupKernels(module, llvm::hardware_concurrency().compute_thread_count());
  std::vector<std::unique_ptr<llvm::LLVMContext>> contexts;
  std::vector<std::unique_ptr<llvm::Module>> kernelModules;
  for (const llvm::StringSet<> &group : groups) {
    OwningOpRef<ModuleOp> part = partition(module, group);
    contexts.push_back(std::make_unique<llvm::LLVMContext>());
    kernelModules.push_back(translateModuleToLLVMIR(*part, *contexts.back(), "tessera-kernels"));
    if (!kernelModules.back())
      return module.emitError("could not translate the module to LLVM IR");
    addPackedEntries(*kernelModules.back());
  }
  translateTimer.stop();
  TimingScope kernelTimer = parent.nest("O2 and instruction selection: vertex kernels");
  std::vector<llvm::Expected<std::string>> objects;
  for (size_t i = 0; i < kernelModules.size(); ++i)
    objects.emplace_back(std::string());
  std::vector<std::thread> threads;
  for (size_t i = 1; i < kernelModules.size(); ++i)
    threads.emplace_back([&, i] { objects[i] = compileKernels(*kernelModules[i], cpu); });
  if (!kernelModules.empty())
    objects[0] = compileKernels(*kernelModules[0], cpu);
  for (std::thread &t : threads)
    t.join();
  for (llvm::Expected<std::string> &object : objects) {
    if (!object)
      return module.emitError(llvm::toString(object.takeError()));
    code.objects.push_back(std::move(*object));
  }
  return code;
}

} // namespace tessera
