//===- Compare.cpp - The one definition of "close enough" -----------------===//
#include "ir/Compare.h"

#include <cmath>
#include <cstdio>
#include <limits>

namespace kiln {

double elementError(double got, double want) {
  if (std::isnan(got) || std::isnan(want))
    return std::isnan(got) && std::isnan(want) ? 0 : std::numeric_limits<double>::infinity();
  if (got == want)
    return 0; // also equal infinities
  if (std::isinf(got) || std::isinf(want))
    return std::numeric_limits<double>::infinity();
  return std::fabs(got - want);
}

Comparison compareTensors(const Tensor &got, const Tensor &want, const Tolerance &tol) {
  Comparison c;
  c.numel = want.numel();
  if (got.shape() != want.shape()) {
    c.shapesMatch = false;
    c.gotShape = sizesStr(got.shape());
    c.wantShape = sizesStr(want.shape());
    return c;
  }
  if (!isFloat(got.dtype()) && !isFloat(want.dtype())) {
    for (int64_t i = 0; i < c.numel; ++i) {
      int64_t g = got.getInt(i), w = want.getInt(i);
      if (g == w)
        continue;
      double err = std::fabs(static_cast<double>(g) - static_cast<double>(w));
      c.maxAbs = std::max(c.maxAbs, err);
      if (c.bad++ == 0) {
        c.firstBad = i;
        c.firstGot = static_cast<double>(g);
        c.firstWant = static_cast<double>(w);
      }
    }
    return c;
  }
  for (int64_t i = 0; i < c.numel; ++i) {
    double g = got.getDouble(i), w = want.getDouble(i);
    double err = elementError(g, w);
    c.maxAbs = std::max(c.maxAbs, err);
    if (w != 0 && !std::isnan(w))
      c.maxRel = std::max(c.maxRel, err / std::fabs(w));
    if (err > tol.atol + tol.rtol * (std::isinf(w) ? 0 : std::fabs(w))) {
      if (c.bad++ == 0) {
        c.firstBad = i;
        c.firstGot = g;
        c.firstWant = w;
      }
    }
  }
  return c;
}

std::string describe(const Comparison &c, const Tolerance &tol) {
  char buf[320];
  if (!c.shapesMatch)
    return "FAIL: shape " + c.gotShape + ", expected " + c.wantShape;
  std::snprintf(buf, sizeof(buf),
                "%s: max abs error %.3g, max rel error %.3g, %lld of %lld elements beyond atol "
                "%g + rtol %g * |want|",
                c.ok() ? "ok" : "FAIL", c.maxAbs, c.maxRel, static_cast<long long>(c.bad),
                static_cast<long long>(c.numel), tol.atol, tol.rtol);
  std::string s = buf;
  if (c.firstBad >= 0) {
    std::snprintf(buf, sizeof(buf), "; first at element %lld: got %.9g, want %.9g",
                  static_cast<long long>(c.firstBad), c.firstGot, c.firstWant);
    s += buf;
  }
  return s;
}

} // namespace kiln
