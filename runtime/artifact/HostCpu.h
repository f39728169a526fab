//===- HostCpu.h - The instruction sets this CPU runs, without LLVM -*- C++ -*-===//
//
// What an artifact's loader checks its code against: CPUID (and XGETBV for
// the register state the OS enables) read into LLVM's feature names, for
// the instruction-set features compiled code can contain
// (runtime/CpuFeatures.h). An instruction-set feature the table does not
// know counts as missing; other features (system ones) are not checked.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kiln::runtime {

/// The instruction-set features enabled in `required` (an LLVM feature
/// string, "+avx2,+fma,-sse4a") that this CPU lacks or that cannot be
/// checked.
std::vector<std::string> missingCpuFeatures(std::string_view required);

} // namespace kiln::runtime
