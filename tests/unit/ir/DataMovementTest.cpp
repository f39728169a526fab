//===- DataMovementTest.cpp - Data movement ops: inference, kernels -*- C++ -*-===//
//
// Checks the reference kernels of ir/ops/DataMovement.cpp against
// hand-computed values (every dtype where the kernel copies bytes), and their
// type inference, including symbolic dims and the error messages.
//
//===----------------------------------------------------------------------===//
#include "ir/Builder.h"
#include "ir/Interpreter.h"
#include "ir/Parser.h"

#include <gtest/gtest.h>

#include <limits>

using namespace kiln;

namespace {

constexpr DType kAllDTypes[] = {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I8,
                                DType::U8,  DType::I32, DType::I64,  DType::Bool};

/// The outcome of building one node and running its reference kernel.
struct OpRun {
  std::vector<Tensor> results;
  std::string errors;
  bool ok = false;
};

/// Creates a node of `kind` over graph inputs typed like `inputs`, then
/// evaluates it on `inputs`.
OpRun run(OpKind kind, std::vector<Tensor> inputs, std::vector<NamedAttr> attrs = {},
          unsigned numResults = 1) {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collector(diag);
  Graph g;
  Builder b(g, diag);
  std::vector<Value *> operands;
  for (const Tensor &t : inputs)
    operands.push_back(g.addInput(t.type()));
  OpRun r;
  auto n = b.create(kind, operands, std::move(attrs), numResults);
  if (n.succeeded()) {
    auto results = evaluateNode(**n, inputs, diag);
    if (results.succeeded())
      r.results = results.take();
  }
  r.ok = !diag.hadError();
  r.errors = collector.str();
  return r;
}

/// Result types inferred for `types` (joined by ", "), or the errors.
std::string infer(OpKind kind, std::vector<std::string> types, std::vector<NamedAttr> attrs = {},
                  unsigned numResults = 1) {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collector(diag);
  std::vector<TensorType> operandTypes;
  for (const std::string &t : types) {
    auto parsed = parseTensorType(t, diag);
    if (failed(parsed))
      return "bad type " + t;
    operandTypes.push_back(*parsed);
  }
  const OpInfo &info = opInfo(kind);
  auto built = buildAttrs(info, std::move(attrs), Location(), diag);
  if (failed(built))
    return collector.str();
  auto result = inferTypes(info, operandTypes, *built, numResults, Location(), diag);
  if (failed(result))
    return collector.str();
  std::string s;
  for (const TensorType &t : *result)
    s += (s.empty() ? "" : ", ") + t.str();
  return s;
}

Tensor f32(std::vector<int64_t> shape, std::vector<double> values) {
  return Tensor::fromDoubles(DType::F32, std::move(shape), values);
}
Tensor i64(std::vector<int64_t> shape, std::vector<int64_t> values) {
  return Tensor::fromInts(DType::I64, std::move(shape), values);
}

/// 0, 1, 2, ... in `dtype` (0, 1, 0, ... for bool).
Tensor iota(DType dtype, std::vector<int64_t> shape) {
  Tensor t = Tensor::zeros(dtype, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i)
    t.setInt(i, dtype == DType::Bool ? i % 2 : i);
  return t;
}

/// What iota() holds at the flat source indices `from`.
std::vector<int64_t> iotaAt(DType dtype, std::vector<int64_t> from) {
  for (int64_t &v : from)
    if (dtype == DType::Bool)
      v %= 2;
  return from;
}

bool contains(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

#define EXPECT_ERROR(text, part) EXPECT_TRUE(contains(text, part)) << (text)

/// Checks that a single-result run succeeded with `shape` and `values`.
void expectValues(const OpRun &r, std::vector<int64_t> shape, std::vector<double> values) {
  ASSERT_TRUE(r.ok) << r.errors;
  ASSERT_EQ(r.results.size(), 1u);
  EXPECT_EQ(r.results[0].shape(), shape);
  EXPECT_EQ(r.results[0].toDoubles(), values);
}

} // namespace

//===----------------------------------------------------------------------===//
// reshape, flatten, squeeze, unsqueeze
//===----------------------------------------------------------------------===//

TEST(DataMovementTest, ReshapeIsAZeroCopyView) {
  for (DType dt : kAllDTypes) {
    Tensor x = iota(dt, {2, 3});
    OpRun r = run(OpKind::Reshape, {x}, {{"shape", Ints{3, -1}}});
    ASSERT_TRUE(r.ok) << r.errors;
    EXPECT_EQ(r.results[0].shape(), (std::vector<int64_t>{3, 2}));
    EXPECT_EQ(r.results[0].dtype(), dt);
    EXPECT_EQ(r.results[0].rawData(), x.rawData());
    EXPECT_EQ(r.results[0].toInts(), iotaAt(dt, {0, 1, 2, 3, 4, 5}));
  }
}

TEST(DataMovementTest, ReshapeInference) {
  EXPECT_EQ(infer(OpKind::Reshape, {"f32[N,28,28]"}, {{"shape", Ints{-1, 784}}}), "f32[N,784]");
  EXPECT_EQ(infer(OpKind::Reshape, {"f32[N,28,28]"}, {{"shape", Ints{0, -1}}}), "f32[N,784]");
  EXPECT_EQ(infer(OpKind::Reshape, {"f32[2,3,4]"}, {{"shape", Ints{0, 0, -1}}}), "f32[2,3,4]");
  EXPECT_EQ(infer(OpKind::Reshape, {"f32[2,3,4]"}, {{"shape", Ints{-1}}}), "f32[24]");
  EXPECT_EQ(infer(OpKind::Reshape, {"f32[0,3]"}, {{"shape", Ints{-1, 3}}}), "f32[0,3]");
  EXPECT_EQ(infer(OpKind::Reshape, {"f32[2,0]"}, {{"shape", Ints{0, -1}}}), "f32[2,0]");
  // The -1 divides the element counts as expressions; an anonymous dim is unknown.
  EXPECT_EQ(infer(OpKind::Reshape, {"f32[N,4]"}, {{"shape", Ints{-1, 2}}}), "f32[2*N,2]");
  EXPECT_EQ(infer(OpKind::Reshape, {"f32[N,S,64]"}, {{"shape", Ints{0, 0, 4, -1}}}),
            "f32[N,S,4,16]");
  EXPECT_EQ(infer(OpKind::Reshape, {"f32[N,3]"}, {{"shape", Ints{-1, 2}}}), "f32[?,2]");
  EXPECT_ERROR(infer(OpKind::Reshape, {"f32[N,4]"}, {{"shape", Ints{0, 5}}}),
               "cannot reshape f32[N,4] to shape [0, 5]: element counts differ");
  EXPECT_EQ(infer(OpKind::Reshape, {"f32[?,4]"}, {{"shape", Ints{-1, 4}}}), "f32[?,4]");
  EXPECT_EQ(infer(OpKind::Reshape, {"f32[N,M]"}, {{"shape", Ints{0, 0, 1}}}), "f32[N,M,1]");
  EXPECT_ERROR(infer(OpKind::Reshape, {"f32[N,3]"}, {{"shape", Ints{0, 2}}}),
               "'reshape' op cannot reshape f32[N,3] to shape [0, 2]: element counts differ");
}

TEST(DataMovementTest, ReshapeErrors) {
  EXPECT_ERROR(infer(OpKind::Reshape, {"f32[2,3]"}, {{"shape", Ints{4, 2}}}),
               "cannot reshape f32[2,3] to shape [4, 2]: element counts differ");
  EXPECT_ERROR(infer(OpKind::Reshape, {"f32[2,3]"}, {{"shape", Ints{-1, -1}}}),
               "shape [-1, -1] has more than one -1");
  EXPECT_ERROR(infer(OpKind::Reshape, {"f32[2,3]"}, {{"shape", Ints{-2, 3}}}),
               "shape [-2, 3] has invalid size -2");
  EXPECT_ERROR(infer(OpKind::Reshape, {"f32[2,3]"}, {{"shape", Ints{4, -1}}}),
               "6 elements are not divisible by 4");
  EXPECT_ERROR(infer(OpKind::Reshape, {"f32[0,3]"}, {{"shape", Ints{0, -1}}}),
               "cannot infer the -1 in shape [0, -1]");
  EXPECT_ERROR(infer(OpKind::Reshape, {"f32[6]"}, {{"shape", Ints{6, 0}}}),
               "copies dim 1 with 0 but the input f32[6] has rank 1");
  constexpr int64_t big = std::numeric_limits<int64_t>::max();
  EXPECT_ERROR(infer(OpKind::Reshape, {"f32[2]"}, {{"shape", Ints{big, big}}}),
               "element count overflows int64");
}

TEST(DataMovementTest, Flatten) {
  Tensor x = iota(DType::I32, {2, 3, 4});
  OpRun r = run(OpKind::Flatten, {x}, {{"axis", int64_t(2)}});
  ASSERT_TRUE(r.ok) << r.errors;
  EXPECT_EQ(r.results[0].shape(), (std::vector<int64_t>{6, 4}));
  EXPECT_EQ(r.results[0].rawData(), x.rawData());
  EXPECT_EQ(infer(OpKind::Flatten, {"f32[2,3,4]"}, {{"axis", int64_t(0)}}), "f32[1,24]");
  EXPECT_EQ(infer(OpKind::Flatten, {"f32[2,3,4]"}, {{"axis", int64_t(3)}}), "f32[24,1]");
  EXPECT_EQ(infer(OpKind::Flatten, {"f32[2,3,4]"}, {{"axis", int64_t(-1)}}), "f32[6,4]");
  EXPECT_EQ(infer(OpKind::Flatten, {"f32[N,3,4]"}), "f32[N,12]");
  EXPECT_EQ(infer(OpKind::Flatten, {"f32[N,1,4]"}, {{"axis", int64_t(2)}}), "f32[N,4]");
  EXPECT_EQ(infer(OpKind::Flatten, {"f32[N,0,4]"}, {{"axis", int64_t(2)}}), "f32[0,4]");
  EXPECT_EQ(infer(OpKind::Flatten, {"f32[3,N,4]"}, {{"axis", int64_t(2)}}), "f32[3*N,4]");
  EXPECT_ERROR(infer(OpKind::Flatten, {"f32[2,3]"}, {{"axis", int64_t(-3)}}),
               "'flatten' op axis -3 is out of range for rank 2");
}

TEST(DataMovementTest, SqueezeAndUnsqueeze) {
  Tensor x = iota(DType::U8, {1, 3, 1});
  OpRun all = run(OpKind::Squeeze, {x});
  ASSERT_TRUE(all.ok) << all.errors;
  EXPECT_EQ(all.results[0].shape(), (std::vector<int64_t>{3}));
  EXPECT_EQ(all.results[0].toInts(), (std::vector<int64_t>{0, 1, 2}));
  OpRun named = run(OpKind::Squeeze, {x}, {{"axes", Ints{-1}}});
  ASSERT_TRUE(named.ok) << named.errors;
  EXPECT_EQ(named.results[0].shape(), (std::vector<int64_t>{1, 3}));
  OpRun un = run(OpKind::Unsqueeze, {x}, {{"axes", Ints{-1, 1}}});
  ASSERT_TRUE(un.ok) << un.errors;
  EXPECT_EQ(un.results[0].shape(), (std::vector<int64_t>{1, 1, 3, 1, 1}));
  EXPECT_EQ(un.results[0].rawData(), x.rawData());

  EXPECT_EQ(infer(OpKind::Squeeze, {"f32[N,1,3]"}), "f32[N,3]");
  EXPECT_EQ(infer(OpKind::Squeeze, {"f32[N,1,3]"}, {{"axes", Ints{0}}}), "f32[1,3]");
  EXPECT_EQ(infer(OpKind::Squeeze, {"f32[1]"}), "f32[]");
  EXPECT_EQ(infer(OpKind::Unsqueeze, {"f32[]"}, {{"axes", Ints{0}}}), "f32[1]");
  EXPECT_EQ(infer(OpKind::Unsqueeze, {"f32[N,3]"}, {{"axes", Ints{1, 3}}}), "f32[N,1,3,1]");
  EXPECT_ERROR(infer(OpKind::Squeeze, {"f32[2,3]"}, {{"axes", Ints{1}}}),
               "'squeeze' op cannot squeeze axis 1 of f32[2,3]: its size is 3, not 1");
  EXPECT_ERROR(infer(OpKind::Squeeze, {"f32[1,1]"}, {{"axes", Ints{0, -2}}}),
               "axis -2 is repeated");
  EXPECT_ERROR(infer(OpKind::Unsqueeze, {"f32[2]"}, {{"axes", Ints{2}}}),
               "'unsqueeze' op axis 2 is out of range for rank 2");
}

//===----------------------------------------------------------------------===//
// transpose
//===----------------------------------------------------------------------===//

TEST(DataMovementTest, TransposeEveryDType) {
  for (DType dt : kAllDTypes) {
    // [2,3] -> [3,2]: out[i][j] = in[j][i].
    OpRun r = run(OpKind::Transpose, {iota(dt, {2, 3})}, {{"perm", Ints{1, 0}}});
    ASSERT_TRUE(r.ok) << r.errors;
    EXPECT_EQ(r.results[0].shape(), (std::vector<int64_t>{3, 2}));
    EXPECT_EQ(r.results[0].toInts(), iotaAt(dt, {0, 3, 1, 4, 2, 5})) << dtypeName(dt);
  }
}

TEST(DataMovementTest, TransposeRank3AndDefaultPerm) {
  // in[2,3,2] flat index = 6a + 2b + c.
  Tensor x = iota(DType::I64, {2, 3, 2});
  OpRun r = run(OpKind::Transpose, {x}, {{"perm", Ints{1, 2, 0}}}); // out[b][c][a]
  ASSERT_TRUE(r.ok) << r.errors;
  EXPECT_EQ(r.results[0].shape(), (std::vector<int64_t>{3, 2, 2}));
  EXPECT_EQ(r.results[0].toInts(), (std::vector<int64_t>{0, 6, 1, 7, 2, 8, 3, 9, 4, 10, 5, 11}));
  OpRun rev = run(OpKind::Transpose, {x}); // out[c][b][a]
  ASSERT_TRUE(rev.ok) << rev.errors;
  EXPECT_EQ(rev.results[0].shape(), (std::vector<int64_t>{2, 3, 2}));
  EXPECT_EQ(rev.results[0].toInts(), (std::vector<int64_t>{0, 6, 2, 8, 4, 10, 1, 7, 3, 9, 5, 11}));
  EXPECT_EQ(infer(OpKind::Transpose, {"f32[N,3,M]"}), "f32[M,3,N]");
  EXPECT_ERROR(infer(OpKind::Transpose, {"f32[2,3]"}, {{"perm", Ints{0, 0}}}),
               "'transpose' op perm [0, 0] is not a permutation of rank 2");
  EXPECT_ERROR(infer(OpKind::Transpose, {"f32[2,3]"}, {{"perm", Ints{-1, 0}}}),
               "perm [-1, 0] is not a permutation of rank 2");
  EXPECT_ERROR(infer(OpKind::Transpose, {"f32[2,3]"}, {{"perm", Ints{0}}}),
               "perm [0] is not a permutation of rank 2");
}

//===----------------------------------------------------------------------===//
// concat, split
//===----------------------------------------------------------------------===//

TEST(DataMovementTest, ConcatEveryDType) {
  for (DType dt : kAllDTypes) {
    // [2,2] ++ [2,1] along axis 1.
    Tensor a = iota(dt, {2, 2}), b = Tensor::zeros(dt, {2, 1});
    b.setInt(0, 1);
    OpRun r = run(OpKind::Concat, {a, b}, {{"axis", int64_t(-1)}});
    ASSERT_TRUE(r.ok) << r.errors;
    EXPECT_EQ(r.results[0].shape(), (std::vector<int64_t>{2, 3}));
    std::vector<int64_t> want = iotaAt(dt, {0, 1, 0, 2, 3, 0});
    want[2] = 1;
    EXPECT_EQ(r.results[0].toInts(), want) << dtypeName(dt);
  }
}

TEST(DataMovementTest, ConcatThreeOperandsAxis0) {
  OpRun r = run(OpKind::Concat, {f32({1, 2}, {1, 2}), f32({0, 2}, {}), f32({2, 2}, {3, 4, 5, 6})},
                {{"axis", int64_t(0)}});
  expectValues(r, {3, 2}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(infer(OpKind::Concat, {"f32[N,2]", "f32[N,3]"}, {{"axis", int64_t(1)}}), "f32[N,5]");
  EXPECT_EQ(infer(OpKind::Concat, {"f32[N,2]", "f32[3,2]"}, {{"axis", int64_t(1)}}), "f32[3,4]");
  EXPECT_EQ(infer(OpKind::Concat, {"f32[N,2]", "f32[0,2]"}, {{"axis", int64_t(0)}}), "f32[N,2]");
  EXPECT_EQ(infer(OpKind::Concat, {"f32[N,2]", "f32[N,2]"}, {{"axis", int64_t(0)}}), "f32[2*N,2]");
  EXPECT_EQ(infer(OpKind::Concat, {"f32[N,2]", "f32[M,2]", "f32[1,2]"}, {{"axis", int64_t(0)}}),
            "f32[M+N+1,2]");
  EXPECT_EQ(infer(OpKind::Concat, {"f32[N,2]", "f32[?,2]"}, {{"axis", int64_t(0)}}), "f32[?,2]");
  EXPECT_ERROR(infer(OpKind::Concat, {"f32[2,2]", "f32[3,3]"}, {{"axis", int64_t(1)}}),
               "'concat' op operand 1 has type f32[3,3] which does not match f32[2,2] in dim 0");
  EXPECT_ERROR(infer(OpKind::Concat, {"f32[2,2]", "f32[2]"}, {{"axis", int64_t(0)}}),
               "operand 1 has type f32[2] but operand 0 has f32[2,2]: ranks differ");
  EXPECT_ERROR(infer(OpKind::Concat, {"f32[]"}, {{"axis", int64_t(0)}}),
               "axis 0 is out of range for rank 0");
}

TEST(DataMovementTest, SplitEquallyAndBySizes) {
  for (DType dt : kAllDTypes) {
    OpRun r = run(OpKind::Split, {iota(dt, {2, 4})}, {{"axis", int64_t(1)}}, 2);
    ASSERT_TRUE(r.ok) << r.errors;
    ASSERT_EQ(r.results.size(), 2u);
    EXPECT_EQ(r.results[0].shape(), (std::vector<int64_t>{2, 2}));
    EXPECT_EQ(r.results[0].toInts(), iotaAt(dt, {0, 1, 4, 5})) << dtypeName(dt);
    EXPECT_EQ(r.results[1].toInts(), iotaAt(dt, {2, 3, 6, 7})) << dtypeName(dt);
  }
  OpRun s = run(OpKind::Split, {iota(DType::F32, {5, 1})}, {{"sizes", Ints{1, 0, 4}}}, 3);
  ASSERT_TRUE(s.ok) << s.errors;
  ASSERT_EQ(s.results.size(), 3u);
  EXPECT_EQ(s.results[0].toDoubles(), (std::vector<double>{0}));
  EXPECT_EQ(s.results[1].shape(), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(s.results[2].toDoubles(), (std::vector<double>{1, 2, 3, 4}));

  EXPECT_EQ(infer(OpKind::Split, {"f32[N,6]"}, {{"axis", int64_t(-1)}}, 3),
            "f32[N,2], f32[N,2], f32[N,2]");
  EXPECT_EQ(infer(OpKind::Split, {"f32[N,6]"}, {}, 2), "f32[?,6], f32[?,6]");
  EXPECT_EQ(infer(OpKind::Split, {"f32[N,6]"}, {{"sizes", Ints{1, 2}}}, 2), "f32[1,6], f32[2,6]");
  EXPECT_ERROR(infer(OpKind::Split, {"f32[2,5]"}, {{"axis", int64_t(1)}}, 2),
               "'split' op dim 1 of f32[2,5] cannot be split into 2 equal parts");
  EXPECT_ERROR(infer(OpKind::Split, {"f32[4]"}, {{"sizes", Ints{1, 2}}}, 2),
               "sizes [1, 2] sum to 3 but dim 0 of f32[4] has size 4");
  EXPECT_ERROR(infer(OpKind::Split, {"f32[4]"}, {{"sizes", Ints{4}}}, 2),
               "sizes [4] has 1 entries but the op has 2 results");
  EXPECT_ERROR(infer(OpKind::Split, {"f32[4]"}, {{"sizes", Ints{5, -1}}}, 2),
               "sizes [5, -1] has a negative size -1");
}

TEST(DataMovementTest, SplitInAParsedGraph) {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collector(diag);
  auto m = parseModule(R"(graph @g(%x: f32[2,2]) -> (f32[2,1], f32[2,1]) {
  %a, %b = split(%x) {axis = 1} : f32[2,1], f32[2,1]
  return %b, %a
})",
                       diag);
  ASSERT_TRUE(m.succeeded()) << collector.str();
  std::vector<Tensor> inputs{f32({2, 2}, {1, 2, 3, 4})};
  auto out = interpret(*(*m)->graphs()[0], inputs, diag);
  ASSERT_TRUE(out.succeeded()) << collector.str();
  EXPECT_EQ((*out)[0].toDoubles(), (std::vector<double>{2, 4}));
  EXPECT_EQ((*out)[1].toDoubles(), (std::vector<double>{1, 3}));
}

//===----------------------------------------------------------------------===//
// slice
//===----------------------------------------------------------------------===//

TEST(DataMovementTest, SliceBasicAndEveryDType) {
  for (DType dt : kAllDTypes) {
    // [3,4], rows 1.., cols 0..3 step 2.
    OpRun r = run(OpKind::Slice, {iota(dt, {3, 4})},
                  {{"starts", Ints{1, 0}}, {"ends", Ints{3, 3}}, {"steps", Ints{1, 2}}});
    ASSERT_TRUE(r.ok) << r.errors;
    EXPECT_EQ(r.results[0].shape(), (std::vector<int64_t>{2, 2}));
    EXPECT_EQ(r.results[0].toInts(), iotaAt(dt, {4, 6, 8, 10})) << dtypeName(dt);
  }
}

TEST(DataMovementTest, SliceNegativeStepsAndClamping) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  Tensor x = f32({5}, {0, 1, 2, 3, 4});
  // Full reverse with the ONNX sentinels.
  expectValues(
      run(OpKind::Slice, {x}, {{"starts", Ints{-1}}, {"ends", Ints{kMin}}, {"steps", Ints{-1}}}),
      {5}, {4, 3, 2, 1, 0});
  // Start past the end clamps to the last element for negative steps.
  expectValues(
      run(OpKind::Slice, {x}, {{"starts", Ints{kMax}}, {"ends", Ints{0}}, {"steps", Ints{-2}}}),
      {2}, {4, 2});
  // Ends past the dim clamp; negative starts count from the end.
  expectValues(run(OpKind::Slice, {x}, {{"starts", Ints{-3}}, {"ends", Ints{kMax}}}), {3},
               {2, 3, 4});
  expectValues(run(OpKind::Slice, {x}, {{"starts", Ints{-100}}, {"ends", Ints{2}}}), {2}, {0, 1});
  // An empty range, and a huge negative step.
  expectValues(run(OpKind::Slice, {x}, {{"starts", Ints{3}}, {"ends", Ints{1}}}), {0}, {});
  expectValues(
      run(OpKind::Slice, {x}, {{"starts", Ints{3}}, {"ends", Ints{kMin}}, {"steps", Ints{kMin}}}),
      {1}, {3});
  // Axes select and reorder the sliced dims.
  Tensor m = f32({2, 3}, {0, 1, 2, 3, 4, 5});
  expectValues(run(OpKind::Slice, {m},
                   {{"starts", Ints{2, 1}},
                    {"ends", Ints{0, 2}},
                    {"axes", Ints{-1, 0}},
                    {"steps", Ints{-1, 1}}}),
               {1, 2}, {5, 4});
}

