//===- Compare.h - The one definition of "close enough" ---------*- C++ -*-===//
//
// `--check` on `kiln run`, `kiln compile` and `kiln bench`, `--expect`, the
// bisection of `--check --bisect` and the model tests all compare tensors
// with this function and these defaults (docs/NUMERICS.md, "Tolerance"):
//
//   element i passes  <=>  |got[i] - want[i]| <= atol + rtol * |want[i]|
//
// with rtol = atol = 1e-4 unless given, for float dtypes. NaN matches NaN
// (whatever its sign or payload) and nothing else; an infinite want needs
// the same infinity. Integer and bool tensors (indices, shapes, argmax)
// must be equal, element for element. Shapes must match exactly.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Tensor.h"

#include <cstdint>
#include <string>

namespace kiln {

/// The tolerance of float elements (above); integers compare exactly.
struct Tolerance {
  double rtol = 1e-4;
  double atol = 1e-4;
};

/// What compareTensors found.
struct Comparison {
  bool shapesMatch = true;
  /// "[2,3]" of each, for the message when they differ.
  std::string gotShape, wantShape;
  int64_t numel = 0;
  /// Elements beyond the tolerance.
  int64_t bad = 0;
  /// The largest |got - want| (inf for a NaN or infinity mismatch) and
  /// |got - want| / |want| over elements with want != 0.
  double maxAbs = 0, maxRel = 0;
  /// The first element beyond the tolerance (-1: none), with its values.
  int64_t firstBad = -1;
  double firstGot = 0, firstWant = 0;

  bool ok() const { return shapesMatch && bad == 0; }
};

/// |got - want| of one element under the rules above (0 for NaN vs NaN,
/// inf for NaN vs a number or a wrong infinity).
double elementError(double got, double want);

/// Compares element by element under the rules above.
Comparison compareTensors(const Tensor &got, const Tensor &want, const Tolerance &tol = {});

/// "ok: max abs error 1e-06, max rel error 2e-05, 0 of 10 elements beyond
/// atol 0.0001 + rtol 0.0001 * |want|", or "FAIL: ..." with the first bad
/// element (its index, got and want), or the two shapes.
std::string describe(const Comparison &c, const Tolerance &tol);

} // namespace kiln
