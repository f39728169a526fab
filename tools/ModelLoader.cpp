//===- ModelLoader.cpp - Loading a model for a CLI command ------*- C++ -*-===//
//
// One way for every subcommand to read its model: a .kir file or an ONNX
// model (by extension), then the graph the user named (or the first).
//
//===----------------------------------------------------------------------===//
#include "codegen/RunTimeSizes.h"
#include "codegen/SymbolicArtifact.h"
#include "frontend/onnx/OnnxImporter.h"
#include "ir/Interpreter.h"
#include "ir/Npy.h"
#include "ir/Parser.h"
#include "runtime/artifact/Artifact.h"
#include "tools/Commands.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <set>

namespace kiln::tools {

FailureOr<LoadedModel> loadModel(const std::string &path, const std::string &graphName,
                                 const std::map<std::string, int64_t> &onnxDims,
                                 DiagnosticEngine &diag) {
  FailureOr<std::unique_ptr<Module>> module = failure();
  if (runtime::isCudaArtifactFile(path))
    return diag.emitError(Location::file(path))
           << "a CUDA artifact (kiln compile --target cuda -o): kiln run runs it on a GPU and "
              "kiln inspect describes it; this command takes a model";
  if (isOnnxPath(path)) {
    OnnxImportOptions opts;
    opts.dimBindings = onnxDims;
    module = importOnnx(path, diag, opts);
  } else {
    // A .kir file is text: a binary file (a damaged artifact, say) is named
    // as such, not parsed into an error quoting its bytes.
    if (std::FILE *f = std::fopen(path.c_str(), "rb")) {
      char head[4096];
      const size_t n = std::fread(head, 1, sizeof head, f);
      std::fclose(f);
      if (std::memchr(head, '\0', n))
        return diag.emitError(Location::file(path))
               << "not a model Kiln reads: neither .kir text, an ONNX model (.onnx) nor a Kiln "
                  "artifact (its first bytes are binary and match no artifact magic)";
    }
    module = parseFile(path, diag);
  }
  if (failed(module))
    return failure();
  LoadedModel m;
  m.module = module.take();
  if (m.module->graphs().empty())
    return diag.emitError(Location::file(path)) << "the file has no graph";
  m.graph = graphName.empty() ? m.module->graphs().front().get() : m.module->lookup(graphName);
  if (!m.graph)
    return diag.emitError(Location::file(path)) << "no graph named '@" << graphName << "'";
  return m;
}

FailureOr<LoadedModel> loadForCompile(const std::string &path, const std::string &graphName,
                                      codegen::CompileOptions &options, std::set<std::string> &open,
                                      DiagnosticEngine &diag) {
  auto model = loadModel(path, graphName, dimsAtImport(options), diag);
  if (failed(model))
    return failure();
  open.clear();
  std::map<std::string, int64_t> given = options.dims; // and the ranged symbols, at any size
  for (const codegen::SymbolRange &r : options.ranges)
    given.emplace(r.name, r.max);
  given = codegen::withAssumedDims(*model->graph, given); // the symbols tied to those
  for (const std::string &s : inputSymbols(*model->graph))
    if (!given.count(s))
      open.insert(s);
  if (open.empty())
    return model;
  const std::vector<DimAssumption> assumed = dimAssumptions(*model->graph);
  for (const std::string &s : open) // up to where the graph's assumptions hold
    options.ranges.push_back(
        {s, 1, std::max<int64_t>(1, codegen::assumedMax(assumed, s, codegen::kDefaultSharedMax))});
  const bool wasBound = !dimsAtImport(options).empty() && isOnnxPath(path);
  options.runTimeSizes = true;
  if (!wasBound)
    return model;
  return loadModel(path, graphName, dimsAtImport(options), diag);
}

FailureOr<LoadedModel> loadSymbolicForCompile(const char *cmd, const std::string &path,
                                              const std::string &graphName,
                                              codegen::CompileOptions &options,
                                              std::set<std::string> &open, bool &usage,
                                              DiagnosticEngine &diag) {
  usage = true;
  codegen::CompileOptions asked = options;
  const std::map<std::string, int64_t> sizes = asked.dims;
  asked.dims.clear();
  if (!asked.ranges.empty()) {
    std::fprintf(stderr,
                 "%s: error: --dim %s=%lld..%lld does not apply to '%s': a symbolic artifact "
                 "keeps the ranges it was compiled for (give a size with --dim SYM=N)\n",
                 cmd, asked.ranges[0].name.c_str(), static_cast<long long>(asked.ranges[0].min),
                 static_cast<long long>(asked.ranges[0].max), path.c_str());
    return failure();
  }
  if (const char *flag = compileFlagBeyondThreads(asked)) {
    std::fprintf(stderr,
                 "%s: error: %s does not apply to '%s': a symbolic artifact is compiled "
                 "already (only --threads and --dim SYM=N do)\n",
                 cmd, flag, path.c_str());
    return failure();
  }
  if (!graphName.empty()) {
    std::fprintf(stderr,
                 "%s: error: --graph does not apply to '%s': a symbolic artifact holds "
                 "one graph\n",
                 cmd, path.c_str());
    return failure();
  }
  usage = false;
  auto sym = codegen::loadSymbolicArtifact(path, diag);
  if (failed(sym))
    return failure();
  std::string why;
  auto sized = codegen::withSizes(sym->options, *sym->graph, sizes, options.threads, why);
  if (!sized) {
    std::fprintf(stderr, "%s: error: --dim %s ('%s')\n", cmd, why.c_str(), path.c_str());
    usage = true;
    return failure();
  }
  // Each size compiles in tens of ms from the artifact; a cache entry per
  // size would copy all of its constants (Note [Symbolic artifacts]).
  options = std::move(*sized);
  options.cache = false;
  open.clear();
  for (const std::string &s : sym->open)
    if (!sizes.count(s))
      open.insert(s);
  LoadedModel m;
  m.module = std::move(sym->module);
  m.graph = sym->graph;
  const codegen::SharedKernels &shared = *options.sharedKernels;
  m.artifactLine = "symbolic over " + codegen::rangesStr(options.ranges) + " (" +
                   std::to_string(shared.byName.size()) +
                   (shared.byName.size() == 1 ? " kernel" : " kernels") + " compiled once, " +
                   std::to_string(shared.perSize.size()) + " per size), " +
                   std::to_string(sym->fileBytes) + " bytes; --cpu " + sym->target.requested +
                   " (" + sym->target.cpu + "), Kiln " + sym->kilnVersion;
  return m;
}

int pickSetMember(const char *cmd, const std::string &file,
                  std::span<const runtime::ArtifactSetMember> set, std::span<const Tensor> inputs) {
  std::vector<std::vector<int64_t>> shapes;
  std::string given;
  for (const Tensor &t : inputs) {
    shapes.push_back(t.shape());
    given += (given.empty() ? "" : ", ") + t.type().str();
  }
  int k = runtime::findSetMember(set, shapes);
  if (k >= 0 || set.size() == 1)
    return std::max(k, 0);
  std::fprintf(stderr, "%s: error: no size of '%s' fits the inputs (%s); it was compiled for %s\n",
               cmd, file.c_str(), given.c_str(), runtime::setSizesList(set).c_str());
  return -1;
}

FailureOr<Tensor> readTensorFile(const std::string &path, DiagnosticEngine &diag) {
  if (path.size() > 3 && path.compare(path.size() - 3, 3, ".pb") == 0)
    return readOnnxTensorFile(path, diag);
  return readNpy(path, diag);
}

std::string findDataFile(const std::string &dir, const std::string &stem, size_t k) {
  for (const char *ext : {".pb", ".npy"}) {
    std::filesystem::path p = std::filesystem::path(dir) / (stem + "_" + std::to_string(k) + ext);
    if (std::filesystem::exists(p))
      return p.string();
  }
  return "";
}

std::vector<Tensor> randomTensors(const std::vector<std::pair<DType, std::vector<int64_t>>> &types,
                                  unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  std::vector<Tensor> out;
  for (const auto &[dtype, shape] : types) {
    Tensor t = Tensor::zeros(dtype, shape);
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (isFloat(t.dtype()))
        t.setDouble(i, real(rng));
      else
        t.setInt(i, static_cast<int64_t>(rng() % (t.dtype() == DType::Bool ? 2 : 4)));
    }
    out.push_back(t);
  }
  return out;
}

