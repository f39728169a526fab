//===- DnnlSteps.cpp - oneDNN steps of a compiled model -----------------===//
#include "runtime/dnnl/DnnlSteps.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <unordered_map>

namespace kiln::runtime::onednn {

using dnnl::memory;

dnnl::engine &cpuEngine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream &threadStream() {
  thread_local dnnl::stream stream(cpuEngine());
  return stream;
}

ScopedThreads::ScopedThreads(int threads) : saved_(omp_get_max_threads()), set_(threads > 0) {
  if (set_)
    omp_set_num_threads(threads);
}

ScopedThreads::~ScopedThreads() {
  if (set_)
    omp_set_num_threads(saved_);
}

int currentThreads() {
  return omp_get_max_threads();
}

void *threadScratch(size_t bytes) {
  struct Buffer {
    void *p = nullptr;
    size_t size = 0;
    ~Buffer() { std::free(p); }
  };
  thread_local Buffer buffer;
  if (bytes > buffer.size) {
    std::free(buffer.p);
    const size_t rounded = (bytes + 4095) / 4096 * 4096;
    buffer.p = std::aligned_alloc(64, rounded);
    buffer.size = buffer.p ? rounded : 0;
    if (!buffer.p)
      throw std::bad_alloc();
  }
  return buffer.p;
}

dims rowMajorStrides(const dims &d) {
  dims s(d.size(), 1);
  for (size_t i = d.size(); i-- > 1;)
    s[i - 1] = s[i] * std::max<int64_t>(d[i], 1);
  return s;
}

memory::desc plainMd(dims d) {
  if (d.empty())
    d = {1};
  return memory::desc(d, memory::data_type::f32, rowMajorStrides(d));
}

memory::desc channelsLastMd(const dims &d) {
  const size_t rank = d.size();
  dims strides(rank);
  int64_t stride = 1;
  strides[1] = stride;
  stride *= std::max<int64_t>(d[1], 1);
  for (size_t i = rank; i-- > 2;) {
    strides[i] = stride;
    stride *= std::max<int64_t>(d[i], 1);
  }
  strides[0] = stride;
  return memory::desc(d, memory::data_type::f32, strides);
}

int64_t product(const dims &d) {
  return std::accumulate(d.begin(), d.end(), int64_t(1), std::multiplies<>());
}

void broadcastCopy(const float *src, const dims &from, const dims &to, float *dst) {
  const size_t rank = to.size();
  const dims fromStrides = rowMajorStrides(from);
  std::vector<int64_t> idx(rank, 0);
  const int64_t total = product(to);
  for (int64_t i = 0; i < total; ++i) {
    int64_t off = 0;
    for (size_t d = 0; d < rank; ++d)
      off += from[d] == 1 ? 0 : idx[d] * fromStrides[d];
    dst[i] = src[off];
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < to[d])
        break;
      idx[d] = 0;
    }
  }
}

// Note [Kept memory objects]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Creating a dnnl::memory costs a few hundred nanoseconds (an allocation,
// and for a reorder target its buffer), and a step binds four to six of
// them: for the small matmuls of an unrolled RNN (2 x 64 by 64 x 256) that
// was half of the call. So a step keeps the memory objects of a finished
// run (a Binding: every argument already in its map, reorder targets
// allocated) and the next run only points them at its buffers
// (set_data_handle). run() is reentrant: each concurrent run takes a
// Binding of its own from the step's pool (a mutex around a vector), or
// builds one when the pool is empty; they are freed with the step.
struct DnnlStep::Binding {
  std::unordered_map<int, memory> args;
  /// Per runtime argument: its user memory, bound to the buffer per run.
  std::vector<memory> user;
  memory out, dst, sum, scratch;
};

DnnlStep::DnnlStep() = default;
DnnlStep::~DnnlStep() = default;

std::unique_ptr<DnnlStep::Binding> DnnlStep::takeBinding() const {
  if (std::unique_ptr<Binding> kept = bindings_.take())
    return kept;
  dnnl::engine &eng = cpuEngine();
  auto b = std::make_unique<Binding>();
  for (const ConstArg &c : constArgs)
    b->args.emplace(c.arg, c.mem);
  for (const RuntimeArg &r : runtimeArgs) {
    b->user.emplace_back(r.userMd, eng, nullptr);
    b->args.emplace(r.arg, r.toPrim ? memory(r.primMd, eng) : b->user.back());
  }
  b->out = memory(dstUserMd, eng, nullptr);
  b->dst = dstFromPrim ? memory(dstPrimMd, eng) : b->out;
  if (sumBuffer >= 0 && sumToPrim)
    b->sum = memory(sumUserMd, eng, nullptr);
  b->args.emplace(DNNL_ARG_DST, b->dst);
  if (scratchMd.get_size() > 0) {
    b->scratch = memory(scratchMd, eng, nullptr);
    b->args.emplace(DNNL_ARG_SCRATCHPAD, b->scratch);
  }
  return b;
}

