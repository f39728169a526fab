//===- AffineIndexTest.cpp - The kernel index algebra on its own ----------===//
//
// IndexBuilder (codegen/AffineIndex.h): every simplified index, emitted into
// a ScalarDag and evaluated, equals exact integer arithmetic for every value
// of its atoms; and the rewrites the lowering relies on happen (digits of a
// delinearized index linearize back to the index, divisions by a stride the
// coefficients divide vanish).
//
//===----------------------------------------------------------------------===//

#include "codegen/AffineIndex.h"

#include <gtest/gtest.h>

#include <functional>

using namespace kiln;
using namespace kiln::codegen;

namespace {

/// Evaluates `a` with loop index 0 = `i` (and 1 = `j`).
int64_t evalAt(ScalarDag &dag, IndexBuilder &b, const Affine &a, int64_t i, int64_t j = 0) {
  ScalarRef r = b.emit(a);
  auto vals = evaluateScalars(dag, [&](const ScalarNode &n, const std::vector<ScalarValue> &) {
    ScalarValue v;
    v.i = n.slot == 0 ? i : j;
    return v;
  });
  return vals[static_cast<size_t>(r.id)].i;
}

int64_t floorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

TEST(AffineIndexTest, FloorDivIntRoundsTowardMinusInfinity) {
  EXPECT_EQ(floorDivInt(7, 2), 3);
  EXPECT_EQ(floorDivInt(-7, 2), -4);
  EXPECT_EQ(floorDivInt(-8, 2), -4);
  EXPECT_EQ(floorDivInt(7, -2), -4);
  EXPECT_EQ(floorDivInt(0, 5), 0);
}

TEST(AffineIndexTest, DivAndModOfAnAtomMatchIntegerArithmetic) {
  for (int64_t max : {0, 1, 5, 23, 24, 100})
    for (int64_t c : {1, 2, 3, 4, 6, 7, 24}) {
      ScalarDag dag;
      IndexBuilder b(dag);
      Affine i = b.atom(dag.index(0), max);
      Affine q = b.floorDiv(i, c), r = b.mod(i, c);
      Affine back = b.add(b.mul(q, c), r);
      for (int64_t v = 0; v <= max; ++v) {
        SCOPED_TRACE("max " + std::to_string(max) + " c " + std::to_string(c) + " i " +
                     std::to_string(v));
        EXPECT_EQ(evalAt(dag, b, q, v), v / c);
        EXPECT_EQ(evalAt(dag, b, r, v), v % c);
        EXPECT_EQ(evalAt(dag, b, back, v), v);
      }
      // q * c + r is the atom itself, structurally (no div or rem left).
      EXPECT_EQ(back, i) << "max " << max << " c " << c;
    }
}

TEST(AffineIndexTest, DelinearizedDigitsLinearizeBackToTheIndex) {
  // i in [0, 2*3*4) as digits (i / 12, i / 4 % 3, i % 4), then back.
  ScalarDag dag;
  IndexBuilder b(dag);
  Affine i = b.atom(dag.index(0), 23);
  Affine d0 = b.floorDiv(i, 12), d1 = b.mod(b.floorDiv(i, 4), 3), d2 = b.mod(i, 4);
  Affine flat = b.add(b.add(b.mul(d0, 12), b.mul(d1, 4)), d2);
  EXPECT_EQ(flat, i);
  for (int64_t v = 0; v < 24; ++v) {
    EXPECT_EQ(evalAt(dag, b, d0, v), v / 12);
    EXPECT_EQ(evalAt(dag, b, d1, v), v / 4 % 3);
    EXPECT_EQ(evalAt(dag, b, d2, v), v % 4);
  }
}

TEST(AffineIndexTest, SumsOfAtomsWithOffsetsMatchIntegerArithmetic) {
  // (8 * i + j + 3) / 4 and % 4 for i in [0, 5], j in [0, 7]: the terms whose
  // coefficient 4 divides split off; the rest is materialized.
  for (int64_t k : {1, 2, 4, 5, 8}) {
    ScalarDag dag;
    IndexBuilder b(dag);
    Affine i = b.atom(dag.index(0), 5), j = b.atom(dag.index(1), 7);
    Affine e = b.add(b.add(b.mul(i, 8), j), b.constant(3));
    Affine q = b.floorDiv(e, k), r = b.mod(e, k);
    auto [lo, hi] = b.range(e);
    EXPECT_EQ(lo, 3);
    EXPECT_EQ(hi, 8 * 5 + 7 + 3);
    for (int64_t vi = 0; vi <= 5; ++vi)
      for (int64_t vj = 0; vj <= 7; ++vj) {
        int64_t x = 8 * vi + vj + 3;
        EXPECT_EQ(evalAt(dag, b, q, vi, vj), floorDiv(x, k)) << "k " << k;
        EXPECT_EQ(evalAt(dag, b, r, vi, vj), x - floorDiv(x, k) * k) << "k " << k;
      }
  }
}

TEST(AffineIndexTest, CommonFactorsDivideWithoutADivisionPerElement) {
  // Note [Common factors]: (a * i + j + k) / c and % c for every i in
  // [0, 9], j in [0, jmax], over coefficients, constants and divisors
  // whose common factors the rewrite takes out, and ones it must not.
  for (int64_t a : {1, 2, 3, 4, 6, 8, 12, 784})
    for (int64_t jmax : {0, 1, 3, 5, 7, 11, 783})
      for (int64_t k : {0, 1, 2, 5})
        for (int64_t c : {1, 2, 3, 4, 6, 8, 9, 12, 16, 24, 1568}) {
          ScalarDag dag;
          IndexBuilder b(dag);
          Affine i = b.atom(dag.index(0), 9), j = b.atom(dag.index(1), jmax);
          Affine e = b.add(b.add(b.mul(i, a), j), b.constant(k));
          Affine q = b.floorDiv(e, c), r = b.mod(e, c);
          for (int64_t vi = 0; vi <= 9; ++vi)
            for (int64_t vj = 0; vj <= jmax; vj += jmax > 20 ? 97 : 1) {
              int64_t x = a * vi + vj + k;
              ASSERT_EQ(evalAt(dag, b, q, vi, vj), floorDiv(x, c))
                  << a << "i + j + " << k << ", j <= " << jmax << ", / " << c;
              ASSERT_EQ(evalAt(dag, b, r, vi, vj), x - floorDiv(x, c) * c)
                  << a << "i + j + " << k << ", j <= " << jmax << ", % " << c;
            }
        }
  // The shuffle's channel: (784 c + i) / 1568 reads only c's atom.
  ScalarDag dag;
  IndexBuilder b(dag);
  Affine ch = b.atom(dag.index(0), 47), px = b.atom(dag.index(1), 783);
  Affine q = b.floorDiv(b.add(b.mul(ch, 784), px), 1568);
  ASSERT_EQ(q.terms.size(), 1u);
  EXPECT_EQ(q.terms.begin()->first.base, dag.index(0).id) << "no division of the inner index";
}

TEST(AffineIndexTest, ConstantsFoldAndSmallRangesVanish) {
  ScalarDag dag;
  IndexBuilder b(dag);
  EXPECT_EQ(b.floorDiv(b.constant(17), 5), b.constant(3));
  EXPECT_EQ(b.mod(b.constant(17), 5), b.constant(2));
  Affine i = b.atom(dag.index(0), 3);
  EXPECT_EQ(b.floorDiv(i, 4), b.constant(0)) << "i in [0, 3] divided by 4 is 0";
  EXPECT_EQ(b.mod(i, 4), i) << "i in [0, 3] mod 4 is i";
  EXPECT_EQ(b.atom(dag.index(1), 0), b.constant(0)) << "an atom in [0, 0] is 0";
  EXPECT_EQ(b.mul(i, 0), b.constant(0));
}

} // namespace
