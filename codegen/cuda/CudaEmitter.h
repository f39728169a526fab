//===- CudaEmitter.h - Kernel IR to CUDA C ----------------------*- C++ -*-===//
//
// The CUDA backend's code generator (docs/DESIGN.md, Codegen): a
// codegen::Kernel becomes one `extern "C" __global__` function in CUDA C,
// from the same kernel IR and the same scalar semantics as the LLVM
// backend (one hook per primitive of ir/ScalarOps.def in EmitScalar.cpp of
// this folder). NVRTC compiles it (Nvrtc.h). Includes nothing of CUDA.
//
//   auto k = emitCudaKernel(kernel, "kernel_y", error);
//   // k->source: `#include "kiln/Prelude.cuh"` and the kernel;
//   // launch k->name with cudaGridBlocks(k->form, numOuter, inner) blocks
//   // of kCudaBlockThreads threads, parameters k->params.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/KernelIR.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kiln::codegen::cuda {

/// How a kernel's points are spread over threads (Note [CUDA kernel forms]
/// in CudaEmitter.cpp).
enum class CudaForm : uint8_t {
  Pointwise,    ///< no reduction: one point per thread, grid-stride
  ThreadPerRow, ///< reductions over short rows: a thread runs a row's stages
  WarpPerRow,   ///< a warp per row, shuffles combine the lanes
  BlockPerRow,  ///< a block per row, shuffles and shared memory
};
const char *cudaFormName(CudaForm f);
/// Whether kernels of form `f` synchronize their threads (barriers,
/// shuffles): all of a block's threads must reach them.
inline bool cudaFormSynchronizes(CudaForm f) {
  return f == CudaForm::WarpPerRow || f == CudaForm::BlockPerRow;
}

/// Threads per block of every launch (the kernels' __launch_bounds__).
inline constexpr int kCudaBlockThreads = 256;

struct CudaKernel {
  /// The `extern "C" __global__` function.
  std::string name;
  /// The translation unit NVRTC compiles: the prelude's include, the
  /// narrow-float helpers it uses, then the kernel.
  std::string source;
  CudaForm form = CudaForm::Pointwise;
  /// Consecutive points of a row each thread takes: 4 in the vectorized
  /// pointwise form (Note [Vectorized pointwise kernels]), else 1.
  int pointsPerThread = 1;
  /// Parameter types in order: a pointer per input, then per output, then
  /// (with run-time sizes) the struct of sizes `<name>_sizes`, by value.
  std::vector<std::string> params;
};

/// The CUDA C of `k` as function `symbol` (a C identifier); nullopt with
/// `error` saying why (a kernel that does not verify).
std::optional<CudaKernel> emitCudaKernel(const Kernel &k, const std::string &symbol,
                                         std::string &error);

/// Blocks of kCudaBlockThreads a launch of form `form` over `numOuter` rows
/// of `inner` points needs (0: nothing to run). Loops stride by the grid,
/// so any count from 1 computes the same values.
uint32_t cudaGridBlocks(CudaForm form, int64_t numOuter, int64_t inner);

/// The headers a kernel includes, as (include name, text): the prelude
/// (codegen/cuda/Prelude.cuh) and the parts of ir/ it calls, and a
/// <cstdint> for NVRTC, which has none.
const std::vector<std::pair<std::string, std::string>> &cudaHeaders();

} // namespace kiln::codegen::cuda
