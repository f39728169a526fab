#!/usr/bin/env python3
"""Robustness test of the artifact loader: `mutate_artifact.py KILN KILN_RUNNER MODEL.kir N [--symbolic]`.

With --symbolic, MODEL's symbolic dims are compiled over their default
ranges into a symbolic artifact (Note [Symbolic artifacts] in
codegen/SymbolicArtifact.cpp), and each mutant is loaded by `kiln inspect`,
which compiles it at size 1 from the kernels it holds (the runtime alone
does not load it). Its graph is text (the parser's own mutation test covers
that); its kernels' metadata is what findSharedKernel matches by.

Compiles MODEL to a `.kiln`
artifact, then makes N mutants of its metadata (the protobuf between the
header and the data: byte flips, extreme varints, truncations) and gives
each mutant a valid checksum again, so that the loader's own checks (ids,
sizes, descriptors, blob ranges, the memory plan), not the checksum, must
catch it. `kiln-runner` on each must end with status 0 or 1 (1 with an
`error:`); a signal, a sanitizer report or a hang (20 s) fails the test and
leaves the mutant in $KILN_FUZZ_OUT (default: the system temp dir). The data
part (constants, machine code) is left alone: valid-checksum damage there is
not detectable by any loader (the checksum is what guards it; the other
tests flip bits anywhere). ctest runs it on a model of JIT kernels: on a
conv model, a crafted oneDNN descriptor can still crash inside oneDNN
(tests/lit/tools/compile/resnet-block.kir: mutant 387 of 600).

The checksum is recomputed as runtime/artifact/FileFormat.cpp defines it:
FNV-1a over the file's 64-bit little-endian words (tail zero-padded), with
the header's checksum field (bytes 48-56) read as 0.
"""
import os
import random
import struct
import subprocess
import sys
import tempfile

MASK = (1 << 64) - 1


def checksum(data):
    data = data[:48] + b"\0" * 8 + data[56:]
    if len(data) % 8:
        data += b"\0" * (8 - len(data) % 8)
    h = 0xcbf29ce484222325
    for (w,) in struct.iter_unpack("<Q", data):
        h = ((h ^ w) * 0x100000001b3) & MASK
    return h


def reseal(data):
    return data[:48] + struct.pack("<Q", checksum(data)) + data[56:]


def mutate(rng, data, meta_begin, meta_end):
    b = bytearray(data)
    kind = rng.randrange(4)
    for _ in range(1 + rng.randrange(3)):
        i = rng.randrange(meta_begin, meta_end)
        if kind == 0:
            b[i] ^= 1 << rng.randrange(8)
        elif kind == 1:
            b[i] = rng.choice([0x00, 0x01, 0x7f, 0x80, 0xff])
        elif kind == 2:
            # A large varint where a small one was: 0xff bytes then a terminator.
            n = min(rng.randrange(1, 10), meta_end - i)
            b[i:i + n] = b"\xff" * (n - 1) + b"\x01"
        else:
            b[i] = rng.randrange(256)
    return bytes(b)


def main():
    if len(sys.argv) not in (5, 6) or (len(sys.argv) == 6 and sys.argv[5] != "--symbolic"):
        sys.exit(__doc__)
    kiln, runner, model, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    symbolic = len(sys.argv) == 6
    out = os.environ.get("KILN_FUZZ_OUT") or tempfile.gettempdir()
    env = dict(os.environ, KILN_CACHE="off", OMP_NUM_THREADS="1")
    with tempfile.TemporaryDirectory() as tmp:
        art = os.path.join(tmp, "model.kiln")
        subprocess.run([kiln, "compile", model, "-o", art, "--threads", "1"], check=True,
                       stdout=subprocess.DEVNULL, env=env)
        data = open(art, "rb").read()
        meta_off, meta_len = struct.unpack_from("<QQ", data, 16)
        assert reseal(data) == data, "the checksum here differs from FileFormat.cpp's"
        rng = random.Random(20261202)
        outcomes = {0: 0, 1: 0}
        mutant = os.path.join(tmp, "mutant.kiln")
        for k in range(n):
            m = reseal(mutate(rng, data, meta_off, meta_off + meta_len))
            with open(mutant, "wb") as f:
                f.write(m)
            try:
                load = [kiln, "inspect", mutant] if symbolic else [runner, mutant]
                p = subprocess.run(load + ["--threads", "1"], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, errors="replace",
                                   timeout=20, env=env)
                bad = (p.returncode not in (0, 1) or "Sanitizer" in p.stderr or
                       (p.returncode == 1 and "error:" not in p.stderr))
                what = "exit %d: %s" % (p.returncode, p.stderr[-800:])
            except subprocess.TimeoutExpired:
                bad, what = True, "hung (20 s)"
            if bad:
                keep = os.path.join(out, "artifact-mutant-%d.kiln" % k)
                with open(keep, "wb") as f:
                    f.write(m)
                print("mutate_artifact.py: mutant %d: %s (kept as %s)" % (k, what, keep))
                return 1
            outcomes[p.returncode] += 1
        print("mutate_artifact.py: %d mutants of %d bytes of metadata: %d loaded and ran, %d "
              "refused with an error, none crashed or hung" % (n, meta_len, outcomes[0],
                                                                outcomes[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
