//===- OneDnnSteps.cpp - Library ops through oneDNN 2.6 ---------*- C++ -*-===//
//
// Builds one oneDNN primitive per library group (anchor + post-ops) at
// compile time and wraps it in a runtime ExternStep. The steps:
//   1. describe the anchor (Anchor: its oneDNN dims, runtime and constant
//      inputs, and a function creating its primitive descriptor for given
//      attributes and activation layout);
//   2. map the longest prefix of the epilogue chain to post-ops (PostOp);
//   3. create the primitive for each candidate layout, and if none exists
//      retry with non-standard broadcasts expanded, then with a shorter
//      epilogue;
//   4. reorder constant weights once into the primitive's layout and
//      create the reorders the activations need at run time.
//
// Note [Conv layouts]
// On AVX2 oneDNN's direct convolutions want blocked activations (nChw8c);
// with plain nchw activations it picks an im2col + GEMM implementation.
// Our buffers are plain (the runtime ABI), so a blocked conv pays a reorder
// of its input and of its output on every run. Which is faster depends on
// the shape (large spatial sizes with few channels favour plain; deep
// layers favour blocked), so under DnnlLayoutPolicy::Measure both
// primitives are built and timed on the compile thread count (best of a few
// runs, with the reorders included) and the faster is kept. A same-shape
// residual add uses the sum post-op with blocked layouts (the residual is
// reordered straight into the destination) and a binary add with plain
// ones (read in place, no copy).
//
//===----------------------------------------------------------------------===//
#include "codegen/cpu/dnnl/OneDnnSteps.h"

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
namespace {

using dnnl::algorithm;
using dnnl::memory;
using dims = memory::dims;

dnnl::engine &cpuEngine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

/// One stream per calling thread, created once: a step's run costs
/// microseconds, and creating a stream is a good part of that.
dnnl::stream &threadStream() {
  thread_local dnnl::stream stream(cpuEngine());
  return stream;
}

/// Sets the calling thread's OpenMP thread count while alive (0: leave it).
/// omp_set_num_threads sets the calling thread's ICV only: reentrant.
class ScopedThreads {
public:
  explicit ScopedThreads(int threads) : saved_(omp_get_max_threads()), set_(threads > 0) {
    if (set_)
      omp_set_num_threads(threads);
  }
  ~ScopedThreads() {
    if (set_)
      omp_set_num_threads(saved_);
  }
  ScopedThreads(const ScopedThreads &) = delete;
  ScopedThreads &operator=(const ScopedThreads &) = delete;

private:
  int saved_;
  bool set_;
};

/// Scratch memory per calling thread, grown as needed and kept: steps of a
/// run execute one after the other on the thread that called run(), so
/// they can share it (oneDNN's own scratchpad is per primitive per call).
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

const Tensor *constantOf(const Value *v) {
  const Node *def = v->definingNode();
  if (!def || def->kind() != OpKind::Constant)
    return nullptr;
  const Tensor &t = std::get<Tensor>(def->attr(ConstantOp::value_index));
  return t.isNull() ? nullptr : &t;
}

std::vector<int64_t> sizesOf(const Value *v) {
  return staticSizes(v->type().shape);
}

dims rowMajorStrides(const dims &d) {
  dims s(d.size(), 1);
  for (size_t i = d.size(); i-- > 1;)
    s[i - 1] = s[i] * std::max<int64_t>(d[i], 1);
  return s;
}

/// Dense row-major f32 of `d` (a scalar is [1]).
memory::desc plainMd(dims d) {
  if (d.empty())
    d = {1};
  return memory::desc(d, memory::data_type::f32, rowMajorStrides(d));
}

/// Channels-last f32 of `d` (N, C, spatial...) stored as N, spatial..., C:
/// "acdb" for 4-D. See Note [Channels-last buffers].
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

memory::desc anyMd(const dims &d) {
  return memory::desc(d, memory::data_type::f32, memory::format_tag::any);
}

int64_t product(const dims &d) {
  return std::accumulate(d.begin(), d.end(), int64_t(1), std::multiplies<>());
}

/// The layout of `md` in oneDNN's verbose notation ("abcd", "aBcd8b").
std::string layoutString(const memory::desc &md) {
  const dnnl_memory_desc_t &d = md.data;
  if (d.format_kind != dnnl_blocked)
    return "?";
  const auto &blk = d.format_desc.blocking;
  std::vector<int> order(static_cast<size_t>(d.ndims));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return blk.strides[a] > blk.strides[b]; });
  std::string s;
  for (int i : order) {
    bool blocked = false;
    for (int k = 0; k < blk.inner_nblks; ++k)
      blocked |= blk.inner_idxs[k] == i;
    s += static_cast<char>((blocked ? 'A' : 'a') + i);
  }
  for (int k = 0; k < blk.inner_nblks; ++k)
    s += std::to_string(blk.inner_blks[k]) + static_cast<char>('a' + blk.inner_idxs[k]);
  return s;
}

