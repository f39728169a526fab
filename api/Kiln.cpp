//===- Kiln.cpp - The embedding API's compiler half ----------------------===//
//
// Thin: Model holds the imported module; compile() makes an Executable
// (api/Executable.cpp, the runtime half) of one compiled size or of a
// PerSize specializer. Diagnostics of the importer and the compiler are
// collected and thrown as one kiln::Error.
//
// Note [Compiling per size]
// An executable has static shapes (codegen binds every symbol before
// lowering; only kernels can take sizes at run time). An Executable
// compiled with symbols left unbound therefore keeps a copy of the graph
// and compiles it for each run's sizes:
//   1. bindInputs (the interpreter's own check) gives the symbols' sizes
//      from the inputs, or one error naming the inputs that disagree,
//      including on dims the graph assumes equal (two batch symbols that
//      broadcast; collected once, Note [Assumed equal dims]);
//   2. the sizes are checked against CompileOptions::dims and ::ranges;
//   3. a specialization for those sizes is looked up (LRU, bounded by
//      maxSpecializations) or compiled (one compile at a time; the line
//      onSpecialize gets says which sizes and why) and then run.
// Before the first specialization, the kernels that can take their sizes
// at run time are compiled once for the symbols' ranges (compileShared,
// Note [Kernels with run-time sizes] in codegen/RunTimeSizes.cpp); a
// specialization inside the ranges runs them and compiles only the rest
// (kernels that stay per size, oneDNN calls, the memory plan). The compile
// cache makes a specialization compiled before by another process a load.
// oneDNN primitives are therefore made per concrete shape, on a size's
// first run, and kept in the bounded LRU of specializations; not with
// oneDNN's run-time dims (DNNL_RUNTIME_DIM_VAL), which only its matmul
// takes (convolution and pooling need their shapes at creation) and which
// oneDNN documents as slower the less is known at creation. Measured
// (bench/DYNAMIC.md): resnet18 at a new batch of 64 compiles in 63 ms, 28
// ms of it for its 21 oneDNN calls, against 2.1 s for one run there.
//
//===----------------------------------------------------------------------===//
#include "kiln/kiln.h"

#include "api/ExecutableImpl.h"

#include "codegen/Compiler.h"
#ifdef KILN_HAS_CUDA
#include "codegen/CudaProgram.h"
#endif
#ifdef KILN_HAS_MLIR
#include "codegen/mlir/MlirExport.h"
#include "passes/PassManager.h"
#endif
#include "codegen/RunTimeSizes.h"
#include "codegen/Staged.h"
#include "codegen/SymbolicArtifact.h"
#include "frontend/onnx/OnnxImporter.h"
#include "ir/Graph.h"
#include "ir/Parser.h"
#include "runtime/artifact/Artifact.h"

#include "ir/Interpreter.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <list>
#include <mutex>
#include <set>

