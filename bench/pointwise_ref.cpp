//===- pointwise_ref.cpp - Hand-fused reference of the pointwise model ----===//
//
// Compiled on its own with -O3 -march=native -ffast-math (see
// bench/CMakeLists.txt): GCC then vectorizes the loop and calls glibc's
// libmvec for erff, expf and tanhf. The formula is in pointwise_ref.h.
//
//===----------------------------------------------------------------------===//

#include "pointwise_ref.h"

#include <cmath>

namespace {

inline float sigmoid(float v) {
  return 1.0f / (1.0f + std::exp(-v));
}

inline float gelu(float v) {
  return 0.5f * v * (1.0f + std::erf(v * 0.70710678118654752f));
}

} // namespace

void pointwise_ref(const float *__restrict x, const float *__restrict y, float *__restrict out0,
                   float *__restrict out1, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float a = gelu(x[i]);
    float t = y[i] * 0.5f + a;
    float b = t * sigmoid(t);
    float c = std::tanh(b) * sigmoid(a - y[i]);
    float d = (c + x[i]) * (b - 0.25f) + a * y[i];
    float e = sigmoid(d) * gelu(c * 2.0f) - std::tanh(d + 1.0f);
    out0[i] = e * x[i] + d;
    out1[i] = c;
  }
}
