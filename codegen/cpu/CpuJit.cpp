//===- CpuJit.cpp - O3 pipeline and ORC LLJIT for kernels -----------------===//
//
// One LLJIT per CpuJit, one LLVM module per kernel:
//   1. emitKernelModule (EmitLLVM.cpp) builds the IR;
//   2. the module is verified, then optimized with the new pass manager's
//      O3 pipeline for the host TargetMachine (detectHost, Aggressive), with
//      a TargetLibraryInfo that carries our libmvec table (VectorMath.cpp,
//      registered before the default function analyses so it is the one
//      used);
//   3. the optimized module is added to the main JITDylib and its entry
//      point looked up (this is when machine code is generated); or, for
//      compileAll (Note [Parallel kernel compiles]), compiled to an object
//      on one of several threads and that object added and looked up.
// Symbols resolve first from libmvec (DynamicLibrarySearchGenerator on
// libmvec.so.1), then from the process (libm, when libmvec is missing),
// plus our own helpers as absolute symbols.
//
// Every LLVM error becomes a diagnostic naming the kernel; nothing aborts.
// The JIT is thread-safe: compile(), compileAll() and emitLLVM() lock one
// mutex (compileAll's threads work on their own contexts under it).
//
//===----------------------------------------------------------------------===//

#include "codegen/cpu/CpuJit.h"
#include "codegen/cpu/Internal.h"

#include <llvm/Analysis/TargetLibraryInfo.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/ExecutionEngine/Orc/Core.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ObjectTransformLayer.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/InstrTypes.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <system_error>
#include <thread>

#include <sched.h>

namespace kiln::codegen::cpu {
namespace {

constexpr const char *kLibmvecPath = "/lib/x86_64-linux-gnu/libmvec.so.1";

/// A valid, readable LLVM symbol name for a kernel name.
std::string sanitize(const std::string &name) {
  std::string out;
  for (char c : name)
    out += std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0])))
    out = "kernel_" + out;
  return out;
}

class CpuJitImpl final : public CpuJit {
public:
  CpuJitImpl(const CpuJitOptions &opts, std::unique_ptr<llvm::orc::LLJIT> jit,
             std::unique_ptr<llvm::TargetMachine> tm, llvm::orc::JITTargetMachineBuilder jtmb,
             VectorMathIsa isa)
      : opts_(opts), jit_(std::move(jit)), tm_(std::move(tm)), jtmb_(std::move(jtmb)), isa_(isa) {}

  FailureOr<runtime::KernelFn> compile(const Kernel &k, const Schedule &s,
                                       DiagnosticEngine &diag) override;
  FailureOr<std::vector<runtime::KernelFn>> compileAll(std::span<const KernelJob> jobs, int threads,
                                                       DiagnosticEngine &diag) override;
  FailureOr<std::string> emitLLVM(const Kernel &k, const Schedule &s, bool optimized,
                                  DiagnosticEngine &diag) override;
  std::string targetDescription() const override;
  std::shared_ptr<const runtime::KernelObject> objectOf(runtime::KernelFn fn) const override;

  /// Installs the object transform that keeps each kernel's object (see
  /// compile()).
  void captureObjects();

private:
  /// Builds and (optionally) optimizes the module of `k`; null after a
  /// diagnostic.
  std::unique_ptr<llvm::Module> buildModule(const Kernel &k, const Schedule &s,
                                            const std::string &symbol, llvm::LLVMContext &ctx,
                                            bool optimize, std::string *unoptimizedText,
                                            DiagnosticEngine &diag) {
    return buildModuleFor(*tm_, k, s, symbol, ctx, optimize, unoptimizedText, diag);
  }
  /// The same for target machine `tm` (one per compiling thread).
  std::unique_ptr<llvm::Module> buildModuleFor(llvm::TargetMachine &tm, const Kernel &k,
                                               const Schedule &s, const std::string &symbol,
                                               llvm::LLVMContext &ctx, bool optimize,
                                               std::string *unoptimizedText,
                                               DiagnosticEngine &diag);
  void optimize(llvm::Module &m, llvm::TargetMachine &tm);
  /// A unique symbol for a kernel named `name`; call with mutex_ held.
  std::string newSymbol(const std::string &name);
  void dump(const std::string &symbol, const std::string &suffix, const std::string &text);

