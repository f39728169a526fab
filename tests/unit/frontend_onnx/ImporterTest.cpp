//===- ImporterTest.cpp - Model-level import and its errors -----*- C++ -*-===//
//
// Inputs, outputs, initializers, opsets, node order, dims and external data,
// and the diagnostic for each kind of broken model.
//
//===----------------------------------------------------------------------===//
#include "OnnxTestUtil.h"
#include "frontend/onnx/Internal.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

using namespace kiln;
using namespace kiln::testing;

namespace {

/// y = relu(x + b) with b an initializer.
ModelBuilder addRelu(int64_t opset = 13) {
  ModelBuilder b(opset);
  b.input("x", {int64_t(2), int64_t(3)});
  b.init("b", {3}, {1, 2, 3});
  b.node("Add", {"x", "b"}, {"s"});
  b.node("Relu", {"s"}, {"y"});
  b.output("y");
  return b;
}

TEST(OnnxImporterTest, ImportsAGraphWithNamesAndWeights) {
  auto r = importModel(addRelu());
  ASSERT_TRUE(r.ok) << r.errors;
  EXPECT_EQ(r.text, "graph @g(%x: f32[2,3]) -> (f32[2,3]) {\n"
                    "  %b = constant @b : f32[3]\n"
                    "  %s = add(%x, %b) : f32[2,3]\n"
                    "  %y = relu(%s) : f32[2,3]\n"
                    "  return %y\n"
                    "}\n"
                    "\n"
                    "blobs {\n"
                    "  @b = elided\n"
                    "}\n");
}

TEST(OnnxImporterTest, NodeLocationsNameTheOnnxNode) {
  auto b = addRelu();
  DiagnosticEngine diag;
  OnnxImportOptions opts;
  opts.modelName = "m.onnx";
  auto m = importOnnxBytes(b.bytes(), diag, opts);
  ASSERT_TRUE(m.succeeded());
  PrintOptions p;
  p.printLocs = true;
  p.elideBlobs = true;
  EXPECT_NE(printModule(**m, p).find("%y = relu(%s) : f32[2,3] loc(\"Relu_2\" in \"m.onnx\")"),
            std::string::npos);
}

TEST(OnnxImporterTest, UnsortedNodesAreSorted) {
  ModelBuilder b;
  b.input("x", {int64_t(4)});
  b.node("Relu", {"s"}, {"y"});
  b.node("Neg", {"x"}, {"s"});
  b.output("y");
  auto r = importModel(b);
  ASSERT_TRUE(r.ok) << r.errors;
  EXPECT_NE(r.text.find("%s = neg(%x) : f32[4]\n  %y = relu(%s)"), std::string::npos) << r.text;
}

TEST(OnnxImporterTest, InitializerListedAsInputIsAConstant) {
  auto b = addRelu();
  b.input("b", {int64_t(3)}); // IR version 3 style
  auto r = importModel(b);
  ASSERT_TRUE(r.ok) << r.errors;
  EXPECT_NE(r.text.find("graph @g(%x: f32[2,3]) ->"), std::string::npos) << r.text;
}

TEST(OnnxImporterTest, DynamicDims) {
  ModelBuilder b;
  b.input("x", {std::string("batch"), std::string(""), std::string("seq len")});
  b.node("Relu", {"x"}, {"y"});
  b.output("y");
  auto r = importModel(b);
  ASSERT_TRUE(r.ok) << r.errors;
  EXPECT_NE(r.text.find("(%x: f32[batch,?,seq_len])"), std::string::npos) << r.text;

  OnnxImportOptions bound;
  bound.dimBindings["batch"] = 4;
  r = importModel(b, bound);
  ASSERT_TRUE(r.ok) << r.errors;
  EXPECT_NE(r.text.find("(%x: f32[4,?,seq_len])"), std::string::npos) << r.text;

  OnnxImportOptions anonymous;
  anonymous.dynamicDims = OnnxDynamicDims::Anonymous;
  r = importModel(b, anonymous);
  EXPECT_NE(r.text.find("(%x: f32[?,?,?])"), std::string::npos) << r.text;

  OnnxImportOptions strict;
  strict.dynamicDims = OnnxDynamicDims::Error;
  strict.dimBindings["batch"] = 1;
  r = importModel(b, strict);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.errors, "m.onnx: node 'x': error: graph input 'x' has dynamic dim 1; bind it to a "
                      "size (--dim NAME=N)\n"
                      "m.onnx: node 'x': error: graph input 'x' has dynamic dim 2 ('seq len'); "
                      "bind it to a size (--dim seq len=N)");

