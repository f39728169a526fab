//===- ConcatPieces.cpp - A kernel storing a concat, split by operand -----===//
//
// Note [Concat pieces]
// ~~~~~~~~~~~~~~~~~~~~
// A kernel lowers concat as a select between its operands with every arm
// evaluated (Lower.cpp): cheap when the arms are loads, wasteful when an
// operand is computed in the kernel. U-Net's decoder concatenates a
// bilinear upsampling (an interpolation of four gathered loads per element)
// with a skip connection: every element computed the interpolation, half of
// them for nothing (475 us of its 3.5 ms at one thread, `kiln compile
// build/tests/models/zoo/unet-op17/model.onnx --threads 1 --profile 20`).
//
// When a kernel has one map stage with one store whose value is such a
// select chain on an outer loop index (the concat axis outside the inner
// loop), it is split into one kernel per operand: each iterates over its
// operand's slice of that axis (the index shifted by the slice's start) and
// stores only its arm. The pieces write disjoint parts of the same output
// buffer, one step after the other. Chains of more than kMaxPieces
// operands and outputs of fewer than kMinElements elements stay one kernel
// (each piece is a step of its own: a call, maybe a parallel region).
//
//===----------------------------------------------------------------------===//
#include "codegen/Internal.h"

#include <unordered_map>

namespace kiln::codegen::detail {
namespace {

constexpr size_t kMaxPieces = 8;
constexpr int64_t kMinElements = 4096;

/// Copies the expression `r` of `from` into `to`, with outer index `dim`
/// read as index + `shift`.
class Shifted {
public:
  Shifted(const ScalarDag &from, ScalarDag &to, int32_t dim, int64_t shift)
      : from_(from), to_(to), dim_(dim), shift_(shift) {}

  ScalarRef copy(ScalarRef r) {
    if (!r.valid())
      return r;
    auto it = done_.find(r.id);
    if (it != done_.end())
      return it->second;
    ScalarNode n = from_.node(r);
    ScalarRef out;
    if (n.op == ScalarOp::Index && n.slot == dim_ && shift_ != 0) {
      out = to_.add(to_.index(dim_), to_.constInt(DType::I64, shift_));
    } else {
      for (ScalarRef &a : n.args)
        a = copy(a);
      out = to_.add(n);
    }
    done_.emplace(r.id, out);
    return out;
  }

private:
  const ScalarDag &from_;
  ScalarDag &to_;
  int32_t dim_;
  int64_t shift_;
  std::unordered_map<int32_t, ScalarRef> done_;
};

} // namespace

std::vector<Kernel> splitConcatPieces(const Kernel &k) {
  if (k.stages.size() != 1 || k.stages[0].kind != Stage::Kind::Map || k.stages[0].outerOnly ||
      k.stages[0].stores.size() != 1 || k.outputs.size() != 1 ||
      k.outputs[0].numElements() < kMinElements)
    return {};
  const Store &store = k.stages[0].stores[0];
  // select(i_d < end_0, arm_0, select(i_d < end_1, arm_1, ... arm_n)).
  int32_t dim = -1;
  std::vector<std::pair<int64_t, ScalarRef>> arms; // (end, value)
  ScalarRef r = store.value;
  for (;;) {
    const ScalarNode &sel = k.dag.node(r);
    if (sel.op != ScalarOp::Select)
      break;
    const ScalarNode &lt = k.dag.node(sel.args[0]);
    if (lt.op != ScalarOp::Lt)
      break;
    const ScalarNode &idx = k.dag.node(lt.args[0]), &end = k.dag.node(lt.args[1]);
    if (idx.op != ScalarOp::Index || end.op != ScalarOp::ConstInt ||
        idx.slot >= static_cast<int32_t>(k.outer.size()) || (dim >= 0 && idx.slot != dim))
      break;
    dim = idx.slot;
    const int64_t prev = arms.empty() ? 0 : arms.back().first;
    if (end.ivalue <= prev || end.ivalue >= k.outer[static_cast<size_t>(dim)])
      return {};
    arms.push_back({end.ivalue, sel.args[1]});
    r = sel.args[2];
  }
  if (arms.empty() || arms.size() + 1 > kMaxPieces)
    return {};
  arms.push_back({k.outer[static_cast<size_t>(dim)], r});

  std::vector<Kernel> pieces;
  int64_t begin = 0;
  for (size_t i = 0; i < arms.size(); ++i) {
    Kernel p;
    p.name = k.name + "_part" + std::to_string(i);
    p.inputs = k.inputs;
    p.outputs = k.outputs;
    p.outer = k.outer;
    p.outer[static_cast<size_t>(dim)] = arms[i].first - begin;
    p.inner = k.inner;
    Shifted shifted(k.dag, p.dag, dim, begin);
    Stage stage;
    stage.stores.push_back(
        Store{store.output, shifted.copy(store.offset), shifted.copy(arms[i].second)});
    p.stages.push_back(std::move(stage));
    pieces.push_back(std::move(p));
    begin = arms[i].first;
  }
  return pieces;
}

} // namespace kiln::codegen::detail