TEST(DataMovementTest, SliceInference) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(infer(OpKind::Slice, {"f32[N,10]"}, {{"starts", Ints{0}}, {"ends", Ints{kMax}}}),
            "f32[N,10]");
  EXPECT_EQ(infer(OpKind::Slice, {"f32[N,10]"},
                  {{"starts", Ints{-1}}, {"ends", Ints{kMin}}, {"steps", Ints{-1}}}),
            "f32[N,10]");
  EXPECT_EQ(infer(OpKind::Slice, {"f32[N,10]"},
                  {{"starts", Ints{1, 2}}, {"ends", Ints{kMax, -2}}, {"steps", Ints{1, 3}}}),
            "f32[max(N-1,0),2]");
  // Bounds clamp to the symbolic dim; a positive step divides (ceil).
  EXPECT_EQ(infer(OpKind::Slice, {"f32[N]"}, {{"starts", Ints{0}}, {"ends", Ints{8}}}),
            "f32[min(N,8)]");
  EXPECT_EQ(infer(OpKind::Slice, {"f32[N]"}, {{"starts", Ints{-3}}, {"ends", Ints{kMax}}}),
            "f32[min(N,3)]");
  EXPECT_EQ(infer(OpKind::Slice, {"f32[2*N]"},
                  {{"starts", Ints{0}}, {"ends", Ints{kMax}}, {"steps", Ints{2}}}),
            "f32[N]");
  EXPECT_EQ(infer(OpKind::Slice, {"f32[N]"},
                  {{"starts", Ints{-1}}, {"ends", Ints{kMin}}, {"steps", Ints{-2}}}),
            "f32[?]");
  EXPECT_ERROR(infer(OpKind::Slice, {"f32[4]"}, {{"starts", Ints{0}}, {"ends", Ints{1, 2}}}),
               "'slice' op starts [0] and ends [1, 2] have different lengths");
  EXPECT_ERROR(infer(OpKind::Slice, {"f32[4]"},
                     {{"starts", Ints{0}}, {"ends", Ints{1}}, {"steps", Ints{0}}}),
               "steps [0] has a zero step");
  EXPECT_ERROR(
      infer(OpKind::Slice, {"f32[4]"}, {{"starts", Ints{0}}, {"ends", Ints{1}}, {"axes", Ints{1}}}),
      "axis 1 is out of range for rank 1");
  EXPECT_ERROR(infer(OpKind::Slice, {"f32[4,4]"},
                     {{"starts", Ints{0, 0}}, {"ends", Ints{1, 1}}, {"axes", Ints{0, -2}}}),
               "axis -2 is repeated");
  EXPECT_ERROR(infer(OpKind::Slice, {"f32[4]"},
                     {{"starts", Ints{0}}, {"ends", Ints{1}}, {"axes", Ints{0, 1}}}),
               "axes [0, 1] and starts [0] have different lengths");
}

