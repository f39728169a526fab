//===- KernelSharing.h - One kernel for kernels of several shapes -*- C++ -*-===//
//
// Note [Kernels shared across shapes] (KernelSharing.cpp): the static
// kernels of one compile that differ only in their sizes and index
// constants are compiled once, as one kernel with run-time sizes, and each
// step passes its own sizes.
//
//   std::vector<const Kernel *> kernels = ...;  // one per kernel step
//   std::vector<Schedule> schedules = ...;
//   for (const ShapeSharedKernel &s : shareAcrossShapes(kernels, schedules))
//     ... compile s.kernel once; step of kernels[s.members[i]] passes s.sizes[i]
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/KernelIR.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace kiln::codegen {

/// Compares `a` with `b` apart from their names, i64 constants, float
/// constants, extents and buffer dims: the buffers' count, dtypes and
/// ranks, the outer rank, the stages and, node by node from the stages'
/// roots, the ops, types and slots (and the values of other integer
/// constants). `map` gets, per node of `a` the stages read, the node of `b`
/// it stands for (-1 for a node no stage reads). False with `why` (what
/// differs) otherwise.
bool matchKernelStructure(const Kernel &a, const Kernel &b, std::vector<int32_t> &map,
                          std::string &why);

/// Whether a run-time size (an i64 cast to the constant's float type) can
/// stand for the float constant `f`: an integer below 2^53, not -0 (a cast
/// of 0 is +0), not NaN or infinite. Merging kernels here and at sampled
/// sizes (RunTimeSizes.cpp) both ask it.
bool sizeCanHold(double f);

/// One kernel with run-time sizes that computes several static kernels.
struct ShapeSharedKernel {
  Kernel kernel;
  /// Indices into shareAcrossShapes' `kernels`, at least two.
  std::vector<size_t> members;
  /// Per member: the values of kernel.symbols that make it that member
  /// (kernel.bind(sizes[i]) computes what kernels[members[i]] does).
  std::vector<std::vector<int64_t>> sizes;
};

/// The groups of `kernels` (static; schedules[i] is kernels[i]'s) that one
/// kernel with run-time sizes computes without losing what a static kernel
/// gets from its sizes (Note [Kernels shared across shapes]). Kernels in
/// no group are compiled as they are.
std::vector<ShapeSharedKernel> shareAcrossShapes(std::span<const Kernel *const> kernels,
                                                 std::span<const Schedule> schedules);

} // namespace kiln::codegen
