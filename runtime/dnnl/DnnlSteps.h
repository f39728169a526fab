//===- DnnlSteps.h - oneDNN steps of a compiled model ------------*- C++ -*-===//
//
// What a compiled model needs at run time to execute its oneDNN calls, apart
// from the compile-time code that builds them (codegen/cpu/dnnl/: anchors,
// epilogue-to-post-op mapping, candidate timing): the engine, one stream
// and one scratch buffer per calling thread, and the step classes. A step
// holds created primitives and the memory descriptors of its buffers; it
// depends on nothing of the IR, the passes or the compiler (this library
// links kiln_runtime and libdnnl only), so that an artifact loader can link
// it without them.
//
// Compiled with exceptions: every dnnl::error is caught in run() and turned
// into a failed runtime::Status.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Executable.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kiln::runtime::onednn {

using dims = dnnl::memory::dims;

/// The one CPU engine.
dnnl::engine &cpuEngine();
/// One stream per calling thread, created once: a step's run costs
/// microseconds, and creating a stream is a good part of that.
dnnl::stream &threadStream();
/// Scratch memory per calling thread, grown as needed and kept: steps of a
/// run execute one after the other on the thread that called run(), so
/// they can share it (oneDNN's own scratchpad is per primitive per call).
void *threadScratch(size_t bytes);

/// Sets the calling thread's OpenMP thread count while alive (0: leave it).
/// omp_set_num_threads sets the calling thread's ICV only: reentrant.
class ScopedThreads {
public:
  explicit ScopedThreads(int threads);
  ~ScopedThreads();
  ScopedThreads(const ScopedThreads &) = delete;
  ScopedThreads &operator=(const ScopedThreads &) = delete;

private:
  int saved_;
  bool set_;
};

/// The calling thread's OpenMP thread count (what a primitive created now
/// partitions its work for).
int currentThreads();

dims rowMajorStrides(const dims &d);
/// Dense row-major f32 of `d` (a scalar is [1]).
dnnl::memory::desc plainMd(dims d);
/// Channels-last f32 of `d` (N, C, spatial...) stored as N, spatial..., C:
/// "acdb" for 4-D. See Note [Channels-last buffers] in codegen/ExecutableBuilder.cpp.
dnnl::memory::desc channelsLastMd(const dims &d);
int64_t product(const dims &d);
/// Copies `src` (dims `from`, each 1 or equal to `to`'s) broadcast to the
/// dense row-major `to`.
void broadcastCopy(const float *src, const dims &from, const dims &to, float *dst);

/// Objects a step's finished runs leave for later runs (Note [Kept memory
/// objects] in DnnlSteps.cpp): take() one, or null when none is free; give()
/// it back after the run. Reentrant.
template <typename T> class KeptPool {
public:
  std::unique_ptr<T> take() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (items_.empty())
      return nullptr;
    std::unique_ptr<T> item = std::move(items_.back());
    items_.pop_back();
    return item;
  }
  void give(std::unique_ptr<T> item) {
    std::lock_guard<std::mutex> lock(mutex_);
    items_.push_back(std::move(item));
  }

private:
  std::mutex mutex_;
  std::vector<std::unique_ptr<T>> items_;
};

/// An activation or weight read from a runtime buffer on every run.
struct RuntimeArg {
  int arg;
  int buffer;
  dnnl::memory::desc userMd;
  /// When the primitive wants another layout: the reorder into it.
  std::optional<dnnl::reorder> toPrim;
  dnnl::memory::desc primMd;
  /// A binary operand whose broadcast the primitive does not support:
  /// expanded to `expandTo` (from `expandFrom`) before the call.
  bool expand = false;
  dims expandFrom, expandTo;
  /// A binary operand scaled before the call (gemm's beta * C for a C only
  /// known at run time): elements are multiplied by `scale` into a copy.
  float scale = 1.f;
};

/// A constant prepared at compile time (weights already reordered).
struct ConstArg {
  int arg;
  dnnl::memory mem;
};

