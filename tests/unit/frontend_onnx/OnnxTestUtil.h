//===- OnnxTestUtil.h - Building small ONNX models in tests -----*- C++ -*-===//
//
// ModelBuilder assembles a ModelProto with the onnx protobuf classes (inputs,
// outputs, initializers, nodes and their attributes); importText() imports
// its bytes and returns the printed IR or the diagnostics.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "frontend/onnx/OnnxImporter.h"
#include "ir/Interpreter.h"
#include "ir/Printer.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <string>
#include <variant>
#include <vector>

namespace kiln::testing {

using OnnxDim = std::variant<int64_t, std::string>;

class ModelBuilder {
public:
  explicit ModelBuilder(int64_t opset = 13) {
    model.set_ir_version(8);
    model.set_producer_name("kiln-test");
    auto *op = model.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    model.mutable_graph()->set_name("g");
  }

  onnx::GraphProto &graph() { return *model.mutable_graph(); }

  /// A graph input; a string dim is a dim_param, "" an unnamed dynamic dim.
  void input(const std::string &name, std::vector<OnnxDim> dims,
             int32_t elemType = onnx::TensorProto::FLOAT) {
    auto *vi = graph().add_input();
    vi->set_name(name);
    auto *tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elemType);
    auto *shape = tt->mutable_shape();
    for (const OnnxDim &d : dims) {
      auto *dim = shape->add_dim();
      if (auto *v = std::get_if<int64_t>(&d))
        dim->set_dim_value(*v);
      else if (!std::get<std::string>(d).empty())
        dim->set_dim_param(std::get<std::string>(d));
    }
  }
  void output(const std::string &name) { graph().add_output()->set_name(name); }

  static onnx::TensorProto floatTensor(const std::string &name, std::vector<int64_t> dims,
                                       const std::vector<float> &values) {
    onnx::TensorProto t;
    t.set_name(name);
    t.set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims)
      t.add_dims(d);
    for (float v : values)
      t.add_float_data(v);
    return t;
  }
  static onnx::TensorProto intTensor(const std::string &name, std::vector<int64_t> dims,
                                     const std::vector<int64_t> &values) {
    onnx::TensorProto t;
    t.set_name(name);
    t.set_data_type(onnx::TensorProto::INT64);
    for (int64_t d : dims)
      t.add_dims(d);
    for (int64_t v : values)
      t.add_int64_data(v);
    return t;
  }
  void init(const std::string &name, std::vector<int64_t> dims, const std::vector<float> &values) {
    *graph().add_initializer() = floatTensor(name, std::move(dims), values);
  }
  void initInts(const std::string &name, std::vector<int64_t> dims,
                const std::vector<int64_t> &values) {
    *graph().add_initializer() = intTensor(name, std::move(dims), values);
  }

  onnx::NodeProto &node(const std::string &opType, std::vector<std::string> inputs,
                        std::vector<std::string> outputs, const std::string &name = "") {
    auto *n = graph().add_node();
    n->set_op_type(opType);
    n->set_name(name.empty() ? opType + "_" + std::to_string(graph().node_size()) : name);
    for (auto &i : inputs)
      n->add_input(i);
    for (auto &o : outputs)
      n->add_output(o);
    return *n;
  }

  std::string bytes() const { return model.SerializeAsString(); }

  onnx::ModelProto model;
};

