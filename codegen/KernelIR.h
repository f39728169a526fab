//===- KernelIR.h - Target-neutral kernels ----------------------*- C++ -*-===//
//
// A fused group of graph nodes becomes one Kernel: what it computes, not how
// it is scheduled (see Schedule below; Halide's algorithm/schedule split).
//
// A kernel reads `inputs` and writes `outputs`, dense row-major buffers with
// static shapes, or shapes given by sizes the caller passes (Note [Kernels
// with run-time sizes] in codegen/RunTimeSizes.cpp). Its iteration space is
// a set of *outer* points (a row-major multi-index over `outer`, flattened
// to [0, numOuter())) and, for each, an *inner* loop of `inner`
// iterations. For each outer point the stages run in
// order; each stage loops over the inner range:
//
//   - a Reduce stage folds `value` over the inner range with `reduce`
//     (sum, max, min, prod) starting from its identity; its result is then
//     available to later stages as ScalarOp::StageValue(slot = stage index);
//     acc = op(acc, value) in inner order with the primitive's semantics
//     (Add, Max, Min, Mul of ir/ScalarExpr.h: max/min propagate NaN). The
//     identity is 0 / 1 for sum / prod, -inf / +inf for float max / min and
//     the dtype's lowest / highest value for integer max / min. Backends
//     may reassociate float sums and products (rounding then differs);
//   - a Map stage evaluates its stores at every inner point (or once per
//     outer point when `outerOnly`).
//
// Expressions live in one ScalarDag (ir/ScalarExpr.h). Leaves:
//   Index(slot = d) for d < outer.size() is the index of outer dim d;
//   Index(slot = outer.size()) is the inner index;
//   Load(slot = input number, args[0] = i64 element offset);
//   StageValue(slot = stage number), only in later stages.
// Index maps (broadcast, transpose, slice, reshape, concat, pad) are i64
// arithmetic on indices feeding Load offsets, not copies.
//
// Examples:
//   relu(x + y) on f32[64,1024] with y: f32[1024]:
//     outer = [64], inner = 1024, one Map stage storing
//     max(load0(i0*1024+i1) + load1(i1), 0) at i0*1024+i1
//   softmax over the last axis of f32[8,128]:
//     outer = [8], inner = 128,
//     stage 0 Reduce max of x;  stage 1 Reduce sum of exp(x - S0);
//     stage 2 Map: store exp(x - S0) / S1
//
// Kernels print as text (str()) and hash stably (hash() of that text), so
// they can be compared in golden tests and keyed in a cache.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/DimExpr.h"
#include "ir/ScalarExpr.h"
#include "ir/Type.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kiln::codegen {

struct KernelBuffer {
  DType dtype = DType::F32;
  /// -1 where a dim is known only at run time (Kernel::bufferDims).
  std::vector<int64_t> shape;
  /// A name for printing and debugging (the graph value it holds).
  std::string name;
  int64_t numElements() const { return kiln::numElements(shape); }
};

enum class ReduceKind : uint8_t { Sum, Max, Min, Prod };
const char *reduceKindName(ReduceKind k);

struct Store {
  int32_t output;   ///< index into Kernel::outputs
  ScalarRef offset; ///< i64 element offset in that output
  ScalarRef value;  ///< of the output's dtype
};

struct Stage {
  enum class Kind : uint8_t { Reduce, Map } kind = Kind::Map;
  // Reduce stages:
  ReduceKind reduce = ReduceKind::Sum;
  ScalarRef value; ///< the per-inner-point value folded (its dtype is the stage's dtype)
  // Map stages:
  std::vector<Store> stores;
  /// Map stages only: run once per outer point instead of at every inner
  /// point (the per-row results of reductions, e.g. reduce_sum's output).
  /// Its expressions never use the inner Index, so a backend that ignores
  /// the flag still computes the right values, only `inner` times (and not
  /// at all when inner == 0).
  bool outerOnly = false;
};