  OnnxImportOptions typo;
  typo.dimBindings["btch"] = 1;
  r = importModel(b, typo);
  EXPECT_EQ(r.errors,
            "error: m.onnx: no graph input has a dim named 'btch' (named dims: batch seq len)");
}

TEST(OnnxImporterTest, CorruptAndTruncatedBytes) {
  EXPECT_EQ(importBytes("").errors, "error: m.onnx: the file is empty");
  EXPECT_EQ(importBytes("\xff\xff\xff\xff garbage").errors,
            "error: m.onnx: not a valid ONNX model: the protobuf data is corrupt or truncated (12 "
            "bytes)");
  std::string bytes = addRelu().bytes();
  // Every prefix of a valid model fails cleanly (or, at a field boundary,
  // imports what it holds) and never crashes.
  for (size_t n = 1; n < bytes.size(); ++n) {
    auto r = importBytes(bytes.substr(0, n));
    EXPECT_TRUE(r.ok || !r.errors.empty()) << n;
  }
  EXPECT_NE(importBytes(bytes.substr(0, bytes.size() / 2)).errors, "");
  // A valid protobuf that is not a model.
  onnx::ModelProto notAModel;
  notAModel.set_producer_name("x");
  EXPECT_EQ(importBytes(notAModel.SerializeAsString()).errors,
            "error: m.onnx: not an ONNX model: it has no ir_version");
}

TEST(OnnxImporterTest, UnsupportedOpsets) {
  EXPECT_EQ(importModel(addRelu(0)).errors,
            "error: m.onnx: the model uses opset 0 of the default ONNX domain; Kiln imports "
            "opsets 11 to 28 (and older ones for ops unchanged since; re-export with another "
            "opset_version, or convert the model with onnx.version_converter)");
  EXPECT_NE(importModel(addRelu(29)).errors.find("uses opset 29"), std::string::npos);
  // Opsets 18 to 28 import (what torch.onnx's dynamo exporter writes, and
  // the newest ONNX).
  for (int64_t opset : {18, 23, 28})
    EXPECT_EQ(importModel(addRelu(opset)).text, importModel(addRelu(13)).text) << opset;
  auto b = addRelu();
  b.model.clear_opset_import();
  EXPECT_EQ(importModel(b).errors,
            "error: m.onnx: the model imports no opset of the default ONNX domain");
}

TEST(OnnxImporterTest, UnsupportedOpsAreListedInOneError) {
  ModelBuilder b(13);
  b.input("x", {int64_t(4), int64_t(4)});
  b.node("Det", {"x"}, {"v"}, "det_1");
  b.node("Relu", {"x"}, {"rl"});
  b.node("Compress", {"rl", "rl"}, {"nz"}, "nz_1");
  b.node("Det", {"rl"}, {"v2"}, "det_2");
  auto &lstm = b.node("LSTM", {"x", "w", "r"}, {"y"}, "lstm_1");
  attrFloat(lstm, "clip", 1.0f);
  attrStrings(lstm, "activations", {"Sigmoid", "Elu", "Tanh"});
  b.node("FusedConv", {"x"}, {"fc"}, "fused").set_domain("com.microsoft");
  auto *ms = b.model.add_opset_import();
  ms->set_domain("com.microsoft");
  ms->set_version(1);
  b.init("w", {1, 4, 4}, std::vector<float>(16, 0.f));
  b.init("r", {1, 4, 1}, std::vector<float>(4, 0.f));
  b.output("nz");
  b.output("v2");
  b.output("y");
  b.output("fc");
  auto r = importModel(b);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.errors,
            "error: m.onnx: 5 nodes use ONNX ops or attributes that Kiln does not support: "
            "Compress, Det, LSTM, com.microsoft.FusedConv\n"
            "m.onnx: node 'det_1': note: 'Det' (opset 13) is not supported\n"
            "m.onnx: node 'nz_1': note: 'Compress' (opset 13) is not supported\n"
            "m.onnx: node 'det_2': note: 'Det' (opset 13) is not supported\n"
            "m.onnx: node 'lstm_1': note: 'LSTM' (opset 13) activation 'Elu' is not supported\n"
            "m.onnx: node 'fused': note: 'com.microsoft.FusedConv' (opset 1) is not supported "
            "(domain 'com.microsoft')");
}

