//===- Staged.cpp - Graphs whose sizes a run decides ----------------------===//
//
// Note [Data-dependent shapes]
// Compiled code has static shapes (an executable's buffers and memory plan
// are sized at compile time), but some results are sized by their run:
// nonzero's count, the scan results of a loop whose trip count the run
// decides. A graph with such a node (after the pipeline: a nonzero of a
// constant folds away) is compiled in three stages:
//   1. the nodes before it, compiled as one executable whose outputs are
//      the values the rest reads;
//   2. the node itself, on its reference kernel, whose results give each of
//      their `?` dims a size;
//   3. the nodes after it, as a graph whose inputs are the values it reads
//      (the node's results with each `?` dim a symbol, `y_1` for dim 1 of
//      %y), compiled when a run first reaches it at those sizes, by
//      StagedModel::compile again (it may stage again at a later
//      data-dependent node), and kept per sizes (a bounded LRU; one compile
//      at a time). Where the node bounds a symbol (nonzero's count by its
//      operand's size, top_k's k by its axis), the first run compiles this
//      stage's kernels with run-time sizes once over 1..bound (Note
//      [Kernels with run-time sizes]), so a new count compiles no kernel:
//      masked_select's stage 3 took 33-65 ms per new count before, 1-5 ms
//      after a 55 ms compile of its 3 kernels (AVX2 host, one thread).
// Nothing fuses across the node, and a run whose count is new pays a
// compile of the third stage (the compile cache makes it a load when
// another process compiled those sizes). Stage 3 needs the compiler at run
// time, so a staged model is not saved as an artifact: `kiln compile -o`
// refuses it at the node.
//
//===----------------------------------------------------------------------===//
#include "codegen/Staged.h"

#include "codegen/RunTimeSizes.h"

#include "ir/Builder.h"
#include "ir/Extract.h"
#include "ir/Interpreter.h"
#include "ir/SizedByRun.h"

#include <algorithm>
#include <cstdio>
#include <list>
#include <map>
#include <mutex>
#include <set>

#include <omp.h>

namespace kiln::codegen {

const Node *firstDataDependent(const Graph &prepared) {
  for (const Node *n : prepared.nodes()) {
    bool operandsStatic = std::all_of(n->operands().begin(), n->operands().end(),
                                      [](const Value *v) { return v->type().isStatic(); });
    if (!operandsStatic)
      continue;
    for (unsigned r = 0; r < n->numResults(); ++r)
      if (!n->result(r)->type().isStatic())
        return n;
  }
  return nullptr;
}

bool mayStage(const Graph &g) {
  for (const Node *n : g.nodes())
    for (unsigned r = 0; r < n->numResults() && sizedByRun(n->info(), n->numOperands()); ++r)
      for (const Dim &d : n->result(r)->type().shape)
        if (d.isDynamic())
          return true;
  return false;
}

namespace {

/// The symbol stage 3 gives dim `d` of `v`: `y_1`, its characters other
/// than letters, digits and `_` replaced by `_`.
std::string symbolFor(const Value &v, size_t d) {
  std::string s = v.name() + "_" + std::to_string(d);
  for (char &c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_')
      c = '_';
  if (std::isdigit(static_cast<unsigned char>(s[0])))
    s = "v" + s;
  return s;
}

/// The largest size dim `d` of result `r` of `n` can have, when `n` bounds
/// it: nonzero's count by its operand's size, top_k's k by its axis; else 0.
int64_t sizeBound(const Node &n, unsigned r, size_t d) {
  const TensorType &x = n.operand(0)->type();
  if (!x.isStatic())
    return 0;
  if (n.kind() == OpKind::NonZero && r == 0 && d == 1)
    return numElements(staticSizes(x.shape));
  if (n.kind() == OpKind::TopK) {
    const int64_t axis = TopKOp(n).axis();
    return x.shape[static_cast<size_t>(axis < 0 ? axis + x.rank() : axis)].size();
  }
  return 0;
}

} // namespace

struct StagedModel::Impl {
  std::unique_ptr<runtime::Executable> whole;
  std::string stages;
  /// Stage 1 (null when nothing before the node is read after it) and the
  /// values it computes, by its outputs' order.
  std::unique_ptr<runtime::Executable> first;
  std::vector<const Value *> firstInputs, firstOutputs;
  /// Stage 2: the node as a graph (its constants inside), interpreted.
  std::unique_ptr<Graph> node;
  std::vector<const Value *> nodeInputs, nodeOutputs;
  /// Stage 3: the rest, and the symbols of its inputs: (node result, dim).
  std::unique_ptr<Graph> rest;
  std::vector<const Value *> restInputs;
  std::vector<std::pair<unsigned, size_t>> symbolDims;
  std::vector<std::string> symbols;
  /// Each symbol's largest size where the node bounds it (0: unbounded).
  std::map<std::string, int64_t> symbolMax;
  CompileOptions restOptions;
  /// The prepared graph the Value pointers above point into.
  std::unique_ptr<Graph> prepared;

