//===- Printer.h - The text form of graphs ----------------------*- C++ -*-===//
//
// Prints modules and graphs in the canonical `.kir` text form that Parser.h
// reads back (see docs/IR.md for the grammar):
//
//   graph @mlp(%x: f32[64,784]) -> (f32[64,10]) {
//     %w0 = constant @fc0.weight : f32[512,784]
//     %0 = matmul(%x, %w0) : f32[64,512]
//     %1 = relu(%0) : f32[64,512]
//     return %1
//   }
//
//   blobs {
//     @fc0.weight = "<base64 of the little-endian bytes>"
//   }
//
// Output is deterministic: value names come from their name hints or from a
// per-graph counter, attributes are sorted by name and omitted when equal to
// their default, small unnamed constants print inline, named or large ones
// by reference to a blob.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Graph.h"

#include <map>
#include <string>

namespace kiln {

struct PrintOptions {
  /// Append ` loc(...)` to every node.
  bool printLocs = false;
  /// Print blob references but not the blob contents (`@w = elided`).
  bool elideBlobs = false;
  /// With elideBlobs: receives every blob's contents by name, for a file
  /// that keeps them apart (a symbolic artifact, codegen/SymbolicArtifact.h;
  /// ParseOptions::blobs reads them back).
  std::map<std::string, Tensor> *blobsOut = nullptr;
  /// Unnamed constants with at most this many elements print inline.
  int64_t inlineLimit = 16;
};

std::string printModule(const Module &m, const PrintOptions &opts = {});
/// One graph, followed by the blobs it references.
std::string printGraph(const Graph &g, const PrintOptions &opts = {});

/// `%name`, quoted when the name has characters outside [A-Za-z0-9_.$].
std::string valueRef(const std::string &name);

std::string base64Encode(const void *data, size_t size);
/// Decodes into `out`; false on malformed input.
bool base64Decode(std::string_view text, std::string &out);

} // namespace kiln
