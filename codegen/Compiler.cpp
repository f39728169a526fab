//===- Compiler.cpp - Graph to runnable Executable (CPU) --------*- C++ -*-===//
//
// See Compiler.h for the phases: this file binds dims, runs the pass
// pipeline, plans fusion and consults the compile cache; the steps are
// built by ExecutableBuilder.cpp.
//===----------------------------------------------------------------------===//
#include "codegen/Compiler.h"
#include "codegen/CompileCache.h"
#include "codegen/ExecutableBuilder.h"
#include "codegen/cpu/dnnl/OneDnnSteps.h"

#include "codegen/Fusion.h"
#include "codegen/MemoryPlan.h"
#include "codegen/RunTimeSizes.h"
#include "codegen/cpu/dnnl/DnnlIsa.h"
#include "ir/Interpreter.h"
#include "passes/PassManager.h"
#include "runtime/reference/HostTensors.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <set>

namespace kiln::codegen {

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
namespace {

using Clock = std::chrono::steady_clock;

/// Names every unnamed value the way the printer numbers them, so that
/// reports, warnings and `kiln opt` output agree.
void nameValues(Graph &g) {
  std::set<std::string> taken;
  std::vector<Value *> unnamed;
  auto claim = [&](Value *v) {
    if (v->name().empty() || !taken.insert(v->name()).second)
      unnamed.push_back(v);
  };
  for (Value *v : g.inputs())
    claim(v);
  for (Node *n : g.nodes())
    for (unsigned i = 0; i < n->numResults(); ++i)
      claim(n->result(i));
  unsigned counter = 0;
  for (Value *v : unnamed) {
    std::string name;
    do
      name = std::to_string(counter++);
    while (taken.count(name));
    taken.insert(name);
    v->setName(name);
  }
}

} // namespace

std::map<std::string, int64_t> withAssumedDims(const Graph &g,
                                               std::map<std::string, int64_t> dims) {
  const std::vector<DimAssumption> assumed = dimAssumptions(g);
  for (bool grew = true; grew;) {
    grew = false;
    for (const DimAssumption &a : assumed)
      for (auto [from, to] : {std::pair{&a.dims.lhs, &a.dims.rhs}, {&a.dims.rhs, &a.dims.lhs}})
        if (!to->symbol().empty() && !dims.count(to->symbol()))
          if (std::optional<int64_t> v = evaluateDim(*from, dims)) {
            dims[to->symbol()] = *v;
            grew = true;
          }
  }
  return dims;
}

namespace {

/// Replaces symbolic dims of the inputs by their bound sizes. A symbol the
/// graph assumes equal to a bound one (Note [Assumed equal dims] in
/// ir/Interpreter.cpp) takes its size; bound sizes that break an
/// assumption are an error at the node that makes it.
LogicalResult bindDims(Graph &g, const CompileOptions &options, DiagnosticEngine &diag) {
  bool ok = true;
  const std::vector<DimAssumption> assumed = dimAssumptions(g);
  const std::map<std::string, int64_t> dims = withAssumedDims(g, options.dims);
  for (const DimAssumption &a : assumed) {
    std::optional<int64_t> lhs = evaluateDim(a.dims.lhs, dims), rhs = evaluateDim(a.dims.rhs, dims);
    if (lhs && rhs && *lhs != *rhs) {
      diag.emitError(a.node->loc())
          << "'" << a.node->mnemonic() << "' op assumes " << a.str() << ", but the bound dims give "
          << a.dims.lhs.str() << " = " << *lhs << " and " << a.dims.rhs.str() << " = " << *rhs;
      ok = false;
    }
  }
  if (!ok)
    return failure();
  for (Value *v : g.inputs()) {
    TensorType t = v->type();
    for (Dim &d : t.shape) {
      if (d.isStatic())
        continue;
      std::set<std::string> symbols;
      if (auto e = d.expr())
        e->collectSymbols(symbols);
      auto unbound = std::find_if(symbols.begin(), symbols.end(),
                                  [&](const std::string &s) { return !dims.count(s); });
      if (symbols.empty() || unbound != symbols.end()) {
        std::string sym = symbols.empty() ? std::string("?") : *unbound;
        diag.emitError(Location())
            << "input %" << v->name() << " : " << v->type().str() << " has a dynamic dim " << sym
            << "; bind it with --dim " << (symbols.empty() ? "N" : sym) << "=SIZE"
            << (symbols.empty() ? std::string()
                                : ", or compile it for a range with --dim " + sym + "=LO..HI")
            << " (each compile is for one size)";
        ok = false;
        break;
      }
      for (const std::string &s : symbols)
        if (dims.at(s) < 0) {
          diag.emitError(Location())
              << "dim " << s << " = " << dims.at(s) << " must be non-negative";
          ok = false;
        }
      std::optional<int64_t> size = evaluateDim(d, dims);
      if (!ok || !size || *size < 0) {
        if (ok)
          diag.emitError(Location())
              << "input %" << v->name() << " : " << v->type().str() << " has dim " << d.str()
              << " that is not a size at the bound dims";
        ok = false;
        break;
      }
      d = Dim(*size);
    }
    v->setType(t);
  }
  // Symbolic attributes (slice bounds, reshape, expand, constant_of_shape
  // and iota shapes) take the bound values too. A reshape entry that
  // evaluates to 0 or -1 then means copy or infer, as the shape tensor an
  // ONNX model computes at run time does.
  for (Node *n : g.nodes())
    for (unsigned i = 0; ok && i < n->attrs().size(); ++i)
      if (hasSymbols(n->attr(i)))
        n->setAttr(i, substituteSymbols(n->attr(i), dims));
  return ok ? success() : failure();
}

LogicalResult requireStatic(const Graph &g, DiagnosticEngine &diag) {
  for (const Node *n : g.nodes())
    for (unsigned i = 0; i < n->attrs().size(); ++i)
      if (hasSymbols(n->attr(i)))
        return diag.emitError(n->loc())
               << "'" << n->mnemonic() << "' op attribute '" << n->info().attrs[i].name
               << "' = " << attrStr(n->attr(i))
               << " names a symbol no input binds; compiled code needs static shapes";
  for (const Node *n : g.nodes())
    for (unsigned i = 0; i < n->numResults(); ++i)
      if (!n->result(i)->type().isStatic())
        return diag.emitError(n->loc())
               << "'" << n->mnemonic() << "' op result %" << n->result(i)->name() << " : "
               << n->result(i)->type().str()
               << " has a dynamic shape after shape inference; one executable needs static shapes "
                  "(the kiln commands and kiln::compile compile such a graph in stages, "
                  "codegen/Staged.h)";
  // A tensor no machine holds is refused here, before a library sees its
  // sizes (oneDNN's matmul setup divides by zero on a 2^43-element one).
  constexpr uint64_t kMaxTensorBytes = uint64_t(1) << 40;
  auto tooBig = [&](const Value *v) {
    const std::vector<int64_t> sizes = staticSizes(v->type().shape);
    if (std::find(sizes.begin(), sizes.end(), 0) != sizes.end())
      return false;
    uint64_t bytes = dtypeSize(v->type().dtype);
    for (int64_t d : sizes)
      if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes))
        return true;
    return bytes > kMaxTensorBytes;
  };
  for (const Value *v : g.inputs())
    if (tooBig(v))
      return diag.emitError(Location()) << "input %" << v->name() << " : " << v->type().str()
                                        << " is over 1 TiB; Kiln compiles tensors up to 1 TiB";
  for (const Node *n : g.nodes())
    for (unsigned i = 0; i < n->numResults(); ++i)
      if (tooBig(n->result(i)))
        return diag.emitError(n->loc())
               << "'" << n->mnemonic() << "' op result %" << n->result(i)->name() << " : "
               << n->result(i)->type().str() << " is over 1 TiB; Kiln compiles tensors up to 1 TiB";
  return success();
}

