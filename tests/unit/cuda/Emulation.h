//===- Emulation.h - CUDA kernels run on the host, for tests ----*- C++ -*-===//
//
// Generated CUDA modules compiled with g++ against the host emulation of
// CUDA's built-ins (CudaHost.h), and a runtime::cuda::Device whose kernels
// are those: what the CUDA tests run where there is no GPU.
//
//   auto lib = EmulatedModule::compile(source, {"kernel_y"}, dir, error);
//   EmulatedDevice device(lib);   // a Device: memory is host memory
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/CudaProgram.h"
#include "runtime/cuda/CudaDriver.h"

#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace kiln::testing {

/// One module of kernels built for the emulation.
class EmulatedModule {
public:
  /// Compiles each of `sources` (modules of CUDA C from the CUDA backend)
  /// with g++, two at a time, into `dir`, with a launcher for each name of
  /// `functions[i]` (the kernels of `sources[i]`); null with `error` (g++'s
  /// messages) on failure.
  static std::shared_ptr<EmulatedModule>
  compile(const std::vector<std::string> &sources,
          const std::vector<std::vector<std::string>> &functions, const std::filesystem::path &dir,
          std::string &error);
  ~EmulatedModule();
  /// The launcher of kernel `name` (CudaHost.h, KILN_EMU_LAUNCHER), or null.
  void *launcher(const std::string &name) const;

private:
  std::vector<void *> libs_;
};

/// Signature of the launchers.
using EmulatedLaunch = void (*)(void **buffers, const long long *sizes, unsigned grid,
                                unsigned block, bool synchronizes);

/// A Device on the host: memory is malloc'd, modules are `module` whatever
/// image they are given, and a launch runs at most three blocks of 64
/// threads (the kernels' loops stride by the grid, so the values are the
/// same; a block of two warps still combines across warps).
class EmulatedDevice : public runtime::cuda::Device {
public:
  explicit EmulatedDevice(std::shared_ptr<EmulatedModule> module) : module_(std::move(module)) {}
  const std::string &name() const override { return name_; }
  /// Whatever the spec's: the emulation runs its module, not the image.
  int computeCapability() const override { return codegen::cuda::kDefaultCudaArch; }
  bool alloc(size_t bytes, runtime::cuda::DevicePtr &ptr, std::string &error) override;
  void free(runtime::cuda::DevicePtr ptr) override;
  bool copyToDevice(runtime::cuda::DevicePtr dst, const void *src, size_t bytes,
                    std::string &error) override;
  bool copyToHost(void *dst, runtime::cuda::DevicePtr src, size_t bytes,
                  std::string &error) override;
  std::unique_ptr<runtime::cuda::Module> loadModule(const std::string &image,
                                                    std::string &error) override;
  bool launch(void *fn, unsigned grid, unsigned block, const runtime::cuda::LaunchArgs &args,
              std::string &error) override;
  /// Products on the host, summed over k in f32 in order, as the
  /// GemmCall says (its row-major meaning, not cuBLASLt's layouts).
  std::unique_ptr<runtime::cuda::LibraryPlan> planGemm(const runtime::cuda::GemmCall &call,
                                                       std::string &error) override;
  bool gemm(const runtime::cuda::LibraryPlan &plan, runtime::cuda::DevicePtr a,
            runtime::cuda::DevicePtr b, runtime::cuda::DevicePtr c, runtime::cuda::DevicePtr bias,
            runtime::cuda::DevicePtr d, std::string &error) override;
  /// Convolutions and pools on the host, as the ConvCall and PoolCall say
  /// (f32 sums in order; max and relu propagate NaN).
  std::unique_ptr<runtime::cuda::LibraryPlan> planConv(const runtime::cuda::ConvCall &call,
                                                       std::string &error) override;
  bool conv(const runtime::cuda::LibraryPlan &plan, runtime::cuda::DevicePtr x,
            runtime::cuda::DevicePtr w, runtime::cuda::DevicePtr bias, runtime::cuda::DevicePtr z,
            runtime::cuda::DevicePtr y, std::string &error) override;
  std::unique_ptr<runtime::cuda::LibraryPlan> planPool(const runtime::cuda::PoolCall &call,
                                                       std::string &error) override;
  bool pool(const runtime::cuda::LibraryPlan &plan, runtime::cuda::DevicePtr x,
            runtime::cuda::DevicePtr y, std::string &error) override;
  bool synchronize(std::string &) override { return true; }
  /// Streams are names (one order: the host's); a graph records the
  /// launches and library calls issued while capturing, as calls to make
  /// again, and replays them.
  bool createStream(void *&stream, std::string &) override;
  void destroyStream(void *) override {}
  void setStream(void *) override {}
  bool beginCapture(std::string &error) override;
  bool endCapture(void *&graph, std::string &error) override;
  bool launchGraph(void *graph, std::string &error) override;
  void destroyGraph(void *graph) override;
  /// Graphs recorded and replayed so far (for the tests).
  int graphsRecorded = 0, graphsLaunched = 0;

private:
  /// While capturing: `call` recorded, true; else false (run it now).
  bool record(std::function<bool(std::string &)> call);
  std::unique_ptr<std::vector<std::function<bool(std::string &)>>> capturing_;
  int streams_ = 0;
  std::shared_ptr<EmulatedModule> module_;
  std::string name_ = "host emulation";
};

/// Inputs for `g` (static shapes), normal with deviation 2 from `seed`.
std::vector<Tensor> randomInputs(const Graph &g, unsigned seed);

/// A model compileCudaModel made, run on the emulated device: its kernels
/// built into `dir` (removed after), `inputs` in; false with `error`.
bool runEmulatedModel(const codegen::CudaCompiled &compiled, std::span<const Tensor> inputs,
                      std::vector<Tensor> &outputs, const std::filesystem::path &dir,
                      std::string &error);
/// The same for a model's `spec` and the CUDA C of its module (a loaded
/// CUDA artifact's, say).
bool runEmulatedSpec(const std::string &source, const runtime::cuda::CudaModelSpec &spec,
                     std::span<const Tensor> inputs, std::vector<Tensor> &outputs,
                     const std::filesystem::path &dir, std::string &error);

} // namespace kiln::testing
