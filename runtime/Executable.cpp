//===- Executable.cpp - Running compiled steps ------------------*- C++ -*-===//
//
// Note [Threads]
// Everything parallel runs on libgomp, the OpenMP runtime Debian's oneDNN
// uses, so kernels and library calls share one pool of threads
// (CPU-CODEGEN-NOTES Q2). Kernel steps open a host-driven
// `#pragma omp parallel num_threads(n)` region and give each thread one
// contiguous chunk of the outer range; ranges below two grains run serially
// on the calling thread. Extern steps are called outside any region of ours
// (a oneDNN call nested in a region runs single-threaded) with the calling
// thread's nthreads-var ICV set to the run's thread count and restored
// afterwards. In libgomp omp_set_num_threads() changes the ICV of the
// calling thread's data environment only, so concurrent runs with different
// thread counts do not disturb each other.
//
// Note [Arena]
// finalize() turns the plan into an argument table: one pointer per
// (step, buffer) slot, steps' slots contiguous from Step::argBegin. A
// context owns an arena and a copy of the table with the arena and constant
// pointers resolved; per call only the slots of inputs and output-block
// buffers are patched (a short list), so a step costs a load of its
// argument base and a direct call of its KernelFn (or one virtual call for
// an extern step): no lookups, no allocation. Contexts are pooled: a call
// takes one under a mutex (uncontended: tens of nanoseconds, once per
// call) and returns it; the pool grows to the most calls that ever ran at
// once. The output block of a call is handed out inside the output
// tensors' shared storage; when the caller drops the last of them it goes
// back to the pool (or is freed, if the Executable is gone).
//
//===----------------------------------------------------------------------===//
#include "runtime/Executable.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <set>