//===----------------------------------------------------------------------===//
// gather
//===----------------------------------------------------------------------===//

TEST(DataMovementTest, GatherNegativeIndicesEveryDType) {
  for (DType dt : kAllDTypes) {
    // data [3,2], indices [2] on axis 0: rows 2 and 0 (-3).
    OpRun r = run(OpKind::Gather, {iota(dt, {3, 2}), i64({2}, {-1, -3})});
    ASSERT_TRUE(r.ok) << r.errors;
    EXPECT_EQ(r.results[0].shape(), (std::vector<int64_t>{2, 2}));
    EXPECT_EQ(r.results[0].toInts(), iotaAt(dt, {4, 5, 0, 1})) << dtypeName(dt);
  }
}

TEST(DataMovementTest, GatherAxis1AndScalarIndex) {
  Tensor data = f32({2, 3}, {0, 1, 2, 3, 4, 5});
  Tensor idx = Tensor::fromInts(DType::I32, {2, 2}, {2, 0, -2, 2});
  expectValues(run(OpKind::Gather, {data, idx}, {{"axis", int64_t(1)}}), {2, 2, 2},
               {2, 0, 1, 2, 5, 3, 4, 5});
  // A 0-d index removes the axis.
  expectValues(run(OpKind::Gather, {data, Tensor::fromInts(DType::I64, {}, {1})}), {3}, {3, 4, 5});
  EXPECT_EQ(infer(OpKind::Gather, {"f32[N,5,7]", "i64[B,2]"}, {{"axis", int64_t(-2)}}),
            "f32[N,B,2,7]");
  EXPECT_ERROR(infer(OpKind::Gather, {"f32[3]", "f32[2]"}),
               "'gather' op indices must be i32 or i64, got f32[2]");
  EXPECT_ERROR(infer(OpKind::Gather, {"f32[3]", "i32[2]"}, {{"axis", int64_t(1)}}),
               "axis 1 is out of range for rank 1");
}