TEST(OnnxImporterTest, OlderOpsetsImportOpsUnchangedSince) {
  // Add (7) and Relu (6) mean the same at opset 7 as at 13.
  auto old = importModel(addRelu(7));
  ASSERT_TRUE(old.ok) << old.errors;
  EXPECT_EQ(old.text, importModel(addRelu(13)).text);
  // At opset 6, Add is Add-6 (the `broadcast` attribute): not imported.
  EXPECT_EQ(importModel(addRelu(6)).errors,
            "error: m.onnx: 1 node uses ONNX ops or attributes that Kiln does not support: Add\n"
            "m.onnx: node 'Add_1': note: 'Add' (opset 6) is supported from opset 7, where its "
            "current definition starts (convert the model with onnx.version_converter)");
  // Slice took attributes before opset 10; every op is listed at once.
  ModelBuilder b(9);
  b.input("x", {int64_t(4)});
  b.node("Slice", {"x"}, {"s"}, "slice");
  b.node("Relu", {"s"}, {"y"});
  b.node("Softmax", {"y"}, {"z"}, "softmax");
  b.output("z");
  EXPECT_EQ(importModel(b).errors,
            "error: m.onnx: 2 nodes use ONNX ops or attributes that Kiln does not support: "
            "Slice, Softmax\n"
            "m.onnx: node 'slice': note: 'Slice' (opset 9) is supported from opset 11, where its "
            "current definition starts (convert the model with onnx.version_converter)\n"
            "m.onnx: node 'softmax': note: 'Softmax' (opset 9) is supported from opset 11, where "
            "its current definition starts (convert the model with onnx.version_converter)");
}

TEST(OnnxImporterTest, OpOutsideItsOpsetRange) {
  ModelBuilder b(13);
  b.input("x", {int64_t(2)});
  b.node("LayerNormalization", {"x", "x"}, {"y"}, "ln");
  b.output("y");
  EXPECT_EQ(importModel(b).errors,
            "error: m.onnx: 1 node uses ONNX ops or attributes that Kiln does not support: "
            "LayerNormalization\n"
            "m.onnx: node 'ln': note: 'LayerNormalization' (opset 13) is supported at opsets 17 "
            "to 28 only");
}

TEST(OnnxImporterTest, MissingInitializerAndDanglingInputs) {
  ModelBuilder b;
  b.input("x", {int64_t(3)});
  b.node("Add", {"x", "bias"}, {"s"}, "add");
  b.node("Mul", {"s", "scale"}, {"y"}, "mul");
  b.output("y");
  b.output("nowhere");
  EXPECT_EQ(importModel(b).errors,
            "m.onnx: node 'add': error: Add: input 1 'bias' is not defined by any node, graph "
            "input or initializer (a missing initializer?)\n"
            "m.onnx: node 'mul': error: Mul: input 1 'scale' is not defined by any node, graph "
            "input or initializer (a missing initializer?)\n"
            "error: m.onnx: graph output 'nowhere' is not defined by any node");
}

