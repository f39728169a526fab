//===- Cuda.h - Run models compiled for a GPU from C++ ----------*- C++ -*-===//
//
// The runtime's GPU API: an application runs a CUDA artifact (`kiln compile
// MODEL --target cuda -o model.kiln`, written on any machine with the CUDA
// toolkit) on the machine's first GPU. Part of `kiln::runtime`
// (libkiln_runtime.so) when Kiln was built with the CUDA toolkit; the CUDA
// driver, cuBLASLt and cuDNN are opened when a model is loaded, so the
// library starts where they are missing.
//
//   kiln::CudaModel model = kiln::CudaModel::load("resnet18.kiln");
//   std::vector<kiln::Tensor> out = model.run({input});   // host tensors
//   model.runOnDevice({x_dev}, {y_dev});                   // device memory: no copies
//
// Every failure (no GPU or driver, a damaged or foreign file, a GPU older
// than the artifact's, inputs of the wrong count, dtype or shape) throws
// kiln::Error naming it. A CudaModel runs on a stream of its own, its steps
// replayed as one CUDA graph; one run at a time (runs from several threads
// wait for each other).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Tensor.h" // kiln::Tensor
#include "kiln/Error.h"
#include "kiln/Executable.h" // kiln::PortInfo

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln {

class CudaModel {
public:
  /// Loads the CUDA artifact at `path` on the machine's first GPU (its
  /// CUBIN, or its PTX on a later GPU than the artifact's).
  static CudaModel load(const std::string &path);

  /// Runs on host tensors (in input order): inputs copied to the GPU,
  /// outputs copied back. Returns when done.
  std::vector<Tensor> run(const std::vector<Tensor> &inputs);
  /// Runs on the caller's device memory (CUdeviceptr values, in input and
  /// output order; dense, of the ports' dtypes and shapes, 16-byte
  /// aligned): no copies. The inputs must be written when it is called
  /// (synchronize the stream that wrote them: the model's own stream does
  /// not wait for others). Returns when the outputs are written.
  void runOnDevice(const std::vector<uint64_t> &inputs, const std::vector<uint64_t> &outputs);

  std::vector<PortInfo> inputs() const;
  std::vector<PortInfo> outputs() const;
  /// "NVIDIA H200, CUBIN for sm_90, a CUDA graph of 41 steps".
  std::string summary() const;

  CudaModel(CudaModel &&) noexcept;
  CudaModel &operator=(CudaModel &&) noexcept;
  ~CudaModel();

private:
  CudaModel();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace kiln