const char *algorithmName(algorithm a) {
  switch (a) {
  case algorithm::eltwise_relu:
    return "relu";
  case algorithm::eltwise_tanh:
    return "tanh";
  case algorithm::eltwise_elu:
    return "elu";
  case algorithm::eltwise_abs:
    return "abs";
  case algorithm::eltwise_sqrt:
    return "sqrt";
  case algorithm::eltwise_linear:
    return "linear";
  case algorithm::eltwise_soft_relu:
    return "soft_relu";
  case algorithm::eltwise_logistic:
    return "logistic";
  case algorithm::eltwise_exp:
    return "exp";
  case algorithm::eltwise_log:
    return "log";
  case algorithm::eltwise_gelu_tanh:
    return "gelu_tanh";
  case algorithm::eltwise_gelu_erf:
    return "gelu_erf";
  case algorithm::eltwise_clip_v2:
    return "clip";
  case algorithm::eltwise_hardswish:
    return "hardswish";
  case algorithm::binary_add:
    return "binary_add";
  case algorithm::binary_sub:
    return "binary_sub";
  case algorithm::binary_mul:
    return "binary_mul";
  case algorithm::binary_max:
    return "binary_max";
  case algorithm::binary_min:
    return "binary_min";
  default:
    return "?";
  }
}

/// Copies `src` (dims `from`, each 1 or equal to `to`'s) broadcast to the
/// dense row-major `to`.
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

//===----------------------------------------------------------------------===//
// The step
//===----------------------------------------------------------------------===//

/// An activation or weight read from a runtime buffer on every run.
struct RuntimeArg {
  int arg;
  int buffer;
  memory::desc userMd;
  /// When the primitive wants another layout: the reorder into it.
  std::optional<dnnl::reorder> toPrim;
  memory::desc primMd;
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
  memory mem;
};

class DnnlStep final : public runtime::ExternStep {
public:
  std::string name;
  dnnl::primitive prim;
  memory::desc scratchMd;
  std::vector<RuntimeArg> runtimeArgs;
  std::vector<ConstArg> constArgs;
  /// Tensors the constant memories point into.
  std::vector<Tensor> keepAlive;
  int outBuffer = 0;
  memory::desc dstUserMd, dstPrimMd;
  /// Present when the primitive's dst layout is not plain.
  std::optional<dnnl::reorder> dstFromPrim;
  /// The residual of a sum post-op (-1: none), its layout, and its reorder
  /// into the primitive's dst when the layouts differ.
  int sumBuffer = -1;
  memory::desc sumUserMd;
  std::optional<dnnl::reorder> sumToPrim;
  /// The OpenMP thread count the primitive was created under. oneDNN sizes
  /// its per-thread scratch at creation, so a run never uses more threads.
  int createdThreads = 1;

  std::string describe() const override { return name; }

  runtime::Status run(std::span<void *const> buffers,
                      const runtime::StepContext &ctx) const override {
    ScopedThreads threads(std::max(1, std::min(ctx.threads, createdThreads)));
    try {
      dnnl::engine &eng = cpuEngine();
      dnnl::stream &s = threadStream();
      std::unordered_map<int, memory> args;
      for (const ConstArg &c : constArgs)
        args.emplace(c.arg, c.mem);
      std::vector<std::vector<float>> expanded;
      for (const RuntimeArg &r : runtimeArgs) {
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
          for (size_t i = 0; i < scaled.size(); ++i)
            scaled[i] = src[i] * r.scale;
          expanded.push_back(std::move(scaled));
          p = expanded.back().data();
        }
        memory user(r.userMd, eng, p);
        if (r.toPrim) {
          memory m(r.primMd, eng);
          r.toPrim->execute(s, user, m);
          args.emplace(r.arg, m);
        } else {
          args.emplace(r.arg, user);
        }
      }
      memory out(dstUserMd, eng, buffers[static_cast<size_t>(outBuffer)]);
      memory dst = dstFromPrim ? memory(dstPrimMd, eng) : out;
      if (sumBuffer >= 0) {
        void *residual = buffers[static_cast<size_t>(sumBuffer)];
        if (sumToPrim) {
          memory res(sumUserMd, eng, residual);
          sumToPrim->execute(s, res, dst);
        } else {
          std::memcpy(dst.get_data_handle(), residual, dstPrimMd.get_size());
        }
      }
      args.emplace(DNNL_ARG_DST, dst);
      if (scratchMd.get_size() > 0)
        args.emplace(DNNL_ARG_SCRATCHPAD,
                     memory(scratchMd, eng, threadScratch(scratchMd.get_size())));
      prim.execute(s, args);
      if (dstFromPrim)
        dstFromPrim->execute(s, dst, out);
      s.wait();
    } catch (const dnnl::error &e) {
      return runtime::Status::failure(std::string("onednn: ") + e.what());
    } catch (const std::exception &e) { // e.g. std::bad_alloc for scratch memory
      return runtime::Status::failure(std::string("onednn step: ") + e.what());
    }
    return runtime::Status::success();
  }
};