TEST(DataMovementTest, GatherOutOfRangeIndexIsARuntimeError) {
  OpRun r = run(OpKind::Gather, {f32({3}, {1, 2, 3}), i64({2}, {0, 5})});
  EXPECT_FALSE(r.ok);
  EXPECT_ERROR(r.errors, "'gather' op index 5 is out of range for axis 0 of size 3");
  OpRun neg = run(OpKind::Gather, {f32({3}, {1, 2, 3}), i64({1}, {-4})});
  EXPECT_ERROR(neg.errors, "index -4 is out of range for axis 0 of size 3");
}

//===----------------------------------------------------------------------===//
// expand
//===----------------------------------------------------------------------===//

TEST(DataMovementTest, Expand) {
  for (DType dt : kAllDTypes) {
    // [3,1] -> [2,3,2].
    OpRun r = run(OpKind::Expand, {iota(dt, {3, 1})}, {{"shape", Ints{2, 1, 2}}});
    ASSERT_TRUE(r.ok) << r.errors;
    EXPECT_EQ(r.results[0].shape(), (std::vector<int64_t>{2, 3, 2}));
    EXPECT_EQ(r.results[0].toInts(), iotaAt(dt, {0, 0, 1, 1, 2, 2, 0, 0, 1, 1, 2, 2}));
  }
  // A shape shorter than the input and with 1s keeps the input's dims.
  EXPECT_EQ(infer(OpKind::Expand, {"f32[2,1,4]"}, {{"shape", Ints{3, 1}}}), "f32[2,3,4]");
  EXPECT_EQ(infer(OpKind::Expand, {"f32[N,1]"}, {{"shape", Ints{1, 5}}}), "f32[N,5]");
  EXPECT_EQ(infer(OpKind::Expand, {"f32[N]"}, {{"shape", Ints{2, 3}}}), "f32[2,3]");
  EXPECT_ERROR(infer(OpKind::Expand, {"f32[2,3]"}, {{"shape", Ints{2, 4}}}),
               "'expand' op cannot expand f32[2,3] to shape [2, 4] (dim 1: 3 vs 4)");
  EXPECT_ERROR(infer(OpKind::Expand, {"f32[2]"}, {{"shape", Ints{-1}}}),
               "shape [-1] has a negative size -1");
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_ERROR(infer(OpKind::Expand, {"f32[1,1]"}, {{"shape", Ints{kMax, 2}}}),
               "'expand' op result type f32[9223372036854775807,2] has more elements than fit "
               "in int64");
}

