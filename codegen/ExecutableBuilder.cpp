//===- ExecutableBuilder.cpp - Fusion groups to runtime steps -*- C++ -*-===//
//
// Phases 4 and 5 of compile() (Compiler.h): each fusion group becomes
// steps of a runtime::Executable (a JIT kernel, a library call with its
// epilogue, a compiled region, or a reference fallback), then the memory
// plan places its buffers. Buffers: one per graph input, one per
// constant a step reads (sharing the constant's bytes), and one Temp per
// other value a step writes; graph outputs are whatever buffers hold them.
//
// Note [In-place kernels]
// A kernel group with one output may write it into the memory of an input
// that dies there: an intermediate (not a graph input, constant or output)
// that no later group reads, with the same element size and count, when
// the kernel reads each of its elements only where it writes the output
// (codegen::canWriteInPlace). The kernel is then compiled to store through
// the input's pointer, the step declares the pair, and the memory plan
// gives both one block; Executable::checkMemory() verifies the result.
// Unless the model is compiled for one thread, the input must also have no
// reader but this kernel: another reader on several threads (a library
// call that splits its work its own way, say) leaves the input's cache
// lines shared by the cores, and overwriting a line another core holds
// waits for its invalidation. On this 2-vCPU AVX-512 VM, efficientnet_b0's
// squeeze-and-excitation multiply in place of its input, which the global
// average pool had read on two threads, took 157 us at 2 threads (32 us
// at one); into a buffer of its own, 46 us (`kiln compile --threads 2
// --profile 300`, 2026-12-06).
//
// Note [Channels-last buffers]
// oneDNN's fast convolutions (brgconv on AVX-512) want channels-last
// activations (N, H, W, C: "acdb"); converting every conv's input and
// output from and to row-major costs as much as the convs themselves
// (mobilenet_v2: 104 reorders, half the run time). So a value produced by
// a conv or pool library call whose every use is as the src of another
// conv/pool call, as the residual added in such a call's epilogue, as an
// operand of a channel concat, or as an input of a pointwise kernel of its
// shape or of a kernel of pointwise ops, resizes and channel concats whose
// result differs from it only in channels (DenseNet's concat + batch norm
// + ReLU before each 1x1 conv) is stored channels-last; those calls read
// and write it without reorders, and such a kernel iterates channels-last
// and writes channels-last. The choice is a prediction made when the
// producer is built; a consumer that turns out to need row-major data (a
// kernel, a reference fallback, a graph output, a library call that reads
// it row-major, see OneDnnCall::channelsLastOperands) reads a row-major twin
// that a to-row-major step fills on first need. So a misprediction costs
// one conversion, never a wrong answer.
//
// Note [Fallback steps]
// A node no backend handles runs on its reference kernel (evaluateNode) as
// an extern step of its own (runtime/reference/ReferenceStep.h):
// operands are borrowed from the buffers as Tensors (no copy), results are
// copied into the node's buffers. The Executable keeps the compiled graph
// alive; an artifact stores the node as a one-node .kir graph. Each one is
// announced by a warning at the node's location that names it, its op and
// the reason, so a slow path is never silent; the nodes that run so for
// being empty (batch 0), which costs nothing, get one warning for all
// (emptyFallbacksWarning), every one still in the report.
//
//===----------------------------------------------------------------------===//
#include "codegen/ExecutableBuilder.h"
#include "codegen/KernelSharing.h"
#include "codegen/RunTimeSizes.h"
#include "codegen/cpu/dnnl/OneDnnSteps.h"

#include "codegen/Internal.h"
#include "codegen/MemoryPlan.h"
#include "codegen/cpu/CpuJit.h"
#include "codegen/cpu/dnnl/DnnlIsa.h"
#include "runtime/CopyStep.h"
#include "runtime/IndexCheckStep.h"
#include "runtime/reference/HostTensors.h"
#include "runtime/reference/ReferenceStep.h"
#include "runtime/reference/RegionStep.h"

#include <algorithm>
#include <deque>
#include <set>
#include <unordered_map>

namespace kiln::codegen {

std::string emptyFallbacksWarning(size_t count, const std::string &first) {
  return std::to_string(count) + " node" + (count == 1 ? "" : "s") +
         " with a zero-sized operand or result (" + first + (count == 1 ? "" : ", ...") +
         ") run on reference kernels, which do nothing costly for empty tensors";
}

namespace {

using Clock = std::chrono::steady_clock;

/// `%name` of a node's first result (names are assigned by nameValues).
std::string nodeName(const Node *n) {
  return n->numResults() ? "%" + n->result()->name() : "<" + std::string(n->mnemonic()) + ">";
}

/// Builds the Executable step by step.
class ExecutableBuilder {
public:
  ExecutableBuilder(const Graph &g, const FusionPlan &plan, const CompileOptions &options,
                    DiagnosticEngine &diag, CompileReport &report)
      : options_(options), diag_(diag), report_(report),
        exe_(std::make_unique<runtime::Executable>()),
        channelsLastPlan_(g, plan, options.useLibraries) {
    for (const Value *v : g.outputs())
      graphOutputs_.insert(v);
    std::unordered_map<Node *, size_t> lastToucher;
    for (size_t i = 0; i < plan.groups.size(); ++i) {
      for (const Value *v : plan.groups[i].inputs) {
        lastReader_[v] = i;
        ++readerGroups_[v];
      }
      for (const auto *list : {&plan.groups[i].nodes, &plan.groups[i].recomputed})
        for (const Node *n : *list)
          for (const Value *v : n->operands())
            if (Node *def = const_cast<Node *>(v->definingNode());
                def && def->kind() == OpKind::Constant)
              lastToucher[def] = i;
    }
    for (auto [node, last] : lastToucher)
      if (!graphOutputs_.count(node->result()))
        releaseOrder_.emplace_back(last, node);
    std::sort(releaseOrder_.begin(), releaseOrder_.end(),
              [](const auto &a, const auto &b) { return a.first > b.first; });
  }

