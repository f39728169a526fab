//===- KernelSharing.cpp - One kernel for kernels of several shapes -------===//
//
// matchKernelStructure and shareAcrossShapes (see KernelSharing.h and the
// Note below).
//
//===----------------------------------------------------------------------===//
#include "codegen/KernelSharing.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>

namespace kiln::codegen {

// Note [Kernels shared across shapes]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A model repeats its blocks at several widths: EfficientNet-B0's 66
// kernels are 30 different kernels, and only 4 apart from their sizes
// (SiLU, squeeze-excite, ... per stage width); swin_t's 49 are 23. LLVM
// takes 5-25 ms per kernel on this machine, most of a cold compile (issue
// 14 asks for at most 3x ONNX Runtime's session creation). So the kernel
// steps of a compile are grouped by structure (matchKernelStructure: equal
// but for names, i64 constants, float constants that are integers, extents
// and buffer dims), and each group of two or more is compiled once, as a
// kernel with run-time sizes (Note [Kernels with run-time sizes] in
// RunTimeSizes.cpp): every quantity that differs between the members
// becomes a symbol (one per distinct column of values), and each step
// passes its member's values. A kernel is its group's only member where
// sharing would cost it what a static kernel gets from its sizes:
//   - the inner index reaches something other than index arithmetic (add,
//     sub, mul): a concat or pad along the inner axis (its inner loop is
//     split where a condition changes), a resize (its inner-index values
//     are tabulated), an iota cast to floats, an argmax;
//   - a divisor (div, rem) reads a quantity that differs: a division by a
//     run-time value is an instruction of 20-40 cycles, by a constant a
//     multiply-shift;
//   - a float constant that differs is not an integer (a size cannot hold it).
// What sharing still costs: the inner trip count is a run-time value (a
// vector loop and a remainder, where a static kernel may unroll a short
// one), and outer indices are carried as an odometer rather than divided
// out by constants (EmitLLVM.cpp). bench/STARTUP.md and bench/RESULTS.md
// measure the two sides. Each member runs exactly the arithmetic of its own
// static kernel (kernel.bind(sizes) is that kernel up to the DAG's
// numbering), so results are unchanged.

bool matchKernelStructure(const Kernel &a, const Kernel &b, std::vector<int32_t> &map,
                          std::string &why) {
  auto sameBuffers = [&](const std::vector<KernelBuffer> &x, const std::vector<KernelBuffer> &y) {
    if (x.size() != y.size())
      return false;
    for (size_t i = 0; i < x.size(); ++i)
      if (x[i].dtype != y[i].dtype || x[i].shape.size() != y[i].shape.size())
        return false;
    return true;
  };
  if (!sameBuffers(a.inputs, b.inputs) || !sameBuffers(a.outputs, b.outputs)) {
    why = "the buffers' count, dtype or rank differ";
    return false;
  }
  if (a.outer.size() != b.outer.size()) {
    why = "the outer loops' count differs";
    return false;
  }
  if (a.stages.size() != b.stages.size()) {
    why = "the stages' count differs";
    return false;
  }
  // The DAGs are compared as the expressions the stages read, node by
  // node from the roots: a DAG holds each constant once, so two constants
  // of `a` may be one node of `b` (a size equal to a constant). Each node
  // of `a` must meet one node of `b`.
  const auto &na = a.dag.nodes(), &nb = b.dag.nodes();
  map.assign(na.size(), -1);
  std::vector<std::pair<ScalarRef, ScalarRef>> todo;
  auto pair = [&](ScalarRef x, ScalarRef y) {
    if (x.valid() != y.valid())
      return false;
    if (x.valid())
      todo.emplace_back(x, y);
    return true;
  };
  for (size_t s = 0; s < a.stages.size(); ++s) {
    const Stage &x = a.stages[s], &y = b.stages[s];
    bool same = x.kind == y.kind && x.reduce == y.reduce && x.outerOnly == y.outerOnly &&
                x.stores.size() == y.stores.size() && pair(x.value, y.value);
    for (size_t i = 0; same && i < x.stores.size(); ++i)
      same = x.stores[i].output == y.stores[i].output &&
             pair(x.stores[i].offset, y.stores[i].offset) &&
             pair(x.stores[i].value, y.stores[i].value);
    if (!same) {
      why = "stage " + std::to_string(s) + " differs";
      return false;
    }
  }
  while (!todo.empty()) {
    auto [x, y] = todo.back();
    todo.pop_back();
    int32_t &m = map[static_cast<size_t>(x.id)];
    if (m == y.id)
      continue;
    const ScalarNode &p = na[static_cast<size_t>(x.id)], &q = nb[static_cast<size_t>(y.id)];
    const std::string node = "node %" + std::to_string(x.id) + " (" + scalarOpName(p.op) + ") ";
    if (m != -1) {
      why = node + "stands for two nodes";
      return false;
    }
    m = y.id;
    if (p.op != q.op || p.type != q.type || p.slot != q.slot) {
      why = node + "differs";
      return false;
    }
    if (p.op == ScalarOp::ConstInt && p.type != DType::I64 && p.ivalue != q.ivalue) {
      why = node + "is a " + std::string(dtypeName(p.type)) + " constant that differs";
      return false;
    }
    for (unsigned i = 0; i < scalarArity(p.op); ++i)
      todo.emplace_back(p.args[i], q.args[i]);
  }
  return true;
}

bool sizeCanHold(double f) {
  return std::isfinite(f) && std::floor(f) == f && std::fabs(f) < 0x1p53 &&
         !(f == 0 && std::signbit(f));
}

namespace {

bool sameBits(double a, double b) {
  return std::memcmp(&a, &b, sizeof(double)) == 0;
}

/// A key equal for kernels matchKernelStructure may match (and for those
/// it may not, sometimes): the structure with the values that may differ
/// left out, and what of the schedule decides the code.
std::string structureKey(const Kernel &k, const Schedule &s) {
  const auto &nodes = k.dag.nodes();
  std::vector<uint64_t> h(nodes.size());
  auto mix = [](uint64_t x, uint64_t v) { return (x ^ v) * 0x100000001b3ull; };
  for (size_t i = 0; i < nodes.size(); ++i) {
    const ScalarNode &n = nodes[i];
    uint64_t x = mix(
        mix(mix(0xcbf29ce484222325ull, static_cast<uint64_t>(n.op)), static_cast<uint64_t>(n.type)),
        static_cast<uint64_t>(n.slot));
    if (n.op == ScalarOp::ConstInt && n.type != DType::I64)
      x = mix(x, static_cast<uint64_t>(n.ivalue));
    if (n.op == ScalarOp::ConstFloat && !sizeCanHold(n.fvalue))
      x = mix(x, std::hash<double>()(n.fvalue));
    for (unsigned a = 0; a < scalarArity(n.op); ++a)
      x = mix(x, h[static_cast<size_t>(n.args[a].id)]);
    h[i] = x;
  }
  auto of = [&](ScalarRef r) {
    return r.valid() ? std::to_string(h[static_cast<size_t>(r.id)]) : "-";
  };
  std::string key = std::to_string(k.outer.size()) + ";" + std::to_string(s.vectorWidth) + ";";
  for (int32_t in : s.inPlaceInput)
    key += std::to_string(in) + ",";
  for (const auto *buffers : {&k.inputs, &k.outputs}) {
    key += "|";
    for (const KernelBuffer &b : *buffers)
      key += std::string(dtypeName(b.dtype)) + std::to_string(b.shape.size()) + ",";
  }
  for (const Stage &st : k.stages) {
    key += "|" + std::to_string(static_cast<int>(st.kind)) +
           std::to_string(static_cast<int>(st.reduce)) + (st.outerOnly ? "o" : "") + of(st.value);
    for (const Store &store : st.stores)
      key += ":" + std::to_string(store.output) + "@" + of(store.offset) + "=" + of(store.value);
  }
  return key;
}

/// Whether the inner index reaches only index arithmetic (add, sub, mul)
/// and the offsets of loads and stores (Note [Kernels shared across
/// shapes]).
bool innerIndexOnlyAddresses(const Kernel &k) {
  const auto &nodes = k.dag.nodes();
  std::vector<bool> reads(nodes.size(), false);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const ScalarNode &n = nodes[i];
    if (n.op == ScalarOp::Index) {
      reads[i] = n.slot == k.innerSlot();
      continue;
    }
    if (n.op == ScalarOp::Load) // its value is data, not the index
      continue;
    for (unsigned a = 0; a < scalarArity(n.op); ++a)
      reads[i] = reads[i] || reads[static_cast<size_t>(n.args[a].id)];
    if (reads[i] && n.op != ScalarOp::Add && n.op != ScalarOp::Sub && n.op != ScalarOp::Mul)
      return false;
  }
  return true;
}

/// Merges `members` (indices into `kernels`, the first the representative
/// that `maps` map from) into one kernel with run-time sizes; nullopt where
/// a quantity that differs may not (Note [Kernels shared across shapes]).
std::optional<ShapeSharedKernel> merge(std::span<const Kernel *const> kernels,
                                       const std::vector<size_t> &members,
                                       const std::vector<std::vector<int32_t>> &maps) {
  const Kernel &k0 = *kernels[members.front()];
  const size_t m = members.size();
  ShapeSharedKernel out;
  out.members = members;
  out.sizes.assign(m, {});
  // A column of values per quantity that differs -> its symbol's slot.
  std::map<std::vector<int64_t>, int32_t> slots;
  auto slotOf = [&](const std::vector<int64_t> &column) -> int32_t {
    if (std::all_of(column.begin(), column.end(), [&](int64_t v) { return v == column.front(); }))
      return -1;
    auto [it, fresh] = slots.emplace(column, static_cast<int32_t>(slots.size()));
    if (fresh)
      for (size_t i = 0; i < m; ++i)
        out.sizes[i].push_back(column[i]);
    return it->second;
  };
  auto across = [&](auto get) {
    std::vector<int64_t> column;
    for (size_t i : members)
      column.push_back(get(*kernels[i]));
    return column;
  };
  std::vector<int32_t> outerSlot, dimSlot;
  for (size_t d = 0; d < k0.outer.size(); ++d)
    outerSlot.push_back(slotOf(across([&](const Kernel &k) { return k.outer[d]; })));
  const int32_t innerSlot = slotOf(across([](const Kernel &k) { return k.inner; }));
  for (const auto *buffers : {&k0.inputs, &k0.outputs})
    for (size_t b = 0; b < buffers->size(); ++b)
      for (size_t d = 0; d < (*buffers)[b].shape.size(); ++d) {
        const bool isInput = buffers == &k0.inputs;
        dimSlot.push_back(slotOf(
            across([&](const Kernel &k) { return (isInput ? k.inputs : k.outputs)[b].shape[d]; })));
      }
  // Constants the stages read.
  const auto &nodes = k0.dag.nodes();
  std::vector<int32_t> constSlot(nodes.size(), -1);
  std::vector<bool> varies(nodes.size(), false);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const ScalarNode &n = nodes[i];
    if (maps[0][i] < 0)
      continue; // no stage reads it
    auto nodeAt = [&](size_t j) -> const ScalarNode & {
      return kernels[members[j]]->dag.nodes()[static_cast<size_t>(maps[j][i])];
    };
    if (n.op == ScalarOp::ConstInt && n.type == DType::I64) {
      std::vector<int64_t> column;
      for (size_t j = 0; j < m; ++j)
        column.push_back(nodeAt(j).ivalue);
      constSlot[i] = slotOf(column);
    } else if (n.op == ScalarOp::ConstFloat) {
      std::vector<int64_t> column;
      bool differs = false;
      for (size_t j = 0; j < m; ++j) {
        const double f = nodeAt(j).fvalue;
        differs |= !sameBits(f, n.fvalue);
        if (!sizeCanHold(f))
          column.push_back(0);
        else
          column.push_back(static_cast<int64_t>(f));
      }
      if (differs) {
        for (size_t j = 0; j < m; ++j)
          if (!sizeCanHold(nodeAt(j).fvalue))
            return std::nullopt; // a size cannot hold it
        constSlot[i] = slotOf(column);
      }
    }
    varies[i] = constSlot[i] >= 0;
    if (n.op != ScalarOp::Load)
      for (unsigned a = 0; a < scalarArity(n.op); ++a)
        varies[i] = varies[i] || varies[static_cast<size_t>(n.args[a].id)];
    if ((n.op == ScalarOp::Div || n.op == ScalarOp::Rem) &&
        varies[static_cast<size_t>(n.args[1].id)])
      return std::nullopt; // a division instruction instead of a multiply-shift
  }
  if (slots.empty())
    return std::nullopt; // equal kernels: the JIT compiles them once already

