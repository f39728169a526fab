//===- ExecutableBuilder.h - Fusion groups to runtime steps ----*- C++ -*-===//
//
// The second half of compile() (Compiler.h): from a prepared graph and its
// fusion plan to a finalized runtime::Executable. Used by Compiler.cpp
// only.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_CODEGEN_EXECUTABLEBUILDER_H
#define KILN_CODEGEN_EXECUTABLEBUILDER_H

#include "codegen/Compiler.h"
#include "codegen/Fusion.h"
#include "codegen/cpu/CpuTarget.h"

#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kiln::codegen {

/// Why a node of a group with a zero-sized operand or result runs on its
/// reference kernel (the report's fallback line).
inline constexpr const char *kEmptyFallbackReason =
    "it has a zero-sized operand or result (no kernel or library call is built for empty "
    "tensors)";
/// The one warning for `count` such nodes, `first` (`%name`) the first.
std::string emptyFallbacksWarning(size_t count, const std::string &first);

/// Seconds from `t` to now, for the report's phases.
double secondsSince(std::chrono::steady_clock::time_point t);

/// Phases 4 and 5 of compile(): each group of `plan` becomes steps (JIT
/// kernels compiled for `target`, library calls, compiled regions, reference
/// fallbacks), then the memory plan places the buffers. `g` is kept alive by
/// the Executable; its constants' tensors are dropped as the steps take
/// them. Fills the report's target, phases, calls, fallbacks and memory.
FailureOr<std::unique_ptr<runtime::Executable>>
buildExecutable(std::shared_ptr<Graph> g, const FusionPlan &plan, const cpu::CpuTarget &target,
                const CompileOptions &options, DiagnosticEngine &diag, CompileReport &report);

namespace detail {
// Layout facts about fusion groups (ChannelsLastGroups.cpp).
/// A pointwise kernel group (no reduction or other row stage) whose
/// outputs all have one shape of rank 3 to 5.
bool isChannelsLastKernel(const FusionGroup &group);
/// Whether two shapes of rank >= 3 differ at most in dim 1.
bool sameExceptChannels(const Shape &a, const Shape &b);
/// Whether kernel group `kg` can iterate channels-last with its input `v`
/// stored channels-last.
bool readsChannelsLast(const FusionGroup &kg, const Value *v);
/// The layouts of kernel group `kg`'s buffers when `channelsLast` holds the
/// values stored channels-last: those inputs so, and when it reads one of
/// them contiguously (readsChannelsLast) it iterates channels-last and
/// writes its outputs so. Asked by the builder and by the lowering of
/// kernels shared over sizes. `kg` and `channelsLast` must outlive it.
KernelLayouts kernelLayouts(const FusionGroup &kg, const std::set<const Value *> &channelsLast);
/// Anchors whose oneDNN calls read and write channels-last buffers.
bool isChannelsLastAnchor(const Node *n);

/// Which library results a compile stores channels-last (Note
/// [Channels-last buffers]), from the fusion plan: asked by the builder and
/// by the lowering of kernels shared over sizes (Note [Shared kernels in
/// channels-last] in RunTimeSizes.cpp). `g` and `plan` must outlive it.
class ChannelsLastPlan {
public:
  ChannelsLastPlan(const Graph &g, const FusionPlan &plan, bool useLibraries);
  /// Whether `v`, the result of a library call being built, should be
  /// stored channels-last: every use reads it as the src of a conv or pool
  /// call, as the residual added in such a call's epilogue, as an operand
  /// of a channel concat or as an input of a kernel iterating
  /// channels-last that reads it contiguously.
  bool predict(const Value *v) const;
  /// Whether `n` is a concat that is a kernel group of its own along the
  /// channels (isChannelConcatGroup).
  bool isChannelConcat(const Node *n) const { return channelConcats_.count(n) > 0; }

private:
  bool useLibraries_;
  std::set<const Value *> graphOutputs_;
  /// Library nodes: their group and position in it.
  std::unordered_map<const Node *, std::pair<const FusionGroup *, size_t>> libraryPosition_;
  /// Nodes of kernel groups (owned or recomputed): their groups.
  std::unordered_map<const Node *, std::vector<const FusionGroup *>> kernelGroupsOf_;
  std::set<const Node *> channelConcats_;
};
/// A kernel group that is one channel concat of f32 tensors of rank 3 to 5.
bool isChannelConcatGroup(const FusionGroup &group);
} // namespace detail

} // namespace kiln::codegen

#endif // KILN_CODEGEN_EXECUTABLEBUILDER_H
