//===- CudaProgram.h - A graph's kernels as one CUDA module -----*- C++ -*-===//
//
// The driver's half of the CUDA backend (part of kiln_compiler when the
// CUDA toolkit's NVRTC was found at configure time, KILN_HAS_CUDA): the
// kernels of a graph's kernel groups, lowered as for the CPU (the same
// fusion plan; library groups, conv and matmul, are not kernels), written
// as CUDA C (codegen/cuda/CudaEmitter.h) into one translation unit and
// compiled by NVRTC to PTX and CUBIN. No GPU is needed. compileCudaModel
// makes the whole model a runtime::cuda::CudaModelSpec.
//
//   auto prog = compileCudaProgram(graph, options, 90, diag);
//   // prog->source, prog->binary.ptx / .cubin, prog->kernels[i].grid
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/Compiler.h"
#include "codegen/cuda/CudaEmitter.h"
#include "codegen/cuda/Nvrtc.h"
#include "runtime/cuda/CudaModel.h"

namespace kiln::codegen {

struct CudaProgram {
  struct Entry {
    std::string name; ///< the __global__ function
    cuda::CudaForm form = cuda::CudaForm::Pointwise;
    int64_t numOuter = 0, inner = 0;
    /// Blocks of cuda::kCudaBlockThreads a launch uses.
    uint32_t grid = 0;
  };
  int arch = cuda::kDefaultCudaArch;
  /// Every kernel, after one include of the prelude.
  std::string source;
  cuda::CudaBinary binary;
  std::vector<Entry> kernels;
};

/// `g`'s kernels at `options.dims` as one CUDA module for compute
/// capability `arch`; errors (an unbound dim, a kernel the emitter or
/// NVRTC refuses, with NVRTC's log) are diagnostics.
FailureOr<CudaProgram> compileCudaProgram(const Graph &g, const CompileOptions &options, int arch,
                                          DiagnosticEngine &diag);

/// A model compiled for a CUDA device: the module of its kernels and what
/// runtime::cuda::CudaModel runs (its buffers, steps and memory plan).
struct CudaCompiled {
  CudaProgram program;
  runtime::cuda::CudaModelSpec spec;
  GraphPorts ports;
};

/// `g` at `options.dims` for a CUDA device of compute capability `arch`:
/// matrix products decomposed (passes/DecomposeMatMul.cpp), every fusion
/// group a kernel (convolution, pooling and the other library ops are not
/// run on the GPU yet: such a node is an error naming it), the
/// intermediates planned into one arena (codegen/MemoryPlan.h).
FailureOr<CudaCompiled> compileCudaModel(const Graph &g, const CompileOptions &options, int arch,
                                         DiagnosticEngine &diag);

} // namespace kiln::codegen
