//===- CudaArtifact.h - CUDA models saved to and loaded from disk -*- C++ -*-===//
//
// A CUDA artifact is a model compiled by the CUDA backend
// (codegen/CudaProgram.h) in one framed file (runtime/artifact/FileFormat.h,
// magic "KILNGPU\0"): its metadata (CudaArtifact in Artifact.proto: Kiln's
// and NVRTC's versions, the compute capability, buffers, steps, the arena)
// and, in the data part, the CUBIN, the PTX, the CUDA C it came from and
// the constants. It is written where there is no GPU (`kiln compile MODEL
// --target cuda -o OUT.kiln`) and run where there is one, by `kiln run` or
// by kiln-cuda-runner, which links neither the compiler nor oneDNN.
//
// Loading checks, before anything runs: the frame (magic, version, sizes,
// checksum), the Kiln version, every buffer's type, size and place (in the
// arena, or its constant's bytes in the file), and every step's buffers.
// Which image a GPU runs is CudaModel's choice (its CUBIN when the compute
// capability matches, else its PTX).
//
//   CudaArtifact a;
//   if (Status st = loadCudaArtifact(path, a); !st.ok()) ...
//   auto model = CudaModel::load(device, std::move(a.spec), error);
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/cuda/CudaModel.h"

#include <string>

namespace kiln::runtime::cuda {

struct CudaArtifact {
  /// What runs: `spec.image` is the CUBIN, `spec.ptx` the PTX.
  CudaModelSpec spec;
  /// The CUDA C the module was compiled from.
  std::string source;
  /// The model file it was compiled from (its file name).
  std::string model;
  std::string kilnVersion, nvrtcVersion;
  uint64_t fileBytes = 0;
};

/// Writes `a` to `path` through a temporary file renamed over it (a failed
/// save leaves what was there); false with `error`. The Kiln version
/// written is this one's, whatever `a.kilnVersion` says.
bool saveCudaArtifact(const CudaArtifact &a, const std::string &path, std::string &error);

/// Loads the CUDA artifact at `path` into `a`; false with `error`, which
/// names the file and what is wrong with it. Needs no GPU.
bool loadCudaArtifact(const std::string &path, CudaArtifact &a, std::string &error);

} // namespace kiln::runtime::cuda
