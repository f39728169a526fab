//===- OpMatrix.h - Helpers of the op matrix tests ---------------*- C++ -*-===//
//
// Shared by the op matrix (OpMatrixTest.cpp) and the library step matrix
// (LibraryStepMatrixTest.cpp), both run by kiln_op_matrix_tests at the CPU
// levels ctest names through $KILN_TEST_CPU.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/Compiler.h"
#include "ir/Builder.h"
#include "ir/Ops.h"

#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace kiln::testing {

/// $KILN_TEST_CPU, default native.
std::string testCpu();

/// Why $KILN_TEST_CPU cannot run on this machine (haswell without AVX2);
/// empty when it can. The tests skip, saying so.
std::string targetRefusal();

/// Compiles `g` for $KILN_TEST_CPU on one thread (the other options as
/// given, the compile cache off), runs it on `inputs` and checks that its
/// artifact gives the same bits; nullopt, with a failure naming `label`,
/// when the compile or the run fails.
std::optional<std::vector<Tensor>> compileAndRun(const Graph &g, const std::vector<Tensor> &inputs,
                                                 const std::string &label,
                                                 codegen::CompileOptions opts = {},
                                                 codegen::CompileReport *report = nullptr);

/// One (op, dtype, attributes) case of the op matrix: a graph with an
/// output per size and broadcast form, its inputs, and a label per output.
struct MatrixCase {
  std::unique_ptr<Graph> graph;
  std::vector<Tensor> inputs;
  std::vector<std::string> labels; ///< per output
};
/// The ops the generic matrix covers: every Elementwise and Reduction op
/// and the Normalization ops of at most two operands, from the op table.
std::vector<const OpInfo *> matrixOps();
/// The attribute settings the matrix runs `op` with.
std::vector<std::vector<NamedAttr>> attrVariants(const OpInfo &op);
/// The case of `op` on `t` at the matrix's sizes of the innermost dim, or
/// those of them in `onlySizes` when it is not empty; nullopt when the
/// op's type inference refuses `t`.
std::optional<MatrixCase> buildMatrixCase(const OpInfo &op, DType t,
                                          const std::vector<NamedAttr> &attrs, unsigned seed,
                                          const std::vector<int64_t> &onlySizes = {});
/// Operand `k` of `op` as the matrix draws it for `t`: negative, ±0,
/// subnormal, huge, NaN, ±inf for floats, extremes for integers (small
/// positive divisors and exponents where the reference kernel needs them);
/// a normalization's rows finite, a NaN in row 1 and an inf in row 2 of a
/// reduction's or normalization's input.
Tensor matrixOperand(const OpInfo &op, size_t k, DType t, const std::vector<int64_t> &shape,
                     std::mt19937 &rng);
/// Empty when `got` is within `op`'s bound of `want` as the matrix
/// compares (ulps of the op table, OpBounds.h), else the first element
/// outside it. `onePrimitive`: the op lowers to one primitive (no absolute
/// floor).
std::string compareWithBound(const OpInfo &op, const Tensor &got, const Tensor &want,
                             bool onePrimitive);
/// Empty when within a structured op's bound: exact for ulps 0, else 1e-4
/// of the output's magnitude (plus 1e-4 relative).
std::string compareStructured(const OpInfo &op, const Tensor &got, const Tensor &want);

} // namespace kiln::testing
