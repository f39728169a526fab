//===- pointwise_ref.h - Hand-fused reference of the pointwise model -*- C++ -*-===//
//
// The computation of the "pointwise" model of scripts/make_models.py (class
// Pointwise), written as one fused C++ loop. Per element, with
// gelu(v) = 0.5 * v * (1 + erf(v / sqrt(2))) (PyTorch's exact GELU),
// sigmoid(v) = 1 / (1 + exp(-v)) and silu(v) = v * sigmoid(v):
//
//   a = gelu(x)
//   b = silu(y * 0.5 + a)
//   c = tanh(b) * sigmoid(a - y)
//   d = (c + x) * (b - 0.25) + a * y
//   e = sigmoid(d) * gelu(c * 2.0) - tanh(d + 1.0)
//   out0 = e * x + d,  out1 = c
//
// The target: Kiln's compiled model runs within 1.3x of this loop
// compiled with g++ -O3 -march=native -ffast-math (bench/CMakeLists.txt).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

/// Computes the model over `n` elements of x and y into out0 and out1.
void pointwise_ref(const float *x, const float *y, float *out0, float *out1, int64_t n);