/// A gather's constant indices out of range are the reference's error,
/// at compile time: the kernel would clamp them (LowerNode.cpp). A causal
/// LM run past its positions gathers Range(0, seq) from its position
/// table, a constant once seq is bound. Indices computed at run time are
/// still clamped (not checked).
LogicalResult checkConstantIndices(const Graph &g, DiagnosticEngine &diag) {
  for (const Node *n : g.nodes()) {
    const Node *def = n->kind() == OpKind::Gather ? n->operand(1)->definingNode() : nullptr;
    if (!def || def->kind() != OpKind::Constant)
      continue;
    const Tensor &indices = ConstantOp(*def).value();
    const int64_t rank = static_cast<int64_t>(n->operand(0)->type().rank());
    int64_t axis = GatherOp(*n).axis();
    axis = axis < 0 ? axis + rank : axis;
    if (axis < 0 || axis >= rank ||
        !n->operand(0)->type().shape[static_cast<size_t>(axis)].isStatic())
      continue;
    const Dim &dim = n->operand(0)->type().shape[static_cast<size_t>(axis)];
    for (int64_t j = 0; j < indices.numel(); ++j)
      if (int64_t k = indices.getInt(j); k < -dim.size() || k >= dim.size())
        return diag.emitError(n->loc()) << "'gather' op index " << k << " is out of range for axis "
                                        << axis << " of size " << dim.size();
  }
  return success();
}

} // namespace

