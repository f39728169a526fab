#!/usr/bin/env python3
"""Writes the ONNX files of the importer's lit corpus into this folder.

Run with Debian's python3-onnx: `/usr/bin/python3 make_corpus.py`. Each file
is small and committed; the lit tests next to this folder check the
message and exit status `kiln import` gives for each.
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))


def model(nodes, inputs, outputs, inits=(), opset=13, extra_opsets=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    return helper.make_model(graph, opset_imports=opsets, producer_name="kiln-corpus")


def tensor_in(name, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def write(name, m):
    data = m if isinstance(m, bytes) else m.SerializeToString()
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)


def weight(name, shape):
    rng = np.random.default_rng(len(name))
    return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)


x = tensor_in("x", [2, 4])
y = tensor_in("y", None)

# A valid model: y = relu(x @ w + b), the base of several broken ones.
valid = model([helper.make_node("MatMul", ["x", "w"], ["mm"], name="matmul"),
               helper.make_node("Add", ["mm", "b"], ["s"], name="add"),
               helper.make_node("Relu", ["s"], ["y"], name="relu")],
              [x], [y], [weight("w", [4, 3]), weight("b", [3])])
write("valid.onnx", valid)
raw = valid.SerializeToString()
write("truncated.onnx", raw[: len(raw) // 2])
write("garbage.onnx", b"\xff\xfe this is not a protobuf \x00\x01\x02")
write("empty.onnx", b"")
write("opset9.onnx", model(valid.graph.node, [x], [y], valid.graph.initializer, opset=9))
# Slice took attributes before opset 10 (inputs since): the importer reads
# it from opset 11 on, so at opset 9 it is listed with a version_converter hint
# (opset9.onnx imports: MatMul, Add and Relu are unchanged since).
write("opset9_slice.onnx", model(
    [helper.make_node("Slice", ["x"], ["y"], name="slice", starts=[0], ends=[1], axes=[0])],
    [x], [y], opset=9))
write("opset29.onnx", model(valid.graph.node, [x], [y], valid.graph.initializer, opset=29))

no_graph = onnx.ModelProto()
no_graph.ir_version = 8
write("no_graph.onnx", no_graph)

write("unsupported_ops.onnx", model(
    [helper.make_node("Unique", ["x"], ["v"], name="unique"),
     helper.make_node("Compress", ["v", "v"], ["cv"], name="compress"),
     helper.make_node("Relu", ["v"], ["r"], name="relu"),
     helper.make_node("Det", ["r"], ["cs"], name="det"),
     helper.make_node("FusedGemm", ["x"], ["fg"], name="fused", domain="com.microsoft"),
     helper.make_node("LSTM", ["x3", "lw", "lr"], ["ly"], name="lstm", input_forget=1)],
    [x, tensor_in("x3", [2, 1, 4])], [tensor_in("r", None)],
    [weight("lw", [1, 8, 4]), weight("lr", [1, 8, 2])],
    extra_opsets=[("com.microsoft", 1)]))

write("missing_initializer.onnx", model(valid.graph.node, [x], [y], [weight("w", [4, 3])]))

write("cycle.onnx", model(
    [helper.make_node("Add", ["x", "c"], ["a"], name="add"),
     helper.make_node("Relu", ["a"], ["b"], name="relu"),
     helper.make_node("Neg", ["b"], ["c"], name="neg"),
     helper.make_node("Exp", ["x"], ["y"], name="exp")], [x], [y]))

write("dangling_output.onnx", model(
    [helper.make_node("Relu", ["x"], ["r"], name="relu")], [x], [y]))

write("duplicate_output.onnx", model(
    [helper.make_node("Relu", ["x"], ["y"], name="relu"),
     helper.make_node("Neg", ["x"], ["y"], name="neg")], [x], [y]))

write("bad_attribute.onnx", model(
    [helper.make_node("Transpose", ["x"], ["y"], name="transpose", perm=1)], [x], [y]))

write("bad_reshape.onnx", model(
    [helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape")], [x], [y],
    [numpy_helper.from_array(np.array([3, 3], np.int64), "shape")]))

bad_raw = weight("w", [4, 3])
bad_raw.raw_data = bad_raw.raw_data[:10]
write("bad_raw_data.onnx", model(valid.graph.node, [x], [y], [bad_raw, weight("b", [3])]))

bad_input = model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
                  [tensor_in("x", [2], TensorProto.STRING)], [y])
write("bad_input_type.onnx", bad_input)


def external(name, location, offset, length):
    t = weight("w", [4, 3])
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", str(offset)), ("length", str(length))):
        e = t.external_data.add()
        e.key, e.value = k, v
    write(name, model(valid.graph.node, [x], [y], [t, weight("b", [3])]))


with open(os.path.join(HERE, "external_short.bin"), "wb") as f:
    f.write(b"\0" * 40)  # the weight needs 48 bytes
external("external_missing.onnx", "no_such_file.bin", 0, 48)
external("external_short.onnx", "external_short.bin", 0, 48)

# Valid models with external data and a dynamic batch.
with open(os.path.join(HERE, "external_ok.bin"), "wb") as f:
    f.write(b"\0" * 8 + numpy_helper.to_array(weight("w", [4, 3])).tobytes())
external("external_ok.onnx", "external_ok.bin", 8, 48)
write("dynamic_batch.onnx", model(
    [helper.make_node("Shape", ["x"], ["s"], name="shape"),
     helper.make_node("Gather", ["s", "zero"], ["n"], name="gather"),
     helper.make_node("Unsqueeze", ["n", "axes"], ["n1"], name="unsqueeze"),
     helper.make_node("Concat", ["n1", "minus1"], ["target"], name="concat", axis=0),
     helper.make_node("Reshape", ["x", "target"], ["y"], name="reshape")],
    [tensor_in("x", ["batch", 3, 4])], [y],
    [numpy_helper.from_array(np.array(0, np.int64), "zero"),
     numpy_helper.from_array(np.array([0], np.int64), "axes"),
     numpy_helper.from_array(np.array([-1], np.int64), "minus1")]))

# `kiln run --data` on a tensor file of a dtype Kiln lacks (UINT64): one
# error, then the run stops.
os.makedirs(os.path.join(HERE, "uint64_data"), exist_ok=True)
write(os.path.join("uint64_data", "input_0.pb"),
      numpy_helper.from_array(np.zeros([2, 4], np.uint64), "x"))
