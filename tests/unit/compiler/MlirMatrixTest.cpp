//===- MlirMatrixTest.cpp - The op matrix through MLIR's lowering ---------===//
//
// Every case of the op matrix (OpMatrix.h: each Elementwise, Reduction and
// Normalization op of the op table, over every dtype it takes, broadcast
// forms, special values: negative, ±0, subnormal, huge, NaN, ±inf, integer
// extremes) exported to MLIR (codegen/mlir), lowered by MLIR's own
// pipeline and run by its ExecutionEngine (Note [The MLIR CPU path] in
// codegen/mlir/MlirRun.cpp), each output within the op's bound of the
// reference interpreter's. This checks the export's semantics (one
// arith/math hook per scalar primitive, the reductions' and
// normalizations' forms) and the second CPU path at once. An op MLIR has
// no form for (a call of @kiln.<op>) is a skip naming it; cases on the
// storage dtypes are not run (LLVM 16 has no 8-bit float type, and stores
// an i4 with unspecified high bits where Kiln's buffers hold a byte), which
// the test prints. ctest runs it as
// `mlir-matrix`.
//
//===----------------------------------------------------------------------===//
#include "../OpBounds.h"
#include "OpMatrix.h"
#include "codegen/mlir/MlirExport.h"
#include "ir/Interpreter.h"

#include <gtest/gtest.h>

using namespace kiln;
using namespace kiln::testing;

namespace {

/// The innermost sizes: one element, an odd count, past a vector's width.
const std::vector<int64_t> kSizes = {1, 7, 33};

class MlirMatrixTest : public ::testing::TestWithParam<const OpInfo *> {};

TEST_P(MlirMatrixTest, MlirLoweringEqualsTheInterpreter) {
  const OpInfo &op = *GetParam();
  unsigned seed = 1;
  int cases = 0, failures = 0;
  std::vector<std::string> notRun;
  for (const std::vector<NamedAttr> &attrs : attrVariants(op)) {
    for (unsigned ti = 0; ti < kNumDTypes; ++ti) {
      const DType t = static_cast<DType>(ti);
      auto built = buildMatrixCase(op, t, attrs, seed++, kSizes);
      if (!built)
        continue;
      std::string label = std::string(op.mnemonic) + " " + std::string(dtypeName(t));
      for (const NamedAttr &a : attrs)
        label += " " + a.first;
      const Node *first = built->graph->outputs()[0]->definingNode();
      std::vector<DType> operandTypes;
      for (const Value *v : first->operands())
        operandTypes.push_back(v->type().dtype);
      const bool onePrimitive =
          op.hasTrait(Elementwise) &&
          lowersToOnePrimitive(op, first->attrs(), operandTypes, first->result()->type().dtype);
      DiagnosticEngine diag;
      ScopedDiagnosticCollector collect(diag);
      auto program = mlirgen::MlirProgram::compile(*built->graph, diag);
      if (failed(program) && collect.str().find("MLIR has no form for") != std::string::npos)
        GTEST_SKIP() << collect.str(); // reason: the op is a call of @kiln.<op>
      if (failed(program) && collect.str().find("cannot lower") != std::string::npos) {
        notRun.push_back(label); // reason: a storage dtype LLVM 16 cannot lower
        continue;
      }
      ASSERT_TRUE(program.succeeded()) << label << ": " << collect.str();
      auto got = (*program)->run(built->inputs, diag);
      ASSERT_TRUE(got.succeeded()) << label << ": " << collect.str();
      auto want = interpret(*built->graph, built->inputs, diag);
      ASSERT_TRUE(want.succeeded()) << label << ": " << collect.str();
      ASSERT_EQ(got->size(), want->size());
      for (size_t o = 0; o < got->size(); ++o) {
        ASSERT_EQ((*got)[o].type(), (*want)[o].type()) << label << ", " << built->labels[o];
        const std::string bad = compareWithBound(op, (*got)[o], (*want)[o], onePrimitive);
        if (!bad.empty() && failures++ < 6)
          ADD_FAILURE() << label << ", " << built->labels[o] << ": " << bad;
      }
      ++cases;
    }
  }
  EXPECT_GT(cases, 0) << "no case for '" << op.mnemonic << "'";
  if (!notRun.empty()) // said, not silent: the storage dtypes' cases
    std::printf("note: %zu cases on storage dtypes not run (no LLVM 16 form), e.g. %s\n",
                notRun.size(), notRun.front().c_str());
}

INSTANTIATE_TEST_SUITE_P(Ops, MlirMatrixTest, ::testing::ValuesIn(matrixOps()),
                         [](const ::testing::TestParamInfo<const OpInfo *> &info) {
                           return std::string(info.param->mnemonic);
                         });

} // namespace