  /// Groups are added in order; this is the index of the current one.
  void beginGroup(size_t index) { group_ = index; }

  /// Drops the tensors of constant nodes that no group after the current
  /// one reads, in the compiled graph (the steps share or copy what they
  /// need). With a graph the compiler owns, this frees each weight once it
  /// is packed, instead of holding every weight twice until the end.
  void releaseConsumedConstants() {
    while (!releaseOrder_.empty() && releaseOrder_.back().first <= group_) {
      Node *n = releaseOrder_.back().second;
      n->setAttr(ConstantOp::value_index, Attribute(Tensor()));
      releaseOrder_.pop_back();
    }
  }

  runtime::Executable &exe() { return *exe_; }
  std::unique_ptr<runtime::Executable> take() { return std::move(exe_); }

  void addInputs(const Graph &g) {
    for (const Value *v : g.inputs())
      buffers_[v] = exe_->addInput(v->type().dtype, staticSizes(v->type().shape), v->name());
  }

  /// The buffer holding `v`, created on first use.
  int32_t bufferOf(const Value *v) {
    auto it = buffers_.find(v);
    if (it != buffers_.end())
      return it->second;
    int32_t id;
    const Node *def = v->definingNode();
    if (def && def->kind() == OpKind::Constant) {
      const Tensor &t = std::get<Tensor>(def->attr(ConstantOp::value_index));
      id = exe_->addConstant(runtime::toHostTensor(t), v->name());
    } else {
      id = exe_->addTemp(v->type().dtype, staticSizes(v->type().shape), v->name());
    }
    buffers_[v] = id;
    return id;
  }

  /// The row-major buffers of `values`, then of `more`.
  std::vector<int32_t> buffersOf(const std::vector<const Value *> &values,
                                 const std::vector<const Value *> &more = {}) {
    std::vector<int32_t> ids;
    for (const auto *list : {&values, &more})
      for (const Value *v : *list)
        ids.push_back(bufferOf(v));
    return ids;
  }

  /// The buffer holding `v` row-major: its own, or for a channels-last
  /// value a twin filled by a to-row-major step (added on first need). See
  /// Note [Channels-last buffers].
  int32_t rowMajorBufferOf(const Value *v) {
    if (!channelsLast_.count(v))
      return bufferOf(v);
    auto it = rowMajorTwin_.find(v);
    if (it != rowMajorTwin_.end())
      return it->second;
    int32_t twin =
        exe_->addTemp(v->type().dtype, staticSizes(v->type().shape), v->name() + ".row_major");
    exe_->addExternStep(cpu::makeToRowMajorStep(v), {bufferOf(v), twin}, 1);
    rowMajorTwin_[v] = twin;
    return twin;
  }

  /// Row-major buffers of `reads`, then the buffers of `writes`.
  std::vector<int32_t> stepBuffers(const std::vector<const Value *> &reads,
                                   const std::vector<const Value *> &writes) {
    std::vector<int32_t> ids;
    for (const Value *v : reads)
      ids.push_back(rowMajorBufferOf(v));
    for (const Value *v : writes)
      ids.push_back(bufferOf(v));
    return ids;
  }

  /// A graph output's buffer (row-major).
  int32_t outputBufferOf(const Value *v) { return rowMajorBufferOf(v); }