TEST(OnnxImporterTest, CycleIsReported) {
  ModelBuilder b;
  b.input("x", {int64_t(3)});
  b.node("Add", {"x", "c"}, {"a"}, "n_a");
  b.node("Relu", {"a"}, {"b"}, "n_b");
  b.node("Neg", {"b"}, {"c"}, "n_c");
  b.node("Exp", {"x"}, {"e"}, "n_e");
  b.output("e");
  EXPECT_EQ(importModel(b).errors,
            "m.onnx: node 'n_a': error: the graph has a cycle: 'n_a' -> 'n_b' -> 'n_c' -> 'n_a' "
            "(3 nodes cannot be ordered)");
}

TEST(OnnxImporterTest, DuplicateDefinitions) {
  ModelBuilder b;
  b.input("x", {int64_t(3)});
  b.init("w", {3}, {1, 2, 3});
  b.init("w", {3}, {1, 2, 3});
  b.node("Relu", {"x"}, {"y"}, "r1");
  b.node("Neg", {"x"}, {"y"}, "r2");
  b.output("y");
  EXPECT_EQ(importModel(b).errors,
            "m.onnx: node 'w': error: initializer 'w' is defined twice\n"
            "m.onnx: node 'r2': error: value 'y' is also produced by node 'r1'");
}

TEST(OnnxImporterTest, BadInitializers) {
  auto b = addRelu();
  b.graph().mutable_initializer(0)->clear_float_data();
  b.graph().mutable_initializer(0)->add_float_data(1.0f);
  EXPECT_EQ(importModel(b).errors, "m.onnx: node 'b': error: initializer 'b' of type f32[3] "
                                   "needs 3 values in float_data, got 1");
  b.graph().mutable_initializer(0)->set_raw_data(std::string(5, '\0'));
  EXPECT_EQ(importModel(b).errors, "m.onnx: node 'b': error: initializer 'b' of type f32[3] "
                                   "needs 12 bytes of raw data, got 5");
  b.graph().mutable_initializer(0)->set_data_type(onnx::TensorProto::STRING);
  EXPECT_EQ(importModel(b).errors, "m.onnx: node 'b': error: initializer 'b' has data type "
                                   "STRING, which Kiln does not support");
  b.graph().mutable_initializer(0)->set_data_type(onnx::TensorProto::FLOAT);
  b.graph().mutable_initializer(0)->set_dims(0, -3);
  EXPECT_EQ(importModel(b).errors,
            "m.onnx: node 'b': error: initializer 'b' has a negative dim -3");
  b.graph().mutable_initializer(0)->set_dims(0, int64_t(1) << 40);
  b.graph().mutable_initializer(0)->add_dims(int64_t(1) << 40);
  EXPECT_EQ(importModel(b).errors,
            "m.onnx: node 'b': error: initializer 'b' has too many elements");
}

// Every integer width decodes from its typed field (int32_data up to 16
// bits, uint64_data for uint32) and from raw_data; a short field is an error
// naming it.
TEST(OnnxImporterTest, IntegerTensorsOfEveryWidth) {
  auto decode = [](onnx::TensorProto::DataType type, auto fill) {
    onnx::TensorProto p;
    p.set_data_type(type);
    p.add_dims(2);
    fill(p);
    DiagnosticEngine diag;
    ScopedDiagnosticCollector collect(diag);
    auto t = onnximport::tensorFromProto(p, "", "tensor 't'", Location(), diag);
    std::string text;
    if (t)
      text =
          t->str() + "{" + std::to_string(t->getInt(0)) + ", " + std::to_string(t->getInt(1)) + "}";
    return std::make_pair(text, collect.str());
  };
  EXPECT_EQ(decode(onnx::TensorProto::INT16,
                   [](auto &p) { p.add_int32_data(-32768), p.add_int32_data(7); })
                .first,
            "i16[2]{-32768, 7}");
  EXPECT_EQ(decode(onnx::TensorProto::UINT16,
                   [](auto &p) { p.add_int32_data(65535), p.add_int32_data(0); })
                .first,
            "u16[2]{65535, 0}");
  EXPECT_EQ(decode(onnx::TensorProto::UINT32,
                   [](auto &p) { p.add_uint64_data(4294967295u), p.add_uint64_data(1); })
                .first,
            "u32[2]{4294967295, 1}");
  EXPECT_EQ(decode(onnx::TensorProto::UINT32,
                   [](auto &p) { p.set_raw_data(std::string("\xff\xff\xff\xff\x02\0\0\0", 8)); })
                .first,
            "u32[2]{4294967295, 2}");
  EXPECT_EQ(decode(onnx::TensorProto::UINT32, [](auto &p) { p.add_int32_data(1); }).second,
            "error: tensor 't' of type u32[2] needs 2 values in uint64_data, got 0");
}

