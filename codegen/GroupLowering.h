//===- GroupLowering.h - Lowering one kernel group ---------------*- C++ -*-===//
//
// Private to codegen/: the state of lowering one fusion group to a Kernel
// (Lower.cpp: the iteration space, loads, stages and the driver;
// LowerNode.cpp: each node's value at an index).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/AffineIndex.h"
#include "codegen/Fusion.h"
#include "codegen/Internal.h"

#include <map>
#include <optional>
#include <set>
#include <string>

namespace kiln::codegen::lowering {

using detail::RowSpace;

/// `axis` in [0, rank), or nullopt when it is outside [-rank, rank).
inline std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

/// Lowers one group with a given split of the pointwise domain.
class GroupLowering {
public:
  GroupLowering(const FusionGroup &g, DiagnosticEngine &diag, const KernelLayouts &layouts = {})
      : g_(g), diag_(diag), ib_(k_.dag), layouts_(layouts) {}

  /// `split`: for pointwise groups, the first domain dim in the inner loop.
  FailureOr<Kernel> run(size_t split);
  /// Loads whose offset is neither contiguous nor invariant in the inner
  /// index (after run()).
  int numStridedLoads() const { return stridedLoads_; }
  /// Integer divisions and remainders that depend on the inner index, in
  /// the kernel run() built (Note [Inner loop]).
  int numInnerDivisions() const { return innerDivisions_; }
  /// The rank of the pointwise domain, or nullopt for row kernels.
  std::optional<size_t> pointwiseRank();

private:
  ScalarRef valueAt(const Value *v, const Index &idx);
  ScalarRef computeNode(const Node &n, const Value *v, const Index &idx);
  ScalarRef stageNodeAt(const Node &n, const Index &idx);
  void createStages(const Node &n);
  ScalarRef load(const Value *v, const Index &idx);
  Index broadcastIndex(const Index &idx, const std::vector<int64_t> &operandShape);
  Affine linearize(const Index &idx, const std::vector<int64_t> &shape);
  /// The element offset of `idx` in `v`'s buffer: row-major, or
  /// channels-last when layouts_ says so.
  Affine offsetIn(const Value *v, const Index &idx);
  Index delinearize(const Affine &flat, const std::vector<int64_t> &shape);
  Affine clampIndex(const Affine &a, int64_t max);
  ScalarRef fail(const std::string &msg) {
    if (!failed_)
      diag_.emitError(loc()) << "cannot lower kernel: " << msg;
    failed_ = true;
    return dag().constInt(DType::I64, 0);
  }
  Location loc() const { return g_.nodes.empty() ? Location() : g_.nodes.back()->loc(); }
  ScalarDag &dag() { return k_.dag; }
  bool dependsOnInner(int32_t id);
  int countInnerDivisions();

  const FusionGroup &g_;
  DiagnosticEngine &diag_;
  Kernel k_;
  IndexBuilder ib_;
  bool failed_ = false;
  std::set<const Node *> members_;
  std::map<const Value *, int32_t> inputSlot_;
  std::map<std::pair<const Value *, std::string>, ScalarRef> memo_;
  std::map<const Node *, std::vector<int32_t>> stagesOf_;
  std::optional<RowSpace> space_;
  Index full_;  // the current point in the domain / row space
  Index outer_; // outer atoms, one per outer dim
  ScalarRef innerNode_;
  std::map<int32_t, bool> innerDeps_;
  int stridedLoads_ = 0;
  int innerDivisions_ = 0;
  KernelLayouts layouts_;
};

} // namespace kiln::codegen::lowering
