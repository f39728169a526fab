//===- IndexChecks.cpp - Gather indices to check at run time ----------------===//
//
// Note [Gather indices checked]
// A gather kernel clamps an index outside [-size, size) to stay in bounds
// (LowerNode.cpp), where the reference fails. Constant indices are checked
// at compile time (Compiler.cpp, checkConstantIndices); indices read from
// memory (token ids, a graph input) get an IndexCheckStep before the
// kernel (runtime/IndexCheckStep.h), so a bad one fails the run with the
// reference's error naming the node. Indices computed inside the kernel
// itself are not checked: they stay clamped.
//
//===----------------------------------------------------------------------===//
#include "codegen/Fusion.h"
#include "codegen/Internal.h"
#include "ir/Ops.h"

#include <algorithm>

namespace kiln::codegen::detail {

std::vector<GatherIndexCheck> gatherIndexChecks(const FusionGroup &group) {
  std::vector<GatherIndexCheck> out;
  for (const auto *nodes : {&group.nodes, &group.recomputed})
    for (const Node *n : *nodes) {
      if (n->kind() != OpKind::Gather)
        continue;
      const Value *indices = n->operand(1);
      const Node *def = indices->definingNode();
      if ((def && def->kind() == OpKind::Constant) ||
          std::find(group.inputs.begin(), group.inputs.end(), indices) == group.inputs.end())
        continue;
      const TensorType &data = n->operand(0)->type();
      const int64_t rank = static_cast<int64_t>(data.rank());
      int64_t axis = GatherOp(*n).axis();
      axis = axis < 0 ? axis + rank : axis;
      if (axis < 0 || axis >= rank || !data.shape[static_cast<size_t>(axis)].isStatic() ||
          !indices->type().isStatic())
        continue;
      const Location &loc = n->loc();
      std::string label = loc.diagPrefix();
      out.push_back({indices, axis, data.shape[static_cast<size_t>(axis)].size(),
                     label == "<unknown>" ? "node %" + n->result(0)->name() : label});
    }
  return out;
}

} // namespace kiln::codegen::detail