// The storage types: INT4 / UINT4 / INT2 / FLOAT4E2M1 packed low bits
// first, in raw_data or one packed byte per int32_data entry (an odd count
// leaves the last high nibble unused); the 8-bit floats one code per byte
// or per int32. A Kiln buffer holds one element per byte.
TEST(OnnxImporterTest, PackedStorageTypes) {
  auto decode = [](int type, int64_t n, auto fill) {
    onnx::TensorProto p;
    p.set_data_type(type);
    p.add_dims(n);
    fill(p);
    DiagnosticEngine diag;
    ScopedDiagnosticCollector collect(diag);
    auto t = onnximport::tensorFromProto(p, "", "tensor 't'", Location(), diag);
    std::string text = collect.str();
    if (t) {
      text = t->str() + "{";
      for (int64_t i = 0; i < n; ++i)
        text += (i ? ", " : "") + formatDouble(t->getDouble(i));
      text += "}";
    }
    return text;
  };
  EXPECT_EQ(decode(22, 3, [](auto &p) { p.set_raw_data(std::string("\x8f\x07", 2)); }),
            "i4[3]{-1.0, -8.0, 7.0}");
  EXPECT_EQ(decode(21, 3, [](auto &p) { p.add_int32_data(0x8f), p.add_int32_data(0x07); }),
            "u4[3]{15.0, 8.0, 7.0}");
  EXPECT_EQ(decode(26, 5, [](auto &p) { p.set_raw_data(std::string("\xe4\x03", 2)); }),
            "i2[5]{0.0, 1.0, -2.0, -1.0, -1.0}");
  EXPECT_EQ(decode(23, 2, [](auto &p) { p.set_raw_data(std::string("\xf7", 1)); }),
            "f4e2m1fn[2]{6.0, -6.0}");
  EXPECT_EQ(decode(17, 2, [](auto &p) { p.add_int32_data(0x7e), p.add_int32_data(0xb8); }),
            "f8e4m3fn[2]{448.0, -1.0}");
  EXPECT_EQ(decode(22, 3, [](auto &p) { p.set_raw_data(std::string("\x8f", 1)); }),
            "error: tensor 't' of type i4[3] needs 2 bytes of raw data, got 1");
  EXPECT_EQ(decode(22, 3, [](auto &p) { p.add_int32_data(1); }),
            "error: tensor 't' of type i4[3] needs 2 values in int32_data, got 1");
  EXPECT_EQ(decode(24, 1, [](auto &p) { p.add_int32_data(1); }),
            "error: tensor 't' has data type FLOAT8E8M0, which Kiln does not support");
}

