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
#include "codegen/GroupLowering.h"
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

using detail::sizesOf;
using lowering::GroupLowering;

namespace {

std::vector<int64_t> stridesOf(const std::vector<int64_t> &sizes) {
  std::vector<int64_t> s(sizes.size(), 1);
  for (size_t i = sizes.size(); i-- > 1;)
    s[i - 1] = s[i] * sizes[i];
  return s;
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

} // namespace

namespace detail {
std::string sanitizedName(const std::string &s) {
  std::string out;
  for (char c : s)
    out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}
} // namespace detail

namespace lowering {

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
  k_.name = "kernel_" + detail::sanitizedName(names[g_.outputs.front()]);

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

} // namespace lowering

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

std::string layoutKey(const FusionGroup &group, const KernelLayouts &layouts) {
  std::string buffers;
  bool any = layouts.iterateChannelsLast;
  for (const auto *values : {&group.inputs, &group.outputs})
    for (const Value *v : *values) {
      const bool cl = layouts.channelsLast && layouts.channelsLast(v);
      buffers += cl ? 'c' : 'r';
      any |= cl;
    }
  return any ? std::string("cl:") + (layouts.iterateChannelsLast ? "i" : "") + buffers : "";
}

FailureOr<Kernel> lowerGroup(const FusionGroup &group, DiagnosticEngine &diag,
                             const KernelLayouts &layouts, size_t *split) {
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
  size_t chosen = 0;
  auto done = [&](FailureOr<Kernel> k) {
    if (split)
      *split = chosen;
    return k;
  };
  GroupLowering probe(group, diag);
  std::optional<size_t> rank = probe.pointwiseRank();
  if (!rank || *rank <= 1)
    return done(GroupLowering(group, diag, layouts).run(0));
  if (split && *split != kChooseSplit && *split < *rank)
    return done(GroupLowering(group, diag, layouts).run(chosen = *split));
  // Channels-last iteration: C alone in the inner loop.
  chosen = *rank - 1;
  if (layouts.iterateChannelsLast && *rank >= 3)
    return done(GroupLowering(group, diag, layouts).run(chosen));
  std::vector<int64_t> domain = sizesOf(group.outputs.front());
  // Baseline: the last dim alone.
  DiagnosticEngine quiet;
  GroupLowering base(group, quiet, layouts);
  auto baseline = base.run(*rank - 1);
  if (baseline.failed())
    return done(GroupLowering(group, diag, layouts).run(chosen)); // reports the error
  for (size_t s = 0; s + 1 < *rank; ++s) {
    int64_t outer = 1, inner = 1;
    for (size_t d = 0; d < domain.size(); ++d)
      (d < s ? outer : inner) *= domain[d];
    if (outer < 16 && inner > 4096)
      continue;
    GroupLowering candidate(group, quiet, layouts);
    auto k = candidate.run(s);
    if (k.succeeded() && candidate.numStridedLoads() <= base.numStridedLoads() &&
        candidate.numInnerDivisions() <= base.numInnerDivisions()) {
      chosen = s;
      return done(std::move(k));
    }
  }
  return done(std::move(baseline));
}

} // namespace kiln::codegen
