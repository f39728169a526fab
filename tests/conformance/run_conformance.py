#!/usr/bin/env python3
"""ONNX backend node tests through Kiln's importer and interpreter.

usage: run_conformance.py KILN DATA_DIR EXPECTATIONS [options]
  --importer-src DIR   frontend/onnx: the converter tables that say which ONNX op
                       types Kiln imports (default: ../../frontend/onnx from here)
  --jobs N             kiln processes at once (default 2)
  --filter SUBSTR      run only tests whose name contains SUBSTR (no stale check)
  --scratch DIR        scratch folder (default DATA_DIR/../conformance-scratch)
  --write-expectations FILE   write the observed failures as an expectations file
  -v                   print kiln's output for every unexpected result

DATA_DIR holds ONNX's generated backend tests (DATA_DIR/node/<test>/model.onnx
and test_data_set_N/); when DATA_DIR/.complete is missing the generator
(run_generator.py, next to this script) writes them first, so a build tree
generates once.

A test is *in the table* when its opset is at most 23 (or above, with ops
whose inputs, outputs and attributes are those of opset 23; see prepare())
and every node of its model (subgraphs included) has
an ONNX op type of the default domain that the importer's converter tables
list (parsed from the `{"OpType", since, convert...}` rows of
frontend/onnx/*.cpp, so the list cannot drift from the importer). Only those
tests run: `kiln run model.onnx --data test_data_set_N --check --rtol 1e-3
--atol 1e-7` (ONNX's default backend-test tolerances) for every data set.
A test's op type is its node's op type; a `_expanded` test (the function
body of an op, several nodes) is reported under the op type of its
non-expanded sibling.

EXPECTATIONS lines:
  fail TEST  REASON                      TEST is expected to fail
  tol  TEST  rtol=R atol=A  REASON       run TEST at these tolerances
  # comment
The run fails on any unexpected result either way (a listed test that passes
is a stale expectation), on a listed test that does not exist or is not in the
table, and on a duplicate. It prints the pass rate per op type and overall.
"""
import argparse
import collections
import concurrent.futures
import glob
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))
import kiln_onnx  # noqa: E402
sys.path.insert(0, HERE)
import run_generator  # noqa: E402

RTOL, ATOL = 1e-3, 1e-7  # onnx.backend.test.runner's defaults


def importer_table(src_dir):
    """ONNX op type -> first opset, from the importer's converter tables."""
    table = {}
    row = re.compile(r'\{\s*"([A-Z][A-Za-z0-9]*)"\s*,\s*(\d+)\s*,\s*[A-Za-z_]')
    for path in sorted(glob.glob(os.path.join(src_dir, "*.cpp"))):
        with open(path) as f:
            for m in row.finditer(f.read()):
                table[m.group(1)] = min(int(m.group(2)), table.get(m.group(1), 99))
    if len(table) < 20:
        sys.exit("run_conformance.py: found only %d converter rows under %s; has the importer's "
                 "table format changed?" % (len(table), src_dir))
    return table


def all_graphs(graph):
    import onnx
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from all_graphs(attr.g)
            for g in attr.graphs:
                yield from all_graphs(g)


def graph_ops(graph):
    for g in all_graphs(graph):
        for node in g.node:
            yield node.domain or "ai.onnx", node.op_type


def read_expectations(path):
    fails, tols, errors, seen = {}, {}, [], set()
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            text = line.strip()
            if not text or text.startswith("#"):
                continue
            parts = text.split(None, 2)
            where = "%s:%d" % (path, lineno)
            if len(parts) < 3 or parts[0] not in ("fail", "tol"):
                errors.append("%s: expected 'fail TEST REASON' or 'tol TEST rtol=R atol=A REASON'"
                              % where)
                continue
            kind, test, rest = parts
            if test in seen:
                errors.append("%s: %s is listed twice" % (where, test))
            seen.add(test)
            if kind == "fail":
                fails[test] = rest
            else:
                m = re.match(r"rtol=(\S+)\s+atol=(\S+)\s+(\S.*)$", rest)
                if not m:
                    errors.append("%s: expected 'tol %s rtol=R atol=A REASON'" % (where, test))
                    continue
                tols[test] = (float(m.group(1)), float(m.group(2)), m.group(3))
    return fails, tols, errors


def first_error(text):
    note = text.splitlines()[0] + " " if text.startswith("(prepared") else ""
    lines = text.splitlines()
    for k, line in enumerate(lines):
        if "error" in line.lower() or "FAIL" in line or "not supported" in line:
            # The one-error list of unsupported ops: its first note says why.
            if "does not support:" in line and k + 1 < len(lines) and "note: " in lines[k + 1]:
                return note + line.strip() + " -- " + lines[k + 1].split("note: ", 1)[1].strip()
            return note + line.strip()
    lines = [l for l in text.splitlines() if l.strip()]
    return lines[-1].strip() if lines else "(no output)"


