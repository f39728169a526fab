//===- MlirRun.cpp - A graph through MLIR's own lowering, run -------------===//
//
// Note [The MLIR CPU path]
// A second way to compute a graph on the CPU, independent of Kiln's code
// generator: the export of MlirExport.cpp (small constants inline, the
// others trailing read-only arguments that point at Kiln's tensors: MLIR 16
// cannot translate dense_resource blobs to LLVM IR, and weights inlined as
// LLVM constants take gigabytes to compile), then MLIR's own pipeline
//
//   linalg named ops generalized -> tensor.empty to alloc_tensor ->
//   one-shot bufferization (function boundaries, identity layouts, results
//   returned as allocations) -> linalg to loops -> SCF to CF -> strided
//   metadata expanded, affine lowered -> math to functions, libm and LLVM ->
//   memref, arith, func, cf to the LLVM dialect
//
// translated to LLVM IR and JIT-compiled by MLIR's ExecutionEngine for the
// host (LLVM O2, or codegen alone for a very large function: see
// compile). It has no library calls and no fusion beyond one op per
// linalg.generic: it is a cross-check of Kiln's numerics, not a fast path
// (`kiln run --codegen=mlir`; the op matrix runs through it,
// tests/unit/compiler/MlirMatrixTest.cpp). A graph with an op that is a
// call of `@kiln.<op>` (no upstream form) is refused, naming those ops.
//
// Calling convention: the function gets `llvm.emit_c_interface`, so its C
// interface takes a pointer to the results' memref descriptors (one struct
// after another: every field is 8 bytes) and a pointer to each argument's
// descriptor { allocated, aligned, offset, sizes[rank], strides[rank] }.
// Arguments are copies of the inputs (bufferization may write into its
// arguments). A result is copied out through its strides; once all are,
// each buffer is freed unless it is an argument's or a constant's (MLIR
// marks those 0xdeadbeef), once. After the outputs the function returns
// one flag per gather, set when an index is outside its axis (the export's
// checkIndices): the run is then an error naming the node, as Kiln's
// compiled path reports it (its reads are clamped, never outside). Intermediate buffers are freed
// by the buffer deallocation pass.
//
//===----------------------------------------------------------------------===//

#include "codegen/mlir/Internal.h"
#include "ir/DTypeCodec.h"

#include <mlir/Conversion/Passes.h>
#include <mlir/Dialect/Bufferization/Transforms/OneShotAnalysis.h>
#include <mlir/Dialect/Bufferization/Transforms/Passes.h>
#include <mlir/Dialect/Linalg/Passes.h>
#include <mlir/Dialect/MemRef/Transforms/Passes.h>
#include <mlir/ExecutionEngine/ExecutionEngine.h>
#include <mlir/ExecutionEngine/OptUtils.h>
#include <mlir/InitAllDialects.h>
#include <mlir/Pass/PassManager.h>
#include <mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h>

#include <llvm/Support/TargetSelect.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <set>

