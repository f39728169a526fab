//===- Lower.cpp - Kernel groups to kernels -------------------------------===//
//
// lowerGroup: a Kernel group of the fusion plan becomes one codegen Kernel.
//
//   1. Choose the iteration space. A pointwise group iterates its outputs'
//      shape: leading dims as outer points, trailing dims collapsed into the
//      inner loop (Note [Inner loop]). A group with reductions or
//      normalizations iterates their row space: kept dims outside, reduced
//      dims inside.
//   2. Evaluate each output at the current point, recursively: a value from
//      outside is a load through its index map, a splat constant a literal,
//      an elementwise node its scalar semantics (lowerElementwise) over its
//      operands evaluated at broadcast indices, a data movement node its
//      operand at a rewritten index, a reduction a StageValue (its Reduce
//      stages are created on first use).
//   3. Store full-shape outputs in a final Map stage and per-row outputs in
//      an outer-only Map stage.
//
// Indices are kept symbolic while they are built (Note [Affine indices] in
// codegen/AffineIndex.h), so
// that reshapes, broadcasts and collapsed loops simplify back to plain
// `outer * inner + j` offsets instead of chains of div and rem.
//
//===----------------------------------------------------------------------===//
#include "codegen/AffineIndex.h"
#include "codegen/Fusion.h"
#include "codegen/Internal.h"
#include "ir/Printer.h"
#include "ir/ResizeTaps.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <sstream>