  CpuJitOptions opts_;
  std::unique_ptr<llvm::orc::LLJIT> jit_;
  std::unique_ptr<llvm::TargetMachine> tm_;
  /// Makes each compiling thread's target machine (the JIT's settings).
  llvm::orc::JITTargetMachineBuilder jtmb_;
  VectorMathIsa isa_;
  mutable std::mutex mutex_;
  std::set<std::string> symbols_;
  /// The object the JIT linked last (set by the transform, during lookup).
  std::string lastObject_;
  std::map<runtime::KernelFn, std::shared_ptr<const runtime::KernelObject>> objects_;
  /// Compiled functions by Kernel::codeKey() and schedule (Note [Shared
  /// kernel code]).
  std::map<std::string, runtime::KernelFn> byCode_;
};

void CpuJitImpl::captureObjects() {
  // Materialization runs on the thread that looks the symbol up (LLJIT's
  // default in-place dispatch), under compile()'s lock.
  jit_->getObjTransformLayer().setTransform(
      [this](std::unique_ptr<llvm::MemoryBuffer> obj)
          -> llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> {
        lastObject_.assign(obj->getBufferStart(), obj->getBufferSize());
        return obj;
      });
}

std::shared_ptr<const runtime::KernelObject> CpuJitImpl::objectOf(runtime::KernelFn fn) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = objects_.find(fn);
  return it == objects_.end() ? nullptr : it->second;
}

std::string moduleText(const llvm::Module &m) {
  std::string text;
  llvm::raw_string_ostream os(text);
  m.print(os, nullptr);
  return text;
}

void CpuJitImpl::optimize(llvm::Module &m, llvm::TargetMachine &tm) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions pto;
  pto.LoopVectorization = true;
  pto.SLPVectorization = true;
  pto.LoopInterleaving = true;
  pto.LoopUnrolling = true;
  llvm::PassBuilder pb(&tm, pto);

  // Our TLI (with the libmvec table) must be registered before the default
  // analyses, or the default TLI silently wins.
  llvm::TargetLibraryInfoImpl tlii{llvm::Triple(m.getTargetTriple())};
  addVectorMathMappings(tlii, isa_);
  fam.registerPass([&] { return llvm::TargetLibraryAnalysis(tlii); });

  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);

  llvm::OptimizationLevel level = llvm::OptimizationLevel::O3;
  if (opts_.optLevel <= 0) {
    llvm::ModulePassManager mpm = pb.buildO0DefaultPipeline(llvm::OptimizationLevel::O0);
    mpm.run(m, mam);
    return;
  }
  if (opts_.optLevel == 1)
    level = llvm::OptimizationLevel::O1;
  else if (opts_.optLevel == 2)
    level = llvm::OptimizationLevel::O2;
  llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(level);
  mpm.run(m, mam);
}

void CpuJitImpl::dump(const std::string &symbol, const std::string &suffix,
                      const std::string &text) {
  if (opts_.dumpDir.empty())
    return;
  llvm::sys::fs::create_directories(opts_.dumpDir);
  std::error_code ec;
  llvm::raw_fd_ostream os(opts_.dumpDir + "/" + symbol + suffix, ec);
  if (!ec)
    os << text;
}

std::unique_ptr<llvm::Module>
CpuJitImpl::buildModuleFor(llvm::TargetMachine &tm, const Kernel &k, const Schedule &s,
                           const std::string &symbol, llvm::LLVMContext &ctx, bool optimizeIt,
                           std::string *unoptimizedText, DiagnosticEngine &diag) {
  std::string error;
  std::unique_ptr<llvm::Module> m = emitKernelModule(k, s, symbol, isa_, ctx, error);
  if (!m) {
    diag.emitError(Location()) << "cpu codegen of kernel '" << k.name << "' failed: " << error;
    return nullptr;
  }
  m->setDataLayout(tm.createDataLayout());
  m->setTargetTriple(tm.getTargetTriple().str());
  std::string verifyMessage;
  llvm::raw_string_ostream vos(verifyMessage);
  if (llvm::verifyModule(*m, &vos)) {
    diag.emitError(Location()) << "cpu codegen of kernel '" << k.name
                               << "' produced invalid LLVM IR: " << vos.str();
    return nullptr;
  }
  if (unoptimizedText)
    *unoptimizedText = moduleText(*m);
  if (optimizeIt) {
    optimize(*m, tm);
    // The optimizer must leave valid IR (Note [Wrapper signatures] in
    // VectorMath.cpp: a call with the wrong arity was once a wrong answer).
    std::string afterMessage;
    llvm::raw_string_ostream aos(afterMessage);
    // With opaque pointers the verifier checks a call against its own
    // function type only; check it against the callee's declaration too.
    for (llvm::Function &f : *m)
      for (llvm::BasicBlock &bb : f)
        for (llvm::Instruction &inst : bb)
          if (auto *call = llvm::dyn_cast<llvm::CallBase>(&inst))
            if (llvm::Function *callee = call->getCalledFunction())
              if (call->getFunctionType() != callee->getFunctionType())
                aos << "call of '" << callee->getName() << "' with " << call->arg_size()
                    << " arguments does not match its declaration\n";
    aos.flush();
    if (!afterMessage.empty() || llvm::verifyModule(*m, &aos)) {
      diag.emitError(Location()) << "cpu codegen of kernel '" << k.name
                                 << "' produced invalid LLVM IR after optimization: " << aos.str();
      return nullptr;
    }
  }
  return m;
}

