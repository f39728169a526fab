//===- Kiln.cpp - The embedding API over the compiler and runtime ---------===//
//
// Thin: Model holds the imported module, Executable a shared
// runtime::Executable with its ports and the compile report's facts (what
// save() records). Diagnostics of the importer and the compiler are
// collected and thrown as one kiln::Error; runtime Statuses become an Error
// with their message.
//
// Note [Compiling per size]
// Compiled code has static shapes (codegen binds every symbol before
// lowering). An Executable compiled with symbols left unbound therefore
// keeps a copy of the graph and compiles it for each run's sizes:
//   1. bindInputs (the interpreter's own check) gives the symbols' sizes
//      from the inputs, or one error naming the inputs that disagree,
//      including on dims the graph assumes equal (two batch symbols that
//      broadcast; collected once, Note [Assumed equal dims]);
//   2. the sizes are checked against CompileOptions::dims and ::ranges;
//   3. a specialization for those sizes is looked up (LRU, bounded by
//      maxSpecializations) or compiled (one compile at a time; the line
//      onSpecialize gets says which sizes and why) and then run.
// The compile cache makes a specialization compiled before by another
// process a load. Kernels taking their sizes at run time would make step 3
// one compile for all sizes; they do not exist yet.
//
//===----------------------------------------------------------------------===//
#include "kiln/kiln.h"

#include "codegen/Compiler.h"
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

std::vector<PortInfo> portsOf(const std::vector<runtime::ArtifactPort> &ports) {
  std::vector<PortInfo> out;
  for (const runtime::ArtifactPort &p : ports)
    out.push_back({p.name, p.dtype, p.dims});
  return out;
}

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
};

Model::Model() : impl_(std::make_unique<Impl>()) {}
Model::Model(Model &&) noexcept = default;
Model &Model::operator=(Model &&) noexcept = default;
Model::~Model() = default;

