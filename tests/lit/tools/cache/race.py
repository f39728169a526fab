"""race.py KILN MODEL N: N processes compile MODEL at once into one empty
compile cache (KILN_CACHE_DIR from the environment); every one must succeed
and agree with the model's expected output, and the entry left behind must
load (checked by the caller)."""
import subprocess
import sys

kiln, model, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
args = sys.argv[4:]
procs = [subprocess.Popen([kiln, "run", model, "--compile"] + args, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True) for _ in range(n)]
bad = 0
for p in procs:
    out, _ = p.communicate()
    if p.returncode != 0 or "check output 0: ok" not in out:
        print("race.py: a concurrent compile failed (exit %d):\n%s" % (p.returncode, out))
        bad += 1
print("race.py: %d of %d concurrent compiles ok" % (n - bad, n))
sys.exit(1 if bad else 0)
