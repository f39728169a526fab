//===- AffineIndex.h - Symbolic affine indices of kernels -------*- C++ -*-===//
//
// The index algebra of the kernel lowering (codegen/Lower.cpp): indices as
// affine sums of atoms over i64 scalar nodes, with exact floor division and
// remainder by constants, so that reshapes, transposes and the digits of
// delinearized indices fold back into plain strides instead of divisions.
// Tested on its own in tests/unit/codegen/AffineIndexTest.cpp.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/ScalarExpr.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>
#include <optional>
#include <utility>
#include <vector>

namespace kiln::codegen {

// Note [Affine indices]
//
// An index is an Affine: constant + sum of coefficient * atom, where an
// atom (base / stride) % extent reads an i64 DAG node `base` whose range
// [0, max] is known (extent 0: no modulo). Loop indices are atoms; so are
// gathered indices and anything that had to be materialized. Division and
// remainder by a constant split off the terms whose coefficient the divisor
// divides and shift strides and extents of single atoms, and `normalize`
// merges c*(b/s)%e + c*e*(b/(s*e))%e2 back into c*(b/s)%(e*e2): the digits
// of a delinearized index linearize back to the index itself. Values are
// assumed non-negative where they are divided (they are in-bounds indices).

struct Atom {
  int32_t base;
  int64_t stride;
  int64_t extent;
  auto operator<=>(const Atom &) const = default;
};

struct Affine {
  std::map<Atom, int64_t> terms;
  int64_t constant = 0;
  bool operator==(const Affine &) const = default;
};

using Index = std::vector<Affine>;

inline int64_t floorDivInt(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/// Builds and simplifies Affines whose atoms read nodes of one ScalarDag,
/// and emits them into it.
class IndexBuilder {
public:
  explicit IndexBuilder(ScalarDag &dag) : dag_(dag) {}

  void setMax(ScalarRef base, int64_t max) { baseMax_[base.id] = max; }
  Affine constant(int64_t c) {
    Affine a;
    a.constant = c;
    return a;
  }
  /// 1 * base, with base in [0, max].
  Affine atom(ScalarRef base, int64_t max) {
    if (dag_.node(base).op == ScalarOp::ConstInt)
      return constant(dag_.node(base).ivalue);
    setMax(base, max);
    Affine a;
    a.terms[{base.id, 1, 0}] = 1;
    normalize(a);
    return a;
  }
  /// Any i64 node known to lie in [min, max].
  Affine fromScalar(ScalarRef r, int64_t min, int64_t max) {
    if (dag_.node(r).op == ScalarOp::ConstInt)
      return constant(dag_.node(r).ivalue);
    if (min == 0)
      return atom(r, max);
    ScalarRef shifted = dag_.sub(r, dag_.constInt(DType::I64, min));
    Affine a = atom(shifted, max - min);
    a.constant += min;
    return a;
  }

  Affine add(Affine a, const Affine &b) {
    for (const auto &[at, c] : b.terms)
      a.terms[at] += c;
    a.constant += b.constant;
    normalize(a);
    return a;
  }
  Affine mul(Affine a, int64_t c) {
    for (auto &t : a.terms)
      t.second *= c;
    a.constant *= c;
    normalize(a);
    return a;
  }

  std::pair<int64_t, int64_t> range(const Affine &a) const {
    int64_t lo = a.constant, hi = a.constant;
    for (const auto &[at, c] : a.terms) {
      int64_t m = atomMax(at);
      (c > 0 ? hi : lo) += c * m;
    }
    return {lo, hi};
  }

  /// Note [Common factors]: a = factor * p + r with 1 < factor < c,
  /// factor dividing c and 0 <= r < factor. Then floor(a / c) =
  /// floor(p / (c / factor)) and a mod c = factor * (p mod (c / factor)) +
  /// r, with no division of r: (784 c + i) / 1568 for i in [0, 783], the
  /// channel of a shuffle's transpose read through two reshapes, is c / 2,
  /// an outer-loop value, instead of a division per element. The largest
  /// such factor among the gcds of c and the coefficients is taken.
  struct Factored {
    int64_t factor;
    Affine p, r;
  };
  std::optional<Factored> factorOut(const Affine &a, int64_t c) {
    std::optional<Factored> best;
    for (const auto &[at, k] : a.terms) {
      int64_t f = std::gcd(c, k < 0 ? -k : k);
      if (f <= 1 || f >= c || (best && best->factor >= f))
        continue;
      Factored x{f, {}, {}};
      for (const auto &[t, kt] : a.terms) {
        if (kt % f == 0)
          x.p.terms[t] = kt / f;
        else
          x.r.terms[t] = kt;
      }
      x.p.constant = floorDivInt(a.constant, f);
      x.r.constant = a.constant - x.p.constant * f;
      normalize(x.p);
      normalize(x.r);
      auto [lo, hi] = range(x.r);
      if (lo >= 0 && hi < f)
        best = std::move(x);
    }
    return best;
  }

  /// floor(a / c) for c >= 1 (a >= 0 where it matters).
  Affine floorDiv(const Affine &a, int64_t c) {
    if (c == 1)
      return a;
    auto [lo, hi] = range(a);
    if (lo >= 0 && hi < c)
      return constant(0);
    Affine q, r;
    for (const auto &[at, k] : a.terms)
      (k % c == 0 ? q.terms[at] : r.terms[at]) = k % c == 0 ? k / c : k;
    q.constant = floorDivInt(a.constant, c);
    r.constant = a.constant - q.constant * c;
    normalize(q);
    auto [rlo, rhi] = range(r);
    if (rlo >= 0 && rhi < c)
      return q;
    if (auto f = factorOut(a, c))
      return floorDiv(f->p, c / f->factor);
    if (r.terms.size() == 1 && r.constant == 0 && r.terms.begin()->second == 1) {
      Atom at = r.terms.begin()->first;
      if (at.extent == 0 || at.extent % c == 0) {
        Atom d{at.base, at.stride * c, at.extent == 0 ? 0 : at.extent / c};
        q.terms[d] += 1;
        normalize(q);
        return q;
      }
    }
    if (rlo >= 0) {
      ScalarRef rn = emit(r);
      setMax(rn, rhi);
      q.terms[{rn.id, c, 0}] += 1;
      normalize(q);
      return q;
    }
    KILN_ASSERT(lo >= 0 && "division of a possibly negative index");
    ScalarRef an = emit(a);
    setMax(an, hi);
    Affine out;
    out.terms[{an.id, c, 0}] = 1;
    normalize(out);
    return out;
  }

  /// a mod c for c >= 1 (a >= 0 where it matters).
  Affine mod(const Affine &a, int64_t c) {
    if (c == 1)
      return constant(0);
    auto [lo, hi] = range(a);
    if (lo >= 0 && hi < c)
      return a;
    Affine r;
    for (const auto &[at, k] : a.terms)
      if (k % c != 0)
        r.terms[at] = k;
    r.constant = a.constant - floorDivInt(a.constant, c) * c;
    normalize(r);
    auto [rlo, rhi] = range(r);
    if (rlo >= 0 && rhi < c)
      return r;
    if (auto f = factorOut(a, c))
      return add(mul(mod(f->p, c / f->factor), f->factor), f->r);
    if (r.terms.size() == 1 && r.constant == 0 && r.terms.begin()->second == 1) {
      Atom at = r.terms.begin()->first;
      if (at.extent == 0 || at.extent % c == 0) {
        Affine out;
        out.terms[{at.base, at.stride, c}] = 1;
        normalize(out);
        return out;
      }
    }
    KILN_ASSERT(rlo >= 0 && "remainder of a possibly negative index");
    ScalarRef rn = emit(r);
    setMax(rn, rhi);
    Affine out;
    out.terms[{rn.id, 1, c}] = 1;
    normalize(out);
    return out;
  }

  ScalarRef emit(const Affine &a) {
    ScalarRef acc;
    for (const auto &[at, c] : a.terms) {
      ScalarRef x = emitAtom(at);
      if (c != 1)
        x = dag_.mul(x, dag_.constInt(DType::I64, c));
      acc = acc.valid() ? dag_.add(acc, x) : x;
    }
    if (!acc.valid())
      return dag_.constInt(DType::I64, a.constant);
    return a.constant ? dag_.add(acc, dag_.constInt(DType::I64, a.constant)) : acc;
  }

  /// The i64 nodes an affine reads (its atoms' bases).
  std::vector<int32_t> bases(const Affine &a) const {
    std::vector<int32_t> out;
    for (const auto &t : a.terms)
      out.push_back(t.first.base);
    return out;
  }

private:
  int64_t baseMax(int32_t base) const {
    auto it = baseMax_.find(base);
    KILN_ASSERT(it != baseMax_.end() && "atom base without a range");
    return it->second;
  }
  int64_t atomMax(const Atom &a) const {
    int64_t m = baseMax(a.base) / a.stride;
    return a.extent ? std::min(m, a.extent - 1) : m;
  }

  ScalarRef emitAtom(const Atom &a) {
    ScalarRef x{a.base};
    if (a.stride != 1)
      x = dag_.div(x, dag_.constInt(DType::I64, a.stride));
    if (a.extent)
      x = dag_.binary(ScalarOp::Rem, x, dag_.constInt(DType::I64, a.extent));
    return x;
  }

  void normalize(Affine &a) const {
    for (bool changed = true; changed;) {
      changed = false;
      std::map<Atom, int64_t> terms;
      for (const auto &[at, c] : a.terms) {
        if (c == 0)
          continue;
        Atom n = at;
        if (n.extent && n.stride * n.extent > baseMax(n.base))
          n.extent = 0;
        if (atomMax(n) == 0)
          continue;
        terms[n] += c;
      }
      std::erase_if(terms, [](const auto &t) { return t.second == 0; });
      for (const auto &[at, c] : terms) {
        if (!at.extent)
          continue;
        // Look for the next digit of the same base: (b / (s*e)) % e2.
        for (const auto &[other, c2] : terms) {
          if (other.base != at.base || other.stride != at.stride * at.extent || c2 != c * at.extent)
            continue;
          Atom merged{at.base, at.stride, other.extent ? at.extent * other.extent : 0};
          Atom first = at, second = other;
          int64_t coeff = c;
          terms.erase(first);
          terms.erase(second);
          terms[merged] += coeff;
          changed = true;
          break;
        }
        if (changed)
          break;
      }
      a.terms = std::move(terms);
    }
  }

  ScalarDag &dag_;
  std::map<int32_t, int64_t> baseMax_;
};

} // namespace kiln::codegen