//===----------------------------------------------------------------------===//
// pad
//===----------------------------------------------------------------------===//

TEST(DataMovementTest, PadConstantReflectEdge) {
  Tensor x = f32({3}, {1, 2, 3});
  expectValues(run(OpKind::Pad, {x}, {{"pads", Ints{2, 1}}, {"value", 9.0}}), {6},
               {9, 9, 1, 2, 3, 9});
  expectValues(run(OpKind::Pad, {x}, {{"pads", Ints{2, 2}}, {"mode", std::string("reflect")}}), {7},
               {3, 2, 1, 2, 3, 2, 1});
  expectValues(run(OpKind::Pad, {x}, {{"pads", Ints{2, 2}}, {"mode", std::string("edge")}}), {7},
               {1, 1, 1, 2, 3, 3, 3});
  // Reflect wider than the dim continues periodically, like numpy.
  expectValues(run(OpKind::Pad, {x}, {{"pads", Ints{5, 0}}, {"mode", std::string("reflect")}}), {8},
               {2, 1, 2, 3, 2, 1, 2, 3});
  // Negative pads crop.
  expectValues(run(OpKind::Pad, {x}, {{"pads", Ints{-1, 1}}, {"value", 7.0}}), {3}, {2, 3, 7});
  expectValues(run(OpKind::Pad, {x}, {{"pads", Ints{-2, 2}}, {"mode", std::string("edge")}}), {3},
               {3, 3, 3});
}