  Kernel &k = out.kernel;
  k.name = k0.name;
  for (size_t s = 0; s < slots.size(); ++s)
    k.symbols.push_back("s" + std::to_string(s));
  auto extent = [&](int32_t slot, int64_t value, int64_t &fixed) {
    fixed = slot >= 0 ? -1 : value;
    return slot >= 0 ? DimExpr::symbol(k.symbols[static_cast<size_t>(slot)]) : DimExpr(value);
  };
  k.inputs = k0.inputs;
  k.outputs = k0.outputs;
  size_t at = 0;
  for (size_t i = 0; i < k.inputs.size() + k.outputs.size(); ++i) {
    KernelBuffer &b = i < k.inputs.size() ? k.inputs[i] : k.outputs[i - k.inputs.size()];
    k.bufferDims.emplace_back();
    for (int64_t &dim : b.shape)
      k.bufferDims.back().push_back(extent(dimSlot[at++], dim, dim));
  }
  k.outer = k0.outer;
  for (size_t d = 0; d < k.outer.size(); ++d)
    k.outerDims.push_back(extent(outerSlot[d], k0.outer[d], k.outer[d]));
  k.innerDim = extent(innerSlot, k0.inner, k.inner);
  copyDagAndStages(k0, k, [&](ScalarDag &d, size_t i, const ScalarNode &n) {
    if (constSlot[i] < 0)
      return ScalarRef{};
    ScalarRef v = d.size(constSlot[i]);
    return n.op == ScalarOp::ConstFloat ? d.cast(v, n.type) : v;
  });
  if (!k.verify())
    return std::nullopt;
  return out;
}