/// One primitive (an anchor with its post-ops) with the reorders of its
/// buffers. Built by codegen/cpu/dnnl/OneDnnSteps.cpp.
class DnnlStep final : public runtime::ExternStep {
public:
  std::string name;
  dnnl::primitive prim;
  dnnl::memory::desc scratchMd;
  std::vector<RuntimeArg> runtimeArgs;
  std::vector<ConstArg> constArgs;
  /// What the constant memories point into (compile-time tensors).
  std::vector<std::shared_ptr<const void>> keepAlive;
  int outBuffer = 0;
  dnnl::memory::desc dstUserMd, dstPrimMd;
  /// Present when the primitive's dst layout is not plain.
  std::optional<dnnl::reorder> dstFromPrim;
  /// The residual of a sum post-op (-1: none), its layout, and its reorder
  /// into the primitive's dst when the layouts differ.
  int sumBuffer = -1;
  dnnl::memory::desc sumUserMd;
  std::optional<dnnl::reorder> sumToPrim;
  /// The OpenMP thread count the primitive was created under. oneDNN sizes
  /// its per-thread scratch at creation, so a run never uses more threads.
  int createdThreads = 1;

  std::string describe() const override { return name; }

  runtime::Status run(std::span<void *const> buffers,
                      const runtime::StepContext &ctx) const override;
  bool save(runtime::SavedStep &out, std::string &why) const override;
  uint64_t constantBytes() const override;

private:
  /// The memory objects of one run, kept for later runs: Note [Kept memory
  /// objects] in DnnlSteps.cpp.
  struct Binding;
  std::unique_ptr<Binding> takeBinding() const;
  mutable KeptPool<Binding> bindings_;

public:
  DnnlStep();
  ~DnnlStep() override;
};

/// A oneDNN reorder of buffer 0 (layout `from`) into buffer 1 (layout `to`).
class ReorderStep final : public runtime::ExternStep {
public:
  ReorderStep(std::string name, const dnnl::memory::desc &from, const dnnl::memory::desc &to);
  std::string describe() const override { return name_; }
  runtime::Status run(std::span<void *const> buffers, const runtime::StepContext &) const override;
  bool save(runtime::SavedStep &out, std::string &why) const override;

private:
  std::string name_;
  dnnl::memory::desc from_, to_;
  dnnl::reorder reorder_;
};

/// A concat along dim 1 of buffers 0..n-1 (layouts `srcs`) into buffer n
/// (layout `dst`), with oneDNN's concat. Throws dnnl::error when oneDNN
/// refuses.
class ConcatStep final : public runtime::ExternStep {
public:
  ConcatStep(std::string name, const std::vector<dnnl::memory::desc> &srcs,
             const dnnl::memory::desc &dst);
  std::string describe() const override { return name_; }
  runtime::Status run(std::span<void *const> buffers,
                      const runtime::StepContext &ctx) const override;
  bool save(runtime::SavedStep &out, std::string &why) const override;

private:
  std::string name_;
  std::vector<dnnl::memory::desc> srcs_;
  dnnl::memory::desc dst_;
  dnnl::primitive prim_;
  int createdThreads_;
};

/// Rebuilds a step that save() wrote (kind "onednn.primitive",
/// "onednn.reorder", "onednn.concat", in RecurrentStep.cpp "onednn.rnn", or in
/// AttentionStep.cpp "onednn.attention"), its constants read in
/// place from `blobs` (which `owner` keeps alive); `bufferBytes` are the sizes of the step's
/// buffers, which every descriptor it binds to them must fit. Null, with `why`, for another kind, a
/// corrupt payload, or a primitive oneDNN now builds with other layouts than the saved ones
/// (another CPU or oneDNN version): the saved weights would be read wrongly. DnnlSave.cpp.
std::shared_ptr<const runtime::ExternStep>
loadStep(const std::string &kind, std::string_view payload,
         std::span<const std::span<const uint8_t>> blobs, std::span<const size_t> bufferBytes,
         std::shared_ptr<const void> owner, std::string &why);

/// Caps oneDNN's ISA for this process at `isa` (a name of oneDNN's
/// cpu_isa: "avx2", "avx512_core", ...; "all" leaves it uncapped), for
/// `forWhat` (named in errors). oneDNN takes one cap per process, before
/// its first primitive: a second, different cap fails naming both.
runtime::Status capIsa(const std::string &isa, const std::string &forWhat);

/// "oneDNN 2.6.3 (cpu runtime OpenMP)".
std::string version();

} // namespace kiln::runtime::onednn
