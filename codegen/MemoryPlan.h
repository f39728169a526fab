//===- MemoryPlan.h - Packing buffer lifetimes into one arena ---*- C++ -*-===//
//
// The last planning step of the compiler: given each intermediate buffer's
// size and lifetime over the schedule (the steps that write and read it),
// assign every buffer an offset in one arena so that buffers live at the
// same time never overlap, except a buffer that takes over the memory of an
// input dying at the step that writes it (in-place reuse, which the
// compiler only asks for where the step was compiled to allow it).
//
// Algorithm: greedy by size with best fit (Pisarchyk & Lee, "Efficient
// Memory Management for Deep Neural Net Inference", 2020; TFLite's arena
// planner uses it). In-place chains are merged into one block first. Blocks
// are placed largest first; each goes into the smallest gap, among the
// blocks already placed whose lifetimes overlap its own, that fits it, or
// above all of them. Equal sizes are ordered two ways, longer-lived first
// and earlier first, and the smaller arena is kept (stacked recurrent
// layers pass equal buffers from step to step: only the second tiles them
// at the lower bound). Why this one: placing large buffers first leaves the
// small ones to fill the holes between them, and best fit keeps large gaps
// for later large blocks. On the zoo it lands within a few percent of the
// lower bound (see `kiln compile --report-memory`), in O(n^2 log n) for n
// buffers, milliseconds for thousands. Offset-assignment is NP-hard in
// general; first-fit in schedule order (the obvious alternative) does
// measurably worse on networks with a few large activations.
//
// The plan reports three sizes: the arena, the lower bound (the largest set
// of bytes live at one step: no placement can use less) and the naive sum
// (every buffer its own memory). Executable::checkMemory() verifies a plan
// independently, by walking the steps.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace kiln {

/// One buffer to place.
struct LiveInterval {
  uint64_t bytes = 0;
  /// First and last step that accesses it (inclusive); first == -1: no step
  /// does, and the buffer needs no memory.
  int32_t first = -1, last = -1;
  /// In-place: the index of the interval whose memory this buffer takes
  /// over (that interval ends at `first`, where this one is written), or -1.
  int32_t reuses = -1;
};

struct MemoryPlan {
  /// Offset of each interval (0 for unused ones).
  std::vector<uint64_t> offsets;
  uint64_t alignment = 64;
  /// Bytes of the arena (the highest end of a placed block).
  uint64_t arenaBytes = 0;
  /// The most bytes live at one step (in-place chains count once).
  uint64_t lowerBound = 0;
  /// Every buffer in its own memory.
  uint64_t naiveBytes = 0;
  /// The step where the lower bound is reached.
  int32_t peakStep = -1;
};

/// Places `intervals` (sizes rounded up to `alignment`, a power of two).
/// In-place links must point at an interval ending where the linking one
/// starts, with the same rounded size, and an interval is taken over by one
/// link at most (the first); other links are ignored (placed apart).
MemoryPlan planMemory(std::span<const LiveInterval> intervals, uint64_t alignment = 64);

/// "1.50 MiB" style.
std::string formatBytes(uint64_t bytes);

} // namespace kiln
