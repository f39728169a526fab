//===- CudaProgram.cpp - A graph's kernels as one CUDA module -------------===//

#include "codegen/CudaProgram.h"
#include "codegen/Fusion.h"
#include "codegen/Internal.h"
#include "codegen/MemoryPlan.h"
#include "codegen/RunTimeSizes.h"
#include "ir/Ops.h"
#include "ir/SizedByRun.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>

namespace kiln::codegen {
namespace {

/// `name` as a C identifier not in `taken` (kernel names are sanitized
/// graph names; two kernels may still share one).
std::string uniqueIdentifier(const std::string &name, std::set<std::string> &taken) {
  std::string id;
  for (char c : name)
    id += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (id.empty() || std::isdigit(static_cast<unsigned char>(id[0])))
    id = "k_" + id;
  std::string candidate = id;
  for (int n = 2; taken.count(candidate); ++n)
    candidate = id + "_" + std::to_string(n);
  taken.insert(candidate);
  return candidate;
}

} // namespace

FailureOr<CudaCompiled> compileCudaModel(const Graph &g, const CompileOptions &options, int arch,
                                         DiagnosticEngine &diag, bool kernelsOnly) {
  using Buffer = runtime::cuda::CudaModelSpec::Buffer;
  CudaCompiled out;
  out.ports = GraphPorts::of(g);
  auto prepared = preparePipeline(g.clone(), options, diag);
  if (failed(prepared))
    return failure();
  // Matrix products through cuBLASLt when every one maps onto a call; else
  // all as a product and a sum (passes/DecomposeMatMul.cpp), one reduction
  // kernel each.
  bool library = options.useLibraries;
  for (const Node *n : (*prepared)->nodes()) {
    if (n->kind() != OpKind::MatMul && n->kind() != OpKind::Gemm)
      continue;
    std::string why = "--no-libraries";
    if (!library || !n->result()->type().isStatic() || !cublasLtCall(*n, why)) {
      out.productsAsKernels = "'" + std::string(n->mnemonic()) + "' (" +
                              (n->result()->name().empty() ? "?" : n->result()->name()) +
                              "): " + (n->result()->type().isStatic() ? why : "a dynamic shape");
      library = false;
      CompileOptions o = options;
      o.pipeline = "decompose-matmul,canonicalize,cse,dce";
      prepared = preparePipeline(std::move(*prepared), o, diag);
      if (failed(prepared))
        return failure();
      break;
    }
  }
  // A size only the run decides, after the pipeline (which unrolls short
  // loops): the CPU compiles in stages around it (Note [Data-dependent
  // shapes] in codegen/Staged.cpp); the CUDA model is one static plan.
  for (const Node *n : (*prepared)->nodes())
    if (n->numResults() > 0 && sizedByRun(n->info(), n->numOperands()) &&
        !n->result()->type().isStatic()) {
      diag.emitError(n->loc()) << "the CUDA backend cannot run '" << n->mnemonic()
                               << "' yet: the size of its result is decided by its run, and "
                                  "the backend compiles one static plan (no stages)";
      return failure();
    }
  if (failed(checkPrepared(**prepared, diag)) || failed(padForCudnn(**prepared, diag)))
    return failure();
  const Graph &pg = **prepared;
  // Library groups: cuBLASLt's products, cuDNN's convolutions and pools;
  // every other node a kernel's or a fallback's.
  FusionOptions fusion;
  fusion.library = &cudaLibraryCapabilities();
  fusion.acceptEpilogue = cudaAcceptsEpilogue;
  fusion.useLibraries = options.useLibraries;
  fusion.fuse = options.fuse;
  auto plan = planFusion(pg, fusion, diag);
  if (failed(plan))
    return failure();
  if (options.explain)
    out.fusion = plan->explain();
  const auto names = detail::valueNames(pg);
  runtime::cuda::CudaModelSpec &spec = out.spec;
  std::map<const Value *, int32_t> ids;
  std::vector<LiveInterval> live; // per buffer (constants unused)
  const std::vector<Value *> inputs = pg.inputs();
  auto bufferOf = [&](const Value *v) {
    if (auto it = ids.find(v); it != ids.end())
      return it->second;
    Buffer b;
    b.name = names.count(v) ? names.at(v) : "value";
    b.dtype = v->type().dtype;
    b.shape = detail::sizesOf(v);
    b.bytes = static_cast<uint64_t>(numElements(b.shape)) * dtypeSize(b.dtype);
    if (auto in = std::find(inputs.begin(), inputs.end(), v); in != inputs.end()) {
      b.role = Buffer::Role::Input;
      b.index = static_cast<int32_t>(in - inputs.begin());
    } else if (const Node *def = v->definingNode(); def && def->kind() == OpKind::Constant) {
      b.role = Buffer::Role::Constant;
      const Tensor &t = ConstantOp(*def).value();
      b.data.assign(static_cast<const char *>(t.rawData()), b.bytes);
    }
    spec.buffers.push_back(std::move(b));
    live.push_back({spec.buffers.back().bytes, -1, -1, -1});
    return ids[v] = static_cast<int32_t>(spec.buffers.size() - 1);
  };
  auto use = [&](int32_t id, int32_t step) {
    LiveInterval &l = live[static_cast<size_t>(id)];
    l.first = l.first < 0 ? step : std::min(l.first, step);
    l.last = std::max(l.last, step);
  };
  out.program.arch = arch;
  std::set<std::string> taken;
  for (const FusionGroup &group : plan->groups) {
    if (group.kind == FusionGroup::Kind::Library && group.nodes.front()->kind() != OpKind::MatMul &&
        group.nodes.front()->kind() != OpKind::Gemm) {
      const Node *n = group.nodes.front();
      // The epilogues cudaAcceptsEpilogue takes: a residual add, a relu, or
      // both in that order; the group's result is the last one's.
      size_t taken = 1;
      const Value *residual =
          taken < group.nodes.size() ? residualOf(*n, *group.nodes[taken]) : nullptr;
      taken += residual ? 1 : 0;
      const bool relu = taken < group.nodes.size() && group.nodes[taken]->kind() == OpKind::Relu;
      taken += relu ? 1 : 0;
      if (group.nodes.size() != taken) {
        diag.emitError(n->loc()) << "internal error: a cuDNN group of " << group.nodes.size()
                                 << " nodes";
        return failure();
      }
      const Value *result = group.nodes.back()->result();
      const std::string name = names.count(result) ? names.at(result) : "?";
      const std::string what = "'" + std::string(n->mnemonic()) + "' (" + name + ")";
      std::string why;
      auto call = cudnnCall(*n, relu, why);
      if (!call) {
        if (kernelsOnly) { // its result stands as a buffer no step writes
          out.notKernels.push_back(what + ": cuDNN cannot run it: " + why);
          bufferOf(result);
          continue;
        }
        diag.emitError(n->loc()) << "the CUDA backend cannot run " << what << ": " << why;
        return failure();
      }
      runtime::cuda::CudaModelSpec::Step step;
      step.function = name;
      const bool conv = call->kind == CudnnCall::Kind::Conv;
      step.kind = conv ? runtime::cuda::CudaModelSpec::Step::Kind::Conv
                       : runtime::cuda::CudaModelSpec::Step::Kind::Pool;
      step.conv = call->conv;
      step.conv.hasResidual = residual != nullptr;
      step.pool = call->pool;
      const int32_t at = static_cast<int32_t>(spec.steps.size());
      for (const Value *v : n->operands()) // x, w and the bias
        step.buffers.push_back(bufferOf(v));
      if (residual)
        step.buffers.push_back(bufferOf(residual));
      step.buffers.push_back(bufferOf(result));
      for (int32_t id : step.buffers)
        use(id, at);
      out.notKernels.push_back(what + ": cuDNN, " + (conv ? step.conv.str() : step.pool.str()));
      spec.steps.push_back(std::move(step));
      continue;
    }
    if (group.kind == FusionGroup::Kind::Library) {
      // A product, alone or with the residual add cudaAcceptsEpilogue took.
      const Node *n = group.nodes.front();
      const Value *residual = group.nodes.size() == 2 ? residualOf(*n, *group.nodes[1]) : nullptr;
      std::string why;
      auto call = cublasLtCall(*n, why);
      if (!call || group.nodes.size() != (residual ? 2u : 1u)) { // every product was checked
        diag.emitError(n->loc()) << "internal error: '" << n->mnemonic() << "' and "
                                 << group.nodes.size() - 1
                                 << " epilogue nodes have no cuBLASLt call"
                                 << (why.empty() ? "" : ": " + why);
        return failure();
      }
      if (residual) { // D = A B + R: R read as C with D's layout
        call->hasC = true;
        call->beta = 1;
        call->strideC = call->strideD;
      }
      const Value *result = group.nodes.back()->result();
      runtime::cuda::CudaModelSpec::Step step;
      step.kind = runtime::cuda::CudaModelSpec::Step::Kind::Gemm;
      step.function = names.count(result) ? names.at(result) : "product";
      step.gemm = *call;
      const int32_t at = static_cast<int32_t>(spec.steps.size());
      // A, B, then C (the residual, or the gemm's own), the bias, D.
      step.buffers = {bufferOf(n->operand(0)), bufferOf(n->operand(1))};
      if (residual)
        step.buffers.push_back(bufferOf(residual));
      if (n->numOperands() > 2 && ((call->hasC && !residual) || call->hasBias))
        step.buffers.push_back(bufferOf(n->operand(2)));
      step.buffers.push_back(bufferOf(result));
      for (int32_t id : step.buffers)
        use(id, at);
      out.notKernels.push_back("'" + std::string(n->mnemonic()) + "' (" + step.function +
                               "): cuBLASLt, " + call->str());
      spec.steps.push_back(std::move(step));
      continue;
    }
    if (group.kind != FusionGroup::Kind::Kernel) {
      const Node *n = group.nodes.front();
      const std::string what = "'" + std::string(n->mnemonic()) + "' (" +
                               (names.count(n->result()) ? names.at(n->result()) : "?") + ")";
      if (kernelsOnly) { // its results stand as buffers no step writes
        out.notKernels.push_back(what + ": no kernel and no library call yet");
        for (const Value *v : group.outputs)
          bufferOf(v);
        continue;
      }
      diag.emitError(n->loc()) << "the CUDA backend cannot run " << what
                               << " yet: it has no kernel for it and no library call";
      return failure();
    }
    // A group of tensors with no elements computes nothing (the CPU runs
    // such groups on reference kernels, and lowering assumes extents > 0);
    // one with a non-empty result of an empty operand (a sum over an empty
    // axis) has no kernel here.
    auto empty = [](const Value *v) { return numElements(detail::sizesOf(v)) == 0; };
    auto anyEmpty = [&](const std::vector<const Node *> &nodes) {
      for (const Node *n : nodes)
        for (unsigned r = 0; r < n->numResults(); ++r)
          if (empty(n->result(r)))
            return true;
      return false;
    };
    if (std::any_of(group.inputs.begin(), group.inputs.end(), empty) ||
        std::any_of(group.outputs.begin(), group.outputs.end(), empty) || anyEmpty(group.nodes) ||
        anyEmpty(group.recomputed)) {
      if (std::all_of(group.outputs.begin(), group.outputs.end(), empty)) {
        for (const Value *v : group.outputs)
          bufferOf(v); // no step writes it: it has no bytes
        continue;
      }
      // Lowering a reduction over an empty axis divides by its extent.
      for (const std::vector<const Node *> *nodes : {&group.nodes, &group.recomputed})
        for (const Node *n : *nodes)
          if ((n->info().hasTrait(Reduction) || n->info().hasTrait(Normalization)) &&
              std::any_of(n->operands().begin(), n->operands().end(), empty)) {
            diag.emitError(n->loc()) << "the CUDA backend cannot run '" << n->mnemonic() << "' ("
                                     << (names.count(n->result()) ? names.at(n->result()) : "?")
                                     << ") yet: it reduces a tensor with no elements";
            return failure();
          }
    }
    auto k = lowerGroup(group, diag);
    if (failed(k))
      return failure();
    if (k->inputs.size() != group.inputs.size() || k->outputs.size() != group.outputs.size()) {
      diag.emitError(Location()) << "internal error: kernel '" << k->name << "' has "
                                 << k->inputs.size() << " inputs for its group's "
                                 << group.inputs.size();
      return failure();
    }
    const std::string name = uniqueIdentifier(k->name, taken);
    std::string error;
    auto ck = cuda::emitCudaKernel(*k, name, error);
    if (!ck) {
      diag.emitError(Location()) << "the CUDA backend cannot write kernel '" << k->name
                                 << "': " << error;
      return failure();
    }
    std::string src = ck->source;
    if (!out.program.kernels.empty())
      src = src.substr(src.find('\n') + 1); // one include of the prelude
    out.program.source += "\n" + src;
    const uint32_t grid =
        cuda::cudaGridBlocks(ck->form, k->numOuter(), k->inner / ck->pointsPerThread);
    out.program.kernels.push_back({name, ck->form, k->numOuter(), k->inner, grid});
    runtime::cuda::CudaModelSpec::Step step;
    step.function = name;
    step.grid = grid;
    step.block = cuda::kCudaBlockThreads;
    step.synchronizes = cuda::cudaFormSynchronizes(ck->form);
    const int32_t at = static_cast<int32_t>(spec.steps.size());
    for (const Value *v : group.inputs)
      step.buffers.push_back(bufferOf(v));
    for (const Value *v : group.outputs)
      step.buffers.push_back(bufferOf(v));
    for (int32_t id : step.buffers)
      use(id, at);
    spec.steps.push_back(std::move(step));
  }
  // Outputs stay live to the end; a graph output that is an input or a
  // constant would need a copy, which the CUDA model has no step for yet.
  const int32_t last = static_cast<int32_t>(spec.steps.size()) - 1;
  for (size_t o = 0; o < pg.outputs().size(); ++o) {
    const Value *v = pg.outputs()[o];
    auto it = ids.find(v);
    Buffer *b = it == ids.end() ? nullptr : &spec.buffers[static_cast<size_t>(it->second)];
    if (!b || b->role != Buffer::Role::Temp) {
      diag.emitError(Location()) << "the CUDA backend cannot return output " << o
                                 << " yet: it is an input, a constant or another output";
      return failure();
    }
    b->role = Buffer::Role::Output;
    b->index = static_cast<int32_t>(o);
    use(it->second, last);
  }
  for (size_t i = 0; i < inputs.size(); ++i)
    use(bufferOf(inputs[i]), 0); // copied in before the first step
  for (size_t b = 0; b < spec.buffers.size(); ++b)
    if (spec.buffers[b].role == Buffer::Role::Constant)
      live[b] = {};
  const MemoryPlan memory = planMemory(live);
  for (size_t b = 0; b < spec.buffers.size(); ++b)
    spec.buffers[b].offset = memory.offsets[b];
  spec.arenaBytes = memory.arenaBytes;
  spec.numInputs = static_cast<int32_t>(inputs.size());
  spec.numOutputs = static_cast<int32_t>(pg.outputs().size());
  std::string error;
  out.program.source = "// " + std::to_string(out.program.kernels.size()) + " kernels for sm_" +
                       std::to_string(arch) + ", written by Kiln's CUDA backend\n" +
                       out.program.source;
  if (!cuda::compileWithNvrtc(out.program.source, "kiln_kernels.cu", arch, out.program.binary,
                              error)) {
    diag.emitError(Location()) << error;
    return failure();
  }
  spec.image = out.program.binary.cubin;
  spec.ptx = out.program.binary.ptx;
  spec.arch = arch;
  return out;
}

runtime::cuda::CudaArtifact cudaArtifactOf(CudaCompiled &&compiled, const std::string &modelPath) {
  runtime::cuda::CudaArtifact a;
  a.source = std::move(compiled.program.source);
  a.spec = std::move(compiled.spec);
  a.model = std::filesystem::path(modelPath).filename().string();
  a.nvrtcVersion = cuda::nvrtcVersionString();
  return a;
}

} // namespace kiln::codegen