namespace kiln::codegen {

using detail::RowSpace;
using detail::sizesOf;

namespace {

std::vector<int64_t> stridesOf(const std::vector<int64_t> &sizes) {
  std::vector<int64_t> s(sizes.size(), 1);
  for (size_t i = sizes.size(); i-- > 1;)
    s[i - 1] = s[i] * sizes[i];
  return s;
}

std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

std::string indexKey(const Index &idx) {
  std::ostringstream os;
  for (const Affine &a : idx) {
    os << a.constant;
    for (const auto &[at, c] : a.terms)
      os << "+" << c << "*" << at.base << "/" << at.stride << "%" << at.extent;
    os << ";";
  }
  return os.str();
}

std::string sanitize(const std::string &s) {
  std::string out;
  for (char c : s)
    out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
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

std::optional<size_t> GroupLowering::pointwiseRank() {
  for (const Node *n : g_.nodes)
    if (detail::isStageNode(*n))
      return std::nullopt;
  return g_.outputs.empty() ? 0 : g_.outputs[0]->type().shape.size();
}

int GroupLowering::countInnerDivisions() {
  int n = 0;
  const auto &nodes = dag().nodes();
  for (size_t id = 0; id < nodes.size(); ++id) {
    const ScalarNode &node = nodes[id];
    if ((node.op == ScalarOp::Div || node.op == ScalarOp::Rem) && !isFloat(node.type) &&
        dependsOnInner(static_cast<int32_t>(id)))
      ++n;
  }
  return n;
}

bool GroupLowering::dependsOnInner(int32_t id) {
  auto it = innerDeps_.find(id);
  if (it != innerDeps_.end())
    return it->second;
  const ScalarNode &n = dag().nodes()[static_cast<size_t>(id)];
  bool dep = n.op == ScalarOp::Index && n.slot == k_.innerSlot();
  for (unsigned a = 0; a < scalarArity(n.op) && !dep; ++a)
    dep = dependsOnInner(n.args[a].id);
  innerDeps_[id] = dep;
  return dep;
}

Affine GroupLowering::linearize(const Index &idx, const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides = stridesOf(shape);
  Affine a;
  for (size_t d = 0; d < idx.size(); ++d)
    a = ib_.add(a, ib_.mul(idx[d], strides[d]));
  return a;
}

Affine GroupLowering::offsetIn(const Value *v, const Index &idx) {
  const std::vector<int64_t> shape = sizesOf(v);
  if (!layouts_.channelsLast || shape.size() < 3 || idx.size() != shape.size() ||
      !layouts_.channelsLast(v))
    return linearize(idx, shape);
  // N, C, spatial... stored as N, spatial..., C.
  std::vector<int64_t> strides(shape.size());
  int64_t stride = 1;
  strides[1] = stride;
  stride *= std::max<int64_t>(shape[1], 1);
  for (size_t d = shape.size(); d-- > 2;) {
    strides[d] = stride;
    stride *= std::max<int64_t>(shape[d], 1);
  }
  strides[0] = stride;
  Affine a;
  for (size_t d = 0; d < idx.size(); ++d)
    a = ib_.add(a, ib_.mul(idx[d], strides[d]));
  return a;
}

Index GroupLowering::delinearize(const Affine &flat, const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides = stridesOf(shape);
  Index out;
  for (size_t d = 0; d < shape.size(); ++d) {
    Affine q = ib_.floorDiv(flat, strides[d]);
    out.push_back(d == 0 ? q : ib_.mod(q, shape[d]));
  }
  return out;
}

Index GroupLowering::broadcastIndex(const Index &idx, const std::vector<int64_t> &shape) {
  Index out;
  size_t lead = idx.size() - shape.size();
  for (size_t d = 0; d < shape.size(); ++d)
    out.push_back(shape[d] == 1 ? ib_.constant(0) : idx[lead + d]);
  return out;
}

/// min(max(a, 0), max) as an atom (for gathered, padded and concatenated
/// coordinates that may leave the operand).
Affine GroupLowering::clampIndex(const Affine &a, int64_t max) {
  auto [lo, hi] = ib_.range(a);
  if (lo >= 0 && hi <= max)
    return a;
  ScalarRef x = ib_.emit(a);
  ScalarRef zero = dag().constInt(DType::I64, 0);
  if (lo < 0)
    x = dag().binary(ScalarOp::Max, x, zero);
  if (hi > max)
    x = dag().binary(ScalarOp::Min, x, dag().constInt(DType::I64, max));
  return ib_.atom(x, std::max<int64_t>(max, 0));
}

ScalarRef GroupLowering::load(const Value *v, const Index &idx) {
  auto slot = inputSlot_.find(v);
  if (slot == inputSlot_.end())
    return fail("value read by the kernel is neither computed in it nor one of its inputs");
  Affine off = offsetIn(v, idx);
  // Classify for the inner-loop choice: contiguous (j + invariant),
  // invariant, or strided.
  int innerTerms = 0;
  bool unit = false;
  for (const auto &[at, c] : off.terms) {
    if (!dependsOnInner(at.base))
      continue;
    ++innerTerms;
    unit = at.base == innerNode_.id && at.stride == 1 && at.extent == 0 && c == 1;
  }
  if (innerTerms > 1 || (innerTerms == 1 && !unit))
    ++stridedLoads_;
  return dag().load(v->type().dtype, slot->second, ib_.emit(off));
}

ScalarRef GroupLowering::valueAt(const Value *v, const Index &idx) {
  if (failed_)
    return dag().constInt(DType::I64, 0);
  auto key = std::make_pair(v, indexKey(idx));
  if (auto it = memo_.find(key); it != memo_.end())
    return it->second;
  ScalarRef r;
  const Node *def = v->definingNode();
  if (def && members_.count(def)) {
    r = computeNode(*def, v, idx);
  } else if (detail::isSplatConstant(v) && !inputSlot_.count(v)) {
    const Tensor &t = ConstantOp(*def).value();
    DType dt = v->type().dtype;
    r = isFloat(dt) ? dag().constFloat(dt, t.getDouble(0)) : dag().constInt(dt, t.getInt(0));
  } else {
    r = load(v, idx);
  }
  memo_[key] = r;
  return r;
}

void GroupLowering::createStages(const Node &n) {
  if (stagesOf_.count(&n))
    return;
  stagesOf_[&n] = {}; // guards against cycles (which a verified graph has not)
  const Value *x = n.operand(0);
  DType xt = x->type().dtype;
  auto stage = [&](ReduceKind kind, ScalarRef value) {
    Stage st;
    st.kind = Stage::Kind::Reduce;
    st.reduce = kind;
    st.value = value;
    k_.stages.push_back(st);
    return static_cast<int32_t>(k_.stages.size() - 1);
  };
  ScalarRef xv = valueAt(x, full_);
  if (failed_)
    return;
  std::vector<int32_t> ids;
  switch (n.kind()) {
  case OpKind::ReduceSum:
  case OpKind::ReduceMean:
  case OpKind::ReduceProd:
  case OpKind::ReduceMax:
  case OpKind::ReduceMin: {
    bool minMax = n.kind() == OpKind::ReduceMax || n.kind() == OpKind::ReduceMin;
    // Integer sums, products and means accumulate exactly in int64 (as the
    // reference does); max and min in the dtype itself.
    DType acc = isFloat(xt) ? computeDType(xt) : (minMax ? xt : DType::I64);
    ReduceKind kind = n.kind() == OpKind::ReduceMax    ? ReduceKind::Max
                      : n.kind() == OpKind::ReduceMin  ? ReduceKind::Min
                      : n.kind() == OpKind::ReduceProd ? ReduceKind::Prod
                                                       : ReduceKind::Sum;
    ids.push_back(stage(kind, dag().cast(xv, acc)));
    break;
  }
  case OpKind::ArgMax: {
    // The first (last) index where x equals the row's maximum; NaN counts
    // as the largest value, as in the reference.
    DType acc = isFloat(xt) ? computeDType(xt) : xt;
    ScalarRef xa = dag().cast(xv, acc);
    int32_t s0 = stage(ReduceKind::Max, xa);
    ScalarRef m = dag().stageValue(acc, s0);
    ScalarRef match = dag().compare(ScalarOp::Eq, xa, m);
    if (isFloat(acc)) {
      auto isNan = [&](ScalarRef a) {
        return dag().unary(ScalarOp::Not, dag().compare(ScalarOp::Eq, a, a));
      };
      match = dag().select(isNan(m), isNan(xa), match);
    }
    bool last = ArgMaxOp(n).select_last_index();
    ScalarRef j = k_.dag.index(k_.innerSlot());
    ScalarRef none = dag().constInt(DType::I64, last ? -1 : std::numeric_limits<int64_t>::max());
    ids.push_back(s0);
    ids.push_back(stage(last ? ReduceKind::Max : ReduceKind::Min, dag().select(match, j, none)));
    break;
  }
  case OpKind::Softmax:
  case OpKind::LogSoftmax: {
    DType ct = computeDType(xt);
    ScalarRef xf = dag().cast(xv, ct);
    int32_t s0 = stage(ReduceKind::Max, xf);
    ScalarRef shifted = dag().sub(xf, dag().stageValue(ct, s0));
    ids.push_back(s0);
    ids.push_back(stage(ReduceKind::Sum, dag().unary(ScalarOp::Exp, shifted)));
    break;
  }
  case OpKind::LayerNorm: {
    DType ct = computeDType(xt);
    ScalarRef xf = dag().cast(xv, ct);
    ScalarRef count = dag().constFloat(ct, static_cast<double>(k_.inner));
    int32_t s0 = stage(ReduceKind::Sum, xf);
    ScalarRef mean = dag().div(dag().stageValue(ct, s0), count);
    ScalarRef c = dag().sub(xf, mean);
    ids.push_back(s0);
    ids.push_back(stage(ReduceKind::Sum, dag().mul(c, c)));
    break;
  }
  default:
    fail("'" + std::string(n.mnemonic()) + "' is not a reduction");
    return;
  }
  stagesOf_[&n] = ids;
}

ScalarRef GroupLowering::stageNodeAt(const Node &n, const Index &idx) {
  if (!space_ || detail::rowSpaceOf(n) != space_)
    return fail("'" + std::string(n.mnemonic()) + "' does not iterate the kernel's row space");
  createStages(n);
  if (failed_)
    return dag().constInt(DType::I64, 0);
  const std::vector<int32_t> &ids = stagesOf_[&n];
  const Value *x = n.operand(0);
  DType xt = x->type().dtype, rt = n.result(0)->type().dtype;
  std::vector<int64_t> outShape = sizesOf(n.result(0));
  bool isNormalization = n.kind() == OpKind::Softmax || n.kind() == OpKind::LogSoftmax ||
                         n.kind() == OpKind::LayerNorm;
  // The row this kernel computes, in the node's result shape.
  Index want;
  if (isNormalization) {
    want = full_;
  } else if (outShape.size() == space_->shape.size()) {
    for (size_t d = 0, o = 0; d < outShape.size(); ++d)
      want.push_back(space_->reduced[d] ? ib_.constant(0) : outer_[o++]);
  } else {
    want = outer_;
  }
  if (idx != want)
    return fail("'" + std::string(n.mnemonic()) + "' result read at another row than computed");
  auto sv = [&](size_t i) {
    return dag().stageValue(k_.dag.type(k_.stages[static_cast<size_t>(ids[i])].value), ids[i]);
  };
  switch (n.kind()) {
  case OpKind::ReduceMean: {
    ScalarRef s = sv(0);
    DType acc = dag().type(s);
    ScalarRef count = isFloat(acc) ? dag().constFloat(acc, static_cast<double>(k_.inner))
                                   : dag().constInt(acc, k_.inner);
    return dag().cast(dag().div(s, count), rt);
  }
  case OpKind::ReduceSum:
  case OpKind::ReduceProd:
  case OpKind::ReduceMax:
  case OpKind::ReduceMin:
    return dag().cast(sv(0), rt);
  case OpKind::ArgMax:
    return dag().cast(sv(1), rt);
  case OpKind::Softmax:
  case OpKind::LogSoftmax: {
    DType ct = computeDType(xt);
    ScalarRef xf = dag().cast(valueAt(x, full_), ct);
    ScalarRef shifted = dag().sub(xf, sv(0));
    if (n.kind() == OpKind::Softmax)
      return dag().cast(dag().div(dag().unary(ScalarOp::Exp, shifted), sv(1)), rt);
    return dag().cast(dag().sub(shifted, dag().unary(ScalarOp::Log, sv(1))), rt);
  }
  case OpKind::LayerNorm: {
    DType ct = computeDType(xt);
    ScalarRef xf = dag().cast(valueAt(x, full_), ct);
    ScalarRef count = dag().constFloat(ct, static_cast<double>(k_.inner));
    ScalarRef mean = dag().div(sv(0), count);
    ScalarRef var = dag().div(sv(1), count);
    ScalarRef eps = dag().constFloat(ct, LayerNormOp(n).epsilon());
    ScalarRef inv = dag().unary(ScalarOp::Rsqrt, dag().add(var, eps));
    ScalarRef y = dag().mul(dag().sub(xf, mean), inv);
    const Value *scale = n.operand(1);
    y = dag().mul(y, dag().cast(valueAt(scale, broadcastIndex(full_, sizesOf(scale))), ct));
    if (n.numOperands() > 2) {
      const Value *bias = n.operand(2);
      y = dag().add(y, dag().cast(valueAt(bias, broadcastIndex(full_, sizesOf(bias))), ct));
    }
    return dag().cast(y, rt);
  }
  default:
    return fail("'" + std::string(n.mnemonic()) + "' is not a reduction");
  }
}

ScalarRef GroupLowering::computeNode(const Node &n, const Value *v, const Index &idx) {
  std::vector<int64_t> outShape = sizesOf(v);
  auto operandShape = [&](unsigned i) { return sizesOf(n.operand(i)); };
  if (n.hasTrait(Elementwise)) {
    std::vector<ScalarRef> ops;
    for (unsigned i = 0; i < n.numOperands(); ++i)
      ops.push_back(valueAt(n.operand(i), broadcastIndex(idx, operandShape(i))));
    if (failed_)
      return dag().constInt(DType::I64, 0);
    auto r = lowerElementwise(n.info(), n.attrs(), ops, v->type().dtype, dag(), n.loc(), diag_);
    if (r.failed()) {
      failed_ = true;
      return dag().constInt(DType::I64, 0);
    }
    return *r;
  }
  if (detail::isStageNode(n))
    return stageNodeAt(n, idx);
  switch (n.kind()) {
  case OpKind::BatchNorm: {
    // (x - mean[c]) * (scale[c] / sqrt(var[c] + eps)) + bias[c]
    DType ct = computeDType(v->type().dtype);
    Index c{idx[1]};
    auto param = [&](unsigned i) { return dag().cast(valueAt(n.operand(i), c), ct); };
    ScalarRef x = dag().cast(valueAt(n.operand(0), idx), ct);
    ScalarRef eps = dag().constFloat(ct, BatchNormOp(n).epsilon());
    ScalarRef mul = dag().div(param(1), dag().unary(ScalarOp::Sqrt, dag().add(param(4), eps)));
    ScalarRef y = dag().add(dag().mul(dag().sub(x, param(3)), mul), param(2));
    return dag().cast(y, v->type().dtype);
  }
  case OpKind::Reshape:
  case OpKind::Flatten:
  case OpKind::Squeeze:
  case OpKind::Unsqueeze:
    return valueAt(n.operand(0), delinearize(linearize(idx, outShape), operandShape(0)));
  case OpKind::Transpose: {
    std::vector<int64_t> perm = TransposeOp(n).perm();
    if (perm.empty())
      for (size_t i = idx.size(); i-- > 0;)
        perm.push_back(static_cast<int64_t>(i));
    Index in(idx.size());
    for (size_t i = 0; i < idx.size(); ++i)
      in[static_cast<size_t>(perm[i])] = idx[i];
    return valueAt(n.operand(0), in);
  }
  case OpKind::Expand:
    return valueAt(n.operand(0), broadcastIndex(idx, operandShape(0)));
  case OpKind::Slice: {
    SliceOp op(n);
    std::vector<int64_t> in = operandShape(0);
    auto rank = static_cast<int64_t>(in.size());
    Index src = idx;
    std::vector<int64_t> axes = op.axes(), steps = op.steps();
    // Compiled graphs have every symbol bound (Compiler.cpp bindDims).
    std::optional<std::vector<int64_t>> starts = constantInts(op.starts());
    KILN_ASSERT(starts && "slice bounds bound before lowering");
    for (size_t i = 0; i < starts->size(); ++i) {
      int64_t a = axes.empty() ? static_cast<int64_t>(i) : *normalizeAxis(axes[i], rank);
      int64_t step = steps.empty() ? 1 : steps[i];
      int64_t dim = in[static_cast<size_t>(a)];
      int64_t start = (*starts)[i];
      if (start < 0)
        start += dim;
      start =
          step > 0 ? std::clamp<int64_t>(start, 0, dim) : std::clamp<int64_t>(start, 0, dim - 1);
      auto d = static_cast<size_t>(a);
      src[d] = ib_.add(ib_.mul(idx[d], step), ib_.constant(start));
    }
    return valueAt(n.operand(0), src);
  }
  case OpKind::Split: {
    SplitOp op(n);
    std::vector<int64_t> in = operandShape(0);
    auto a = static_cast<size_t>(*normalizeAxis(op.axis(), static_cast<int64_t>(in.size())));
    int64_t offset = 0;
    for (unsigned r = 0; r < v->index(); ++r)
      offset += sizesOf(n.result(r))[a];
    Index src = idx;
    src[a] = ib_.add(idx[a], ib_.constant(offset));
    return valueAt(n.operand(0), src);
  }
  case OpKind::Concat: {
    auto a = static_cast<size_t>(
        *normalizeAxis(ConcatOp(n).axis(), static_cast<int64_t>(outShape.size())));
    // select(t < end_0, x_0, select(t < end_1, x_1, ...)) with each piece
    // read at a clamped coordinate (every arm is evaluated).
    std::vector<std::pair<int64_t, ScalarRef>> pieces;
    int64_t offset = 0;
    for (unsigned i = 0; i < n.numOperands(); ++i) {
      int64_t size = operandShape(i)[a];
      if (size == 0)
        continue;
      Index src = idx;
      src[a] = clampIndex(ib_.add(idx[a], ib_.constant(-offset)), size - 1);
      offset += size;
      pieces.push_back({offset, valueAt(n.operand(i), src)});
    }
    if (pieces.empty())
      return fail("concat of empty operands");
    ScalarRef t = ib_.emit(idx[a]);
    ScalarRef r = pieces.back().second;
    for (size_t i = pieces.size() - 1; i-- > 0;)
      r = dag().select(dag().compare(ScalarOp::Lt, t, dag().constInt(DType::I64, pieces[i].first)),
                       pieces[i].second, r);
    return r;
  }
  case OpKind::Pad: {
    PadOp op(n);
    std::vector<int64_t> in = operandShape(0);
    const std::vector<int64_t> &pads = op.pads();
    size_t rank = in.size();
    Index src = idx;
    ScalarRef inBounds;
    for (size_t d = 0; d < rank; ++d) {
      int64_t before = pads[d], after = pads[d + rank], size = in[d];
      if (before == 0 && after == 0)
        continue;
      Affine i = ib_.add(idx[d], ib_.constant(-before));
      auto [lo, hi] = ib_.range(i);
      if (lo >= 0 && hi < size) {
        src[d] = i;
        continue;
      }
      if (op.mode() == "constant" || op.mode() == "edge") {
        if (op.mode() == "constant") {
          ScalarRef x = ib_.emit(i);
          ScalarRef ok = dag().compare(ScalarOp::Ge, x, dag().constInt(DType::I64, 0));
          ScalarRef ok2 = dag().compare(ScalarOp::Lt, x, dag().constInt(DType::I64, size));
          ScalarRef both = dag().binary(ScalarOp::And, ok, ok2);
          inBounds = inBounds.valid() ? dag().binary(ScalarOp::And, inBounds, both) : both;
        }
        src[d] = clampIndex(i, size - 1);
        continue;
      }
      if (op.mode() == "wrap") { // period n
        const int64_t lift = lo < 0 ? (-lo / size + 1) * size : 0;
        src[d] = ib_.mod(ib_.add(i, ib_.constant(lift)), size);
        continue;
      }
      // reflect: period 2(n-1), folded back into [0, n).
      if (size == 1) {
        src[d] = ib_.constant(0);
        continue;
      }
      int64_t period = 2 * (size - 1);
      int64_t lift = (lo < 0 ? (-lo / period + 1) * period : 0);
      Affine m = ib_.mod(ib_.add(i, ib_.constant(lift)), period);
      ScalarRef mv = ib_.emit(m);
      ScalarRef folded =
          dag().select(dag().compare(ScalarOp::Lt, mv, dag().constInt(DType::I64, size)), mv,
                       dag().sub(dag().constInt(DType::I64, period), mv));
      src[d] = ib_.atom(folded, size - 1);
    }
    ScalarRef x = valueAt(n.operand(0), src);
    if (!inBounds.valid())
      return x;
    return dag().select(inBounds, x, dag().constant(v->type().dtype, op.value()));
  }
  case OpKind::Gather: {
    const Value *data = n.operand(0), *indices = n.operand(1);
    std::vector<int64_t> dataShape = operandShape(0);
    auto a = static_cast<size_t>(
        *normalizeAxis(GatherOp(n).axis(), static_cast<int64_t>(dataShape.size())));
    size_t ri = indices->type().shape.size();
    Index indIdx(idx.begin() + static_cast<std::ptrdiff_t>(a),
                 idx.begin() + static_cast<std::ptrdiff_t>(a + ri));
    ScalarRef k = dag().cast(valueAt(indices, indIdx), DType::I64);
    int64_t size = dataShape[a];
    // Negative indices count from the end; out-of-range ones (an error in
    // the reference) are clamped to stay in bounds.
    Affine pick;
    if (dag().node(k).op == ScalarOp::ConstInt) {
      int64_t c = dag().node(k).ivalue;
      pick = ib_.constant(
          std::clamp<int64_t>(c < 0 ? c + size : c, 0, std::max<int64_t>(size - 1, 0)));
    } else {
      ScalarRef zero = dag().constInt(DType::I64, 0);
      ScalarRef wrapped = dag().select(dag().compare(ScalarOp::Lt, k, zero),
                                       dag().add(k, dag().constInt(DType::I64, size)), k);
      ScalarRef clamped = dag().binary(ScalarOp::Min, dag().binary(ScalarOp::Max, wrapped, zero),
                                       dag().constInt(DType::I64, std::max<int64_t>(size - 1, 0)));
      pick = ib_.atom(clamped, std::max<int64_t>(size - 1, 0));
    }
    Index src(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(a));
    src.push_back(pick);
    src.insert(src.end(), idx.begin() + static_cast<std::ptrdiff_t>(a + ri), idx.end());
    return valueAt(data, src);
  }
  case OpKind::Resize: {
    ResizeOp op(n);
    std::vector<int64_t> in = operandShape(0);
    const bool nearest = op.mode() == "nearest", cubic = op.mode() == "cubic";
    const std::string &mode = op.coordinate_transformation_mode();
    DType f64 = DType::F64;
    auto c64 = [&](double x) { return dag().constFloat(f64, x); };
    // Per dim: the taps (index, weight, present) of the output coordinate.
    struct Tap {
      Affine index;
      ScalarRef weight, present;
    };
    std::vector<std::vector<Tap>> taps(in.size());
    // tf_crop_and_resize: whether the output coordinate maps outside the
    // input in any dim (the element is then extrapolation_value).
    const bool crop = mode == "tf_crop_and_resize";
    ScalarRef outside;
    for (size_t d = 0; d < in.size(); ++d) {
      int64_t inLen = in[d], outLen = outShape[d];
      double scale = op.scales().empty() ? static_cast<double>(outLen) / static_cast<double>(inLen)
                                         : op.scales()[d];
      if (inLen == outLen && scale == 1.0 && !crop) {
        taps[d].push_back({idx[d], c64(1.0), ScalarRef{}});
        continue;
      }
      // The resized length as ONNX defines it (see originalCoordinate in
      // ir/ops/DataMovement.cpp, the reference this mirrors).
      double resized =
          op.scales().empty() ? static_cast<double>(outLen) : scale * static_cast<double>(inLen);
      ScalarRef x = dag().cast(ib_.emit(idx[d]), f64);
      ScalarRef c;
      const double span = crop ? (op.roi()[d + in.size()] - op.roi()[d]) * (inLen - 1) : 0.0;
      if (crop)
        c = dag().add(resized == 1.0 ? c64(span / 2.0)
                                     : dag().div(dag().mul(x, c64(span)), c64(resized - 1.0)),
                      c64(op.roi()[d] * static_cast<double>(inLen - 1)));
      else if (mode == "asymmetric")
        c = dag().div(x, c64(scale));
      else if (mode == "align_corners")
        c = resized == 1.0
                ? c64(0.0)
                : dag().div(dag().mul(x, c64(static_cast<double>(inLen - 1))), c64(resized - 1.0));
      else if (mode == "pytorch_half_pixel" && resized == 1.0)
        c = c64(0.0);
      else if (mode == "half_pixel_symmetric")
        c = dag().sub(dag().div(dag().add(x, c64(0.5)), c64(scale)),
                      c64(0.5 - static_cast<double>(inLen) / 2.0 *
                                    (1.0 - static_cast<double>(outLen) / resized)));
      else
        c = dag().sub(dag().div(dag().add(x, c64(0.5)), c64(scale)), c64(0.5));
      ScalarRef maxIndex = c64(static_cast<double>(inLen - 1));
      if (crop) {
        ScalarRef out = dag().binary(ScalarOp::Or, dag().compare(ScalarOp::Lt, c, c64(0.0)),
                                     dag().compare(ScalarOp::Lt, maxIndex, c));
        outside = outside.valid() ? dag().binary(ScalarOp::Or, outside, out) : out;
      }
      auto clamp = [&](ScalarRef val) {
        ScalarRef lo = c64(0.0);
        return dag().select(
            dag().compare(ScalarOp::Lt, val, lo), lo,
            dag().select(dag().compare(ScalarOp::Lt, maxIndex, val), maxIndex, val));
      };
      auto toIndex = [&](ScalarRef val) {
        return ib_.atom(dag().cast(val, DType::I64), inLen - 1);
      };
      // The neighbours base + k of c (base = floor(c), or c - 1 when c is
      // an integer, the ratio r = c - base then 1), as cubicTaps and
      // antialiasTaps of ir/ops/PadResize.cpp take them.
      const double a = op.cubic_coeff_a();
      auto keysNear = [&](ScalarRef t) { // ((a + 2) t - (a + 3)) t t + 1, |t| <= 1
        ScalarRef u = dag().sub(dag().mul(c64(a + 2.0), t), c64(a + 3.0));
        return dag().add(dag().mul(dag().mul(u, t), t), c64(1.0));
      };
      auto keysFar = [&](ScalarRef t) { // ((a t - 5a) t + 8a) t - 4a, 1 < |t| < 2
        ScalarRef u = dag().sub(dag().mul(c64(a), t), c64(5.0 * a));
        return dag().sub(dag().mul(dag().add(dag().mul(u, t), c64(8.0 * a)), t), c64(4.0 * a));
      };
      // Taps of weights `w` at positions `at`: read at the edge beyond it,
      // or (exclude_outside) left out and the rest renormalized; a zero
      // weight's tap is not read.
      auto addTaps = [&](std::vector<ScalarRef> w, const std::vector<ScalarRef> &at) {
        ScalarRef sum = c64(0.0);
        for (size_t k = 0; k < w.size() && op.exclude_outside(); ++k) {
          ScalarRef inside =
              dag().binary(ScalarOp::And, dag().compare(ScalarOp::Ge, at[k], c64(0.0)),
                           dag().compare(ScalarOp::Le, at[k], maxIndex));
          w[k] = dag().select(inside, w[k], c64(0.0));
          sum = dag().add(sum, w[k]);
        }
        for (size_t k = 0; k < w.size(); ++k) {
          ScalarRef weight = op.exclude_outside() ? dag().div(w[k], sum) : w[k];
          ScalarRef nonzero =
              dag().unary(ScalarOp::Not, dag().compare(ScalarOp::Eq, w[k], c64(0.0)));
          taps[d].push_back({toIndex(clamp(at[k])), weight, nonzero});
        }
      };
      auto baseAndRatio = [&] {
        ScalarRef fl = dag().unary(ScalarOp::Floor, c);
        ScalarRef isInt = dag().compare(ScalarOp::Eq, c, fl);
        return std::pair{dag().select(isInt, dag().sub(fl, c64(1.0)), fl),
                         dag().select(isInt, c64(1.0), dag().sub(c, fl))};
      };
      if (!nearest && op.antialias() && scale < 1.0) {
        auto [base, r] = baseAndRatio();
        // antialiasTaps: the filter stretched by 1 / scale over 2 - 2 start
        // neighbours, normalized to sum 1.
        const int64_t start = resizeAntialiasStart(cubic, scale);
        auto filter = [&](ScalarRef x) { // antialiasWeight
          x = dag().unary(ScalarOp::Abs, x);
          if (!cubic)
            return dag().binary(ScalarOp::Max, c64(0.0), dag().sub(c64(1.0), x));
          return dag().select(
              dag().compare(ScalarOp::Le, x, c64(1.0)), keysNear(x),
              dag().select(dag().compare(ScalarOp::Lt, x, c64(2.0)), keysFar(x), c64(0.0)));
        };
        std::vector<ScalarRef> w, at;
        ScalarRef sum = c64(0.0);
        for (int64_t i = start; i < 2 - start; ++i) {
          const double fi = static_cast<double>(i);
          w.push_back(filter(dag().mul(dag().sub(c64(fi), r), c64(scale))));
          sum = dag().add(sum, w.back());
          at.push_back(dag().add(base, c64(fi)));
        }
        for (ScalarRef &wk : w)
          wk = dag().div(wk, sum);
        addTaps(w, at);
        continue;
      }
      if (cubic) {
        // cubicTaps: the four neighbours of c (no clamp of c itself),
        // Keys' weights.
        auto [base, r] = baseAndRatio();
        ScalarRef s = dag().sub(c64(1.0), r);
        std::vector<ScalarRef> at;
        for (int k = 0; k < 4; ++k)
          at.push_back(dag().add(base, c64(static_cast<double>(k - 1))));
        addTaps({keysFar(dag().add(r, c64(1.0))), keysNear(r), keysNear(s),
                 keysFar(dag().add(s, c64(1.0)))},
                at);
        continue;
      }
      if (nearest) {
        const std::string &nm = op.nearest_mode();
        ScalarRef r;
        if (nm == "floor") {
          r = dag().unary(ScalarOp::Floor, c);
        } else if (nm == "ceil") {
          r = dag().unary(ScalarOp::Ceil, c);
        } else {
          ScalarRef fl = dag().unary(ScalarOp::Floor, c);
          ScalarRef half = dag().compare(ScalarOp::Eq, dag().sub(c, fl), c64(0.5));
          ScalarRef tie = nm == "round_prefer_ceil" ? dag().unary(ScalarOp::Ceil, c) : fl;
          r = dag().select(half, tie, dag().unary(ScalarOp::Floor, dag().add(c, c64(0.5))));
        }
        taps[d].push_back({toIndex(clamp(r)), c64(1.0), ScalarRef{}});
        continue;
      }
      ScalarRef cc = clamp(c);
      ScalarRef lo = dag().unary(ScalarOp::Floor, cc);
      ScalarRef w = dag().sub(cc, lo);
      Affine loIdx = toIndex(lo);
      ScalarRef hiRaw =
          dag().binary(ScalarOp::Min, dag().add(ib_.emit(loIdx), dag().constInt(DType::I64, 1)),
                       dag().constInt(DType::I64, inLen - 1));
      taps[d].push_back({loIdx, dag().sub(c64(1.0), w), ScalarRef{}});
      taps[d].push_back({ib_.atom(hiRaw, inLen - 1), w, dag().compare(ScalarOp::Gt, w, c64(0.0))});
    }
    auto extrapolate = [&](ScalarRef value) {
      const DType t = v->type().dtype;
      return outside.valid()
                 ? dag().select(outside, dag().cast(c64(op.extrapolation_value()), t), value)
                 : value;
    };
    if (nearest) {
      Index src;
      for (auto &t : taps)
        src.push_back(t[0].index);
      return extrapolate(valueAt(n.operand(0), src));
    }
    // Sum over the corners in the reference's order, skipping taps of zero
    // weight (their value may be inf or NaN).
    std::vector<size_t> pick(in.size(), 0);
    ScalarRef acc = c64(0.0);
    while (true) {
      Index src;
      ScalarRef weight = c64(1.0), present;
      for (size_t d = 0; d < in.size(); ++d) {
        const Tap &t = taps[d][pick[d]];
        src.push_back(t.index);
        weight = dag().mul(weight, t.weight);
        if (t.present.valid())
          present = present.valid() ? dag().binary(ScalarOp::And, present, t.present) : t.present;
      }
      ScalarRef term = dag().mul(weight, dag().cast(valueAt(n.operand(0), src), f64));
      if (present.valid())
        term = dag().select(present, term, c64(0.0));
      acc = dag().add(acc, term);
      size_t d = in.size();
      while (d-- > 0) {
        if (++pick[d] < taps[d].size())
          break;
        pick[d] = 0;
      }
      if (d == static_cast<size_t>(-1))
        break;
    }
    return extrapolate(dag().cast(acc, v->type().dtype));
  }
  default:
    return fail("no kernel lowering for op '" + std::string(n.mnemonic()) + "'");
  }
}

FailureOr<Kernel> GroupLowering::run(size_t split) {
  for (const Node *n : g_.nodes)
    members_.insert(n);
  for (const Node *n : g_.recomputed)
    members_.insert(n);
  auto names = detail::valueNames(*g_.outputs.front()->graph());
  for (const Value *v : g_.inputs) {
    inputSlot_[v] = static_cast<int32_t>(k_.inputs.size());
    k_.inputs.push_back({v->type().dtype, sizesOf(v), names[v]});
  }
  for (const Value *v : g_.outputs)
    k_.outputs.push_back({v->type().dtype, sizesOf(v), names[v]});
  k_.name = "kernel_" + sanitize(names[g_.outputs.front()]);

  for (const Node *n : g_.nodes)
    if (detail::isStageNode(*n)) {
      space_ = detail::rowSpaceOf(*n);
      break;
    }
  std::vector<int64_t> domain = space_ ? space_->shape : sizesOf(g_.outputs.front());
  // The loops run over the domain's dims in `order` (channels-last: N,
  // spatial..., C, so that C is the inner loop); full_ stays in the
  // domain's own order.
  std::vector<size_t> order(domain.size());
  std::iota(order.begin(), order.end(), 0);
  if (!space_ && layouts_.iterateChannelsLast && domain.size() >= 3) {
    order.clear();
    order.push_back(0);
    for (size_t d = 2; d < domain.size(); ++d)
      order.push_back(d);
    order.push_back(1);
  }
  std::vector<bool> innerDim(domain.size(), false);
  if (space_) {
    innerDim = space_->reduced;
  } else {
    for (size_t d = split; d < domain.size(); ++d)
      innerDim[order[d]] = true;
  }
  std::vector<int64_t> innerShape;
  for (size_t d : order) {
    if (innerDim[d])
      innerShape.push_back(domain[d]);
    else
      k_.outer.push_back(domain[d]);
  }
  k_.inner = numElements(innerShape);
  for (size_t d = 0; d < k_.outer.size(); ++d)
    outer_.push_back(
        ib_.atom(k_.dag.index(static_cast<int32_t>(d)), std::max<int64_t>(k_.outer[d] - 1, 0)));
  innerNode_ = k_.dag.index(k_.innerSlot());
  Index innerDigits =
      delinearize(ib_.atom(innerNode_, std::max<int64_t>(k_.inner - 1, 0)), innerShape);
  full_.assign(domain.size(), Affine());
  for (size_t k = 0, o = 0, i = 0; k < order.size(); ++k)
    full_[order[k]] = innerDim[order[k]] ? innerDigits[i++] : outer_[o++];

  // Outputs: full-shape ones at the current point, per-row ones once per row.
  Stage rowStage, fullStage;
  rowStage.outerOnly = true;
  for (size_t o = 0; o < g_.outputs.size(); ++o) {
    const Value *v = g_.outputs[o];
    std::vector<int64_t> shape = sizesOf(v);
    Index at;
    Stage *target = &fullStage;
    if (shape == domain) {
      at = full_;
    } else if (space_ && space_->isRowShape(shape)) {
      target = &rowStage;
      if (shape.size() == domain.size())
        for (size_t d = 0, i = 0; d < domain.size(); ++d)
          at.push_back(space_->reduced[d] ? ib_.constant(0) : outer_[i++]);
      else
        at = outer_;
    } else {
      fail("output " + valueRef(names[v]) + " has shape " + sizesStr(shape) +
           ", not the kernel's iteration shape " + sizesStr(domain));
      break;
    }
    ScalarRef value = valueAt(v, at);
    ScalarRef offset = ib_.emit(offsetIn(v, at));
    if (failed_)
      break;
    target->stores.push_back({static_cast<int32_t>(o), offset, value});
  }
  if (failed_)
    return failure();
  if (!rowStage.stores.empty())
    k_.stages.push_back(rowStage);
  if (!fullStage.stores.empty())
    k_.stages.push_back(fullStage);
  std::string why;
  if (!k_.verify(&why)) {
    diag_.emitError(loc()) << "internal error: lowered kernel '" << k_.name
                           << "' does not verify: " << why;
    return failure();
  }
  innerDivisions_ = countInnerDivisions();
  return std::move(k_);
}

} // namespace

namespace detail {
bool resizeLowerable(const Node &n) {
  ResizeOp op(n);
  const TensorType &in = n.operand(0)->type(), &out = n.result(0)->type();
  int64_t taps = 1;
  for (size_t d = 0; d < in.shape.size(); ++d) {
    if (!in.shape[d].isStatic() || !out.shape[d].isStatic())
      continue;
    const double scale = op.scales().empty() ? static_cast<double>(out.shape[d].size()) /
                                                   static_cast<double>(in.shape[d].size())
                                             : op.scales()[d];
    if (scale == 1.0 && in.shape[d] == out.shape[d] &&
        op.coordinate_transformation_mode() != "tf_crop_and_resize")
      continue; // read as it is (the lowering's identity dims)
    taps *= resizeTapsPerDim(op.mode(), op.antialias(), scale);
    if (taps > kMaxResizeTaps)
      return false;
  }
  return true;
}
} // namespace detail

// Note [Inner loop]
//
// A pointwise kernel over shape [d0, ..., dn-1] may run any suffix of its
// dims as the inner loop. Longer inner loops vectorize better and have less
// per-row overhead, but collapsing a dim into the inner loop can turn a load
// that was contiguous or invariant along the inner index into a strided one
// (a broadcast bias [C] read by [N, C, H, W] is invariant over H*W, strided
// over C*H*W), and it can put integer divisions in the inner loop where the
// index of a dim was an outer value (a bilinear resize's source row: y /
// 64 of the collapsed H*W index; [1,32,64,64] upsampled in 445 us, in
// 130 us with W alone inside). So the lowering tries each suffix, longest
// first, and takes the first that makes no more loads strided and no more
// integer divisions of the inner index than the last dim alone does, as
// long as it leaves at least 16 outer points for the threads or its inner
// loop has at most 4096 iterations.

FailureOr<Kernel> lowerGroup(const FusionGroup &group, DiagnosticEngine &diag,
                             const KernelLayouts &layouts) {
  if (group.kind != FusionGroup::Kind::Kernel)
    return diag.emitError(group.nodes.empty() ? Location() : group.nodes.front()->loc())
           << "internal error: only kernel groups lower to kernels";
  if (group.outputs.empty())
    return diag.emitError(group.nodes.empty() ? Location() : group.nodes.front()->loc())
           << "internal error: kernel group without outputs";
  for (const Value *v : group.outputs)
    if (!v->type().isStatic())
      return diag.emitError(v->definingNode() ? v->definingNode()->loc() : Location())
             << "cannot lower a kernel with the dynamic shape " << v->type().str();
  GroupLowering probe(group, diag);
  std::optional<size_t> rank = probe.pointwiseRank();
  if (!rank || *rank <= 1)
    return GroupLowering(group, diag, layouts).run(0);
  // Channels-last iteration: C alone in the inner loop.
  if (layouts.iterateChannelsLast && *rank >= 3)
    return GroupLowering(group, diag, layouts).run(*rank - 1);
  std::vector<int64_t> domain = sizesOf(group.outputs.front());
  // Baseline: the last dim alone.
  DiagnosticEngine quiet;
  GroupLowering base(group, quiet, layouts);
  auto baseline = base.run(*rank - 1);
  if (baseline.failed())
    return GroupLowering(group, diag, layouts).run(*rank - 1); // reports the error
  for (size_t split = 0; split + 1 < *rank; ++split) {
    int64_t outer = 1, inner = 1;
    for (size_t d = 0; d < domain.size(); ++d)
      (d < split ? outer : inner) *= domain[d];
    if (outer < 16 && inner > 4096)
      continue;
    GroupLowering candidate(group, quiet, layouts);
    auto k = candidate.run(split);
    if (k.succeeded() && candidate.numStridedLoads() <= base.numStridedLoads() &&
        candidate.numInnerDivisions() <= base.numInnerDivisions())
      return k;
  }
  return baseline;
}

} // namespace kiln::codegen
