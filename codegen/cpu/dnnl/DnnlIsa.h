//===- DnnlIsa.h - Capping oneDNN's ISA to the --cpu target -----*- C++ -*-===//
//
// oneDNN picks its kernels by the CPU it runs on. For a named --cpu
// (codegen/cpu/CpuTarget.h) the compiler caps it with dnnl::set_max_cpu_isa
// at the highest oneDNN ISA that the target's features allow, so library
// calls run the code that machine would run:
//
//   amx-tile, avx512bf16          avx512_core_amx
//   avx512bf16                    avx512_core_bf16
//   avx512vnni                    avx512_core_vnni
//   avx512f, bw, vl, dq           avx512_core
//   avxvnni, avx2                 avx2_vnni
//   avx2                          avx2
//   avx                           avx
//   anything else (SSE2 .. SSE4.2) sse41: oneDNN's lowest JIT ISA, so on
//                                 this machine `--cpu x86-64` library calls
//                                 may use SSE4.1, which a bare SSE2 CPU
//                                 lacks (oneDNN itself falls back to its C++
//                                 kernels there)
//
// oneDNN takes the cap once per process, before its first primitive: a
// process compiles for one oneDNN ISA. A second compile for another cap, or
// a cap after oneDNN already ran uncapped, is an error naming both.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/cpu/CpuTarget.h"
#include "ir/Diagnostics.h"

#include <string>

namespace kiln::codegen::cpu {

/// The oneDNN ISA name for `target` ("avx2", ...; "all" for native).
std::string oneDnnIsaFor(const CpuTarget &target);

/// Caps oneDNN at oneDnnIsaFor(target) (nothing for native, unless an
/// earlier compile in this process capped it).
LogicalResult capOneDnnIsa(const CpuTarget &target, DiagnosticEngine &diag);

} // namespace kiln::codegen::cpu