std::vector<Tensor> randomInputs(const Graph &g, const std::map<std::string, int64_t> &dims,
                                 unsigned seed) {
  std::vector<std::pair<DType, std::vector<int64_t>>> types;
  for (const Value *v : g.inputs()) {
    std::vector<int64_t> shape;
    for (const Dim &d : v->type().shape) {
      // Unbound symbols are 1 (an expression such as `S+1` evaluated so).
      std::map<std::string, int64_t> values = dims;
      std::set<std::string> symbols;
      if (auto e = d.expr())
        e->collectSymbols(symbols);
      for (const std::string &s : symbols)
        values.emplace(s, 1);
      shape.push_back(std::max<int64_t>(evaluateDim(d, values).value_or(1), 0));
    }
    types.emplace_back(v->type().dtype, std::move(shape));
  }
  return randomTensors(types, seed);
}

void bindDimsFromInputs(const Graph &g, std::span<const Tensor> inputs,
                        std::map<std::string, int64_t> &dims) {
  for (unsigned i = 0; i < g.numInputs() && i < inputs.size(); ++i) {
    const Shape &shape = g.input(i)->type().shape;
    if (inputs[i].shape().size() != shape.size())
      continue;
    for (size_t d = 0; d < shape.size(); ++d)
      if (shape[d].isSymbolic() && !shape[d].symbol().empty())
        dims.emplace(shape[d].symbol(), inputs[i].shape()[d]);
  }
}