//===----------------------------------------------------------------------===//
// Anchors
//===----------------------------------------------------------------------===//

/// One input of the anchor primitive.
struct AnchorInput {
  int arg;
  /// The graph value; for a constant, its tensor (or a transformed copy
  /// in `owned`) is used at compile time instead.
  const Value *value = nullptr;
  const Tensor *constant = nullptr;
  Tensor owned;
  /// The plain (or strided) layout of the buffer / tensor bytes.
  memory::desc userMd;
};

/// A post-op: eltwise, or binary with a tensor from outside the group.
struct PostOp {
  enum class Kind { Eltwise, Binary } kind = Kind::Eltwise;
  algorithm alg = algorithm::eltwise_relu;
  float alpha = 0, beta = 0;
  const Value *other = nullptr;
  const Tensor *constant = nullptr;
  Tensor owned;
  /// The other operand's dims in the anchor's oneDNN dst rank.
  dims otherDims;
  /// A factor the other operand is scaled by first (gemm's beta).
  float scale = 1.f;
};

struct Anchor {
  std::string kindName;
  /// The anchor's result as the graph sees it, and as oneDNN does (these
  /// differ only for matmul with 1-D operands).
  std::vector<int64_t> graphShape;
  dims dstDims;
  std::vector<AnchorInput> inputs;
  /// Creates the primitive descriptor (throws dnnl::error when oneDNN has
  /// no implementation); `blocked` asks for layout `any` activations.
  std::function<dnnl::primitive_desc(const dnnl::primitive_attr &, bool blocked)> makePd;
  bool supportsBlocked = false;
  /// Whether a same-shape residual may use the `sum` post-op (convs; oneDNN
  /// 2.6's nhwc pooling ignores it).
  bool supportsSum = false;
  /// Post-ops the anchor itself needs (gemm's alpha and C), before the
  /// epilogue's.
  std::vector<PostOp> ownPostOps;
};

/// Window attributes with defaults, oneDNN style (dilation - 1).
struct Window {
  dims strides, dilations, padL, padR;
};

bool readWindow(size_t nsp, const std::vector<int64_t> &strides, const std::vector<int64_t> &pads,
                const std::vector<int64_t> *dilations, Window &w) {
  w.strides = strides.empty() ? dims(nsp, 1) : strides;
  w.dilations = dims(nsp, 0);
  if (dilations && !dilations->empty())
    for (size_t i = 0; i < nsp; ++i)
      w.dilations[i] = (*dilations)[i] - 1;
  w.padL = dims(nsp, 0);
  w.padR = dims(nsp, 0);
  if (!pads.empty()) {
    if (pads.size() != 2 * nsp)
      return false;
    for (size_t i = 0; i < nsp; ++i) {
      w.padL[i] = pads[i];
      w.padR[i] = pads[nsp + i];
    }
  }
  return w.strides.size() == nsp && w.dilations.size() == nsp;
}

