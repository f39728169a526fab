//===- OpMatrix.h - Helpers of the op matrix tests ---------------*- C++ -*-===//
//
// Shared by the op matrix (OpMatrixTest.cpp) and the library step matrix
// (LibraryStepMatrixTest.cpp), both run by kiln_op_matrix_tests at the CPU
// levels ctest names through $KILN_TEST_CPU.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/Compiler.h"
#include "ir/Ops.h"

#include <optional>
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

/// Empty when within a structured op's bound: exact for ulps 0, else 1e-4
/// of the output's magnitude (plus 1e-4 relative).
std::string compareStructured(const OpInfo &op, const Tensor &got, const Tensor &want);

} // namespace kiln::testing
