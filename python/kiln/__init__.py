"""Kiln from Python: load, compile, save and run models (docs/PYTHON.md).

    import kiln
    exe = kiln.compile("resnet18.onnx", threads=4)   # or a kiln.Model, a .kir
    y = exe(x)                                       # NumPy or torch in, same out
    exe.save("resnet18.kiln")
    again = kiln.load("resnet18.kiln")               # no compile

Inputs are read where they lie: a C-contiguous NumPy array, or a CPU
torch.Tensor (through DLPack), is not copied; outputs are arrays (or torch
tensors, when an input was one) over Kiln's output memory. Every failure
raises kiln.Error with the located message the `kiln` CLI prints.
"""

import os

from ._kiln import Error, Executable, Model
from ._kiln import compile as _compile_model

__all__ = ["Error", "Executable", "Model", "compile", "load"]


def _is_artifact(path):
    with open(path, "rb") as f:
        return f.read(7) in (b"KILNART", b"KILNSET")


def load(path, dims=None):
    """A .kiln artifact as an Executable (no compile); an ONNX model or a
    .kir file as a Model (`dims` binds an ONNX model's symbolic dims)."""
    path = os.fspath(path)
    if os.path.isfile(path) and _is_artifact(path):
        if dims:
            raise Error(f"'{path}' is a compiled artifact: dims do not apply")
        return Executable.load(path)
    return Model.load(path, dims or {})


def compile(model, threads=0, cpu="native", dims=None, fusion=True, libraries=True,
            cache=False, max_specializations=8):
    """Compiles a Model, or the model at a path, for this CPU (or `cpu`).
    Symbols left out of `dims` stay symbolic: the Executable compiles each
    new set of input sizes on first use (one line on stderr each)."""
    if not isinstance(model, Model):
        model = load(model, dims)
        if isinstance(model, Executable):
            raise Error("compile: the model is a compiled artifact already; use kiln.load")
    return _compile_model(model, threads=threads, cpu=cpu, dims=dims or {}, fusion=fusion,
                          libraries=libraries, cache=cache,
                          max_specializations=max_specializations)


def _call(self, *inputs):
    outputs = self.run(*inputs)
    return outputs[0] if len(outputs) == 1 else tuple(outputs)


Executable.__call__ = _call
Executable.__call__.__doc__ = ("Runs on the inputs; the output itself when there is one, "
                               "else a tuple.")