FailureOr<Anchor> convAnchor(const Node &n, bool isTranspose, std::string &why) {
  const Value *x = n.operand(0), *w = n.operand(1);
  const std::vector<int64_t> xs = sizesOf(x), ws = sizesOf(w), ys = sizesOf(n.result());
  const size_t nsp = xs.size() - 2;
  if (nsp < 1 || nsp > 3) {
    why = "only 1 to 3 spatial dims are supported";
    return failure();
  }
  int64_t group;
  Window win;
  std::vector<int64_t> outputPadding;
  if (isTranspose) {
    ConvTransposeOp op(n);
    group = op.group();
    outputPadding = op.output_padding();
    if (!readWindow(nsp, op.strides(), op.pads(), &op.dilations(), win))
      return failure();
  } else {
    ConvOp op(n);
    group = op.group();
    if (!readWindow(nsp, op.strides(), op.pads(), &op.dilations(), win))
      return failure();
  }
  const int64_t inC = xs[1], outC = ys[1];
  const int64_t inG = inC / group, outG = outC / group;
  int64_t kernelVolume = 1;
  for (size_t i = 0; i < nsp; ++i)
    kernelVolume *= ws[2 + i];
  // oneDNN weight dims are [g,] O, I, k...; strides describe the ONNX bytes.
  dims wDims, wStrides;
  const dims kernel(ws.begin() + 2, ws.end()), kStrides = rowMajorStrides(kernel);
  if (group > 1)
    wDims.push_back(group);
  wDims.push_back(outG);
  wDims.push_back(inG);
  wDims.insert(wDims.end(), kernel.begin(), kernel.end());
  if (!isTranspose) {
    wStrides = rowMajorStrides(wDims); // [M, C/g, k] == [g, M/g, C/g, k]
  } else {
    // ONNX [C, M/g, k]: offset ((g * inG + i) * outG + o) * K + k.
    if (group > 1)
      wStrides.push_back(inG * outG * kernelVolume);
    wStrides.push_back(kernelVolume);        // o
    wStrides.push_back(outG * kernelVolume); // i
    wStrides.insert(wStrides.end(), kStrides.begin(), kStrides.end());
    for (size_t i = 0; i < nsp; ++i) {
      const int64_t op = outputPadding.empty() ? 0 : outputPadding[i];
      win.padR[i] -= op;
    }
  }
  Anchor a;
  a.kindName = isTranspose ? "conv_transpose" : "conv";
  a.graphShape = ys;
  a.dstDims = ys;
  a.supportsBlocked = true;
  a.supportsSum = true;
  a.inputs.push_back({DNNL_ARG_SRC, x, nullptr, {}, plainMd(xs)});
  a.inputs.push_back({DNNL_ARG_WEIGHTS,
                      w,
                      constantOf(w),
                      {},
                      memory::desc(wDims, memory::data_type::f32, wStrides)});
  const bool hasBias = n.numOperands() == 3;
  if (hasBias)
    a.inputs.push_back(
        {DNNL_ARG_BIAS, n.operand(2), constantOf(n.operand(2)), {}, plainMd({outC})});
  const bool constWeights = a.inputs[1].constant != nullptr;
  const memory::desc wUser = a.inputs[1].userMd;
  a.makePd = [=](const dnnl::primitive_attr &attr, bool blocked) -> dnnl::primitive_desc {
    const memory::desc src = blocked ? anyMd(xs) : plainMd(xs);
    const memory::desc dst = blocked ? anyMd(ys) : plainMd(ys);
    const memory::desc wmd = constWeights ? anyMd(wDims) : wUser;
    const memory::desc bias = hasBias ? plainMd({outC}) : memory::desc();
    if (isTranspose) {
      dnnl::deconvolution_forward::desc d(dnnl::prop_kind::forward_inference,
                                          algorithm::deconvolution_direct, src, wmd, bias, dst,
                                          win.strides, win.dilations, win.padL, win.padR);
      return dnnl::deconvolution_forward::primitive_desc(d, attr, cpuEngine());
    }
    dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference,
                                      algorithm::convolution_direct, src, wmd, bias, dst,
                                      win.strides, win.dilations, win.padL, win.padR);
    return dnnl::convolution_forward::primitive_desc(d, attr, cpuEngine());
  };
  return a;
}

FailureOr<Anchor> matmulAnchor(const Node &n, std::string &why) {
  (void)why;
  dims lhs = sizesOf(n.operand(0)), rhs = sizesOf(n.operand(1));
  if (lhs.size() == 1)
    lhs.insert(lhs.begin(), 1);
  if (rhs.size() == 1)
    rhs.push_back(1);
  const size_t rank = std::max(lhs.size(), rhs.size());
  lhs.insert(lhs.begin(), rank - lhs.size(), 1);
  rhs.insert(rhs.begin(), rank - rhs.size(), 1);
  dims dst(rank);
  for (size_t i = 0; i + 2 < rank; ++i)
    dst[i] = std::max(lhs[i], rhs[i]);
  dst[rank - 2] = lhs[rank - 2];
  dst[rank - 1] = rhs[rank - 1];
  // x[..., M, K] @ W[K, N] with a constant 2-D W is one [B*M, K] @ [K, N]
  // product: oneDNN then lays W out for its brgemm kernels (2-D weights
  // only) and runs one large GEMM instead of a batch of small ones.
  const bool collapse = constantOf(n.operand(1)) && sizesOf(n.operand(1)).size() == 2 &&
                        sizesOf(n.operand(0)).size() >= 3;
  if (collapse) {
    const int64_t rows = product(dims(lhs.begin(), lhs.end() - 1));
    lhs = {rows, lhs.back()};
    rhs = {rhs[rank - 2], rhs[rank - 1]};
    dst = {rows, dst.back()};
  }
  const size_t mmRank = collapse ? 2 : rank;
  Anchor a;
  a.kindName = "matmul";
  a.graphShape = sizesOf(n.result());
  a.dstDims = dst;
  a.inputs.push_back({DNNL_ARG_SRC, n.operand(0), nullptr, {}, plainMd(lhs)});
  a.inputs.push_back({DNNL_ARG_WEIGHTS, n.operand(1), constantOf(n.operand(1)), {}, plainMd(rhs)});
  const bool anyWeights = a.inputs[1].constant && mmRank == 2;
  a.makePd = [=](const dnnl::primitive_attr &attr, bool) -> dnnl::primitive_desc {
    dnnl::matmul::desc d(plainMd(lhs), anyWeights ? anyMd(rhs) : plainMd(rhs), plainMd(dst));
    return dnnl::matmul::primitive_desc(d, attr, cpuEngine());
  };
  return a;
}

