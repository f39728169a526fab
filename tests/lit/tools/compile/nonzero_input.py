"""`nonzero_input.py OUT`: writes the f32[2,3] .npy [[0, 1.5, 0], [-2, -0.0, nan]]
for nonzero.kir (the standard library only, no numpy): non-zero at (0, 1),
(1, 0) and (1, 2); -0.0 is zero, NaN is not."""
import struct
import sys

header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
header += " " * (63 - (10 + len(header)) % 64) + "\n"
with open(sys.argv[1], "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
    f.write(struct.pack("<6f", 0.0, 1.5, 0.0, -2.0, -0.0, float("nan")))
