#!/usr/bin/env python3
"""`expect_exit.py CODE CMD...`: runs CMD, copies its stderr and stdout to
stdout, and succeeds only if CMD exited with exactly CODE (a crash, a signal
or another status fails, naming what happened)."""
import subprocess
import sys

want = int(sys.argv[1])
p = subprocess.run(sys.argv[2:], capture_output=True)
sys.stdout.buffer.write(p.stderr)
sys.stdout.buffer.write(p.stdout)
if p.returncode != want:
    what = "signal %d" % -p.returncode if p.returncode < 0 else "status %d" % p.returncode
    print("expect_exit: %s ended with %s, expected status %d" % (sys.argv[2], what, want))
    sys.exit(1)