FailureOr<Anchor> gemmAnchor(const Node &n, std::string &why) {
  GemmOp op(n);
  const dims as = sizesOf(n.operand(0)), bs = sizesOf(n.operand(1)), ys = sizesOf(n.result());
  const int64_t m = ys[0], nn = ys[1], k = op.trans_a() ? as[0] : as[1];
  const dims aDims{m, k}, bDims{k, nn};
  const memory::desc aMd(aDims, memory::data_type::f32, op.trans_a() ? dims{1, m} : dims{k, 1});
  const memory::desc bMd(bDims, memory::data_type::f32, op.trans_b() ? dims{1, k} : dims{nn, 1});
  Anchor a;
  a.kindName = "gemm";
  a.graphShape = ys;
  a.dstDims = ys;
  a.inputs.push_back({DNNL_ARG_SRC, n.operand(0), nullptr, {}, aMd});
  a.inputs.push_back({DNNL_ARG_WEIGHTS, n.operand(1), constantOf(n.operand(1)), {}, bMd});
  const bool constB = a.inputs[1].constant != nullptr;
  const float alpha = static_cast<float>(op.alpha()), beta = static_cast<float>(op.beta());
  if (alpha != 1.f) {
    PostOp p;
    p.alg = algorithm::eltwise_linear;
    p.alpha = alpha;
    a.ownPostOps.push_back(std::move(p));
  }
  if (n.numOperands() == 3 && beta != 0.f) {
    const Value *c = n.operand(2);
    dims cDims = sizesOf(c);
    cDims.insert(cDims.begin(), 2 - cDims.size(), 1);
    PostOp add;
    add.kind = PostOp::Kind::Binary;
    add.alg = algorithm::binary_add;
    add.other = c;
    add.otherDims = cDims;
    if (const Tensor *ct = constantOf(c)) {
      Tensor scaled = Tensor::zeros(DType::F32, cDims);
      for (int64_t i = 0; i < ct->numel(); ++i)
        scaled.setDouble(i, static_cast<double>(beta) * ct->getDouble(i));
      add.owned = scaled;
      add.constant = nullptr;
      a.ownPostOps.push_back(std::move(add));
    } else {
      // beta * C with C known only at run time: scaled into a copy per run
      // (C is small, usually a bias; eltwise_linear around the binary
      // post-op gave wrong results with 2.6's brgemm matmul in our tests).
      add.scale = beta;
      a.ownPostOps.push_back(std::move(add));
    }
  }
  (void)why;
  a.makePd = [=](const dnnl::primitive_attr &attr, bool) -> dnnl::primitive_desc {
    dnnl::matmul::desc d(aMd, constB ? anyMd(bDims) : bMd, plainMd(ys));
    return dnnl::matmul::primitive_desc(d, attr, cpuEngine());
  };
  return a;
}

FailureOr<Anchor> poolAnchor(const Node &n, std::string &why) {
  const dims xs = sizesOf(n.operand(0)), ys = sizesOf(n.result());
  const size_t nsp = xs.size() - 2;
  if (nsp < 1 || nsp > 3) {
    why = "only 1 to 3 spatial dims are supported";
    return failure();
  }
  Window win;
  dims kernel;
  algorithm alg;
  bool includePad = false;
  if (n.kind() == OpKind::MaxPool) {
    MaxPoolOp op(n);
    kernel = op.kernel();
    alg = algorithm::pooling_max;
    if (!readWindow(nsp, op.strides(), op.pads(), &op.dilations(), win))
      return failure();
  } else if (n.kind() == OpKind::AvgPool) {
    AvgPoolOp op(n);
    kernel = op.kernel();
    includePad = op.count_include_pad();
    alg = includePad ? algorithm::pooling_avg_include_padding
                     : algorithm::pooling_avg_exclude_padding;
    if (!readWindow(nsp, op.strides(), op.pads(), nullptr, win))
      return failure();
  } else {
    kernel.assign(xs.begin() + 2, xs.end());
    alg = algorithm::pooling_avg_exclude_padding;
    readWindow(nsp, {}, {}, nullptr, win);
  }
  // ceil_mode: extend the right padding so that oneDNN's floor formula gives
  // the recorded output size. See Note [Pool ceil_mode] in ir/ops/Linalg.cpp.
  for (size_t i = 0; i < nsp; ++i) {
    const int64_t extent = (win.dilations[i] + 1) * (kernel[i] - 1) + 1;
    const int64_t needed = (ys[2 + i] - 1) * win.strides[i] + extent - xs[2 + i] - win.padL[i];
    if (needed > win.padR[i]) {
      if (includePad) {
        why = "avg_pool with count_include_pad and a ceil_mode window past the padding";
        return failure();
      }
      win.padR[i] = needed;
    }
    if (win.padL[i] >= extent || win.padR[i] >= extent) {
      why = "a pool window lies entirely in the padding";
      return failure();
    }
  }
  Anchor a;
  a.kindName = std::string(n.mnemonic());
  a.graphShape = ys;
  a.dstDims = ys;
  a.inputs.push_back({DNNL_ARG_SRC, n.operand(0), nullptr, {}, plainMd(xs)});
  a.supportsBlocked = true;
  a.makePd = [=](const dnnl::primitive_attr &attr, bool blocked) -> dnnl::primitive_desc {
    // Pools take a concrete src layout: channels-last when `blocked`.
    dnnl::pooling_v2_forward::desc d(
        dnnl::prop_kind::forward_inference, alg, blocked ? channelsLastMd(xs) : plainMd(xs),
        blocked ? anyMd(ys) : plainMd(ys), win.strides, kernel, win.dilations, win.padL, win.padR);
    return dnnl::pooling_v2_forward::primitive_desc(d, attr, cpuEngine());
  };
  return a;
}

