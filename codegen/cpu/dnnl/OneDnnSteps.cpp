//===- OneDnnSteps.cpp - Library ops through oneDNN 2.6 ---------*- C++ -*-===//
//
// Builds one oneDNN primitive per library group (anchor + post-ops) at
// compile time and wraps it in a runtime ExternStep. The steps:
//   1. describe the anchor (Anchor: its oneDNN dims, runtime and constant
//      inputs, and a function creating its primitive descriptor for given
//      attributes and activation layout);
//   2. map the longest prefix of the epilogue chain to post-ops (PostOp);
//   3. create the primitive for each candidate layout, and if none exists
//      (or only oneDNN's reference one, for an epilogue) retry with
//      non-standard broadcasts expanded, then with a shorter epilogue;
//   4. reorder constant weights once into the primitive's layout and
//      create the reorders the activations need at run time.
//
// Note [Conv layouts]
// On AVX2 oneDNN's direct convolutions want blocked activations (nChw8c);
// with plain nchw activations it picks an im2col + GEMM implementation.
// Our buffers are plain (the runtime ABI), so a blocked conv pays a reorder
// of its input and of its output on every run (unless its neighbours keep
// channels-last buffers). DnnlLayoutPolicy::Measure builds both primitives
// and times them on the compile thread count (best of a few runs, the
// reorders included), keeping the faster. Measured over every conv and
// pool of both zoos (968 calls, at native/1 thread, native/2 threads and
// --cpu haswell/1 thread), the blocked primitive was faster on 888 to 921
// of them, often by 3-14x (depthwise convs, first convs over 3 channels);
// plain won only im2col + GEMM convs (mostly 1x1) and a few pools, by at
// most 1.7x, and always-blocked made no model's summed library time more
// than 1.4% slower (swin_t's patch-embedding conv: 0.1 ms). The timing,
// though, was most of a cold compile (densenet121: 674 of 1365 ms;
// small_cnn: 35 of 42 ms). So Blocked is the default and Measure an
// option (`--dnnl-layout=measure`). A same-shape residual add uses the sum
// post-op with blocked layouts (the residual is reordered straight into
// the destination) and a binary add with plain ones (read in place, no
// copy).
//
// Note [Partly expanded operands]
// oneDNN 2.6's JIT kernels read a binary post-op operand only in some
// broadcasts; for another (a causal mask [1, 1, S, S] added to attention
// scores [B, H, S, S]) they fall back to its reference kernels, 1000x
// slower. Such an operand is then expanded, a constant once here, a run-time
// operand per run (RuntimeArg::expand). Expanded to the dst's shape, a mask
// costs as much memory as the scores it is added to, per call: causal_lm's
// constants grew by B*4*S*S*4 bytes per attention (16.9 MiB at batch 32 x
// sequence 128, against 0.9 MiB of weights). oneDNN's JIT matmuls (brgemm
// on AVX-512, gemm:jit below it) read an operand that varies along the
// batch and the last two dims ([B, 1, S, S], a per-mb-spatial broadcast),
// so it is expanded over dim 0 first, which saves the heads' factor, and to
// the full shape only when that is refused.
//
//===----------------------------------------------------------------------===//
#include "codegen/cpu/dnnl/Internal.h"

#include <cassert>

#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <unordered_map>