TEST(DataMovementTest, Pad2DAndIntegerDTypes) {
  // [[1,2],[3,4]] reflect-padded by one on each side of dim 1, edge-padded
  // below in dim 0.
  Tensor x = Tensor::fromInts(DType::I32, {2, 2}, {1, 2, 3, 4});
  OpRun r = run(OpKind::Pad, {x}, {{"pads", Ints{0, 1, 1, 1}}, {"mode", std::string("reflect")}});
  ASSERT_TRUE(r.ok) << r.errors;
  EXPECT_EQ(r.results[0].shape(), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(r.results[0].toInts(), (std::vector<int64_t>{2, 1, 2, 1, 4, 3, 4, 3, 2, 1, 2, 1}));
  OpRun c = run(OpKind::Pad, {x}, {{"pads", Ints{1, 0, 0, 0}}, {"value", -3.0}});
  ASSERT_TRUE(c.ok) << c.errors;
  EXPECT_EQ(c.results[0].toInts(), (std::vector<int64_t>{-3, -3, 1, 2, 3, 4}));
  OpRun b = run(OpKind::Pad, {iota(DType::Bool, {2})}, {{"pads", Ints{1, 1}}, {"value", 1.0}});
  ASSERT_TRUE(b.ok) << b.errors;
  EXPECT_EQ(b.results[0].toInts(), (std::vector<int64_t>{1, 0, 1, 1}));
}

TEST(DataMovementTest, PadInference) {
  EXPECT_EQ(infer(OpKind::Pad, {"f32[N,3]"}, {{"pads", Ints{0, 1, 0, 1}}}), "f32[N,5]");
  EXPECT_EQ(infer(OpKind::Pad, {"f32[N,3]"}, {{"pads", Ints{1, 0, -1, 0}}}), "f32[N,3]");
  EXPECT_EQ(infer(OpKind::Pad, {"f32[N,3]"}, {{"pads", Ints{1, 0, 0, 0}}}), "f32[N+1,3]");
  EXPECT_EQ(infer(OpKind::Pad, {"f32[N,3]"}, {{"pads", Ints{0, 0, -2, 0}}}), "f32[N-2,3]");
  EXPECT_ERROR(infer(OpKind::Pad, {"f32[2,3]"}, {{"pads", Ints{1, 1}}}),
               "'pad' op pads [1, 1] has 2 entries but the input f32[2,3] needs 4");
  EXPECT_ERROR(infer(OpKind::Pad, {"f32[2]"}, {{"pads", Ints{-2, -1}}}),
               "pads [-2, -1] crop dim 0 of f32[2] below size 0");
  EXPECT_ERROR(infer(OpKind::Pad, {"f32[2]"}, {{"pads", Ints{0, 0}}, {"mode", std::string("x")}}),
               "mode 'x' is not one of 'constant', 'reflect', 'edge'");
  EXPECT_ERROR(
      infer(OpKind::Pad, {"f32[0]"}, {{"pads", Ints{1, 0}}, {"mode", std::string("reflect")}}),
      "cannot reflect-pad dim 0 of f32[0]: it is empty");
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_ERROR(infer(OpKind::Pad, {"f32[2]"}, {{"pads", Ints{kMax, 1}}}),
               "pads [9223372036854775807, 1] has an entry beyond +-2^62");
  EXPECT_ERROR(infer(OpKind::Pad, {"f32[2]"}, {{"pads", Ints{int64_t(1) << 62, int64_t(1) << 62}}}),
               "overflow int64");
}

//===----------------------------------------------------------------------===//
// resize
//===----------------------------------------------------------------------===//

namespace {
std::vector<NamedAttr> resizeAttrs(std::string mode, std::string ctm, std::string nearest,
                                   Floats scales, Ints sizes = {}) {
  return {{"mode", std::move(mode)},
          {"coordinate_transformation_mode", std::move(ctm)},
          {"nearest_mode", std::move(nearest)},
          {"scales", std::move(scales)},
          {"sizes", std::move(sizes)}};
}

/// Checks floats to within float precision.
void expectNear(const OpRun &r, std::vector<int64_t> shape, std::vector<double> values) {
  ASSERT_TRUE(r.ok) << r.errors;
  EXPECT_EQ(r.results[0].shape(), shape);
  std::vector<double> got = r.results[0].toDoubles();
  ASSERT_EQ(got.size(), values.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], values[i], 1e-5) << "element " << i;
}
} // namespace