// IsNaN and IsInf (opset 20) take the 8-bit floats: the input is cast to
// f32 first (a storage dtype is not computed on), which keeps NaN and inf.
TEST(OnnxImporterTest, IsNaNAndIsInfOfAFloat8) {
  ModelBuilder b;
  b.input("x", {int64_t(4)}, onnximport::kOnnxFloat8E5M2);
  b.node("IsNaN", {"x"}, {"nan"});
  b.node("IsInf", {"x"}, {"inf"});
  b.output("nan");
  b.output("inf");
  auto r = importModel(b);
  ASSERT_TRUE(r.ok) << r.errors;
  Tensor x = Tensor::zeros(DType::F8E5M2, {4});
  const uint8_t codes[4] = {0x7c, 0xfe, 0x3c, 0x00}; // inf, NaN, 1, 0
  std::memcpy(x.mutableRawData(), codes, 4);
  auto outs = runGraph(*r.module, {x});
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(outs[0].str(), "bool[4]");
  EXPECT_EQ(outs[0].getInt(1) + 2 * outs[1].getInt(0), 3);
  EXPECT_EQ(outs[0].getInt(0) + outs[0].getInt(2) + outs[1].getInt(1) + outs[1].getInt(3), 0);
}

TEST(OnnxImporterTest, BadInputs) {
  ModelBuilder b;
  b.input("x", {int64_t(2)}, onnx::TensorProto::STRING);
  b.graph().add_input()->set_name("noshape");
  b.graph().mutable_input(1)->mutable_type()->mutable_tensor_type()->set_elem_type(1);
  b.node("Relu", {"x"}, {"y"});
  b.output("y");
  EXPECT_EQ(importModel(b).errors,
            "m.onnx: node 'x': error: graph input 'x' has element type STRING, which Kiln does "
            "not support\n"
            "m.onnx: node 'noshape': error: graph input 'noshape' has no shape; Kiln needs at "
            "least the rank of every input");
}

TEST(OnnxImporterTest, BadAttributeNamesTheNode) {
  ModelBuilder b;
  b.input("x", {int64_t(2), int64_t(3)});
  auto &t = b.node("Transpose", {"x"}, {"y"}, "tr");
  attrInt(t, "perm", 1);
  b.output("y");
  EXPECT_EQ(importModel(b).errors,
            "m.onnx: node 'tr': error: Transpose: attribute 'perm' must be a list of ints, got an "
            "int");
  b.graph().mutable_node(0)->mutable_attribute(0)->set_type(onnx::AttributeProto::INTS);
  b.graph().mutable_node(0)->mutable_attribute(0)->add_ints(0);
  b.graph().mutable_node(0)->mutable_attribute(0)->add_ints(0);
  EXPECT_EQ(importModel(b).errors,
            "m.onnx: node 'tr': error: 'transpose' op perm [0, 0] is not a permutation of rank 2");
}

TEST(OnnxImporterTest, ExternalData) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("kiln_onnx_ext_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  {
    std::ofstream f(dir / "weights.bin", std::ios::binary);
    float pad = 0, vals[3] = {1.5f, 2.5f, 3.5f};
    f.write(reinterpret_cast<const char *>(&pad), 4);
    f.write(reinterpret_cast<const char *>(vals), 12);
  }
  auto b = addRelu();
  onnx::TensorProto &w = *b.graph().mutable_initializer(0);
  w.clear_float_data();
  w.set_data_location(onnx::TensorProto::EXTERNAL);
  auto kv = [&](const char *k, const char *v) {
    auto *e = w.add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  kv("location", "weights.bin");
  kv("offset", "4");
  kv("length", "12");
  OnnxImportOptions opts;
  opts.externalDataDir = dir.string();
  auto r = importModel(b, opts);
  ASSERT_TRUE(r.ok) << r.errors;
  auto outs = runGraph(*r.module, {Tensor::fromDoubles(DType::F32, {2, 3}, {0, 0, 0, -9, 0, 0})});
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0].toDoubles(), (std::vector<double>{1.5, 2.5, 3.5, 0, 2.5, 3.5}));

  // The same through a file next to the weights.
  {
    std::ofstream f(dir / "m.onnx", std::ios::binary);
    f << b.bytes();
  }
  DiagnosticEngine diag;
  EXPECT_TRUE(importOnnx((dir / "m.onnx").string(), diag).succeeded());

  w.mutable_external_data(1)->set_value("8");
  EXPECT_EQ(importModel(b, opts).errors,
            "m.onnx: node 'b': error: initializer 'b' needs 12 bytes at offset 8 of external "
            "data file '" +
                (dir / "weights.bin").string() + "', which is too short (16 bytes)");
  w.mutable_external_data(0)->set_value("missing.bin");
  EXPECT_EQ(importModel(b, opts).errors, "m.onnx: node 'b': error: initializer 'b': external data "
                                         "file '" +
                                             (dir / "missing.bin").string() + "' does not exist");
  w.mutable_external_data(0)->set_value("../escape.bin");
  EXPECT_EQ(importModel(b, opts).errors,
            "m.onnx: node 'b': error: initializer 'b' has external data location "
            "'../escape.bin' outside the model's folder");
  fs::remove_all(dir);
}

