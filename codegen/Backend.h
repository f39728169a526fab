//===- Backend.h - What a library backend can run, as data -----*- C++ -*-===//
//
// A library backend (oneDNN for CPUs today; cuBLASLt/cuDNN later) owns one
// table of the ops it runs: which it anchors (a group's first node, run as
// one library call), which it applies as an epilogue after an anchor (a
// post-op), and which of its anchors read and write channels-last buffers.
// The fusion planner and the compiler driver ask the table; they keep no op
// lists of their own. A backend's table lives next to the code that maps
// the ops (codegen/cpu/dnnl/Epilogue.cpp for oneDNN), and a test compiles
// every row of it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Ops.h"

#include <span>
#include <string>
#include <vector>

namespace kiln::codegen {

/// How library convolutions and pools choose their activation layout.
enum class LibraryLayout {
  /// Plain row-major (nchw) activations, no reorders.
  Plain,
  /// The layout the library prefers (oneDNN: blocked on AVX2), with
  /// reorders; the default (Note [Conv layouts] in
  /// codegen/cpu/dnnl/OneDnnSteps.cpp).
  Blocked,
  /// Build both when they differ, time them, keep the faster.
  Measure,
};

/// Which implementation runs a recurrent layer (lstm, gru, rnn).
enum class RecurrentChoice {
  /// The library's primitive (oneDNN's RNN primitives).
  Library,
  /// Kiln's own kernel (runtime/dnnl/RecurrentKernel.h), where it computes
  /// the cell; else the library's.
  Kiln,
  /// Build both, time them, keep the faster.
  Measure,
};

/// One row of a backend's table.
struct LibraryOpSupport {
  OpKind op;
  /// Starts a library group (on f32).
  bool anchor = false;
  /// Applied after an anchor, in epilogue order. Binary ones take their
  /// other operand from outside the group, broadcastable to the anchor's
  /// result.
  bool epilogue = false;
  /// As an anchor, reads its src and writes its result channels-last.
  bool channelsLast = false;
  /// As an anchor (a matmul of scores), also computes a softmax over the
  /// last axis of its epilogue's result and the matmul of that by a value
  /// tensor: attention as one call (Note [Attention calls] in
  /// codegen/Fusion.cpp).
  bool attention = false;
};

class LibraryCapabilities {
public:
  LibraryCapabilities(std::string name, std::span<const LibraryOpSupport> rows);

  const std::string &name() const { return name_; }
  bool anchors(OpKind k) const { return row(k).anchor; }
  bool takesEpilogue(OpKind k) const { return row(k).epilogue; }
  bool channelsLast(OpKind k) const { return row(k).channelsLast; }
  bool attention(OpKind k) const { return row(k).attention; }
  /// The rows, in the backend's order.
  std::span<const LibraryOpSupport> rows() const { return rows_; }

private:
  const LibraryOpSupport &row(OpKind k) const { return byKind_[static_cast<size_t>(k)]; }

  std::string name_;
  std::vector<LibraryOpSupport> rows_;
  std::vector<LibraryOpSupport> byKind_;
};

} // namespace kiln::codegen
