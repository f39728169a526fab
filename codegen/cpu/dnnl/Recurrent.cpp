//===- Recurrent.cpp - lstm, gru and rnn as one call per layer -------------===//
//
// An `lstm`, `gru` or `rnn` node with constant weights becomes one
// RecurrentStep (runtime/dnnl/RecurrentStep.h): the ONNX weights [D, G*H,
// I] / [D, G*H, H] are transposed into oneDNN's ldigo with the gates in
// oneDNN's order (LSTM: ONNX i o f c -> oneDNN i f c o; GRU z r h and RNN
// keep theirs), and the two ONNX biases are summed per gate (LBR GRU keeps
// the recurrent candidate bias apart: its fourth bias gate).
//
// Note [Recurrent layers]
// The unrolled form (frontend/onnx/OnnxRNN.cpp: one small matmul and a few
// fused kernels per step) paid a library call per step, ~5 us each. One
// oneDNN RNN primitive per layer, measured on the zoo models (this 2-vCPU
// AVX-512 VM, /tmp benchmark of the primitives alone, median of 2000 runs):
// lstm (2 layers, bidirectional, seq 16, batch 2, hidden 64) 140 us at 1
// thread (unrolled model: 294 us), 210 us at 2 threads; gru (2 layers, seq
// 12, batch 3, hidden 48, LBR: oneDNN 2.6 has only its reference
// implementation for it) 36 us (unrolled: 77 us). A second thread makes
// these small layers slower (OpenMP fork/join per step).
//
// Kiln's own kernel (runtime/dnnl/RecurrentKernel.h: a register-blocked
// GEMM that loads each recurrent weight once per step for all batch rows,
// from 64-byte aligned column panels, and the gates with a vectorized exp)
// is faster still at these sizes, in the compile-time timings of `kiln
// compile --threads 1` (us per layer, kiln / oneDNN): lstm 46 / 51 and 65
// / 87, gru 12 / 15 and 12 / 14, rnn_tanh 3 / 7 (2026-12-06; with weights
// only 16-byte aligned, Kiln's lstm layers took 63 and 89 us, slower than
// oneDNN's: a 64-byte load straddling two cache lines halved the recurrent
// GEMM's speed in a micro-benchmark). oneDNN 2.6 has no AVX2
// brgemm RNN, so under --cpu haswell its reference one is 3-4x slower than
// on AVX-512 and Kiln's AVX2 code (16 accumulators spill there) slower
// still. So each layer is built as every candidate that applies (Kiln's
// kernel on one thread; oneDNN's primitive for one thread and for the
// compile's count), each timed, and the fastest kept, like the
// plain/blocked choice of convs; `--recurrent=kiln|onednn` forces one.
//
// Except where Kiln's AVX-512 kernel always won: a sweep of one-layer
// models (sequence 16, input = hidden, `kiln compile --threads 1`, this
// AVX-512 VM, 2026-12-07; us, kiln / oneDNN) at batch 1 gave LBR GRU 4.5
// / 12.0 at hidden 32 to 779 / 976 at 512, LSTM 4.8 / 10.8 to 1082 /
// 1660, RNN 2.1 / 5.4 to 255 / 426; at batch x hidden 256 and 512 (batch
// 8) Kiln's LBR GRU and LSTM were 1.04-1.36x faster still, but oneDNN's
// RNN won at 256 (12.9 vs 13.7); from 1024 up they were level (within 4%)
// or oneDNN faster (brgemm LSTM and RNN at batch 32 by up to 1.45x).
// Timing oneDNN is not free: its first primitive run in a process
// initializes its GEMMs, 31 ms of the gru zoo model's 38 ms cold compile.
// So in a compile for one thread (what the sweep measured), with Kiln's
// kernel on AVX-512 and hidden <= kKilnAlwaysFaster, at batch 1, or at
// batch x hidden <= kKilnAlwaysFaster for an LBR GRU or an LSTM, oneDNN's
// primitive is neither built nor timed (gru's cold compile: 1.6 ms);
// elsewhere, and for more threads, every candidate is timed as above.
//
//===----------------------------------------------------------------------===//
#include "codegen/cpu/dnnl/Internal.h"
#include "runtime/dnnl/RecurrentKernel.h"
#include "runtime/dnnl/RecurrentStep.h"

#include <algorithm>
#include <chrono>

