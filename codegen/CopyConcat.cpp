//===- CopyConcat.cpp - Kernel groups that only concatenate -----------===//
//
// Note [Concat as copies]
// ~~~~~~~~~~~~~~~~~~~~~~~
// A kernel lowers concat as a select between its operands with every arm
// evaluated (Lower.cpp): a load, a clamped index and a select per operand
// for each element. For two or three operands that is cheap and fuses with
// the consumers; for the 16 step outputs per direction of an unrolled
// bidirectional LSTM, stacked into its output sequence (two concats of 16
// inside a concat of 2), it was 12 ns per element: 52 us for 4096 elements,
// a third of the model. So a kernel group made only of concats, reshapes
// and transposes, with one output, becomes a list of copies when its
// concats have kMinOperands operands or more together: walking back from
// the output, each value's elements are mapped to runs of output positions
// (a reshape keeps its result's runs, as it keeps the row-major order; a
// concat operand's block p of size_i * inner elements lands at p * total *
// inner + offset_i * inner; a transpose moves blocks of the trailing dims
// it keeps in place), down to the group's inputs. The runtime runs
// the list as memcpys (runtime/CopyStep.h; reports count it among the
// kernels: Kiln's own code, not a library's). A list whose runs average
// fewer than kMinRun elements (a concat along a short last axis) stays a
// kernel.
//
// A group that only reshapes, transposes, slices (with step 1) and
// concatenates fewer operands is such a list too when it has at most
// kMaxPlainRuns runs: a recurrent model's state slices, its sequence
// transposes and its final states stacked were six JIT kernels of a few
// hundred elements each, 30 ms of LLVM in a compile of 74 ms (issue 14's
// cold compile); as copies they compile in no time and run as fast. A
// larger movement (a window partition's thousands of runs) stays a kernel,
// which vectorizes. Where kernels are shared across sizes (Note [Kernels
// with run-time sizes]) the run count would decide differently per size,
// so there only the many-operand rule holds.
//
//===----------------------------------------------------------------------===//

#include "codegen/Fusion.h"
#include "codegen/GroupLowering.h"
#include "codegen/Internal.h"

#include <algorithm>
#include <limits>
#include <unordered_set>