  /// Note [Compiled regions]
  /// An `if` or `loop` that inline-regions left (a condition or exit known
  /// only at run time, a long loop) runs as one RegionStep
  /// (runtime/reference/RegionStep.h) over its regions compiled as models
  /// of their own, with the same options, each for the static types of the
  /// operands it gets (a region's symbols bound to their sizes): nothing
  /// fuses across a region boundary, and the runtime tests the condition
  /// and counts the trips on the host. Not possible, and the node runs on
  /// its reference kernel with the reason, when a region input has a `?`
  /// dim (a carried value that changes shape), a loop scans for a number
  /// of iterations known only at run time (a scan result with a `?`; ONNX
  /// Scan's results have the length of its input, and the step copies each
  /// iteration's rows into place), or a region does not compile. Artifacts
  /// (and so the compile cache) store the regions compiled, as artifacts
  /// nested in the step's (Note [Nested artifacts] in
  /// runtime/artifact/Artifact.cpp). Returns the reason it could not, or "".
  std::string addRegionStep(const Node *n) {
    std::vector<const Graph *> regions;
    if (n->kind() == OpKind::If) {
      regions = {IfOp(*n).then_branch().get(), IfOp(*n).else_branch().get()};
    } else {
      const Graph &body = *LoopOp(*n).body();
      for (unsigned r = static_cast<unsigned>(LoopOp(*n).num_carried()); r < n->numResults(); ++r)
        if (!n->result(r)->type().isStatic())
          return "a loop that scans for a number of iterations known only at run time is not "
                 "compiled";
      regions = {&body};
    }
    const unsigned firstOperand = n->kind() == OpKind::If ? 1 : 0;
    std::vector<std::shared_ptr<const runtime::Executable>> exes;
    for (const Graph *region : regions) {
      CompileOptions o = options_;
      o.dims.clear();
      o.cache = false;
      o.explain = o.emitKernels = o.emitLLVM = o.emitLLVMOptimized = false;
      o.dumpDir.clear();
      o.debugFaultKernel.clear();
      o.sharedKernels = nullptr, o.runTimeSizes = false; // the kernels of the outer graph
      o.ranges.clear(); // the outer graph's symbols; a region is compiled static
      std::vector<TensorType> actual;
      for (unsigned i = 0; i < region->numInputs(); ++i) {
        const TensorType &declared = region->input(i)->type();
        // A loop's iteration and condition inputs are the body's own.
        const TensorType &given =
            n->kind() == OpKind::Loop && i < 2 ? declared : n->operand(firstOperand + i)->type();
        if (!given.isStatic() || given.rank() != declared.rank())
          return "region input " + std::to_string(i) + " is " + given.str();
        for (size_t d = 0; d < declared.shape.size(); ++d) {
          const Dim &dim = declared.shape[d];
          if (dim.isDynamic())
            return "region input %" + region->input(i)->name() + " : " + declared.str() +
                   " has a dim that changes between runs";
          if (!dim.symbol().empty()) {
            auto [it, fresh] = o.dims.emplace(dim.symbol(), given.shape[d].size());
            if (!fresh && it->second != given.shape[d].size())
              return "region symbol " + dim.symbol() + " is bound to two sizes";
          }
        }
        actual.push_back(given);
      }
      DiagnosticEngine quiet;
      ScopedDiagnosticCollector collected(quiet);
      auto exe = compile(*region, o, quiet);
      if (failed(exe)) {
        std::string why = collected.diagnostics().empty() ? std::string("unknown")
                                                          : collected.diagnostics().front().message;
        return "region '@" + region->name() + "' did not compile: " + why;
      }
      // The compiled region must take and give exactly these types.
      const auto &buffers = (*exe)->buffers();
      std::vector<TensorType> ins, outs;
      for (const runtime::BufferDesc &b : buffers)
        if (b.kind == runtime::BufferDesc::Kind::Input)
          ins.push_back(TensorType(b.dtype, b.shape));
      for (int32_t id : (*exe)->outputs())
        outs.push_back(TensorType(buffers[static_cast<size_t>(id)].dtype,
                                  buffers[static_cast<size_t>(id)].shape));
      if (ins != actual)
        return "region '@" + region->name() + "' compiled for other input types";
      const unsigned numCarried =
          n->kind() == OpKind::If ? n->numResults() : unsigned(LoopOp(*n).num_carried());
      for (unsigned r = 0; r < n->numResults(); ++r) {
        TensorType want = n->result(r)->type();
        if (r >= numCarried) // a scan: the body gives one row
          want.shape.erase(want.shape.begin());
        const size_t k = n->kind() == OpKind::If ? r : r + 1;
        if (k >= outs.size() || outs[k] != want)
          return "region '@" + region->name() + "' gives result " + std::to_string(r) + " as " +
                 (k < outs.size() ? outs[k].str() : std::string("nothing")) + ", not " + want.str();
      }
      exes.push_back(std::shared_ptr<const runtime::Executable>(std::move(*exe)));
    }
    std::vector<const Value *> reads(n->operands().begin(), n->operands().end()), writes;
    for (unsigned r = 0; r < n->numResults(); ++r)
      writes.push_back(n->result(r));
    exe_->addExternStep(std::make_shared<runtime::RegionStep>(runtime::RegionStep::Spec::of(*n),
                                                              nullptr, std::move(exes)),
                        stepBuffers(reads, writes), static_cast<int32_t>(n->numOperands()));
    ++report_.numRegions;
    return "";
  }

  /// A reference step for `n`, with a warning naming it (unless `quiet`:
  /// empty groups get one warning for all, warnEmptyGroups).
  void addFallback(const Node *n, const std::string &reason, bool quiet = false) {
    if (!quiet)
      diag_.emitWarning(n->loc()) << "node " << nodeName(n) << " ('" << n->mnemonic()
                                  << "') runs on the reference kernel: " << reason;
    report_.fallbacks.push_back(nodeName(n) + " (" + std::string(n->mnemonic()) + "): " + reason);
    ++report_.numFallbacks;
    std::vector<const Value *> reads(n->operands().begin(), n->operands().end()), writes;
    for (unsigned r = 0; r < n->numResults(); ++r)
      writes.push_back(n->result(r));
    exe_->addExternStep(std::make_shared<runtime::ReferenceStep>(n, nullptr),
                        stepBuffers(reads, writes), static_cast<int32_t>(n->numOperands()));
  }

  /// A group that reads or writes a zero-sized tensor (batch 0, an empty
  /// slice) runs on reference kernels, which handle every empty case the
  /// way the interpreter does (oneDNN divides by zero creating primitives
  /// for them). The nodes it recomputes that no earlier group wrote run
  /// first.
  void addEmptyGroup(const FusionGroup &group, const std::set<const Node *> &emitted) {
    const std::string why = kEmptyFallbackReason;
    std::vector<const Node *> nodes;
    for (const Node *n : group.recomputed)
      if (!emitted.count(n))
        nodes.push_back(n);
    nodes.insert(nodes.end(), group.nodes.begin(), group.nodes.end());
    for (const Node *n : nodes)
      if (emptyFallbacks_.insert(n).second) {
        addFallback(n, why, /*quiet=*/true);
        firstEmpty_ = firstEmpty_ ? firstEmpty_ : n;
      }
  }

  /// One warning for every node addEmptyGroup ran on its reference kernel
  /// (at batch 0 that is most of the model; each is in the report).
  void warnEmptyGroups() const {
    if (firstEmpty_)
      diag_.emitWarning(firstEmpty_->loc())
          << emptyFallbacksWarning(emptyFallbacks_.size(), nodeName(firstEmpty_));
  }

  /// CompileOptions::debugFaultKernel: every value stored to the first
  /// output gets 1 added, so the bisection has a wrong kernel to find.
  void plantFault(Kernel &kernel) {
    for (Stage &stage : kernel.stages)
      for (Store &store : stage.stores)
        if (store.output == 0)
          store.value =
              kernel.dag.add(store.value, kernel.dag.constant(kernel.dag.type(store.value), 1.0));
    diag_.emitWarning(Location()) << "--debug-fault-kernel: kernel '" << kernel.name
                                  << "' adds 1 to its first output";
    faultPlanted_ = true;
  }

  /// Warns when --debug-fault-kernel named no kernel of this compile.
  void checkFaultPlanted() const {
    if (!options_.debugFaultKernel.empty() && !faultPlanted_)
      diag_.emitWarning(Location())
          << "--debug-fault-kernel: no kernel is named '" << options_.debugFaultKernel
          << "' (kernels: " << (kernelNames_.empty() ? "none" : kernelNames_) << ")";
  }