# ONNX op type -> indices of the inputs that configure it (shapes, axes, sizes,
# bounds). Kiln takes these as attributes, so the importer needs them known at
# import time; the node tests often feed them as graph inputs.
CONFIG_INPUTS = {
    "Reshape": (1,), "Slice": (1, 2, 3, 4), "Squeeze": (1,), "Unsqueeze": (1,),
    "Split": (1,), "Pad": (1, 2, 3), "Tile": (1,), "Expand": (1,), "ConstantOfShape": (0,),
    "Range": (0, 1, 2), "Resize": (1, 2, 3), "Upsample": (1,), "Dropout": (1, 2),
    "Clip": (1, 2), "ReduceSum": (1,), "ReduceMean": (1,), "ReduceMax": (1,),
    "ReduceMin": (1,), "ReduceProd": (1,), "ReduceL1": (1,), "ReduceL2": (1,),
    "ReduceLogSum": (1,), "ReduceLogSumExp": (1,), "ReduceSumSquare": (1,),
    "TopK": (1,), "OneHot": (1,), "CumSum": (1,), "Trilu": (1,), "CenterCropPad": (1,),
    "Col2Im": (1, 2),
}
# kMinOpset and kMaxOpset of frontend/onnx/Internal.h, read by main().
MIN_OPSET = MAX_OPSET = None


def importer_opsets(src_dir):
    """(kMinOpset, kMaxOpset) from the importer's Internal.h."""
    with open(os.path.join(src_dir, "Internal.h")) as f:
        text = f.read()
    found = [re.search(r"constexpr int %s = (\d+);" % n, text) for n in ("kMinOpset", "kMaxOpset")]
    if not all(found):
        sys.exit("run_conformance.py: no kMinOpset / kMaxOpset in %s/Internal.h" % src_dir)
    return tuple(int(m.group(1)) for m in found)


def signature(schema):
    """What an op version declares besides its type lists and text."""
    return ([(i.name, i.option) for i in schema.inputs], [(o.name, o.option) for o in schema.outputs],
            sorted((a.name, int(a.type), a.required, a.default_value.SerializeToString())
                   for a in schema.attributes.values()))


def unchanged_since(model, ver, target):
    """True when every default-domain op of the model has at opset `ver` the
    signature it has at `target`: the same inputs, outputs and attributes
    (the versions after 23 that onnx 1.23 knows widen type lists: float8,
    int2/int4, ...), so the model means the same at `target`."""
    import onnx.defs
    for g in all_graphs(model.graph):
        for n in g.node:
            if n.domain not in ("", "ai.onnx"):
                continue
            try:
                a = onnx.defs.get_schema(n.op_type, ver)
                b = onnx.defs.get_schema(n.op_type, target)
            except Exception:  # no such op at `target`
                return False
            if a.since_version != b.since_version and signature(a) != signature(b):
                return False
    return True


def default_opset(model):
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)


def prepare(test_dir, ds, scratch):
    """The preparations the importer's own errors ask for, applied to a copy:
    a model below opset 11 is upgraded with onnx.version_converter; a model
    above opset 23 (newer onnx writes its tests at its newest opset) declares
    opset 23 when each of its ops has the same definition there (else it stays
    as it is, and the importer refuses it); graph inputs that configure an op
    (CONFIG_INPUTS) become initializers holding this data set's values.
    Returns (model path, data dir, note) or None when none applies."""
    import onnx
    from onnx import numpy_helper, version_converter

    model = onnx.load(os.path.join(test_dir, "model.onnx"))
    notes = []
    ver = default_opset(model)
    if ver is not None and ver < MIN_OPSET:
        try:
            model = version_converter.convert_version(model, MIN_OPSET)
        except Exception as e:  # the converter lacks an adapter: leave the test as it is
            return None
        notes.append("opset %d->%d" % (ver, MIN_OPSET))
    if ver is not None and ver > MAX_OPSET and unchanged_since(model, ver, MAX_OPSET):
        for o in model.opset_import:
            if o.domain in ("", "ai.onnx"):
                o.version = MAX_OPSET
        notes.append("opset %d->%d (same op signatures)" % (ver, MAX_OPSET))
    inits = {i.name for i in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in inits]
    # Values that configure an op, and everything they are computed from (a
    # window function's size reaches Range's limit through Cast and Mul):
    # freezing an input at this data set's value leaves the expected outputs
    # unchanged, so the test still checks the same results.
    producer = {o: n for n in model.graph.node for o in n.output}
    todo = [n.input[i] for n in model.graph.node for i in CONFIG_INPUTS.get(n.op_type, ())
            if i < len(n.input) and n.input[i]]
    slots = set()
    while todo:
        v = todo.pop()
        if v in slots:
            continue
        slots.add(v)
        if v in producer:
            todo.extend(x for x in producer[v].input if x)
    frozen = [k for k, i in enumerate(inputs) if i.name in slots]
    if frozen:
        notes.append("froze %s" % ",".join(inputs[k].name for k in frozen))
    if not notes:
        return None
    out_dir = os.path.join(scratch, "prepared-" + os.path.basename(ds))
    os.makedirs(out_dir, exist_ok=True)
    j = 0
    for k, inp in enumerate(inputs):
        with open(os.path.join(ds, "input_%d.pb" % k), "rb") as f:
            raw = f.read()
        if k in frozen:
            t = onnx.TensorProto()
            t.ParseFromString(raw)
            model.graph.initializer.append(numpy_helper.from_array(numpy_helper.to_array(t), inp.name))
            model.graph.input.remove(inp)
        else:
            with open(os.path.join(out_dir, "input_%d.pb" % j), "wb") as f:
                f.write(raw)
            j += 1
    for out in glob.glob(os.path.join(ds, "output_*.pb")):
        with open(out, "rb") as f, open(os.path.join(out_dir, os.path.basename(out)), "wb") as g:
            g.write(f.read())
    path = os.path.join(out_dir, "model.onnx")
    onnx.save(model, path)
    return path, out_dir, "; ".join(notes)


