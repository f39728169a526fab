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

namespace kiln::codegen {

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
/// A kernel group that is one channel concat of f32 tensors of rank 3 to 5.
bool isChannelConcatGroup(const FusionGroup &group);
} // namespace detail

} // namespace kiln::codegen

#endif // KILN_CODEGEN_EXECUTABLEBUILDER_H