  void addKernelGroup(const FusionGroup &group, cpu::CpuJit *jit) {
    // Note [Gather indices checked] in IndexChecks.cpp.
    for (const detail::GatherIndexCheck &c : detail::gatherIndexChecks(group))
      exe_->addExternStep(std::make_shared<runtime::IndexCheckStep>(
                              c.node, c.indices->type().dtype,
                              numElements(staticSizes(c.indices->type().shape)), c.axis, c.size),
                          {bufferOf(c.indices)}, 1);
    if (addChannelsLastConcat(group) || addCopyConcat(group))
      return;
    if (!options_.useKernels || !jit) {
      for (const Node *n : group.nodes)
        addFallback(n, options_.useKernels ? "no JIT available" : "kernels are disabled");
      return;
    }
    // Pointwise kernels reading a channels-last input of their own shape
    // (or of another channel count: a concat's operand) iterate in
    // channels-last order and write channels-last results. See Note
    // [Channels-last buffers].
    const KernelLayouts layouts = detail::kernelLayouts(group, channelsLast_);
    const bool iterateCL = layouts.iterateChannelsLast;
    auto kernel = lowerGroup(group, diag_, layouts);
    if (failed(kernel)) {
      for (const Node *n : group.nodes)
        addFallback(n, "its kernel group could not be lowered");
      return;
    }
    kernelNames_ += (kernelNames_.empty() ? "" : ", ") + kernel->name;
    if (!options_.debugFaultKernel.empty() && kernel->name == options_.debugFaultKernel)
      plantFault(*kernel);
    else if (addSharedKernelStep(group, *kernel, layoutKey(group, layouts))) {
      if (iterateCL)
        channelsLast_.insert(group.outputs.begin(), group.outputs.end());
      return;
    }
    // Inputs as they are stored (the kernel reads channels-last ones with
    // their strides); outputs channels-last when the kernel iterates so.
    std::vector<int32_t> ids = buffersOf(group.inputs, group.outputs);
    // A concat of computed operands runs as one kernel per operand (Note
    // [Concat pieces]); they write one buffer, so none works in place.
    std::vector<Kernel> pieces;
    if (!iterateCL)
      pieces = detail::splitConcatPieces(*kernel);
    const bool split = !pieces.empty();
    if (!split)
      pieces.push_back(std::move(*kernel));
    std::vector<std::pair<int32_t, int32_t>> inPlace;
    Schedule schedule;
    if (const Value *dying = split ? nullptr : inPlaceCandidate(group, pieces[0])) {
      auto input =
          std::find(group.inputs.begin(), group.inputs.end(), dying) - group.inputs.begin();
      schedule.inPlaceInput = {static_cast<int32_t>(input)};
      inPlace.emplace_back(ids[group.inputs.size()], ids[static_cast<size_t>(input)]);
    }
    for (Kernel &k : pieces)
      addKernelStep(std::move(k), schedule, ids, static_cast<int32_t>(group.inputs.size()), inPlace,
                    jit);
    if (iterateCL)
      channelsLast_.insert(group.outputs.begin(), group.outputs.end());
    ++report_.numKernels;
  }

  /// The step of kernel `k` (`group`'s, or its pool's, in layout `layout`)
  /// on `ids` (else the group's inputs and outputs) that a kernel of
  /// CompileOptions::sharedKernels computes, if one does.
  bool addSharedKernelStep(const FusionGroup &group, const Kernel &k, const std::string &layout,
                           std::vector<int32_t> ids = {}) {
    auto use = options_.sharedKernels
                   ? findSharedKernel(*options_.sharedKernels, group, k, layout, options_.dims)
                   : std::nullopt;
    if (!use)
      return false;
    const bool ownBuffers = ids.empty();
    if (ownBuffers)
      ids = buffersOf(group.inputs, group.outputs);
    // In place, as the group's own kernel would be (SharedKernel::inPlace).
    runtime::KernelFn fn = use->kernel->fn;
    std::shared_ptr<const runtime::KernelObject> object = use->kernel->object;
    std::vector<std::pair<int32_t, int32_t>> inPlace;
    if (const Value *dying = ownBuffers ? inPlaceCandidate(group, k) : nullptr) {
      const auto in =
          std::find(group.inputs.begin(), group.inputs.end(), dying) - group.inputs.begin();
      for (const SharedKernel::InPlace &p : use->kernel->inPlace)
        if (p.input == in) {
          fn = p.fn;
          object = p.object;
          inPlace.emplace_back(ids[group.inputs.size()], ids[static_cast<size_t>(in)]);
        }
    }
    Schedule schedule = detail::threadSchedule(use->numOuter, use->inner);
    exe_->addKernelStep(k.name, fn, std::move(ids), static_cast<int32_t>(k.inputs.size()),
                        use->numOuter, schedule.parallel, schedule.grain, inPlace, object);
    exe_->setKernelSizes(exe_->steps().size() - 1, use->sizes);
    if (options_.emitKernels)
      report_.kernels += use->kernel->text + "\n";
    ++report_.numKernels;
    ++report_.numSharedKernels;
    return true;
  }

  /// A step running kernel `k` on buffers `ids` (its inputs, then its
  /// outputs), compiled with the others at the end (compileKernels).
  void addKernelStep(Kernel k, Schedule schedule, const std::vector<int32_t> &ids,
                     int32_t numInputs, const std::vector<std::pair<int32_t, int32_t>> &inPlace,
                     cpu::CpuJit *jit) {
    schedule = detail::threadSchedule(k.numOuter(), k.inner, schedule);
    if (options_.emitKernels)
      report_.kernels += k.str() + "\n";
    if (options_.emitLLVM || options_.emitLLVMOptimized) {
      auto ir = jit->emitLLVM(k, schedule, options_.emitLLVMOptimized, diag_);
      if (ir.succeeded())
        report_.llvm += *ir + "\n";
    }
    pending_.push_back({std::move(k), schedule, exe_->steps().size()});
    const PendingKernel &p = pending_.back();
    exe_->addKernelStep(p.kernel.name, nullptr, ids, numInputs, p.kernel.numOuter(),
                        p.schedule.parallel, p.schedule.grain, inPlace, nullptr);
  }