TEST(OnnxImporterTest, FileErrors) {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector c(diag);
  EXPECT_TRUE(importOnnx("/nonexistent/model.onnx", diag).failed());
  EXPECT_EQ(c.str(), "error: cannot open '/nonexistent/model.onnx'");
}

TEST(OnnxImporterTest, DeadNodesAreRemoved) {
  ModelBuilder b;
  b.input("x", {int64_t(2)});
  b.node("Exp", {"x"}, {"unused"});
  b.node("Relu", {"x"}, {"y"});
  b.output("y");
  auto r = importModel(b);
  EXPECT_EQ(r.text.find("exp"), std::string::npos) << r.text;
  OnnxImportOptions keep;
  keep.removeDeadNodes = false;
  EXPECT_NE(importModel(b, keep).text.find("%unused = exp(%x)"), std::string::npos);
}

} // namespace

/// A model-local function `local.AddAct(x, b) {alpha}` = LeakyRelu(Add(x, b),
/// alpha = @alpha), where the activation is itself the call of `local.Act`.
void addFunctions(ModelBuilder &b, bool recursive = false) {
  auto *imp = b.model.add_opset_import();
  imp->set_domain("local");
  imp->set_version(1);
  onnx::FunctionProto *act = b.model.add_functions();
  act->set_name("Act");
  act->set_domain("local");
  act->add_input("u");
  act->add_output("v");
  act->add_attribute("alpha");
  auto *f13 = act->add_opset_import();
  f13->set_version(13);
  onnx::NodeProto *lr = act->add_node();
  lr->set_op_type(recursive ? "AddAct" : "LeakyRelu");
  if (recursive)
    lr->set_domain("local");
  lr->add_input("u");
  lr->add_output("v");
  onnx::AttributeProto *ref = lr->add_attribute();
  ref->set_name("alpha");
  ref->set_ref_attr_name("alpha");
  ref->set_type(onnx::AttributeProto::FLOAT);

  onnx::FunctionProto *f = b.model.add_functions();
  f->set_name("AddAct");
  f->set_domain("local");
  f->add_input("x");
  f->add_input("b");
  f->add_output("y");
  f->add_attribute("alpha");
  // A default for alpha (FunctionProto.attribute_proto, field 11, which
  // Debian's ONNX 1.12 classes lack: written as the unknown field it is).
  onnx::AttributeProto dflt;
  dflt.set_name("alpha");
  dflt.set_type(onnx::AttributeProto::FLOAT);
  dflt.set_f(0.25f);
  f->mutable_unknown_fields()->AddLengthDelimited(11, dflt.SerializeAsString());
  *f->add_opset_import() = *f13;
  onnx::NodeProto *add = f->add_node();
  add->set_op_type("Add");
  add->set_name("add");
  add->add_input("x");
  add->add_input("b");
  add->add_output("s");
  onnx::NodeProto *call = f->add_node();
  call->set_op_type("Act");
  call->set_domain("local");
  call->set_name("act");
  call->add_input("s");
  call->add_output("y");
  onnx::AttributeProto *pass = call->add_attribute();
  pass->set_name("alpha");
  pass->set_ref_attr_name("alpha");
  pass->set_type(onnx::AttributeProto::FLOAT);
}

