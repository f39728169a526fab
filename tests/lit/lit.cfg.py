# lit configuration for Kiln's .kir regression tests.
import os
import lit.formats

config.name = "kiln"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".kir", ".test"]
config.excludes = ["inputs", "Inputs", "lit.cfg.py", "lit.site.cfg.py.in"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.kiln_obj_root, "tests", "lit-out")

# The compile cache is off in tests (each RUN line compiles, whatever ran
# before); the cache's own tests turn it on with a folder of their own.
config.environment["KILN_CACHE"] = "off"
config.environment["PATH"] = os.pathsep.join(
    [config.kiln_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])
config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(("%kiln_tools", config.kiln_tools_dir))
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "inputs")))
config.substitutions.append(
    ("FileCheck", "FileCheck --enable-var-scope --dump-input=fail"))
config.substitutions.append(
    ("%roundtrip", "%s %s %s" % (config.python_executable,
                                 os.path.join(config.test_source_root, "roundtrip.py"),
                                 os.path.join(config.kiln_tools_dir, "kiln"))))
config.substitutions.append(
    ("%expect-exit", "%s %s" % (config.python_executable,
                                os.path.join(config.test_source_root, "expect_exit.py"))))

# The CUDA backend (codegen/cuda), built where CMake found NVRTC: its tests
# say `REQUIRES: cuda` and are reported unsupported without it.
if getattr(config, "kiln_has_cuda", False):
    config.available_features.add("cuda")
# The MLIR export (codegen/mlir, KILN_MLIR): its tests say `REQUIRES: mlir`.
if getattr(config, "kiln_has_mlir", False):
    config.available_features.add("mlir")
# A GPU with its driver: the tests of what happens without one do not apply.
if os.path.exists("/dev/nvidiactl"):
    config.available_features.add("cuda-gpu")

# The host's vector ISA. Which layouts oneDNN picks depends on it: its
# AVX-512 convolutions take channels-last activations, its AVX2 ones
# blocked (aBcd8b). RUN lines that check the AVX-512 layout choices run
# under `%if avx512 %{ ... %}`; the correctness checks run everywhere.
with open("/proc/cpuinfo") as cpuinfo:
    if " avx512f" in cpuinfo.read():
        config.available_features.add("avx512")
