//===- HostCpu.h - The instruction sets this CPU runs, without LLVM -*- C++ -*-===//
//
// What an artifact's loader checks its code against: CPUID (and XGETBV for
// the register state the OS enables) read into LLVM's feature names, for
// the instruction-set features compiled code can contain. A feature outside
// the table is not checked.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kiln::runtime {

/// The features of `required` (an LLVM feature string, "+avx2,+fma,-sse4a")
/// that are enabled there, that the table knows, and that this CPU lacks.
std::vector<std::string> missingCpuFeatures(std::string_view required);

} // namespace kiln::runtime
