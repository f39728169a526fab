//===- CudaProgram.h - A graph's kernels as one CUDA module -----*- C++ -*-===//
//
// The driver's half of the CUDA backend (part of kiln_compiler when the
// CUDA toolkit's NVRTC was found at configure time, KILN_HAS_CUDA): a
// graph's fusion groups (planned without library anchors) lowered to
// kernels, written as CUDA C (codegen/cuda/CudaEmitter.h) into one
// translation unit and compiled by NVRTC to PTX and CUBIN, and the model
// around them as a runtime::cuda::CudaModelSpec. No GPU is needed.
//
//   auto model = compileCudaModel(graph, options, 90, diag);
//   // model->program.source, .binary.ptx / .cubin; model->spec runs on a
//   // runtime::cuda::Device (runtime/cuda/CudaModel.h)
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/Backend.h"
#include "codegen/Compiler.h"
#include "codegen/cuda/CudaEmitter.h"
#include "codegen/cuda/Nvrtc.h"
#include "runtime/cuda/CudaArtifact.h"
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

/// A model compiled for a CUDA device: the module of its kernels and what
/// runtime::cuda::CudaModel runs (its buffers, steps and memory plan).
struct CudaCompiled {
  CudaProgram program;
  runtime::cuda::CudaModelSpec spec;
  GraphPorts ports;
  /// The nodes not run as kernels, and why: "'matmul' (y): cuBLASLt, f32
  /// 64x32x16"; with `kernelsOnly` also those left out, "'conv' (y): needs
  /// cuDNN, ...".
  std::vector<std::string> notKernels;
  /// Why the products are generated code, when they are ("'matmul' (y):
  /// an operand of rank 1"); empty when cuBLASLt runs them or there are
  /// none.
  std::string productsAsKernels;
  /// With `options.explain`: every fusion decision (FusionPlan::explain).
  std::string fusion;
};

/// `g` at `options.dims` for a CUDA device of compute capability `arch`:
/// matrix products through cuBLASLt (CudaLibrary.cpp; with
/// `options.useLibraries`, and when each of them maps onto one call, else
/// all decomposed into generated code, passes/DecomposeMatMul.cpp), every
/// other fusion group a kernel (convolution, pooling and the other library
/// ops are not run on the GPU yet: such a node is an error naming it), the
/// intermediates planned into one arena (codegen/MemoryPlan.h).
/// `kernelsOnly` (`kiln compile --emit=cuda`): the groups without a kernel
/// are left out and listed in `notKernels` instead of refused; the spec
/// does not run then.
/// The CUDA backend's library table: matmul and gemm anchor cuBLASLt calls,
/// conv and the pools cuDNN calls (CudaLibrary.cpp).
const LibraryCapabilities &cudaLibraryCapabilities();
/// The cuBLASLt call of the matmul or gemm `n` (static shapes), or nullopt
/// with `why`.
std::optional<runtime::cuda::GemmCall> cublasLtCall(const Node &n, std::string &why);
/// The cuDNN call of the conv or pool `n` (static shapes), followed by a
/// relu with `relu` (a conv's epilogue), or nullopt with `why`.
struct CudnnCall {
  enum class Kind : uint8_t { Conv, Pool } kind = Kind::Conv;
  runtime::cuda::ConvCall conv;
  runtime::cuda::PoolCall pool;
};
std::optional<CudnnCall> cudnnCall(const Node &n, bool relu, std::string &why);
/// Whether a library group of the CUDA backend takes `next` as its epilogue
/// after `chained` others (FusionOptions::acceptEpilogue).
bool cudaAcceptsEpilogue(const Node &anchor, const Node &next, size_t chained);
/// The residual `add` adds to the result of `anchor` (a matmul or gemm,
/// read as cuBLASLt's C with beta 1; a conv, cuDNN's z), or nullptr where
/// the call cannot take it.
const Value *residualOf(const Node &anchor, const Node &add);
/// Gives each conv and max_pool of `g` whose pads alone keep cuDNN from
/// running it an explicit pad of the excess (Note [Pads cuDNN does not
/// take] in CudaLibrary.cpp).
LogicalResult padForCudnn(Graph &g, DiagnosticEngine &diag);

FailureOr<CudaCompiled> compileCudaModel(const Graph &g, const CompileOptions &options, int arch,
                                         DiagnosticEngine &diag, bool kernelsOnly = false);

/// The CUDA artifact of `compiled` (compiled without `kernelsOnly`) from the
/// model file `modelPath`: what `kiln compile --target cuda -o` and
/// kiln::compileForCuda save (runtime::cuda::saveCudaArtifact).
runtime::cuda::CudaArtifact cudaArtifactOf(CudaCompiled &&compiled, const std::string &modelPath);

} // namespace kiln::codegen
