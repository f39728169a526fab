//===- MemoryPlan.cpp - Greedy-by-size best-fit arena planning --*- C++ -*-===//
//
// See MemoryPlan.h for the algorithm and why.
//
//===----------------------------------------------------------------------===//
#include "codegen/MemoryPlan.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <numeric>

namespace kiln {
namespace {

uint64_t roundUp(uint64_t n, uint64_t alignment) {
  return (n + alignment - 1) / alignment * alignment;
}

/// An in-place chain: the intervals sharing one piece of memory.
struct Block {
  uint64_t bytes = 0;
  int32_t first = 0, last = 0;
  uint64_t offset = 0;
  std::vector<size_t> members;
};

bool overlapInTime(const Block &a, const Block &b) {
  return a.first <= b.last && b.first <= a.last;
}

} // namespace

MemoryPlan planMemory(std::span<const LiveInterval> intervals, uint64_t alignment) {
  MemoryPlan plan;
  plan.alignment = alignment;
  plan.offsets.assign(intervals.size(), 0);
  const size_t n = intervals.size();

  // Chains: follow `reuses` links that are valid (the reused interval ends
  // where this one starts, same rounded size, both used).
  std::vector<size_t> root(n);
  std::iota(root.begin(), root.end(), 0);
  auto validLink = [&](size_t i) {
    const LiveInterval &a = intervals[i];
    if (a.reuses < 0 || static_cast<size_t>(a.reuses) >= n || a.first < 0)
      return false;
    const LiveInterval &b = intervals[static_cast<size_t>(a.reuses)];
    return b.first >= 0 && b.last == a.first &&
           roundUp(b.bytes, alignment) == roundUp(a.bytes, alignment);
  };
  auto find = [&](size_t i) {
    while (root[i] != i)
      i = root[i] = root[root[i]];
    return i;
  };
  // An interval's memory goes to one taker at most (the first valid link):
  // two takers would both be live where it dies.
  std::vector<bool> taken(n, false);
  for (size_t i = 0; i < n; ++i)
    if (validLink(i) && !taken[static_cast<size_t>(intervals[i].reuses)]) {
      taken[static_cast<size_t>(intervals[i].reuses)] = true;
      root[find(i)] = find(static_cast<size_t>(intervals[i].reuses));
    }

  std::vector<Block> blocks;
  std::vector<int64_t> blockOf(n, -1);
  for (size_t i = 0; i < n; ++i) {
    const LiveInterval &iv = intervals[i];
    if (iv.first < 0)
      continue;
    plan.naiveBytes += roundUp(iv.bytes, alignment);
    size_t r = find(i);
    if (blockOf[r] < 0) {
      blockOf[r] = static_cast<int64_t>(blocks.size());
      blocks.push_back(Block{0, iv.first, iv.last, 0, {}});
    }
    Block &b = blocks[static_cast<size_t>(blockOf[r])];
    b.bytes = std::max(b.bytes, roundUp(iv.bytes, alignment));
    b.first = std::min(b.first, iv.first);
    b.last = std::max(b.last, iv.last);
    b.members.push_back(i);
  }

  // Places the blocks in `order`, each at the best-fitting gap among the
  // blocks already placed that overlap it in time; returns the arena size.
  auto place = [&](const std::vector<size_t> &order) {
    uint64_t arena = 0;
    std::vector<size_t> placed, neighbours;
    for (size_t bi : order) {
      Block &b = blocks[bi];
      neighbours.clear();
      for (size_t pi : placed)
        if (overlapInTime(blocks[pi], b))
          neighbours.push_back(pi);
      std::sort(neighbours.begin(), neighbours.end(),
                [&](size_t x, size_t y) { return blocks[x].offset < blocks[y].offset; });
      uint64_t end = 0, bestGap = std::numeric_limits<uint64_t>::max(), best = 0;
      bool found = false;
      for (size_t pi : neighbours) {
        const Block &p = blocks[pi];
        if (p.offset > end) {
          uint64_t gap = p.offset - end;
          if (gap >= b.bytes && gap < bestGap) {
            bestGap = gap;
            best = end;
            found = true;
          }
        }
        end = std::max(end, p.offset + p.bytes);
      }
      b.offset = found ? best : end;
      arena = std::max(arena, b.offset + b.bytes);
      placed.push_back(bi);
    }
    return arena;
  };
  // Largest first; among equals the longer-lived, then the earlier (the
  // first order), or the earlier alone (the second: equal buffers handed
  // from one step to the next, as between stacked layers, tile in time
  // order). The smaller arena wins; the first on a tie.
  std::vector<size_t> order(blocks.size());
  std::iota(order.begin(), order.end(), 0);
  std::vector<size_t> byTime = order;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Block &x = blocks[a], &y = blocks[b];
    if (x.bytes != y.bytes)
      return x.bytes > y.bytes;
    if (x.last - x.first != y.last - y.first)
      return x.last - x.first > y.last - y.first;
    return x.first < y.first;
  });
  std::sort(byTime.begin(), byTime.end(), [&](size_t a, size_t b) {
    const Block &x = blocks[a], &y = blocks[b];
    if (x.bytes != y.bytes)
      return x.bytes > y.bytes;
    if (x.first != y.first)
      return x.first < y.first;
    return x.last < y.last;
  });
  const uint64_t bySize = place(order);
  if (place(byTime) >= bySize)
    place(order);
  for (const Block &b : blocks) {
    plan.arenaBytes = std::max(plan.arenaBytes, b.offset + b.bytes);
    for (size_t m : b.members)
      plan.offsets[m] = b.offset;
  }

  // Lower bound: the largest live set over the steps (a sweep over block
  // starts and ends).
  std::vector<std::pair<int32_t, int64_t>> events;
  for (const Block &b : blocks) {
    events.emplace_back(b.first, static_cast<int64_t>(b.bytes));
    events.emplace_back(b.last + 1, -static_cast<int64_t>(b.bytes));
  }
  std::sort(events.begin(), events.end());
  int64_t live = 0;
  for (size_t i = 0; i < events.size();) {
    int32_t step = events[i].first;
    for (; i < events.size() && events[i].first == step; ++i)
      live += events[i].second;
    if (static_cast<uint64_t>(live) > plan.lowerBound) {
      plan.lowerBound = static_cast<uint64_t>(live);
      plan.peakStep = step;
    }
  }
  return plan;
}

std::string formatBytes(uint64_t bytes) {
  char buf[64];
  if (bytes < 1024)
    std::snprintf(buf, sizeof(buf), "%llu B", static_cast<unsigned long long>(bytes));
  else if (bytes < 1024 * 1024)
    std::snprintf(buf, sizeof(buf), "%.1f KiB", static_cast<double>(bytes) / 1024);
  else
    std::snprintf(buf, sizeof(buf), "%.2f MiB", static_cast<double>(bytes) / (1024.0 * 1024));
  return buf;
}

} // namespace kiln
