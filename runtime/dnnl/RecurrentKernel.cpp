//===- RecurrentKernel.cpp - Kiln's own small recurrent layers ------------===//
//
// See RecurrentKernel.h. The float vectors are 16 lanes (one AVX-512
// register, two AVX2 ones, four SSE ones); the GEMM keeps a block of up to
// 4 rows x 64 columns in registers while it walks the shared dimension, so
// a weight row is loaded once for all the rows of the block.
//
//===----------------------------------------------------------------------===//
#include "runtime/dnnl/RecurrentKernel.h"

#include "runtime/dnnl/DnnlSteps.h"

#include <algorithm>
#include <atomic>
#include <cstring>

// The vector helpers pass 64-byte vectors by value; they are internal and
// always inlined, so no call crosses the ABI GCC warns about.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace kiln::runtime::onednn {
namespace {

namespace base {
#include "runtime/dnnl/RecurrentKernelBody.inc"
} // namespace base

#pragma GCC push_options
#pragma GCC target("arch=haswell")
namespace v3 {
#include "runtime/dnnl/RecurrentKernelBody.inc"
} // namespace v3
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("arch=skylake-avx512")
namespace v4 {
#include "runtime/dnnl/RecurrentKernelBody.inc"
} // namespace v4
#pragma GCC pop_options

// Each function compiled for three levels; RecurrentKernel picks one by
// oneDNN's effective ISA, which --cpu caps (so `--cpu haswell` and
// `--cpu x86-64` run and test the AVX2 and SSE2 code on any machine).
using GemmFn = void (*)(const float *, int64_t, int64_t, int64_t, const float *, int64_t, float *,
                        int64_t, const float *, int64_t);
using CellsFn = void (*)(RecurrentSpec::Cell, const float *, const float *, int64_t, float *,
                         float *, int64_t, int64_t, int64_t);

struct LevelFns {
  GemmFn gemm;
  CellsFn cells;
  const char *name;
};
const LevelFns kLevels[] = {{base::gemm, base::cells, "sse2"},
                            {v3::gemm, v3::cells, "avx2"},
                            {v4::gemm, v4::cells, "avx512"}};

/// The level oneDNN's effective ISA allows: 2 AVX-512, 1 AVX2, 0 SSE2.
int levelOfIsa() {
  const unsigned isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
  auto has = [&](dnnl_cpu_isa_t want) {
    return (isa & static_cast<unsigned>(want)) == static_cast<unsigned>(want);
  };
  return has(dnnl_cpu_isa_avx512_core) ? 2 : has(dnnl_cpu_isa_avx2) ? 1 : 0;
}

int64_t roundUp(int64_t v, int64_t m) {
  return (v + m - 1) / m * m;
}

} // namespace

bool RecurrentKernel::supports(RecurrentSpec::Cell cell) {
  return cell != RecurrentSpec::Cell::Gru;
}

RecurrentKernel::RecurrentKernel(const RecurrentSpec &spec, const std::vector<float> &weightsLayer,
                                 const std::vector<float> &weightsIter,
                                 const std::vector<float> &bias)
    : spec_(spec), level_(levelOfIsa()) {
  const int64_t d = spec.dirs(), g = spec.gates(), h = spec.hidden, in = spec.input;
  const int64_t gh = g * h, gb = spec.biasGates();
  cols_ = roundUp(gh, base::kBlock);
  auto su = [](int64_t v) { return static_cast<size_t>(v); };
  wt_.assign(su(d * in * cols_), 0.f);
  rt_.assign(su(d * h * cols_), 0.f);
  inBias_.assign(su(d * cols_), 0.f);
  recBias_.assign(su(d * cols_), 0.f);
  // W^T and R^T of each direction in the GEMM's panels: column c of row k
  // at (c / kBlock) * depth * kBlock + k * kBlock + c % kBlock.
  auto pack = [&](const std::vector<float> &from, int64_t depth, auto &to, int64_t dir) {
    for (int64_t k = 0; k < depth; ++k)
      for (int64_t c = 0; c < gh; ++c)
        to[su(dir * depth * cols_ + c / base::kBlock * depth * base::kBlock + k * base::kBlock +
              c % base::kBlock)] = from[su((dir * depth + k) * gh + c)];
  };
  for (int64_t dir = 0; dir < d; ++dir) {
    pack(weightsLayer, in, wt_, dir);
    pack(weightsIter, h, rt_, dir);
    const float *b = &bias[su(dir * gb * h)];
    std::copy_n(b, gh, &inBias_[su(dir * cols_)]);
    if (spec.cell == RecurrentSpec::Cell::LbrGru) // its fourth bias gate
      std::copy_n(b + 3 * h, h, &recBias_[su(dir * cols_ + 2 * h)]);
  }
}