namespace kiln {
namespace {

/// Collects the diagnostics of one call and throws its errors as one Error.
class Collect {
public:
  DiagnosticEngine &diag() { return diag_; }
  /// Throws the errors collected (their messages prefixed with `context`
  /// and ": " when it is not empty), or `fallback` when there are none.
  [[noreturn]] void raise(const std::string &fallback, const std::string &context = "") {
    std::vector<Diagnostic> errors;
    for (const Diagnostic &d : collector_.diagnostics())
      if (d.severity == Severity::Error) {
        errors.push_back(d);
        if (!context.empty())
          errors.back().message = context + ": " + d.message;
      }
    if (errors.empty())
      throw Error(context.empty() ? fallback : context + ": " + fallback);
    throw Error(std::move(errors));
  }

private:
  DiagnosticEngine diag_;
  ScopedDiagnosticCollector collector_{diag_};
};

/// A graph's inputs or outputs as ports (symbolic dims as -1).
std::vector<PortInfo> portsOf(const std::vector<Value *> &values) {
  std::vector<PortInfo> out;
  for (const Value *v : values) {
    PortInfo p{v->name(), v->type().dtype, {}};
    for (const Dim &d : v->type().shape)
      p.shape.push_back(d.isStatic() ? d.size() : -1);
    out.push_back(std::move(p));
  }
  return out;
}

} // namespace

struct Model::Impl {
  std::unique_ptr<Module> module;
  std::unique_ptr<Graph> owned;
  Graph *graph = nullptr;
  /// A symbolic artifact's options as compiled (sharedKernels set) and its
  /// symbols no --dim named (codegen/SymbolicArtifact.h).
  std::optional<codegen::CompileOptions> symbolic;
  /// The file it was read from (empty for a traced graph).
  std::string path;
};

Model::Model() : impl_(std::make_unique<Impl>()) {}
Model::Model(Model &&) noexcept = default;
Model &Model::operator=(Model &&) noexcept = default;
Model::~Model() = default;

Model Model::load(const std::string &path, const std::map<std::string, int64_t> &dims) {
  Collect c;
  FailureOr<std::unique_ptr<Module>> module = failure();
  if (runtime::isSymbolicArtifactFile(path)) {
    if (!dims.empty())
      throw Error("cannot load '" + path +
                  "' with dims: a symbolic artifact takes its sizes "
                  "from CompileOptions::dims or from each run's inputs");
    auto sym = codegen::loadSymbolicArtifact(path, c.diag());
    if (failed(sym))
      c.raise("cannot load '" + path + "'");
    Model m;
    m.impl_->module = std::move(sym->module);
    m.impl_->graph = sym->graph;
    m.impl_->symbolic = std::move(sym->options);
    m.impl_->path = path;
    return m;
  }
  if (isOnnxPath(path)) {
    OnnxImportOptions options;
    options.dimBindings = dims;
    module = importOnnx(path, c.diag(), options);
  } else {
    module = parseFile(path, c.diag());
  }
  if (failed(module))
    c.raise("cannot load '" + path + "'");
  if ((*module)->graphs().empty())
    throw Error("'" + path + "' has no graph");
  Model m;
  m.impl_->module = module.take();
  m.impl_->graph = m.impl_->module->graphs().front().get();
  m.impl_->path = path;
  return m;
}

Model Model::fromGraph(std::unique_ptr<Graph> graph) {
  if (!graph)
    throw Error("Model::fromGraph: no graph");
  Model m;
  m.impl_->graph = graph.get();
  m.impl_->owned = std::move(graph);
  return m;
}

const Graph &Model::graph() const {
  return *impl_->graph;
}

std::vector<PortInfo> Model::inputs() const {
  return portsOf(impl_->graph->inputs());
}

std::vector<PortInfo> Model::outputs() const {
  return portsOf(impl_->graph->outputs());
}

namespace {

/// A model compiled in stages (codegen/Staged.h).
class Staged final : public StagedRunner {
public:
  Staged(const Graph &g, std::unique_ptr<codegen::StagedModel> model)
      : model_(std::move(model)), inputs_(portsOf(g.inputs())), outputs_(portsOf(g.outputs())) {}
  std::vector<Tensor> run(std::span<const Tensor> inputs) const override {
    Collect c;
    auto outs = model_->run(inputs, c.diag());
    if (failed(outs))
      c.raise("the run failed");
    return outs.take();
  }
  std::string summary() const override { return "compiled in " + model_->stages(); }
  std::vector<PortInfo> inputs() const override { return inputs_; }
  std::vector<PortInfo> outputs() const override { return outputs_; }

private:
  std::unique_ptr<codegen::StagedModel> model_;
  std::vector<PortInfo> inputs_, outputs_;
};

/// Compiles `g`: whole, or in stages when its sizes are decided by its run
/// (Note [Data-dependent shapes] in codegen/Staged.cpp). A failure throws
/// an Error, prefixed with `context` (the sizes of a specialization) when
/// it is not empty.
Compiled compileGraph(const Graph &g, const codegen::CompileOptions &o,
                      const std::string &context = "") {
  Collect c;
  codegen::CompileReport report;
  auto model = codegen::StagedModel::compile(g, o, c.diag(), &report);
  if (failed(model))
    c.raise("cannot compile the model", context);
  Compiled out;
  if (!(*model)->whole()) {
    out.staged = std::make_shared<Staged>(g, model.take());
    out.info.summary = out.staged->summary();
    return out;
  }
  out.exe = std::shared_ptr<const runtime::Executable>((*model)->takeWhole());
  out.info = codegen::artifactInfo(codegen::GraphPorts::of(g), *out.exe, report, "");
  return out;
}

/// An Executable that compiles per size (Note [Compiling per size]).
class PerSize final : public Specializer {
public:
  PerSize(const Graph &g, codegen::CompileOptions options, const CompileOptions &api,
          std::set<std::string> symbols)
      : graph_(g.clone()), assumed_(dimAssumptions(*graph_)), options_(std::move(options)),
        ranges_(api.ranges), symbols_(std::move(symbols)),
        maxKept_(std::max<size_t>(api.maxSpecializations, 1)), log_(api.onSpecialize) {}