def run_test(kiln, test_dir, rtol, atol, scratch):
    """Returns (status, output, command, note); status is "pass" (as it is),
    "prepared" (passes after prepare()) or "fail"."""
    sets = sorted(glob.glob(os.path.join(test_dir, "test_data_set_*")))
    status, outs, cmds, notes = "pass", [], [], []
    for ds in sets:
        rc, out, cmd = kiln_onnx.check(kiln, os.path.join(test_dir, "model.onnx"), ds, rtol, atol,
                                       timeout=120)
        if rc != 0:
            prep = prepare(test_dir, ds, scratch)
            if prep is None:
                return "fail", out, cmd, ""
            rc, out2, cmd2 = kiln_onnx.check(kiln, prep[0], prep[1], rtol, atol, timeout=120)
            out = "(prepared: %s)\n%s\n(as is:)\n%s" % (prep[2], out2, out)
            cmd = cmd2 + "\n" + cmd
            notes.append(prep[2])
            if rc != 0:
                return "fail", out, cmd, prep[2]
            status = "prepared"
        outs.append(out)
        cmds.append(cmd)
    return status, "\n".join(outs), "\n".join(cmds), "; ".join(notes)


def main():
    ap = argparse.ArgumentParser(usage=__doc__.split("\n")[2])
    ap.add_argument("kiln")
    ap.add_argument("data_dir")
    ap.add_argument("expectations")
    ap.add_argument("--importer-src", default=os.path.join(HERE, "..", "..", "frontend", "onnx"))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--filter", default="")
    ap.add_argument("--scratch", default="")
    ap.add_argument("--write-expectations", default="")
    ap.add_argument("-v", action="store_true")
    args = ap.parse_args()

    import onnx

    t0 = time.time()
    data_dir = os.path.abspath(args.data_dir)
    marker = os.path.join(data_dir, ".complete")
    current = run_generator.stamp()
    if not os.path.exists(marker) or open(marker).readline().strip() != current:
        print("run_conformance.py: generating ONNX's backend tests into %s" % data_dir, flush=True)
        subprocess.run([sys.executable, os.path.join(HERE, "run_generator.py"), data_dir], check=True)
    node_dir = os.path.join(data_dir, "node")
    scratch = os.path.abspath(args.scratch or os.path.join(data_dir, "..", "conformance-scratch"))
    global MIN_OPSET, MAX_OPSET
    MIN_OPSET, MAX_OPSET = importer_opsets(args.importer_src)
    table = importer_table(args.importer_src)
    fails, tols, errors = read_expectations(args.expectations)

    tests = sorted(os.listdir(node_dir))
    ops_of, op_type, newer = {}, {}, {}
    for t in tests:
        m = onnx.load(os.path.join(node_dir, t, "model.onnx"), load_external_data=False)
        ops_of[t] = list(graph_ops(m.graph))
        # Above opset 23 with an op whose signature changed after 23: outside
        # what Kiln imports (it refuses the opset), so not in the table.
        ver = default_opset(m)
        if ver is not None and ver > MAX_OPSET and not unchanged_since(m, ver, MAX_OPSET):
            newer[t] = ver
    for t in tests:
        base = t[:-len("_expanded")] if t.endswith("_expanded") else t
        ops = ops_of.get(base) if base != t and base in ops_of else ops_of[t]
        op_type[t] = ops[0][1] if ops[0][0] == "ai.onnx" else "%s.%s" % ops[0]
    in_table = {t: t not in newer and all(d == "ai.onnx" and o in table for d, o in ops_of[t])
                for t in tests}

    for t in sorted(set(fails) | set(tols)):
        if t not in op_type:
            errors.append("expectation for %s: no such test in %s" % (t, node_dir))
        elif not in_table[t] and not args.filter:
            errors.append("expectation for %s: not in the importer's table, so never run "
                          "(drop the line)" % t)

    selected = [t for t in tests if in_table[t] and args.filter in t]
    if not kiln_onnx.supports_data(args.kiln):
        sys.exit("run_conformance.py: %s run has no --data option" % args.kiln)
    print("run_conformance.py: %d node tests, %d in the importer's table (%d ONNX op types), "
          "running %d" % (len(tests), sum(in_table.values()), len(table), len(selected)), flush=True)

    results = {}

    def job(t):
        rtol, atol = (tols[t][0], tols[t][1]) if t in tols else (RTOL, ATOL)
        return t, run_test(args.kiln, os.path.join(node_dir, t), rtol, atol,
                           os.path.join(scratch, t))

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for t, res in pool.map(job, selected):
            results[t] = res

    unexpected = []
    for t in selected:
        status, out, cmd, _ = results[t]
        if status != "fail" and t in fails:
            unexpected.append((t, "UNEXPECTED PASS (stale expectation: %s)" % fails[t], out, cmd))
        elif status == "fail" and t not in fails:
            unexpected.append((t, "UNEXPECTED FAIL: %s" % first_error(out), out, cmd))

    # Per-op table over all tests (in the table or not).
    per_op = collections.OrderedDict()
    for t in tests:
        row = per_op.setdefault(op_type[t], dict(tests=0, run=0, strict=0, passed=0))
        row["tests"] += 1
        if t in results:
            row["run"] += 1
            row["strict"] += results[t][0] == "pass"
            row["passed"] += results[t][0] != "fail"
    print("\n'as is': kiln run on the test's model and data unchanged; 'passed' adds the tests that"
          "\npass after the preparation the importer's errors ask for (opset < %d upgraded by"
          "\nonnx.version_converter; graph inputs that configure an op frozen to their values)."
          % MIN_OPSET)
    print("\n%-26s %6s %6s %6s %6s %8s" % ("ONNX op type", "tests", "run", "as is", "passed", "rate"))
    for op in sorted(per_op, key=str.lower):
        r = per_op[op]
        if not r["run"]:
            continue
        print("%-26s %6d %6d %6d %6d %7.1f%%" % (op, r["tests"], r["run"], r["strict"],
                                                 r["passed"], 100.0 * r["passed"] / r["run"]))
    not_run = sorted(op for op, r in per_op.items() if not r["run"])
    if not args.filter:
        print("\nop types with no test in the table (%d, %d tests): %s"
              % (len(not_run), sum(per_op[o]["tests"] for o in not_run), " ".join(not_run)))

    if newer and not args.filter:
        print("\ntests above opset %d whose ops changed after %d (%d, not in the table): %s"
              % (MAX_OPSET, MAX_OPSET, len(newer), " ".join(sorted(newer))))
    n_strict = sum(1 for t in selected if results[t][0] == "pass")
    n_pass = sum(1 for t in selected if results[t][0] != "fail")
    n_table = len(selected)
    print("\ntests in the importer's table: passed %d of %d (%.1f%%); as is %d (%.1f%%)"
          % (n_pass, n_table, 100.0 * n_pass / max(n_table, 1), n_strict,
             100.0 * n_strict / max(n_table, 1)))
    if not args.filter:
        print("all %d node tests: passed %d (%.1f%%); as is %d (%.1f%%)"
              % (len(tests), n_pass, 100.0 * n_pass / len(tests), n_strict,
                 100.0 * n_strict / len(tests)))
    print("expected failures: %d; unexpected results: %d; %.1fs"
          % (sum(1 for t in selected if t in fails), len(unexpected), time.time() - t0))

    if args.write_expectations:
        with open(args.write_expectations, "w") as f:
            for t in selected:
                if results[t][0] == "fail":
                    f.write("fail %s  %s\n" % (t, first_error(results[t][1])))
        print("wrote %s" % args.write_expectations)

    for t, what, out, cmd in unexpected:
        print("\n%s: %s\n  $ %s" % (t, what, cmd.replace("\n", "\n  $ ")))
        if args.v:
            print("  " + out.strip().replace("\n", "\n  "))
    for e in errors:
        print("error: " + e)
    return 1 if unexpected or errors else 0


if __name__ == "__main__":
    sys.exit(main())
