//===- OnnxIndexing.cpp - Converters of ONNX index ops ----------*- C++ -*-===//
//
// GatherElements, ScatterElements, GatherND and TopK map one to one onto
// gather_elements, scatter_elements, gather_nd and top_k (ir/ops/Indexing.cpp):
//   - ScatterElements reads `reduction` (opset 16: add, mul; 18: max, min);
//   - GatherND reads `batch_dims` (opset 12);
//   - TopK's K is an input from opset 10: Kiln's attribute k when known at
//     import time, else top_k's second operand, and the results are sized
//     by the run; `largest` and `sorted` are attributes from opset 11 (both
//     1 before).
// NonZero maps onto nonzero, whose count the run decides. Both are run
// between compiled stages (Note [Data-dependent shapes] in
// codegen/Staged.cpp).
//
//===----------------------------------------------------------------------===//
#include "frontend/onnx/Internal.h"

namespace kiln::onnximport {
namespace {

using Values = std::vector<Value *>;

Values convertGatherElements(NodeContext &ctx) {
  return {ctx.create(OpKind::GatherElements, {ctx.input(0, "data"), ctx.input(1, "indices")},
                     {{"axis", ctx.attrInt("axis", 0)}})};
}

Values convertScatterElements(NodeContext &ctx) {
  return {ctx.create(
      OpKind::ScatterElements,
      {ctx.input(0, "data"), ctx.input(1, "indices"), ctx.input(2, "updates")},
      {{"axis", ctx.attrInt("axis", 0)}, {"reduction", ctx.attrString("reduction", "none")}})};
}

std::string checkScatterElements(const onnx::NodeProto &node, int64_t opset) {
  std::string r = attrStringOr(node, "reduction", "none");
  if ((r == "add" || r == "mul") && opset < 16)
    return "reduction '" + r + "' exists from opset 16";
  if ((r == "max" || r == "min") && opset < 18)
    return "reduction '" + r + "' exists from opset 18";
  return "";
}

Values convertGatherND(NodeContext &ctx) {
  return {ctx.create(OpKind::GatherND, {ctx.input(0, "data"), ctx.input(1, "indices")},
                     {{"batch_dims", ctx.attrInt("batch_dims", 0)}})};
}

Values convertTopK(NodeContext &ctx) {
  Value *x = ctx.input(0, "X");
  Value *k = ctx.input(1, "K");
  if (!x || !k)
    return {};
  std::vector<NamedAttr> attrs = {{"axis", ctx.attrInt("axis", -1)},
                                  {"largest", ctx.attrInt("largest", 1) != 0},
                                  {"sorted", ctx.attrInt("sorted", 1) != 0}};
  // A K the run computes (from the data, or from a dim not bound at import)
  // is an operand: the results are sized by the run.
  if (std::optional<SymInts> known = ctx.shapeValueOf(k);
      known && known->size() == 1 && known->front().isKnown()) {
    attrs.push_back({"k", *known->front().value});
    return ctx.createMulti(OpKind::TopK, {x}, attrs, 2);
  }
  return ctx.createMulti(OpKind::TopK, {x, k}, attrs, 2);
}

/// NonZero's count is known only when it runs: the result is i64[rank, ?]
/// (nonzero's ValueDependentShape), which the interpreter runs and a
/// compile refuses.
Values convertNonZero(NodeContext &ctx) {
  return {ctx.create(OpKind::NonZero, {ctx.input(0, "X")})};
}

const Converter kConverters[] = {
    {"GatherElements", 11, convertGatherElements},
    {"GatherND", 11, convertGatherND},
    {"NonZero", 9, convertNonZero},
    {"ScatterElements", 11, convertScatterElements, checkScatterElements},
    {"TopK", 10, convertTopK},
};

} // namespace

std::span<const Converter> indexingConverters() {
  return kConverters;
}

} // namespace kiln::onnximport
