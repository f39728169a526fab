//===- DimExpr.h - Symbolic dim expressions ---------------------*- C++ -*-===//
//
// The size of a symbolic dim: an integer expression over named symbols
// (`batch`, `seq`), kept in one canonical form so that two expressions that
// are equal by the rules below are equal structurally (operator==).
//
// Canonical form: a polynomial with integer coefficients over atoms
//
//   2*N*S + S - 1          (terms sorted, like terms merged, no zero terms)
//
// where an atom is a symbol, or an operation that is not polynomial:
//
//   (S+7)/8                floor division by a positive constant
//   mod(S,4)               floor modulo by a positive constant
//   min(S,128), max(N,M)   operands sorted
//
// Simplifications applied when an expression is built:
//   - floor division and modulo take out every term whose coefficient the
//     divisor divides, and the constant's multiple of it:
//     (8*S+9)/8 = S + 1 + 1/8 -> S+1; mod(8*S+9,8) = 1;
//     (x/a)/b = x/(a*b); mod(mod(x,c),c) = mod(x,c);
//   - min/max pick an operand when their difference is provably of one sign
//     (every symbol is a dim, so it is >= 0): max(S,0) = S, min(S+1,S) = S.
// Division and modulo round toward negative infinity (as Python's `//` and
// `%`, and sympy's FloorDiv/Mod that torch.export writes).
//
// Text form (printed and parsed by the .kir shape grammar): terms joined by
// `+`/`-`, factors by `*`, `/` for floor division, `mod(a,c)`, `min(a,b)`,
// `max(a,b)`, parentheses where a sum is an operand.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace kiln {

class DimExpr;

/// A non-polynomial part of an expression, or a symbol. Immutable.
struct DimAtom {
  enum class Kind { Symbol, FloorDiv, Mod, Min, Max };
  Kind kind = Kind::Symbol;
  /// The symbol's name (Symbol).
  std::string name;
  /// The dividend (FloorDiv, Mod) or the first operand (Min, Max).
  std::shared_ptr<const DimExpr> lhs;
  /// The second operand (Min, Max).
  std::shared_ptr<const DimExpr> rhs;
  /// The positive divisor (FloorDiv, Mod).
  int64_t divisor = 0;
};
using DimAtomPtr = std::shared_ptr<const DimAtom>;

/// coefficient * product of atoms (sorted, repeated for powers).
struct DimTerm {
  int64_t coeff = 0;
  std::vector<DimAtomPtr> factors;
};

/// An integer expression over symbols in canonical form.
class DimExpr {
public:
  /// The constant `c`.
  DimExpr(int64_t c = 0) : constant_(c) {} // NOLINT: implicit, so {1, 0} is a list
  static DimExpr symbol(std::string name);

  bool isConstant() const { return terms_.empty(); }
  int64_t constant() const { return constant_; }
  const std::vector<DimTerm> &terms() const { return terms_; }
  /// The name when the expression is one symbol, else empty.
  const std::string &symbolName() const;

  /// Arithmetic. Overflow of a constant part returns nullopt.
  friend std::optional<DimExpr> add(const DimExpr &a, const DimExpr &b);
  friend std::optional<DimExpr> mul(const DimExpr &a, const DimExpr &b);
  static std::optional<DimExpr> neg(const DimExpr &a);
  static std::optional<DimExpr> sub(const DimExpr &a, const DimExpr &b);
  /// Floor division and modulo by a constant `c > 0`.
  static std::optional<DimExpr> floorDiv(const DimExpr &a, int64_t c);
  static std::optional<DimExpr> ceilDiv(const DimExpr &a, int64_t c);
  static std::optional<DimExpr> mod(const DimExpr &a, int64_t c);
  static DimExpr min(const DimExpr &a, const DimExpr &b);
  static DimExpr max(const DimExpr &a, const DimExpr &b);
  /// `a / b` when `b` divides `a` as polynomials (b a nonzero constant or
  /// one term whose factors each term of `a` has): `12*N / 3 = 4*N`,
  /// `64*N*S / (64*N) = S`. nullopt otherwise.
  static std::optional<DimExpr> exactDiv(const DimExpr &a, const DimExpr &b);

  /// True when the expression is >= 0 for every value of its symbols >= 0.
  bool isProvablyNonNegative() const;
  /// The value with every symbol bound; nullopt when a symbol is unbound,
  /// a value overflows, or a divisor is not positive.
  std::optional<int64_t> evaluate(const std::map<std::string, int64_t> &values) const;
  /// The expression with the bound symbols replaced (others kept).
  std::optional<DimExpr> substitute(const std::map<std::string, DimExpr> &values) const;
  /// Adds every symbol the expression names to `out`.
  void collectSymbols(std::set<std::string> &out) const;

  /// The text form (see the file comment).
  std::string str() const;

  /// Total order of canonical forms (used to sort terms and operands).
  friend int compare(const DimExpr &a, const DimExpr &b);
  bool operator==(const DimExpr &o) const { return compare(*this, o) == 0; }
  bool operator!=(const DimExpr &o) const { return !(*this == o); }

private:
  static DimExpr ofAtom(DimAtomPtr atom);
  static DimExpr minMax(const DimExpr &a, const DimExpr &b, bool isMax);
  /// Sorts terms, merges like ones, drops zeros; false on overflow.
  bool normalize();

  int64_t constant_ = 0;
  std::vector<DimTerm> terms_;
};

std::optional<DimExpr> add(const DimExpr &a, const DimExpr &b);
std::optional<DimExpr> mul(const DimExpr &a, const DimExpr &b);
int compare(const DimExpr &a, const DimExpr &b);

} // namespace kiln