struct Kernel {
  std::string name;
  std::vector<KernelBuffer> inputs;
  std::vector<KernelBuffer> outputs;
  std::vector<int64_t> outer;
  int64_t inner = 1;
  ScalarDag dag;
  std::vector<Stage> stages;
  /// Note [Kernels with run-time sizes]: the symbols whose values the caller
  /// passes, by Size slot; empty for a static kernel. With symbols, `outer`
  /// and `inner` and buffer shapes hold -1 where a size is not a constant,
  /// and `outerDims` (one per outer dim), `innerDim` and `bufferDims` (per
  /// buffer, inputs then outputs, one per dim) give every size.
  std::vector<std::string> symbols;
  std::vector<DimExpr> outerDims;
  DimExpr innerDim;
  std::vector<std::vector<DimExpr>> bufferDims;

  bool hasRunTimeSizes() const { return !symbols.empty(); }
  /// The static kernel at `sizes` (one per symbol): Size nodes become
  /// constants and the extents numbers. A static kernel binds to itself.
  Kernel bind(const std::vector<int64_t> &sizes) const;

  /// The static kernel's outer points.
  int64_t numOuter() const { return kiln::numElements(outer); }
  /// The Index slot of the inner loop.
  int32_t innerSlot() const { return static_cast<int32_t>(outer.size()); }

  /// Checks the invariants above (slots in range, stage values used only by
  /// later stages, store dtypes, ...); on failure `why` says which.
  bool verify(std::string *why = nullptr) const;
  /// Deterministic text form (`kiln compile --emit=kernels`).
  std::string str() const;
  /// FNV-1a 64 of the text form without the name: equal kernels, equal hash.
  uint64_t hash() const;
  /// Every field that decides the kernel's code, in binary (constants by
  /// their bits), names left out: kernels with equal keys compute the same
  /// function of their buffers, so a backend may compile one for all.
  std::string codeKey() const;
  /// Per DAG node: whether the stores of `st` (their offsets and values)
  /// reach it.
  std::vector<bool> reachedBy(const Stage &st) const;
};

/// How a kernel is run; chosen by a heuristic now, by measurement later,
/// without touching the Kernel.
struct Schedule {
  /// Split the outer range across threads.
  bool parallel = true;
  /// Minimum outer points per parallel task (keeps tiny kernels serial).
  int64_t grain = 1;
  /// Vector width hint for the inner loop (0: let the backend choose).
  int vectorWidth = 0;
  /// Per output: the input whose memory it is written into (in place), or
  /// -1; empty means none. Only pairs canWriteInPlace() accepts. The
  /// runtime passes the same pointer for both; the backend stores through
  /// the input's pointer so that the aliasing is visible to its optimizer.
  std::vector<int32_t> inPlaceInput;
};

/// Whether output `output` of `k` may be written into the memory of input
/// `input` (which nobody reads after this kernel): the kernel has that one
/// output, stored once, by its last stage (a Map); the two buffers have the
/// same element size and count; and every load of the input reads exactly
/// the element the store writes at that point (the same offset
/// expression). Then each element is read only at the point that
/// overwrites it, by that point's earlier stages or before the store.
bool canWriteInPlace(const Kernel &k, int32_t output, int32_t input);

/// Copies `from`'s DAG into `to`'s node by node and then `from`'s stages,
/// their references remapped: `replace` gives a node's replacement, built
/// in the DAG it is handed, or an invalid ref to copy the node with its
/// operands remapped.
void copyDagAndStages(
    const Kernel &from, Kernel &to,
    const std::function<ScalarRef(ScalarDag &, size_t, const ScalarNode &)> &replace);

/// Runs a kernel on host buffers with evaluateScalars: slow, obviously
/// correct; the oracle for backend tests. `buffers` holds the inputs then the
/// outputs, as raw pointers to dense row-major data; `sizes` the values of
/// a kernel's symbols (it runs k.bind(sizes)).
void interpretKernel(const Kernel &k, const std::vector<void *> &buffers,
                     const std::vector<int64_t> &sizes = {});

} // namespace kiln::codegen