inline onnx::AttributeProto &addAttr(onnx::NodeProto &n, const std::string &name,
                                     onnx::AttributeProto::AttributeType type) {
  auto *a = n.add_attribute();
  a->set_name(name);
  a->set_type(type);
  return *a;
}
inline void attrInt(onnx::NodeProto &n, const std::string &name, int64_t v) {
  addAttr(n, name, onnx::AttributeProto::INT).set_i(v);
}
inline void attrFloat(onnx::NodeProto &n, const std::string &name, float v) {
  addAttr(n, name, onnx::AttributeProto::FLOAT).set_f(v);
}
inline void attrString(onnx::NodeProto &n, const std::string &name, const std::string &v) {
  addAttr(n, name, onnx::AttributeProto::STRING).set_s(v);
}
inline void attrInts(onnx::NodeProto &n, const std::string &name, std::vector<int64_t> v) {
  auto &a = addAttr(n, name, onnx::AttributeProto::INTS);
  for (int64_t x : v)
    a.add_ints(x);
}
inline void attrStrings(onnx::NodeProto &n, const std::string &name, std::vector<std::string> v) {
  auto &a = addAttr(n, name, onnx::AttributeProto::STRINGS);
  for (auto &x : v)
    a.add_strings(x);
}
inline void attrTensor(onnx::NodeProto &n, const std::string &name, const onnx::TensorProto &t) {
  *addAttr(n, name, onnx::AttributeProto::TENSOR).mutable_t() = t;
}

/// The outcome of one import: the printed module (blobs elided) or the
/// diagnostics, one per line.
struct ImportResult {
  bool ok = false;
  std::string text;
  std::string errors;
  std::unique_ptr<Module> module;
};

inline ImportResult importBytes(const std::string &bytes, OnnxImportOptions opts = {}) {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collect(diag);
  if (opts.modelName.empty())
    opts.modelName = "m.onnx";
  auto m = importOnnxBytes(bytes, diag, opts);
  ImportResult r;
  r.errors = collect.str();
  if (m.succeeded()) {
    r.ok = true;
    PrintOptions p;
    p.elideBlobs = true;
    r.text = printModule(**m, p);
    r.module = m.take();
  }
  return r;
}

/// A subgraph: `nodes` over the names it reads, returning `outputs`.
struct SubgraphBuilder {
  onnx::GraphProto g;
  explicit SubgraphBuilder(const std::string &name) { g.set_name(name); }
  void input(const std::string &name, int32_t elemType, std::vector<int64_t> dims) {
    auto *vi = g.add_input();
    vi->set_name(name);
    auto *tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elemType);
    auto *shape = tt->mutable_shape();
    for (int64_t d : dims)
      shape->add_dim()->set_dim_value(d);
  }
  onnx::NodeProto &node(const std::string &op, std::vector<std::string> in,
                        std::vector<std::string> out) {
    auto *n = g.add_node();
    n->set_op_type(op);
    for (const auto &i : in)
      n->add_input(i);
    for (const auto &o : out)
      n->add_output(o);
    return *n;
  }
  void output(const std::string &name) { g.add_output()->set_name(name); }
  /// A sequence input of `elemType` elements of rank `rank` (dims unknown).
  void sequenceInput(const std::string &name, int32_t elemType, int rank) {
    auto *vi = g.add_input();
    vi->set_name(name);
    auto *tt =
        vi->mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type();
    tt->set_elem_type(elemType);
    for (int i = 0; i < rank; ++i)
      tt->mutable_shape()->add_dim();
  }
};

inline void attrGraph(onnx::NodeProto &n, const std::string &name, const onnx::GraphProto &g) {
  *addAttr(n, name, onnx::AttributeProto::GRAPH).mutable_g() = g;
}

inline ImportResult importModel(const ModelBuilder &b, OnnxImportOptions opts = {}) {
  return importBytes(b.bytes(), std::move(opts));
}

/// Runs the first graph of `m` on `inputs` and returns its outputs.
/// Success when importing `b` fails with `error` among its diagnostics.
inline ::testing::AssertionResult importFails(const ModelBuilder &b, const std::string &error) {
  auto r = importModel(b);
  if (r.ok)
    return ::testing::AssertionFailure() << "the import succeeded:\n" << r.text;
  if (r.errors.find(error) == std::string::npos)
    return ::testing::AssertionFailure() << "no '" << error << "' in:\n" << r.errors;
  return ::testing::AssertionSuccess();
}

inline std::vector<Tensor> runGraph(const Module &m, std::vector<Tensor> inputs) {
  DiagnosticEngine diag;
  auto outs = interpret(*m.graphs().front(), inputs, diag);
  return outs.succeeded() ? outs.take() : std::vector<Tensor>{};
}

} // namespace kiln::testing
