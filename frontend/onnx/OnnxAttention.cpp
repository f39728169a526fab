//===- OnnxAttention.cpp - Converters of ONNX attention ---------*- C++ -*-===//
//
// Attention (opset 23), what torch.onnx's dynamo exporter writes for
// F.scaled_dot_product_attention from opset 23 on, decomposes into the ops
// the exporter writes for it at opset 18, so that both opsets reach the
// fusion planner as the same pattern:
//
//   q, k, v   [B, H, L, D] (4-D inputs as they are; 3-D [B, L, H*D] inputs
//             split into heads by q_num_heads / kv_num_heads)
//   k, v      concatenated after past_key / past_value on the sequence axis
//             (present_key / present_value), their heads repeated when
//             q_num_heads > kv_num_heads (grouped-query attention)
//   s         = matmul(q, transpose(k)) * scale        (scale: 1/sqrt(D))
//   s         = s + attn_mask (float) / where(attn_mask, s, -inf) (bool)
//   s         = where(causal, s, -inf)  (is_causal: the lower triangle
//               j <= i, aligned at the upper left as in ONNX's reference)
//   s         = softcap * tanh(s / softcap)             (softcap > 0)
//   y         = matmul(softmax(s), v)
//
// The qk_matmul_output output is the stage qk_matmul_output_mode names (0:
// after the matmul and scale, 1: after the masks, 2: after softcap, 3:
// after softmax). softmax_precision is accepted: Kiln's softmax accumulates
// in at least f32.
//
//===----------------------------------------------------------------------===//
#include "frontend/onnx/Internal.h"

#include <cmath>
#include <limits>