namespace kiln::codegen::detail {
namespace {

constexpr int64_t kMinOperands = 8;
constexpr int64_t kMinRun = 16;
constexpr size_t kMaxPlainRuns = 256;

/// Elements [from, from + count) of a value are output elements [to, to + count).
struct Seg {
  int64_t from, to, count;
};

/// Appends to `out` the runs of `segs` (sorted by `from`, disjoint) that
/// elements [from, from + count) of their value cover, shifted so that
/// element `from` becomes `newFrom`.
void compose(const std::vector<Seg> &segs, int64_t from, int64_t count, int64_t newFrom,
             std::vector<Seg> &out) {
  auto it = std::upper_bound(segs.begin(), segs.end(), from,
                             [](int64_t x, const Seg &s) { return x < s.from; });
  if (it != segs.begin())
    --it;
  for (; it != segs.end() && it->from < from + count; ++it) {
    int64_t lo = std::max(from, it->from), hi = std::min(from + count, it->from + it->count);
    if (lo < hi)
      out.push_back({newFrom + (lo - from), it->to + (lo - it->from), hi - lo});
  }
}

/// Maps the runs of a transpose's result (`segs`) to its operand's: the
/// operand moves in blocks of its trailing dims that the permutation keeps
/// in place. False when those blocks are shorter than kMinRun.
bool transposeRuns(const Node &n, const std::vector<Seg> &segs, int64_t maxBlocks,
                   std::vector<Seg> &out) {
  const std::vector<int64_t> in = sizesOf(n.operand(0)), res = sizesOf(n.result());
  std::vector<int64_t> perm = TransposeOp(n).perm();
  if (perm.empty())
    for (size_t i = in.size(); i-- > 0;)
      perm.push_back(static_cast<int64_t>(i));
  size_t m = in.size();
  while (m > 0 && perm[m - 1] == static_cast<int64_t>(m - 1))
    --m;
  int64_t block = 1;
  for (size_t d = m; d < in.size(); ++d)
    block *= in[d];
  if (block < kMinRun)
    return false;
  // Result strides, indexed by the operand dim each result dim reads.
  std::vector<int64_t> stride(in.size(), 0);
  int64_t s = 1;
  for (size_t k = res.size(); k-- > 0;) {
    stride[static_cast<size_t>(perm[k])] = s;
    s *= res[k];
  }
  std::vector<int64_t> j(m, 0);
  const int64_t blocks = numElements(in) / block;
  if (blocks > maxBlocks)
    return false;
  for (int64_t b = 0; b < blocks; ++b) {
    int64_t to = 0;
    for (size_t d = 0; d < m; ++d)
      to += j[d] * stride[d];
    compose(segs, to, block, b * block, out);
    for (size_t d = m; d-- > 0;) {
      if (++j[d] < in[d])
        break;
      j[d] = 0;
    }
  }
  return true;
}

/// Maps the runs of a slice's result (`segs`) to its operand's: blocks of
/// the trailing dims from the last sliced one. False for a step other than
/// 1 or blocks shorter than kMinRun.
bool sliceRuns(const Node &n, const std::vector<Seg> &segs, int64_t maxBlocks,
               std::vector<Seg> &out) {
  SliceOp op(n);
  const std::vector<int64_t> in = sizesOf(n.operand(0)), res = sizesOf(n.result());
  const auto rank = static_cast<int64_t>(in.size());
  if (in.empty() || res.size() != in.size())
    return false;
  std::optional<std::vector<int64_t>> starts = constantInts(op.starts());
  const std::vector<int64_t> axes = op.axes(), steps = op.steps();
  if (!starts)
    return false;
  std::vector<int64_t> start(in.size(), 0);
  for (size_t i = 0; i < starts->size(); ++i) {
    std::optional<int64_t> a = axes.empty() ? std::optional<int64_t>(static_cast<int64_t>(i))
                                            : lowering::normalizeAxis(axes[i], rank);
    if (!a || (!steps.empty() && steps[i] != 1))
      return false;
    const int64_t dim = in[static_cast<size_t>(*a)];
    start[static_cast<size_t>(*a)] =
        std::clamp<int64_t>((*starts)[i] < 0 ? (*starts)[i] + dim : (*starts)[i], 0, dim);
  }
  // Dims [m, rank) are whole: with the last sliced one they form a block.
  size_t m = in.size();
  while (m > 0 && res[m - 1] == in[m - 1])
    --m;
  if (m == 0)
    m = 1;
  int64_t tail = 1;
  for (size_t d = m; d < in.size(); ++d)
    tail *= in[d];
  const int64_t block = res[m - 1] * tail;
  if (block < kMinRun)
    return false;
  std::vector<int64_t> inStride(in.size(), 1), resStride(in.size(), 1);
  for (size_t d = in.size() - 1; d-- > 0;) {
    inStride[d] = inStride[d + 1] * in[d + 1];
    resStride[d] = resStride[d + 1] * res[d + 1];
  }
  std::vector<int64_t> j(m - 1, 0);
  const int64_t blocks = numElements(res) / block;
  if (blocks > maxBlocks)
    return false;
  for (int64_t b = 0; b < blocks; ++b) {
    int64_t from = start[m - 1] * inStride[m - 1], to = 0;
    for (size_t d = 0; d + 1 < m; ++d) {
      from += (j[d] + start[d]) * inStride[d];
      to += j[d] * resStride[d];
    }
    compose(segs, to, block, from, out);
    for (size_t d = m - 1; d-- > 0;) {
      if (++j[d] < res[d])
        break;
      j[d] = 0;
    }
  }
  return true;
}

} // namespace

std::optional<CopyConcat> matchCopyConcat(const FusionGroup &group, bool plainMoves) {
  if (group.kind != FusionGroup::Kind::Kernel || group.outputs.size() != 1)
    return std::nullopt;
  std::unordered_set<const Node *> members(group.nodes.begin(), group.nodes.end());
  members.insert(group.recomputed.begin(), group.recomputed.end());
  int64_t concatOperands = 0;
  for (const Node *n : members) {
    if (n->kind() == OpKind::Concat)
      concatOperands += n->numOperands();
    else if (!isRowMajorViewNode(*n) && n->kind() != OpKind::Transpose &&
             n->kind() != OpKind::Slice)
      return std::nullopt;
    if (n->numResults() != 1 || !n->result()->type().isStatic())
      return std::nullopt;
  }
  const Value *output = group.outputs.front();
  if (!output->type().isStatic() || (concatOperands < kMinOperands && !plainMoves))
    return std::nullopt;
  // A plain move of more blocks than kMaxPlainRuns is refused before its
  // runs are listed (an attention transpose has millions).
  const int64_t maxBlocks = concatOperands >= kMinOperands ? std::numeric_limits<int64_t>::max()
                                                           : static_cast<int64_t>(kMaxPlainRuns);

  // Members in reverse topological order: a value's consumers come first.
  std::vector<const Node *> order;
  std::unordered_set<const Node *> seen;
  std::vector<std::pair<const Node *, unsigned>> stack;
  if (const Node *def = output->definingNode(); def && members.count(def)) {
    stack.push_back({def, 0});
    seen.insert(def);
  }
  while (!stack.empty()) {
    auto &[n, next] = stack.back();
    if (next < n->numOperands()) {
      const Node *def = n->operand(next++)->definingNode();
      if (def && members.count(def) && seen.insert(def).second)
        stack.push_back({def, 0});
      continue;
    }
    order.push_back(n);
    stack.pop_back();
  }
  if (order.size() != members.size())
    return std::nullopt; // a member that does not lead to the output
  std::reverse(order.begin(), order.end());

  const int64_t total = numElements(sizesOf(output));
  std::unordered_map<const Value *, std::vector<Seg>> map;
  map[output] = {{0, 0, total}};
  for (const Node *n : order) {
    std::vector<Seg> segs = std::move(map[n->result()]);
    std::sort(segs.begin(), segs.end(), [](const Seg &a, const Seg &b) { return a.from < b.from; });
    if (isRowMajorViewNode(*n)) {
      auto &dst = map[n->operand(0)];
      dst.insert(dst.end(), segs.begin(), segs.end());
      continue;
    }
    if (n->kind() == OpKind::Transpose) {
      if (!transposeRuns(*n, segs, maxBlocks, map[n->operand(0)]))
        return std::nullopt;
      continue;
    }
    if (n->kind() == OpKind::Slice) {
      if (!sliceRuns(*n, segs, maxBlocks, map[n->operand(0)]))
        return std::nullopt;
      continue;
    }
    const std::vector<int64_t> shape = sizesOf(n->result());
    const int64_t a = ConcatOp(*n).axis(); // verified: in [-rank, rank)
    const auto axis = static_cast<size_t>(a < 0 ? a + static_cast<int64_t>(shape.size()) : a);
    int64_t outer = 1, inner = 1;
    for (size_t d = 0; d < axis; ++d)
      outer *= shape[d];
    for (size_t d = axis + 1; d < shape.size(); ++d)
      inner *= shape[d];
    if (outer > maxBlocks / static_cast<int64_t>(n->numOperands()))
      return std::nullopt;
    int64_t offset = 0;
    for (const Value *v : n->operands()) {
      const int64_t size = sizesOf(v)[axis], block = size * inner;
      auto &dst = map[v];
      for (int64_t p = 0; block > 0 && p < outer; ++p)
        compose(segs, p * shape[axis] * inner + offset * inner, block, p * block, dst);
      offset += size;
    }
  }

  // Sources in the group's input order (deterministic code and artifacts).
  for (const auto &[v, segs] : map) {
    const Node *def = v->definingNode();
    if ((!def || !members.count(def)) &&
        std::find(group.inputs.begin(), group.inputs.end(), v) == group.inputs.end())
      return std::nullopt;
  }
  CopyConcat match;
  int64_t covered = 0;
  for (const Value *v : group.inputs) {
    auto it = map.find(v);
    if (it == map.end() || it->second.empty())
      continue;
    auto src = static_cast<int32_t>(match.sources.size());
    match.sources.push_back(v);
    for (const Seg &s : it->second) {
      match.runs.push_back({src, s.from, s.to, s.count});
      covered += s.count;
    }
  }
  if (covered != total || match.runs.empty() ||
      total < kMinRun * static_cast<int64_t>(match.runs.size()) ||
      (concatOperands < kMinOperands && (!plainMoves || match.runs.size() > kMaxPlainRuns)))
    return std::nullopt;
  std::sort(match.runs.begin(), match.runs.end(),
            [](const CopyConcat::Run &x, const CopyConcat::Run &y) { return x.to < y.to; });
  return match;
}

} // namespace kiln::codegen::detail