  /// The specialization for `inputs`' sizes, compiled on first use.
  std::shared_ptr<const Compiled> forInputs(std::span<const Tensor> inputs) const override {
    Sizes sizes = sizesOf(inputs);
    if (auto hit = lookup(sizes))
      return hit;
    std::lock_guard<std::mutex> one(compileMutex_);
    if (auto hit = lookup(sizes)) // another thread compiled it meanwhile
      return hit;
    size_t keptAfter = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      keptAfter = std::min(kept_.size() + 1, maxKept_);
    }
    if (!sharedTried_ && options_.sharedKernels) { // loaded (a symbolic artifact)
      sharedTried_ = true;
      shared_ = options_.sharedKernels;
    }
    if (!sharedTried_)
      compileShared();
    std::string line = "kiln: compiling for " + sizesStr(sizes) +
                       ": no specialization for these sizes yet (" + std::to_string(keptAfter) +
                       " of at most " + std::to_string(maxKept_) + " kept)";
    if (size_t n = sharedFor(sizes))
      line += "; its kernels with run-time sizes (" + std::to_string(n) + ") are compiled already";
    say(line);
    codegen::CompileOptions o = options_;
    o.sharedKernels = shared_;
    for (const auto &[name, size] : sizes)
      o.dims[name] = size;
    auto compiled = std::make_shared<const Compiled>(
        compileGraph(*graph_, o, "compiling for " + sizesStr(sizes)));
    std::lock_guard<std::mutex> lock(mutex_);
    kept_.emplace_back(sizes, compiled);
    if (kept_.size() > maxKept_)
      kept_.pop_front();
    return compiled;
  }

  std::vector<PortInfo> inputs() const override { return portsOf(graph_->inputs()); }
  std::vector<PortInfo> outputs() const override { return portsOf(graph_->outputs()); }

  /// Note [Symbolic artifacts] in codegen/SymbolicArtifact.cpp: the graph as
  /// the file stores it, with its kernels compiled from that graph (kernel
  /// names come from value names), unless they were (a loaded artifact's).
  void saveSymbolic(const std::string &path) const override {
    std::lock_guard<std::mutex> one(compileMutex_);
    Collect c;
    if (codegen::mayStage(*graph_))
      throw Error("cannot save '" + path +
                  "' as a symbolic artifact: the model compiles in "
                  "stages, around sizes only a run decides");
    codegen::CompileOptions o = options_;
    std::set<std::string> open;
    for (const std::string &s : symbols_) {
      if (!ranges_.count(s))
        open.insert(s);
    }
    std::shared_ptr<const codegen::SharedKernels> shared = options_.sharedKernels;
    const Graph *g = graph_.get();
    FailureOr<std::unique_ptr<Module>> stored = failure();
    if (!shared) {
      stored = codegen::asStored(*graph_, c.diag());
      if (failed(stored))
        c.raise("cannot save '" + path + "' as a symbolic artifact");
      g = (*stored)->graphs().front().get();
      std::vector<codegen::SymbolRange> ranges;
      for (const codegen::SymbolRange &r : codegen::sharedRanges(*g, options_))
        if (symbols_.count(r.name))
          ranges.push_back(r);
      Diagnostic error;
      shared = codegen::tryCompileSharedKernels(*g, ranges, options_, error);
      if (!shared)
        throw Error("cannot save '" + path + "' as a symbolic artifact: " + error.located());
      o.ranges = ranges;
    }
    if (failed(codegen::saveSymbolicArtifact(*g, o, *shared, open, "", path, c.diag())))
      c.raise("cannot save '" + path + "' as a symbolic artifact");
  }

