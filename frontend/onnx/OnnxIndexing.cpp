//===- OnnxIndexing.cpp - Converters of ONNX index ops ----------*- C++ -*-===//
//
// GatherElements, ScatterElements, GatherND and TopK map one to one onto
// gather_elements, scatter_elements, gather_nd and top_k (ir/ops/Indexing.cpp):
//   - ScatterElements reads `reduction` (opset 16: add, mul; 18: max, min);
//   - GatherND reads `batch_dims` (opset 12);
//   - TopK's K is an input from opset 10, known at import time (Kiln's k is
//     an attribute: the result shape depends on it); `largest` and `sorted`
//     are attributes from opset 11 (both 1 before).
// NonZero maps onto nonzero, whose count the run decides (the interpreter
// runs it; a compile refuses its `?` dim, naming the node).
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
  auto k = ctx.intsInput(1, "K");
  if (!x || !k)
    return {};
  if (k->size() != 1) {
    ctx.emitError() << "needs one K, got " << *k;
    return {};
  }
  return ctx.createMulti(OpKind::TopK, {x},
                         {{"k", (*k)[0]},
                          {"axis", ctx.attrInt("axis", -1)},
                          {"largest", ctx.attrInt("largest", 1) != 0},
                          {"sorted", ctx.attrInt("sorted", 1) != 0}},
                         2);
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
