//===- OnnxImporter.h - Importing ONNX models into Kiln IR -----*- C++ -*-===//
//
// The ONNX frontend: reads a ModelProto (a file, or bytes in memory) and
// builds one Kiln graph from its main graph. Every ONNX node becomes one or
// more ops of the op table (see docs/ONNX.md for the mapping); initializers
// and Constant nodes become `constant` nodes named after the ONNX tensor.
// Nodes whose inputs are all constants are evaluated at import time with the
// reference kernels, so the shape-computing subgraphs that exporters leave
// (Shape -> Gather -> Unsqueeze -> Concat -> Reshape, ConstantOfShape, Range,
// Where on shapes) fold into static attributes.
//
// Every problem in the file (corrupt bytes, an unsupported opset, an op or
// attribute Kiln lacks, a dangling input, a cycle, missing external data) is
// a diagnostic located at the ONNX node (`model.onnx: node 'Conv_3'`), never
// a crash; the import then fails.
//
//   DiagnosticEngine diag;
//   OnnxImportOptions opts;
//   opts.dimBindings["batch"] = 1;
//   FailureOr<std::unique_ptr<Module>> m = importOnnx("model.onnx", diag, opts);
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Diagnostics.h"
#include "ir/Graph.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

namespace kiln {

/// What becomes of a dynamic dim (an ONNX `dim_param`, or a dim with neither
/// a value nor a param) that no binding makes static.
enum class OnnxDynamicDims {
  /// `dim_param: "batch"` becomes the symbol `batch`; an unnamed one `?`.
  Symbolic,
  /// Every dynamic dim becomes `?`.
  Anonymous,
  /// A dynamic dim left unbound is an error naming the input and the dim.
  Error,
};

struct OnnxImportOptions {
  /// `dim_param` name -> size: those dims become static. A name that no
  /// graph input uses is an error (it is most likely a typo).
  std::map<std::string, int64_t> dimBindings;
  OnnxDynamicDims dynamicDims = OnnxDynamicDims::Symbolic;
  /// A node whose inputs are all constants is evaluated at import time when
  /// each of its results has at most this many elements; bigger results
  /// stay nodes (later passes may fold them). 0 disables the evaluation
  /// (`Shape` of a static value still becomes a constant).
  int64_t foldElementLimit = int64_t(1) << 20;
  /// Removes nodes whose results nobody uses (dead branches of the ONNX
  /// graph, constants consumed by folding).
  bool removeDeadNodes = true;
  /// Folder against which external tensor data (`location`) is resolved;
  /// importOnnx(path) sets it to the model's folder when empty.
  std::string externalDataDir;
  /// Name of the model in diagnostics and locations (importOnnx(path) uses
  /// the path when empty).
  std::string modelName;
};

/// Imports the ONNX model in the file `path`. On failure every problem has
/// been reported to `diag`.
FailureOr<std::unique_ptr<Module>> importOnnx(const std::string &path, DiagnosticEngine &diag,
                                              const OnnxImportOptions &opts = {});

/// Imports a serialized ModelProto held in memory. External data is read
/// relative to `opts.externalDataDir` (the current folder when empty).
FailureOr<std::unique_ptr<Module>> importOnnxBytes(std::string_view bytes, DiagnosticEngine &diag,
                                                   const OnnxImportOptions &opts = {});

/// Reads a serialized ONNX TensorProto (the `input_K.pb` / `output_K.pb`
/// files of an ONNX test_data_set folder).
FailureOr<Tensor> readOnnxTensorFile(const std::string &path, DiagnosticEngine &diag);

/// True when `path` looks like an ONNX model to the CLI (extension `.onnx`).
bool isOnnxPath(std::string_view path);

} // namespace kiln