  mutable std::mutex mutex, compileMutex;
  /// Stage 3's kernels with run-time sizes, compiled on the first run
  /// (null when they could not be).
  mutable bool sharedTried = false; // under compileMutex, as `shared`
  mutable std::shared_ptr<const SharedKernels> shared;
  /// Stage 3 per sizes, most recently used first.
  mutable std::list<std::pair<std::map<std::string, int64_t>, std::shared_ptr<const StagedModel>>>
      kept;
};

StagedModel::StagedModel() : impl_(std::make_unique<Impl>()) {}
StagedModel::~StagedModel() = default;

const runtime::Executable *StagedModel::whole() const {
  return impl_->whole.get();
}

const runtime::Executable *StagedModel::firstStage() const {
  return impl_->first.get();
}

int StagedModel::resolveThreads(int requested) const {
  if (const runtime::Executable *e = impl_->whole ? impl_->whole.get() : impl_->first.get())
    return e->resolveThreads(requested);
  return std::max(requested > 0 ? requested : omp_get_max_threads(), 1);
}

std::unique_ptr<runtime::Executable> StagedModel::takeWhole() {
  return std::move(impl_->whole);
}

const std::string &StagedModel::stages() const {
  return impl_->stages;
}

FailureOr<std::unique_ptr<StagedModel>> StagedModel::compile(const Graph &g,
                                                             const CompileOptions &options,
                                                             DiagnosticEngine &diag,
                                                             CompileReport *report) {
  std::unique_ptr<StagedModel> model(new StagedModel());
  Impl &m = *model->impl_;
  // The others compile whole without preparing twice.
  const Node *at = nullptr;
  if (mayStage(g)) {
    CompileOptions o = options;
    o.ranges.clear();
    auto prepared = preparePipeline(g.clone(), o, diag);
    if (failed(prepared))
      return failure();
    m.prepared = prepared.take();
    at = firstDataDependent(*m.prepared);
  }
  if (!at) {
    auto exe = codegen::compile(g, options, diag, report);
    if (failed(exe))
      return failure();
    m.whole = exe.take();
    return model;
  }
  const Graph &pg = *m.prepared;
  for (const Value *v : pg.inputs())
    if (!v->type().isStatic())
      return diag.emitError(at->loc())
             << "'" << at->mnemonic() << "' op: a graph sized by its run is compiled in stages at "
             << "concrete input sizes, but input %" << v->name() << " is " << v->type().str();

  // Which values each stage reads.
  std::vector<const Node *> before, after;
  bool seen = false;
  for (const Node *n : pg.nodes()) {
    if (n == at)
      seen = true;
    else
      (seen ? after : before).push_back(n);
  }
  std::set<const Value *> readLater(pg.outputs().begin(), pg.outputs().end());
  for (const Node *n : after)
    readLater.insert(n->operands().begin(), n->operands().end());
  readLater.insert(at->operands().begin(), at->operands().end());
  for (const Node *n : before)
    if (n->kind() != OpKind::Constant)
      for (unsigned r = 0; r < n->numResults(); ++r)
        if (readLater.count(n->result(r)))
          m.firstOutputs.push_back(n->result(r));

  CompileOptions staticOptions = options;
  staticOptions.dims.clear();
  staticOptions.ranges.clear();
  staticOptions.runTimeSizes = false;
  staticOptions.sharedKernels = nullptr;
  if (!m.firstOutputs.empty()) {
    auto first = extractNodes(pg.name() + ".before", before, m.firstOutputs, m.firstInputs, {},
                              /*reinfer=*/false);
    auto exe = codegen::compile(*first, staticOptions, diag, report);
    if (failed(exe))
      return failure();
    m.first = exe.take();
  }
  std::vector<const Value *> nodeResults;
  for (unsigned r = 0; r < at->numResults(); ++r)
    nodeResults.push_back(at->result(r));
  m.node =
      extractNodes(pg.name() + ".node", {at}, nodeResults, m.nodeInputs, {}, /*reinfer=*/false);
  m.nodeOutputs = nodeResults;

  std::map<const Value *, TensorType> retype;
  std::string sized;
  for (unsigned r = 0; r < at->numResults(); ++r) {
    TensorType t = at->result(r)->type();
    for (size_t d = 0; d < t.shape.size(); ++d)
      if (!t.shape[d].isStatic()) {
        m.symbolDims.emplace_back(r, d);
        // top_k's indices have the size of its values; other symbols differ.
        std::string sym = symbolFor(*at->result(at->kind() == OpKind::TopK ? 0 : r), d);
        if (at->kind() != OpKind::TopK)
          while (m.symbolMax.count(sym))
            sym += "_";
        m.symbols.push_back(sym);
        m.symbolMax[m.symbols.back()] = sizeBound(*at, r, d);
        t.shape[d] = Dim::symbolic(m.symbols.back());
      }
    retype[at->result(r)] = t;
    sized += (sized.empty() ? "" : ", ") + ("%" + at->result(r)->name()) + " : " +
             at->result(r)->type().str();
  }
  m.rest = extractNodes(pg.name(), after,
                        std::vector<const Value *>(pg.outputs().begin(), pg.outputs().end()),
                        m.restInputs, retype, /*reinfer=*/true);
  m.restOptions = staticOptions;
  m.restOptions.explain = m.restOptions.emitKernels = false;
  m.restOptions.emitLLVM = m.restOptions.emitLLVMOptimized = false;
  m.stages = "stages at %" + at->result(0)->name() + " ('" + std::string(at->mnemonic()) + "' at " +
             at->loc().diagPrefix() + "): " + sized +
             " is sized by its run; the nodes after it are compiled when a run gives those sizes";
  return model;
}

std::shared_ptr<const StagedModel> StagedModel::restFor(const std::map<std::string, int64_t> &sizes,
                                                        DiagnosticEngine &diag,
                                                        std::vector<std::string> *log) const {
  const Impl &m = *impl_;
  auto lookup = [&]() -> std::shared_ptr<const StagedModel> {
    std::lock_guard<std::mutex> lock(m.mutex);
    auto hit =
        std::find_if(m.kept.begin(), m.kept.end(), [&](const auto &e) { return e.first == sizes; });
    if (hit == m.kept.end())
      return nullptr;
    m.kept.splice(m.kept.begin(), m.kept, hit);
    return hit->second;
  };
  if (auto hit = lookup())
    return hit;
  // One compile at a time; runs at sizes compiled already go on meanwhile.
  std::lock_guard<std::mutex> one(m.compileMutex);
  if (auto hit = lookup()) // another thread compiled it meanwhile
    return hit;
  const std::string after = "the nodes after %" + m.nodeOutputs[0]->name();
  if (!m.sharedTried) { // Note [Data-dependent shapes]: kernels once for every size
    m.sharedTried = true;
    std::vector<SymbolRange> ranges;
    for (const auto &[name, max] : m.symbolMax)
      if (max > 0)
        ranges.push_back({name, 1, max});
    Diagnostic why;
    if (ranges.size() == m.symbolMax.size()) {
      m.shared = tryCompileSharedKernels(*m.rest, ranges, m.restOptions, why);
      if (log && m.shared)
        log->push_back(after + ": run-time sizes: " + sharedKernelsStr(*m.shared) + " in " +
                       std::to_string(static_cast<int>(m.shared->seconds * 1e3)) + " ms");
    }
  }
  std::string at;
  for (const auto &[name, n] : sizes)
    at += (at.empty() ? "" : ", ") + name + "=" + std::to_string(n);
  CompileOptions o = m.restOptions;
  o.dims = sizes;
  o.sharedKernels = m.shared;
  CompileReport report;
  auto compiled = StagedModel::compile(*m.rest, o, diag, &report);
  if (failed(compiled)) {
    diag.emitError(m.nodeOutputs[0]->definingNode()->loc())
        << "compiling " << after << " for " << at << " failed";
    return nullptr;
  }
  std::shared_ptr<const StagedModel> rest(compiled.take());
  if (log) {
    const MemoryReport &mem = report.memory;
    char ratio[64];
    std::snprintf(ratio, sizeof(ratio), "%.3f",
                  mem.lowerBound
                      ? static_cast<double>(mem.arenaBytes) / static_cast<double>(mem.lowerBound)
                      : 1.0);
    log->push_back(after + " compiled for " + at + ": " + report.summary() + "; arena " +
                   std::to_string(mem.arenaBytes) + " bytes, arena / lower bound " + ratio +
                   " (plan checked)");
  }
  std::lock_guard<std::mutex> lock(m.mutex);
  m.kept.emplace_front(sizes, rest);
  if (m.kept.size() > kMaxKept)
    m.kept.pop_back();
  return rest;
}

FailureOr<std::vector<Tensor>> StagedModel::run(std::span<const Tensor> inputs,
                                                DiagnosticEngine &diag,
                                                const runtime::RunOptions &options,
                                                std::vector<std::string> *log) const {
  const Impl &m = *impl_;
  if (m.whole)
    return runCompiled(*m.whole, inputs, diag, options);
  if (!m.node) // its whole executable was taken out
    return diag.emitError(Location()) << "this compiled model's executable was taken out";
  const Graph &pg = *m.prepared;
  if (failed(checkInputs(pg, inputs, diag)))
    return failure();
  std::map<const Value *, Tensor> values;
  for (unsigned i = 0; i < pg.numInputs(); ++i)
    values.emplace(pg.input(i), inputs[i]);
  auto feed = [&](const std::vector<const Value *> &wanted) {
    std::vector<Tensor> out;
    for (const Value *v : wanted)
      out.push_back(values.at(v));
    return out;
  };
  auto keep = [&](const std::vector<const Value *> &names, std::vector<Tensor> &got) {
    for (size_t i = 0; i < names.size(); ++i)
      values.insert_or_assign(names[i], std::move(got[i]));
  };
  if (m.first) {
    auto outs = runCompiled(*m.first, feed(m.firstInputs), diag, options);
    if (failed(outs))
      return failure();
    keep(m.firstOutputs, *outs);
  }
  auto nodeOuts = interpret(*m.node, feed(m.nodeInputs), diag);
  if (failed(nodeOuts))
    return failure();
  keep(m.nodeOutputs, *nodeOuts);

  std::map<std::string, int64_t> sizes;
  for (size_t k = 0; k < m.symbols.size(); ++k) {
    const auto [r, d] = m.symbolDims[k];
    sizes[m.symbols[k]] = values.at(m.nodeOutputs[r]).shape()[d];
  }
  std::shared_ptr<const StagedModel> rest = restFor(sizes, diag, log);
  if (!rest)
    return failure();
  return rest->run(feed(m.restInputs), diag, options, log);
}

} // namespace kiln::codegen