namespace kiln::runtime {

namespace {

constexpr size_t kAlignment = 64;

std::shared_ptr<void> alignedAlloc(size_t bytes, bool zero) {
  size_t rounded = (std::max<size_t>(bytes, 1) + kAlignment - 1) / kAlignment * kAlignment;
  void *p = std::aligned_alloc(kAlignment, rounded);
  if (!p)
    return nullptr;
  if (zero)
    std::memset(p, 0, rounded);
  return std::shared_ptr<void>(p, [](void *q) { std::free(q); });
}

uint64_t roundUp(uint64_t bytes) {
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

bool isAligned(const void *p) {
  return reinterpret_cast<uintptr_t>(p) % kAlignment == 0;
}

int64_t product(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// Sets the calling thread's OpenMP thread count for its lifetime. See
/// Note [Threads].
class ScopedOmpThreads {
public:
  explicit ScopedOmpThreads(int threads) : saved_(omp_get_max_threads()) {
    if (threads != saved_)
      omp_set_num_threads(threads);
  }
  ~ScopedOmpThreads() {
    if (omp_get_max_threads() != saved_)
      omp_set_num_threads(saved_);
  }
  ScopedOmpThreads(const ScopedOmpThreads &) = delete;
  ScopedOmpThreads &operator=(const ScopedOmpThreads &) = delete;

private:
  int saved_;
};

} // namespace

size_t elementSize(DType t) {
  switch (t) {
#define DTYPE(E, N, B, W, F, S, K, C)                                                              \
  case DType::E:                                                                                   \
    return B;
#include "ir/DTypes.def"
  }
  return 1;
}

const char *elementTypeName(DType t) {
  switch (t) {
#define DTYPE(E, N, B, W, F, S, K, C)                                                              \
  case DType::E:                                                                                   \
    return N;
#include "ir/DTypes.def"
  }
  return "?";
}

std::string typeString(DType t, const std::vector<int64_t> &shape) {
  std::string s = elementTypeName(t);
  s += '[';
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + std::to_string(shape[i]);
  return s + ']';
}

int64_t HostTensor::numElements() const {
  return product(shape);
}

HostTensor HostTensor::allocate(DType dtype, std::vector<int64_t> shape) {
  HostTensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.storage = alignedAlloc(t.byteSize(), /*zero=*/true);
  t.data = t.storage.get();
  return t;
}

int64_t BufferDesc::numElements() const {
  return product(shape);
}

ExternStep::~ExternStep() = default;

bool ExternStep::save(SavedStep &, std::string &why) const {
  why = "step '" + describe() + "' cannot be saved in an artifact";
  return false;
}

//===----------------------------------------------------------------------===//
// Pools
//===----------------------------------------------------------------------===//

/// A call's arena and resolved argument table. See Note [Arena].
struct Executable::Context {
  std::shared_ptr<void> arena;
  std::vector<void *> args;
};

struct Executable::Pools {
  std::mutex mutex;
  std::vector<std::unique_ptr<Context>> contexts;
  size_t created = 0;
  std::vector<void *> outputBlocks;
  uint64_t outputBytes = 0;

  ~Pools() {
    for (void *p : outputBlocks)
      std::free(p);
  }
};

namespace {

enum ArgKind : uint8_t { kAbsolute, kArena, kInput, kOutputBlock };

} // namespace

//===----------------------------------------------------------------------===//
// Building
//===----------------------------------------------------------------------===//

Executable::Executable() : pools_(std::make_shared<Pools>()) {}
Executable::~Executable() = default;

std::vector<std::vector<int64_t>> Executable::inputShapes() const {
  std::vector<std::vector<int64_t>> out;
  for (int32_t id : inputIds_)
    out.push_back(buffers_[static_cast<size_t>(id)].shape);
  return out;
}

bool Executable::takesShapes(std::span<const std::vector<int64_t>> shapes) const {
  if (shapes.size() != numInputs_)
    return false;
  for (size_t i = 0; i < numInputs_; ++i)
    if (buffers_[static_cast<size_t>(inputIds_[i])].shape != shapes[i])
      return false;
  return true;
}

int32_t Executable::addInput(DType dtype, std::vector<int64_t> shape, std::string name) {
  BufferDesc b;
  b.kind = BufferDesc::Kind::Input;
  b.dtype = dtype;
  b.shape = std::move(shape);
  b.name = std::move(name);
  b.inputIndex = static_cast<int>(numInputs_++);
  buffers_.push_back(std::move(b));
  inputIds_.push_back(static_cast<int32_t>(buffers_.size() - 1));
  return inputIds_.back();
}

int32_t Executable::addConstant(HostTensor value, std::string name) {
  if (!isAligned(value.data)) {
    HostTensor copy = HostTensor::allocate(value.dtype, value.shape);
    std::memcpy(copy.data, value.data, value.byteSize());
    value = std::move(copy);
  }
  BufferDesc b;
  b.kind = BufferDesc::Kind::Constant;
  b.dtype = value.dtype;
  b.shape = value.shape;
  b.name = std::move(name);
  b.constant = std::move(value);
  buffers_.push_back(std::move(b));
  return static_cast<int32_t>(buffers_.size() - 1);
}

int32_t Executable::addTemp(DType dtype, std::vector<int64_t> shape, std::string name) {
  BufferDesc b;
  b.kind = BufferDesc::Kind::Temp;
  b.dtype = dtype;
  b.shape = std::move(shape);
  b.name = std::move(name);
  buffers_.push_back(std::move(b));
  return static_cast<int32_t>(buffers_.size() - 1);
}

void Executable::addKernelStep(std::string name, KernelFn fn, std::vector<int32_t> buffers,
                               int32_t numReads, int64_t numOuter, bool parallel, int64_t grain,
                               std::vector<std::pair<int32_t, int32_t>> inPlace,
                               std::shared_ptr<const KernelObject> object) {
  Step s;
  s.kind = Step::Kind::Kernel;
  s.name = std::move(name);
  s.fn = fn;
  s.object = std::move(object);
  s.buffers = std::move(buffers);
  s.numReads = numReads;
  s.inPlace = std::move(inPlace);
  s.numOuter = numOuter;
  s.parallel = parallel;
  s.grain = std::max<int64_t>(grain, 1);
  steps_.push_back(std::move(s));
}

void Executable::setKernelCode(size_t step, KernelFn fn,
                               std::shared_ptr<const KernelObject> object) {
  Step &s = steps_.at(step);
  s.fn = fn;
  s.object = std::move(object);
}

void Executable::addExternStep(std::shared_ptr<const ExternStep> step, std::vector<int32_t> buffers,
                               int32_t numReads) {
  Step s;
  s.kind = Step::Kind::Extern;
  s.name = step->describe();
  s.buffers = std::move(buffers);
  s.numReads = numReads;
  s.externStep = std::move(step);
  steps_.push_back(std::move(s));
}

std::vector<BufferLifetime> Executable::lifetimes() const {
  std::vector<BufferLifetime> life(buffers_.size());
  for (size_t si = 0; si < steps_.size(); ++si)
    for (int32_t id : steps_[si].buffers) {
      if (id < 0 || static_cast<size_t>(id) >= buffers_.size())
        continue;
      BufferLifetime &l = life[static_cast<size_t>(id)];
      if (l.first < 0)
        l.first = static_cast<int32_t>(si);
      l.last = static_cast<int32_t>(si);
    }
  return life;
}

bool Executable::isArenaBuffer(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= buffers_.size() ||
      buffers_[static_cast<size_t>(id)].kind != BufferDesc::Kind::Temp)
    return false;
  return std::find(outputs_.begin(), outputs_.end(), id) == outputs_.end();
}

Status Executable::finalize() {
  std::vector<uint64_t> offsets(buffers_.size(), 0);
  uint64_t end = 0;
  for (size_t i = 0; i < buffers_.size(); ++i)
    if (isArenaBuffer(static_cast<int32_t>(i))) {
      offsets[i] = end;
      end += roundUp(buffers_[i].byteSize());
    }
  return finalize(end, offsets);
}

Status Executable::finalize(uint64_t arenaBytes, const std::vector<uint64_t> &offsets) {
  if (finalized_)
    return Status::failure("the executable is already finalized");
  if (offsets.size() != buffers_.size())
    return Status::failure("the memory plan has " + std::to_string(offsets.size()) +
                           " offsets for " + std::to_string(buffers_.size()) + " buffers");
  // Place: arena Temps at their planned offsets, graph outputs one after
  // the other in the output block (a buffer named twice once).
  const std::vector<BufferDesc> saved = buffers_;
  uint64_t outputEnd = 0;
  std::set<int32_t> seen;
  for (int32_t id : outputs_) {
    if (id < 0 || static_cast<size_t>(id) >= buffers_.size())
      return Status::failure("output buffer " + std::to_string(id) + " does not exist");
    BufferDesc &b = buffers_[static_cast<size_t>(id)];
    if (!seen.insert(id).second)
      continue;
    b.placement = BufferDesc::Placement::OutputBlock;
    b.offset = outputEnd;
    outputEnd += roundUp(b.byteSize());
  }
  for (size_t i = 0; i < buffers_.size(); ++i)
    if (isArenaBuffer(static_cast<int32_t>(i))) {
      buffers_[i].placement = BufferDesc::Placement::Arena;
      buffers_[i].offset = offsets[i];
    }
  arenaBytes_ = arenaBytes;
  outputBytes_ = outputEnd;
  if (Status st = checkMemory(); !st.ok()) {
    buffers_ = saved;
    arenaBytes_ = outputBytes_ = 0;
    return st;
  }

  // The argument table. See Note [Arena].
  argTemplate_.clear();
  argKind_.clear();
  mayParallel_.clear();
  for (Step &s : steps_) {
    s.argBegin = static_cast<uint32_t>(argTemplate_.size());
    for (int32_t id : s.buffers) {
      const BufferDesc &b = buffers_[static_cast<size_t>(id)];
      switch (b.kind) {
      case BufferDesc::Kind::Input:
        argKind_.push_back(kInput);
        argTemplate_.push_back(static_cast<uintptr_t>(b.inputIndex));
        break;
      case BufferDesc::Kind::Constant:
        argKind_.push_back(kAbsolute);
        argTemplate_.push_back(reinterpret_cast<uintptr_t>(b.constant.data));
        break;
      case BufferDesc::Kind::Temp:
        argKind_.push_back(b.placement == BufferDesc::Placement::Arena ? kArena : kOutputBlock);
        argTemplate_.push_back(b.offset);
        break;
      }
    }
    if (s.kind == Step::Kind::Kernel && !s.sizes.empty()) { // after the buffers, as the ABI says
      argKind_.push_back(kAbsolute);
      argTemplate_.push_back(reinterpret_cast<uintptr_t>(s.sizes.data()));
    }
    mayParallel_.push_back(s.kind == Step::Kind::Kernel && s.parallel && s.numOuter >= 2 * s.grain);
  }
  pools_->outputBytes = outputBytes_;
  finalized_ = true;
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Checking the memory layout
//===----------------------------------------------------------------------===//

Status Executable::checkMemory() const {
  auto name = [&](int32_t id) { return "%" + buffers_[static_cast<size_t>(id)].name; };
  auto range = [&](int32_t id) {
    const BufferDesc &b = buffers_[static_cast<size_t>(id)];
    return "[" + std::to_string(b.offset) + ", " + std::to_string(b.offset + b.byteSize()) + ")";
  };
  const size_t n = buffers_.size();

  // Structure, and where each buffer is first written and last accessed.
  std::vector<int32_t> def(n, -1), last(n, -1);
  for (size_t si = 0; si < steps_.size(); ++si) {
    const Step &s = steps_[si];
    const std::string where = "step " + std::to_string(si) + " (" + s.name + ")";
    if (s.numReads < 0 || static_cast<size_t>(s.numReads) > s.buffers.size())
      return Status::failure(where + " reads " + std::to_string(s.numReads) + " of its " +
                             std::to_string(s.buffers.size()) + " buffers");
    if (s.kind == Step::Kind::Kernel ? !s.fn : !s.externStep)
      return Status::failure(where + " has nothing to run");
    for (size_t j = 0; j < s.buffers.size(); ++j) {
      int32_t id = s.buffers[j];
      if (id < 0 || static_cast<size_t>(id) >= n)
        return Status::failure(where + " names buffer " + std::to_string(id) +
                               ", which does not exist");
      const BufferDesc &b = buffers_[static_cast<size_t>(id)];
      const bool writes = j >= static_cast<size_t>(s.numReads);
      if (writes && std::find(s.buffers.begin(), s.buffers.begin() + s.numReads, id) !=
                        s.buffers.begin() + s.numReads)
        return Status::failure(where + " reads and writes " + name(id));
      if (writes && b.kind != BufferDesc::Kind::Temp)
        return Status::failure(where + " writes " + name(id) + ", " +
                               (b.kind == BufferDesc::Kind::Input ? "an input" : "a constant"));
      if (b.kind == BufferDesc::Kind::Temp) {
        if (!writes && def[static_cast<size_t>(id)] < 0)
          return Status::failure(where + " reads " + name(id) + " before any step writes it");
        if (writes && def[static_cast<size_t>(id)] < 0)
          def[static_cast<size_t>(id)] = static_cast<int32_t>(si);
      }
      last[static_cast<size_t>(id)] = static_cast<int32_t>(si);
    }
  }
  for (int32_t id : outputs_)
    if (id >= 0 && static_cast<size_t>(id) < n &&
        buffers_[static_cast<size_t>(id)].kind == BufferDesc::Kind::Temp &&
        def[static_cast<size_t>(id)] < 0)
      return Status::failure("output " + name(id) + " is never written");

  // Placement: aligned, inside its region.
  std::vector<int32_t> arena, outputBlock;
  for (size_t i = 0; i < n; ++i) {
    const BufferDesc &b = buffers_[i];
    if (b.kind != BufferDesc::Kind::Temp)
      continue;
    const auto id = static_cast<int32_t>(i);
    uint64_t limit = 0;
    if (b.placement == BufferDesc::Placement::Arena) {
      limit = arenaBytes_;
      if (def[i] >= 0)
        arena.push_back(id);
    } else if (b.placement == BufferDesc::Placement::OutputBlock) {
      limit = outputBytes_;
      outputBlock.push_back(id);
    } else {
      if (def[i] >= 0)
        return Status::failure(name(id) + " has no memory");
      continue;
    }
    if (b.offset % kAlignment != 0)
      return Status::failure(name(id) + " at offset " + std::to_string(b.offset) +
                             " is not aligned to " + std::to_string(kAlignment) + " bytes");
    if (b.offset > limit || b.byteSize() > limit - b.offset)
      return Status::failure(
          name(id) + " " + range(id) + " is outside its " +
          (b.placement == BufferDesc::Placement::Arena ? "arena" : "output block") + " of " +
          std::to_string(limit) + " bytes");
  }
  auto overlap = [&](int32_t a, int32_t b) {
    const BufferDesc &x = buffers_[static_cast<size_t>(a)], &y = buffers_[static_cast<size_t>(b)];
    return x.byteSize() && y.byteSize() && x.offset < y.offset + y.byteSize() &&
           y.offset < x.offset + x.byteSize();
  };
  // Outputs are all live to the end of the call.
  for (size_t i = 0; i < outputBlock.size(); ++i)
    for (size_t j = i + 1; j < outputBlock.size(); ++j)
      if (overlap(outputBlock[i], outputBlock[j]))
        return Status::failure("outputs " + name(outputBlock[i]) + " " + range(outputBlock[i]) +
                               " and " + name(outputBlock[j]) + " " + range(outputBlock[j]) +
                               " overlap");

  // A declared in-place pair really shares memory: the kernel stores
  // through the read buffer's pointer only.
  for (size_t si = 0; si < steps_.size(); ++si) {
    const Step &s = steps_[si];
    for (auto [w, u] : s.inPlace) {
      const std::string where = "step " + std::to_string(si) + " (" + s.name + ")";
      if (w < 0 || u < 0 || static_cast<size_t>(w) >= n || static_cast<size_t>(u) >= n)
        return Status::failure(where + " declares an in-place pair of missing buffers");
      const BufferDesc &wb = buffers_[static_cast<size_t>(w)],
                       &ub = buffers_[static_cast<size_t>(u)];
      const bool readHere = std::find(s.buffers.begin(), s.buffers.begin() + s.numReads, u) !=
                            s.buffers.begin() + s.numReads;
      const bool writtenHere =
          std::find(s.buffers.begin() + s.numReads, s.buffers.end(), w) != s.buffers.end();
      if (wb.placement != BufferDesc::Placement::Arena ||
          ub.placement != BufferDesc::Placement::Arena || wb.offset != ub.offset ||
          wb.byteSize() != ub.byteSize() || !readHere || !writtenHere ||
          last[static_cast<size_t>(u)] != static_cast<int32_t>(si))
        return Status::failure(where + " writes " + name(w) + " " + range(w) + " in place of " +
                               name(u) + " " + range(u) +
                               ", but they do not share arena memory or " + name(u) +
                               " is still read after it");
    }
  }

  // Walk the steps: what a step writes must not overlap anything live.
  for (size_t si = 0; si < steps_.size(); ++si) {
    const Step &s = steps_[si];
    const auto step = static_cast<int32_t>(si);
    for (size_t j = static_cast<size_t>(s.numReads); j < s.buffers.size(); ++j) {
      const int32_t w = s.buffers[j];
      if (buffers_[static_cast<size_t>(w)].placement != BufferDesc::Placement::Arena)
        continue;
      for (int32_t u : arena) {
        const auto ui = static_cast<size_t>(u);
        if (u == w || def[ui] > step || last[ui] < step || !overlap(u, w))
          continue;
        const bool declared =
            std::find(s.inPlace.begin(), s.inPlace.end(), std::make_pair(w, u)) != s.inPlace.end();
        const bool readHere = std::find(s.buffers.begin(), s.buffers.begin() + s.numReads, u) !=
                              s.buffers.begin() + s.numReads;
        const BufferDesc &wb = buffers_[static_cast<size_t>(w)], &ub = buffers_[ui];
        if (declared && readHere && last[ui] == step && def[ui] < step && wb.offset == ub.offset &&
            wb.byteSize() == ub.byteSize())
          continue;
        return Status::failure("step " + std::to_string(si) + " (" + s.name + ") writes " +
                               name(w) + " " + range(w) + " over " + name(u) + " " + range(u) +
                               ", live from step " + std::to_string(def[ui]) + " to step " +
                               std::to_string(last[ui]));
      }
    }
  }
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Running
//===----------------------------------------------------------------------===//

int Executable::resolveThreads(int requested) const {
  int t = requested > 0 ? requested : defaultThreads_;
  if (t <= 0)
    t = omp_get_max_threads();
  return std::max(t, 1);
}

Status Executable::checkInputs(std::span<const HostTensor> inputs) const {
  if (inputs.size() != numInputs_)
    return Status::failure("expected " + std::to_string(numInputs_) + " input" +
                           (numInputs_ == 1 ? "" : "s") + ", got " + std::to_string(inputs.size()));
  std::string errors;
  for (size_t i = 0; i < numInputs_; ++i) {
    const BufferDesc &b = buffers_[static_cast<size_t>(inputIds_[i])];
    const HostTensor &t = inputs[i];
    if (t.dtype != b.dtype || t.shape != b.shape) {
      if (!errors.empty())
        errors += "; ";
      errors += "input " + std::to_string(i) + " (%" + b.name + ") expects " +
                typeString(b.dtype, b.shape) + ", got " + typeString(t.dtype, t.shape);
    } else if (!t.data && b.byteSize() > 0) {
      if (!errors.empty())
        errors += "; ";
      errors += "input " + std::to_string(i) + " (%" + b.name + ") has no data";
    }
  }
  return errors.empty() ? Status::success() : Status::failure(errors);
}

size_t Executable::pooledContexts() const {
  std::lock_guard<std::mutex> lock(pools_->mutex);
  return pools_->created;
}

Status Executable::runSteps(Context &ctx, int threads, const RunOptions &options,
                            RunProfile *profile) const {
  void *const *args = ctx.args.data();
  // A call from inside an OpenMP region of the caller's runs serially (a
  // nested region would be serialized anyway).
  const bool serialOnly = threads < 2 || omp_in_parallel();
  const bool timing = profile && options.profile;
  if (timing && profile->stepSeconds.size() != steps_.size())
    profile->stepSeconds.assign(steps_.size(), 0.0);
  for (size_t si = 0; si < steps_.size(); ++si) {
    const Step &s = steps_[si];
    void *const *a = args + s.argBegin;
    const auto start =
        timing ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
    if (s.kind == Step::Kind::Kernel) {
      const int64_t n = s.numOuter;
      if (serialOnly || !mayParallel_[si]) {
        s.fn(a, 0, n);
      } else {
        const int nt = static_cast<int>(std::min<int64_t>(threads, n / s.grain));
        const KernelFn fn = s.fn;
#pragma omp parallel num_threads(nt)
        {
          const int64_t t = omp_get_thread_num(), count = omp_get_num_threads();
          const int64_t begin = n * t / count, end = n * (t + 1) / count;
          if (begin < end)
            fn(a, begin, end);
        }
      }
    } else {
      // A step that throws (out of memory in a library, say) fails this run
      // with a status; it must not take the process down.
      Status st;
      try {
        st = s.externStep->run(std::span<void *const>(a, s.buffers.size()), StepContext{threads});
      } catch (const std::exception &e) {
        st = Status::failure(std::string("exception: ") + e.what());
      }
      if (!st.ok())
        return Status::failure("step " + std::to_string(si) + " (" + s.name + "): " + st.error);
    }
    if (timing)
      profile->stepSeconds[si] +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  if (timing)
    ++profile->runs;
  return Status::success();
}

Status Executable::run(std::span<const HostTensor> inputs, std::vector<HostTensor> &outputs,
                       const RunOptions &options, RunProfile *profile) const {
  if (!finalized_)
    return Status::failure("the executable has no memory plan (finalize() was not called)");
  if (Status st = checkInputs(inputs); !st.ok())
    return st;
  const int threads = resolveThreads(options.threads);
  // The previous call's outputs stay alive until the steps are done: the
  // caller may pass them back as this call's inputs (a recurrent state).
  // Their block returns to the pool afterwards, so a loop alternates
  // between two blocks without allocating.
  std::vector<HostTensor> previous = std::move(outputs);
  outputs.clear();

  // A context from the pool (or a new one). See Note [Arena].
  std::unique_ptr<Context> ctx;
  {
    std::lock_guard<std::mutex> lock(pools_->mutex);
    if (!pools_->contexts.empty()) {
      ctx = std::move(pools_->contexts.back());
      pools_->contexts.pop_back();
    }
  }
  if (!ctx) {
    ctx = std::make_unique<Context>();
    ctx->arena = alignedAlloc(arenaBytes_, /*zero=*/false);
    if (!ctx->arena)
      return Status::failure("out of memory allocating the arena (" + std::to_string(arenaBytes_) +
                             " bytes)");
    auto *base = static_cast<char *>(ctx->arena.get());
    ctx->args.resize(argTemplate_.size());
    for (size_t i = 0; i < argTemplate_.size(); ++i)
      ctx->args[i] = argKind_[i] == kArena      ? static_cast<void *>(base + argTemplate_[i])
                     : argKind_[i] == kAbsolute ? reinterpret_cast<void *>(argTemplate_[i])
                                                : nullptr;
    std::lock_guard<std::mutex> lock(pools_->mutex);
    ++pools_->created;
  }
  // Gives the context back however this call ends.
  struct Return {
    Pools &pools;
    std::unique_ptr<Context> &ctx;
    ~Return() {
      std::lock_guard<std::mutex> lock(pools.mutex);
      pools.contexts.push_back(std::move(ctx));
    }
  } giveBack{*pools_, ctx};

  // The output block, owned by the outputs' storage: back to the pool when
  // the caller drops the last of them.
  void *block = nullptr;
  {
    std::lock_guard<std::mutex> lock(pools_->mutex);
    if (!pools_->outputBlocks.empty()) {
      block = pools_->outputBlocks.back();
      pools_->outputBlocks.pop_back();
    }
  }
  if (!block) {
    block = std::aligned_alloc(kAlignment, roundUp(std::max<uint64_t>(outputBytes_, 1)));
    if (!block)
      return Status::failure("out of memory allocating the outputs (" +
                             std::to_string(outputBytes_) + " bytes)");
  }
  std::shared_ptr<void> blockOwner(block, [weak = std::weak_ptr<Pools>(pools_)](void *p) {
    if (auto pools = weak.lock()) {
      std::lock_guard<std::mutex> lock(pools->mutex);
      pools->outputBlocks.push_back(p);
    } else {
      std::free(p);
    }
  });
  auto *outBase = static_cast<char *>(block);

  // Inputs (copied when misaligned) and output-block buffers.
  std::vector<std::shared_ptr<void>> inputCopies;
  std::vector<void *> inputPtrs(numInputs_);
  for (size_t i = 0; i < numInputs_; ++i) {
    const HostTensor &t = inputs[i];
    if (isAligned(t.data)) {
      inputPtrs[i] = t.data;
      continue;
    }
    auto copy = alignedAlloc(t.byteSize(), false);
    if (!copy)
      return Status::failure("out of memory copying input %" +
                             buffers_[static_cast<size_t>(inputIds_[i])].name);
    std::memcpy(copy.get(), t.data, t.byteSize());
    inputPtrs[i] = copy.get();
    inputCopies.push_back(std::move(copy));
  }
  for (size_t i = 0; i < argTemplate_.size(); ++i) {
    if (argKind_[i] == kInput)
      ctx->args[i] = inputPtrs[argTemplate_[i]];
    else if (argKind_[i] == kOutputBlock)
      ctx->args[i] = outBase + argTemplate_[i];
  }

  // Extern steps (oneDNN) take their thread count from the calling thread's
  // OpenMP ICV: set it for the call. See Note [Threads].
  {
    ScopedOmpThreads scope(threads);
    if (Status st = runSteps(*ctx, threads, options, profile); !st.ok())
      return st;
  }

  // The outputs: views of the block; inputs and constants are copied in.
  outputs.reserve(outputs_.size());
  for (int32_t id : outputs_) {
    const BufferDesc &b = buffers_[static_cast<size_t>(id)];
    HostTensor t;
    t.dtype = b.dtype;
    t.shape = b.shape;
    t.data = outBase + b.offset;
    t.storage = std::shared_ptr<void>(blockOwner, t.data);
    if (b.kind == BufferDesc::Kind::Input)
      std::memcpy(t.data, inputs[static_cast<size_t>(b.inputIndex)].data, b.byteSize());
    else if (b.kind == BufferDesc::Kind::Constant)
      std::memcpy(t.data, b.constant.data, b.byteSize());
    outputs.push_back(std::move(t));
  }
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Introspection
//===----------------------------------------------------------------------===//

uint64_t Executable::tempBytes() const {
  uint64_t total = 0;
  for (size_t i = 0; i < buffers_.size(); ++i)
    if (isArenaBuffer(static_cast<int32_t>(i)))
      total += buffers_[i].byteSize();
  return total;
}

uint64_t Executable::constantBytes() const {
  uint64_t total = 0;
  for (const BufferDesc &b : buffers_)
    if (b.kind == BufferDesc::Kind::Constant)
      total += b.byteSize();
  for (const Step &s : steps_)
    if (s.externStep)
      total += s.externStep->constantBytes();
  return total;
}

std::string Executable::describe() const {
  std::string s;
  for (size_t i = 0; i < steps_.size(); ++i) {
    const Step &st = steps_[i];
    s += std::to_string(i) + ": " + (st.kind == Step::Kind::Kernel ? "kernel " : "extern ") +
         st.name + " (";
    for (size_t j = 0; j < st.buffers.size(); ++j)
      s += (j ? ", %" : "%") + buffers_[static_cast<size_t>(st.buffers[j])].name;
    s += ")";
    if (st.kind == Step::Kind::Kernel)
      s += " outer=" + std::to_string(st.numOuter) + (st.parallel ? " parallel" : " serial");
    if (!st.sizes.empty()) {
      s += " sizes=[";
      for (size_t j = 0; j < st.sizes.size(); ++j)
        s += (j ? ", " : "") + std::to_string(st.sizes[j]);
      s += "]";
    }
    for (auto [w, r] : st.inPlace)
      s += " %" + buffers_[static_cast<size_t>(w)].name + " in place of %" +
           buffers_[static_cast<size_t>(r)].name;
    s += "\n";
  }
  return s;
}

} // namespace kiln::runtime