  /// A max_pool or avg_pool between channels-last buffers as a kernel
  /// (Note [Pools as kernels] in PoolKernel.cpp), the rest of its group as
  /// a kernel after it; false when the group is not such a pool.
  bool addPoolKernel(const FusionGroup &group, const cpu::OneDnnOptions &dnnl, cpu::CpuJit *jit) {
    const Node *n = group.nodes.front();
    if (!options_.useKernels || !jit ||
        (n->kind() != OpKind::MaxPool && n->kind() != OpKind::AvgPool) ||
        !channelsLast_.count(n->operand(0)) || !dnnl.channelsLast(n->result()))
      return false;
    std::string why;
    auto kernel = detail::channelsLastPoolKernel(*n, why);
    if (failed(kernel))
      return false;
    kernelNames_ += (kernelNames_.empty() ? "" : ", ") + kernel->name;
    const std::vector<int32_t> ids{bufferOf(n->operand(0)), bufferOf(n->result())};
    if (!addSharedKernelStep(group, *kernel, kPoolLayout, ids)) {
      addKernelStep(std::move(*kernel), Schedule(), ids, 1, {}, jit);
      ++report_.numKernels;
    }
    channelsLast_.insert(n->result());
    if (group.nodes.size() > 1)
      addEpilogueKernel(group, 1, jit);
    return true;
  }

  /// Compiles every kernel step added so far, on as many threads as the
  /// machine has (Note [Parallel kernel compiles] in
  /// codegen/cpu/CpuJit.cpp), and gives the steps their code. A JIT
  /// failure is an error naming the kernel.
  LogicalResult compileKernels(cpu::CpuJit *jit) {
    if (pending_.empty())
      return success();
    // Note [Kernels shared across shapes] in KernelSharing.cpp.
    std::vector<const Kernel *> kernels;
    std::vector<Schedule> schedules;
    for (const PendingKernel &p : pending_) {
      kernels.push_back(&p.kernel);
      schedules.push_back(p.schedule);
    }
    const std::vector<ShapeSharedKernel> shared = options_.shareKernels
                                                      ? shareAcrossShapes(kernels, schedules)
                                                      : std::vector<ShapeSharedKernel>{};
    // Per pending kernel: its job, and the sizes it passes.
    std::vector<size_t> jobOf(pending_.size(), SIZE_MAX);
    std::vector<const std::vector<int64_t> *> sizesOf(pending_.size(), nullptr);
    std::vector<cpu::KernelJob> jobs;
    for (const ShapeSharedKernel &s : shared) {
      for (size_t m = 0; m < s.members.size(); ++m) {
        jobOf[s.members[m]] = jobs.size();
        sizesOf[s.members[m]] = &s.sizes[m];
      }
      jobs.push_back({&s.kernel, pending_[s.members.front()].schedule});
    }
    for (size_t i = 0; i < pending_.size(); ++i)
      if (jobOf[i] == SIZE_MAX) {
        jobOf[i] = jobs.size();
        jobs.push_back({&pending_[i].kernel, pending_[i].schedule});
      }
    auto fns = jit->compileAll(jobs, cpu::compileThreads(), diag_);
    if (failed(fns))
      return failure();
    for (size_t i = 0; i < pending_.size(); ++i) {
      runtime::KernelFn fn = (*fns)[jobOf[i]];
      exe_->setKernelCode(pending_[i].step, fn, jit->objectOf(fn));
      if (sizesOf[i]) {
        exe_->setKernelSizes(pending_[i].step, *sizesOf[i]);
        ++report_.numSharedKernels;
      }
    }
    pending_.clear();
    return success();
  }

  void addLibraryGroup(const FusionGroup &group, cpu::CpuJit *jit) {
    if (!options_.useLibraries) {
      for (const Node *n : group.nodes)
        addFallback(n, "library ops are disabled");
      return;
    }
    cpu::OneDnnOptions dnnl;
    dnnl.layout = options_.dnnlLayout;
    dnnl.recurrent = options_.recurrent;
    dnnl.threads = options_.threads;
    // Values of this group: predicted; others: as stored. See Note
    // [Channels-last buffers].
    dnnl.channelsLast = [&](const Value *v) {
      const Node *def = v->definingNode();
      if (def && std::find(group.nodes.begin(), group.nodes.end(), def) != group.nodes.end())
        return detail::isChannelsLastAnchor(group.nodes.front()) && channelsLastPlan_.predict(v);
      return channelsLast_.count(v) > 0;
    };
    if (cpu::isAttentionGroup(group.nodes)) {
      addAttentionGroup(group, dnnl, jit);
      return;
    }
    if (addPoolKernel(group, dnnl, jit))
      return;
    // A value the group exports must be a step's result: the library call
    // ends at the first node whose result leaves the group.
    size_t end = 1;
    while (end < group.nodes.size() &&
           std::find(group.outputs.begin(), group.outputs.end(), group.nodes[end - 1]->result()) ==
               group.outputs.end())
      ++end;
    std::span<const Node *const> nodes(group.nodes.data(), end);
    std::string why;
    auto call = cpu::buildOneDnnCall(nodes, dnnl, why);
    if (failed(call)) {
      for (const Node *n : group.nodes)
        addFallback(n, n == group.nodes.front()
                           ? why
                           : "its library anchor " + nodeName(group.nodes.front()) +
                                 " is not supported");
      return;
    }
    addLibraryCall(group, *call, dnnl);
    if (call->numNodes < group.nodes.size())
      addEpilogueKernel(group, call->numNodes, jit);
  }