Model Model::load(const std::string &path, const std::map<std::string, int64_t> &dims) {
  Collect c;
  FailureOr<std::unique_ptr<Module>> module = failure();
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

/// One compiled size: the runtime executable and what save() records.
struct Compiled {
  std::shared_ptr<const runtime::Executable> exe;
  runtime::ArtifactInfo info;
};

/// Compiles `g`; a failure throws an Error, prefixed with `context` (the
/// sizes of a specialization) when it is not empty.
Compiled compileGraph(const Graph &g, const codegen::CompileOptions &o,
                      const std::string &context = "") {
  Collect c;
  codegen::CompileReport report;
  auto exe = codegen::compile(g, o, c.diag(), &report);
  if (failed(exe))
    c.raise("cannot compile the model", context);
  Compiled out;
  out.info = codegen::artifactInfo(codegen::GraphPorts::of(g), **exe, report, "");
  out.exe = std::shared_ptr<const runtime::Executable>(exe.take());
  return out;
}

using Sizes = std::map<std::string, int64_t>;

std::string sizesStr(const Sizes &sizes) {
  std::string s;
  for (const auto &[name, size] : sizes)
    s += (s.empty() ? "" : ", ") + name + "=" + std::to_string(size);
  return s;
}

/// An Executable that compiles per size (Note [Compiling per size]).
class PerSize {
public:
  PerSize(const Graph &g, codegen::CompileOptions options, const CompileOptions &api,
          std::set<std::string> symbols)
      : graph_(g.clone()), assumed_(dimAssumptions(*graph_)), options_(std::move(options)),
        ranges_(api.ranges), symbols_(std::move(symbols)),
        maxKept_(std::max<size_t>(api.maxSpecializations, 1)), log_(api.onSpecialize) {}

  /// The specialization for `inputs`' sizes, compiled on first use.
  std::shared_ptr<const Compiled> forInputs(std::span<const Tensor> inputs) const {
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
    std::string line = "kiln: compiling for " + sizesStr(sizes) +
                       ": no specialization for these sizes yet (" + std::to_string(keptAfter) +
                       " of at most " + std::to_string(maxKept_) + " kept)";
    if (log_)
      log_(line);
    else
      std::fprintf(stderr, "%s\n", line.c_str());
    codegen::CompileOptions o = options_;
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

  const Graph &graph() const { return *graph_; }
  const std::set<std::string> &symbols() const { return symbols_; }

  std::vector<Sizes> kept() const {
    std::vector<Sizes> out;
    for (const auto &[sizes, compiled] : keptCompiled())
      out.push_back(sizes);
    return out;
  }
  std::vector<std::pair<Sizes, std::shared_ptr<const Compiled>>> keptCompiled() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return {kept_.begin(), kept_.end()};
  }

  std::string summary() const {
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
    Sizes sizes;
    for (const auto &[name, size] : *bound) {
      auto fixed = options_.dims.find(name);
      if (fixed != options_.dims.end()) {
        if (fixed->second != size)
          throw Error("the inputs give " + name + " = " + std::to_string(size) +
                      ", but the model was compiled with " + name + " = " +
                      std::to_string(fixed->second));
        continue;
      }
      auto range = ranges_.find(name);
      if (range != ranges_.end() && (size < range->second.min || size > range->second.max))
        throw Error("the inputs give " + name + " = " + std::to_string(size) +
                    ", outside its range " + std::to_string(range->second.min) + ".." +
                    std::to_string(range->second.max));
      sizes[name] = size;
    }
    return sizes;
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

/// "batch=1, seq=5" back into sizes (the labels of a size set).
Sizes parseSizes(const std::string &text) {
  Sizes out;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find(", ", at);
    if (end == std::string::npos)
      end = text.size();
    const std::string item = text.substr(at, end - at);
    if (size_t eq = item.find('='); eq != std::string::npos)
      out[item.substr(0, eq)] = std::strtoll(item.c_str() + eq + 1, nullptr, 10);
    at = end + 2;
  }
  return out;
}

struct Executable::Impl {
  /// Compiled for one size (a loaded size set's first); null with `perSize`.
  std::shared_ptr<const Compiled> one;
  std::unique_ptr<PerSize> perSize;
  /// A loaded size set (runtime/artifact/Artifact.h).
  std::vector<std::pair<Sizes, std::shared_ptr<const Compiled>>> set;

  const Compiled &forInputs(std::span<const Tensor> inputs,
                            std::shared_ptr<const Compiled> &hold) const {
    if (perSize) {
      hold = perSize->forInputs(inputs);
      return *hold;
    }
    if (set.empty() || inputs.size() != one->exe->numInputs())
      return *one; // its run reports a wrong input count
    std::vector<std::vector<int64_t>> shapes;
    for (const Tensor &t : inputs)
      shapes.push_back(t.shape());
    std::string given, sizes;
    for (const auto &[s, compiled] : set) {
      if (compiled->exe->takesShapes(shapes))
        return *compiled;
      sizes += (sizes.empty() ? "" : "; ") + sizesStr(s);
    }
    for (const Tensor &t : inputs)
      given += (given.empty() ? "" : ", ") + t.type().str();
    throw Error("no size of this size set fits the inputs (" + given + "); it was compiled for " +
                sizes);
  }
};

Executable::Executable() = default;
Executable::~Executable() = default;

Executable compile(const Model &model, const CompileOptions &options) {
  codegen::CompileOptions o;
  o.threads = options.threads;
  o.cpu = options.cpu;
  o.dims = options.dims;
  o.fuse = options.fusion;
  o.useLibraries = options.libraries;
  o.cache = options.cache;
  const Graph &g = model.graph();
  auto impl = std::make_shared<Executable::Impl>();
  std::set<std::string> unbound = unboundSymbols(g, options.dims);
  for (const auto &[name, range] : options.ranges) {
    if (!unbound.count(name))
      throw Error("CompileOptions::ranges names " + name +
                  ", which is not a symbolic input dim left out of dims");
    if (range.min < 0 || range.min > range.max)
      throw Error("the range " + std::to_string(range.min) + ".." + std::to_string(range.max) +
                  " of " + name + " is empty or negative");
  }
  // An anonymous `?` has no size to compile for: compiling now names it.
  if (unbound.empty() || hasAnonymousDim(g))
    impl->one = std::make_shared<const Compiled>(compileGraph(g, o));
  else
    impl->perSize = std::make_unique<PerSize>(g, o, options, std::move(unbound));
  Executable e;
  e.impl_ = std::move(impl);
  return e;
}

Executable Executable::load(const std::string &path) {
  std::vector<runtime::ArtifactSetMember> members;
  if (runtime::Status st = runtime::loadArtifactSet(path, members); !st.ok())
    throw Error(st.error);
  auto impl = std::make_shared<Impl>();
  for (runtime::ArtifactSetMember &m : members) {
    auto compiled = std::make_shared<Compiled>();
    compiled->exe = std::move(m.exe);
    compiled->info = std::move(m.info);
    if (!m.sizes.empty()) // a size set, even of one size
      impl->set.emplace_back(parseSizes(m.sizes), compiled);
    if (!impl->one)
      impl->one = std::move(compiled);
  }
  Executable e;
  e.impl_ = std::move(impl);
  return e;
}

void Executable::save(const std::string &path) const {
  if (impl_->perSize || !impl_->set.empty()) {
    // A size set of the specializations kept (Note [Size sets]).
    auto kept = impl_->perSize ? impl_->perSize->keptCompiled() : impl_->set;
    if (kept.empty())
      throw Error("cannot save a model that compiles per size before it has run (" +
                  impl_->perSize->summary() +
                  "): run it at each size to keep, then save; or compile with every symbol "
                  "in CompileOptions::dims");
    std::sort(kept.begin(), kept.end(),
              [](const auto &a, const auto &b) { return a.first < b.first; });
    std::vector<std::string> labels;
    for (const auto &[sizes, compiled] : kept)
      labels.push_back(sizesStr(sizes));
    std::vector<runtime::ArtifactSetEntry> entries;
    for (size_t i = 0; i < kept.size(); ++i)
      entries.push_back({labels[i], kept[i].second->exe.get(), &kept[i].second->info});
    if (runtime::Status st = runtime::saveArtifactSet(entries, path); !st.ok())
      throw Error(st.error);
    return;
  }
  if (runtime::Status st = runtime::saveArtifact(*impl_->one->exe, impl_->one->info, path);
      !st.ok())
    throw Error(st.error);
}

namespace {
std::vector<Tensor> runCompiled(const Compiled &c, const std::vector<Tensor> &inputs) {
  std::vector<runtime::HostTensor> in, out;
  in.reserve(inputs.size());
  for (const Tensor &t : inputs)
    in.push_back(codegen::toHostTensor(t));
  if (runtime::Status st = c.exe->run(in, out); !st.ok())
    throw Error(st.error);
  std::vector<Tensor> result;
  result.reserve(out.size());
  for (const runtime::HostTensor &t : out)
    result.push_back(codegen::fromHostTensor(t));
  return result;
}
} // namespace

std::vector<Tensor> Executable::run(const std::vector<Tensor> &inputs) const {
  std::shared_ptr<const Compiled> hold;
  return runCompiled(impl_->forInputs(inputs, hold), inputs);
}

void Executable::runInto(const std::vector<Tensor> &inputs, std::vector<Tensor> &outputs) const {
  std::shared_ptr<const Compiled> hold; // one specialization for the check and the run
  const Compiled &c = impl_->forInputs(inputs, hold);
  const std::vector<PortInfo> want = portsOf(c.info.outputs);
  if (outputs.size() != want.size())
    throw Error("runInto: " + std::to_string(outputs.size()) +
                " output tensors given, the model has " + std::to_string(want.size()));
  for (size_t k = 0; k < want.size(); ++k)
    if (outputs[k].dtype() != want[k].dtype || outputs[k].shape() != want[k].shape)
      throw Error("runInto: output " + std::to_string(k) + " ('" + want[k].name + "') is " +
                  outputs[k].type().str() + ", the model writes " +
                  runtime::typeString(want[k].dtype, want[k].shape));
  std::vector<Tensor> got = runCompiled(c, inputs);
  for (size_t k = 0; k < got.size(); ++k)
    std::memcpy(outputs[k].mutableRawData(), got[k].rawData(), got[k].byteSize());
}

std::vector<PortInfo> Executable::inputs() const {
  return impl_->perSize ? portsOf(impl_->perSize->graph().inputs())
                        : portsOf(impl_->one->info.inputs);
}
std::vector<PortInfo> Executable::outputs() const {
  return impl_->perSize ? portsOf(impl_->perSize->graph().outputs())
                        : portsOf(impl_->one->info.outputs);
}
std::string Executable::summary() const {
  if (impl_->perSize)
    return impl_->perSize->summary();
  if (impl_->set.empty())
    return impl_->one->info.summary;
  std::string s = "a size set of " + std::to_string(impl_->set.size()) + " sizes (";
  for (size_t i = 0; i < impl_->set.size(); ++i)
    s +=
        (i ? "; " : "") + sizesStr(impl_->set[i].first) + ": " + impl_->set[i].second->info.summary;
  return s + ")";
}
std::vector<std::map<std::string, int64_t>> Executable::specializations() const {
  if (impl_->perSize)
    return impl_->perSize->kept();
  std::vector<std::map<std::string, int64_t>> out;
  for (const auto &[sizes, compiled] : impl_->set)
    out.push_back(sizes);
  return out;
}

} // namespace kiln
