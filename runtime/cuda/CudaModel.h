//===- CudaModel.h - A compiled model on a CUDA device ----------*- C++ -*-===//
//
// What the CUDA backend compiles a model to (codegen/CudaProgram.h,
// compileCudaModel) and what runs it: one module of kernels, the buffers
// (inputs, outputs, constants, and the intermediates at their offsets in
// one arena, from the compiler's memory plan) and the steps in order.
// Loading uploads the constants and allocates the arena once; a run copies
// the inputs in, launches every step, and copies the outputs out. No
// compiler code; the device is a Device (CudaDriver.h).
//
// Note [CUDA graphs for a model's steps]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A model runs on a stream of its own (its run context), and its steps,
// kernels and library calls alike, are recorded once into a CUDA graph
// (stream capture) and replayed: one launch per run instead of one per
// step. A graph holds the buffers' addresses, so it is recorded again when
// they change (runOnDevice with other buffers). Where recording fails (a
// library call that cannot be captured), the model says why
// (graphNote) and issues its steps one by one from then on.
//
//   CudaModelSpec spec = ...;                  // from the compiler
//   auto model = CudaModel::load(device, std::move(spec), error);
//   model->run({x.data()}, {y.data()}, error); // host buffers, dense
//   model->runOnDevice({xd}, {yd}, error);     // device buffers: no copies
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/DType.h"
#include "runtime/cuda/CudaDriver.h"

#include <memory>
#include <span>
#include <string>
#include <vector>

namespace kiln::runtime::cuda {

struct CudaModelSpec {
  struct Buffer {
    enum class Role : uint8_t { Input, Output, Constant, Temp } role = Role::Temp;
    std::string name;
    DType dtype = DType::F32;
    std::vector<int64_t> shape;
    /// Input and Output: the graph's input or output number.
    int32_t index = -1;
    /// Temp, Input and Output: the offset in the arena.
    uint64_t offset = 0;
    /// Its size (dense, row-major).
    uint64_t bytes = 0;
    /// Constant: its bytes.
    std::string data;
  };
  struct Step {
    /// A kernel of the module, or a call of the device's libraries: a
    /// matrix product (cuBLASLt: Device::gemm), a convolution or a pool
    /// (cuDNN: Device::conv, Device::pool).
    enum class Kind : uint8_t { Kernel, Gemm, Conv, Pool } kind = Kind::Kernel;
    std::string function; ///< the kernel's name in the module; a call's node
    /// Buffer numbers: the kernel's inputs, then its outputs. A product's:
    /// A, B, C (gemm.hasC: its own, or a residual), bias (gemm.hasBias), D;
    /// a convolution's: X, W, bias (conv.hasBias), Z (conv.hasResidual), Y;
    /// a pool's: X, Y.
    std::vector<int32_t> buffers;
    unsigned grid = 0, block = 256;
    bool synchronizes = false;
    std::vector<int64_t> sizes;
    GemmCall gemm; ///< Kind::Gemm
    ConvCall conv; ///< Kind::Conv
    PoolCall pool; ///< Kind::Pool
  };
  /// The module: a CUBIN for compute capability `arch`, and its PTX (which
  /// the driver compiles for a GPU of a later one); either may be empty.
  std::string image, ptx;
  int arch = 0;
  std::vector<Buffer> buffers;
  std::vector<Step> steps;
  uint64_t arenaBytes = 0;
  int32_t numInputs = 0, numOutputs = 0;
  /// Its input (or output) buffers by input (output) number.
  std::vector<const Buffer *> ports(Buffer::Role role) const;
};

class CudaModel {
public:
  /// Loads `spec` on `device` (module, functions, constants, arena); null
  /// with `error` saying what failed. The module is the CUBIN when the
  /// device's compute capability is the spec's, else the PTX (when it is
  /// later); an earlier GPU is an error naming both.
  static std::unique_ptr<CudaModel> load(Device &device, CudaModelSpec spec, std::string &error);
  ~CudaModel();

  const CudaModelSpec &spec() const { return spec_; }
  /// Runs on dense host buffers of the spec's input and output types
  /// (input / output number i); false with `error` naming the failing step.
  bool run(std::span<const void *const> inputs, std::span<void *const> outputs, std::string &error);
  /// Runs on the caller's device buffers (input / output number i, dense,
  /// of the spec's types, 16-byte aligned as cudaMalloc's are), which the
  /// steps read and write in place of the arena's: no copies. The inputs
  /// must be written when it is called (the model's stream does not wait
  /// for other streams); it returns once the outputs are written.
  bool runOnDevice(std::span<const DevicePtr> inputs, std::span<const DevicePtr> outputs,
                   std::string &error);
  /// The image load chose: "CUBIN for sm_90" or "PTX for sm_90".
  const std::string &imageUsed() const { return imageUsed_; }
  /// Whether runs record and replay CUDA graphs (default on; Note [CUDA
  /// graphs for a model's steps]).
  void useGraphs(bool on);
  /// "a CUDA graph of 12 steps", or why the steps run one by one.
  std::string graphNote() const;

private:
  CudaModel(Device &device, CudaModelSpec spec) : device_(device), spec_(std::move(spec)) {}
  bool checkPorts(size_t inputs, size_t outputs, std::string &error) const;
  /// Issues every step with `launches` on the current stream; false naming
  /// the step.
  bool issueAll(const std::vector<LaunchArgs> &launches, std::string &error);
  /// Every step's arguments for buffers at `addresses`.
  std::vector<LaunchArgs> launchesFor(const std::vector<DevicePtr> &addresses) const;
  /// Runs every step (buffers at `addresses`), through the graph when
  /// graphs are on (a replay, when it was recorded for `addresses`), and
  /// waits for them.
  bool execute(const std::vector<DevicePtr> &addresses, std::string &error);
  Device &device_;
  CudaModelSpec spec_;
  std::unique_ptr<Module> module_;
  std::vector<void *> functions_;
  /// Per step: what it is launched with.
  std::vector<LaunchArgs> launches_;
  /// Per step: a library call's plan, else null.
  std::vector<std::unique_ptr<LibraryPlan>> plans_;
  /// Per buffer: its device address.
  std::vector<DevicePtr> address_;
  std::vector<DevicePtr> owned_;
  std::string imageUsed_;
  void *stream_ = nullptr;
  bool graphs_ = true;
  void *graph_ = nullptr;
  /// The addresses graph_ was recorded with.
  std::vector<DevicePtr> graphAddresses_;
  std::string graphFailure_;
};

} // namespace kiln::runtime::cuda
