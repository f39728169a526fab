//===- Kiln.cpp - The embedding API over the compiler and runtime ---------===//
//
// Thin: Model holds the imported module, Executable a shared
// runtime::Executable with its ports and the compile report's facts (what
// save() records). Diagnostics of the importer and the compiler are
// collected and thrown as one kiln::Error; runtime Statuses become an Error
// with their message.
//
//===----------------------------------------------------------------------===//
#include "kiln/kiln.h"

#include "codegen/Compiler.h"
#include "frontend/onnx/OnnxImporter.h"
#include "ir/Graph.h"
#include "ir/Parser.h"
#include "runtime/artifact/Artifact.h"

#include <cstring>
#include <filesystem>

namespace kiln {
namespace {

/// Collects the diagnostics of one call and throws its errors as one Error.
class Collect {
public:
  DiagnosticEngine &diag() { return diag_; }
  [[noreturn]] void raise(const std::string &fallback) {
    std::vector<Diagnostic> errors;
    for (const Diagnostic &d : collector_.diagnostics())
      if (d.severity == Severity::Error)
        errors.push_back(d);
    if (errors.empty())
      throw Error(fallback);
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

PortInfo portOf(const Value *v) {
  PortInfo p{v->name(), v->type().dtype, {}};
  for (const Dim &d : v->type().shape)
    p.shape.push_back(d.isStatic() ? d.size() : -1);
  return p;
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
  std::vector<PortInfo> out;
  for (const Value *v : impl_->graph->inputs())
    out.push_back(portOf(v));
  return out;
}

std::vector<PortInfo> Model::outputs() const {
  std::vector<PortInfo> out;
  for (const Value *v : impl_->graph->outputs())
    out.push_back(portOf(v));
  return out;
}

struct Executable::Impl {
  std::shared_ptr<const runtime::Executable> exe;
  runtime::ArtifactInfo info;
};

Executable::Executable() = default;
Executable::~Executable() = default;

Executable compile(const Model &model, const CompileOptions &options) {
  Collect c;
  codegen::CompileOptions o;
  o.threads = options.threads;
  o.cpu = options.cpu;
  o.dims = options.dims;
  o.fuse = options.fusion;
  o.useLibraries = options.libraries;
  o.cache = options.cache;
  codegen::CompileReport report;
  const Graph &g = model.graph();
  auto exe = codegen::compile(g, o, c.diag(), &report);
  if (failed(exe))
    c.raise("cannot compile the model");
  auto impl = std::make_shared<Executable::Impl>();
  impl->info = codegen::artifactInfo(codegen::GraphPorts::of(g), **exe, report, "");
  impl->exe = std::shared_ptr<const runtime::Executable>(exe.take());
  Executable e;
  e.impl_ = std::move(impl);
  return e;
}

Executable Executable::load(const std::string &path) {
  auto impl = std::make_shared<Impl>();
  std::unique_ptr<runtime::Executable> exe;
  if (runtime::Status st = runtime::loadArtifact(path, exe, &impl->info); !st.ok())
    throw Error(st.error);
  impl->exe = std::move(exe);
  Executable e;
  e.impl_ = std::move(impl);
  return e;
}

void Executable::save(const std::string &path) const {
  if (runtime::Status st = runtime::saveArtifact(*impl_->exe, impl_->info, path); !st.ok())
    throw Error(st.error);
}

std::vector<Tensor> Executable::run(const std::vector<Tensor> &inputs) const {
  std::vector<runtime::HostTensor> in, out;
  in.reserve(inputs.size());
  for (const Tensor &t : inputs)
    in.push_back(codegen::toHostTensor(t));
  if (runtime::Status st = impl_->exe->run(in, out); !st.ok())
    throw Error(st.error);
  std::vector<Tensor> result;
  result.reserve(out.size());
  for (const runtime::HostTensor &t : out)
    result.push_back(codegen::fromHostTensor(t));
  return result;
}

void Executable::runInto(const std::vector<Tensor> &inputs, std::vector<Tensor> &outputs) const {
  const std::vector<PortInfo> want = this->outputs();
  if (outputs.size() != want.size())
    throw Error("runInto: " + std::to_string(outputs.size()) +
                " output tensors given, the model has " + std::to_string(want.size()));
  for (size_t k = 0; k < want.size(); ++k)
    if (outputs[k].dtype() != want[k].dtype || outputs[k].shape() != want[k].shape)
      throw Error("runInto: output " + std::to_string(k) + " ('" + want[k].name + "') is " +
                  outputs[k].type().str() + ", the model writes " +
                  runtime::typeString(want[k].dtype, want[k].shape));
  std::vector<Tensor> got = run(inputs);
  for (size_t k = 0; k < got.size(); ++k)
    std::memcpy(outputs[k].mutableRawData(), got[k].rawData(), got[k].byteSize());
}

std::vector<PortInfo> Executable::inputs() const {
  return portsOf(impl_->info.inputs);
}
std::vector<PortInfo> Executable::outputs() const {
  return portsOf(impl_->info.outputs);
}
std::string Executable::summary() const {
  return impl_->info.summary;
}

} // namespace kiln
