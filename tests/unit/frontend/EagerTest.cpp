//===- EagerTest.cpp - The eager API: results and located errors ----------===//
//
// Eager calls compute the reference results; every user mistake throws
// kiln::Error whose message is located at the line of this file that made
// the call (`EagerTest.cpp:LINE:COL: error: 'op' op ...`).
//
//===----------------------------------------------------------------------===//
#include "kiln/Eager.h"

#include <gtest/gtest.h>

#include <functional>

namespace kiln {
namespace {

/// The kiln::Error that `fn` throws (fails the test when it throws none).
Error errorOf(const std::function<void()> &fn) {
  try {
    fn();
  } catch (const Error &e) {
    return e;
  }
  ADD_FAILURE() << "expected a kiln::Error";
  return Error("none thrown");
}

/// `EagerTest.cpp:<line>:` as located errors start.
std::string at(int line) {
  return "EagerTest.cpp:" + std::to_string(line) + ":";
}

TEST(Eager, ComputesReferenceResults) {
  Tensor a = tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = tensor({10, 20, 30}, {3});
  EXPECT_EQ(toVector(add(a, b)), (std::vector<double>{11, 22, 33, 14, 25, 36}));
  EXPECT_EQ(transpose(a, {.perm = {1, 0}}).shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(toVector(transpose(a, {.perm = {1, 0}})), (std::vector<double>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(item(reduce_sum(a)), 21.0);
  EXPECT_EQ(toIntVector(shape(a)), (std::vector<int64_t>{2, 3}));
  std::vector<Tensor> parts = split(a, {.axis = 1, .sizes = {1, 2}});
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(toVector(parts[1]), (std::vector<double>{2, 3, 5, 6}));
  EXPECT_EQ(toVector(concat({parts[1], parts[0]}, {.axis = 1})),
            (std::vector<double>{2, 3, 1, 5, 6, 4}));
}

TEST(Eager, RandomTensorsAreDeterministic) {
  EXPECT_TRUE(randn({4, 4}, 3).bitwiseEqual(randn({4, 4}, 3)));
  EXPECT_FALSE(randn({4, 4}, 3).bitwiseEqual(randn({4, 4}, 4)));
  Tensor u = uniform({1000}, -2.0, 3.0, 9);
  for (double v : toVector(u)) {
    EXPECT_GE(v, -2.0);
    EXPECT_LT(v, 3.0);
  }
  double mean = item(reduce_mean(randn({10000}, 1, DType::F64)));
  EXPECT_NEAR(mean, 0.0, 0.05);
}

TEST(Eager, ShapeMismatchIsLocatedAtTheCall) {
  Tensor a = zeros({2, 3}), b = zeros({4, 5});
  int line = __LINE__ + 1;
  Error e = errorOf([&] { (void)matmul(a, b); });
  EXPECT_NE(std::string(e.what()).find(at(line)), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("error: 'matmul' op contracting dims 3 and 4"),
            std::string::npos)
      << e.what();
  ASSERT_EQ(e.diagnostics().size(), 1u);
  EXPECT_EQ(e.diagnostics()[0].loc.line(), static_cast<unsigned>(line));
}

TEST(Eager, DTypeMismatchIsLocatedAtTheCall) {
  Tensor a = zeros({3}), b = zeros({3}, DType::I64);
  int line = __LINE__ + 1;
  Error e = errorOf([&] { (void)add(a, b); });
  EXPECT_NE(std::string(e.what()).find(at(line)), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("'add' op"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("i64"), std::string::npos) << e.what();
}

TEST(Eager, BroadcastMismatch) {
  Tensor a = zeros({2, 3}), b = zeros({4});
  int line = __LINE__ + 1;
  Error e = errorOf([&] { (void)mul(a, b); });
  EXPECT_NE(std::string(e.what()).find(at(line)), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("'mul' op"), std::string::npos) << e.what();
}

TEST(Eager, BadAndMissingAttributes) {
  Tensor a = zeros({2, 3});
  int line = __LINE__ + 1;
  Error missing = errorOf([&] { (void)reshape(a); });
  EXPECT_NE(std::string(missing.what()).find(at(line)), std::string::npos) << missing.what();
  EXPECT_NE(std::string(missing.what()).find("'reshape' op requires attribute 'shape'"),
            std::string::npos)
      << missing.what();

  line = __LINE__ + 1;
  Error perm = errorOf([&] { (void)transpose(a, {.perm = {0, 0}}); });
  EXPECT_NE(std::string(perm.what()).find(at(line)), std::string::npos) << perm.what();
  EXPECT_NE(std::string(perm.what()).find("'transpose' op"), std::string::npos) << perm.what();

  Error count = errorOf([&] { (void)split(a, {.axis = 1}); });
  EXPECT_NE(std::string(count.what()).find("needs num_outputs"), std::string::npos) << count.what();
  Error uneven = errorOf([&] { (void)split(a, {.axis = 1, .num_outputs = 2}); });
  EXPECT_NE(std::string(uneven.what()).find("'split' op"), std::string::npos) << uneven.what();
}

TEST(Eager, KernelErrorsAreLocated) {
  Tensor table = zeros({3, 2});
  Tensor indices = tensorOfInts({0, 7}, {2});
  int line = __LINE__ + 1;
  Error e = errorOf([&] { (void)gather(table, indices); });
  EXPECT_NE(std::string(e.what()).find(at(line)), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("'gather' op"), std::string::npos) << e.what();
}

TEST(Eager, NullTensorsAndHelpersReportErrors) {
  Tensor a = zeros({2});
  Error null = errorOf([&] { (void)add(a, Tensor()); });
  EXPECT_NE(std::string(null.what()).find("operand 1 is a null tensor"), std::string::npos)
      << null.what();
  int line = __LINE__ + 1;
  Error notScalar = errorOf([&] { (void)item(a); });
  EXPECT_NE(std::string(notScalar.what()).find(at(line)), std::string::npos) << notScalar.what();
  EXPECT_NE(std::string(notScalar.what()).find("exactly one element"), std::string::npos);
  Error count = errorOf([&] { (void)tensor({1, 2, 3}, {2, 2}); });
  EXPECT_NE(std::string(count.what()).find("needs 4 values, got 3"), std::string::npos)
      << count.what();
}

TEST(Eager, ErrorIsARuntimeError) {
  try {
    (void)matmul(zeros({2, 3}), zeros({2, 3}));
    FAIL() << "expected an exception";
  } catch (const std::runtime_error &e) {
    EXPECT_NE(std::string(e.what()).find("error: 'matmul' op"), std::string::npos);
  }
}

} // namespace
} // namespace kiln
