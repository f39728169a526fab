#!/usr/bin/env bash
# Writes what the compiler generates for every zoo model (kernel IR, LLVM IR after O3 and the
# step list) to OUTDIR, one file per model and CPU level, so that a refactoring can show that
# generated code did not change: run it before and after, then `diff -r BEFORE AFTER`.
# Plain oneDNN layouts keep the output free of timing decisions.
# usage: scripts/codegen-snapshot.sh OUTDIR [BUILD_DIR]
set -uo pipefail
out=${1:?usage: scripts/codegen-snapshot.sh OUTDIR [BUILD_DIR]}
build=${2:-build}
kiln=$build/tools/kiln
mkdir -p "$out"
n=0
for model in "$build"/tests/models/zoo/*/model.onnx "$build"/tests/models/zoo-dynamo/*/model.onnx \
  tests/lit/codegen/*.kir; do
  [[ -f $model ]] || continue
  name=$(basename "$(dirname "$model")")
  [[ $model == *.kir ]] && name=kir-$(basename "$model" .kir)
  dims=()
  [[ $name == *dynamic* ]] && dims=(--dim batch=2)
  for cpu in native haswell x86-64; do
    # The summary's timings change from run to run; everything else must not.
    if ! "$kiln" compile "$model" --emit=kernels --emit=llvm-opt --steps --dnnl-layout=plain \
      --cpu "$cpu" "${dims[@]}" 2>&1 | sed -E 's/compiled in .*$/compiled in (time)/' \
      >"$out/$name.$cpu.txt"; then
      echo "# kiln compile exited non-zero" >>"$out/$name.$cpu.txt"
    fi
    n=$((n + 1))
  done
done
echo "wrote $n snapshots to $out"