namespace kiln::mlirgen {

struct MlirProgram::Impl {
  mlir::MLIRContext ctx;
  std::unique_ptr<mlir::ExecutionEngine> engine;
  /// The gathers whose index checks the function returns after the
  /// outputs (MlirExportOptions::checkIndices).
  std::vector<Location> indexChecks;
  std::string entry;
  std::vector<TensorType> inputs, outputs;
  /// The weights, passed by pointer after the inputs (never written).
  std::vector<Tensor> constants;
  Location loc;
};

MlirProgram::MlirProgram() : impl_(std::make_unique<Impl>()) {}
MlirProgram::~MlirProgram() = default;

namespace {

mlir::DialectRegistry allDialects() {
  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerLLVMDialectTranslation(registry);
  return registry;
}

void addLowering(mlir::PassManager &pm) {
  pm.addNestedPass<mlir::func::FuncOp>(mlir::createLinalgGeneralizationPass());
  pm.addPass(mlir::bufferization::createEmptyTensorToAllocTensorPass());
  mlir::bufferization::OneShotBufferizationOptions bo;
  bo.bufferizeFunctionBoundaries = true;
  bo.allowReturnAllocs = true;
  bo.functionBoundaryTypeConversion = mlir::bufferization::LayoutMapOption::IdentityLayoutMap;
  // Copies as linalg.copy (lowered to loops), not memref.copy: its lowering
  // calls memrefCopy of MLIR's runner library.
  bo.memCpyFn = [](mlir::OpBuilder &b, mlir::Location loc, mlir::Value from, mlir::Value to) {
    b.create<mlir::linalg::CopyOp>(loc, from, to);
    return mlir::success();
  };
  pm.addPass(mlir::bufferization::createOneShotBufferizePass(bo));
  pm.addNestedPass<mlir::func::FuncOp>(mlir::bufferization::createBufferDeallocationPass());
  pm.addNestedPass<mlir::func::FuncOp>(mlir::createConvertLinalgToLoopsPass());
  pm.addPass(mlir::createConvertSCFToCFPass());
  pm.addPass(mlir::memref::createExpandStridedMetadataPass());
  pm.addPass(mlir::createLowerAffinePass());
  pm.addPass(mlir::createConvertMathToFuncs());
  pm.addPass(mlir::createConvertMathToLLVMPass());
  pm.addPass(mlir::createConvertMathToLibmPass());
  pm.addPass(mlir::createMemRefToLLVMConversionPass());
  pm.addPass(mlir::createArithToLLVMConversionPass());
  pm.addPass(mlir::createConvertFuncToLLVMPass());
  pm.addPass(mlir::cf::createConvertControlFlowToLLVMPass());
  pm.addPass(mlir::createReconcileUnrealizedCastsPass());
}

/// The memref descriptor of a dense row-major buffer at `data`:
/// { allocated, aligned, offset 0, sizes, strides }.
std::vector<int64_t> descriptorOf(const void *data, const std::vector<int64_t> &sizes) {
  const int64_t p = reinterpret_cast<int64_t>(data);
  std::vector<int64_t> desc = {p, p, 0};
  desc.insert(desc.end(), sizes.begin(), sizes.end());
  std::vector<int64_t> strides(sizes.size(), 1);
  for (size_t d = sizes.size(); d-- > 1;)
    strides[d - 1] = strides[d] * sizes[d];
  desc.insert(desc.end(), strides.begin(), strides.end());
  return desc;
}

} // namespace

FailureOr<std::unique_ptr<MlirProgram>> MlirProgram::compile(const Graph &g,
                                                             DiagnosticEngine &diag) {
  static const bool targetReady = [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    return true;
  }();
  (void)targetReady;
  // The storage dtypes: LLVM 16 has no 8-bit float type to lower their
  // memrefs to, and stores an i4 or i2 with unspecified high bits where
  // Kiln's buffers hold a byte each.
  auto miniFloat = [&](const kiln::Value *v, const Location &l) -> LogicalResult {
    if (!isStorageDType(v->type().dtype))
      return success();
    return diag.emitError(l) << "the MLIR CPU path cannot lower " << dtypeName(v->type().dtype)
                             << " tensors: LLVM 16 has no 8-bit float type, and no byte-per-"
                                "element form of the 4- and 2-bit ones";
  };
  for (const kiln::Value *v : g.inputs())
    if (failed(miniFloat(v, Location::name(g.name()))))
      return failure();
  for (const Node *n : g.nodes())
    for (unsigned i = 0; i < n->numResults(); ++i)
      if (failed(miniFloat(n->result(i), n->loc())))
        return failure();
  std::unique_ptr<MlirProgram> p(new MlirProgram());
  Impl &m = *p->impl_;
  m.loc = Location::name(g.name());
  m.ctx.appendDialectRegistry(allDialects());
  DiagnosticBridge bridge(m.ctx, diag, m.loc);
  MlirExportOptions options;
  options.constantsAsArguments = true;
  options.checkIndices = true;
  std::vector<std::string> calls;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      buildModule(m.ctx, g, options, diag, calls, &m.constants, &m.indexChecks);
  if (!module)
    return failure();
  if (!calls.empty()) {
    std::string names;
    for (const std::string &c : calls)
      names += (names.empty() ? "" : ", ") + c;
    return diag.emitError(m.loc) << "the MLIR CPU path cannot run graph '" << g.name()
                                 << "': MLIR has no form for " << names
                                 << " (written as calls of @kiln.<op>)";
  }
  // A fixed name: the graph's could be one the lowering declares (malloc).
  auto f = module->lookupSymbol<mlir::func::FuncOp>(g.name());
  if (!f)
    return diag.emitError(m.loc) << "the MLIR module has no function '" << g.name() << "'";
  if (mlir::failed(mlir::SymbolTable::replaceAllSymbolUses(
          f, mlir::StringAttr::get(&m.ctx, "kiln_graph"), *module)))
    return diag.emitError(m.loc) << "cannot rename the MLIR function of graph '" << g.name() << "'";
  f.setSymName("kiln_graph");
  f->setAttr("llvm.emit_c_interface", mlir::UnitAttr::get(&m.ctx));
  m.entry = "_mlir_ciface_kiln_graph";
  mlir::PassManager pm(&m.ctx);
  addLowering(pm);
  if (mlir::failed(pm.run(*module)))
    return diag.emitError(m.loc) << "MLIR's lowering of graph '" << g.name() << "' failed";
  // LLVM's O2 (and O1) on one function grows about quadratically in its
  // blocks (dominator tree updates): densenet121's 17238 blocks took 169 s
  // at O2 and 30 s without the IR optimizer (codegen still optimizes), so
  // a function past kMaxOptimizedBlocks is compiled without it.
  constexpr size_t kMaxOptimizedBlocks = 10000;
  size_t blocks = 0;
  module->walk([&](mlir::Block *) { ++blocks; });
  mlir::ExecutionEngineOptions eo;
  auto transformer = mlir::makeOptimizingTransformer(2, 0, nullptr);
  if (blocks <= kMaxOptimizedBlocks)
    eo.transformer = transformer;
  auto engine = mlir::ExecutionEngine::create(*module, eo);
  if (!engine) {
    std::string why = llvm::toString(engine.takeError());
    return diag.emitError(m.loc) << "MLIR's ExecutionEngine cannot compile graph '" << g.name()
                                 << "': " << why;
  }
  m.engine = std::move(*engine);
  for (const kiln::Value *v : g.inputs())
    m.inputs.push_back(v->type());
  for (const kiln::Value *v : g.outputs())
    m.outputs.push_back(v->type());
  return p;
}

FailureOr<std::vector<Tensor>> MlirProgram::run(std::span<const Tensor> inputs,
                                                DiagnosticEngine &diag) const {
  const Impl &m = *impl_;
  if (inputs.size() != m.inputs.size())
    return diag.emitError(m.loc) << "the graph takes " << m.inputs.size() << " inputs, got "
                                 << inputs.size();
  // Symbols from the dims that are one, then every dim against its size.
  std::map<std::string, int64_t> symbols;
  for (size_t i = 0; i < inputs.size(); ++i)
    for (size_t d = 0; d < m.inputs[i].shape.size() && d < inputs[i].shape().size(); ++d)
      if (!m.inputs[i].shape[d].symbol().empty())
        symbols.emplace(m.inputs[i].shape[d].symbol(), inputs[i].shape()[d]);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorType &want = m.inputs[i];
    const Tensor &t = inputs[i];
    bool ok = t.dtype() == want.dtype && t.shape().size() == want.shape.size();
    for (size_t d = 0; ok && d < want.shape.size(); ++d) {
      std::optional<int64_t> size = evaluateDim(want.shape[d], symbols);
      ok = !size || *size == t.shape()[d];
    }
    if (!ok)
      return diag.emitError(m.loc)
             << "input " << i << " is " << t.type().str() << ", the graph takes " << want.str();
  }
  // Arguments: copies, 64-byte aligned.
  std::vector<std::unique_ptr<char, decltype(&std::free)>> buffers;
  std::vector<std::vector<int64_t>> argDescs;
  std::set<const void *> argPointers;
  for (const Tensor &t : inputs) {
    size_t bytes = std::max<size_t>(64, (t.byteSize() + 63) / 64 * 64);
    char *data = static_cast<char *>(std::aligned_alloc(64, bytes));
    if (!data)
      return diag.emitError(m.loc)
             << "cannot allocate " << bytes << " bytes for input " << argDescs.size();
    if (t.byteSize())
      std::memcpy(data, t.rawData(), t.byteSize());
    buffers.emplace_back(data, &std::free);
    argPointers.insert(data);
    argDescs.push_back(descriptorOf(data, t.shape()));
  }
  for (const Tensor &t : m.constants) {
    argDescs.push_back(descriptorOf(t.rawData(), t.shape()));
    argPointers.insert(t.rawData());
  }
  size_t words = 3 * m.indexChecks.size();
  for (const TensorType &t : m.outputs)
    words += 3 + 2 * t.shape.size();
  std::vector<int64_t> results(words, 0);
  std::vector<void *> params = {results.data()};
  for (auto &d : argDescs)
    params.push_back(d.data());
  std::vector<void *> args;
  for (void *&p : params)
    args.push_back(&p);
  if (llvm::Error e = m.engine->invokePacked(m.entry, args))
    return diag.emitError(m.loc) << "running the MLIR-compiled graph failed: "
                                 << llvm::toString(std::move(e));
  std::vector<Tensor> outs;
  std::vector<int64_t> allocations;
  std::set<int64_t> freed;
  size_t at = 0;
  for (const TensorType &t : m.outputs) {
    size_t rank = t.shape.size();
    const int64_t *desc = results.data() + at;
    at += 3 + 2 * rank;
    std::vector<int64_t> sizes(desc + 3, desc + 3 + rank),
        strides(desc + 3 + rank, desc + 3 + 2 * rank);
    const size_t esize = dtypeSize(t.dtype);
    const char *base =
        reinterpret_cast<const char *>(desc[1]) + desc[2] * static_cast<int64_t>(esize);
    int64_t n = 1;
    for (int64_t s : sizes)
      n *= s;
    std::vector<char> bytes(static_cast<size_t>(n) * esize);
    std::vector<int64_t> idx(rank, 0);
    for (int64_t k = 0; k < n; ++k) {
      int64_t off = 0;
      for (size_t d = 0; d < rank; ++d)
        off += idx[d] * strides[d];
      std::memcpy(bytes.data() + static_cast<size_t>(k) * esize,
                  base + off * static_cast<int64_t>(esize), esize);
      for (size_t d = rank; d-- > 0;) {
        if (++idx[d] < sizes[d])
          break;
        idx[d] = 0;
      }
    }
    outs.push_back(Tensor::fromBytes(t.dtype, sizes, bytes.data()));
    allocations.push_back(desc[0]);
  }
  // The index checks' flags (rank 0, i1), one per gather, after the outputs.
  std::optional<Location> outOfRange;
  for (const Location &l : m.indexChecks) {
    const int64_t *desc = results.data() + at;
    at += 3;
    if (*(reinterpret_cast<const uint8_t *>(desc[1]) + desc[2]) & 1 && !outOfRange)
      outOfRange = l;
    allocations.push_back(desc[0]);
  }
  // Freed once all are copied: results may share a buffer.
  for (int64_t allocated : allocations)
    if (allocated != 0xdeadbeef && allocated != 0 &&
        !argPointers.count(reinterpret_cast<const void *>(allocated)) &&
        freed.insert(allocated).second)
      std::free(reinterpret_cast<void *>(allocated));
  if (outOfRange)
    return diag.emitError(*outOfRange) << "'gather' op: an index is outside its axis (the MLIR "
                                          "CPU path checks them as Kiln's compiled path does)";
  return outs;
}

} // namespace kiln::mlirgen