/// `k` with every buffer one-dimensional: the backend reads buffers only
/// through flat offsets, so kernels whose buffers differ in rank alone (a
/// squeeze and a slice, both one contiguous copy) may share.
Kernel flattened(const Kernel &k) {
  Kernel f = k;
  for (auto *buffers : {&f.inputs, &f.outputs})
    for (KernelBuffer &b : *buffers)
      b.shape = {b.numElements()};
  return f;
}

} // namespace

std::vector<ShapeSharedKernel> shareAcrossShapes(std::span<const Kernel *const> kernels,
                                                 std::span<const Schedule> schedules) {
  // Candidates, flattened, by structure key, in kernel order.
  std::vector<Kernel> flat(kernels.size());
  std::vector<const Kernel *> flatOf(kernels.size(), nullptr);
  std::map<std::string, std::vector<size_t>> byKey;
  std::vector<std::string> order;
  for (size_t i = 0; i < kernels.size(); ++i) {
    const Kernel &k = *kernels[i];
    if (k.hasRunTimeSizes() || !innerIndexOnlyAddresses(k))
      continue;
    flat[i] = flattened(k);
    flatOf[i] = &flat[i];
    std::string key = structureKey(flat[i], schedules[i]);
    auto [it, fresh] = byKey.try_emplace(key);
    if (fresh)
      order.push_back(key);
    it->second.push_back(i);
  }
  std::vector<ShapeSharedKernel> out;
  for (const std::string &key : order) {
    std::vector<size_t> rest = byKey[key];
    if (rest.size() < 2)
      continue;
    // The representative has the most nodes: where a size equals another
    // constant, a member's DAG holds one node for both, and each node of
    // the representative must stand for one node of every member.
    std::stable_sort(rest.begin(), rest.end(), [&](size_t a, size_t b) {
      return flatOf[a]->dag.nodes().size() > flatOf[b]->dag.nodes().size();
    });
    while (rest.size() >= 2) {
      std::vector<size_t> members{rest.front()}, unmatched;
      std::vector<std::vector<int32_t>> maps(1);
      const Kernel &rep = *flatOf[rest.front()];
      maps[0].resize(rep.dag.nodes().size());
      std::vector<int32_t> map;
      std::string why;
      for (size_t j = 1; j < rest.size(); ++j) {
        if (matchKernelStructure(rep, *flatOf[rest[j]], map, why)) {
          members.push_back(rest[j]);
          maps.push_back(map);
        } else {
          unmatched.push_back(rest[j]);
        }
      }
      if (members.size() >= 2) {
        // The representative maps to itself where any member's DAG is read.
        for (size_t i = 0; i < maps[0].size(); ++i)
          maps[0][i] = maps[1][i] >= 0 ? static_cast<int32_t>(i) : -1;
        if (auto shared = merge(flatOf, members, maps))
          out.push_back(std::move(*shared));
      }
      rest = std::move(unmatched);
    }
  }
  return out;
}

} // namespace kiln::codegen
