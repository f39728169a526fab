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
//===----------------------------------------------------------------------===//
#include "runtime/Executable.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>

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
#define DTYPE(E, N, B, F, S)                                                                       \
  case DType::E:                                                                                   \
    return B;
#include "ir/DTypes.def"
  }
  return 1;
}

const char *elementTypeName(DType t) {
  switch (t) {
#define DTYPE(E, N, B, F, S)                                                                       \
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

//===----------------------------------------------------------------------===//
// Building
//===----------------------------------------------------------------------===//

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
                               int64_t numOuter, bool parallel, int64_t grain) {
  Step s;
  s.kind = Step::Kind::Kernel;
  s.name = std::move(name);
  s.fn = fn;
  s.buffers = std::move(buffers);
  s.numOuter = numOuter;
  s.parallel = parallel;
  s.grain = std::max<int64_t>(grain, 1);
  steps_.push_back(std::move(s));
}

void Executable::addExternStep(std::shared_ptr<const ExternStep> step,
                               std::vector<int32_t> buffers) {
  Step s;
  s.kind = Step::Kind::Extern;
  s.name = step->describe();
  s.buffers = std::move(buffers);
  s.externStep = std::move(step);
  steps_.push_back(std::move(s));
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

Status Executable::runKernelStep(const Step &s, void *const *ptrs, int threads) const {
  const int64_t n = s.numOuter;
  if (n <= 0)
    return Status::success();
  int64_t nt = std::min<int64_t>(threads, n / s.grain);
  if (!s.parallel || nt < 2 || omp_in_parallel()) {
    s.fn(ptrs, 0, n);
    return Status::success();
  }
  const KernelFn fn = s.fn;
#pragma omp parallel num_threads(static_cast <int>(nt))
  {
    const int64_t t = omp_get_thread_num(), count = omp_get_num_threads();
    const int64_t begin = n * t / count, end = n * (t + 1) / count;
    if (begin < end)
      fn(ptrs, begin, end);
  }
  return Status::success();
}

Status Executable::run(std::span<const HostTensor> inputs, std::vector<HostTensor> &outputs,
                       const RunOptions &options, RunProfile *profile) const {
  if (Status st = checkInputs(inputs); !st.ok())
    return st;
  const int threads = resolveThreads(options.threads);

  // Bind every buffer: inputs (copied when misaligned), constants, and a
  // fresh allocation per temp. See Note [Threads] for why this is reentrant.
  std::vector<void *> ptrs(buffers_.size(), nullptr);
  std::vector<std::shared_ptr<void>> owned(buffers_.size());
  for (size_t i = 0; i < buffers_.size(); ++i) {
    const BufferDesc &b = buffers_[i];
    switch (b.kind) {
    case BufferDesc::Kind::Input: {
      const HostTensor &t = inputs[static_cast<size_t>(b.inputIndex)];
      if (isAligned(t.data)) {
        ptrs[i] = t.data;
      } else {
        owned[i] = alignedAlloc(b.byteSize(), false);
        if (!owned[i])
          return Status::failure("out of memory copying input %" + b.name);
        std::memcpy(owned[i].get(), t.data, b.byteSize());
        ptrs[i] = owned[i].get();
      }
      break;
    }
    case BufferDesc::Kind::Constant:
      ptrs[i] = b.constant.data;
      break;
    case BufferDesc::Kind::Temp:
      owned[i] = alignedAlloc(b.byteSize(), false);
      if (!owned[i])
        return Status::failure("out of memory allocating %" + b.name + " (" +
                               std::to_string(b.byteSize()) + " bytes)");
      ptrs[i] = owned[i].get();
      break;
    }
  }

  if (profile && options.profile && profile->stepSeconds.size() != steps_.size())
    profile->stepSeconds.assign(steps_.size(), 0.0);
  std::vector<void *> args;
  for (size_t si = 0; si < steps_.size(); ++si) {
    const Step &s = steps_[si];
    args.clear();
    for (int32_t id : s.buffers)
      args.push_back(ptrs[static_cast<size_t>(id)]);
    const auto start = std::chrono::steady_clock::now();
    Status st;
    if (s.kind == Step::Kind::Kernel) {
      st = runKernelStep(s, args.data(), threads);
    } else {
      ScopedOmpThreads scope(threads);
      // A step that throws (out of memory in a library, say) fails this run
      // with a status; it must not take the process down.
      try {
        st = s.externStep->run(std::span<void *const>(args.data(), args.size()),
                               StepContext{threads});
      } catch (const std::exception &e) {
        st = Status::failure(std::string("exception: ") + e.what());
      }
    }
    if (!st.ok())
      return Status::failure("step " + std::to_string(si) + " (" + s.name + "): " + st.error);
    if (profile && options.profile)
      profile->stepSeconds[si] +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  if (profile && options.profile)
    ++profile->runs;

  // Hand out the outputs: a temp's allocation moves to the first output
  // naming it (later ones share it); inputs and constants are copied.
  outputs.clear();
  for (int32_t id : outputs_) {
    const BufferDesc &b = buffers_[static_cast<size_t>(id)];
    HostTensor t;
    t.dtype = b.dtype;
    t.shape = b.shape;
    if (b.kind == BufferDesc::Kind::Temp) {
      t.storage = owned[static_cast<size_t>(id)];
    } else {
      t.storage = alignedAlloc(b.byteSize(), false);
      if (!t.storage)
        return Status::failure("out of memory copying output %" + b.name);
      std::memcpy(t.storage.get(), ptrs[static_cast<size_t>(id)], b.byteSize());
    }
    t.data = t.storage.get();
    outputs.push_back(std::move(t));
  }
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Introspection
//===----------------------------------------------------------------------===//

size_t Executable::tempBytes() const {
  size_t total = 0;
  for (const BufferDesc &b : buffers_)
    if (b.kind == BufferDesc::Kind::Temp)
      total += b.byteSize();
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
    s += "\n";
  }
  return s;
}

} // namespace kiln::runtime
