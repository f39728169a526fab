//===- ChannelsLastGroups.cpp - Which kernel groups run channels-last -----===//
//
// The layout facts about fusion groups that ExecutableBuilder.cpp's
// channels-last choice reads (Note [Channels-last buffers] there).
//
//===----------------------------------------------------------------------===//
#include "codegen/ExecutableBuilder.h"

#include "codegen/Internal.h"
#include "codegen/cpu/CpuJit.h"

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

} // namespace kiln::codegen::detail
