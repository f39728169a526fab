//===- OpClasses.cpp - How codegen classifies ops ----------------*- C++ -*-===//
//
// The node facts the fusion planner and the lowering share (declared in
// Internal.h): a reduction's or normalization's row space, a node's
// pointwise cost, splat constants, and the printer's value names.
//
//===----------------------------------------------------------------------===//
#include "codegen/Internal.h"
#include "ir/Printer.h"

#include <algorithm>
#include <set>

namespace kiln::codegen {

namespace detail {

std::optional<RowSpace> rowSpaceOf(const Node &n) {
  if (!isStageNode(n) || !n.operand(0)->type().isStatic())
    return std::nullopt;
  RowSpace s;
  s.shape = sizesOf(n.operand(0));
  auto rank = static_cast<int64_t>(s.shape.size());
  s.reduced.assign(s.shape.size(), false);
  auto axis = [&](int64_t a) -> std::optional<size_t> {
    if (a < -rank || a >= rank)
      return std::nullopt;
    return static_cast<size_t>(a < 0 ? a + rank : a);
  };
  std::vector<int64_t> axes;
  switch (n.kind()) {
  case OpKind::ReduceSum:
    axes = ReduceSumOp(n).axes();
    break;
  case OpKind::ReduceMean:
    axes = ReduceMeanOp(n).axes();
    break;
  case OpKind::ReduceMax:
    axes = ReduceMaxOp(n).axes();
    break;
  case OpKind::ReduceMin:
    axes = ReduceMinOp(n).axes();
    break;
  case OpKind::ReduceProd:
    axes = ReduceProdOp(n).axes();
    break;
  case OpKind::ArgMax:
    axes = {ArgMaxOp(n).axis()};
    break;
  case OpKind::Softmax:
    axes = {SoftmaxOp(n).axis()};
    break;
  case OpKind::LogSoftmax:
    axes = {LogSoftmaxOp(n).axis()};
    break;
  case OpKind::LayerNorm: {
    auto a = axis(LayerNormOp(n).axis());
    if (!a)
      return std::nullopt;
    for (size_t d = *a; d < s.shape.size(); ++d)
      s.reduced[d] = true;
    return s;
  }
  default:
    return std::nullopt;
  }
  if (axes.empty()) // reduce_* over all axes
    s.reduced.assign(s.shape.size(), true);
  for (int64_t a : axes) {
    auto d = axis(a);
    if (!d)
      return std::nullopt;
    s.reduced[*d] = true;
  }
  return s;
}

int64_t pointwiseCost(const Node &n) {
  // Index maps are index arithmetic; those that select between several
  // loads cost one per load.
  switch (n.kind()) {
  case OpKind::Concat:
    return n.numOperands();
  case OpKind::Pad:
  case OpKind::Gather:
    return 1;
  case OpKind::Resize:
    return 4;
  case OpKind::BatchNorm:
    return 14; // a sqrt and a division per element
  default:
    break;
  }
  if (!n.hasTrait(Elementwise))
    return 0;
  DiagnosticEngine quiet;
  ScalarDag dag;
  std::vector<ScalarRef> ops;
  for (unsigned i = 0; i < n.numOperands(); ++i)
    ops.push_back(
        dag.load(n.operand(i)->type().dtype, static_cast<int32_t>(i), dag.constInt(DType::I64, 0)));
  size_t before = dag.nodes().size();
  auto r =
      lowerElementwise(n.info(), n.attrs(), ops, n.result(0)->type().dtype, dag, n.loc(), quiet);
  if (r.failed())
    return 1000;
  int64_t cost = 0;
  for (size_t i = before; i < dag.nodes().size(); ++i)
    cost += scalarOpInfo(dag.nodes()[i].op).cost;
  return cost;
}

bool isSplatConstant(const Value *v) {
  const Node *def = v->definingNode();
  if (!def || def->kind() != OpKind::Constant)
    return false;
  const Tensor &t = ConstantOp(*def).value();
  return !t.isNull() && t.numel() > 0 && t.isSplat();
}

std::unordered_map<const Value *, std::string> valueNames(const Graph &g) {
  // The Printer's rule: name hints first (first claim wins), then numbers
  // in order for the rest, skipping numbers that are taken.
  std::unordered_map<const Value *, std::string> names;
  std::set<std::string> taken;
  std::vector<const Value *> all;
  for (Value *v : g.inputs())
    all.push_back(v);
  for (Node *n : g.nodes())
    for (unsigned i = 0; i < n->numResults(); ++i)
      all.push_back(n->result(i));
  for (const Value *v : all)
    if (!v->name().empty() && taken.insert(v->name()).second)
      names[v] = v->name();
  unsigned counter = 0;
  for (const Value *v : all) {
    if (names.count(v))
      continue;
    std::string name;
    do
      name = std::to_string(counter++);
    while (taken.count(name));
    taken.insert(name);
    names[v] = name;
  }
  return names;
}

} // namespace detail

} // namespace kiln::codegen
