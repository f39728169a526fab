#!/usr/bin/env python3
"""check_layering.py SOURCE_DIR [STAMP]: every #include "..." of the project's
libraries goes down the dependency graph of docs/DESIGN.md ("Where things
live"), never up or sideways. The build runs it (target kiln_layering, part
of `all`), so a wrong-direction include fails the build even when it is
header-only and would link. Every library sees the repository root as its
include path, so the compiler alone cannot catch one.

Each rule names a directory (its .h/.cpp files, not its subdirectories) and
the directories (or single headers) its files may include. It also holds
each of these files to at most MAX_LINES lines (one concern per file).
Prints each violation as FILE:LINE: error: ... and exits 1."""
import os
import re
import sys

# directory -> what it may include (directories, or exact header paths)
RULES = {
    "ir": ["ir"],
    "ir/ops": ["ir", "ir/ops"],
    "passes": ["ir", "passes"],
    "frontend/onnx": ["ir", "frontend/onnx"],
    "frontend/trace": ["ir", "frontend/trace", "include/kiln"],
    "include/kiln": ["ir", "include/kiln"],
    # The embedding API (include/kiln/kiln.h) over everything below it.
    "api": ["ir", "include/kiln", "api", "frontend/onnx", "codegen", "codegen/mlir", "passes",
            "runtime", "runtime/artifact", "runtime/reference", "runtime/cuda"],
    # The runtime: no compiler, no IR beyond two header-only facts (the
    # dtype table, integer power).
    "runtime": ["runtime", "ir/DType.h", "ir/DTypes.def", "ir/IntPow.h"],
    "runtime/dnnl": ["runtime", "runtime/dnnl"],
    # The GPU device over the CUDA driver (opened with dlopen), and its
    # artifacts in the framing of every compiled file (FileFormat.h, no
    # oneDNN).
    "runtime/cuda": ["runtime", "runtime/cuda", "ir/DType.h", "runtime/artifact/FileFormat.h",
                     "runtime/artifact/Artifact.pb.h"],
    # The reference-kernel step: the runtime and the IR (its interpreter,
    # printer and parser), no compiler.
    "runtime/reference": ["runtime", "runtime/reference", "ir"],
    # Artifacts: the runtime, its oneDNN and reference steps, the generated
    # metadata code.
    "runtime/artifact": ["runtime", "runtime/dnnl", "runtime/reference", "runtime/artifact",
                         "ir/DTypes.def"],
    # kiln_codegen (target-neutral: kernel IR, fusion, lowering, memory
    # planning) and kiln_compiler (Compiler, Bisect: the driver that ties the
    # backends together) share codegen/; only the driver sees the backends.
    "codegen": ["ir", "passes", "codegen", "runtime"],
    "codegen/cpu": ["ir", "codegen", "codegen/cpu", "runtime"],
    # The CUDA backend's code generator and NVRTC (CudaHeaders.inc is
    # generated in the build tree: the headers kernels include).
    "codegen/cuda": ["ir", "codegen", "codegen/cuda", "runtime/DynamicSymbols.h",
                     "CudaHeaders.inc"],
    # The MLIR export: the IR and its own files (MLIR's headers are
    # system includes).
    "codegen/mlir": ["ir", "codegen/mlir"],
    "codegen/cpu/dnnl": ["ir", "codegen", "codegen/cpu/dnnl", "codegen/cpu/CpuTarget.h",
                         "runtime", "runtime/dnnl"],
}
# Files held to a narrower rule than their directory's: the runtime half of
# the embedding API (libkiln_runtime, include/kiln/Executable.h) sees no
# compiler and no importer.
RUNTIME_API = ["ir", "include/kiln", "api", "runtime", "runtime/artifact", "runtime/reference"]
FILE_RULES = {"api/Executable.cpp": RUNTIME_API, "api/ExecutableImpl.h": RUNTIME_API,
              "api/Cuda.cpp": ["ir", "include/kiln", "runtime/cuda", "api/ExecutableImpl.h"],
              "include/kiln/Executable.h": ["ir", "include/kiln"],
              "include/kiln/Cuda.h": ["ir", "include/kiln"]}
DRIVER = {"codegen/Compiler.cpp", "codegen/Compiler.h", "codegen/Bisect.cpp", "codegen/Bisect.h",
          "codegen/CompileCache.cpp", "codegen/CompileCache.h",
          "codegen/ExecutableBuilder.cpp", "codegen/ExecutableBuilder.h",
          "codegen/ChannelsLastGroups.cpp", "codegen/RunTimeSizes.cpp", "codegen/RunTimeSizes.h",
          "codegen/SymbolicArtifact.cpp", "codegen/CudaProgram.cpp", "codegen/CudaProgram.h"}
DRIVER_EXTRA = ["codegen/cpu", "codegen/cuda", "runtime/cuda", "codegen/cpu/dnnl", "runtime/artifact", "runtime/dnnl",
                "runtime/reference", "generated/SourceHash.h"]  # generated in the build tree

MAX_LINES = 1000

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def allowed(inc, targets):
    for t in targets:
        if inc == t or os.path.dirname(inc) == t:
            return True
    return False


def main():
    root = sys.argv[1]
    errors = []
    for d, targets in RULES.items():
        full = os.path.join(root, d)
        if not os.path.isdir(full):
            continue
        for name in sorted(os.listdir(full)):
            if not name.endswith((".h", ".cpp", ".def")):
                continue
            rel = d + "/" + name
            ok = FILE_RULES.get(rel, targets) + (DRIVER_EXTRA if rel in DRIVER else [])
            with open(os.path.join(full, name), encoding="utf-8") as f:
                lines = f.readlines()
                if len(lines) > MAX_LINES:
                    errors.append("%s:%d: error: %d lines; a source file holds at most %d (split it "
                                  "by concern)" % (rel, MAX_LINES + 1, len(lines), MAX_LINES))
                for n, line in enumerate(lines, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    inc = m.group(1)
                    if "/" not in inc:  # a sibling header of the same directory
                        continue
                    if inc.startswith("kiln/"):
                        inc = "include/" + inc
                    if not allowed(inc, ok):
                        who = rel if rel in FILE_RULES else d
                        errors.append("%s:%d: error: '%s' includes \"%s\": %s may include only %s"
                                      % (rel, n, rel, m.group(1), who, ", ".join(ok)))
    for e in errors:
        print(e)
    if errors:
        return 1
    if len(sys.argv) > 2:
        open(sys.argv[2], "w").close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
