//===- CpuFeatures.h - Which CPU features compiled code may use -*- C++ -*-===//
//
// Header-only: the compiler refuses a --cpu whose instruction-set features
// this machine lacks (codegen/cpu/CpuTarget.cpp), and the artifact loader
// refuses code needing one (runtime/artifact/HostCpu.cpp); both ask this.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string_view>

namespace kiln::runtime {

/// Whether LLVM feature `f` ("avx2", "sse4.1", ...) adds instructions that
/// compiled code may contain (vector ISAs and the scalar extensions LLVM
/// selects on its own). Others (sgx, invpcid, rdrnd, xsave, ...) are system
/// or intrinsic-only features that virtual machines often hide; lacking
/// them does not stop the code.
inline bool isInstructionSetFeature(std::string_view f) {
  static constexpr std::string_view kPrefixes[] = {
      "sse",   "ssse3", "avx",  "fma",    "f16c", "bmi", "lzcnt",      "popcnt",
      "movbe", "amx",   "vaes", "gfni",   "aes",  "sha", "vpclmulqdq", "adx",
      "cx16",  "cmov",  "mmx",  "prfchw", "xop",  "tbm", "pclmul"};
  for (std::string_view p : kPrefixes)
    if (f.substr(0, p.size()) == p)
      return true;
  return false;
}

} // namespace kiln::runtime
