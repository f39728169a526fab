"""Kiln from Python: load, compile, save and run models (docs/PYTHON.md).

    import kiln
    exe = kiln.compile("resnet18.onnx", threads=4)   # or a kiln.Model, a .kir
    y = exe(x)                                       # NumPy or torch in, same out
    exe.save("resnet18.kiln")
    again = kiln.load("resnet18.kiln")               # no compile
    fast = torch.compile(module, backend="kiln")     # torch 2.x (kiln.torch_backend)
    kiln.compile_cuda("resnet18.onnx", "r18-gpu.kiln")   # for a GPU (no GPU needed)
    gpu = kiln.CudaModel.load("r18-gpu.kiln")        # on the machine's first GPU

Inputs are read where they lie: a C-contiguous NumPy array, or a CPU
torch.Tensor (through DLPack), is not copied; outputs are arrays (or torch
tensors, when an input was one) over Kiln's output memory. Every failure
raises kiln.Error with the located message the `kiln` CLI prints.
"""

import os
import sys

from ._backend import torch_backend
from ._kiln import CudaModel, Error, Executable, Model
from ._kiln import compile as _compile_model
from ._kiln import compile_cuda as _compile_cuda
from ._kiln import to_mlir as _to_mlir

__all__ = ["CudaModel", "Error", "Executable", "Model", "compile", "compile_cuda", "from_torch",
           "load", "to_mlir", "torch_backend"]


def _magic(path):
    with open(path, "rb") as f:
        return f.read(7)


def load(path, dims=None):
    """A .kiln artifact as an Executable (no compile); a symbolic artifact
    (`kiln compile --dim SYM=LO..HI -o`) as an Executable that compiles each
    size it meets from the kernels it holds; a CUDA artifact (kiln.compile_cuda)
    as a CudaModel on the machine's first GPU; an ONNX model or a .kir file
    as a Model (`dims` binds an ONNX model's symbolic dims)."""
    path = os.fspath(path)
    magic = _magic(path) if os.path.isfile(path) else b""
    if magic in (b"KILNART", b"KILNSET", b"KILNSYM") and dims:
        raise Error(f"'{path}' is a compiled artifact: dims do not apply")
    if magic in (b"KILNART", b"KILNSET"):
        return Executable.load(path)
    if magic == b"KILNGPU":
        if dims:
            raise Error(f"'{path}' is a compiled artifact: dims do not apply")
        return CudaModel.load(path)
    if magic == b"KILNSYM":
        return _compile_model(Model.load(path, {}), threads=0, cpu="native", dims={},
                              fusion=True, libraries=True, cache=False, max_specializations=8,
                              ranges={})
    return Model.load(path, dims or {})


def compile(model, threads=0, cpu="native", dims=None, fusion=True, libraries=True,
            cache=False, max_specializations=8, ranges=None):
    """Compiles a Model, or the model at a path, for this CPU (or `cpu`).
    Symbols left out of `dims` stay symbolic: the Executable compiles each
    new set of input sizes on first use (one line on stderr each).
    `ranges` maps a symbol to the inclusive (min, max) of its sizes: a run
    outside is a kiln.Error."""
    if not isinstance(model, Model):
        path = os.fspath(model)
        if os.path.isfile(path) and _magic(path) == b"KILNSYM":
            model = Model.load(path, {})  # its options apply where the artifact allows
        else:
            model = load(model, dims)
            if isinstance(model, Executable):
                raise Error("compile: the model is a compiled artifact already; use kiln.load")
    return _compile_model(model, threads=threads, cpu=cpu, dims=dims or {}, fusion=fusion,
                          libraries=libraries, cache=cache,
                          max_specializations=max_specializations, ranges=ranges or {})


def compile_cuda(model, path, arch=90, dims=None, fusion=True, libraries=True):
    """Compiles a Model, or the model at a path, for a CUDA GPU of compute
    capability `arch` (90: sm_90) into the CUDA artifact `path`: what `kiln
    compile MODEL --target cuda -o PATH` writes. Needs the CUDA toolkit's
    NVRTC, not a GPU; kiln.CudaModel.load runs the artifact on one. Every
    symbolic dim needs its size in `dims`."""
    if not isinstance(model, Model):
        model = Model.load(os.fspath(model), dims or {})
    _compile_cuda(model, os.fspath(path), arch=arch, dims=dims or {}, fusion=fusion,
                  libraries=libraries)


def to_mlir(model, pipeline=True, inline_elements=16, dims=None):
    """A Model, or the model at a path, as an MLIR 16 module (text) of
    upstream dialects: what `kiln translate MODEL --emit=mlir` writes (after
    the standard pipeline unless `pipeline` is False; constants of more than
    `inline_elements` elements as dense_resource blobs)."""
    if not isinstance(model, Model):
        model = Model.load(os.fspath(model), dims or {})
    elif dims:
        raise Error("to_mlir: dims bind a model's symbols when it is loaded; "
                    "give a path, or load the Model with them")
    return _to_mlir(model, pipeline=pipeline, inline_elements=inline_elements)


def from_torch(module, example_inputs, dynamic_shapes=None, capture="auto"):
    """A torch.nn.Module as a Model, without ONNX: its parameters and
    buffers become constants, in eval mode. `capture` is "export"
    (torch.export to core ATen, torch 2.x), "fx" (torch.fx's symbolic
    tracer, torch 1.13 and 2.x) or "auto" (export where torch has it).
    Sizes are the examples' except the dims named in `dynamic_shapes`,
    given as torch.export takes them (`({0: torch.export.Dim("batch")},)`,
    or a name such as "batch" for the Dim): they become symbols of the
    Model, and kiln.compile's Executable compiles each new size on first
    use. Every call Kiln cannot take is listed in one kiln.Error with its
    Python location (docs/PYTHON.md)."""
    import torch

    if capture not in ("auto", "export", "fx"):
        raise Error(f"from_torch: capture must be 'auto', 'export' or 'fx', not {capture!r}")
    if capture == "auto":
        capture = "export" if hasattr(torch, "export") else "fx"
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    load = lambda path: Model.load(path, {})  # noqa: E731
    if capture == "export":
        if not hasattr(torch, "export"):
            raise Error(f"from_torch: torch {torch.__version__} has no torch.export; "
                        "use capture='fx'")
        from ._export import capture as by_export
        return by_export(torch, module, tuple(example_inputs), dynamic_shapes, load)
    from ._fx import from_torch as by_fx
    return by_fx(module, example_inputs, load, dynamic_shapes)


def _call(self, *inputs):
    outputs = self.run(*inputs)
    return outputs[0] if len(outputs) == 1 else tuple(outputs)


Executable.__call__ = _call
CudaModel.__call__ = _call
Executable.__call__.__doc__ = ("Runs on the inputs; the output itself when there is one, "
                               "else a tuple.")


def _register_with_torch():
    # backend="kiln": torch finds it through the torch_dynamo_backends entry
    # point of kiln's dist-info when that is on the path (it then imports
    # kiln itself); else it is registered here, when torch is imported
    # already (kiln does not import torch).
    from importlib.metadata import entry_points

    if any(ep.name == "kiln" for ep in entry_points(group="torch_dynamo_backends")):
        return
    if "torch" not in sys.modules:
        return
    try:
        from torch._dynamo import register_backend
    except ImportError:  # torch 1.x has no torch.compile
        return
    register_backend(compiler_fn=torch_backend, name="kiln")


_register_with_torch()