std::string CompileReport::counts() const {
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%d kernel%s, %d library call%s, %d fallback%s", numKernels,
                numKernels == 1 ? "" : "s", numLibraryCalls, numLibraryCalls == 1 ? "" : "s",
                numFallbacks, numFallbacks == 1 ? "" : "s");
  std::string s = buf;
  if (numSharedKernels > 0)
    s.insert(s.find(','), " (" + std::to_string(numSharedKernels) + " with run-time sizes)");
  if (numRegions > 0)
    s += ", " + std::to_string(numRegions) + " compiled region op" + (numRegions == 1 ? "" : "s");
  return s;
}

std::string CompileReport::summary() const {
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                cacheHit ? "; loaded from the compile cache in %.1f ms" : "; compiled in %.1f ms",
                totalSeconds * 1e3);
  std::string s = counts() + buf;
  if (!phases.empty()) {
    s += " (";
    for (size_t i = 0; i < phases.size(); ++i) {
      std::snprintf(buf, sizeof(buf), "%s%s %.1f ms", i ? ", " : "", phases[i].first.c_str(),
                    phases[i].second * 1e3);
      s += buf;
    }
    s += ")";
  }
  for (size_t i = 0; i < runTimeSizes.size(); ++i)
    s += (i ? "; " : "; compiled for these sizes only: ") + runTimeSizes[i];
  return s;
}

std::string MemoryReport::str(bool perBuffer) const {
  auto ratio = [](uint64_t a, uint64_t b) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.3f",
                  b ? static_cast<double>(a) / static_cast<double>(b) : 1.0);
    return std::string(buf);
  };
  auto both = [](uint64_t n) { return formatBytes(n) + " (" + std::to_string(n) + " bytes)"; };
  std::string s = "memory plan (greedy by size, best fit, 64-byte aligned):\n";
  s += "  arena        " + both(arenaBytes) + "\n";
  s += "  lower bound  " + both(lowerBound) +
       (peakStep < 0 ? std::string(", no buffer in the arena")
                     : ", the largest live set (step " + std::to_string(peakStep) + ")") +
       "; arena / lower bound = " + ratio(arenaBytes, lowerBound) + "\n";
  s += "  naive sum    " + both(naiveBytes) +
       ", every buffer its own memory; arena / naive = " + ratio(arenaBytes, naiveBytes) + "\n";
  s += "  in place     " + std::to_string(inPlace) + " buffer" + (inPlace == 1 ? "" : "s") +
       " written over a dying input\n";
  s += "  outputs      " + both(outputBytes) + " per call (output block)\n";
  s += "  constants    " + both(constantBytes) + "\n";
  if (!perBuffer)
    return s;
  size_t width = 6;
  for (const Buffer &b : buffers)
    width = std::max(width, b.name.size() + 1);
  char line[512];
  std::snprintf(line, sizeof(line), "  %-*s %-7s %12s %12s  %-11s %s\n", static_cast<int>(width),
                "buffer", "region", "offset", "bytes", "steps", "note");
  s += line;
  for (const Buffer &b : buffers) {
    std::string steps =
        b.first < 0 ? "unused" : std::to_string(b.first) + ".." + std::to_string(b.last);
    std::string note = b.inPlaceOf.empty() ? "" : "in place of %" + b.inPlaceOf;
    std::snprintf(line, sizeof(line), "  %-*s %-7s %12llu %12llu  %-11s %s",
                  static_cast<int>(width), ("%" + b.name).c_str(), b.inArena ? "arena" : "output",
                  static_cast<unsigned long long>(b.offset),
                  static_cast<unsigned long long>(b.bytes), steps.c_str(), note.c_str());
    std::string l = line;
    while (!l.empty() && l.back() == ' ')
      l.pop_back();
    s += l + "\n";
  }
  return s;
}