FailureOr<Anchor> makeAnchor(const Node &n, std::string &why) {
  for (const Value *v : n.operands())
    if (v->type().dtype != DType::F32) {
      why = "oneDNN library ops support f32 only, got " + v->type().str();
      return failure();
    }
  for (const Value *v : n.operands())
    if (!v->type().isStatic()) {
      why = "operand shapes must be static";
      return failure();
    }
  switch (n.kind()) {
  case OpKind::Conv:
    return convAnchor(n, false, why);
  case OpKind::ConvTranspose:
    return convAnchor(n, true, why);
  case OpKind::MatMul:
    return matmulAnchor(n, why);
  case OpKind::Gemm:
    return gemmAnchor(n, why);
  case OpKind::MaxPool:
  case OpKind::AvgPool:
  case OpKind::GlobalAvgPool:
    return poolAnchor(n, why);
  default:
    why = "'" + std::string(n.mnemonic()) + "' is not a oneDNN anchor";
    return failure();
  }
}

//===----------------------------------------------------------------------===//
// Epilogue
//===----------------------------------------------------------------------===//

PostOp eltwise(algorithm alg, float alpha = 0, float beta = 0) {
  PostOp p;
  p.alg = alg;
  p.alpha = alpha;
  p.beta = beta;
  return p;
}

/// `other`'s broadcast dims in the anchor's oneDNN dst rank, or nullopt
/// when it does not broadcast to the anchor's result without growing it.
std::optional<dims> broadcastDims(const Value *other, const Anchor &a) {
  const std::vector<int64_t> os = sizesOf(other), &gs = a.graphShape;
  if (os.size() > gs.size())
    return std::nullopt;
  dims b(gs.size() - os.size(), 1);
  b.insert(b.end(), os.begin(), os.end());
  bool allOnes = true;
  for (size_t i = 0; i < gs.size(); ++i) {
    if (b[i] != 1 && b[i] != gs[i])
      return std::nullopt;
    allOnes &= b[i] == 1;
  }
  if (gs == a.dstDims)
    return b;
  if (allOnes)
    return dims(a.dstDims.size(), 1);
  // A product with its leading dims collapsed into rows ([B, M, N] as
  // [B*M, N]): the other operand is per column, or full.
  if (a.dstDims.size() == 2 && gs.size() > 2 && gs.back() == a.dstDims[1] &&
      product(dims(gs.begin(), gs.end() - 1)) == a.dstDims[0]) {
    const dims lead(b.begin(), b.end() - 1);
    if (std::all_of(lead.begin(), lead.end(), [](int64_t d) { return d == 1; }))
      return dims{1, b.back()};
    if (lead == dims(gs.begin(), gs.end() - 1))
      return dims{a.dstDims[0], b.back()};
    return std::nullopt;
  }
  if (b == gs)
    return a.dstDims;
  return std::nullopt;
}

