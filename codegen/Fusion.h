//===- Fusion.h - Grouping graph nodes into kernels -------------*- C++ -*-===//
//
// The fusion planner partitions a verified, statically shaped graph into
// groups, in a valid execution order:
//
//   - Kernel groups: nodes lowered together into one codegen Kernel
//     (codegen/KernelIR.h): chains of elementwise ops, data-movement ops
//     folded into their consumers' index maps, elementwise producers fused
//     into reductions and normalizations (softmax, log_softmax, layer_norm,
//     reduce_* as one multi-stage row kernel);
//   - Library groups: one anchor node that a library runs (conv,
//     conv_transpose, matmul, gemm, max_pool, avg_pool, global_avg_pool)
//     plus an epilogue of elementwise nodes applied to its result, which the
//     library applies as post-ops (bias add, activation, residual add, clip);
//   - Fallback groups: a single node run by its reference kernel (with a
//     warning naming it) when nothing else handles it.
//   - Constants and graph inputs are not groups.
//
// Every decision is recorded with its reason (FusionDecision) so that
// `kiln compile --explain-fusion` can print why two nodes were or were not
// fused. Legality and profitability rules are listed and numbered in
// Fusion.cpp's header comment.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/Backend.h"
#include "codegen/KernelIR.h"
#include "ir/Graph.h"

#include <functional>
#include <string>
#include <vector>

namespace kiln::codegen {

struct FusionGroup {
  enum class Kind { Kernel, Library, Fallback } kind = Kind::Kernel;
  /// Nodes in topological order. For Library groups nodes[0] is the anchor
  /// and the rest its epilogue chain, each consuming the previous result.
  /// A node is in the `nodes` of at most one group (none when every
  /// consumer recomputes it, see `recomputed`). A kernel group may own no
  /// node at all when it only stores a result of a multi-result node that
  /// another kernel owns (one kernel per materialized split result).
  std::vector<const Node *> nodes;
  /// Kernel groups only: nodes of other groups (or of none) that this
  /// kernel recomputes instead of reading their result from memory (index
  /// maps, cheap elementwise producers with users in several kernels; rule
  /// F8 of Fusion.cpp), in topological order. A node recomputed by every
  /// consumer and needed by no one from memory is in no group's `nodes`.
  std::vector<const Node *> recomputed;
  /// Values computed inside the group and used outside it (or graph
  /// outputs): the group's results, materialized in memory.
  std::vector<const Value *> outputs;
  /// Values from outside the group that it reads.
  std::vector<const Value *> inputs;
  /// Fallback groups: why no kernel or library runs the node (the compiler
  /// warns with it, naming the node).
  std::string reason;
};

/// One fusion decision between a producer and a consumer (or about one
/// node), for --explain-fusion. `producer` and `consumer` are node names
/// as printed (value names of their first results).
struct FusionDecision {
  std::string producer, consumer;
  bool fused = false;
  std::string rule;   ///< e.g. "F2 elementwise chain"
  std::string reason; ///< human-readable
};

struct FusionPlan {
  /// In a valid execution order (every group after the groups whose
  /// outputs it reads).
  std::vector<FusionGroup> groups;
  std::vector<FusionDecision> decisions;
  /// The groups (one line each, in execution order: kind, nodes, inputs,
  /// outputs) and then the decisions, one per line, in graph order.
  std::string explain() const;
};

struct FusionOptions {
  /// What the library backend anchors and applies as epilogues (its table,
  /// codegen/Backend.h); null: no library groups.
  const LibraryCapabilities *library = nullptr;
  /// Use library anchors (when false, the table's anchors become
  /// fallbacks; --no-libraries).
  bool useLibraries = true;
  /// Fuse at all; false gives one group per node (for bisecting fusion
  /// bugs; planFusion also falls back to it, with a warning, if its fused
  /// plan is inconsistent).
  bool fuse = true;
  /// When set, a library epilogue the table allows joins the group only if
  /// this says yes: `anchor`, the epilogue node `next`, and how many
  /// epilogues are already in the chain (a backend whose calls take fewer
  /// forms than its table's op kinds: the CUDA backend's, CudaLibrary.cpp).
  std::function<bool(const Node &anchor, const Node &next, size_t chained)> acceptEpilogue = {};
};

/// Partitions `g` (static shapes required; an error otherwise).
FailureOr<FusionPlan> planFusion(const Graph &g, const FusionOptions &opts, DiagnosticEngine &diag);

/// How the buffers of a kernel are laid out (default: all row-major).
struct KernelLayouts {
  /// Values (rank >= 3) whose buffers are channels-last (N, spatial..., C):
  /// loads and stores of them use those strides.
  std::function<bool(const Value *)> channelsLast;
  /// Pointwise kernels of rank >= 3 loop over N, spatial..., C (C inner),
  /// which makes channels-last buffers contiguous in the inner loop.
  bool iterateChannelsLast = false;
};

/// How `group`'s kernel lowered under `layouts` lays out its buffers, as a
/// key: empty when every buffer is row-major and the loops are; else
/// "cl:" then `i` when it iterates channels-last, and one letter per
/// buffer (inputs then outputs): `c` channels-last, `r` row-major. Two
/// lowerings of one group with the same key read and write the same
/// layouts (what a kernel shared over sizes must match, RunTimeSizes.h).
std::string layoutKey(const FusionGroup &group, const KernelLayouts &layouts);

/// Lowers a Kernel group to a Kernel whose inputs are group.inputs and
/// outputs are group.outputs, in that order. `split`, when given: the
/// first dim of a pointwise group's inner loop to use (kChooseSplit: choose
/// one by Note [Inner loop] in Lower.cpp), set to the one used.
inline constexpr size_t kChooseSplit = ~size_t(0);
FailureOr<Kernel> lowerGroup(const FusionGroup &group, DiagnosticEngine &diag,
                             const KernelLayouts &layouts = {}, size_t *split = nullptr);

} // namespace kiln::codegen
