//===- Nvrtc.h - CUDA C to PTX and CUBIN with NVRTC -------------*- C++ -*-===//
//
// The CUDA backend's compiler: NVRTC (libnvrtc.so, linked directly; no
// CUDA driver is needed to compile), with the headers of cudaHeaders().
//
//   CudaBinary bin;
//   std::string error;
//   if (!compileWithNvrtc(source, "model.cu", 90, bin, error)) ...
//   // bin.ptx (for compute_90), bin.cubin (for sm_90), bin.log
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>

namespace kiln::codegen::cuda {

/// The compute capability ahead-of-time compiles target without a GPU
/// (the H100 and H200).
inline constexpr int kDefaultCudaArch = 90;

struct CudaBinary {
  std::string ptx;   ///< PTX text for compute_<arch>
  std::string cubin; ///< ELF for sm_<arch>
  std::string log;   ///< NVRTC's log (warnings), may be empty
};

/// NVRTC's version, "13.0".
std::string nvrtcVersionString();

/// Compiles one translation unit `source` (named `name` in messages) for
/// compute capability `arch`; false with `error` holding NVRTC's log.
bool compileWithNvrtc(const std::string &source, const std::string &name, int arch, CudaBinary &out,
                      std::string &error);

} // namespace kiln::codegen::cuda