  KeptSizes keptCompiled() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return {kept_.begin(), kept_.end()};
  }

  std::string summary() const override {
    std::string names;
    for (const std::string &s : symbols_)
      names += (names.empty() ? "" : ", ") + s;
    std::lock_guard<std::mutex> lock(mutex_);
    std::string s = "compiles per size of " + names + "; " + std::to_string(kept_.size()) +
                    " specialization" + (kept_.size() == 1 ? "" : "s") + " kept";
    for (size_t i = 0; i < kept_.size(); ++i) {
      auto it = std::next(kept_.begin(), static_cast<std::ptrdiff_t>(i));
      s += (i ? "; " : " (") + sizesStr(it->first) + ": " + it->second->info.summary;
    }
    return kept_.empty() ? s : s + ")";
  }

private:
  /// The unbound symbols' sizes in `inputs`, checked; throws Error.
  Sizes sizesOf(std::span<const Tensor> inputs) const {
    Collect c;
    auto bound = bindInputs(*graph_, inputs, c.diag(), assumed_);
    if (failed(bound))
      c.raise("the inputs do not fit the model");
    // "input 0 ('%ids') dim 1 gives seq = 9": the first input dim `name` is.
    auto given = [&](const std::string &name, int64_t size) {
      for (unsigned i = 0; i < graph_->numInputs(); ++i) {
        const Shape &shape = graph_->input(i)->type().shape;
        for (size_t d = 0; d < shape.size(); ++d)
          if (shape[d].isSymbolic() && shape[d].symbol() == name)
            return "input " + std::to_string(i) + " ('%" + graph_->input(i)->name() + "') dim " +
                   std::to_string(d) + " gives " + name + " = " + std::to_string(size);
      }
      return "the inputs give " + name + " = " + std::to_string(size);
    };
    Sizes sizes;
    for (const auto &[name, size] : *bound) {
      auto fixed = options_.dims.find(name);
      if (fixed != options_.dims.end()) {
        if (fixed->second != size)
          throw Error(given(name, size) + ", but the model was compiled with " + name + " = " +
                      std::to_string(fixed->second));
        continue;
      }
      auto range = ranges_.find(name);
      if (range != ranges_.end() && (size < range->second.min || size > range->second.max))
        throw Error(given(name, size) + ", outside its range " + std::to_string(range->second.min) +
                    ".." + std::to_string(range->second.max) +
                    (options_.sharedKernels
                         ? " (the symbolic artifact's)" // loaded with its kernels
                         : " (CompileOptions::ranges)"));
      sizes[name] = size;
    }
    return sizes;
  }

  void say(const std::string &line) const {
    if (log_)
      log_(line);
    else
      std::fprintf(stderr, "%s\n", line.c_str());
  }

