//===- Attribute.cpp - Node attributes --------------------------*- C++ -*-===//
#include "ir/Attribute.h"

#include "ir/Graph.h"

#include <bit>
#include <charconv>
#include <cmath>

namespace kiln {

const char *attrKindName(AttrKind k) {
  switch (k) {
  case AttrKind::Int:
    return "int";
  case AttrKind::Float:
    return "float";
  case AttrKind::Bool:
    return "bool";
  case AttrKind::String:
    return "string";
  case AttrKind::Ints:
    return "int list";
  case AttrKind::Floats:
    return "float list";
  case AttrKind::DType:
    return "dtype";
  case AttrKind::Tensor:
    return "tensor";
  case AttrKind::SymInts:
    return "symbolic int list";
  case AttrKind::Graph:
    return "graph";
  }
  return "?";
}

std::optional<std::vector<int64_t>> constantInts(const std::vector<DimExpr> &v) {
  std::vector<int64_t> out;
  for (const DimExpr &e : v) {
    if (!e.isConstant())
      return std::nullopt;
    out.push_back(e.constant());
  }
  return out;
}

bool hasSymbols(const Attribute &a) {
  auto *v = std::get_if<std::vector<DimExpr>>(&a);
  return v && !constantInts(*v);
}

Attribute substituteSymbols(const Attribute &a, const std::map<std::string, int64_t> &values) {
  auto *v = std::get_if<std::vector<DimExpr>>(&a);
  if (!v)
    return a;
  std::map<std::string, DimExpr> subst(values.begin(), values.end());
  std::vector<DimExpr> out;
  for (const DimExpr &e : *v) {
    auto r = e.substitute(subst);
    out.push_back(r ? *r : e);
  }
  return out;
}

bool attrEqual(const Attribute &a, const Attribute &b) {
  if (a.index() != b.index())
    return false;
  if (auto *t = std::get_if<Tensor>(&a))
    return t->bitwiseEqual(std::get<Tensor>(b));
  if (auto *g = std::get_if<GraphAttr>(&a)) {
    const GraphAttr &h = std::get<GraphAttr>(b);
    return *g == h || (*g && h && structurallyEqual(**g, *h));
  }
  if (auto *d = std::get_if<double>(&a))
    return std::bit_cast<uint64_t>(*d) == std::bit_cast<uint64_t>(std::get<double>(b));
  if (auto *fs = std::get_if<std::vector<double>>(&a)) {
    const auto &gs = std::get<std::vector<double>>(b);
    if (fs->size() != gs.size())
      return false;
    for (size_t i = 0; i < fs->size(); ++i)
      if (std::bit_cast<uint64_t>((*fs)[i]) != std::bit_cast<uint64_t>(gs[i]))
        return false;
    return true;
  }
  return a == b;
}

namespace {
template <typename T> std::string shortest(T v) {
  if (std::isnan(v))
    return "nan";
  if (std::isinf(v))
    return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, res.ptr);
  if (s.find_first_of(".e") == std::string::npos)
    s += ".0";
  return s;
}

std::string quoteString(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string elementStr(const Tensor &t, int64_t i) {
  switch (t.dtype()) {
  case DType::F32:
    return formatFloat(t.data<float>()[i]);
  case DType::F64:
    return formatDouble(t.data<double>()[i]);
  case DType::Bool:
    return t.getInt(i) ? "true" : "false";
  default: // f16, bf16 and the mini floats hold floats
    return isFloat(t.dtype()) ? formatFloat(static_cast<float>(t.getDouble(i)))
                              : std::to_string(t.getInt(i));
  }
}
} // namespace

std::string formatDouble(double v) {
  return shortest(v);
}
std::string formatFloat(float v) {
  return shortest(v);
}

std::string denseStr(const Tensor &t) {
  if (t.numel() > 1 && t.isSplat())
    return "dense<" + elementStr(t, 0) + ">";
  if (t.rank() == 0)
    return "dense<" + elementStr(t, 0) + ">";
  std::string s = "dense<[";
  for (int64_t i = 0; i < t.numel(); ++i)
    s += (i ? ", " : "") + elementStr(t, i);
  return s + "]>";
}

std::string attrStr(const Attribute &a) {
  switch (attrKind(a)) {
  case AttrKind::Int:
    return std::to_string(std::get<int64_t>(a));
  case AttrKind::Float:
    return formatDouble(std::get<double>(a));
  case AttrKind::Bool:
    return std::get<bool>(a) ? "true" : "false";
  case AttrKind::String:
    return quoteString(std::get<std::string>(a));
  case AttrKind::Ints: {
    std::string s = "[";
    const auto &v = std::get<std::vector<int64_t>>(a);
    for (size_t i = 0; i < v.size(); ++i)
      s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
  }
  case AttrKind::SymInts: {
    std::string s = "[";
    const auto &v = std::get<std::vector<DimExpr>>(a);
    for (size_t i = 0; i < v.size(); ++i)
      s += (i ? ", " : "") + v[i].str();
    return s + "]";
  }
  case AttrKind::Floats: {
    std::string s = "[";
    const auto &v = std::get<std::vector<double>>(a);
    for (size_t i = 0; i < v.size(); ++i)
      s += (i ? ", " : "") + formatDouble(v[i]);
    return s + "]";
  }
  case AttrKind::DType:
    return std::string(dtypeName(std::get<DType>(a)));
  case AttrKind::Tensor:
    return denseStr(std::get<Tensor>(a));
  case AttrKind::Graph: {
    const GraphAttr &g = std::get<GraphAttr>(a);
    if (!g)
      return "graph <null>";
    std::string s = "graph @" + g->name() + "(";
    for (unsigned i = 0; i < g->numInputs(); ++i)
      s += (i ? ", " : "") + g->input(i)->type().str();
    s += ") -> (";
    for (size_t i = 0; i < g->outputs().size(); ++i)
      s += (i ? ", " : "") + g->outputs()[i]->type().str();
    return s + ")";
  }
  }
  return "?";
}

} // namespace kiln
