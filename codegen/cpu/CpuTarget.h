//===- CpuTarget.h - The x86-64 CPU that kernels are compiled for -*- C++ -*-===//
//
// `--cpu NAME` (CompileOptions::cpu): an LLVM x86-64 CPU name, or `native`
// (the default) for the machine compiling. A named CPU sets the features the
// JIT targets (those LLVM's X86 target parser gives the CPU, as clang's
// -march does) and, through codegen/cpu/dnnl/DnnlIsa.h, caps oneDNN's ISA the
// same way, so an AVX-512 machine runs the AVX2 or SSE code that users with
// older CPUs get:
//
//   native      the host's CPU and features (llvm::sys::getHostCPUFeatures)
//   x86-64-v4   AVX-512 (F, BW, CD, DQ, VL)
//   x86-64-v3   AVX2, FMA, BMI (= haswell's ISA)
//   haswell     AVX2, FMA
//   x86-64-v2   SSE4.2, POPCNT
//   x86-64      SSE2 (every x86-64 CPU)
//
// A CPU with an instruction-set feature this machine lacks (AVX-512 on an
// AVX2 machine) is refused, naming the missing features: its code would die
// with SIGILL. System features that VMs hide (sgx, invpcid, ...) do not
// count. An unknown name is an error that lists the valid ones, and so is a
// named CPU on a machine whose features cannot be read.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Diagnostics.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::codegen::cpu {

struct CpuTarget {
  /// What the user asked for ("native", "haswell", ...).
  std::string requested = "native";
  /// The LLVM CPU name (the host's for native).
  std::string cpu;
  /// The LLVM feature string the JIT targets: "+avx2,+fma,...".
  std::string features;
  bool native = true;

  /// Whether the target has every feature of `csv` ("avx2,fma").
  bool has(std::string_view csv) const {
    for (size_t pos = 0; pos <= csv.size();) {
      size_t comma = std::min(csv.find(',', pos), csv.size());
      std::string want = "+" + std::string(csv.substr(pos, comma - pos));
      bool found = false;
      for (size_t at = 0; !found && (at = features.find(want, at)) != std::string::npos;) {
        at += want.size();
        found = at == features.size() || features[at] == ',';
      }
      if (!found)
        return false;
      pos = comma + 1;
    }
    return true;
  }
};

/// Resolves `name` (`native` or an x86-64 CPU name). Errors: unknown name
/// (listing the valid ones), a CPU this machine cannot run.
FailureOr<CpuTarget> resolveCpuTarget(std::string_view name, DiagnosticEngine &diag);

/// `native` and every 64-bit CPU name LLVM 16 knows.
std::vector<std::string> validCpuNames();

} // namespace kiln::codegen::cpu
