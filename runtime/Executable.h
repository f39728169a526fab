//===- Executable.h - A compiled model: buffers and steps -------*- C++ -*-===//
//
// An Executable is what the compiler produces and the runtime runs: a list
// of buffers (graph inputs, constants, intermediates and outputs) and a
// list of steps in execution order, each reading and writing buffers by id:
//
//   - kernel steps call a generated KernelFn (runtime/KernelABI.h) over the
//     outer range [0, numOuter), split across OpenMP threads when the range
//     is large enough (a host-driven `#pragma omp parallel`, one contiguous
//     chunk per thread, `num_threads` set per region);
//   - extern steps call an ExternStep, an interface implemented outside the
//     runtime (oneDNN library calls, reference-kernel fallbacks).
//
// Memory (Note [Arena]): intermediates live in one arena at offsets the
// compiler planned (codegen/MemoryPlan.h), graph outputs in one output block
// per call, constants in the Executable. finalize() fixes the layout and
// resolves every step's argument pointers into a table; after it the
// Executable is immutable, and run() is const and safe to call from many
// threads at once: each call takes a context (its arena and its resolved
// argument table) from a pool, patches the input and output pointers into
// it and gives it back, so steady-state calls allocate nothing but the
// output block, which is pooled too (it returns to the pool when the caller
// drops the last output tensor of that call).
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

/// An extern step written out (ExternStep::save). `blobs` point into memory
/// the step owns; they stay valid while it lives.
struct SavedStep {
  std::string kind;
  std::string payload;
  std::vector<std::span<const uint8_t>> blobs;
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
  /// For artifacts (runtime/artifact/): the step as a kind tag, a payload
  /// and blobs of bytes (constants it holds) from which the loader of that
  /// kind rebuilds the same step. False, with `why`, when the step cannot be
  /// saved (the default: a reference-kernel fallback needs the IR).
  virtual bool save(SavedStep &out, std::string &why) const;
  /// Bytes of constant data the step holds itself (a library's reordered
  /// weights), counted in Executable::constantBytes().
  virtual uint64_t constantBytes() const { return 0; }
};

/// Description of one buffer.
struct BufferDesc {
  enum class Kind : uint8_t { Input, Constant, Temp };
  /// Where a Temp lives once finalized: in the arena, or (a graph output) in
  /// the per-call output block.
  enum class Placement : uint8_t { None, Arena, OutputBlock };
  Kind kind = Kind::Temp;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  /// For printing and errors: the graph value it holds (without `%`).
  std::string name;
  /// Input: the graph input number.
  int inputIndex = -1;
  /// Constant: its bytes (64-byte aligned; copied at addConstant if not).
  HostTensor constant;
  /// Temps (and inputs or constants that are graph outputs, copied into the
  /// output block): where, after finalize().
  Placement placement = Placement::None;
  uint64_t offset = 0;

  int64_t numElements() const;
  size_t byteSize() const { return static_cast<size_t>(numElements()) * elementSize(dtype); }
};