FailureOr<std::unique_ptr<Graph>>
preparePipeline(std::unique_ptr<Graph> g, const CompileOptions &options, DiagnosticEngine &diag) {
  if (!g)
    return diag.emitError(Location()) << "compile: no graph given";
  if (failed(bindDims(*g, options, diag)))
    return failure();
  PassManager pm;
  if (failed(parsePassPipeline(options.pipeline, pm, diag)) || failed(pm.run(*g, diag)))
    return failure();
  nameValues(*g);
  return g;
}

FailureOr<std::unique_ptr<Graph>>
prepareGraph(std::unique_ptr<Graph> g, const CompileOptions &options, DiagnosticEngine &diag) {
  auto prepared = preparePipeline(std::move(g), options, diag);
  if (failed(prepared) || failed(checkPrepared(**prepared, diag)))
    return failure();
  return prepared;
}

LogicalResult checkPrepared(const Graph &g, DiagnosticEngine &diag) {
  if (failed(requireStatic(g, diag)) || failed(checkConstantIndices(g, diag)))
    return failure();
  return success();
}

namespace {

/// The executable stored at `path` with `report` filled as its compile
/// reported; null on a miss. An entry that does not load is a warning (it
/// is compiled again and replaced).
std::unique_ptr<runtime::Executable> loadCached(const std::string &path, CompileReport &report,
                                                DiagnosticEngine &diag) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return nullptr;
  std::unique_ptr<runtime::Executable> exe;
  runtime::ArtifactInfo info;
  if (runtime::Status st = runtime::loadArtifact(path, exe, &info); !st.ok()) {
    diag.emitWarning(Location()) << "compile cache: " << st.error << "; compiling again";
    return nullptr;
  }
  // Least recently used order is by modification time.
  std::filesystem::last_write_time(path, std::filesystem::file_time_type::clock::now(), ec);
  report.cacheHit = true;
  reportFromArtifact(info, *exe, report);
  // Note [Fallback steps]: a slow path is never silent, cached or not; the
  // empty nodes get one warning.
  size_t empty = 0;
  std::string firstEmpty;
  for (const std::string &line : report.fallbacks) {
    if (line.find(kEmptyFallbackReason) != std::string::npos) {
      if (empty++ == 0)
        firstEmpty = line.substr(0, line.find(' '));
      continue;
    }
    diag.emitWarning(Location())
        << "node " << line << " (it runs on the reference kernel; loaded from the compile cache)";
  }
  if (empty > 0)
    diag.emitWarning(Location()) << emptyFallbacksWarning(empty, firstEmpty)
                                 << " (loaded from the compile cache)";
  report.steps = exe->describe();
  MemoryReport &m = report.memory;
  m.arenaBytes = exe->arenaBytes();
  m.lowerBound = info.report.lowerBound;
  m.naiveBytes = info.report.naiveBytes;
  m.peakStep = info.report.peakStep;
  m.outputBytes = exe->outputBlockBytes();
  m.constantBytes = exe->constantBytes();
  m.inPlace = info.report.inPlace;
  return exe;
}

/// Stores `exe` at report.cacheEntry and keeps the cache within its limit;
/// a write error is a warning.
void storeCached(const runtime::Executable &exe, const GraphPorts &ports,
                 const CompileReport &report, DiagnosticEngine &diag) {
  const std::filesystem::path path(report.cacheEntry);
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  runtime::Status st = runtime::saveArtifact(exe, artifactInfo(ports, exe, report, ""), path);
  if (!st.ok()) {
    diag.emitWarning(Location()) << "compile cache: " << st.error;
    return;
  }
  std::string limitError;
  const uint64_t limit = cacheLimit(&limitError);
  if (!limitError.empty())
    diag.emitWarning(Location()) << "compile cache: " << limitError << "; using 1G";
  evictCache(path.parent_path().string(), limit);
}

} // namespace

