//===- ModelLoader.cpp - Loading a model for a CLI command ------*- C++ -*-===//
//
// One way for every subcommand to read its model: a .kir file or an ONNX
// model (by extension), then the graph the user named (or the first).
//
//===----------------------------------------------------------------------===//
#include "frontend/onnx/OnnxImporter.h"
#include "ir/Parser.h"
#include "tools/Commands.h"

namespace kiln::tools {

FailureOr<LoadedModel> loadModel(const std::string &path, const std::string &graphName,
                                 const std::map<std::string, int64_t> &onnxDims,
                                 DiagnosticEngine &diag) {
  FailureOr<std::unique_ptr<Module>> module = failure();
  if (isOnnxPath(path)) {
    OnnxImportOptions opts;
    opts.dimBindings = onnxDims;
    module = importOnnx(path, diag, opts);
  } else {
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

} // namespace kiln::tools