std::string openRangesStr(const std::vector<codegen::SymbolRange> &ranges,
                          const std::set<std::string> &open) {
  std::vector<codegen::SymbolRange> picked;
  for (const codegen::SymbolRange &r : ranges)
    if (open.count(r.name))
      picked.push_back(r);
  return codegen::rangesStr(picked);
}

std::string bindSymbolsForReport(const Graph &g, std::map<std::string, int64_t> &dims,
                                 const std::vector<codegen::SymbolRange> &ranges,
                                 const std::set<std::string> &open, bool fromArtifact) {
  std::string defaulted, largest, symbolic;
  for (const std::string &s : inputSymbols(g)) {
    if (dims.count(s))
      continue;
    auto r = std::find_if(ranges.begin(), ranges.end(),
                          [&](const codegen::SymbolRange &x) { return x.name == s; });
    if (r != ranges.end() && open.count(s)) { // Note [Symbolic without --dim]
      dims[s] = r->min;
      symbolic += (symbolic.empty() ? "" : ", ") + s;
      continue;
    }
    if (r != ranges.end()) {
      dims[s] = r->max;
      const std::string range = std::to_string(r->min) + ".." + std::to_string(r->max);
      largest += (largest.empty() ? "" : ", ") + s + ": the largest of " +
                 (fromArtifact ? "the artifact's range " + range : "--dim " + s + "=" + range);
      continue;
    }
    dims[s] = 1;
    defaulted += (defaulted.empty() ? "" : " ") + std::string("--dim ") + s + "=N";
  }
  // Every size, whether --dim bound it at import or here.
  std::string line;
  for (const auto &[name, size] : dims)
    line += (line.empty() ? "" : ", ") + name + "=" + std::to_string(size);
  std::string why = largest;
  if (fromArtifact && !largest.empty())
    why += "; give --dim SYM=N for other sizes";
  if (!symbolic.empty())
    why += (why.empty() ? "" : "; ") + symbolic + (open.size() == 1 ? " has" : " have") +
           " no --dim: compiled for " + openRangesStr(ranges, open) + ", reported at 1; give " +
           (fromArtifact ? "--dim SYM=N" : "--dim SYM=N or SYM=LO..HI") + " for other sizes";
  if (!defaulted.empty())
    why += (why.empty() ? "" : "; ") + std::string("symbols not given are 1; give ") + defaulted +
           " for other sizes";
  return why.empty() ? line : line + " (" + why + ")";
}

bool checkInputRanges(const char *cmd, const Graph &g, std::span<const Tensor> inputs,
                      const std::vector<codegen::SymbolRange> &ranges) {
  for (unsigned i = 0; i < g.numInputs() && i < inputs.size(); ++i) {
    const Shape &shape = g.input(i)->type().shape;
    if (inputs[i].shape().size() != shape.size())
      continue; // the run names the wrong rank
    for (size_t d = 0; d < shape.size(); ++d) {
      const int64_t n = inputs[i].shape()[d];
      for (const codegen::SymbolRange &r : ranges)
        if (shape[d].isSymbolic() && shape[d].symbol() == r.name && (n < r.min || n > r.max)) {
          std::fprintf(stderr,
                       "%s: error: input %%%s has %s=%lld (dim %zu), outside its range "
                       "%lld..%lld (--dim %s=%lld..%lld)\n",
                       cmd, g.input(i)->name().c_str(), r.name.c_str(), static_cast<long long>(n),
                       d, static_cast<long long>(r.min), static_cast<long long>(r.max),
                       r.name.c_str(), static_cast<long long>(r.min),
                       static_cast<long long>(r.max));
          return false;
        }
    }
  }
  return true;
}

} // namespace kiln::tools