// Note [Shared kernel code]
// A model repeats itself (the blocks of a ResNet stage, a transformer's
// layers): many of its kernels differ only in the buffers they are given,
// which the kernel ABI passes at run time. compile() keys each kernel by
// Kernel::codeKey() (every field that decides the code, constants by their
// bits, names left out) and its Schedule, and returns the function compiled
// for an equal key instead of compiling again: swin_t's 125 kernels are 56
// compiles. Steps keep their own names; artifacts store each function's
// object once (runtime/artifact/Artifact.cpp).
std::string scheduleKey(const Schedule &s) {
  std::string key = std::to_string(s.parallel) + "," + std::to_string(s.grain) + "," +
                    std::to_string(s.vectorWidth) + ",";
  for (int32_t i : s.inPlaceInput)
    key += std::to_string(i) + ";";
  return key;
}

FailureOr<runtime::KernelFn> CpuJitImpl::compile(const Kernel &k, const Schedule &s,
                                                 DiagnosticEngine &diag) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string code = k.codeKey() + scheduleKey(s);
  if (auto it = byCode_.find(code); it != byCode_.end())
    return it->second;
  const std::string symbol = newSymbol(k.name);

  auto ctx = std::make_unique<llvm::LLVMContext>();
  std::string before;
  std::unique_ptr<llvm::Module> m =
      buildModule(k, s, symbol, *ctx, true, opts_.dumpDir.empty() ? nullptr : &before, diag);
  if (!m)
    return failure();
  if (!opts_.dumpDir.empty()) {
    dump(symbol, ".ll", before);
    dump(symbol, ".opt.ll", moduleText(*m));
  }
  if (llvm::Error err =
          jit_->addIRModule(llvm::orc::ThreadSafeModule(std::move(m), std::move(ctx))))
    return diag.emitError(Location())
           << "cannot add kernel '" << k.name << "' to the JIT: " << llvm::toString(std::move(err));
  lastObject_.clear();
  llvm::Expected<llvm::orc::ExecutorAddr> addr = jit_->lookup(symbol);
  if (!addr)
    return diag.emitError(Location()) << "cannot generate machine code for kernel '" << k.name
                                      << "': " << llvm::toString(addr.takeError());
  auto fn = addr->toPtr<runtime::KernelFn>();
  if (!lastObject_.empty())
    objects_[fn] = std::make_shared<const runtime::KernelObject>(
        runtime::KernelObject{symbol, std::move(lastObject_)});
  byCode_.emplace(code, fn);
  return fn;
}

std::string CpuJitImpl::newSymbol(const std::string &name) {
  // Kernel names need not be unique across compiles; symbols must be.
  std::string base = sanitize(name), symbol = base;
  for (unsigned n = 1; symbols_.count(symbol); ++n)
    symbol = base + "." + std::to_string(n);
  symbols_.insert(symbol);
  return symbol;
}

