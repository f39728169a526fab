//===- Executable.h - A compiled model: buffers and steps -------*- C++ -*-===//
//
// An Executable is what the compiler produces and the runtime runs: a list
// of buffers (graph inputs, outputs, constants, intermediates) and a list of
// steps in execution order, each reading and writing buffers by id:
//
//   - kernel steps call a generated KernelFn (runtime/KernelABI.h) over the
//     outer range [0, numOuter), split across OpenMP threads when the range
//     is large enough (a host-driven `#pragma omp parallel`, one contiguous
//     chunk per thread, `num_threads` set per region);
//   - extern steps call an ExternStep, an interface implemented outside the
//     runtime (oneDNN library calls, reference-kernel fallbacks).
//
// The Executable is immutable once built and run() is const and reentrant:
// every call allocates its own intermediates (one 64-byte aligned
// allocation per buffer for now; issue 5 replaces this with a pooled
// arena), so several threads may run one Executable at once.
//
// The runtime does not link LLVM nor include the compiler (ir/ only for the
// DType enum, which is header-only): a compiled model runs without them.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/DType.h"
#include "runtime/KernelABI.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace kiln::runtime {

/// Bytes per element of `t` (header-only: from ir/DTypes.def).
size_t elementSize(DType t);
/// "f32", "i64", ...
const char *elementTypeName(DType t);
/// `f32[2,3]`.
std::string typeString(DType t, const std::vector<int64_t> &shape);

/// A dense row-major host array: the runtime's tensor. `storage` keeps the
/// bytes alive (it may be shared with a kiln::Tensor, zero-copy); `data`
/// points at element 0.
struct HostTensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::shared_ptr<void> storage;
  void *data = nullptr;

  int64_t numElements() const;
  size_t byteSize() const { return static_cast<size_t>(numElements()) * elementSize(dtype); }
  /// A fresh zero-filled, 64-byte aligned tensor.
  static HostTensor allocate(DType dtype, std::vector<int64_t> shape);
};

/// Success, or an error message (lowercase, no final period) naming what
/// went wrong. The compiler turns it into a diagnostic.
struct Status {
  std::string error;
  bool ok() const { return error.empty(); }
  static Status success() { return {}; }
  static Status failure(std::string message) { return {std::move(message)}; }
};

/// What a step sees while running.
struct StepContext {
  /// Threads this run may use (>= 1).
  int threads = 1;
};

/// A step the runtime does not know how to run itself: a library call or a
/// reference kernel. Implementations must be reentrant (run() may be called
/// from several threads at once with different buffers); anything they
/// need per call (scratch memory) they allocate per call.
class ExternStep {
public:
  virtual ~ExternStep();
  /// What it runs, for profiles and errors ("onednn conv %c1").
  virtual std::string describe() const = 0;
  /// Runs on `buffers`, in the order the step was created with. OpenMP
  /// parallelism inside is allowed: the runtime never calls an extern step
  /// from inside its own parallel region (CPU-CODEGEN-NOTES Q2), and sets
  /// the calling thread's OpenMP thread count to ctx.threads around it.
  virtual Status run(std::span<void *const> buffers, const StepContext &ctx) const = 0;
};

/// Description of one buffer.
struct BufferDesc {
  enum class Kind : uint8_t { Input, Constant, Temp };
  Kind kind = Kind::Temp;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  /// For printing and errors: the graph value it holds (without `%`).
  std::string name;
  /// Input: the graph input number.
  int inputIndex = -1;
  /// Constant: its bytes (64-byte aligned; copied at addConstant if not).
  HostTensor constant;

  int64_t numElements() const;
  size_t byteSize() const { return static_cast<size_t>(numElements()) * elementSize(dtype); }
};

/// One step of the schedule.
struct Step {
  enum class Kind : uint8_t { Kernel, Extern };
  Kind kind = Kind::Kernel;
  /// For profiles: the kernel name or the extern step's description.
  std::string name;
  /// Buffer ids: a kernel's inputs then outputs; an extern step's operands.
  std::vector<int32_t> buffers;
  // Kernel steps:
  KernelFn fn = nullptr;
  int64_t numOuter = 0;
  /// Split [0, numOuter) across threads.
  bool parallel = true;
  /// Minimum outer points per thread; a range below 2 * grain runs serially.
  int64_t grain = 1;
  // Extern steps:
  std::shared_ptr<const ExternStep> externStep;
};