/// The post-ops computing `n` from `chain` (the previous result), or
/// nullopt when `n` does not map.
std::optional<std::vector<PostOp>> mapEpilogueNode(const Node &n, const Value *chain,
                                                   const Anchor &a) {
  if (n.numResults() != 1 || n.result()->type() != chain->type() ||
      chain->type().dtype != DType::F32)
    return std::nullopt;
  if (n.numOperands() == 1) {
    if (n.operand(0) != chain)
      return std::nullopt;
    switch (n.kind()) {
    case OpKind::Relu:
      return std::vector<PostOp>{eltwise(algorithm::eltwise_relu)};
    case OpKind::LeakyRelu:
      return std::vector<PostOp>{
          eltwise(algorithm::eltwise_relu, static_cast<float>(LeakyReluOp(n).alpha()))};
    case OpKind::Clip: {
      ClipOp op(n);
      return std::vector<PostOp>{eltwise(algorithm::eltwise_clip_v2, static_cast<float>(op.min()),
                                         static_cast<float>(op.max()))};
    }
    case OpKind::Sigmoid:
      return std::vector<PostOp>{eltwise(algorithm::eltwise_logistic)};
    case OpKind::Tanh:
      return std::vector<PostOp>{eltwise(algorithm::eltwise_tanh)};
    case OpKind::Gelu: {
      const std::string &approx = GeluOp(n).approximate();
      if (approx == "none")
        return std::vector<PostOp>{eltwise(algorithm::eltwise_gelu_erf)};
      if (approx == "tanh")
        return std::vector<PostOp>{eltwise(algorithm::eltwise_gelu_tanh)};
      return std::nullopt;
    }
    case OpKind::Elu:
      return std::vector<PostOp>{
          eltwise(algorithm::eltwise_elu, static_cast<float>(EluOp(n).alpha()))};
    case OpKind::HardSwish:
      return std::vector<PostOp>{eltwise(algorithm::eltwise_hardswish)};
    case OpKind::HardSigmoid: {
      HardSigmoidOp op(n);
      return std::vector<PostOp>{eltwise(algorithm::eltwise_linear, static_cast<float>(op.alpha()),
                                         static_cast<float>(op.beta())),
                                 eltwise(algorithm::eltwise_clip_v2, 0.f, 1.f)};
    }
    case OpKind::Abs:
      return std::vector<PostOp>{eltwise(algorithm::eltwise_abs)};
    case OpKind::Sqrt:
      return std::vector<PostOp>{eltwise(algorithm::eltwise_sqrt)};
    case OpKind::Exp:
      return std::vector<PostOp>{eltwise(algorithm::eltwise_exp)};
    case OpKind::Log:
      return std::vector<PostOp>{eltwise(algorithm::eltwise_log)};
    case OpKind::Neg:
      return std::vector<PostOp>{eltwise(algorithm::eltwise_linear, -1.f, 0.f)};
    case OpKind::Softplus:
      return std::vector<PostOp>{eltwise(algorithm::eltwise_soft_relu)};
    default:
      return std::nullopt;
    }
  }
  if (n.numOperands() != 2)
    return std::nullopt;
  const bool chainFirst = n.operand(0) == chain;
  if (chainFirst == (n.operand(1) == chain))
    return std::nullopt; // neither, or both operands
  const Value *other = n.operand(chainFirst ? 1 : 0);
  if (other->type().dtype != DType::F32 || !other->type().isStatic())
    return std::nullopt;
  auto bdims = broadcastDims(other, a);
  if (!bdims)
    return std::nullopt;
  PostOp p;
  p.kind = PostOp::Kind::Binary;
  p.other = other;
  p.constant = constantOf(other);
  p.otherDims = *bdims;
  std::vector<PostOp> ops;
  switch (n.kind()) {
  case OpKind::Add:
    p.alg = algorithm::binary_add;
    break;
  case OpKind::Sub:
    p.alg = algorithm::binary_sub;
    if (!chainFirst) { // other - x = -x + other
      ops.push_back(eltwise(algorithm::eltwise_linear, -1.f, 0.f));
      p.alg = algorithm::binary_add;
    }
    break;
  case OpKind::Mul:
    p.alg = algorithm::binary_mul;
    break;
  case OpKind::Max:
    p.alg = algorithm::binary_max;
    break;
  case OpKind::Min:
    p.alg = algorithm::binary_min;
    break;
  default:
    return std::nullopt;
  }
  ops.push_back(std::move(p));
  return ops;
}

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

