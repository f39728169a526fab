//===- Internal.h - Helpers shared by the fusion planner and lowering ----===//
//
// Private to codegen/ (not codegen/cpu/): how ops are classified for fusion
// (pointwise, index map, reduction stage), the row space of a reduction or
// normalization, and the printed names of values.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/KernelIR.h"
#include "ir/Graph.h"

#include <algorithm>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln::codegen {
struct FusionGroup;
} // namespace kiln::codegen

namespace kiln::codegen::detail {

/// Sizes of a statically shaped value.
inline std::vector<int64_t> sizesOf(const Value *v) {
  return staticSizes(v->type().shape);
}

/// Elementwise ops and batch_norm (inference batch norm is per-channel
/// elementwise arithmetic).
inline bool isPointwiseNode(const Node &n) {
  return n.hasTrait(Elementwise) || n.kind() == OpKind::BatchNorm;
}

/// The most inputs one element of a lowered resize may read (the product of
/// its taps per dim): an antialiased downscale by 1/32 reads 128 per dim,
/// whose product a kernel would unroll; beyond this it runs the reference.
constexpr int64_t kMaxResizeTaps = 256;

/// Whether a resize's taps stay within kMaxResizeTaps.
bool resizeLowerable(const Node &n);

/// Data movement the lowering folds into index arithmetic.
inline bool isIndexMapNode(const Node &n) {
  switch (n.kind()) {
  case OpKind::Reshape:
  case OpKind::Flatten:
  case OpKind::Squeeze:
  case OpKind::Unsqueeze:
  case OpKind::Transpose:
  case OpKind::Expand:
  case OpKind::Slice:
  case OpKind::Concat:
  case OpKind::Pad:
  case OpKind::Split:
  case OpKind::Gather:
    return true;
  case OpKind::Resize:
    return resizeLowerable(n);
  default:
    return false;
  }
}

/// Index maps that keep the row-major order of the elements (a new shape
/// for the same bytes).
inline bool isRowMajorViewNode(const Node &n) {
  switch (n.kind()) {
  case OpKind::Reshape:
  case OpKind::Flatten:
  case OpKind::Squeeze:
  case OpKind::Unsqueeze:
    return true;
  default:
    return false;
  }
}

/// Reductions and normalizations that become stages of a row kernel.
inline bool isStageNode(const Node &n) {
  switch (n.kind()) {
  case OpKind::ReduceSum:
  case OpKind::ReduceMean:
  case OpKind::ReduceMax:
  case OpKind::ReduceMin:
  case OpKind::ReduceProd:
  case OpKind::ArgMax:
  case OpKind::Softmax:
  case OpKind::LogSoftmax:
  case OpKind::LayerNorm:
    return true;
  default:
    return false;
  }
}

/// Where a row kernel iterates: the input shape of its reductions and the
/// reduced dims. Kept dims run as outer points, reduced dims as the inner
/// loop.
struct RowSpace {
  std::vector<int64_t> shape;
  std::vector<bool> reduced;
  bool operator==(const RowSpace &o) const = default;

  /// The shape of a per-row value with the reduced dims kept as 1.
  std::vector<int64_t> keptShape() const {
    std::vector<int64_t> s = shape;
    for (size_t d = 0; d < s.size(); ++d)
      if (reduced[d])
        s[d] = 1;
    return s;
  }
  /// The shape of a per-row value with the reduced dims dropped.
  std::vector<int64_t> droppedShape() const {
    std::vector<int64_t> s;
    for (size_t d = 0; d < shape.size(); ++d)
      if (!reduced[d])
        s.push_back(shape[d]);
    return s;
  }
  bool isRowShape(const std::vector<int64_t> &s) const {
    return s == keptShape() || s == droppedShape();
  }
};

/// The row space of a stage node (see isStageNode); nullopt otherwise.
std::optional<RowSpace> rowSpaceOf(const Node &n);

/// The cost of recomputing a node per element: its scalar operations with
/// transcendental primitives (exp, log, tanh, erf, sin, cos, pow) as 10;
/// index maps cost 0 except those that select between loads (concat, pad,
/// gather, resize).
int64_t pointwiseCost(const Node &n);

/// True when `v` is defined by a constant whose elements are all equal (it
/// is inlined into kernels as a literal).
bool isSplatConstant(const Value *v);

/// The names values print with (graph inputs and results, as the Printer
/// numbers unnamed ones), without the `%`.
std::unordered_map<const Value *, std::string> valueNames(const Graph &g);

/// A value's name with every character but letters and digits as `_`: the
/// part of a kernel's name after `kernel_` (Lower.cpp).
std::string sanitizedName(const std::string &s);

/// A max_pool or avg_pool node as a kernel on channels-last buffers (its
/// input and output in memory order: [N, spatial..., C]), or failure with
/// `why`: Note [Pools as kernels] in PoolKernel.cpp.
FailureOr<Kernel> channelsLastPoolKernel(const Node &n, std::string &why);

/// A kernel group made only of concats, reshapes, transposes and slices, as
/// copies of runs of elements from its inputs into its output: Note [Concat
/// as copies] in CopyConcat.cpp. `plainMoves`: also a group with fewer
/// concat operands and at most a few runs, a decision that depends on the
/// sizes (so not where kernels are shared across sizes).
struct CopyConcat {
  /// Elements [from, from + count) of sources[source] (row-major) are the
  /// output's elements [to, to + count).
  struct Run {
    int32_t source;
    int64_t from, to, count;
  };
  std::vector<const Value *> sources; ///< group inputs
  std::vector<Run> runs;              ///< ordered by `to`; they cover the output once
};
std::optional<CopyConcat> matchCopyConcat(const FusionGroup &group, bool plainMoves);

/// The kernel split into one kernel per operand of the concat its single
/// store selects from along an outer loop index, or empty when it does not
/// have that form: Note [Concat pieces] in ConcatPieces.cpp.
std::vector<Kernel> splitConcatPieces(const Kernel &k);

/// A gather of a kernel group whose indices the group reads from memory:
/// Note [Gather indices checked] in IndexChecks.cpp.
struct GatherIndexCheck {
  const Value *indices;
  int64_t axis, size;
  std::string node; ///< for errors: the node's location prefix
};
std::vector<GatherIndexCheck> gatherIndexChecks(const FusionGroup &group);

/// `s` with its grain and parallel flag for a kernel of `numOuter` outer
/// points of `inner` iterations: about 16K inner iterations per thread
/// chunk keeps tiny kernels serial (a parallel region costs 1-2 us, see
/// Note [Threads] in the runtime).
inline Schedule threadSchedule(int64_t numOuter, int64_t inner, Schedule s = {}) {
  s.grain = std::max<int64_t>(1, (int64_t(1) << 14) / std::max<int64_t>(1, inner));
  s.parallel = numOuter >= 2 * s.grain;
  return s;
}

} // namespace kiln::codegen::detail