  /// Note [Compiling per size], step 0: the kernels that take their sizes
  /// at run time, compiled once (codegen/RunTimeSizes.h) for the ranges of
  /// the symbols left open (codegen::sharedRanges); a failure leaves each
  /// size to compile all of its kernels, and says why.
  void compileShared() const {
    sharedTried_ = true;
    if (codegen::mayStage(*graph_)) // its stages share their own (codegen/Staged.cpp)
      return;
    for (const codegen::SymbolRange &r : codegen::sharedRanges(*graph_, options_))
      if (symbols_.count(r.name)) // the symbols not fixed in dims
        sharedRanges_.push_back(r);
    Diagnostic error;
    shared_ = codegen::tryCompileSharedKernels(*graph_, sharedRanges_, options_, error);
    if (!shared_) {
      say("kiln: every size compiles all of its kernels: " + error.located());
      return;
    }
    char secs[32];
    std::snprintf(secs, sizeof secs, " in %.2f s", shared_->seconds);
    std::string line = "kiln: run-time sizes: " + codegen::sharedKernelsStr(*shared_) + secs;
    for (const auto &[name, why] : shared_->perSize)
      line += "; " + name + " compiles per size: " + why;
    say(line);
  }

  /// How many shared kernels were merged for ranges that hold `sizes`.
  size_t sharedFor(const Sizes &sizes) const {
    if (!shared_)
      return 0;
    size_t n = 0;
    for (const auto &[name, k] : shared_->byName)
      n += std::all_of(k.ranges.begin(), k.ranges.end(), [&](const codegen::SymbolRange &r) {
        auto it = sizes.find(r.name);
        return it != sizes.end() && it->second >= r.min && it->second <= r.max;
      });
    return n;
  }

  std::shared_ptr<const Compiled> lookup(const Sizes &sizes) const {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = kept_.begin(); it != kept_.end(); ++it)
      if (it->first == sizes) {
        kept_.splice(kept_.end(), kept_, it); // most recently used last
        return kept_.back().second;
      }
    return nullptr;
  }

  std::unique_ptr<Graph> graph_;
  std::vector<DimAssumption> assumed_; // Note [Assumed equal dims] in ir/Interpreter.cpp
  codegen::CompileOptions options_;
  std::map<std::string, CompileOptions::Range> ranges_;
  std::set<std::string> symbols_;
  size_t maxKept_;
  std::function<void(const std::string &)> log_;
  mutable std::mutex mutex_;        // guards kept_
  mutable std::mutex compileMutex_; // one compile at a time
  mutable std::list<std::pair<Sizes, std::shared_ptr<const Compiled>>> kept_;
  // Set once, under compileMutex_.
  mutable bool sharedTried_ = false;
  mutable std::vector<codegen::SymbolRange> sharedRanges_;
  mutable std::shared_ptr<const codegen::SharedKernels> shared_;
};

/// The symbols of `g`'s input dims that `dims` leaves unbound.
std::set<std::string> unboundSymbols(const Graph &g, const Sizes &dims) {
  std::set<std::string> out;
  for (const std::string &s : inputSymbols(g))
    if (!dims.count(s))
      out.insert(s);
  return out;
}

/// True when an input dim is an anonymous `?` (no name to compile per).
bool hasAnonymousDim(const Graph &g) {
  for (const Value *v : g.inputs())
    for (const Dim &d : v->type().shape)
      if (d.isDynamic())
        return true;
  return false;
}

} // namespace

Executable compile(const Model &model, const CompileOptions &given) {
  CompileOptions options = given;
  codegen::CompileOptions o;
  o.threads = options.threads;
  o.cpu = options.cpu;
  o.dims = options.dims;
  o.fuse = options.fusion;
  o.useLibraries = options.libraries;
  o.cache = options.cache;
  if (const auto &symbolic = model.impl_->symbolic) { // Note [Symbolic artifacts]
    const CompileOptions d;
    if (options.cpu != d.cpu || options.fusion != d.fusion || options.libraries != d.libraries ||
        !options.ranges.empty())
      throw Error("compile: '" + model.impl_->path +
                  "' is a symbolic artifact, compiled for its "
                  "CPU, flags and ranges already; only the threads, the dims and how many "
                  "sizes to keep apply");
    std::string why;
    auto sized = codegen::withSizes(*symbolic, model.graph(), options.dims, options.threads, why);
    if (!sized)
      throw Error("compile: CompileOptions::dims " + why + " ('" + model.impl_->path + "')");
    o = std::move(*sized);
    o.cache = false; // Note [Symbolic artifacts]: a cache entry per size copies the constants
    options.dims = o.dims;
    for (const codegen::SymbolRange &r : o.ranges)
      options.ranges[r.name] = {r.min, r.max};
    o.ranges.clear(); // from options.ranges below
  }
  const Graph &g = model.graph();
  auto impl = std::make_shared<Executable::Impl>();
  std::set<std::string> unbound = unboundSymbols(g, options.dims);
  for (const auto &[name, range] : options.ranges)
    o.ranges.push_back({name, range.min, range.max});
  if (Collect c; failed(codegen::checkRanges(g, o, c.diag())))
    c.raise("the ranges do not fit the model", "CompileOptions::ranges");
  // An anonymous `?` has no size to compile for: compiling now names it.
  if (unbound.empty() || hasAnonymousDim(g))
    impl->one = std::make_shared<const Compiled>(compileGraph(g, o));
  else
    impl->perSize = std::make_unique<PerSize>(g, o, options, std::move(unbound));
  return Executable::Impl::wrap(std::move(impl));
}