  /// The step of `call` for the first call->numNodes nodes of `group`.
  void addLibraryCall(const FusionGroup &group, const cpu::OneDnnCall &call,
                      const cpu::OneDnnOptions &dnnl) {
    // An operand stored channels-last that the call reads row-major (a
    // matmul's, a broadcast post-op's) is given as its row-major twin.
    std::vector<int32_t> ids;
    const auto &cl = call.channelsLastOperands;
    for (const Value *v : call.operands)
      ids.push_back(std::count(cl.begin(), cl.end(), v) ? bufferOf(v) : rowMajorBufferOf(v));
    for (const Value *v : call.results)
      ids.push_back(bufferOf(v));
    exe_->addExternStep(call.step, ids, static_cast<int32_t>(call.operands.size()));
    for (const Value *v : call.results)
      if (dnnl.channelsLast(v))
        channelsLast_.insert(v);
    std::string line = nodeName(group.nodes.front());
    for (size_t i = 1; i < call.numNodes; ++i)
      line += "+" + nodeName(group.nodes[i]);
    line += ": " + call.detail;
    if (!call.measurement.empty())
      line += " (" + call.measurement + ")";
    report_.libraryCalls.push_back(line);
    ++report_.numLibraryCalls;
  }

  /// An attention group (Note [Attention calls] in codegen/Fusion.cpp) as
  /// one step; when oneDNN cannot, as the scores' call, a softmax kernel and
  /// the weighted sum's call, the reason in the scores' report line.
  void addAttentionGroup(const FusionGroup &group, const cpu::OneDnnOptions &dnnl,
                         cpu::CpuJit *jit) {
    std::string why;
    auto call = cpu::buildAttentionCall(group.nodes, dnnl, why);
    if (!failed(call)) {
      addLibraryCall(group, *call, dnnl);
      return;
    }
    const size_t n = group.nodes.size();
    FusionGroup scores, softmax, weighted;
    scores.kind = weighted.kind = FusionGroup::Kind::Library;
    scores.nodes.assign(group.nodes.begin(), group.nodes.end() - 2);
    scores.outputs = {group.nodes[n - 3]->result()};
    softmax.kind = FusionGroup::Kind::Kernel;
    softmax.nodes = {group.nodes[n - 2]};
    softmax.inputs = {group.nodes[n - 3]->result()};
    softmax.outputs = {group.nodes[n - 2]->result()};
    weighted.nodes = {group.nodes[n - 1]};
    weighted.outputs = group.outputs;
    const size_t calls = report_.libraryCalls.size();
    addLibraryGroup(scores, jit);
    if (report_.libraryCalls.size() > calls)
      report_.libraryCalls[calls] += " (attention as separate calls: " + why + ")";
    addKernelGroup(softmax, jit);
    addLibraryGroup(weighted, jit);
  }

  /// The epilogue nodes [first, end) of a library group that oneDNN did not
  /// take as post-ops, as one kernel (they are elementwise and chained).
  void addEpilogueKernel(const FusionGroup &group, size_t first, cpu::CpuJit *jit) {
    FusionGroup tail;
    tail.kind = FusionGroup::Kind::Kernel;
    tail.nodes.assign(group.nodes.begin() + static_cast<std::ptrdiff_t>(first), group.nodes.end());
    std::set<const Value *> produced;
    for (const Node *n : tail.nodes)
      for (unsigned r = 0; r < n->numResults(); ++r)
        produced.insert(n->result(r));
    for (const Node *n : tail.nodes)
      for (const Value *v : n->operands())
        if (!produced.count(v) &&
            std::find(tail.inputs.begin(), tail.inputs.end(), v) == tail.inputs.end())
          tail.inputs.push_back(v);
    for (const Node *n : tail.nodes)
      for (unsigned r = 0; r < n->numResults(); ++r) {
        const Value *v = n->result(r);
        bool outside = graphOutputs_.count(v) > 0;
        for (const Use &u : v->uses())
          outside |= std::find(tail.nodes.begin(), tail.nodes.end(), u.user) == tail.nodes.end();
        if (outside)
          tail.outputs.push_back(v);
      }
    addKernelGroup(tail, jit);
  }

private:
  /// Whether no later group reads `v` (a value no other group reads is
  /// internal to the current one).
  bool diesInCurrentGroup(const Value *v) const {
    auto it = lastReader_.find(v);
    return it == lastReader_.end() || it->second == group_;
  }

  /// An input of `group` its one output can overwrite. See Note [In-place
  /// kernels].
  const Value *inPlaceCandidate(const FusionGroup &group, const Kernel &kernel) {
    if (group.outputs.size() != 1 || graphOutputs_.count(group.outputs[0]))
      return nullptr;
    for (size_t i = 0; i < group.inputs.size(); ++i) {
      const Value *v = group.inputs[i];
      const Node *def = v->definingNode();
      auto it = buffers_.find(v);
      const auto readers = readerGroups_.find(v);
      const bool soleReader = readers != readerGroups_.end() && readers->second == 1;
      if (def && def->kind() != OpKind::Constant && !graphOutputs_.count(v) &&
          it != buffers_.end() && diesInCurrentGroup(v) && (soleReader || options_.threads == 1) &&
          canWriteInPlace(kernel, 0, static_cast<int32_t>(i)))
        return v;
    }
    return nullptr;
  }

  /// A channel concat whose operands are all stored channels-last, as one
  /// oneDNN concat writing a channels-last result. See Note [Channels-last
  /// buffers].
  bool addChannelsLastConcat(const FusionGroup &group) {
    if (!options_.useLibraries || group.nodes.size() != 1 ||
        !channelsLastPlan_.isChannelConcat(group.nodes.front()))
      return false;
    const Node *n = group.nodes.front();
    for (const Value *v : n->operands())
      if (!channelsLast_.count(v))
        return false;
    std::string why;
    auto step = cpu::makeChannelsLastConcatStep(*n, why);
    if (!step)
      return false;
    std::vector<const Value *> args(n->operands().begin(), n->operands().end());
    args.push_back(n->result());
    exe_->addExternStep(step, buffersOf(args), static_cast<int32_t>(n->numOperands()));
    channelsLast_.insert(n->result());
    report_.libraryCalls.push_back(nodeName(n) + ": concat on channels-last buffers");
    ++report_.numLibraryCalls;
    return true;
  }