namespace kiln::codegen::cpu::onednn {

namespace {

using runtime::onednn::RecurrentSpec;
using runtime::onednn::RecurrentStep;

/// oneDNN's gate index of ONNX gate `k`.
int64_t dnnlGate(RecurrentSpec::Cell cell, int64_t k) {
  static const int64_t kLstm[] = {0, 3, 1, 2}; // i o f c -> i f c o
  return cell == RecurrentSpec::Cell::Lstm ? kLstm[k] : k;
}

/// Note [Recurrent layers]: up to this batch x hidden, Kiln's AVX-512 LBR
/// GRU and LSTM beat oneDNN's primitives on every layer measured.
constexpr int64_t kKilnAlwaysFaster = 512;

/// Median seconds of a few runs of `step` on zeroed buffers of `bytes`.
double timeStep(const RecurrentStep &step, const std::vector<size_t> &bytes, int threads) {
  std::vector<std::vector<float>> data;
  std::vector<void *> buffers;
  for (size_t b : bytes) {
    data.emplace_back(std::max<size_t>(b / sizeof(float), 1), 0.f);
    buffers.push_back(data.back().data());
  }
  runtime::StepContext ctx;
  ctx.threads = std::max(1, threads);
  std::vector<double> times;
  for (int i = 0; i < 7; ++i) {
    auto start = std::chrono::steady_clock::now();
    if (!step.run(buffers, ctx).ok())
      return 1e30;
    times.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

} // namespace

FailureOr<OneDnnCall> buildRecurrentCall(const Node &n, const OneDnnOptions &options,
                                         std::string &why) {
  RecurrentSpec spec;
  std::string direction;
  if (n.kind() == OpKind::Lstm) {
    spec.cell = RecurrentSpec::Cell::Lstm;
    direction = LstmOp(n).direction();
  } else if (n.kind() == OpKind::Gru) {
    GruOp op(n);
    spec.cell = op.linear_before_reset() ? RecurrentSpec::Cell::LbrGru : RecurrentSpec::Cell::Gru;
    direction = op.direction();
  } else {
    spec.cell = RecurrentSpec::Cell::Rnn;
    direction = RnnOp(n).direction();
  }
  spec.direction = direction == "reverse"         ? RecurrentSpec::Direction::Reverse
                   : direction == "bidirectional" ? RecurrentSpec::Direction::Bidirectional
                                                  : RecurrentSpec::Direction::Forward;
  for (const Value *v : n.operands())
    if (v->type().dtype != DType::F32) {
      why = "oneDNN's RNN primitives take f32 here, got " + v->type().str();
      return failure();
    }
  // The step reads x, h0 and c0 row-major (Note [Channels-last buffers]).
  for (unsigned i : {0u, 4u, 5u})
    if (i < n.numOperands() && options.channelsLast && options.channelsLast(n.operand(i))) {
      why = "operand " + std::to_string(i) + " is stored channels-last";
      return failure();
    }
  const Tensor *w = constantOf(n.operand(1)), *r = constantOf(n.operand(2));
  const Tensor *b = n.numOperands() > 3 ? constantOf(n.operand(3)) : nullptr;
  if (!w || !r || (n.numOperands() > 3 && !b)) {
    why = "its weights and biases are computed at run time; oneDNN's RNN primitives need them "
          "constant";
    return failure();
  }
  const std::vector<int64_t> xs = sizesOf(n.operand(0));
  spec.seq = xs[0];
  spec.batch = xs[1];
  spec.input = xs[2];
  spec.hidden = r->dim(2);
  spec.hasH0 = n.numOperands() > 4;
  spec.hasC0 = n.numOperands() > 5;
  if (spec.seq == 0 || spec.batch == 0 || spec.input == 0) {
    why = "oneDNN's RNN primitives take no zero-size sequence, batch or input";
    return failure();
  }
  const int64_t d = spec.dirs(), g = spec.gates(), h = spec.hidden, in = spec.input;
  // ldigo weights, ldgo bias, gates in oneDNN's order.
  auto su = [](int64_t v) { return static_cast<size_t>(v); };
  std::vector<float> wl(su(d * in * g * h)), wi(su(d * h * g * h)),
      bias(su(d * spec.biasGates() * h), 0.f);
  const float *wp = w->data<float>(), *rp = r->data<float>();
  for (int64_t dir = 0; dir < d; ++dir)
    for (int64_t k = 0; k < g; ++k) {
      const int64_t to = dnnlGate(spec.cell, k);
      for (int64_t j = 0; j < h; ++j) {
        const int64_t row = dir * g * h + k * h + j;
        for (int64_t i = 0; i < in; ++i)
          wl[su(((dir * in + i) * g + to) * h + j)] = wp[row * in + i];
        for (int64_t i = 0; i < h; ++i)
          wi[su(((dir * h + i) * g + to) * h + j)] = rp[row * h + i];
        if (!b)
          continue;
        const float *bp = b->data<float>() + dir * 2 * g * h;
        const float wb = bp[k * h + j], rb = bp[g * h + k * h + j];
        const int64_t gb = spec.biasGates();
        if (spec.cell == RecurrentSpec::Cell::LbrGru && k == 2) {
          bias[su((dir * gb + 2) * h + j)] = wb;
          bias[su((dir * gb + 3) * h + j)] = rb;
        } else {
          bias[su((dir * gb + to) * h + j)] = wb + rb;
        }
      }
    }

  // The buffers: x, h0?, c0?, then the results.
  OneDnnCall call;
  call.operands.push_back(n.operand(0));
  for (unsigned i = 4; i < n.numOperands(); ++i)
    call.operands.push_back(n.operand(i));
  for (unsigned i = 0; i < n.numResults(); ++i)
    call.results.push_back(n.result(i));
  std::vector<size_t> bytes;
  for (const Value *v : call.operands)
    bytes.push_back(static_cast<size_t>(numElements(sizesOf(v))) * sizeof(float));
  for (const Value *v : call.results)
    bytes.push_back(static_cast<size_t>(numElements(sizesOf(v))) * sizeof(float));
  const std::string name = std::string(n.mnemonic()) + " %" + n.result(0)->name();
  // The candidates: Kiln's kernel (one thread, and one per direction of a
  // bidirectional layer), oneDNN's primitive for one thread and for the
  // compile's count; each timed, the fastest kept.
  const int threads = options.threads > 0 ? options.threads : currentThreads();
  struct Candidate {
    std::shared_ptr<RecurrentStep> step;
    std::string label;
    double seconds = 0;
  };
  std::vector<Candidate> candidates;
  std::string refusal;
  auto add = [&](RecurrentSpec::Impl impl, int t, std::string label) {
    spec.impl = impl;
    spec.threads = t;
    try {
      candidates.push_back({std::make_shared<RecurrentStep>(name, spec, wl, wi, bias), label});
    } catch (const std::exception &e) { // dnnl::error, std::bad_alloc
      refusal = e.what();
    }
  };
  const bool kiln = runtime::onednn::RecurrentKernel::supports(spec.cell) &&
                    options.recurrent != codegen::RecurrentChoice::Library;
  if (kiln)
    add(RecurrentSpec::Impl::Kiln, 1, "kiln 1 thread");
  if (kiln && threads > 1 && spec.dirs() == 2) // one thread per direction
    add(RecurrentSpec::Impl::Kiln, 2, "kiln 2 threads");
  // Note [Recurrent layers]: where Kiln's AVX-512 kernel always won.
  const bool kilnAlwaysFaster =
      kiln && threads == 1 && spec.hidden <= kKilnAlwaysFaster && !candidates.empty() &&
      candidates.front().step->impl() == "kiln:avx512" &&
      (spec.batch == 1 ||
       (spec.cell != RecurrentSpec::Cell::Rnn && spec.batch * spec.hidden <= kKilnAlwaysFaster));
  if (!kiln || (options.recurrent == codegen::RecurrentChoice::Measure && !kilnAlwaysFaster)) {
    add(RecurrentSpec::Impl::OneDnn, 1, "onednn 1 thread");
    if (threads > 1)
      add(RecurrentSpec::Impl::OneDnn, threads, "onednn " + std::to_string(threads) + " threads");
  }
  if (candidates.empty()) {
    why = "oneDNN refuses this " + std::string(n.mnemonic()) + ": " + refusal;
    return failure();
  }
  size_t best = 0;
  if (kilnAlwaysFaster && options.recurrent == codegen::RecurrentChoice::Measure)
    call.measurement = "oneDNN not timed: Kiln's AVX-512 kernel is faster at batch " +
                       std::to_string(spec.batch) + ", hidden " + std::to_string(spec.hidden);
  if (candidates.size() > 1) {
    for (Candidate &c : candidates) {
      c.seconds = timeStep(*c.step, bytes, c.step->spec().threads);
      char buf[96];
      std::snprintf(buf, sizeof(buf), "%s%s %.1f us", call.measurement.empty() ? "" : ", ",
                    c.label.c_str(), c.seconds * 1e6);
      call.measurement += buf;
    }
    for (size_t i = 1; i < candidates.size(); ++i)
      if (candidates[i].seconds < candidates[best].seconds)
        best = i;
  }
  call.step = candidates[best].step;
  call.detail = candidates[best].step->detail();
  call.numNodes = 1;
  return call;
}

} // namespace kiln::codegen::cpu::onednn