TEST(OnnxImporterTest, ModelLocalFunctionsAreInlined) {
  ModelBuilder b(13);
  b.input("x", {int64_t(3)});
  b.init("bias", {3}, {1, -2, 3});
  auto &c1 = b.node("AddAct", {"x", "bias"}, {"h"}, "block1");
  c1.set_domain("local");
  attrFloat(c1, "alpha", 0.5f);
  auto &c2 = b.node("AddAct", {"h", "bias"}, {"y"}, "block2");
  c2.set_domain("local"); // no alpha: the function's default 0.25
  b.output("y");
  addFunctions(b);
  auto r = importModel(b);
  ASSERT_TRUE(r.ok) << r.errors;
  EXPECT_EQ(r.text, "graph @g(%x: f32[3]) -> (f32[3]) {\n"
                    "  %bias = constant @bias : f32[3]\n"
                    "  %\"block1/s\" = add(%x, %bias) : f32[3]\n"
                    "  %h = leaky_relu(%\"block1/s\") {alpha = 0.5} : f32[3]\n"
                    "  %\"block2/s\" = add(%h, %bias) : f32[3]\n"
                    "  %y = leaky_relu(%\"block2/s\") {alpha = 0.25} : f32[3]\n"
                    "  return %y\n"
                    "}\n\n"
                    "blobs {\n"
                    "  @bias = elided\n"
                    "}\n");
  auto out = runGraph(*r.module, {Tensor::fromDoubles(DType::F32, {3}, {-4, 0, 2})});
  // block1: [-3, -2, 5] -> [-1.5, -1, 5]; block2: [-0.5, -3, 8] -> [-0.125, -0.75, 8]
  ASSERT_EQ(out.size(), 1u);
  std::vector<double> y = out[0].toDoubles();
  EXPECT_FLOAT_EQ(static_cast<float>(y[0]), -0.125f);
  EXPECT_FLOAT_EQ(static_cast<float>(y[1]), -0.75f);
  EXPECT_FLOAT_EQ(static_cast<float>(y[2]), 8.0f);
}

TEST(OnnxImporterTest, RecursiveFunctionIsAnError) {
  ModelBuilder b(13);
  b.input("x", {int64_t(3)});
  b.init("bias", {3}, {1, -2, 3});
  b.node("AddAct", {"x", "bias"}, {"y"}, "block").set_domain("local");
  b.output("y");
  addFunctions(b, /*recursive=*/true);
  EXPECT_EQ(importModel(b).errors,
            "m.onnx: node 'block': error: function 'AddAct' called here reaches itself "
            "(AddAct -> Act -> AddAct)");
}

// A function output the call leaves out is still a value its body may read.
TEST(OnnxImporterTest, FunctionOutputTheCallOmitsStaysInTheBody) {
  ModelBuilder b(13);
  b.input("x", {int64_t(2)});
  b.node("ReluNeg", {"x"}, {"", "z"}, "call").set_domain("local");
  b.output("z");
  auto *imp = b.model.add_opset_import();
  imp->set_domain("local");
  imp->set_version(1);
  onnx::FunctionProto *f = b.model.add_functions();
  f->set_name("ReluNeg");
  f->set_domain("local");
  f->add_input("u");
  f->add_output("r");
  f->add_output("n");
  f->add_opset_import()->set_version(13);
  onnx::NodeProto *relu = f->add_node();
  relu->set_op_type("Relu");
  relu->add_input("u");
  relu->add_output("r");
  onnx::NodeProto *neg = f->add_node();
  neg->set_op_type("Neg");
  neg->add_input("r");
  neg->add_output("n");
  auto r = importModel(b);
  ASSERT_TRUE(r.ok) << r.errors;
  auto out = runGraph(*r.module, {Tensor::fromDoubles(DType::F32, {2}, {-1, 2})});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].toDoubles(), (std::vector<double>{0, -2}));
}
