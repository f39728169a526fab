#!/usr/bin/env python3
"""Robustness test of the .kir parser and verifier: `mutate_parser.py KILN SEED_DIR N`.

Takes every .kir file under SEED_DIR (the lit tests: valid and malformed
inputs), applies N random mutations in total (truncation, byte flips,
deleted/duplicated/swapped tokens and lines, numbers replaced by extreme
values) with a fixed seed, and runs `kiln opt` on each. A run must end with
status 0 or 1 and, on 1, print an `error:`; a crash, a signal, a sanitizer
report or a hang (10 s) fails the test and leaves the input in the scratch
folder given by $KILN_FUZZ_OUT (default: the system temp dir).
"""
import os
import random
import re
import subprocess
import sys
import tempfile

EXTREMES = ["0", "-1", "9223372036854775807", "-9223372036854775808", "99999999999999999999",
            "1e309", "nan", "-inf", "4294967296", "65536", "[]", "[-1]", "\"\"", "?"]


def mutate(rng, text):
    kind = rng.randrange(8)
    if not text:
        return "graph"
    if kind == 0:
        return text[:rng.randrange(len(text))]
    if kind == 1:
        i = rng.randrange(len(text))
        return text[:i] + chr(rng.randrange(1, 256)) + text[i + 1:]
    lines = text.split("\n")
    if kind == 2 and len(lines) > 1:
        del lines[rng.randrange(len(lines))]
        return "\n".join(lines)
    if kind == 3 and len(lines) > 1:
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
        return "\n".join(lines)
    if kind == 4:
        i = rng.randrange(len(lines))
        lines.insert(i, lines[rng.randrange(len(lines))])
        return "\n".join(lines)
    tokens = re.findall(r"\s+|[%@][\w.$]+|-?\d[\w.+-]*|\w+|\"[^\"\n]*\"|.", text)
    if not tokens:
        return text
    i = rng.randrange(len(tokens))
    if kind == 5:
        del tokens[i]
    elif kind == 6:
        tokens[i] = rng.choice(EXTREMES)
    else:
        tokens.insert(i, tokens[rng.randrange(len(tokens))])
    return "".join(tokens)


def main():
    kiln, seed_dir, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    seeds = []
    for root, _, files in os.walk(seed_dir):
        for f in sorted(files):
            if f.endswith(".kir"):
                with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
                    seeds.append(fh.read())
    rng = random.Random(20261201)
    out_dir = os.environ.get("KILN_FUZZ_OUT", tempfile.gettempdir())
    bad = 0
    for k in range(n):
        text = rng.choice(seeds)
        for _ in range(rng.randrange(1, 4)):
            text = mutate(rng, text)
        try:
            p = subprocess.run([kiln, "opt", "-", "--split-input-file"], input=text.encode(
                "utf-8", errors="replace"), capture_output=True, timeout=10)
            code, err = p.returncode, p.stderr.decode(errors="replace")
        except subprocess.TimeoutExpired:
            code, err = "timeout", ""
        ok = code == 0 or (code == 1 and "error:" in err)
        if "Sanitizer" in err or "runtime error:" in err or "internal error" in err:
            ok = False
        if not ok:
            bad += 1
            path = os.path.join(out_dir, "kiln-fuzz-%d.kir" % k)
            with open(path, "w", encoding="utf-8", errors="replace") as fh:
                fh.write(text)
            print("case %d: status %s, input saved to %s\n%s" % (k, code, path, err[-2000:]))
    print("%d mutated inputs, %d bad" % (n, bad))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
