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
  virtual bool synchronize(std::string &error) = 0;
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
  bool synchronize(std::string &error) override;

  /// Makes the device's context current on the calling thread.
  bool makeCurrent(std::string &error);

private:
  CudaDevice() = default;
  int device_ = 0;
  void *context_ = nullptr;
  std::string name_;
  int arch_ = 0;
};

} // namespace kiln::runtime::cuda