  /// A kernel group that only concatenates (many operands) and reshapes,
  /// as copies. See Note [Concat as copies].
  bool addCopyConcat(const FusionGroup &group) {
    if (!options_.useKernels)
      return false; // --no-kernels: every kernel group on reference kernels
    auto match = detail::matchCopyConcat(group, !options_.sharedKernels);
    if (!match)
      return false;
    const Value *out = group.outputs.front();
    const auto elem = static_cast<int64_t>(dtypeSize(out->type().dtype));
    std::vector<runtime::CopyStep::Run> runs;
    for (const detail::CopyConcat::Run &r : match->runs)
      runs.push_back({r.source, r.from * elem, r.to * elem, r.count * elem});
    std::vector<int32_t> ids;
    for (const Value *v : match->sources)
      ids.push_back(rowMajorBufferOf(v));
    ids.push_back(bufferOf(out));
    const auto numSources = static_cast<int32_t>(match->sources.size());
    exe_->addExternStep(
        std::make_shared<runtime::CopyStep>("copy %" + out->name(), numSources, std::move(runs)),
        ids, numSources);
    ++report_.numKernels; // Kiln's own code, like a kernel (Note [Concat as copies])
    return true;
  }

  const CompileOptions &options_;
  DiagnosticEngine &diag_;
  CompileReport &report_;
  std::unique_ptr<runtime::Executable> exe_;
  const detail::ChannelsLastPlan channelsLastPlan_;
  std::unordered_map<const Value *, int32_t> buffers_;
  std::set<const Value *> graphOutputs_;
  std::unordered_map<const Value *, size_t> lastReader_;
  /// How many groups read each value.
  std::unordered_map<const Value *, size_t> readerGroups_;
  /// Constant nodes by the last group touching them, latest first.
  std::vector<std::pair<size_t, Node *>> releaseOrder_;
  /// Nodes run on reference kernels by addEmptyGroup (each once).
  std::set<const Node *> emptyFallbacks_;
  const Node *firstEmpty_ = nullptr;
  /// The kernels compiled, and whether --debug-fault-kernel named one.
  std::string kernelNames_;
  /// Kernel steps added without code yet (compileKernels).
  struct PendingKernel {
    Kernel kernel;
    Schedule schedule;
    size_t step;
  };
  std::deque<PendingKernel> pending_;
  bool faultPlanted_ = false;
  /// Values stored channels-last, and their row-major twins.
  std::set<const Value *> channelsLast_;
  std::unordered_map<const Value *, int32_t> rowMajorTwin_;
  size_t group_ = 0;
};

/// Plans the arena of `exe` (codegen/MemoryPlan.h) and finalizes it.
LogicalResult planAndFinalize(runtime::Executable &exe, CompileReport &report,
                              DiagnosticEngine &diag) {
  const auto &buffers = exe.buffers();
  std::vector<runtime::BufferLifetime> life = exe.lifetimes();
  std::vector<LiveInterval> intervals(buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i)
    if (exe.isArenaBuffer(static_cast<int32_t>(i)))
      intervals[i] = LiveInterval{buffers[i].byteSize(), life[i].first, life[i].last, -1};
  for (const runtime::Step &s : exe.steps())
    for (auto [written, read] : s.inPlace)
      intervals[static_cast<size_t>(written)].reuses = read;
  MemoryPlan plan = planMemory(intervals);
  runtime::Status st = exe.finalize(plan.arenaBytes, plan.offsets);
  if (!st.ok())
    return diag.emitError(Location()) << "internal error: the memory plan is unsafe: " << st.error;

  MemoryReport &m = report.memory;
  m.arenaBytes = plan.arenaBytes;
  m.lowerBound = plan.lowerBound;
  m.naiveBytes = plan.naiveBytes;
  m.outputBytes = exe.outputBlockBytes();
  m.constantBytes = exe.constantBytes();
  m.peakStep = plan.peakStep;
  for (const runtime::Step &s : exe.steps())
    m.inPlace += static_cast<int>(s.inPlace.size());
  m.buffers.clear();
  for (size_t i = 0; i < buffers.size(); ++i) {
    const runtime::BufferDesc &b = buffers[i];
    if (b.kind != runtime::BufferDesc::Kind::Temp)
      continue;
    MemoryReport::Buffer rb;
    rb.name = b.name;
    rb.inArena = b.placement == runtime::BufferDesc::Placement::Arena;
    rb.offset = b.offset;
    rb.bytes = b.byteSize();
    rb.first = life[i].first;
    rb.last = life[i].last;
    if (intervals[i].reuses >= 0)
      rb.inPlaceOf = buffers[static_cast<size_t>(intervals[i].reuses)].name;
    m.buffers.push_back(std::move(rb));
  }
  return success();
}

bool isEmptyValue(const Value *v) {
  return numElements(staticSizes(v->type().shape)) == 0;
}

/// Whether a group reads or writes a tensor of zero elements.
bool touchesEmptyTensor(const FusionGroup &group) {
  auto anyResultEmpty = [](const std::vector<const Node *> &nodes) {
    for (const Node *n : nodes)
      for (unsigned i = 0; i < n->numResults(); ++i)
        if (isEmptyValue(n->result(i)))
          return true;
    return false;
  };
  return std::any_of(group.inputs.begin(), group.inputs.end(), isEmptyValue) ||
         std::any_of(group.outputs.begin(), group.outputs.end(), isEmptyValue) ||
         anyResultEmpty(group.nodes) || anyResultEmpty(group.recomputed);
}

} // namespace

FailureOr<std::unique_ptr<runtime::Executable>>
buildExecutable(std::shared_ptr<Graph> g, const FusionPlan &fusion, const cpu::CpuTarget &cpuTarget,
                const CompileOptions &options, DiagnosticEngine &diag, CompileReport &report) {
  const FusionPlan *plan = &fusion;
  const cpu::CpuTarget *target = &cpuTarget;
  // 4. Steps.
  std::shared_ptr<cpu::CpuJit> jit;
  const bool needsJit =
      options.useKernels && std::any_of(plan->groups.begin(), plan->groups.end(), [](auto &grp) {
        // Library groups too: epilogue nodes oneDNN does not take run as a
        // kernel.
        return grp.kind != FusionGroup::Kind::Fallback;
      });
  if (needsJit) {
    cpu::CpuJitOptions jitOptions;
    jitOptions.target = *target;
    jitOptions.optLevel = options.optLevel;
    jitOptions.dumpDir = options.dumpDir;
    auto created = cpu::CpuJit::create(jitOptions, diag);
    if (failed(created))
      return failure();
    jit = *created;
  }
  {
    // "x86_64-pc-linux-gnu, cpu haswell, vector math ...", without the
    // feature list.
    std::string jitTarget = jit ? jit->targetDescription() : "cpu " + target->cpu;
    jitTarget = jitTarget.substr(0, jitTarget.find(", features"));
    report.target = "--cpu " + target->requested + " (" + jitTarget +
                    (!options.useLibraries ? ""
                     : target->native      ? ", oneDNN ISA uncapped"
                                           : ", oneDNN ISA " + cpu::oneDnnIsaFor(*target)) +
                    ")";
  }
  // Nodes of the groups emitted so far (an empty group computes the nodes
  // it recomputes unless one of these wrote them already).
  std::set<const Node *> emitted;
  ExecutableBuilder builder(*g, *plan, options, diag, report);
  builder.addInputs(*g);
  double kernelSeconds = 0, librarySeconds = 0, fallbackSeconds = 0, regionSeconds = 0;
  for (size_t gi = 0; gi < plan->groups.size(); ++gi) {
    const FusionGroup &group = plan->groups[gi];
    builder.beginGroup(gi);
    // Constants no later group reads: the steps hold what they need.
    struct Release {
      ExecutableBuilder &b;
      ~Release() { b.releaseConsumedConstants(); }
    } release{builder};
    const auto t0 = Clock::now();
    if (touchesEmptyTensor(group)) {
      builder.addEmptyGroup(group, emitted);
      emitted.insert(group.nodes.begin(), group.nodes.end());
      fallbackSeconds += secondsSince(t0);
      continue;
    }
    emitted.insert(group.nodes.begin(), group.nodes.end());
    switch (group.kind) {
    case FusionGroup::Kind::Kernel:
      builder.addKernelGroup(group, jit.get());
      kernelSeconds += secondsSince(t0);
      break;
    case FusionGroup::Kind::Library:
      builder.addLibraryGroup(group, jit.get());
      librarySeconds += secondsSince(t0);
      break;
    case FusionGroup::Kind::Fallback:
      for (const Node *n : group.nodes) {
        std::string why = group.reason.empty() ? "no kernel or library handles it" : group.reason;
        // Note [Compiled regions]. A nonzero gets here only with a static
        // recorded count (a `?` is refused by requireStatic): its reference
        // step checks the run's count against it.
        if (n->kind() == OpKind::If || n->kind() == OpKind::Loop) {
          const auto r0 = Clock::now();
          why = builder.addRegionStep(n);
          regionSeconds += secondsSince(r0);
          if (why.empty())
            continue;
        }
        const auto f0 = Clock::now();
        builder.addFallback(n, why);
        fallbackSeconds += secondsSince(f0);
      }
      break;
    }
  }
  builder.checkFaultPlanted();
  builder.warnEmptyGroups();
  {
    const auto t0 = Clock::now();
    if (jit && failed(builder.compileKernels(jit.get())))
      return failure();
    kernelSeconds += secondsSince(t0);
  }
  report.phases.emplace_back("kernels", kernelSeconds);
  report.phases.emplace_back("library", librarySeconds);
  if (fallbackSeconds > 0)
    report.phases.emplace_back("fallbacks", fallbackSeconds);
  // Compiling regions (each a model of its own) is a phase of its own.
  if (regionSeconds > 0)
    report.phases.emplace_back("regions", regionSeconds);
  const auto phase = Clock::now();

  // 5. Outputs, owners.
  std::vector<int32_t> outputs;
  for (const Value *v : g->outputs())
    outputs.push_back(builder.outputBufferOf(v));
  runtime::Executable &exe = builder.exe();
  exe.setOutputs(std::move(outputs));
  exe.setDefaultThreads(options.threads);
  runtime::TargetInfo targetInfo;
  targetInfo.requested = target->requested;
  targetInfo.cpu = target->cpu;
  targetInfo.features = target->features;
  targetInfo.dnnlIsa = options.useLibraries ? cpu::oneDnnIsaFor(*target) : "";
  exe.setTarget(std::move(targetInfo));
  exe.keepAlive(g);
  if (jit)
    exe.keepAlive(jit);
  if (options.sharedKernels && report.numSharedKernels > 0)
    exe.keepAlive(options.sharedKernels);
  if (failed(planAndFinalize(exe, report, diag)))
    return failure();
  // The steps hold what they read of the constants (buffers share the
  // tensors' bytes; oneDNN keeps its reordered weights), and reference
  // steps read operands from buffers, not from constant nodes: the kept
  // graph's copies would only double the model's memory.
  for (Node *n : g->nodes())
    if (n->kind() == OpKind::Constant)
      n->setAttr(ConstantOp::value_index, Attribute(Tensor()));
  report.phases.emplace_back("memory", secondsSince(phase));
  return builder.take();
}

} // namespace kiln::codegen
