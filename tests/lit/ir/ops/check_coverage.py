#!/usr/bin/env python3
"""`check_coverage.py TABLE DIR`: every op mnemonic in TABLE (the output of
`kiln ops`) must be used in a `%roundtrip` .kir file under DIR, and every
errors file must exist for each family. Prints the missing ones."""
import os
import re
import sys

table, folder = sys.argv[1], sys.argv[2]
ops = re.findall(r"^\| `([a-z_]+)` \|", open(table).read(), re.M)
used = set()
for f in os.listdir(folder):
    if not f.endswith(".kir"):
        continue
    text = open(os.path.join(folder, f)).read()
    if "%roundtrip" not in text:
        continue
    used.update(re.findall(r"= ([a-z_]+)[( ]", text))
missing = [op for op in ops if op not in used]
if missing:
    sys.exit("ops without a round-trip test: " + ", ".join(missing))
print("%d ops, all round-tripped" % len(ops))