namespace kiln::onnximport {
namespace {

using Values = std::vector<Value *>;

/// [B, L, H*D] -> [B, H, L, D] with `heads` heads.
Value *splitHeads(NodeContext &ctx, Value *x, int64_t heads) {
  Value *r = ctx.create(OpKind::Reshape, {x}, {{"shape", Ints{0, 0, heads, -1}}});
  return ctx.create(OpKind::Transpose, {r}, {{"perm", Ints{0, 2, 1, 3}}});
}

/// The head count of a 3-D input, from attribute `attr`; an error when it
/// is missing or does not divide the hidden size.
std::optional<int64_t> headsOf(NodeContext &ctx, Value *x, const char *attr, const char *what) {
  int64_t heads = ctx.attrInt(attr, 0);
  if (heads <= 0) {
    ctx.emitError() << "3-D input '" << what << "' needs attribute '" << attr << "' > 0";
    return std::nullopt;
  }
  const Dim &hidden = x->type().shape[2];
  if (hidden.isStatic() && hidden.size() % heads != 0) {
    ctx.emitError() << "input '" << what << "' " << x->type().str() << " does not split into "
                    << heads << " heads";
    return std::nullopt;
  }
  return heads;
}

Values convertAttention(NodeContext &ctx) {
  Value *q = ctx.input(0, "Q"), *k = ctx.input(1, "K"), *v = ctx.input(2, "V");
  Value *mask = ctx.optionalInput(3);
  Value *pastK = ctx.optionalInput(4), *pastV = ctx.optionalInput(5);
  if (!q || !k || !v || ctx.failed())
    return {};
  int64_t rank = q->type().rank();
  if ((rank != 3 && rank != 4) || k->type().rank() != rank || v->type().rank() != rank) {
    ctx.emitError() << "needs Q, K and V of rank 3 or 4 alike, got " << q->type().str() << ", "
                    << k->type().str() << ", " << v->type().str();
    return {};
  }
  if (!isFloat(q->type().dtype)) {
    ctx.emitError() << "needs float Q, K, V, got " << q->type().str();
    return {};
  }
  if ((pastK == nullptr) != (pastV == nullptr)) {
    ctx.emitError() << "needs both past_key and past_value, or neither";
    return {};
  }
  if (rank == 3) {
    auto hq = headsOf(ctx, q, "q_num_heads", "Q");
    auto hkv = hq ? headsOf(ctx, k, "kv_num_heads", "K") : std::nullopt;
    if (!hkv || !headsOf(ctx, v, "kv_num_heads", "V"))
      return {};
    q = splitHeads(ctx, q, *hq);
    k = splitHeads(ctx, k, *hkv);
    v = splitHeads(ctx, v, *hkv);
  }
  if (!q || !k || !v)
    return {};
  if (pastK) {
    k = ctx.create(OpKind::Concat, {pastK, k}, {{"axis", int64_t(2)}});
    v = ctx.create(OpKind::Concat, {pastV, v}, {{"axis", int64_t(2)}});
    if (!k || !v)
      return {};
  }
  Value *presentK = k, *presentV = v;

  // Grouped-query attention: each K/V head serves q_heads / kv_heads heads.
  auto hq = ctx.staticDim(q, 1), hkv = ctx.staticDim(k, 1);
  auto headSize = ctx.staticDim(q, 3);
  if (!hq || !hkv || !headSize)
    return {};
  if (*hkv != *hq) {
    if (*hkv <= 0 || *hq % *hkv != 0) {
      ctx.emitError() << "has " << *hq << " query heads, which " << *hkv
                      << " key/value heads do not divide";
      return {};
    }
    int64_t rep = *hq / *hkv;
    auto repeat = [&](Value *x) {
      Value *u = ctx.create(OpKind::Unsqueeze, {x}, {{"axes", Ints{2}}});
      Value *e = ctx.create(OpKind::Expand, {u}, {{"shape", Ints{1, 1, rep, 1, 1}}});
      return ctx.create(OpKind::Reshape, {e}, {{"shape", Ints{0, *hq, -1, 0}}});
    };
    k = repeat(k);
    v = repeat(v);
  }

  double scale = ctx.hasAttr("scale") ? ctx.attrFloat("scale", 1.0)
                                      : 1.0 / std::sqrt(static_cast<double>(*headSize));
  Value *kt = ctx.create(OpKind::Transpose, {k}, {{"perm", Ints{0, 1, 3, 2}}});
  Value *s =
      ctx.create(OpKind::Mul, {ctx.create(OpKind::MatMul, {q, kt}), ctx.scalarLike(q, scale)});
  Values stages{s};
  Value *negInf = ctx.scalarLike(q, -std::numeric_limits<double>::infinity());
  if (mask) {
    if (mask->type().dtype == DType::Bool)
      s = ctx.create(OpKind::Where, {mask, s, negInf});
    else
      s = ctx.create(OpKind::Add, {s, ctx.castTo(mask, q->type().dtype)});
  }
  if (ctx.attrInt("is_causal", 0) != 0) {
    auto lq = ctx.staticDim(q, 2), lkv = ctx.staticDim(k, 2);
    if (!lq || !lkv)
      return {};
    Tensor causal = Tensor::zeros(DType::Bool, {*lq, *lkv});
    for (int64_t i = 0; i < *lq; ++i)
      for (int64_t j = 0; j < *lkv; ++j)
        causal.setInt(i * *lkv + j, j <= i);
    s = ctx.create(OpKind::Where, {ctx.constant(std::move(causal)), s, negInf});
  }
  stages.push_back(s);
  double softcap = ctx.attrFloat("softcap", 0.0);
  if (softcap > 0.0) {
    Value *t = ctx.create(OpKind::Tanh, {ctx.create(OpKind::Div, {s, ctx.scalarLike(q, softcap)})});
    s = ctx.create(OpKind::Mul, {t, ctx.scalarLike(q, softcap)});
  }
  stages.push_back(s);
  Value *p = ctx.create(OpKind::Softmax, {s}, {{"axis", int64_t(-1)}});
  stages.push_back(p);
  Value *y = ctx.create(OpKind::MatMul, {p, v});
  if (rank == 3) {
    Value *t = ctx.create(OpKind::Transpose, {y}, {{"perm", Ints{0, 2, 1, 3}}});
    y = ctx.create(OpKind::Reshape, {t}, {{"shape", Ints{0, 0, -1}}});
  }
  Values outs{y, presentK, presentV};
  if (ctx.isOutputUsed(3)) {
    int64_t mode = ctx.attrInt("qk_matmul_output_mode", 0);
    if (mode < 0 || mode > 3) {
      ctx.emitError() << "qk_matmul_output_mode " << mode << " is not 0 to 3";
      return {};
    }
    outs.push_back(stages[static_cast<size_t>(mode)]);
  }
  return outs;
}

const Converter kConverters[] = {
    {"Attention", 23, convertAttention},
};

} // namespace

std::span<const Converter> attentionConverters() {
  return kConverters;
}

} // namespace kiln::onnximport
