#!/usr/bin/env bash
# Writes what the compiler generates for every zoo model (kernel IR, LLVM IR after O3 and the
# step list) to OUTDIR, one file per model and CPU level, so that a refactoring can show that
# generated code did not change: run it before and after, then `diff -r BEFORE AFTER`.
# Plain oneDNN layouts and Kiln's recurrent kernel keep the output free of
# timing decisions.
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
  # Every symbol of a model with symbolic input dims bound (kiln inspect names
  # them): batch 2, any other (a sequence length, a step count) 8.
  dims=()
  for sym in $("$kiln" inspect "$model" 2>/dev/null | sed -n 's/^symbols: //p' |
    grep -o '[A-Za-z_][A-Za-z0-9_]* (' | tr -d ' ('); do
    [[ $sym == batch ]] && dims+=(--dim batch=2) || dims+=(--dim "$sym=8")
  done
  for cpu in native haswell x86-64; do
    # The summary's timings, and a recurrent layer's thread count (chosen by
    # timing both), change from run to run; everything else must not.
    if ! "$kiln" compile "$model" --emit=kernels --emit=llvm-opt --steps --dnnl-layout=plain --recurrent=kiln \
      --cpu "$cpu" "${dims[@]}" 2>&1 |
      sed -E 's/compiled in .*$/compiled in (time)/; s/threads [0-9]+ \((kiln|onednn) .* us\)$/threads (timed)/' \
      >"$out/$name.$cpu.txt"; then
      echo "# kiln compile exited non-zero" >>"$out/$name.$cpu.txt"
    fi
    n=$((n + 1))
  done
done
echo "wrote $n snapshots to $out"