void compileForCuda(const Model &model, const std::string &path,
                    const CudaCompileOptions &options) {
#ifdef KILN_HAS_CUDA
  const std::string what = "compileForCuda('" + path + "')";
  if (model.impl_->symbolic)
    throw Error(what + ": '" + model.impl_->path +
                "' is a symbolic artifact, compiled for a CPU already; compile its model");
  if (options.arch < 50)
    throw Error(what + ": CudaCompileOptions::arch = " + std::to_string(options.arch) +
                "; a compute capability as in sm_90 (50 or more)");
  const Graph &g = model.graph();
  const std::set<std::string> unbound = unboundSymbols(g, options.dims);
  if (!unbound.empty() || hasAnonymousDim(g)) {
    std::string names;
    for (const std::string &s : unbound)
      names += (names.empty() ? "" : ", ") + s;
    throw Error(what + ": a CUDA artifact is compiled for one size, and " +
                (names.empty()         ? std::string("an input has an unnamed dynamic dim")
                 : unbound.size() == 1 ? "the inputs' symbol " + names + " has none"
                                       : "the inputs' symbols " + names + " have none") +
                "; give each its size in CudaCompileOptions::dims");
  }
  codegen::CompileOptions o;
  o.dims = options.dims;
  o.fuse = options.fusion;
  o.useLibraries = options.libraries;
  Collect c;
  auto compiled = codegen::compileCudaModel(g, o, options.arch, c.diag());
  if (failed(compiled))
    c.raise("cannot compile the model for a GPU", what);
  std::string error;
  if (!runtime::cuda::saveCudaArtifact(
          codegen::cudaArtifactOf(std::move(*compiled), model.impl_->path), path, error))
    throw Error(what + ": " + error);
#else
  (void)model;
  (void)options;
  throw Error("compileForCuda('" + path + "'): " + kBuiltWithoutCuda);
#endif
}

std::string toMlir(const Model &model, const MlirOptions &options) {
  const std::string what = "toMlir('" + model.impl_->path + "')";
  if (model.impl_->symbolic)
    throw Error(what + ": a symbolic artifact holds compiled kernels; translate its model");
#ifdef KILN_HAS_MLIR
  std::unique_ptr<Graph> g = model.graph().clone();
  Collect c;
  if (options.pipeline) {
    PassManager pm;
    if (failed(parsePassPipeline(codegen::kDefaultPipeline, pm, c.diag())) ||
        failed(pm.run(*g, c.diag())))
      c.raise("the standard pipeline failed", what);
  }
  mlirgen::MlirExportOptions o;
  o.inlineElements = options.inlineElements;
  auto text = mlirgen::exportMlir(*g, o, c.diag());
  if (failed(text))
    c.raise("cannot write the model as MLIR", what);
  return std::move(text->text);
#else
  (void)options;
  throw Error(what + ": this Kiln was built without MLIR (-DKILN_MLIR=OFF)");
#endif
}

} // namespace kiln