/// Options of a run.
struct RunOptions {
  /// Threads to use; 0 means the executable's default.
  int threads = 0;
  /// Measure each step's wall time into `stepSeconds`.
  bool profile = false;
};

/// Per-run measurements (filled when RunOptions::profile).
struct RunProfile {
  /// Seconds per step, in step order (accumulated over calls).
  std::vector<double> stepSeconds;
  int64_t runs = 0;
};

class Executable {
public:
  Executable() = default;
  Executable(const Executable &) = delete;
  Executable &operator=(const Executable &) = delete;

  //===------------------------------------------------------------------===//
  // Building (before the first run)
  //===------------------------------------------------------------------===//

  /// Adds graph input number inputIndex() (inputs must be added in order).
  int32_t addInput(DType dtype, std::vector<int64_t> shape, std::string name);
  /// Adds a constant; its bytes are shared (copied when not 64-byte aligned).
  int32_t addConstant(HostTensor value, std::string name);
  /// Adds an intermediate or output buffer, allocated per run.
  int32_t addTemp(DType dtype, std::vector<int64_t> shape, std::string name);
  /// Appends a step; its buffer ids must exist.
  void addKernelStep(std::string name, KernelFn fn, std::vector<int32_t> buffers, int64_t numOuter,
                     bool parallel = true, int64_t grain = 1);
  void addExternStep(std::shared_ptr<const ExternStep> step, std::vector<int32_t> buffers);
  /// The graph outputs, in order (any buffer kind; ids may repeat).
  void setOutputs(std::vector<int32_t> outputs) { outputs_ = std::move(outputs); }
  /// Default thread count of run() (0: OpenMP's default, omp_get_max_threads()).
  void setDefaultThreads(int threads) { defaultThreads_ = threads; }
  /// Keeps `owner` alive as long as the executable (the JIT session that
  /// owns the kernels' code, the graph the fallback steps read, ...).
  void keepAlive(std::shared_ptr<const void> owner) { owners_.push_back(std::move(owner)); }

  //===------------------------------------------------------------------===//
  // Running
  //===------------------------------------------------------------------===//

  /// Checks `inputs` (count, dtype, shape; each mismatch named with the
  /// expected and given types), runs every step, and returns the outputs in
  /// `outputs`. Outputs never alias inputs or constants (those are copied).
  /// Safe to call from several threads at once.
  Status run(std::span<const HostTensor> inputs, std::vector<HostTensor> &outputs,
             const RunOptions &options = {}, RunProfile *profile = nullptr) const;

  /// Checks `inputs` only (what run() checks first).
  Status checkInputs(std::span<const HostTensor> inputs) const;

  //===------------------------------------------------------------------===//
  // Introspection
  //===------------------------------------------------------------------===//

  const std::vector<BufferDesc> &buffers() const { return buffers_; }
  const std::vector<Step> &steps() const { return steps_; }
  const std::vector<int32_t> &outputs() const { return outputs_; }
  size_t numInputs() const { return numInputs_; }
  int defaultThreads() const { return defaultThreads_; }
  /// The thread count a run with `requested` threads uses (>= 1).
  int resolveThreads(int requested) const;
  /// Bytes of all Temp buffers (what one run allocates).
  size_t tempBytes() const;
  /// One line per step: kind, name, buffers (for `kiln compile` and tests).
  std::string describe() const;

private:
  Status runKernelStep(const Step &s, void *const *ptrs, int threads) const;

  /// First, so that it is destroyed last (after the steps that use it).
  std::vector<std::shared_ptr<const void>> owners_;

  std::vector<BufferDesc> buffers_;
  std::vector<Step> steps_;
  std::vector<int32_t> outputs_;
  std::vector<int32_t> inputIds_;
  size_t numInputs_ = 0;
  int defaultThreads_ = 0;
};

} // namespace kiln::runtime
