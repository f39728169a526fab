#!/usr/bin/env python3
"""Writes the demo model mlp.kir, its input and NumPy's expected output.

A two-layer perceptron, x[4,64] -> matmul+bias -> gelu -> matmul+bias ->
softmax, with seeded random weights stored as blobs inside the .kir file.
Run with /usr/bin/python3 (Debian's python3-numpy); the outputs are committed.
"""
import base64
import math
import os

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(7)
w0 = (rng.standard_normal((64, 128)) / 8).astype(np.float32)
b0 = (rng.standard_normal(128) / 10).astype(np.float32)
w1 = (rng.standard_normal((128, 10)) / 11).astype(np.float32)
b1 = (rng.standard_normal(10) / 10).astype(np.float32)
x = rng.standard_normal((4, 64)).astype(np.float32)

h = x.astype(np.float64) @ w0 + b0
erf = np.vectorize(math.erf)
h = 0.5 * h * (1 + erf(h / math.sqrt(2)))
z = h @ w1 + b1
z = np.exp(z - z.max(axis=-1, keepdims=True))
y = (z / z.sum(axis=-1, keepdims=True)).astype(np.float32)


def blob(a):
    return base64.b64encode(np.ascontiguousarray(a).tobytes()).decode()


kir = f"""// The demo model of scripts/demo.sh, written by make_example.py.
graph @mlp(%x: f32[4,64]) -> (f32[4,10]) {{
  %w0 = constant @fc0.weight : f32[64,128]
  %b0 = constant @fc0.bias : f32[128]
  %w1 = constant @fc1.weight : f32[128,10]
  %b1 = constant @fc1.bias : f32[10]
  %0 = matmul(%x, %w0) : f32[4,128]
  %1 = add(%0, %b0) : f32[4,128]
  %2 = gelu(%1) : f32[4,128]
  %3 = matmul(%2, %w1) : f32[4,10]
  %4 = add(%3, %b1) : f32[4,10]
  %probs = softmax(%4) : f32[4,10]
  return %probs
}}

blobs {{
  @fc0.bias = "{blob(b0)}"
  @fc0.weight = "{blob(w0)}"
  @fc1.bias = "{blob(b1)}"
  @fc1.weight = "{blob(w1)}"
}}
"""
with open(os.path.join(here, "mlp.kir"), "w") as f:
    f.write(kir)
np.save(os.path.join(here, "x.npy"), x)
np.save(os.path.join(here, "expected_output_0.npy"), y)