TEST(DataMovementTest, ResizeNearest) {
  // ONNX resize_upsample_scales_nearest: half_pixel, round_prefer_floor.
  Tensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  expectValues(run(OpKind::Resize, {x},
                   resizeAttrs("nearest", "half_pixel", "round_prefer_floor", {1, 1, 2, 3})),
               {1, 1, 4, 6},
               {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4});
  // ONNX resize_downsample_scales_nearest.
  Tensor y = f32({1, 1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  expectValues(run(OpKind::Resize, {y},
                   resizeAttrs("nearest", "half_pixel", "round_prefer_floor", {1, 1, 0.6, 0.6})),
               {1, 1, 1, 2}, {1, 3});
  // Nearest modes on asymmetric coordinates x/3 = 0, 1/3, 2/3, 1, 4/3, 5/3.
  Tensor z = Tensor::fromInts(DType::I8, {2}, {1, 2});
  auto nearest = [&](const char *mode) {
    OpRun r = run(OpKind::Resize, {z}, resizeAttrs("nearest", "asymmetric", mode, {3}));
    EXPECT_TRUE(r.ok) << r.errors;
    return r.ok ? r.results[0].toInts() : std::vector<int64_t>();
  };
  EXPECT_EQ(nearest("floor"), (std::vector<int64_t>{1, 1, 1, 2, 2, 2}));
  EXPECT_EQ(nearest("ceil"), (std::vector<int64_t>{1, 2, 2, 2, 2, 2}));
  EXPECT_EQ(nearest("round_prefer_floor"), (std::vector<int64_t>{1, 1, 2, 2, 2, 2}));
  // Ties (x/2 = 0.5, 1.5) pick the floor or the ceiling.
  Tensor w = f32({3}, {1, 2, 3});
  expectValues(
      run(OpKind::Resize, {w}, resizeAttrs("nearest", "asymmetric", "round_prefer_floor", {2})),
      {6}, {1, 1, 2, 2, 3, 3});
  expectValues(
      run(OpKind::Resize, {w}, resizeAttrs("nearest", "asymmetric", "round_prefer_ceil", {2})), {6},
      {1, 2, 2, 3, 3, 3});
}

TEST(DataMovementTest, ResizeLinear) {
  Tensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  // ONNX resize_upsample_scales_linear (half_pixel).
  expectNear(run(OpKind::Resize, {x},
                 resizeAttrs("linear", "half_pixel", "round_prefer_floor", {1, 1, 2, 2})),
             {1, 1, 4, 4},
             {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4});
  // ONNX resize_upsample_scales_linear_align_corners.
  expectNear(run(OpKind::Resize, {x},
                 resizeAttrs("linear", "align_corners", "round_prefer_floor", {1, 1, 2, 2})),
             {1, 1, 4, 4},
             {1, 4.0 / 3, 5.0 / 3, 2, 5.0 / 3, 2, 7.0 / 3, 8.0 / 3, 7.0 / 3, 8.0 / 3, 3, 10.0 / 3,
              3, 10.0 / 3, 11.0 / 3, 4});
  // ONNX resize_downsample_scales_linear.
  Tensor y = f32({1, 1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  expectNear(run(OpKind::Resize, {y},
                 resizeAttrs("linear", "half_pixel", "round_prefer_floor", {1, 1, 0.6, 0.6})),
             {1, 1, 1, 2}, {8.0 / 3, 13.0 / 3});
  // Sizes: one output pixel is the input's first one with pytorch_half_pixel,
  // the centre with half_pixel.
  Tensor z = Tensor::fromDoubles(DType::F64, {4}, {1, 2, 3, 4});
  expectNear(
      run(OpKind::Resize, {z}, resizeAttrs("linear", "pytorch_half_pixel", "floor", {}, {1})), {1},
      {1});
  expectNear(run(OpKind::Resize, {z}, resizeAttrs("linear", "half_pixel", "floor", {}, {1})), {1},
             {2.5});
  // Asymmetric upsampling by sizes: scale 6/4.
  expectNear(run(OpKind::Resize, {z}, resizeAttrs("linear", "asymmetric", "floor", {}, {6})), {6},
             {1, 1 + 2.0 / 3, 1 + 4.0 / 3, 3, 3 + 2.0 / 3, 4});
}

TEST(DataMovementTest, ResizeInference) {
  EXPECT_EQ(infer(OpKind::Resize, {"f32[N,3,10,10]"}, {{"scales", Floats{1, 1, 1.5, 0.5}}}),
            "f32[N,3,15,5]");
  EXPECT_EQ(infer(OpKind::Resize, {"f32[N,3,H,W]"}, {{"scales", Floats{1, 1, 2, 2}}}),
            "f32[N,3,2*H,2*W]");
  EXPECT_EQ(infer(OpKind::Resize, {"f32[N,3,H,W]"}, {{"scales", Floats{1, 1, 1.5, 2}}}),
            "f32[N,3,?,2*W]");
  EXPECT_EQ(infer(OpKind::Resize, {"f32[N,3,H,W]"}, {{"sizes", Ints{1, 3, 8, 8}}}), "f32[1,3,8,8]");
  // Both: the sizes are the shape, the scales the coordinate mapping.
  EXPECT_EQ(infer(OpKind::Resize, {"f32[1,3,10,10]"},
                  {{"scales", Floats{1, 1, 0.75, 0.75}}, {"sizes", Ints{1, 3, 8, 8}}}),
            "f32[1,3,8,8]");
  EXPECT_ERROR(infer(OpKind::Resize, {"f32[2,2]"}),
               "'resize' op one of scales and sizes must be given");
  EXPECT_ERROR(infer(OpKind::Resize, {"f32[2,2]"}, {{"scales", Floats{2, 2}}, {"sizes", Ints{4}}}),
               "sizes has 1 entries but the input f32[2,2] has rank 2");
  EXPECT_ERROR(infer(OpKind::Resize, {"f32[2,2]"}, {{"scales", Floats{2}}}),
               "scales has 1 entries but the input f32[2,2] has rank 2");
  EXPECT_ERROR(infer(OpKind::Resize, {"f32[2,2]"}, {{"scales", Floats{2, 0}}}),
               "scale 0.0 of dim 1 is not a positive number");
  EXPECT_ERROR(infer(OpKind::Resize, {"f32[2,2]"},
                     {{"scales", Floats{2, 2}}, {"nearest_mode", std::string("round")}}),
               "nearest_mode 'round' is not one of");
  EXPECT_ERROR(infer(OpKind::Resize, {"f32[2,2]"},
                     {{"scales", Floats{2, 2}},
                      {"coordinate_transformation_mode", std::string("tf_crop_and_resize")}}),
               "roi has 0 entries; tf_crop_and_resize needs a start and an end per dim of "
               "f32[2,2]");
  EXPECT_ERROR(infer(OpKind::Resize, {"f32[2,2]"},
                     {{"scales", Floats{2, 2}},
                      {"coordinate_transformation_mode", std::string("tf_crop_and_resize")},
                      {"roi", Floats{0, 0, 1, std::numeric_limits<double>::quiet_NaN()}}}),
               "roi has a value that is not finite (nan)");
  EXPECT_ERROR(
      infer(OpKind::Resize, {"f32[2,2]"}, {{"scales", Floats{2, 2}}, {"roi", Floats{0, 0, 1, 1}}}),
      "roi has 4 entries; only tf_crop_and_resize takes one");
  EXPECT_ERROR(infer(OpKind::Resize, {"i32[2,2]"},
                     {{"scales", Floats{2, 2}}, {"mode", std::string("linear")}}),
               "operand 0 must be a float tensor, got i32[2,2]");
  EXPECT_ERROR(infer(OpKind::Resize, {"f32[0,2]"}, {{"sizes", Ints{2, 2}}}),
               "cannot resize empty dim 0 of f32[0,2] to 2");
}

//===----------------------------------------------------------------------===//
// constant, shape, constant_of_shape, range
//===----------------------------------------------------------------------===//

TEST(DataMovementTest, ConstantReturnsItsTensorWithoutCopying) {
  DiagnosticEngine diag;
  Graph g;
  Builder b(g, diag);
  Tensor value = Tensor::fromInts(DType::I64, {2}, {1, 2});
  Value *c = b.constant(value, "w");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->type().str(), "i64[2]");
  auto out = evaluateNode(*c->definingNode(), {}, diag);
  ASSERT_TRUE(out.succeeded());
  EXPECT_EQ((*out)[0].rawData(), value.rawData());

  ScopedDiagnosticCollector collector(diag);
  EXPECT_EQ(b.constant(Tensor()), nullptr);
  EXPECT_ERROR(collector.str(), "'constant' op has no value");
}

TEST(DataMovementTest, ShapeWithStartAndEnd) {
  Tensor x = Tensor::zeros(DType::F16, {2, 3, 4, 5});
  OpRun all = run(OpKind::ShapeOf, {x});
  ASSERT_TRUE(all.ok) << all.errors;
  EXPECT_EQ(all.results[0].dtype(), DType::I64);
  EXPECT_EQ(all.results[0].toInts(), (std::vector<int64_t>{2, 3, 4, 5}));
  OpRun mid = run(OpKind::ShapeOf, {x}, {{"start", int64_t(1)}, {"end", int64_t(-1)}});
  ASSERT_TRUE(mid.ok) << mid.errors;
  EXPECT_EQ(mid.results[0].toInts(), (std::vector<int64_t>{3, 4}));
  OpRun tail = run(OpKind::ShapeOf, {x}, {{"start", int64_t(-10)}, {"end", int64_t(1)}});
  ASSERT_TRUE(tail.ok) << tail.errors;
  EXPECT_EQ(tail.results[0].toInts(), (std::vector<int64_t>{2}));
  EXPECT_EQ(infer(OpKind::ShapeOf, {"f32[N,3]"}), "i64[2]");
  EXPECT_EQ(infer(OpKind::ShapeOf, {"f32[]"}), "i64[0]");
  EXPECT_EQ(infer(OpKind::ShapeOf, {"f32[N,3]"}, {{"start", int64_t(2)}, {"end", int64_t(0)}}),
            "i64[0]");
}

TEST(DataMovementTest, ConstantOfShape) {
  expectValues(run(OpKind::ConstantOfShape, {}, {{"shape", Ints{2, 2}}, {"value", 1.5}}), {2, 2},
               {1.5, 1.5, 1.5, 1.5});
  OpRun i = run(OpKind::ConstantOfShape, {},
                {{"shape", Ints{3}}, {"value", -2.0}, {"dtype", DType::I32}});
  ASSERT_TRUE(i.ok) << i.errors;
  EXPECT_EQ(i.results[0].type().str(), "i32[3]");
  EXPECT_EQ(i.results[0].toInts(), (std::vector<int64_t>{-2, -2, -2}));
  OpRun b = run(OpKind::ConstantOfShape, {}, {{"shape", Ints{}}, {"dtype", DType::Bool}});
  ASSERT_TRUE(b.ok) << b.errors;
  EXPECT_EQ(b.results[0].type().str(), "bool[]");
  EXPECT_EQ(b.results[0].toInts(), (std::vector<int64_t>{0}));
  EXPECT_ERROR(infer(OpKind::ConstantOfShape, {}, {{"shape", Ints{-1}}}),
               "'constant_of_shape' op shape [-1] has a negative size -1");
}

TEST(DataMovementTest, Range) {
  expectValues(run(OpKind::Range, {},
                   {{"start", 1.0}, {"limit", 3.0}, {"delta", 0.5}, {"dtype", DType::F32}}),
               {4}, {1, 1.5, 2, 2.5});
  expectValues(run(OpKind::Range, {}, {{"start", 10.0}, {"limit", 4.0}, {"delta", -3.0}}), {2},
               {10, 7});
  expectValues(run(OpKind::Range, {}, {{"start", 0.0}, {"limit", 10.0}, {"delta", 3.0}}), {4},
               {0, 3, 6, 9});
  expectValues(run(OpKind::Range, {}, {{"start", 5.0}, {"limit", 1.0}}), {0}, {});
  EXPECT_EQ(infer(OpKind::Range, {}, {{"start", 0.0}, {"limit", 5.0}, {"dtype", DType::I32}}),
            "i32[5]");
  EXPECT_ERROR(infer(OpKind::Range, {}, {{"start", 0.0}, {"limit", 5.0}, {"delta", 0.0}}),
               "'range' op delta must not be 0");
  EXPECT_ERROR(infer(OpKind::Range, {}, {{"start", 0.0}, {"limit", 1e300}, {"delta", 1e-300}}),
               "has too many elements");
  EXPECT_ERROR(infer(OpKind::Range, {},
                     {{"start", 0.0}, {"limit", std::numeric_limits<double>::infinity()}}),
               "must be finite");
}

TEST(DataMovementTest, Iota) {
  expectValues(run(OpKind::Iota, {}, {{"shape", Ints{2, 3}}}), {2, 3}, {0, 0, 0, 1, 1, 1});
  expectValues(run(OpKind::Iota, {},
                   {{"shape", Ints{2, 3}},
                    {"axis", int64_t(-1)},
                    {"start", -1.0},
                    {"delta", 0.5},
                    {"dtype", DType::F32}}),
               {2, 3}, {-1, -0.5, 0, -1, -0.5, 0});
  expectValues(run(OpKind::Iota, {}, {{"shape", Ints{0, 4}}, {"axis", int64_t(1)}}), {0, 4}, {});
  EXPECT_ERROR(infer(OpKind::Iota, {}, {{"shape", Ints{2}}, {"axis", int64_t(1)}}),
               "axis 1 is out of range for rank 1");
  EXPECT_ERROR(infer(OpKind::Iota, {}, {{"shape", Ints{}}}), "out of range for rank 0");
  EXPECT_ERROR(infer(OpKind::Iota, {}, {{"shape", Ints{2}}, {"delta", std::nan("")}}),
               "must be finite");
}

TEST(DataMovementTest, IotaKeepsASymbolicShape) {
  Graph g;
  DiagnosticEngine diag;
  Builder b(g, diag);
  std::vector<DimExpr> shape = {DimExpr::symbol("S"), DimExpr(4)};
  auto n = b.create(OpKind::Iota, {}, {{"shape", shape}}, 1);
  ASSERT_TRUE(n.succeeded());
  EXPECT_EQ((*n)->result(0)->type().str(), "i64[S,4]");
}

//===----------------------------------------------------------------------===//
// Robustness
//===----------------------------------------------------------------------===//

// Extreme attribute values on static, empty, scalar and symbolic inputs give
// a type or a diagnostic, never a crash; where the result is small, the
// kernel runs too.
TEST(DataMovementTest, ExtremeAttributesNeverCrash) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  const std::vector<int64_t> extremes{kMin, -3, -1, 0, 1, 2, kMax};
  const char *inputTypes[] = {"f32[]", "f32[0]", "f32[2,3]", "f32[N,3]", "f32[2,0,?]", "f32[1,1]"};
  std::vector<std::pair<OpKind, std::vector<NamedAttr>>> cases;
  for (int64_t a : extremes) {
    for (int64_t b : extremes) {
      cases.push_back({OpKind::Reshape, {{"shape", Ints{a, b}}}});
      cases.push_back({OpKind::Transpose, {{"perm", Ints{a, b}}}});
      cases.push_back({OpKind::Squeeze, {{"axes", Ints{a, b}}}});
      cases.push_back({OpKind::Unsqueeze, {{"axes", Ints{a, b}}}});
      cases.push_back({OpKind::Expand, {{"shape", Ints{a, b}}}});
      cases.push_back(
          {OpKind::Pad, {{"pads", Ints{a, b, b, a}}, {"mode", std::string("reflect")}}});
      cases.push_back({OpKind::Pad, {{"pads", Ints{a, b}}, {"mode", std::string("edge")}}});
      cases.push_back({OpKind::ShapeOf, {{"start", a}, {"end", b}}});
      cases.push_back({OpKind::Resize, {{"sizes", Ints{a, b}}}});
      for (int64_t c : extremes)
        cases.push_back(
            {OpKind::Slice, {{"starts", Ints{a}}, {"ends", Ints{b}}, {"steps", Ints{c}}}});
    }
    cases.push_back({OpKind::Flatten, {{"axis", a}}});
    cases.push_back({OpKind::Concat, {{"axis", a}}});
    cases.push_back({OpKind::Split, {{"axis", a}}});
    cases.push_back({OpKind::Split, {{"sizes", Ints{a, 1}}}});
    cases.push_back({OpKind::Gather, {{"axis", a}}});
    cases.push_back({OpKind::ConstantOfShape, {{"shape", Ints{a}}}});
    cases.push_back({OpKind::Range, {{"start", 0.0}, {"limit", static_cast<double>(a)}}});
  }
  for (double s : {0.0, -1.0, 1e-300, 0.5, 1e300, std::numeric_limits<double>::quiet_NaN()})
    cases.push_back({OpKind::Resize, {{"scales", Floats{s, s}}}});

  size_t numRan = 0;
  for (const char *typeText : inputTypes) {
    for (auto &[kind, attrs] : cases) {
      DiagnosticEngine diag;
      ScopedDiagnosticCollector collector(diag);
      TensorType type = *parseTensorType(typeText, diag);
      const OpInfo &info = opInfo(kind);
      Graph g;
      Builder b(g, diag);
      std::vector<Value *> operands;
      for (int i = 0; i < info.minOperands; ++i)
        operands.push_back(g.addInput(i == 1 ? TensorType(DType::I64, Shape{Dim(1)}) : type));
      unsigned numResults = info.numResults == kVariadic ? 2 : 1;
      auto n = b.create(kind, operands, attrs, numResults);
      if (failed(n)) {
        EXPECT_TRUE(diag.hadError());
        continue;
      }
      bool small = true;
      for (unsigned i = 0; i < (*n)->numResults(); ++i) {
        const TensorType &t = (*n)->result(i)->type();
        small &= t.isStatic() && numElements(staticSizes(t.shape)) <= 4096;
      }
      for (Value *v : operands)
        small &= v->type().isStatic();
      if (!small)
        continue;
      std::vector<Tensor> inputs;
      for (Value *v : operands)
        inputs.push_back(Tensor::zeros(v->type().dtype, staticSizes(v->type().shape)));
      (void)evaluateNode(**n, inputs, diag);
      ++numRan;
    }
  }
  EXPECT_GT(numRan, 100u);
}
