"""Kiln from Python: load, compile, save and run models (docs/PYTHON.md).

    import kiln
    exe = kiln.compile("resnet18.onnx", threads=4)   # or a kiln.Model, a .kir
    y = exe(x)                                       # NumPy or torch in, same out
    exe.save("resnet18.kiln")
    again = kiln.load("resnet18.kiln")               # no compile
    fast = torch.compile(module, backend="kiln")     # torch 2.x (kiln.torch_backend)

Inputs are read where they lie: a C-contiguous NumPy array, or a CPU
torch.Tensor (through DLPack), is not copied; outputs are arrays (or torch
tensors, when an input was one) over Kiln's output memory. Every failure
raises kiln.Error with the located message the `kiln` CLI prints.
"""

import os
import sys

from ._kiln import Error, Executable, Model
from ._kiln import compile as _compile_model

__all__ = ["Error", "Executable", "Model", "compile", "from_torch", "load", "torch_backend"]


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


def from_torch(module, example_inputs, dynamic_shapes=None):
    """A torch.nn.Module as a Model, captured with torch.fx (no ONNX): the
    module runs in eval mode on `example_inputs` (a tensor or a tuple) and
    its parameters become constants. Sizes are those of the examples except
    the dims named in `dynamic_shapes`, given as torch.export takes them
    (`({0: torch.export.Dim("batch")},)`, or a name such as "batch" for
    the Dim): they become symbols of the Model, and kiln.compile's
    Executable compiles each new size on first use. Every call Kiln cannot
    take is listed in one kiln.Error with its Python location
    (docs/PYTHON.md)."""
    from ._fx import from_torch as capture

    return capture(module, example_inputs, lambda path: Model.load(path, {}), dynamic_shapes)


def _call(self, *inputs):
    outputs = self.run(*inputs)
    return outputs[0] if len(outputs) == 1 else tuple(outputs)


Executable.__call__ = _call
Executable.__call__.__doc__ = ("Runs on the inputs; the output itself when there is one, "
                               "else a tuple.")


def _log(message):
    print(f"kiln: {message}", file=sys.stderr)


def torch_backend(gm, example_inputs, threads=0, max_sizes=8):
    """A torch.compile backend (`torch.compile(m, backend=kiln.torch_backend)`,
    or backend="kiln" once kiln is imported after torch): each FX graph
    Dynamo gives is exported to ONNX in memory (TorchScript exporter, opset
    17) with its parameters as constants, compiled by Kiln and run by it. A
    graph Kiln cannot take runs eagerly, with one line on stderr naming why.
    A graph with symbolic sizes (dynamic=True, or Dynamo's recompile after
    a size changed) compiles once per set of sizes it is called with,
    keeping the last `max_sizes` (one line on stderr each), as kiln.compile
    does for a model with symbolic dims. Inference only: a graph called with
    grad enabled on tensors that require it runs eagerly; a parameter
    changed in place since the compile makes the graph compile again.
    `threads` is kiln.compile's (0: OpenMP's default)."""
    import collections
    import tempfile

    import torch
    from torch.utils import _pytree as pytree

    def eager(why):
        _log(f"torch.compile graph runs eagerly: {why}")
        return gm.forward

    sizes = [i for i, t in enumerate(example_inputs) if isinstance(t, (int, torch.SymInt))]
    if not all(isinstance(t, torch.Tensor) for i, t in enumerate(example_inputs)
               if i not in sizes):
        return eager("an input is not a tensor or a size (" +
                     ", ".join(type(t).__name__ for t in example_inputs) + ")")
    if any(example_inputs[i].device.type != "cpu" for i in range(len(example_inputs))
           if i not in sizes):
        return eager("an input is not on the CPU")
    params = [i for i, t in enumerate(example_inputs) if isinstance(t, torch.nn.Parameter)]
    fed = [i for i in range(len(example_inputs)) if i not in params and i not in sizes]
    dynamic = bool(sizes) or any(not isinstance(d, int) for i in fed
                                 for d in example_inputs[i].shape)

    class Graph(torch.nn.Module):
        # The FX graph with its parameters as buffers (ONNX initializers) and
        # the sizes Dynamo passes as inputs fixed to one call's values.
        def __init__(self, args):
            super().__init__()
            self.gm = gm
            self.sizes = {i: int(args[i]) for i in sizes}
            for k, i in enumerate(params):
                self.register_buffer(f"param{k}", args[i].detach())

        def forward(self, *xs):
            full, it = [], iter(xs)
            for i in range(len(example_inputs)):
                if i in params:
                    full.append(getattr(self, f"param{params.index(i)}"))
                else:
                    full.append(self.sizes[i] if i in sizes else next(it))
            return self.gm(*full)

    def build(args):
        with torch.no_grad():
            want = gm(*args)
            flat, spec = pytree.tree_flatten(want)
            if not flat or not all(isinstance(t, torch.Tensor) for t in flat):
                raise Error("the graph returns something other than tensors")
            with tempfile.TemporaryDirectory() as d:
                path = os.path.join(d, "graph.onnx")
                torch.onnx.export(Graph(args), tuple(args[i].detach() for i in fed), path,
                                  opset_version=17, dynamo=False,
                                  input_names=[f"input{i}" for i in range(len(fed))])
                exe = compile(path, threads=threads)
        return exe, spec, len(flat)

    def key(args):
        return (tuple(tuple(int(d) for d in args[i].shape) for i in fed),
                tuple(int(args[i]) for i in sizes))

    def why(e):
        return f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"

    def concrete(t):  # an example's SymInt as the size it stands for
        return t.node.hint if isinstance(t, torch.SymInt) else t

    first = [concrete(t) for t in example_inputs]
    try:
        built = collections.OrderedDict({key(first): build(first)})
    except Exception as e:  # the reason goes to the log line; eager runs it
        return eager(why(e))

    def version(t):  # an inference tensor has no version counter
        try:
            return (t._version, t.data_ptr())
        except RuntimeError:
            return (None, t.data_ptr())

    versions = [version(example_inputs[i]) for i in params]

    def run(*args):
        if torch.is_grad_enabled() and any(t.requires_grad for t in args if isinstance(t, torch.Tensor)):
            return gm(*args)
        now = [version(args[i]) for i in params]
        if now != versions:  # a parameter changed in place: compile it again
            built.clear()
            versions[:] = now
        k = key(args)
        if k not in built:
            if dynamic:
                _log(f"torch.compile graph compiles for sizes {k[0]}" +
                     (f", size inputs {k[1]}" if sizes else "") +
                     f" ({len(built) + 1} of at most {max_sizes} kept)")
            try:
                built[k] = build(args)
            except Exception as e:
                _log(f"torch.compile graph runs eagerly at sizes {k[0]}: {why(e)}")
                built[k] = None
            while len(built) > max_sizes:
                built.popitem(last=False)
        built.move_to_end(k)
        if built[k] is None:
            return gm(*args)
        exe, spec, count = built[k]
        outs = exe.run(*(args[i] for i in fed))
        if len(outs) != count:
            raise Error(f"the compiled graph returned {len(outs)} outputs, the FX graph {count}")
        return pytree.tree_unflatten(list(outs), spec)

    return run


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