/// Creates the primitive for `ops` with the given layout; throws
/// dnnl::error when oneDNN has no implementation.
Candidate assemble(const Anchor &a, const std::vector<PostOp> &ops, bool blocked, bool expand,
                   const Value *result, const std::function<bool(const Value *)> &channelsLast) {
  auto isCL = [&](const Value *v) {
    return a.supportsBlocked && channelsLast && v && v->type().shape.size() >= 3 && channelsLast(v);
  };
  dnnl::engine &eng = cpuEngine();
  auto step = std::make_shared<DnnlStep>();
  step->createdThreads = omp_get_max_threads(); // set by buildOneDnnCall's ScopedThreads
  Operands operands;
  dnnl::post_ops po;
  std::string opsText;
  bool usedSum = false;
  struct BinaryUse {
    int index;
    const PostOp *op;
    bool expanded;
    bool channelsLast;
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
    const bool doExpand = expand && !isStandardBroadcast(p.otherDims, a.dstDims);
    const bool otherCL = !constant && full && isCL(p.other);
    po.append_binary(p.alg, otherCL ? channelsLastMd(a.dstDims)
                                    : plainMd(doExpand ? a.dstDims : p.otherDims));
    binaries.push_back({static_cast<int>(i), &p, doExpand, otherCL});
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
    const dims &od = b.expanded ? a.dstDims : b.op->otherDims;
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
        step->keepAlive.push_back(*ct); // used in place
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
        Tensor e = Tensor::zeros(DType::F32, a.dstDims);
        broadcastCopy(t.data<float>(), p.otherDims, a.dstDims, e.mutableData<float>());
        t = e;
      }
      step->keepAlive.push_back(t);
      step->constArgs.push_back({arg, memory(plainMd(b.expanded ? a.dstDims : p.otherDims), eng,
                                             const_cast<void *>(t.rawData()))});
      continue;
    }
    RuntimeArg r{arg,
                 operands.indexOf(p.other),
                 b.channelsLast ? channelsLastMd(a.dstDims)
                                : plainMd(b.expanded ? a.dstDims : p.otherDims),
                 std::nullopt,
                 memory::desc(),
                 b.expanded,
                 p.otherDims,
                 a.dstDims,
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

/// Channels-last to row-major, with a oneDNN reorder.
class ToRowMajorStep final : public runtime::ExternStep {
public:
  explicit ToRowMajorStep(const Value *v)
      : name_("to-row-major %" + v->name()), from_(channelsLastMd(sizesOf(v))),
        to_(plainMd(sizesOf(v))),
        reorder_(dnnl::reorder::primitive_desc(cpuEngine(), from_, cpuEngine(), to_)) {}

  std::string describe() const override { return name_; }

  runtime::Status run(std::span<void *const> buffers, const runtime::StepContext &) const override {
    return executeOnThisThread(
        reorder_, {{DNNL_ARG_FROM, {from_, buffers[0]}}, {DNNL_ARG_TO, {to_, buffers[1]}}});
  }

private:
  std::string name_;
  memory::desc from_, to_;
  dnnl::reorder reorder_;
};

/// A concat along the channel dim of channels-last buffers into a
/// channels-last buffer, with oneDNN's concat (per pixel, one copy per
/// input).
class ChannelsLastConcatStep final : public runtime::ExternStep {
public:
  explicit ChannelsLastConcatStep(const Node &concat)
      : name_("onednn concat %" + concat.result()->name()), createdThreads_(omp_get_max_threads()) {
    std::vector<memory::desc> srcs;
    for (const Value *v : concat.operands())
      srcs.push_back(channelsLastMd(sizesOf(v)));
    dst_ = channelsLastMd(sizesOf(concat.result()));
    dnnl::concat::primitive_desc pd(dst_, 1, srcs, cpuEngine());
    srcs_ = srcs;
    prim_ = dnnl::concat(pd);
  }

  std::string describe() const override { return name_; }

  runtime::Status run(std::span<void *const> buffers,
                      const runtime::StepContext &ctx) const override {
    ScopedThreads threads(std::max(1, std::min(ctx.threads, createdThreads_)));
    std::vector<std::pair<int, std::pair<memory::desc, void *>>> args;
    for (size_t i = 0; i < srcs_.size(); ++i)
      args.push_back({DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i), {srcs_[i], buffers[i]}});
    args.push_back({DNNL_ARG_DST, {dst_, buffers[srcs_.size()]}});
    return executeOnThisThread(prim_, args);
  }

private:
  std::string name_;
  std::vector<memory::desc> srcs_;
  memory::desc dst_;
  dnnl::primitive prim_;
  int createdThreads_;
};

} // namespace

std::shared_ptr<const runtime::ExternStep> makeToRowMajorStep(const Value *v) {
  return std::make_shared<ToRowMajorStep>(v);
}

std::shared_ptr<const runtime::ExternStep> makeChannelsLastConcatStep(const Node &concat,
                                                                      std::string &why) {
  try {
    return std::make_shared<ChannelsLastConcatStep>(concat);
  } catch (const dnnl::error &e) {
    why = std::string("oneDNN concat: ") + e.what();
    return nullptr;
  }
}

std::string oneDnnVersion() {
  const dnnl_version_t *v = dnnl_version();
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
         std::to_string(v->patch) + " (cpu runtime " +
         (v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other") + ")";
}

FailureOr<OneDnnCall> buildOneDnnCall(std::span<const Node *const> nodes,
                                      const OneDnnOptions &options, std::string &why) {
  if (nodes.empty())
    return failure();
  // oneDNN fixes a primitive's thread partitioning when it creates it (from
  // omp_get_max_threads()), so primitives are created for the compile-time
  // thread count. See Note [Conv layouts] for the measurements.
  ScopedThreads threads(options.threads);
  try {
    auto anchor = makeAnchor(*nodes[0], why);
    if (failed(anchor))
      return failure();
    const Anchor &a = *anchor;
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
      for (bool expand : {false, true}) {
        for (bool blocked : layouts) {
          try {
            candidates.push_back(assemble(a, ops, blocked, expand, result, options.channelsLast));
          } catch (const dnnl::error &e) {
            lastError = e.what();
          }
        }
        if (!candidates.empty())
          break;
      }
      // oneDNN's reference implementations are orders of magnitude slower
      // than its JIT ones (a post-op it cannot fuse sends a matmul there:
      // 128 ms instead of 0.1 ms): with a shorter epilogue the rest runs as
      // a kernel instead.
      if (k > 0)
        candidates.erase(
            std::remove_if(candidates.begin(), candidates.end(),
                           [](const Candidate &c) { return c.detail.rfind("ref", 0) == 0; }),
            candidates.end());
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
      call.result = result;
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
