//===- ChannelsLastGroups.cpp - Which kernel groups run channels-last -----===//
//
// The layout facts about fusion groups that ExecutableBuilder.cpp's
// channels-last choice reads (Note [Channels-last buffers] there), and the
// prediction of which library results are stored so (ChannelsLastPlan),
// which the kernels shared over sizes are lowered by too (Note [Shared
// kernels in channels-last] in RunTimeSizes.cpp).
//
//===----------------------------------------------------------------------===//
#include "codegen/ExecutableBuilder.h"

#include "codegen/Internal.h"
#include "codegen/cpu/CpuJit.h"
#include "codegen/cpu/dnnl/OneDnnSteps.h"

namespace kiln::codegen::detail {

/// A pointwise kernel group (no reduction or other row stage) whose
/// outputs all have one shape of rank 3 to 5: it can iterate in
/// channels-last order.
bool isChannelsLastKernel(const FusionGroup &group) {
  if (group.kind != FusionGroup::Kind::Kernel || group.outputs.empty())
    return false;
  const Shape &shape = group.outputs.front()->type().shape;
  if (shape.size() < 3 || shape.size() > 5)
    return false;
  for (const Value *v : group.outputs)
    if (v->type().shape != shape)
      return false;
  for (const auto *list : {&group.nodes, &group.recomputed})
    for (const Node *n : *list)
      if (isStageNode(*n))
        return false;
  return true;
}

/// Whether two shapes differ at most in their channels (dim 1): a kernel
/// iterating channels-last reads such an input along its inner loop too
/// (a concat's operand, Note [Inner loops split where a condition
/// changes] in codegen/cpu/InnerIndex.cpp).
bool sameExceptChannels(const Shape &a, const Shape &b) {
  if (a.size() != b.size() || a.size() < 3)
    return false;
  for (size_t d = 0; d < a.size(); ++d)
    if (d != 1 && a[d] != b[d])
      return false;
  return true;
}

/// Whether kernel group `kg` can iterate channels-last with `v`, one of
/// its inputs, stored channels-last: a pointwise group of v's shape, or
/// pointwise ops, resizes and channel concats whose result differs from
/// v only in its channels (DenseNet's concat + batch norm + ReLU, U-Net's
/// upsampling + concat). Its concats then run along the inner loop,
/// split at each operand (Note [Inner loops split where a condition
/// changes] in codegen/cpu/InnerIndex.cpp), so they may have at most
/// kMaxInnerLoops operands.
bool readsChannelsLast(const FusionGroup &kg, const Value *v) {
  if (!isChannelsLastKernel(kg))
    return false;
  const Shape &shape = kg.outputs.front()->type().shape;
  if (shape == v->type().shape)
    return true;
  if (!sameExceptChannels(shape, v->type().shape))
    return false;
  bool concat = false;
  for (const auto *list : {&kg.nodes, &kg.recomputed})
    for (const Node *n : *list) {
      if (n->kind() == OpKind::Concat) {
        const int64_t rank = n->result()->type().rank();
        const int64_t axis = ConcatOp(*n).axis();
        if ((axis != 1 && axis != 1 - rank) || n->numOperands() > cpu::kMaxInnerLoops)
          return false;
        concat = true;
      } else if (!isPointwiseNode(*n) && n->kind() != OpKind::Resize) {
        return false;
      }
    }
  return concat;
}

KernelLayouts kernelLayouts(const FusionGroup &kg, const std::set<const Value *> &channelsLast) {
  KernelLayouts layouts;
  layouts.iterateChannelsLast =
      std::any_of(kg.inputs.begin(), kg.inputs.end(), [&](const Value *v) {
        return channelsLast.count(v) && readsChannelsLast(kg, v);
      });
  const bool iterate = layouts.iterateChannelsLast;
  layouts.channelsLast = [&kg, &channelsLast, iterate](const Value *v) {
    return channelsLast.count(v) > 0 ||
           (iterate && std::find(kg.outputs.begin(), kg.outputs.end(), v) != kg.outputs.end());
  };
  return layouts;
}

bool isChannelsLastAnchor(const Node *n) {
  return cpu::oneDnnCapabilities().channelsLast(n->kind());
}

/// A kernel group that is one concat along the channels (dim 1) of f32
/// tensors of rank 3 to 5: it can run on channels-last buffers.
bool isChannelConcatGroup(const FusionGroup &group) {
  if (group.kind != FusionGroup::Kind::Kernel || group.nodes.size() != 1 ||
      !group.recomputed.empty() || group.nodes.front()->kind() != OpKind::Concat)
    return false;
  const Node *n = group.nodes.front();
  const TensorType &t = n->result()->type();
  const int64_t rank = t.rank();
  const int64_t axis = ConcatOp(*n).axis();
  return t.dtype == DType::F32 && rank >= 3 && rank <= 5 && (axis == 1 || axis == 1 - rank);
}

ChannelsLastPlan::ChannelsLastPlan(const Graph &g, const FusionPlan &plan, bool useLibraries)
    : useLibraries_(useLibraries) {
  for (const Value *v : g.outputs())
    graphOutputs_.insert(v);
  for (const FusionGroup &group : plan.groups) {
    if (group.kind == FusionGroup::Kind::Library)
      for (size_t pos = 0; pos < group.nodes.size(); ++pos)
        libraryPosition_[group.nodes[pos]] = {&group, pos};
    if (isChannelConcatGroup(group))
      channelConcats_.insert(group.nodes.front());
    if (group.kind == FusionGroup::Kind::Kernel)
      for (const auto *list : {&group.nodes, &group.recomputed})
        for (const Node *n : *list)
          kernelGroupsOf_[n].push_back(&group);
  }
}

bool ChannelsLastPlan::predict(const Value *v) const {
  const size_t rank = v->type().shape.size();
  if (!useLibraries_ || rank < 3 || rank > 5 || v->type().dtype != DType::F32 ||
      graphOutputs_.count(v) || v->uses().empty())
    return false;
  for (const Use &u : v->uses()) {
    if (channelConcats_.count(u.user))
      continue; // concatenated in place of layout, see addChannelsLastConcat
    if (auto k = kernelGroupsOf_.find(u.user); k != kernelGroupsOf_.end()) {
      // Kernels iterating channels-last read it contiguously.
      for (const FusionGroup *kg : k->second)
        if (!isChannelConcatGroup(*kg) && !readsChannelsLast(*kg, v))
          return false;
      continue;
    }
    auto it = libraryPosition_.find(u.user);
    if (it == libraryPosition_.end())
      return false;
    const auto [group, pos] = it->second;
    if (!isChannelsLastAnchor(group->nodes.front()))
      return false;
    if (pos == 0) {
      if (u.operandIndex != 0)
        return false;
      continue;
    }
    // An epilogue add: v is the residual, not the chain, and full size.
    const Node *chain = group->nodes[pos - 1];
    if (u.user->kind() != OpKind::Add || u.user->operand(1 - u.operandIndex) != chain->result() ||
        u.user->operand(u.operandIndex) == chain->result() ||
        !(v->type() == u.user->result()->type()))
      return false;
  }
  return true;
}

} // namespace kiln::codegen::detail
