//===- Attribute.h - Node attributes ----------------------------*- C++ -*-===//
//
// An attribute is one of a few kinds; the op table gives each attribute of
// each op its kind and default, so text, builders and verifier all agree.
// Text forms: Int `3`, Float `0.5`, Bool `true`, String `"nearest"`,
// Ints `[1, 0]`, Floats `[0.5, 2.0]`, DType `f32`, Tensor `dense<[1, 2]>`
// (inline) or `@name` (a blob of the module), SymInts `[0, S, -1]`
// (integers that may be expressions over the graph's symbols, ir/DimExpr.h:
// a bound computed from a symbolic dim, such as Slice's end `seq`), Graph
// `graph @body(%i: i64[]) -> (...) { ... }` (a region: the body of an `if`
// or `loop`, a graph of its own that sees only its inputs; Note [Regions]
// in docs/IR.md).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/DimExpr.h"
#include "ir/Tensor.h"

#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace kiln {

class Graph;
/// A region: an immutable graph shared between copies of its node (a pass
/// that changes one clones it and sets the copy).
using GraphAttr = std::shared_ptr<const Graph>;

/// The kinds, in the order of Attribute's alternatives.
enum class AttrKind { Int, Float, Bool, String, Ints, Floats, DType, Tensor, SymInts, Graph };

using Attribute = std::variant<int64_t, double, bool, std::string, std::vector<int64_t>,
                               std::vector<double>, DType, Tensor, std::vector<DimExpr>, GraphAttr>;

// C++ types of the kinds, for the generated accessors (see Ops.h).
using AttrCType_Int = int64_t;
using AttrCType_Float = double;
using AttrCType_Bool = bool;
using AttrCType_String = std::string;
using AttrCType_Ints = std::vector<int64_t>;
using AttrCType_Floats = std::vector<double>;
using AttrCType_DType = DType;
using AttrCType_Tensor = Tensor;
using AttrCType_SymInts = std::vector<DimExpr>;
using AttrCType_Graph = GraphAttr;

inline AttrKind attrKind(const Attribute &a) {
  return static_cast<AttrKind>(a.index());
}
const char *attrKindName(AttrKind k);
/// The values of a SymInts list whose entries are all constants, else nullopt.
std::optional<std::vector<int64_t>> constantInts(const std::vector<DimExpr> &v);
/// True when some entry of a SymInts attribute names a symbol.
bool hasSymbols(const Attribute &a);
/// `a` with the symbols bound in `values` replaced in a SymInts attribute
/// (other kinds are returned as they are).
Attribute substituteSymbols(const Attribute &a, const std::map<std::string, int64_t> &values);
/// Structural equality (tensors by bytes, floats by bits so NaN == NaN,
/// graphs node by node).
bool attrEqual(const Attribute &a, const Attribute &b);
/// Text form; tensors print inline (`dense<...>`), for blobs see Printer; a
/// graph prints as its name and signature (the printer writes its body).
std::string attrStr(const Attribute &a);
/// Shortest text that parses back to exactly `v` (`1.0`, `1e-05`, `inf`).
std::string formatDouble(double v);
std::string formatFloat(float v);
/// Inline text of a tensor's values: `dense<[1.0, 2.0]>` or `dense<0.5>`.
std::string denseStr(const Tensor &t);

} // namespace kiln
