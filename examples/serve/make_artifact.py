"""Builds what examples/serve serves: torchvision's mobilenet_v2 (seeded
random weights) captured with kiln.from_torch with a dynamic batch dim,
compiled for one thread at the batch sizes a replica runs (1, 2, 4, 8) and
saved as one size set, plus sample requests and their eager PyTorch
outputs for checking the answers.

    python make_artifact.py OUT_DIR [--size 224] [--requests 64]

writes OUT_DIR/mobilenet_v2.kiln, OUT_DIR/requests.npy (one image per
request) and OUT_DIR/expected.npy (the eager outputs).
"""

import argparse
import os
import sys

import numpy as np
import torch
import torchvision

import kiln

BATCH_SIZES = (1, 2, 4, 8)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--size", type=int, default=224, help="image height and width")
    p.add_argument("--requests", type=int, default=64, help="sample requests to write")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(0)
    module = torchvision.models.mobilenet_v2().eval()
    example = torch.randn(2, 3, a.size, a.size)
    model = kiln.from_torch(module, example, dynamic_shapes=({0: "batch"},))
    exe = kiln.compile(model, threads=1)
    for b in BATCH_SIZES:  # each size compiles once; save() keeps them all
        exe(np.zeros((b, 3, a.size, a.size), np.float32))
    path = os.path.join(a.out, "mobilenet_v2.kiln")
    exe.save(path)
    requests = torch.randn(a.requests, 3, a.size, a.size)
    with torch.no_grad():
        expected = module(requests)
    np.save(os.path.join(a.out, "requests.npy"), requests.numpy())
    np.save(os.path.join(a.out, "expected.npy"), expected.numpy())
    print(f"wrote {path} (batch sizes {', '.join(map(str, BATCH_SIZES))}) and "
          f"{a.requests} requests", file=sys.stderr)


if __name__ == "__main__":
    main()
