//===- CudaDriver.h - The CUDA driver, opened on first use ------*- C++ -*-===//
//
// The runtime's GPU device (kiln_runtime_cuda): the CUDA driver API of
// libcuda.so.1, opened with dlopen when a GPU is first asked for, so that
// every Kiln binary builds, starts and runs its CPU path on a machine
// without a driver or a GPU, and asking for one there fails with one
// sentence saying which is missing. Includes nothing of CUDA.
//
//   std::string error;
//   auto gpu = CudaDevice::open(error);   // null, error: "no CUDA driver ..."
//   auto module = gpu->loadModule(cubin, error);
//   gpu->launch(module->function("kernel_y", error), grid, 256, {{in, out}}, error);
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::runtime::cuda {

/// Device memory (a CUdeviceptr), freed with its device.
using DevicePtr = uint64_t;

/// A loaded module of kernels.
class Module {
public:
  virtual ~Module() = default;
  /// The kernel `name` (an extern "C" __global__ function), or null.
  virtual void *function(const std::string &name, std::string &error) = 0;
};

/// What a launch passes: the kernel's buffers in parameter order, then its
/// run-time sizes (the struct `<name>_sizes`, by value), if it has any.
struct LaunchArgs {
  std::vector<DevicePtr> buffers;
  std::vector<int64_t> sizes;
  /// The kernel synchronizes its block (__syncthreads, shuffles): what an
  /// emulation of the device needs to know, not the device.
  bool synchronizes = false;
};

/// A matrix product the device's library runs (cuBLASLt on a GPU,
/// CublasLt.cpp): for each of `batch` products, over row-major matrices,
///
///   D[m x n] = alpha * op(A) @ op(B) + beta * C[m x n] + bias[n]
///
/// op(A) is A (stored m x k) or, with transA, A^T (stored k x m); the same
/// for B (k x n, or n x k with transB). Each operand's batch stride is in
/// elements (0: one matrix for every product). C and bias are optional.
/// All f32, computed in f32 (no TF32).
struct GemmCall {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool transA = false, transB = false;
  int64_t strideA = 0, strideB = 0, strideC = 0, strideD = 0;
  double alpha = 1, beta = 0;
  bool hasC = false, hasBias = false;
  /// "f32 [8] 128x64x256 (A^T) + bias" (batch, m x n x k): for errors and
  /// reports.
  std::string str() const;
};

/// A 2-D convolution cuDNN runs (Cudnn.cpp), NCHW row-major, f32 computed
/// in f32 (no TF32), cross-correlation as ONNX's Conv:
///
///   Y[n x k x outH x outW] = conv(X[n x c x h x w], W[k x c/group x r x s]) + bias[k]
///                            + Z[n x k x outH x outW]
///
/// with symmetric pads, Z (a residual) only with hasResidual, then max(Y,
/// 0) with relu (NaN stays NaN). A 1-D convolution is one with h = r = 1.
struct ConvCall {
  int64_t n = 0, c = 0, h = 0, w = 0, k = 0, r = 0, s = 0, outH = 0, outW = 0;
  int64_t padH = 0, padW = 0, strideH = 1, strideW = 1, dilationH = 1, dilationW = 1;
  int64_t group = 1;
  bool hasBias = false;
  bool relu = false;
  bool hasResidual = false;
  /// "1x3x224x224 * 64x3x7x7, stride 2, pad 3 + bias + residual, relu".
  std::string str() const;
};

/// A 2-D pooling cuDNN runs, NCHW: max (NaN propagates), or the average
/// over the taps inside the input (or inside the padded input with
/// countPad). Symmetric pads, floor rounding of the output size.
struct PoolCall {
  enum class Kind : uint8_t { Max, Average } kind = Kind::Max;
  bool countPad = false;
  int64_t n = 0, c = 0, h = 0, w = 0, r = 0, s = 0, outH = 0, outW = 0;
  int64_t padH = 0, padW = 0, strideH = 1, strideW = 1;
  /// "max 2x2 of 1x64x112x112, stride 2".
  std::string str() const;
};

/// A call prepared on a device (descriptors, the algorithm chosen).
class LibraryPlan {
public:
  virtual ~LibraryPlan() = default;
};

/// Where compiled CUDA models run (CudaModel.h): the GPU through the
/// driver (CudaDevice), or the tests' host emulation of one. Calls that
/// fail return false (or null) with `error` naming the call and why.
class Device {
public:
  virtual ~Device() = default;
  /// "NVIDIA H200".
  virtual const std::string &name() const = 0;
  /// The compute capability as 90.
  virtual int computeCapability() const = 0;
  virtual bool alloc(size_t bytes, DevicePtr &ptr, std::string &error) = 0;
  virtual void free(DevicePtr ptr) = 0;
  virtual bool copyToDevice(DevicePtr dst, const void *src, size_t bytes, std::string &error) = 0;
  virtual bool copyToHost(void *dst, DevicePtr src, size_t bytes, std::string &error) = 0;
  /// A CUBIN (or PTX, which the driver compiles) image.
  virtual std::unique_ptr<Module> loadModule(const std::string &image, std::string &error) = 0;
  /// `fn` on `grid` blocks of `block` threads. Asynchronous.
  virtual bool launch(void *fn, unsigned grid, unsigned block, const LaunchArgs &args,
                      std::string &error) = 0;
  /// `call` prepared once (a model's load), or null with `error`.
  virtual std::unique_ptr<LibraryPlan> planGemm(const GemmCall &call, std::string &error) = 0;
  /// The product `plan` was made for on these buffers (`c`, `bias` 0 when
  /// it has none). Asynchronous, ordered with the launches.
  virtual bool gemm(const LibraryPlan &plan, DevicePtr a, DevicePtr b, DevicePtr c, DevicePtr bias,
                    DevicePtr d, std::string &error) = 0;
  virtual std::unique_ptr<LibraryPlan> planConv(const ConvCall &call, std::string &error) = 0;
  /// `bias` and `z` (the residual) 0 when the call has none.
  virtual bool conv(const LibraryPlan &plan, DevicePtr x, DevicePtr w, DevicePtr bias, DevicePtr z,
                    DevicePtr y, std::string &error) = 0;
  virtual std::unique_ptr<LibraryPlan> planPool(const PoolCall &call, std::string &error) = 0;
  virtual bool pool(const LibraryPlan &plan, DevicePtr x, DevicePtr y, std::string &error) = 0;
  virtual bool synchronize(std::string &error) = 0;

  // Streams and graphs. What a Device issues (launches, library calls,
  // copies) goes on its current stream, the default one until setStream;
  // synchronize and the copies wait for that stream.
  /// A new stream (a run context's: CudaModel makes one).
  virtual bool createStream(void *&stream, std::string &error) = 0;
  virtual void destroyStream(void *stream) = 0;
  virtual void setStream(void *stream) = 0;
  /// From here to endCapture, what is issued on the current stream is
  /// recorded into a graph, not run; endCapture makes it replayable.
  virtual bool beginCapture(std::string &error) = 0;
  virtual bool endCapture(void *&graph, std::string &error) = 0;
  /// Runs a recorded graph on the current stream. Asynchronous.
  virtual bool launchGraph(void *graph, std::string &error) = 0;
  virtual void destroyGraph(void *graph) = 0;
};

/// The first GPU of the machine, its primary context current on the
/// threads that use it.
class CudaDevice final : public Device {
public:
  /// The device, or null with `error` saying why there is none: no driver
  /// library, a driver that does not start, no GPU.
  static std::unique_ptr<CudaDevice> open(std::string &error);
  ~CudaDevice() override;

  const std::string &name() const override { return name_; }
  int computeCapability() const override { return arch_; }

  bool alloc(size_t bytes, DevicePtr &ptr, std::string &error) override;
  void free(DevicePtr ptr) override;
  bool copyToDevice(DevicePtr dst, const void *src, size_t bytes, std::string &error) override;
  bool copyToHost(void *dst, DevicePtr src, size_t bytes, std::string &error) override;
  std::unique_ptr<Module> loadModule(const std::string &image, std::string &error) override;
  bool launch(void *fn, unsigned grid, unsigned block, const LaunchArgs &args,
              std::string &error) override;
  /// cuBLASLt (libcublasLt.so.13), opened on the first plan (CublasLt.cpp).
  std::unique_ptr<LibraryPlan> planGemm(const GemmCall &call, std::string &error) override;
  bool gemm(const LibraryPlan &plan, DevicePtr a, DevicePtr b, DevicePtr c, DevicePtr bias,
            DevicePtr d, std::string &error) override;
  /// cuDNN (libcudnn.so.9), opened on the first plan (Cudnn.cpp).
  std::unique_ptr<LibraryPlan> planConv(const ConvCall &call, std::string &error) override;
  bool conv(const LibraryPlan &plan, DevicePtr x, DevicePtr w, DevicePtr bias, DevicePtr z,
            DevicePtr y, std::string &error) override;
  std::unique_ptr<LibraryPlan> planPool(const PoolCall &call, std::string &error) override;
  bool pool(const LibraryPlan &plan, DevicePtr x, DevicePtr y, std::string &error) override;
  bool synchronize(std::string &error) override;
  /// Streams (cuStreamCreate, non-blocking) and CUDA graphs (stream
  /// capture, cuGraphInstantiate, cuGraphLaunch).
  bool createStream(void *&stream, std::string &error) override;
  void destroyStream(void *stream) override;
  void setStream(void *stream) override { stream_ = stream; }
  bool beginCapture(std::string &error) override;
  bool endCapture(void *&graph, std::string &error) override;
  bool launchGraph(void *graph, std::string &error) override;
  void destroyGraph(void *graph) override;
  /// The current stream (a CUstream; null: the default stream).
  void *stream() const { return stream_; }

  /// Makes the device's context current on the calling thread.
  bool makeCurrent(std::string &error);

private:
  CudaDevice() = default;
  int device_ = 0;
  void *context_ = nullptr;
  std::string name_;
  int arch_ = 0;
  void *stream_ = nullptr;
  /// cuBLASLt's handle and workspace, made on the first plan.
  struct Blas;
  std::shared_ptr<Blas> blas_;
  /// cuDNN's handle and workspace (grown to the largest plan's), made on
  /// the first plan.
  struct Dnn;
  std::shared_ptr<Dnn> dnn_;
};

} // namespace kiln::runtime::cuda