const char *RecurrentKernel::isa() const {
  return kLevels[level_].name;
}

uint64_t RecurrentKernel::bytes() const {
  return (wt_.size() + rt_.size() + inBias_.size() + recBias_.size()) * sizeof(float);
}

bool RecurrentKernel::run(const float *x, const float *h0, const float *c0, float *y, float *yh,
                          float *yc, int threads) const {
  const RecurrentSpec &s = spec_;
  const int64_t S = s.seq, B = s.batch, H = s.hidden, I = s.input, D = s.dirs();
  const int64_t hpad = roundUp(H, base::kLanes), stride = cols_ + base::kLanes;
  const size_t floats = static_cast<size_t>(S * B * stride + B * stride + 2 * B * hpad);
  const LevelFns &fn = kLevels[level_];
  // One direction, in the calling thread's scratch.
  std::atomic<bool> ok{true};
  auto direction = [&](int64_t d) {
    float *xw = nullptr;
    try { // no exception may leave the parallel region below
      xw = static_cast<float *>(threadScratch(floats * sizeof(float)));
    } catch (const std::exception &) {
      ok = false;
      return;
    }
    std::memset(xw, 0, floats * sizeof(float));
    float *rec = xw + S * B * stride, *h = rec + B * stride, *c = h + B * hpad;
    const int64_t cd = d * cols_;
    fn.gemm(x, S * B, I, I, &wt_[static_cast<size_t>(d * I * cols_)], cols_, xw, stride,
            &inBias_[static_cast<size_t>(cd)], 0);
    for (int64_t n = 0; n < B; ++n) {
      const int64_t at = (d * B + n) * H;
      for (int64_t j = 0; j < H; ++j) {
        h[n * hpad + j] = h0 ? h0[at + j] : 0.f;
        c[n * hpad + j] = c0 ? c0[at + j] : 0.f;
      }
    }
    const bool reverse = s.direction == RecurrentSpec::Direction::Reverse || d == 1;
    for (int64_t step = 0; step < S; ++step) {
      const int64_t t = reverse ? S - 1 - step : step;
      fn.gemm(h, B, hpad, H, &rt_[static_cast<size_t>(d * H * cols_)], cols_, rec, stride,
              &recBias_[static_cast<size_t>(cd)], 0);
      fn.cells(s.cell, xw + t * B * stride, rec, stride, h, c, B, H, hpad);
      for (int64_t n = 0; n < B; ++n)
        std::memcpy(y + ((t * D + d) * B + n) * H, h + n * hpad,
                    static_cast<size_t>(H) * sizeof(float));
    }
    for (int64_t n = 0; n < B; ++n) {
      const int64_t at = (d * B + n) * H;
      std::memcpy(yh + at, h + n * hpad, static_cast<size_t>(H) * sizeof(float));
      if (yc)
        std::memcpy(yc + at, c + n * hpad, static_cast<size_t>(H) * sizeof(float));
    }
  };
  // The directions of a bidirectional layer are independent: one thread
  // each when two may run.
  if (D == 2 && threads >= 2) {
#pragma omp parallel for num_threads(2) schedule(static, 1)
    for (int64_t d = 0; d < 2; ++d)
      direction(d);
  } else {
    for (int64_t d = 0; d < D; ++d)
      direction(d);
  }
  return ok;
}

} // namespace kiln::runtime::onednn
