//===- Creation.cpp - Creating tensors and reading them back ----*- C++ -*-===//
//
// The helpers of include/kiln/Eager.h that are not ops: tensors from values,
// deterministic random tensors, and the host reads (item, toVector, ...),
// which tell an active trace that the program looked at a value.
//
//===----------------------------------------------------------------------===//
#include "frontend/trace/Internal.h"
#include "kiln/Eager.h"

#include <cmath>
#include <limits>
#include <numbers>

namespace kiln {
namespace detail {

uint64_t randomBits(uint64_t seed, uint64_t i) {
  // SplitMix64 (Steele, Lea, Flood 2014) of the counter, offset by the seed.
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + (i + 1) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

} // namespace detail

namespace {
/// A double uniform in [0, 1) from 53 random bits.
double unit(uint64_t bits) {
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

void checkCount(size_t count, const std::vector<int64_t> &shape,
                const std::source_location &where) {
  bool ok = true;
  for (int64_t d : shape)
    ok = ok && d >= 0;
  if (ok && static_cast<int64_t>(count) == numElements(shape))
    return;
  Diagnostic d;
  d.loc = detail::toLocation(where);
  d.message = ok ? "tensor of shape " + sizesStr(shape) + " needs " +
                       std::to_string(numElements(shape)) + " values, got " + std::to_string(count)
                 : "tensor shape " + sizesStr(shape) + " has a negative size";
  throw Error({d});
}

void noteRead(const Tensor &t, const std::source_location &where, std::string_view what) {
  if (detail::TraceState *trace = detail::activeTrace())
    if (!t.isNull())
      detail::recordHostRead(*trace, t, detail::toLocation(where), what);
}

void requireTensor(const Tensor &t, const std::source_location &where, std::string_view what) {
  if (!t.isNull())
    return;
  Diagnostic d;
  d.loc = detail::toLocation(where);
  d.message = std::string(what) + "() of a null tensor (a default-constructed kiln::Tensor)";
  throw Error({d});
}
} // namespace

Tensor tensor(const std::vector<double> &values, std::vector<int64_t> shape, DType dtype,
              std::source_location loc) {
  checkCount(values.size(), shape, loc);
  Tensor t = Tensor::zeros(dtype, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i)
    t.setDouble(static_cast<int64_t>(i), values[i]);
  return t;
}

Tensor tensorOfInts(const std::vector<int64_t> &values, std::vector<int64_t> shape, DType dtype,
                    std::source_location loc) {
  checkCount(values.size(), shape, loc);
  Tensor t = Tensor::zeros(dtype, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i)
    t.setInt(static_cast<int64_t>(i), values[i]);
  return t;
}

Tensor scalar(double value, DType dtype) {
  return Tensor::scalar(dtype, value);
}

Tensor full(std::vector<int64_t> shape, double value, DType dtype) {
  Tensor t = Tensor::zeros(dtype, std::move(shape));
  if (value != 0.0 || std::signbit(value))
    for (int64_t i = 0; i < t.numel(); ++i)
      t.setDouble(i, value);
  return t;
}

Tensor zeros(std::vector<int64_t> shape, DType dtype) {
  return Tensor::zeros(dtype, std::move(shape));
}

Tensor ones(std::vector<int64_t> shape, DType dtype) {
  return full(std::move(shape), 1.0, dtype);
}

Tensor randn(std::vector<int64_t> shape, uint64_t seed, DType dtype) {
  Tensor t = Tensor::zeros(dtype, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) {
    uint64_t k = static_cast<uint64_t>(i);
    // Box-Muller; 1 - u keeps the logarithm's argument in (0, 1].
    double u1 = 1.0 - unit(detail::randomBits(seed, 2 * k));
    double u2 = unit(detail::randomBits(seed, 2 * k + 1));
    t.setDouble(i, std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2));
  }
  return t;
}

Tensor uniform(std::vector<int64_t> shape, double low, double high, uint64_t seed, DType dtype) {
  Tensor t = Tensor::zeros(dtype, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i)
    t.setDouble(i, low + (high - low) * unit(detail::randomBits(seed, static_cast<uint64_t>(i))));
  return t;
}

double item(const Tensor &t, std::source_location loc) {
  requireTensor(t, loc, "item");
  if (t.numel() != 1) {
    Diagnostic d;
    d.loc = detail::toLocation(loc);
    d.message = "item() needs a tensor with exactly one element, got " + t.str();
    throw Error({d});
  }
  noteRead(t, loc, "item");
  return t.getDouble(0);
}

std::vector<double> toVector(const Tensor &t, std::source_location loc) {
  requireTensor(t, loc, "toVector");
  noteRead(t, loc, "toVector");
  return t.toDoubles();
}

std::vector<int64_t> toIntVector(const Tensor &t, std::source_location loc) {
  requireTensor(t, loc, "toIntVector");
  noteRead(t, loc, "toIntVector");
  return t.toInts();
}

double maxAbsDiff(const Tensor &a, const Tensor &b, std::source_location loc) {
  requireTensor(a, loc, "maxAbsDiff");
  requireTensor(b, loc, "maxAbsDiff");
  noteRead(a, loc, "maxAbsDiff");
  noteRead(b, loc, "maxAbsDiff");
  if (a.dtype() != b.dtype() || a.shape() != b.shape())
    return std::numeric_limits<double>::infinity();
  double worst = 0.0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    double x = a.getDouble(i), y = b.getDouble(i);
    if (std::isnan(x) || std::isnan(y)) {
      if (std::isnan(x) != std::isnan(y))
        return std::numeric_limits<double>::quiet_NaN();
      continue;
    }
    if (x == y) // also equal infinities
      continue;
    worst = std::max(worst, std::fabs(x - y));
  }
  return worst;
}

bool allClose(const Tensor &a, const Tensor &b, double rtol, double atol,
              std::source_location loc) {
  requireTensor(a, loc, "allClose");
  requireTensor(b, loc, "allClose");
  noteRead(a, loc, "allClose");
  noteRead(b, loc, "allClose");
  if (a.dtype() != b.dtype() || a.shape() != b.shape())
    return false;
  for (int64_t i = 0; i < a.numel(); ++i) {
    double x = a.getDouble(i), y = b.getDouble(i);
    if (std::isnan(x) || std::isnan(y)) {
      if (std::isnan(x) != std::isnan(y))
        return false;
      continue;
    }
    if (x == y)
      continue;
    if (!(std::fabs(x - y) <= atol + rtol * std::fabs(y)))
      return false;
  }
  return true;
}

} // namespace kiln
