"""The work a model does, from its ONNX graph, for the roofline table.

flops: multiply-adds count 2 (convolutions, transposed convolutions, MatMul,
Gemm, LSTM/GRU/RNN layers, Einsum is not counted), pools one per window
element, every other computing node one per output element (normalizations
and softmax a few); data movement (Reshape, Transpose, Concat, Slice,
Gather, ...) none.

bytes: what any execution must move, the weights and the graph's inputs
read once and its outputs written once (a lower bound on the traffic, so
the time it implies at the memory ceiling is a lower bound too);
unfused_bytes adds every intermediate result written once and read once
(what an engine without fusion moves; fused kernels keep most of it in
registers and caches).

Shapes come from ONNX shape inference with the graph inputs bound to the
export's test input (test_data_set_0), so dynamic exports are sized as run.
"""
import os

import numpy as np
import onnx
from onnx import numpy_helper, shape_inference

DATA_MOVEMENT = {
    "Reshape", "Transpose", "Concat", "Slice", "Gather", "Split", "Squeeze", "Unsqueeze",
    "Flatten", "Expand", "Identity", "Shape", "Constant", "ConstantOfShape", "Cast", "Pad",
    "Range", "Dropout", "GatherElements", "GatherND", "ScatterND", "ScatterElements", "Tile",
    "Resize", "Upsample", "DepthToSpace", "SpaceToDepth", "Size", "NonZero", "TopK",
}
NORMALIZATIONS = {"Softmax": 5, "LogSoftmax": 5, "LayerNormalization": 8,
                  "BatchNormalization": 2, "InstanceNormalization": 8,
                  "GroupNormalization": 8}


def _bind_inputs(model, folder):
    data = os.path.join(folder, "test_data_set_0")
    init = {i.name for i in model.graph.initializer}
    k = 0
    for inp in model.graph.input:
        if inp.name in init:
            continue
        pb = os.path.join(data, "input_%d.pb" % k)
        k += 1
        if not os.path.exists(pb):
            continue
        t = onnx.TensorProto()
        with open(pb, "rb") as f:
            t.ParseFromString(f.read())
        dims = inp.type.tensor_type.shape.dim
        for d, size in zip(dims, t.dims):
            d.Clear()
            d.dim_value = size


def _numel(shape):
    return int(np.prod(shape)) if shape else 1


def model_work(folder):
    """dict(flops=..., bytes=...) of the model in `folder`, or dict(error=...)."""
    try:
        model = onnx.load(os.path.join(folder, "model.onnx"))
        _bind_inputs(model, folder)
        model = shape_inference.infer_shapes(model, data_prop=True)
    except Exception as e:  # a model shape inference cannot size
        return dict(error=str(e)[:200])
    g = model.graph
    info = {}
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        tt = vi.type.tensor_type
        if not tt.HasField("shape"):
            continue
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        if None in dims:
            continue
        size = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)).itemsize \
            if tt.elem_type else 4
        info[vi.name] = (dims, size)
    weights = {}
    for t in g.initializer:
        weights[t.name] = numpy_helper.to_array(t)
    for n in g.node:
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value":
                    weights[n.output[0]] = numpy_helper.to_array(a.t)

    def shape(name):
        if name in weights:
            return list(weights[name].shape)
        return info.get(name, (None, 4))[0]

    def attr(n, name, default):
        for a in n.attribute:
            if a.name == name:
                return onnx.helper.get_attribute_value(a)
        return default

    flops = 0
    unknown = 0
    for n in g.node:
        op = n.op_type
        out = shape(n.output[0]) if n.output else None
        if op in DATA_MOVEMENT:
            continue
        if out is None:
            unknown += 1
            continue
        if op in ("Conv", "ConvTranspose"):
            w = shape(n.input[1])
            groups = attr(n, "group", 1)
            if w is None:
                unknown += 1
                continue
            if op == "Conv":  # w [Cout, Cin/g, k...]
                flops += 2 * _numel(out) * _numel(w[1:])
            else:  # w [Cin, Cout/g, k...]; every input element meets every tap
                x = shape(n.input[0])
                flops += 2 * _numel(x) * _numel(w[1:]) if x else 0
            del groups
        elif op == "MatMul":
            a = shape(n.input[0])
            flops += 2 * _numel(out) * (a[-1] if a else 0)
        elif op == "Gemm":
            a = shape(n.input[0])
            k = (a[0] if attr(n, "transA", 0) else a[-1]) if a else 0
            flops += 2 * _numel(out) * k
        elif op in ("LSTM", "GRU", "RNN"):
            x, r = shape(n.input[0]), shape(n.input[2])
            if x is None or r is None:
                unknown += 1
                continue
            steps_rows = x[0] * x[1]
            dirs, gh, h = r
            flops += 2 * dirs * steps_rows * gh * (x[2] + h)
        elif op in ("MaxPool", "AveragePool"):
            flops += _numel(out) * _numel(attr(n, "kernel_shape", [1]))
        elif op in ("GlobalAveragePool", "GlobalMaxPool", "ReduceMean", "ReduceSum",
                    "ReduceMax", "ReduceMin"):
            x = shape(n.input[0])
            flops += _numel(x) if x else 0
        else:
            flops += NORMALIZATIONS.get(op, 1) * _numel(out)
    moved = sum(w.nbytes for w in weights.values())
    outputs = {o.name for o in g.output}
    inputs = {i.name for i in g.input if i.name not in weights}
    for name in inputs | outputs:
        if name in info:
            moved += _numel(info[name][0]) * info[name][1]
    unfused = moved
    for n in g.node:
        for o in n.output:
            if o in outputs or o in weights or o not in info:
                continue
            unfused += 2 * _numel(info[o][0]) * info[o][1]
    return dict(flops=int(flops), bytes=int(moved), unfused_bytes=int(unfused),
                unsized_nodes=unknown)