// Note [Parallel kernel compiles]
// compileAll() spreads a model's kernels over threads: each thread takes
// the next kernel, builds its module in a context of its own, optimizes it
// and emits a relocatable object with a target machine of its own (made by
// the JIT's JITTargetMachineBuilder: the same CPU, features, PIC and small
// code model as the JIT's own compiles). The objects are then added to the
// JIT and linked one by one, in job order, under the mutex. Equal kernels
// (Note [Shared kernel code]) are compiled once. On this 2-core VM the
// kernels of swin_t compile in about half the time.
FailureOr<std::vector<runtime::KernelFn>>
CpuJitImpl::compileAll(std::span<const KernelJob> jobs, int threads, DiagnosticEngine &diag) {
  std::vector<runtime::KernelFn> fns(jobs.size(), nullptr);
  if (!opts_.dumpDir.empty() || threads <= 1) {
    for (size_t i = 0; i < jobs.size(); ++i) {
      auto fn = compile(*jobs[i].kernel, jobs[i].schedule, diag);
      if (failed(fn))
        return failure();
      fns[i] = *fn;
    }
    return fns;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  struct Pending {
    std::string code, symbol;
    size_t job;
    std::string object, error;
  };
  std::vector<Pending> pending;
  std::map<std::string, size_t> pendingByCode;
  std::vector<size_t> pendingOf(jobs.size(), SIZE_MAX);
  for (size_t i = 0; i < jobs.size(); ++i) {
    std::string code = jobs[i].kernel->codeKey() + scheduleKey(jobs[i].schedule);
    if (auto it = byCode_.find(code); it != byCode_.end()) {
      fns[i] = it->second;
      continue;
    }
    auto [at, fresh] = pendingByCode.emplace(code, pending.size());
    if (fresh)
      pending.push_back({std::move(code), newSymbol(jobs[i].kernel->name), i, "", ""});
    pendingOf[i] = at->second;
  }
  std::atomic<size_t> next{0};
  auto work = [&] {
    auto tm = jtmb_.createTargetMachine();
    if (!tm) {
      std::string why = llvm::toString(tm.takeError());
      for (size_t p; (p = next.fetch_add(1)) < pending.size();)
        pending[p].error = "cannot create a target machine: " + why;
      return;
    }
    for (size_t p; (p = next.fetch_add(1)) < pending.size();) {
      Pending &job = pending[p];
      const KernelJob &kj = jobs[job.job];
      llvm::LLVMContext ctx;
      DiagnosticEngine local;
      ScopedDiagnosticCollector collect(local);
      std::unique_ptr<llvm::Module> m =
          buildModuleFor(**tm, *kj.kernel, kj.schedule, job.symbol, ctx, true, nullptr, local);
      if (!m) {
        for (const Diagnostic &d : collect.diagnostics())
          job.error += (job.error.empty() ? "" : "; ") + d.message;
        continue;
      }
      llvm::SmallVector<char, 0> buffer;
      llvm::raw_svector_ostream os(buffer);
      llvm::legacy::PassManager pm;
      if ((*tm)->addPassesToEmitFile(pm, os, nullptr, llvm::CGFT_ObjectFile)) {
        job.error = "cannot emit an object for kernel '" + kj.kernel->name + "'";
        continue;
      }
      pm.run(*m);
      job.object.assign(buffer.begin(), buffer.end());
    }
  };
  std::vector<std::thread> pool;
  const size_t extra = std::min<size_t>(static_cast<size_t>(threads), pending.size());
  for (size_t t = 1; t < extra; ++t) {
    try {
      pool.emplace_back(work);
    } catch (const std::system_error &) {
      break; // no more threads: the ones started and this one do the rest
    }
  }
  work();
  for (std::thread &t : pool)
    t.join();
  for (Pending &job : pending) {
    const Kernel &k = *jobs[job.job].kernel;
    if (!job.error.empty())
      return diag.emitError(Location()) << job.error;
    if (llvm::Error err =
            jit_->addObjectFile(llvm::MemoryBuffer::getMemBufferCopy(job.object, job.symbol)))
      return diag.emitError(Location()) << "cannot add kernel '" << k.name
                                        << "' to the JIT: " << llvm::toString(std::move(err));
    llvm::Expected<llvm::orc::ExecutorAddr> addr = jit_->lookup(job.symbol);
    if (!addr)
      return diag.emitError(Location())
             << "cannot link kernel '" << k.name << "': " << llvm::toString(addr.takeError());
    auto fn = addr->toPtr<runtime::KernelFn>();
    objects_[fn] = std::make_shared<const runtime::KernelObject>(
        runtime::KernelObject{job.symbol, std::move(job.object)});
    byCode_.emplace(job.code, fn);
  }
  for (size_t i = 0; i < jobs.size(); ++i)
    if (pendingOf[i] != SIZE_MAX)
      fns[i] = byCode_.at(pending[pendingOf[i]].code);
  return fns;
}

FailureOr<std::string> CpuJitImpl::emitLLVM(const Kernel &k, const Schedule &s, bool optimized,
                                            DiagnosticEngine &diag) {
  std::lock_guard<std::mutex> lock(mutex_);
  llvm::LLVMContext ctx;
  std::unique_ptr<llvm::Module> m =
      buildModule(k, s, sanitize(k.name), ctx, optimized, nullptr, diag);
  if (!m)
    return failure();
  return moduleText(*m);
}

std::string CpuJitImpl::targetDescription() const {
  return tm_->getTargetTriple().str() + ", cpu " + tm_->getTargetCPU().str() + ", vector math " +
         isa_.name() + ", features " + tm_->getTargetFeatureString().str();
}

} // namespace