namespace kiln::codegen::cpu {

using namespace onednn;

namespace {

//===----------------------------------------------------------------------===//
// Assembly
//===----------------------------------------------------------------------===//

/// The step's runtime operands, deduplicated.
class Operands {
public:
  int indexOf(const Value *v) {
    auto it = std::find(values_.begin(), values_.end(), v);
    if (it != values_.end())
      return static_cast<int>(it - values_.begin());
    values_.push_back(v);
    return static_cast<int>(values_.size() - 1);
  }
  std::vector<const Value *> &values() { return values_; }

private:
  std::vector<const Value *> values_;
};

struct Candidate {
  std::shared_ptr<DnnlStep> step;
  std::vector<const Value *> operands;
  std::vector<const Value *> channelsLastOperands;
  std::string detail;
  bool blocked = false;
};

bool isStandardBroadcast(const dims &other, const dims &dst) {
  bool scalar = true, channel = dst.size() >= 2;
  for (size_t i = 0; i < dst.size(); ++i) {
    scalar &= other[i] == 1;
    if (i != 1)
      channel &= other[i] == 1;
  }
  return scalar || channel || other == dst;
}

/// How far assemble() expands a binary operand that oneDNN's JIT kernels
/// cannot broadcast (Note [Partly expanded operands]).
enum class Expand { None, Batch, Full };

/// The dims a binary operand of dims `other` is given to oneDNN with, for
/// a dst of `dst`: as it is when its broadcast is standard or `expand` is
/// None; Batch: its dim 0 made the dst's (oneDNN 2.6's JIT matmuls read a
/// causal mask [1, 1, S, S] only as [B, 1, S, S], not over the heads too);
/// Full: the dst's. `other` has `dst`'s rank (binary post-ops are
/// broadcast to it).
dims expandedDims(const dims &other, const dims &dst, Expand expand) {
  assert(other.size() == dst.size());
  if (expand == Expand::None || isStandardBroadcast(other, dst))
    return other;
  if (expand == Expand::Full || other.empty())
    return dst;
  dims d = other;
  d[0] = dst[0];
  return d;
}

/// Creates the primitive for `ops` with the given layout; throws
/// dnnl::error when oneDNN has no implementation.
Candidate assemble(const Anchor &a, const std::vector<PostOp> &ops, bool blocked, Expand expand,
                   const Value *result, const std::function<bool(const Value *)> &channelsLast) {
  auto isCL = [&](const Value *v) {
    return a.supportsBlocked && channelsLast && v && v->type().shape.size() >= 3 && channelsLast(v);
  };
  dnnl::engine &eng = cpuEngine();
  auto step = std::make_shared<DnnlStep>();
  step->createdThreads = currentThreads(); // set by buildOneDnnCall's ScopedThreads
  Operands operands;
  dnnl::post_ops po;
  std::string opsText;
  bool usedSum = false;
  struct BinaryUse {
    int index;
    const PostOp *op;
    bool expanded;
    bool channelsLast;
    dims shape; ///< as oneDNN reads it (expandedDims)
  };
  std::vector<BinaryUse> binaries;
  const Value *sumValue = nullptr;
  for (size_t i = 0; i < ops.size(); ++i) {
    const PostOp &p = ops[i];
    opsText += opsText.empty() ? "" : ", ";
    if (p.kind == PostOp::Kind::Eltwise) {
      po.append_eltwise(1.f, p.alg, p.alpha, p.beta);
      opsText += std::string("eltwise_") + algorithmName(p.alg);
      continue;
    }
    const bool full = p.otherDims == a.dstDims;
    const bool constant = p.constant || !p.owned.isNull();
    if (blocked && a.supportsSum && !usedSum && full && !constant &&
        p.alg == algorithm::binary_add && p.scale == 1.f) {
      po.append_sum(1.f);
      usedSum = true;
      sumValue = p.other;
      opsText += "sum";
      continue;
    }
    const dims shape = expandedDims(p.otherDims, a.dstDims, expand);
    const bool otherCL = !constant && full && isCL(p.other);
    po.append_binary(p.alg, otherCL ? channelsLastMd(a.dstDims) : plainMd(shape));
    binaries.push_back({static_cast<int>(i), &p, shape != p.otherDims, otherCL, shape});
    opsText += algorithmName(p.alg);
  }
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  attr.set_post_ops(po);
  dnnl::primitive_desc pd = a.makePd(attr, blocked);
  // A binary operand spanning two or more dims must be laid out like the
  // primitive's dst: oneDNN 2.6's nhwc kernels read it with the dst's
  // strides whatever its descriptor says (wrong sums, no error).
  for (const BinaryUse &b : binaries) {
    const dims &od = b.shape;
    if (std::count_if(od.begin(), od.end(), [](int64_t d) { return d != 1; }) < 2)
      continue;
    const memory::desc want = b.channelsLast ? channelsLastMd(a.dstDims) : plainMd(a.dstDims);
    if (pd.dst_desc() != want)
      throw dnnl::error(dnnl_unimplemented, "a multi-dim binary operand in another layout");
  }

  dnnl::stream s(eng);
  std::string layouts;
  for (const AnchorInput &in : a.inputs) {
    const memory::desc primMd = pd.query_md(dnnl::query::exec_arg_md, in.arg);
    const char *argName = in.arg == DNNL_ARG_SRC       ? "src"
                          : in.arg == DNNL_ARG_WEIGHTS ? "wei"
                                                       : "bia";
    if (in.arg != DNNL_ARG_BIAS)
      layouts += std::string(argName) + " " + layoutString(primMd) + " ";
    const Tensor *ct = in.owned.isNull() ? in.constant : &in.owned;
    if (ct) {
      // Constants: reordered once, here, when the primitive wants another
      // layout; otherwise used in place.
      memory user(in.userMd, eng, const_cast<void *>(ct->rawData()));
      if (primMd == in.userMd) {
        step->keepAlive.push_back(std::make_shared<Tensor>(*ct)); // used in place
        step->constArgs.push_back({in.arg, user});
      } else {
        memory packed(primMd, eng);
        dnnl::reorder(user, packed).execute(s, user, packed);
        step->constArgs.push_back({in.arg, packed});
      }
      continue;
    }
    const memory::desc userMd =
        in.arg == DNNL_ARG_SRC && isCL(in.value) ? channelsLastMd(in.userMd.dims()) : in.userMd;
    RuntimeArg r{in.arg, operands.indexOf(in.value), userMd, std::nullopt, primMd, false, {}, {}};
    if (primMd != userMd)
      r.toPrim = dnnl::reorder(dnnl::reorder::primitive_desc(eng, userMd, eng, primMd));
    step->runtimeArgs.push_back(std::move(r));
  }
  for (const BinaryUse &b : binaries) {
    const int arg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(b.index) | DNNL_ARG_SRC_1;
    const PostOp &p = *b.op;
    const Tensor *ct = p.owned.isNull() ? p.constant : &p.owned;
    if (ct) {
      Tensor t = *ct;
      if (b.expanded) {
        Tensor e = Tensor::zeros(DType::F32, b.shape);
        broadcastCopy(t.data<float>(), p.otherDims, b.shape, e.mutableData<float>());
        t = e;
      }
      step->keepAlive.push_back(std::make_shared<Tensor>(t));
      step->constArgs.push_back(
          {arg, memory(plainMd(b.shape), eng, const_cast<void *>(t.rawData()))});
      continue;
    }
    RuntimeArg r{arg,
                 operands.indexOf(p.other),
                 b.channelsLast ? channelsLastMd(a.dstDims) : plainMd(b.shape),
                 std::nullopt,
                 memory::desc(),
                 b.expanded,
                 p.otherDims,
                 b.shape,
                 p.scale};
    step->runtimeArgs.push_back(std::move(r));
  }
  s.wait();

  step->dstUserMd = isCL(result) ? channelsLastMd(a.dstDims) : plainMd(a.dstDims);
  step->dstPrimMd = pd.dst_desc();
  if (step->dstPrimMd != step->dstUserMd)
    step->dstFromPrim =
        dnnl::reorder(dnnl::reorder::primitive_desc(eng, step->dstPrimMd, eng, step->dstUserMd));
  if (sumValue) {
    step->sumBuffer = operands.indexOf(sumValue);
    step->sumUserMd = isCL(sumValue) ? channelsLastMd(a.dstDims) : plainMd(a.dstDims);
    if (step->sumUserMd != step->dstPrimMd)
      step->sumToPrim =
          dnnl::reorder(dnnl::reorder::primitive_desc(eng, step->sumUserMd, eng, step->dstPrimMd));
  }
  layouts += "dst " + layoutString(step->dstPrimMd);
  step->scratchMd = pd.scratchpad_desc();
  step->prim = dnnl::primitive(pd);
  step->outBuffer = operands.indexOf(result);

  Candidate c;
  c.operands = operands.values();
  c.operands.pop_back(); // the result goes last, by contract
  for (const AnchorInput &in : a.inputs)
    if (!in.constant && in.owned.isNull() && in.arg == DNNL_ARG_SRC && isCL(in.value))
      c.channelsLastOperands.push_back(in.value);
  for (const BinaryUse &b : binaries)
    if (b.channelsLast)
      c.channelsLastOperands.push_back(b.op->other);
  if (sumValue && isCL(sumValue))
    c.channelsLastOperands.push_back(sumValue);
  c.blocked = blocked;
  c.detail = std::string(pd.impl_info_str()) + " " + layouts;
  if (!opsText.empty())
    c.detail += " post-ops [" + opsText + "]";
  step->name = "onednn " + a.kindName + " %" + result->name();
  c.step = std::move(step);
  return c;
}

/// Best-of-N wall time of `c` on zero-filled buffers, in seconds.
double timeCandidate(const Candidate &c, const Value *result, int threads) {
  std::vector<std::vector<float>> data;
  std::vector<void *> ptrs;
  for (const Value *v : c.operands) {
    data.emplace_back(static_cast<size_t>(std::max<int64_t>(numElements(sizesOf(v)), 1)), 0.5f);
    ptrs.push_back(data.back().data());
  }
  data.emplace_back(static_cast<size_t>(std::max<int64_t>(numElements(sizesOf(result)), 1)));
  ptrs.push_back(data.back().data());
  runtime::StepContext ctx{threads > 0 ? threads : omp_get_max_threads()};
  double best = std::numeric_limits<double>::infinity();
  for (int i = 0; i < 4; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    if (!c.step->run(ptrs, ctx).ok())
      break;
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (i > 0)
      best = std::min(best, dt);
  }
  return best;
}

} // namespace

std::shared_ptr<const runtime::ExternStep> makeToRowMajorStep(const Value *v) {
  return std::make_shared<ReorderStep>("to-row-major %" + v->name(), channelsLastMd(sizesOf(v)),
                                       plainMd(sizesOf(v)));
}

std::shared_ptr<const runtime::ExternStep> makeChannelsLastConcatStep(const Node &concat,
                                                                      std::string &why) {
  try {
    std::vector<memory::desc> srcs;
    for (const Value *v : concat.operands())
      srcs.push_back(channelsLastMd(sizesOf(v)));
    return std::make_shared<ConcatStep>("onednn concat %" + concat.result()->name(), srcs,
                                        channelsLastMd(sizesOf(concat.result())));
  } catch (const dnnl::error &e) {
    why = std::string("oneDNN concat: ") + e.what();
    return nullptr;
  }
}

// Note [Small calls on one thread]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A oneDNN primitive created for T threads opens an OpenMP parallel region
// on every call, a few microseconds at T = 2 on this 2-vCPU machine, while
// the recurrent matmul of an unrolled LSTM step (2 x 64 by 64 x 256: 32K
// multiply-adds) computes in about one: the LSTM model ran slower at two
// threads than at one (0.325 vs 0.289 ms). A matmul or gemm of fewer than
// kSerialMacs multiply-adds is created for one thread (the step records it
// and never runs wider).
constexpr int64_t kSerialMacs = int64_t(1) << 17;

bool runsOnOneThread(const Anchor &a) {
  if ((a.kind != OpKind::MatMul && a.kind != OpKind::Gemm) || a.inputs.empty())
    return false;
  const dims src = a.inputs.front().userMd.dims();
  if (src.empty())
    return false;
  return product(a.dstDims) * src.back() < kSerialMacs;
}

FailureOr<OneDnnCall> buildOneDnnCall(std::span<const Node *const> nodes,
                                      const OneDnnOptions &options, std::string &why) {
  if (nodes.empty())
    return failure();
  // oneDNN fixes a primitive's thread partitioning when it creates it (from
  // omp_get_max_threads()), so primitives are created for the compile-time
  // thread count. See Note [Conv layouts] for the measurements.
  ScopedThreads threads(options.threads);
  if (nodes[0]->kind() == OpKind::Lstm || nodes[0]->kind() == OpKind::Gru ||
      nodes[0]->kind() == OpKind::Rnn)
    return onednn::buildRecurrentCall(*nodes[0], options, why);
  try {
    auto anchor = makeAnchor(*nodes[0], why);
    if (failed(anchor))
      return failure();
    const Anchor &a = *anchor;
    ScopedThreads serial(runsOnOneThread(a) ? 1 : 0);
    std::vector<std::vector<PostOp>> perNode;
    const Value *chain = nodes[0]->result();
    for (size_t i = 1; i < nodes.size(); ++i) {
      auto ops = mapEpilogueNode(*nodes[i], chain, a);
      if (!ops)
        break;
      perNode.push_back(std::move(*ops));
      chain = nodes[i]->result();
    }
    std::vector<bool> layouts;
    if (!a.supportsBlocked || options.layout == DnnlLayoutPolicy::Plain)
      layouts = {false};
    else if (options.layout == DnnlLayoutPolicy::Blocked)
      layouts = {true};
    else
      layouts = {false, true};
    std::string lastError;
    for (size_t k = perNode.size() + 1; k-- > 0;) {
      std::vector<PostOp> ops = a.ownPostOps;
      for (size_t i = 0; i < k; ++i)
        for (const PostOp &p : perNode[i])
          ops.push_back(p);
      const Value *result = nodes[k]->result();
      std::vector<Candidate> candidates;
      // Batch expands nothing where every binary operand has the dst's dim
      // 0 already: the same primitive as None, not tried twice.
      const bool batchExpands = std::any_of(ops.begin(), ops.end(), [&](const PostOp &p) {
        return p.kind == PostOp::Kind::Binary &&
               expandedDims(p.otherDims, a.dstDims, Expand::Batch) != p.otherDims;
      });
      for (Expand expand : {Expand::None, Expand::Batch, Expand::Full}) {
        if (expand == Expand::Batch && !batchExpands)
          continue;
        for (bool blocked : layouts) {
          try {
            candidates.push_back(assemble(a, ops, blocked, expand, result, options.channelsLast));
          } catch (const dnnl::error &e) {
            lastError = e.what();
          }
        }
        // oneDNN's reference implementations are orders of magnitude slower
        // than its JIT ones (a post-op it cannot fuse sends a matmul there:
        // 128 ms instead of 0.1 ms): the operands expanded (a broadcast the
        // JIT cannot read, such as a causal mask over batch and heads) are
        // tried next, over the batch first, then to the result's shape
        // (Note [Partly expanded operands]), and with a shorter epilogue
        // the rest runs as a kernel instead.
        if (k > 0)
          candidates.erase(
              std::remove_if(candidates.begin(), candidates.end(),
                             [](const Candidate &c) { return c.detail.rfind("ref", 0) == 0; }),
              candidates.end());
        if (!candidates.empty())
          break;
      }
      if (candidates.empty())
        continue;
      // Two candidates with the same implementation and layouts are the
      // same primitive.
      if (candidates.size() == 2 && candidates[0].detail == candidates[1].detail)
        candidates.pop_back();
      size_t best = 0;
      std::string measurement;
      if (candidates.size() > 1) {
        std::vector<double> times;
        for (const Candidate &c : candidates)
          times.push_back(timeCandidate(c, result, options.threads));
        best = static_cast<size_t>(std::min_element(times.begin(), times.end()) - times.begin());
        char buf[128];
        std::snprintf(buf, sizeof(buf), "plain %.1f us, blocked %.1f us", times[0] * 1e6,
                      times[1] * 1e6);
        measurement = buf;
      }
      Candidate &c = candidates[best];
      OneDnnCall call;
      call.step = c.step;
      call.operands = c.operands;
      call.channelsLastOperands = c.channelsLastOperands;
      call.results = {result};
      call.numNodes = k + 1;
      call.detail = c.detail;
      call.measurement = measurement;
      return call;
    }
    why = "oneDNN has no implementation for this " + a.kindName +
          (lastError.empty() ? "" : " (" + lastError + ")");
    return failure();
  } catch (const dnnl::error &e) {
    why = std::string("oneDNN error: ") + e.what();
    return failure();
  }
}

} // namespace kiln::codegen::cpu
