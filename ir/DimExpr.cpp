//===- DimExpr.cpp - Symbolic dim expressions -------------------*- C++ -*-===//
#include "ir/DimExpr.h"

#include <algorithm>

namespace kiln {
namespace {

int compareInts(int64_t a, int64_t b) {
  return a < b ? -1 : a > b ? 1 : 0;
}

int compareAtoms(const DimAtom &a, const DimAtom &b) {
  if (a.kind != b.kind)
    return compareInts(static_cast<int64_t>(a.kind), static_cast<int64_t>(b.kind));
  switch (a.kind) {
  case DimAtom::Kind::Symbol:
    return a.name.compare(b.name) < 0 ? -1 : a.name == b.name ? 0 : 1;
  case DimAtom::Kind::FloorDiv:
  case DimAtom::Kind::Mod:
    if (int c = compare(*a.lhs, *b.lhs))
      return c;
    return compareInts(a.divisor, b.divisor);
  case DimAtom::Kind::Min:
  case DimAtom::Kind::Max:
    if (int c = compare(*a.lhs, *b.lhs))
      return c;
    return compare(*a.rhs, *b.rhs);
  }
  return 0;
}

int compareFactors(const std::vector<DimAtomPtr> &a, const std::vector<DimAtomPtr> &b) {
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    if (int c = compareAtoms(*a[i], *b[i]))
      return c;
  return compareInts(static_cast<int64_t>(a.size()), static_cast<int64_t>(b.size()));
}

bool atomLess(const DimAtomPtr &a, const DimAtomPtr &b) {
  return compareAtoms(*a, *b) < 0;
}

/// Floor division and modulo of integers (b > 0).
int64_t floorDivInt(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}
int64_t floorModInt(int64_t a, int64_t b) {
  return a - floorDivInt(a, b) * b;
}

bool atomNonNegative(const DimAtom &a) {
  switch (a.kind) {
  case DimAtom::Kind::Symbol:
  case DimAtom::Kind::Mod:
    return true;
  case DimAtom::Kind::FloorDiv:
    return a.lhs->isProvablyNonNegative();
  case DimAtom::Kind::Min:
    return a.lhs->isProvablyNonNegative() && a.rhs->isProvablyNonNegative();
  case DimAtom::Kind::Max:
    return a.lhs->isProvablyNonNegative() || a.rhs->isProvablyNonNegative();
  }
  return false;
}

std::optional<int64_t> evalAtom(const DimAtom &a, const std::map<std::string, int64_t> &values) {
  if (a.kind == DimAtom::Kind::Symbol) {
    auto it = values.find(a.name);
    if (it == values.end())
      return std::nullopt;
    return it->second;
  }
  auto l = a.lhs->evaluate(values);
  if (!l)
    return std::nullopt;
  switch (a.kind) {
  case DimAtom::Kind::FloorDiv:
    return floorDivInt(*l, a.divisor);
  case DimAtom::Kind::Mod:
    return floorModInt(*l, a.divisor);
  default:
    break;
  }
  auto r = a.rhs->evaluate(values);
  if (!r)
    return std::nullopt;
  return a.kind == DimAtom::Kind::Min ? std::min(*l, *r) : std::max(*l, *r);
}

std::optional<DimExpr> substituteAtom(const DimAtomPtr &a,
                                      const std::map<std::string, DimExpr> &values) {
  if (a->kind == DimAtom::Kind::Symbol) {
    auto it = values.find(a->name);
    return it == values.end() ? DimExpr::symbol(a->name) : it->second;
  }
  auto l = a->lhs->substitute(values);
  if (!l)
    return std::nullopt;
  switch (a->kind) {
  case DimAtom::Kind::FloorDiv:
    return DimExpr::floorDiv(*l, a->divisor);
  case DimAtom::Kind::Mod:
    return DimExpr::mod(*l, a->divisor);
  default:
    break;
  }
  auto r = a->rhs->substitute(values);
  if (!r)
    return std::nullopt;
  return a->kind == DimAtom::Kind::Min ? DimExpr::min(*l, *r) : DimExpr::max(*l, *r);
}

/// True when the expression prints as one factor (a symbol or a call).
bool printsAsFactor(const DimExpr &e) {
  return e.constant() == 0 && e.terms().size() == 1 && e.terms()[0].coeff == 1 &&
         e.terms()[0].factors.size() == 1 &&
         e.terms()[0].factors[0]->kind != DimAtom::Kind::FloorDiv;
}

std::string atomStr(const DimAtom &a) {
  switch (a.kind) {
  case DimAtom::Kind::Symbol:
    return a.name;
  case DimAtom::Kind::FloorDiv: {
    std::string l = a.lhs->str();
    return (printsAsFactor(*a.lhs) ? l : "(" + l + ")") + "/" + std::to_string(a.divisor);
  }
  case DimAtom::Kind::Mod:
    return "mod(" + a.lhs->str() + "," + std::to_string(a.divisor) + ")";
  case DimAtom::Kind::Min:
    return "min(" + a.lhs->str() + "," + a.rhs->str() + ")";
  case DimAtom::Kind::Max:
    return "max(" + a.lhs->str() + "," + a.rhs->str() + ")";
  }
  return "?";
}

std::string termStr(const DimTerm &t) {
  std::string out;
  int64_t c = t.coeff < 0 ? -t.coeff : t.coeff;
  if (c != 1)
    out = std::to_string(c);
  // A quotient among other factors is parenthesized: `2*(N/8)`, not `2*N/8`.
  bool alone = t.coeff == 1 && t.factors.size() == 1;
  for (const DimAtomPtr &f : t.factors) {
    if (!out.empty())
      out += "*";
    std::string s = atomStr(*f);
    out += (!alone && f->kind == DimAtom::Kind::FloorDiv) ? "(" + s + ")" : s;
  }
  return out;
}

} // namespace

DimExpr DimExpr::symbol(std::string name) {
  auto a = std::make_shared<DimAtom>();
  a->kind = DimAtom::Kind::Symbol;
  a->name = std::move(name);
  return ofAtom(std::move(a));
}

DimExpr DimExpr::ofAtom(DimAtomPtr atom) {
  DimExpr e;
  e.terms_.push_back(DimTerm{1, {std::move(atom)}});
  return e;
}

const std::string &DimExpr::symbolName() const {
  static const std::string empty;
  if (constant_ == 0 && terms_.size() == 1 && terms_[0].coeff == 1 &&
      terms_[0].factors.size() == 1 && terms_[0].factors[0]->kind == DimAtom::Kind::Symbol)
    return terms_[0].factors[0]->name;
  return empty;
}

bool DimExpr::normalize() {
  for (DimTerm &t : terms_)
    std::sort(t.factors.begin(), t.factors.end(), atomLess);
  std::stable_sort(terms_.begin(), terms_.end(), [](const DimTerm &a, const DimTerm &b) {
    return compareFactors(a.factors, b.factors) < 0;
  });
  std::vector<DimTerm> merged;
  for (DimTerm &t : terms_) {
    if (!merged.empty() && compareFactors(merged.back().factors, t.factors) == 0) {
      if (__builtin_add_overflow(merged.back().coeff, t.coeff, &merged.back().coeff))
        return false;
    } else {
      merged.push_back(std::move(t));
    }
  }
  terms_.clear();
  for (DimTerm &t : merged)
    if (t.coeff != 0)
      terms_.push_back(std::move(t));
  return true;
}

std::optional<DimExpr> add(const DimExpr &a, const DimExpr &b) {
  DimExpr r = a;
  if (__builtin_add_overflow(a.constant_, b.constant_, &r.constant_))
    return std::nullopt;
  r.terms_.insert(r.terms_.end(), b.terms_.begin(), b.terms_.end());
  if (!r.normalize())
    return std::nullopt;
  return r;
}

std::optional<DimExpr> mul(const DimExpr &a, const DimExpr &b) {
  // Every term of a (the constant as a term without factors) by every term of b.
  auto withConstant = [](const DimExpr &e) {
    std::vector<DimTerm> ts = e.terms_;
    if (e.constant_ != 0)
      ts.push_back(DimTerm{e.constant_, {}});
    return ts;
  };
  DimExpr r;
  for (const DimTerm &x : withConstant(a)) {
    for (const DimTerm &y : withConstant(b)) {
      DimTerm t;
      if (__builtin_mul_overflow(x.coeff, y.coeff, &t.coeff))
        return std::nullopt;
      t.factors = x.factors;
      t.factors.insert(t.factors.end(), y.factors.begin(), y.factors.end());
      if (t.factors.empty()) {
        if (__builtin_add_overflow(r.constant_, t.coeff, &r.constant_))
          return std::nullopt;
      } else {
        r.terms_.push_back(std::move(t));
      }
    }
  }
  if (!r.normalize())
    return std::nullopt;
  return r;
}

std::optional<DimExpr> DimExpr::neg(const DimExpr &a) {
  return mul(a, DimExpr(-1));
}

std::optional<DimExpr> DimExpr::sub(const DimExpr &a, const DimExpr &b) {
  auto nb = neg(b);
  if (!nb)
    return std::nullopt;
  return add(a, *nb);
}

std::optional<DimExpr> DimExpr::floorDiv(const DimExpr &a, int64_t c) {
  if (c <= 0)
    return std::nullopt;
  if (c == 1)
    return a;
  // a = c*q + rest, with every coefficient of rest and its constant in [0, c).
  DimExpr q(floorDivInt(a.constant_, c)), rest(floorModInt(a.constant_, c));
  for (const DimTerm &t : a.terms_) {
    if (int64_t qc = floorDivInt(t.coeff, c))
      q.terms_.push_back(DimTerm{qc, t.factors});
    if (int64_t rc = floorModInt(t.coeff, c))
      rest.terms_.push_back(DimTerm{rc, t.factors});
  }
  if (rest.terms_.empty())
    return q; // 0 <= rest.constant < c
  DimAtomPtr atom;
  const DimTerm &only = rest.terms_[0];
  if (rest.constant_ == 0 && rest.terms_.size() == 1 && only.coeff == 1 &&
      only.factors.size() == 1 && only.factors[0]->kind == DimAtom::Kind::FloorDiv) {
    // (x/a)/c = x/(a*c).
    int64_t d;
    if (__builtin_mul_overflow(only.factors[0]->divisor, c, &d))
      return std::nullopt;
    auto inner = floorDiv(*only.factors[0]->lhs, d);
    if (!inner)
      return std::nullopt;
    return add(q, *inner);
  }
  auto at = std::make_shared<DimAtom>();
  at->kind = DimAtom::Kind::FloorDiv;
  at->lhs = std::make_shared<const DimExpr>(std::move(rest));
  at->divisor = c;
  return add(q, ofAtom(std::move(at)));
}

std::optional<DimExpr> DimExpr::ceilDiv(const DimExpr &a, int64_t c) {
  if (c <= 0)
    return std::nullopt;
  auto shifted = add(a, DimExpr(c - 1));
  if (!shifted)
    return std::nullopt;
  return floorDiv(*shifted, c);
}

std::optional<DimExpr> DimExpr::mod(const DimExpr &a, int64_t c) {
  if (c <= 0)
    return std::nullopt;
  DimExpr rest(floorModInt(a.constant_, c));
  for (const DimTerm &t : a.terms_)
    if (int64_t rc = floorModInt(t.coeff, c))
      rest.terms_.push_back(DimTerm{rc, t.factors});
  if (rest.terms_.empty())
    return rest;
  const DimTerm &only = rest.terms_[0];
  if (rest.constant_ == 0 && rest.terms_.size() == 1 && only.coeff == 1 &&
      only.factors.size() == 1 && only.factors[0]->kind == DimAtom::Kind::Mod &&
      only.factors[0]->divisor == c)
    return rest; // mod(mod(x,c),c)
  auto at = std::make_shared<DimAtom>();
  at->kind = DimAtom::Kind::Mod;
  at->lhs = std::make_shared<const DimExpr>(std::move(rest));
  at->divisor = c;
  return ofAtom(std::move(at));
}

DimExpr DimExpr::minMax(const DimExpr &a, const DimExpr &b, bool isMax) {
  if (auto d = sub(a, b)) {
    if (d->isProvablyNonNegative())
      return isMax ? a : b;
    if (auto nd = neg(*d); nd && nd->isProvablyNonNegative())
      return isMax ? b : a;
  }
  auto at = std::make_shared<DimAtom>();
  at->kind = isMax ? DimAtom::Kind::Max : DimAtom::Kind::Min;
  // Sorted, a constant last: min(S,512).
  bool swap = a.isConstant() != b.isConstant() ? a.isConstant() : compare(b, a) < 0;
  at->lhs = std::make_shared<const DimExpr>(swap ? b : a);
  at->rhs = std::make_shared<const DimExpr>(swap ? a : b);
  return ofAtom(std::move(at));
}

DimExpr DimExpr::min(const DimExpr &a, const DimExpr &b) {
  return minMax(a, b, false);
}

DimExpr DimExpr::max(const DimExpr &a, const DimExpr &b) {
  return minMax(a, b, true);
}

std::optional<DimExpr> DimExpr::exactDiv(const DimExpr &a, const DimExpr &b) {
  if (b.isConstant()) {
    int64_t c = b.constant_;
    if (c == 0 || a.constant_ % c != 0)
      return std::nullopt;
    DimExpr r(a.constant_ / c);
    for (const DimTerm &t : a.terms_) {
      if (t.coeff % c != 0)
        return std::nullopt;
      r.terms_.push_back(DimTerm{t.coeff / c, t.factors});
    }
    return r;
  }
  if (b.constant_ != 0 || b.terms_.size() != 1 || a.constant_ != 0)
    return std::nullopt;
  const DimTerm &d = b.terms_[0];
  DimExpr r;
  for (const DimTerm &t : a.terms_) {
    if (t.coeff % d.coeff != 0)
      return std::nullopt;
    // Remove d's factors (both lists are sorted) from t's.
    std::vector<DimAtomPtr> left;
    size_t j = 0;
    for (const DimAtomPtr &f : t.factors) {
      if (j < d.factors.size() && compareAtoms(*f, *d.factors[j]) == 0)
        ++j;
      else
        left.push_back(f);
    }
    if (j != d.factors.size())
      return std::nullopt;
    if (left.empty())
      r.constant_ += t.coeff / d.coeff;
    else
      r.terms_.push_back(DimTerm{t.coeff / d.coeff, std::move(left)});
  }
  if (!r.normalize())
    return std::nullopt;
  return r;
}

bool DimExpr::isProvablyNonNegative() const {
  if (constant_ < 0)
    return false;
  for (const DimTerm &t : terms_) {
    if (t.coeff < 0)
      return false;
    for (const DimAtomPtr &f : t.factors)
      if (!atomNonNegative(*f))
        return false;
  }
  return true;
}

std::optional<int64_t> DimExpr::evaluate(const std::map<std::string, int64_t> &values) const {
  int64_t sum = constant_;
  for (const DimTerm &t : terms_) {
    int64_t p = t.coeff;
    for (const DimAtomPtr &f : t.factors) {
      auto v = evalAtom(*f, values);
      if (!v || __builtin_mul_overflow(p, *v, &p))
        return std::nullopt;
    }
    if (__builtin_add_overflow(sum, p, &sum))
      return std::nullopt;
  }
  return sum;
}

std::optional<DimExpr> DimExpr::substitute(const std::map<std::string, DimExpr> &values) const {
  DimExpr sum(constant_);
  for (const DimTerm &t : terms_) {
    std::optional<DimExpr> p = DimExpr(t.coeff);
    for (const DimAtomPtr &f : t.factors) {
      auto v = substituteAtom(f, values);
      if (!v || !(p = mul(*p, *v)))
        return std::nullopt;
    }
    auto s = add(sum, *p);
    if (!s)
      return std::nullopt;
    sum = std::move(*s);
  }
  return sum;
}

void DimExpr::collectSymbols(std::set<std::string> &out) const {
  for (const DimTerm &t : terms_) {
    for (const DimAtomPtr &f : t.factors) {
      if (f->kind == DimAtom::Kind::Symbol)
        out.insert(f->name);
      if (f->lhs)
        f->lhs->collectSymbols(out);
      if (f->rhs)
        f->rhs->collectSymbols(out);
    }
  }
}

std::string DimExpr::str() const {
  std::string out;
  for (const DimTerm &t : terms_) {
    if (t.coeff < 0)
      out += "-";
    else if (!out.empty())
      out += "+";
    out += termStr(t);
  }
  if (out.empty())
    return std::to_string(constant_);
  if (constant_ > 0)
    out += "+" + std::to_string(constant_);
  else if (constant_ < 0)
    out += std::to_string(constant_);
  return out;
}

int compare(const DimExpr &a, const DimExpr &b) {
  for (size_t i = 0; i < a.terms_.size() && i < b.terms_.size(); ++i) {
    if (int c = compareFactors(a.terms_[i].factors, b.terms_[i].factors))
      return c;
    if (int c = compareInts(a.terms_[i].coeff, b.terms_[i].coeff))
      return c;
  }
  if (int c =
          compareInts(static_cast<int64_t>(a.terms_.size()), static_cast<int64_t>(b.terms_.size())))
    return c;
  return compareInts(a.constant_, b.constant_);
}

} // namespace kiln
