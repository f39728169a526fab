//===- Anchors.cpp - The ops oneDNN runs as a group's first node ----------===//
//
// One Anchor per library anchor (conv, conv_transpose, matmul, gemm, the
// pools): its oneDNN dims, its runtime and constant inputs, and a function
// creating its primitive descriptor for given attributes and activation
// layout. Which ops are anchors is the table in Epilogue.cpp.
//
//===----------------------------------------------------------------------===//
#include "codegen/cpu/dnnl/Internal.h"

#include <algorithm>
#include <numeric>

namespace kiln::codegen::cpu::onednn {

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

memory::desc anyMd(const dims &d) {
  return memory::desc(d, memory::data_type::f32, memory::format_tag::any);
}

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
  case algorithm::binary_div:
    return "binary_div";
  case algorithm::binary_max:
    return "binary_max";
  case algorithm::binary_min:
    return "binary_min";
  default:
    return "?";
  }
}

namespace {

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
    if (!readWindow(nsp, op.strides(), op.pads(), &op.dilations(), win))
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

} // namespace

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
  FailureOr<Anchor> a = failure();
  switch (n.kind()) {
  case OpKind::Conv:
    a = convAnchor(n, false, why);
    break;
  case OpKind::ConvTranspose:
    a = convAnchor(n, true, why);
    break;
  case OpKind::MatMul:
    a = matmulAnchor(n, why);
    break;
  case OpKind::Gemm:
    a = gemmAnchor(n, why);
    break;
  case OpKind::MaxPool:
  case OpKind::AvgPool:
  case OpKind::GlobalAvgPool:
    a = poolAnchor(n, why);
    break;
  default:
    why = "'" + std::string(n.mnemonic()) + "' is not a oneDNN anchor";
    return failure();
  }
  if (a.succeeded())
    a->kind = n.kind();
  return a;
}

} // namespace kiln::codegen::cpu::onednn
