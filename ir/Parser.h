//===- Parser.h - Reading the text form -------------------------*- C++ -*-===//
//
// Parses `.kir` text (see Printer.h and docs/IR.md) into a Module. Every
// error is a located diagnostic (`file:line:col: error: ...`); the parser
// never asserts on bad input. After parsing, the verifier runs on each graph
// (unless disabled), so a parsed module is always well-formed.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Graph.h"

#include <map>
#include <memory>
#include <string>
#include <string_view>

namespace kiln {

struct ParseOptions {
  /// Name used in locations and diagnostics.
  std::string filename = "<stdin>";
  /// Line number of the first line of `text` (for --split-input-file chunks).
  unsigned firstLine = 1;
  /// Run the verifier on each parsed graph.
  bool verify = true;
  /// The contents of blobs printed `elided`, by name (PrintOptions::blobsOut);
  /// null: an elided blob a constant refers to is an error.
  const std::map<std::string, Tensor> *blobs = nullptr;
};

FailureOr<std::unique_ptr<Module>> parseModule(std::string_view text, DiagnosticEngine &diag,
                                               const ParseOptions &opts = {});
/// Reads and parses a file; registers its text with `diag` for excerpts.
FailureOr<std::unique_ptr<Module>> parseFile(const std::string &path, DiagnosticEngine &diag,
                                             bool verify = true);

/// Parses one attribute value of `kind` in its text form (not tensors).
FailureOr<Attribute> parseAttributeLiteral(AttrKind kind, std::string_view text,
                                           DiagnosticEngine &diag);
/// Parses a module of exactly one graph and returns it as a region (the
/// body of an `if` or `loop`, Note [Regions] in docs/IR.md).
FailureOr<GraphAttr> parseRegion(std::string_view text, DiagnosticEngine &diag,
                                 const ParseOptions &opts = {});
/// Parses a tensor type such as `f32[N,3,224,224]`.
FailureOr<TensorType> parseTensorType(std::string_view text, DiagnosticEngine &diag);

} // namespace kiln
