"""`write_npy.py OUT D0 D1 ...`: writes an f32 .npy of that shape with
deterministic values in [-1, 1) (the standard library only, no numpy)."""
import struct
import sys

shape = [int(d) for d in sys.argv[2:]]
n = 1
for d in shape:
    n *= d
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % (
    "".join("%d, " % d for d in shape) if len(shape) != 1 else "%d," % shape[0])
header += " " * (63 - (10 + len(header)) % 64) + "\n"
with open(sys.argv[1], "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
    f.write(struct.pack("<%df" % n, *[((i * 37) % 200) / 100.0 - 1.0 for i in range(n)]))