/// One step of the schedule.
struct Step {
  enum class Kind : uint8_t { Kernel, Extern };
  Kind kind = Kind::Kernel;
  /// For profiles: the kernel name or the extern step's description.
  std::string name;
  /// Buffer ids: a kernel's inputs then outputs; an extern step's operands
  /// then results. The first `numReads` are only read, the rest written.
  std::vector<int32_t> buffers;
  int32_t numReads = 0;
  /// (written buffer, read buffer): the write takes over the read buffer's
  /// memory (same offset), which dies at this step. Only for steps compiled
  /// to allow it (a kernel reading each element of the input exactly where
  /// it writes the output, before writing it); checkMemory() checks the rest.
  std::vector<std::pair<int32_t, int32_t>> inPlace;
  // Kernel steps:
  KernelFn fn = nullptr;
  /// The machine code of `fn`, when the code generator kept it (what an
  /// artifact saves); null otherwise.
  std::shared_ptr<const KernelObject> object;
  int64_t numOuter = 0;
  /// Split [0, numOuter) across threads.
  bool parallel = true;
  /// Minimum outer points per thread; a range below 2 * grain runs serially.
  int64_t grain = 1;
  /// A kernel with run-time sizes (codegen/KernelIR.h): the values passed
  /// to it after its buffers. Empty for a static kernel.
  std::vector<int64_t> sizes;
  // Extern steps:
  std::shared_ptr<const ExternStep> externStep;
  /// Set by finalize(): the step's arguments in a context's table.
  uint32_t argBegin = 0;
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

/// The machine a compiled model's code is for (what an artifact records
/// and its loader checks).
struct TargetInfo {
  /// The --cpu the user asked for ("native", "haswell", ...).
  std::string requested;
  /// LLVM's CPU name and feature string ("+avx2,+fma,-avx512f,...").
  std::string cpu, features;
  /// The oneDNN ISA library steps were built under ("all": uncapped;
  /// empty: no library steps).
  std::string dnnlIsa;
};

/// First and last step accessing a buffer (inclusive; -1 when none does).
struct BufferLifetime {
  int32_t first = -1, last = -1;
};

class Executable {
public:
  Executable();
  ~Executable();
  Executable(const Executable &) = delete;
  Executable &operator=(const Executable &) = delete;

  //===------------------------------------------------------------------===//
  // Building (before finalize())
  //===------------------------------------------------------------------===//

  /// Adds graph input number inputIndex() (inputs must be added in order).
  int32_t addInput(DType dtype, std::vector<int64_t> shape, std::string name);
  /// Adds a constant; its bytes are shared (copied when not 64-byte aligned).
  int32_t addConstant(HostTensor value, std::string name);
  /// Adds an intermediate or output buffer.
  int32_t addTemp(DType dtype, std::vector<int64_t> shape, std::string name);
  /// Appends a kernel step; `buffers` are its `numReads` inputs then its
  /// outputs.
  /// Gives kernel step `step` (added with a null fn while its kernel was
  /// compiled with the others) its code.
  void setKernelCode(size_t step, KernelFn fn, std::shared_ptr<const KernelObject> object);
  /// Gives kernel step `step` the values of its kernel's run-time sizes.
  void setKernelSizes(size_t step, std::vector<int64_t> sizes) {
    steps_.at(step).sizes = std::move(sizes);
  }
  void addKernelStep(std::string name, KernelFn fn, std::vector<int32_t> buffers, int32_t numReads,
                     int64_t numOuter, bool parallel = true, int64_t grain = 1,
                     std::vector<std::pair<int32_t, int32_t>> inPlace = {},
                     std::shared_ptr<const KernelObject> object = nullptr);
  /// Appends an extern step; `buffers` are its `numReads` operands then its
  /// results.
  void addExternStep(std::shared_ptr<const ExternStep> step, std::vector<int32_t> buffers,
                     int32_t numReads);
  /// The graph outputs, in order (any buffer kind; ids may repeat).
  void setOutputs(std::vector<int32_t> outputs) { outputs_ = std::move(outputs); }
  /// Default thread count of run() (0: OpenMP's default, omp_get_max_threads()).
  void setDefaultThreads(int threads) { defaultThreads_ = threads; }
  void setTarget(TargetInfo target) { target_ = std::move(target); }
  /// Keeps `owner` alive as long as the executable (the JIT session that
  /// owns the kernels' code, the graph the fallback steps read, ...).
  void keepAlive(std::shared_ptr<const void> owner) { owners_.push_back(std::move(owner)); }

  /// Each buffer's lifetime over the steps (what a memory plan packs).
  std::vector<BufferLifetime> lifetimes() const;
  /// True for the Temps that live in the arena (the others are inputs,
  /// constants and graph outputs).
  bool isArenaBuffer(int32_t id) const;

  /// Fixes the memory layout: arena Temps at `offsets[id]` (indexed by
  /// buffer id; other entries ignored) in an arena of `arenaBytes`, graph
  /// outputs in the output block; then checks it (checkMemory()) and
  /// resolves the argument table. Fails, changing nothing, when the plan is
  /// wrong. Call once, after every step and setOutputs().
  Status finalize(uint64_t arenaBytes, const std::vector<uint64_t> &offsets);
  /// finalize() with every arena Temp in memory of its own (no sharing).
  Status finalize();
  bool finalized() const { return finalized_; }

