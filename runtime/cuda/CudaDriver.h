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
//   gpu->launch(module->function("kernel_y", error), grid, 256, args, error);
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace kiln::runtime::cuda {

/// Device memory (a CUdeviceptr), freed with its device.
using DevicePtr = uint64_t;

class CudaModule;

/// The first GPU of the machine, its primary context current on the
/// threads that use it. Calls that fail return false (or null) with
/// `error` naming the call and the driver's message.
class CudaDevice {
public:
  /// The device, or null with `error` saying why there is none: no driver
  /// library, a driver that does not start, no GPU.
  static std::unique_ptr<CudaDevice> open(std::string &error);
  ~CudaDevice();

  /// "NVIDIA H200", and the compute capability as 90.
  const std::string &name() const { return name_; }
  int computeCapability() const { return arch_; }

  bool alloc(size_t bytes, DevicePtr &ptr, std::string &error);
  void free(DevicePtr ptr);
  bool copyToDevice(DevicePtr dst, const void *src, size_t bytes, std::string &error);
  bool copyToHost(void *dst, DevicePtr src, size_t bytes, std::string &error);

  /// A CUBIN (or PTX, which the driver compiles) image.
  std::unique_ptr<CudaModule> loadModule(const std::string &image, std::string &error);
  /// `fn` on `grid` blocks of `block` threads; `args` points at each
  /// parameter's value (cuLaunchKernel's kernelParams). Asynchronous.
  bool launch(void *fn, unsigned grid, unsigned block, void **args, std::string &error);
  bool synchronize(std::string &error);

private:
  CudaDevice() = default;
  friend class CudaModule;
  bool makeCurrent(std::string &error);
  int device_ = 0;
  void *context_ = nullptr;
  std::string name_;
  int arch_ = 0;
};

class CudaModule {
public:
  ~CudaModule();
  /// The kernel `name` (an extern "C" __global__ function), or null.
  void *function(const std::string &name, std::string &error);

private:
  friend class CudaDevice;
  CudaModule(CudaDevice &device, void *module) : device_(device), module_(module) {}
  CudaDevice &device_;
  void *module_;
};

} // namespace kiln::runtime::cuda
