//===- OnnxIndexing.cpp - Converters of ONNX index ops ----------*- C++ -*-===//
//
// GatherElements, ScatterElements, GatherND and TopK map one to one onto
// gather_elements, scatter_elements, gather_nd and top_k (ir/ops/Indexing.cpp):
//   - ScatterElements reads `reduction` (opset 16: add, mul; 18: max, min);
//   - GatherND reads `batch_dims` (opset 12);
//   - TopK's K is an input from opset 10, known at import time (Kiln's k is
//     an attribute: the result shape depends on it); `largest` and `sorted`
//     are attributes from opset 11 (both 1 before).
// NonZero's result shape depends on the data; Kiln's shapes are known when
// a graph is compiled, so it is refused with that reason.
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

std::string checkNonZero(const onnx::NodeProto &, int64_t) {
  return "has a result shape that depends on the data (the count of non-zeros), which Kiln's "
         "shapes cannot express yet";
}

Values convertNonZero(NodeContext &) {
  return {}; // never reached: checkNonZero refuses every node
}

const Converter kConverters[] = {
    {"GatherElements", 11, convertGatherElements},
    {"GatherND", 11, convertGatherND},
    {"NonZero", 9, convertNonZero, checkNonZero},
    {"ScatterElements", 11, convertScatterElements, checkScatterElements},
    {"TopK", 10, convertTopK},
};

} // namespace

std::span<const Converter> indexingConverters() {
  return kConverters;
}

} // namespace kiln::onnximport