LogicalResult checkRanges(const Graph &g, const CompileOptions &options, DiagnosticEngine &diag) {
  const std::set<std::string> symbols = inputSymbols(g);
  std::string names;
  for (const std::string &s : symbols)
    names += (names.empty() ? "" : ", ") + s;
  const std::string known =
      names.empty() ? std::string(" (it has none)") : " (its symbols: " + names + ")";
  std::set<std::string> seen;
  for (const SymbolRange &r : options.ranges) {
    const std::string given = r.name + "=" + std::to_string(r.min) + ".." + std::to_string(r.max);
    auto fixed = options.dims.find(r.name);
    if (!symbols.count(r.name) && fixed != options.dims.end())
      return diag.emitError(Location())
             << "the range " << given << " is for a symbol that dims fixes at " << fixed->second
             << " (a range is for a symbol left open: give " << r.name
             << " a size or a range, not both)";
    if (!symbols.count(r.name))
      return diag.emitError(Location())
             << "the range " << given << " names no symbolic dim of the graph's inputs" << known;
    if (!seen.insert(r.name).second)
      return diag.emitError(Location()) << "the symbol " << r.name << " has two ranges";
    if (r.min < 0 || r.min > r.max)
      return diag.emitError(Location()) << "the range " << given << " is empty or negative";
    auto size = options.dims.find(r.name);
    if (size != options.dims.end() && (size->second < r.min || size->second > r.max))
      return diag.emitError(Location())
             << r.name << "=" << size->second << " is outside its range " << r.min << ".." << r.max;
  }
  if (options.runTimeSizes) // the graph is the unbound one the sizes bind
    for (const auto &[name, size] : options.dims)
      if (!symbols.count(name))
        return diag.emitError(Location())
               << "the size " << name << "=" << size
               << " names no symbolic dim of the graph's inputs" << known;
  return success();
}

FailureOr<std::unique_ptr<runtime::Executable>> compile(const Graph &source,
                                                        const CompileOptions &options,
                                                        DiagnosticEngine &diag,
                                                        CompileReport *report) {
  return compile(source.clone(), options, diag, report);
}

FailureOr<std::unique_ptr<runtime::Executable>> compile(std::unique_ptr<Graph> owned,
                                                        const CompileOptions &options,
                                                        DiagnosticEngine &diag,
                                                        CompileReport *reportOut) {
  CompileReport localReport;
  CompileReport &report = reportOut ? *reportOut : localReport;
  report = CompileReport();
  const auto start = Clock::now();
  auto phase = Clock::now();
  auto endPhase = [&](const char *name) {
    report.phases.emplace_back(name, secondsSince(phase));
    phase = Clock::now();
  };

  // 1-2. Clone, bind dims, run the pipeline.
  if (!owned)
    return diag.emitError(Location()) << "compile: no graph given";
  auto target = cpu::resolveCpuTarget(options.cpu, diag);
  if (failed(target))
    return failure();
  if (options.useLibraries && failed(cpu::capOneDnnIsa(*target, diag)))
    return failure();
  // The compile cache (CompileCache.h) is keyed by the prepared graph: one
  // model with its dims bound at import or by CompileOptions::dims is one
  // entry. A hit returns the stored model.
  const std::string cacheDir = cacheApplies(options) ? cacheDirectory() : "";
  std::unique_ptr<GraphPorts> ports; // of the source graph, for the entry
  if (!cacheDir.empty())
    ports = std::make_unique<GraphPorts>(GraphPorts::of(*owned));
  if (failed(checkRanges(*owned, options, diag)))
    return failure();
  std::unique_ptr<Graph> unbound; // for --run-time-sizes
  if (options.runTimeSizes && !options.sharedKernels && !inputSymbols(*owned).empty())
    unbound = owned->clone();
  auto prepared = prepareGraph(std::move(owned), options, diag);
  if (failed(prepared))
    return failure();
  std::shared_ptr<Graph> g(prepared->release());
  if (!cacheDir.empty()) {
    report.cacheEntry =
        cacheDir + "/" + cacheKey(*g, options, target->cpu, target->features) + ".kiln";
    if (auto hit = loadCached(report.cacheEntry, report, diag)) {
      report.totalSeconds = secondsSince(start);
      return hit;
    }
  }
  endPhase("passes");
  CompileOptions withShared;
  const CompileOptions &opts = unbound ? withShared : options;
  if (unbound) {
    Diagnostic error;
    withShared = options;
    withShared.sharedKernels =
        tryCompileSharedKernels(*unbound, sharedRanges(*unbound, options), options, error);
    if (withShared.sharedKernels) {
      for (const auto &[name, why] : withShared.sharedKernels->perSize)
        report.runTimeSizes.push_back(name + ": " + why);
    } else {
      // As kiln::compile does: every kernel is then compiled for these sizes.
      diag.emitWarning(error.loc) << error.message << "; every kernel is compiled for these sizes";
    }
    endPhase("run-time sizes");
  }

  // 3. Fusion.
  FusionOptions fusionOptions;
  fusionOptions.library = &cpu::oneDnnCapabilities();
  fusionOptions.useLibraries = options.useLibraries;
  fusionOptions.fuse = options.fuse;
  auto plan = planFusion(*g, fusionOptions, diag);
  if (failed(plan))
    return failure();
  if (options.explain)
    report.fusion = plan->explain();
  endPhase("fusion");

  // 4-5. Steps, outputs, memory (ExecutableBuilder.cpp).
  auto built = buildExecutable(g, *plan, *target, opts, diag, report);
  if (failed(built))
    return failure();
  std::unique_ptr<runtime::Executable> exe = std::move(*built);
  report.steps = exe->describe();
  if (ports)
    storeCached(*exe, *ports, report, diag);
  report.totalSeconds = secondsSince(start);
  return exe;
}

