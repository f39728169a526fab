#!/usr/bin/python3
"""Exports a scripted PyTorch model with control flow to ONNX, with test data.

A greedy-style decoder written for torch.jit.script: it loops over
x.size(1) steps (a trip count from an input's size), feeds back its own
output, accumulates the outputs with torch.cat, and damps the state on
steps whose state is large (a branch on a value). torch.onnx writes a Loop
with an If inside. Two test data sets (4 steps, then 9 steps) hold
PyTorch's outputs.

usage: /usr/bin/python3 examples/scripted/export.py OUT_DIR
then:  build/tools/kiln run OUT_DIR/decoder.onnx --data OUT_DIR/test_data_set_0 --check --compile
       build/tools/kiln run OUT_DIR/decoder.onnx --data OUT_DIR/test_data_set_1 --check --compile

Needs Debian's python3-torch (1.13) and python3-onnx; the venv's torch 2.x
works too (it writes the same ops with the TorchScript exporter).
"""
import os
import sys

import torch
import torch.nn as nn
from onnx import numpy_helper


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.wx = nn.Linear(8, 16)
        self.wh = nn.Linear(16, 16)
        self.out = nn.Linear(16, 8)

    def forward(self, x):
        h = torch.zeros(x.size(0), 16)
        y = self.out(h)
        outs = y.unsqueeze(1)
        for t in range(x.size(1)):
            h = torch.tanh(self.wx(x[:, t] + y) + self.wh(h))
            if bool(h.abs().max() > 0.9):
                h = h * 0.5
            y = self.out(h)
            outs = torch.cat([outs, y.unsqueeze(1)], dim=1)
        return outs, h


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "scripted-out"
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    model = torch.jit.script(Decoder().eval())
    example = torch.randn(2, 4, 8)
    path = os.path.join(out, "decoder.onnx")
    torch.onnx.export(model, (example,), path, opset_version=17, input_names=["x"],
                      output_names=["outs", "h"], dynamic_axes={"x": {0: "batch", 1: "steps"}})
    for k, x in enumerate([example, torch.randn(3, 9, 8) * 2]):
        data = os.path.join(out, "test_data_set_%d" % k)
        os.makedirs(data, exist_ok=True)
        with open(os.path.join(data, "input_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(x.numpy(), "x").SerializeToString())
        with torch.no_grad():
            outs = model(x)
        for i, (o, name) in enumerate(zip(outs, ["outs", "h"])):
            with open(os.path.join(data, "output_%d.pb" % i), "wb") as f:
                f.write(numpy_helper.from_array(o.numpy(), name).SerializeToString())
    print("wrote %s with test_data_set_0 (4 steps) and test_data_set_1 (9 steps)" % path)


if __name__ == "__main__":
    main()