CpuJit::~CpuJit() = default;

int compileThreads() {
  cpu_set_t set;
  CPU_ZERO(&set);
  return sched_getaffinity(0, sizeof(set), &set) == 0
             ? std::max(1, CPU_COUNT(&set))
             : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

std::string llvmVersion() {
  return LLVM_VERSION_STRING;
}

FailureOr<std::shared_ptr<CpuJit>> CpuJit::create(const CpuJitOptions &opts,
                                                  DiagnosticEngine &diag) {
  static std::once_flag initOnce;
  std::call_once(initOnce, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });

  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb)
    return diag.emitError(Location())
           << "cannot detect the host CPU for the JIT: " << llvm::toString(jtmb.takeError());
  if (!opts.target.native) {
    // A named CPU (--cpu): its name and its features only, as -march does.
    jtmb->setCPU(opts.target.cpu);
    jtmb->getFeatures() = llvm::SubtargetFeatures(opts.target.features);
  }
  // Position-independent, small code model: what the JIT links and what an
  // artifact's loader (runtime/artifact/ElfLoader.cpp) relocates.
  jtmb->setRelocationModel(llvm::Reloc::PIC_);
  jtmb->setCodeModel(llvm::CodeModel::Small);
  jtmb->setCodeGenOptLevel(opts.optLevel >= 3   ? llvm::CodeGenOpt::Aggressive
                           : opts.optLevel <= 0 ? llvm::CodeGenOpt::None
                                                : llvm::CodeGenOpt::Default);
  auto tm = jtmb->createTargetMachine();
  if (!tm)
    return diag.emitError(Location())
           << "cannot create the host target machine: " << llvm::toString(tm.takeError());

  auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(*jtmb).create();
  if (!jit)
    return diag.emitError(Location())
           << "cannot create the LLVM JIT: " << llvm::toString(jit.takeError());

  llvm::orc::JITDylib &main = (*jit)->getMainJITDylib();
  char prefix = (*jit)->getDataLayout().getGlobalPrefix();
  // libmvec first: it defines the vector math functions the table maps to.
  bool haveLibmvec = false;
  auto mvec = llvm::orc::DynamicLibrarySearchGenerator::Load(kLibmvecPath, prefix);
  if (mvec) {
    main.addGenerator(std::move(*mvec));
    haveLibmvec = true;
  } else {
    diag.emitWarning(Location()) << "cannot load " << kLibmvecPath << " ("
                                 << llvm::toString(mvec.takeError())
                                 << "); transcendentals will not be vectorized";
  }
  auto process = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(prefix);
  if (!process)
    return diag.emitError(Location())
           << "cannot search the process for symbols: " << llvm::toString(process.takeError());
  main.addGenerator(std::move(*process));

  llvm::orc::SymbolMap helpers;
  helpers[(*jit)->mangleAndIntern(kIntPowHelper)] = llvm::JITEvaluatedSymbol(
      llvm::pointerToJITTargetAddress(&kiln_cpu_ipow), llvm::JITSymbolFlags::Exported);
  if (llvm::Error err = main.define(llvm::orc::absoluteSymbols(std::move(helpers))))
    return diag.emitError(Location())
           << "cannot define the JIT's helper symbols: " << llvm::toString(std::move(err));

  VectorMathIsa isa = VectorMathIsa::fromFeatures(
      opts.target.native ? (*tm)->getTargetFeatureString().str() : opts.target.features);
  if (!haveLibmvec)
    isa.abi = VectorMathIsa::Abi::None;
  auto impl =
      std::make_shared<CpuJitImpl>(opts, std::move(*jit), std::move(*tm), std::move(*jtmb), isa);
  impl->captureObjects();
  return std::shared_ptr<CpuJit>(std::move(impl));
}

} // namespace kiln::codegen::cpu
