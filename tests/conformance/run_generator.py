#!/usr/bin/env python3
"""Generate ONNX's backend node tests with the onnx of this python.

usage: run_generator.py OUT_DIR

Runs `python3 -m onnx.backend.test.cmd_tools generate-data -o OUT_DIR` after
restoring the NumPy aliases (np.float, np.int, np.bool, np.object) that
NumPy 1.24 removed and that onnx 1.12's test-case generators (Debian's
python3-onnx) still use. Newer onnx (1.23, the venv's) writes only the
model tests that way; their node tests are collected from
onnx.backend.test.case.node and written by the same writer.
Writes OUT_DIR/node/<test>/{model.onnx,test_data_set_N/} (and the few model
tests under OUT_DIR/{real,simple,...}). Writes OUT_DIR/.complete last (the onnx version,
then the count), so a caller can tell a finished generation from an
interrupted or outdated one.
"""
import os
import sys
import warnings

import numpy as np

for alias, value in (("float", float), ("int", int), ("bool", bool), ("object", object),
                     ("complex", complex), ("str", str)):
    if alias not in np.__dict__:
        setattr(np, alias, value)

warnings.filterwarnings("ignore")


def stamp():
    """First line of OUT_DIR/.complete: what generated the tests."""
    import onnx
    return "onnx %s numpy %s" % (onnx.__version__, np.__version__)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: run_generator.py OUT_DIR")
    out = os.path.abspath(sys.argv[1])
    marker = os.path.join(out, ".complete")
    if os.path.exists(marker):
        os.remove(marker)
    from onnx.backend.test import cmd_tools
    sys.argv = ["backend-test-tools", "generate-data", "-o", out]
    cmd_tools.main()
    if not os.path.isdir(os.path.join(out, "node")):
        from onnx.backend.test.case import node
        model_cases = cmd_tools.model_test.collect_testcases
        cmd_tools.model_test.collect_testcases = lambda: node.collect_testcases(None)
        try:
            cmd_tools.main()
        finally:
            cmd_tools.model_test.collect_testcases = model_cases
    n = len(os.listdir(os.path.join(out, "node")))
    with open(marker, "w") as f:
        f.write(stamp() + "\n%d node tests\n" % n)
    print("run_generator: wrote %d node tests to %s" % (n, os.path.join(out, "node")))


if __name__ == "__main__":
    main()