  //===------------------------------------------------------------------===//
  // Running
  //===------------------------------------------------------------------===//

  /// Checks `inputs` (count, dtype, shape; each mismatch named with the
  /// expected and given types), runs every step, and returns the outputs in
  /// `outputs` (replacing what it held; a vector reused across calls lets
  /// the previous call's output block be reused). Outputs never alias inputs
  /// or constants (those are copied). Safe to call from several threads at
  /// once. Fails before finalize().
  Status run(std::span<const HostTensor> inputs, std::vector<HostTensor> &outputs,
             const RunOptions &options = {}, RunProfile *profile = nullptr) const;

  /// Checks `inputs` only (what run() checks first).
  Status checkInputs(std::span<const HostTensor> inputs) const;

  /// Proves the memory layout safe by walking the steps: every placed
  /// buffer is aligned and inside its region; no step reads a Temp before a
  /// step writes it or writes an input or a constant; and no buffer a step
  /// writes overlaps a buffer that is live at that step (written before
  /// and read at or after it, or written by the same step), except a
  /// declared in-place pair (same offset and size, the read buffer dying
  /// there). Independent of how the plan was made.
  Status checkMemory() const;

  //===------------------------------------------------------------------===//
  // Introspection
  //===------------------------------------------------------------------===//

  const std::vector<BufferDesc> &buffers() const { return buffers_; }
  const std::vector<Step> &steps() const { return steps_; }
  const std::vector<int32_t> &outputs() const { return outputs_; }
  size_t numInputs() const { return numInputs_; }
  /// Whether the inputs have exactly `shapes`, in input order.
  bool takesShapes(std::span<const std::vector<int64_t>> shapes) const;
  /// The inputs' shapes, in input order.
  std::vector<std::vector<int64_t>> inputShapes() const;
  int defaultThreads() const { return defaultThreads_; }
  const TargetInfo &target() const { return target_; }
  /// The thread count a run with `requested` threads uses (>= 1).
  int resolveThreads(int requested) const;
  /// Bytes of the arena one call uses (after finalize()).
  uint64_t arenaBytes() const { return arenaBytes_; }
  /// Bytes of one call's output block (after finalize()).
  uint64_t outputBlockBytes() const { return outputBytes_; }
  /// Bytes of all Temp buffers that are not graph outputs, each on its own.
  uint64_t tempBytes() const;
  /// Bytes of the constants: constant buffers and what extern steps hold.
  uint64_t constantBytes() const;
  /// Contexts (arenas) created so far: the most calls that ran at once.
  size_t pooledContexts() const;
  /// One line per step: kind, name, buffers (for `kiln compile` and tests).
  std::string describe() const;

private:
  struct Context;
  struct Pools;
  Status runSteps(Context &ctx, int threads, const RunOptions &options, RunProfile *profile) const;

  /// First, so that it is destroyed last (after the steps that use it).
  std::vector<std::shared_ptr<const void>> owners_;

  std::vector<BufferDesc> buffers_;
  std::vector<Step> steps_;
  std::vector<int32_t> outputs_;
  std::vector<int32_t> inputIds_;
  size_t numInputs_ = 0;
  int defaultThreads_ = 0;
  TargetInfo target_;

  // Set by finalize().
  bool finalized_ = false;
  uint64_t arenaBytes_ = 0, outputBytes_ = 0;
  /// The argument table with arena and constant pointers relative to null
  /// (arena buffers hold their offset; patched per context), and where
  /// inputs and output-block buffers go (patched per call).
  std::vector<uintptr_t> argTemplate_;
  std::vector<uint8_t> argKind_;
  /// Per step: whether it may ever run in parallel (numOuter >= 2 * grain).
  std::vector<uint8_t> mayParallel_;
  std::shared_ptr<Pools> pools_;
};

} // namespace kiln::runtime