GraphPorts GraphPorts::of(const Graph &g) {
  GraphPorts p;
  for (const Value *v : g.inputs())
    p.inputs.emplace_back(v->name(), v->type());
  for (const Value *v : g.outputs())
    p.outputs.emplace_back(v->name(), v->type());
  return p;
}

runtime::ArtifactInfo artifactInfo(const GraphPorts &g, const runtime::Executable &exe,
                                   const CompileReport &report, const std::string &model) {
  runtime::ArtifactInfo info;
  info.model = model;
  info.summary = report.counts();
  info.report.kernels = report.numKernels;
  info.report.libraryCalls = report.numLibraryCalls;
  info.report.fallbacks = report.numFallbacks;
  info.report.target = report.target;
  info.report.libraryLines = report.libraryCalls;
  info.report.fallbackLines = report.fallbacks;
  info.report.lowerBound = report.memory.lowerBound;
  info.report.naiveBytes = report.memory.naiveBytes;
  info.report.inPlace = report.memory.inPlace;
  info.report.peakStep = report.memory.peakStep;
  // Ports as the model declares them: symbolic dims named, with the size
  // they were compiled for (the executable's buffers).
  const auto &buffers = exe.buffers();
  std::vector<const runtime::BufferDesc *> inputs;
  for (const runtime::BufferDesc &b : buffers)
    if (b.kind == runtime::BufferDesc::Kind::Input)
      inputs.push_back(&b);
  auto port = [](const std::pair<std::string, TensorType> &v, const runtime::BufferDesc *b) {
    runtime::ArtifactPort p;
    p.name = v.first;
    p.dtype = b ? b->dtype : v.second.dtype;
    const Shape &shape = v.second.shape;
    for (size_t d = 0; d < shape.size(); ++d) {
      p.symbols.push_back(shape[d].isStatic() || shape[d].isDynamic() ? "" : shape[d].str());
      p.dims.push_back(b && d < b->shape.size() ? b->shape[d]
                       : shape[d].isStatic()    ? shape[d].size()
                                                : -1);
    }
    return p;
  };
  for (size_t i = 0; i < g.inputs.size(); ++i)
    info.inputs.push_back(port(g.inputs[i], i < inputs.size() ? inputs[i] : nullptr));
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    const auto id = k < exe.outputs().size() ? exe.outputs()[k] : -1;
    info.outputs.push_back(
        port(g.outputs[k], id >= 0 ? &buffers[static_cast<size_t>(id)] : nullptr));
  }
  return info;
}

void reportFromArtifact(const runtime::ArtifactInfo &info, const runtime::Executable &exe,
                        CompileReport &report) {
  report.numKernels = info.report.kernels;
  report.numLibraryCalls = info.report.libraryCalls;
  report.numFallbacks = info.report.fallbacks;
  for (const runtime::Step &st : exe.steps()) // the kernels' size arguments are in the artifact
    report.numSharedKernels += st.kind == runtime::Step::Kind::Kernel && !st.sizes.empty();
  report.target = info.report.target;
  report.libraryCalls = info.report.libraryLines;
  report.fallbacks = info.report.fallbackLines;
}

FailureOr<std::vector<Tensor>> runCompiled(const runtime::Executable &exe,
                                           std::span<const Tensor> inputs, DiagnosticEngine &diag,
                                           const runtime::RunOptions &options,
                                           runtime::RunProfile *profile) {
  std::vector<runtime::HostTensor> in;
  in.reserve(inputs.size());
  for (const Tensor &t : inputs)
    in.push_back(runtime::toHostTensor(t));
  std::vector<runtime::HostTensor> out;
  runtime::Status st = exe.run(in, out, options, profile);
  if (!st.ok())
    return diag.emitError(Location()) << st.error;
  std::vector<Tensor> result;
  result.reserve(out.size());
  for (const runtime::HostTensor &t : out)
    result.push_back(runtime::fromHostTensor(t));
  return result;
}

} // namespace kiln::codegen