runtime::Status DnnlStep::run(std::span<void *const> buffers,
                              const runtime::StepContext &ctx) const {
  ScopedThreads threads(std::max(1, std::min(ctx.threads, createdThreads)));
  try {
    dnnl::stream &s = threadStream();
    std::unique_ptr<Binding> b = takeBinding();
    std::vector<std::vector<float>> expanded;
    for (size_t i = 0; i < runtimeArgs.size(); ++i) {
      const RuntimeArg &r = runtimeArgs[i];
      void *p = buffers[static_cast<size_t>(r.buffer)];
      if (r.expand) {
        expanded.emplace_back(static_cast<size_t>(product(r.expandTo)));
        broadcastCopy(static_cast<const float *>(p), r.expandFrom, r.expandTo,
                      expanded.back().data());
        p = expanded.back().data();
      }
      if (r.scale != 1.f) {
        const float *src = static_cast<const float *>(p);
        std::vector<float> scaled(r.userMd.get_size() / sizeof(float));
        for (size_t j = 0; j < scaled.size(); ++j)
          scaled[j] = src[j] * r.scale;
        expanded.push_back(std::move(scaled));
        p = expanded.back().data();
      }
      memory &user = b->user[i];
      user.set_data_handle(p);
      if (r.toPrim)
        r.toPrim->execute(s, user, b->args.at(r.arg));
    }
    b->out.set_data_handle(buffers[static_cast<size_t>(outBuffer)]);
    if (sumBuffer >= 0) {
      void *residual = buffers[static_cast<size_t>(sumBuffer)];
      if (sumToPrim) {
        b->sum.set_data_handle(residual);
        sumToPrim->execute(s, b->sum, b->dst);
      } else {
        std::memcpy(b->dst.get_data_handle(), residual, dstPrimMd.get_size());
      }
    }
    if (scratchMd.get_size() > 0)
      b->scratch.set_data_handle(threadScratch(scratchMd.get_size()));
    prim.execute(s, b->args);
    if (dstFromPrim)
      dstFromPrim->execute(s, b->dst, b->out);
    s.wait();
    bindings_.give(std::move(b));
  } catch (const dnnl::error &e) {
    return runtime::Status::failure(std::string("onednn: ") + e.what());
  } catch (const std::exception &e) { // e.g. std::bad_alloc for scratch memory
    return runtime::Status::failure(std::string("onednn step: ") + e.what());
  }
  return runtime::Status::success();
}

namespace {

/// Runs `prim` on the calling thread's stream with each (arg, (desc,
/// pointer)) bound as a memory; a dnnl::error becomes a failed status.
runtime::Status
executeOnThisThread(const dnnl::primitive &prim,
                    const std::vector<std::pair<int, std::pair<memory::desc, void *>>> &args) {
  try {
    std::unordered_map<int, memory> bound;
    for (const auto &[arg, md] : args)
      bound.emplace(arg, memory(md.first, cpuEngine(), md.second));
    dnnl::stream &s = threadStream();
    prim.execute(s, bound);
    s.wait();
  } catch (const dnnl::error &e) {
    return runtime::Status::failure(std::string("onednn: ") + e.what());
  }
  return runtime::Status::success();
}

} // namespace

ReorderStep::ReorderStep(std::string name, const memory::desc &from, const memory::desc &to)
    : name_(std::move(name)), from_(from), to_(to),
      reorder_(dnnl::reorder::primitive_desc(cpuEngine(), from_, cpuEngine(), to_)) {}

runtime::Status ReorderStep::run(std::span<void *const> buffers,
                                 const runtime::StepContext &) const {
  return executeOnThisThread(
      reorder_, {{DNNL_ARG_FROM, {from_, buffers[0]}}, {DNNL_ARG_TO, {to_, buffers[1]}}});
}

ConcatStep::ConcatStep(std::string name, const std::vector<memory::desc> &srcs,
                       const memory::desc &dst)
    : name_(std::move(name)), srcs_(srcs), dst_(dst), createdThreads_(omp_get_max_threads()) {
  dnnl::concat::primitive_desc pd(dst_, 1, srcs_, cpuEngine());
  prim_ = dnnl::concat(pd);
}

runtime::Status ConcatStep::run(std::span<void *const> buffers,
                                const runtime::StepContext &ctx) const {
  ScopedThreads threads(std::max(1, std::min(ctx.threads, createdThreads_)));
  std::vector<std::pair<int, std::pair<memory::desc, void *>>> args;
  for (size_t i = 0; i < srcs_.size(); ++i)
    args.push_back({DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i), {srcs_[i], buffers[i]}});
  args.push_back({DNNL_ARG_DST, {dst_, buffers[srcs_.size()]}});
  return executeOnThisThread(prim_, args);
}

} // namespace kiln::runtime::onednn
