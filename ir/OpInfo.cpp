//===- OpInfo.cpp - The op table, built from Ops.def ------------*- C++ -*-===//
#include "ir/Graph.h"
#include "ir/Ops.h"
#include "ir/Parser.h"

#include <array>

namespace kiln {
namespace {

#define REQUIRED nullptr
#define KILN_ATTR_SPEC(Kind, name, dflt) AttrSpec{AttrKind::Kind, #name, dflt},

// One static array of AttrSpec per op.
#define OP(Class, Mnemonic, MinOps, MaxOps, NumResults, Traits, Ulps, ...)                         \
  constexpr AttrSpec kAttrs##Class[] = {KILN_FOR_EACH(KILN_ATTR_SPEC, __VA_ARGS__)                 \
                                            AttrSpec{AttrKind::Int, "", nullptr}};
#include "ir/Ops.def"

Attribute placeholder(AttrKind k) {
  switch (k) {
  case AttrKind::Int:
    return int64_t(0);
  case AttrKind::Float:
    return 0.0;
  case AttrKind::Bool:
    return false;
  case AttrKind::String:
    return std::string();
  case AttrKind::Ints:
    return std::vector<int64_t>();
  case AttrKind::Floats:
    return std::vector<double>();
  case AttrKind::DType:
    return DType::F32;
  case AttrKind::Tensor:
    return Tensor();
  case AttrKind::SymInts:
    return std::vector<DimExpr>();
  case AttrKind::Graph:
    return GraphAttr();
  }
  return int64_t(0);
}

/// `&scalar<K>` for Elementwise ops, null for the others.
template <OpKind K, uint32_t Traits> constexpr ScalarFn scalarHook() {
  if constexpr ((Traits & Elementwise) != 0)
    return &scalar<K>;
  else
    return nullptr;
}

std::vector<OpInfo> buildTable() {
  std::vector<OpInfo> table;
#define OP(Class, Mnemonic, MinOps, MaxOps, NumResults, Traits, Ulps, ...)                         \
  table.push_back(OpInfo{OpKind::Class,                                                            \
                         Mnemonic,                                                                 \
                         MinOps,                                                                   \
                         MaxOps,                                                                   \
                         NumResults,                                                               \
                         Traits,                                                                   \
                         Ulps,                                                                     \
                         std::span<const AttrSpec>(kAttrs##Class, std::size(kAttrs##Class) - 1),   \
                         {},                                                                       \
                         &infer##Class,                                                            \
                         &reference##Class,                                                        \
                         scalarHook<OpKind::Class, static_cast<uint32_t>(Traits)>()});
#include "ir/Ops.def"
  for (OpInfo &info : table) {
    for (const AttrSpec &spec : info.attrs) {
      if (!spec.defaultText) {
        info.defaults.push_back(placeholder(spec.kind));
        continue;
      }
      DiagnosticEngine diag;
      auto parsed = parseAttributeLiteral(spec.kind, spec.defaultText, diag);
      KILN_ASSERT(parsed.succeeded() && "bad default in Ops.def");
      info.defaults.push_back(parsed.take());
    }
  }
  return table;
}

} // namespace

std::span<const OpInfo> allOps() {
  static const std::vector<OpInfo> table = buildTable();
  return table;
}

const OpInfo &opInfo(OpKind kind) {
  return allOps()[static_cast<size_t>(kind)];
}

const OpInfo *lookupOp(std::string_view mnemonic) {
  // The table is sorted by mnemonic (tested), so binary search is valid.
  auto ops = allOps();
  auto it = std::lower_bound(ops.begin(), ops.end(), mnemonic,
                             [](const OpInfo &a, std::string_view m) { return a.mnemonic < m; });
  if (it != ops.end() && it->mnemonic == mnemonic)
    return &*it;
  return nullptr;
}

int OpInfo::attrIndex(std::string_view name) const {
  for (size_t i = 0; i < attrs.size(); ++i)
    if (attrs[i].name == name)
      return static_cast<int>(i);
  return -1;
}

InFlightDiagnostic OpContext::emitError() const {
  InFlightDiagnostic d = diag.emitError(loc);
  d << "'" << info.mnemonic << "' op ";
  return d;
}

void OpContext::assumeEqual(const Dim &a, const Dim &b) const {
  if (assumed && a != b && !a.isDynamic() && !b.isDynamic())
    assumed->push_back(DimEquality{a, b});
}

OpView::OpView(const Node &node) : attrs_(node.attrs()) {}

} // namespace kiln
