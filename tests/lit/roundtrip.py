#!/usr/bin/env python3
"""Round-trip check for canonical .kir text: `roundtrip.py KILN FILE`.

The file's non-comment, non-blank lines are its canonical text t. Checks that
print(parse(t)) == t (ignoring blank lines), and that printing is a fixed
point: print(parse(print(parse(t)))) == print(parse(t)). Exit 1 with a diff
on a mismatch.
"""
import difflib
import subprocess
import sys


def strip(text):
    return [l for l in text.splitlines() if l.strip() and not l.lstrip().startswith("//")]


def kiln_opt(kiln, text):
    p = subprocess.run([kiln, "opt", "-", "--split-input-file"], input=text,
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.stderr.write(p.stderr)
        sys.exit(1)
    return p.stdout


def main():
    kiln, path = sys.argv[1], sys.argv[2]
    with open(path) as f:
        src = f.read()
    want = strip(src)
    once = kiln_opt(kiln, src)
    twice = kiln_opt(kiln, once)
    ok = True
    for name, got in (("print(parse(t))", strip(once)), ("print(parse(print(parse(t))))", strip(twice))):
        if got != want:
            ok = False
            sys.stderr.write("%s differs from the input:\n" % name)
            sys.stderr.writelines(l + "\n" for l in difflib.unified_diff(want, got, "input", name, lineterm=""))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
