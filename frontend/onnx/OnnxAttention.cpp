//===- OnnxAttention.cpp - Converters of ONNX attention ---------*- C++ -*-===//
//
// Attention (opsets 23 to 25), what torch.onnx's dynamo exporter writes for
// F.scaled_dot_product_attention from opset 23 on, decomposes into the ops
// the exporter writes for it at opset 18, so that both opsets reach the
// fusion planner as the same pattern. The semantics are those of ONNX's
// reference implementation (onnx/reference/ops/op_attention.py), except
// that half-precision inputs are computed in f32 and rounded once (the
// reference rounds every step to the half type):
//
//   q, k, v   [B, H, L, D] (4-D inputs as they are; 3-D [B, L, H*D] inputs
//             split into heads by q_num_heads / kv_num_heads)
//   k, v      past_key / past_value concatenated before them on the
//             sequence axis (present_key / present_value), their heads
//             repeated when q_num_heads > kv_num_heads (grouped-query)
//   qk        = softcap(matmul(q, transpose(k)) * scale)   (scale 1/sqrt(D);
//               softcap(x) = c * tanh(x / c) when c > 0)
//   bias      = attn_mask (float; bool: 0 where true, -inf where false),
//               padded with -inf to the key length, plus with is_causal
//               -inf where j > i + past length (bottom-right aligned);
//               with nonpad_kv_seqlen (24) or a window (25) the position
//               rules of positionBias (per-batch key lengths and offsets)
//   p         = softmax(qk + bias), 0 on rows the bias masks entirely
//   y         = matmul(p, v)
//
// qk_matmul_output is qk for modes 0 and 1, qk + bias for 2, p for 3.
// softmax_precision is accepted: the softmax runs in f32 or f64.
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

/// The additive bias of Attention's position rules when the keys have a
/// valid length per batch (`nonpad_kv_seqlen`, opset 24) or a window
/// bounds them (`left_window_size` / `right_window_size`, 25): query i, at
/// absolute position p = i + offset, keeps key j when j < nonpad[b], j <= p
/// (is_causal), j >= p - left and j <= p + right (a window of -1 is
/// unbounded). offset is the past length, or nonpad[b] - Lq for an
/// external cache. 0 where kept, -inf elsewhere; shape [B or 1, 1, Lq, Lkv].
Value *positionBias(NodeContext &ctx, Value *like, const DimExpr &lq, const DimExpr &lkv,
                    int64_t past, Value *nonpad, bool causal, int64_t left, int64_t right) {
  Value *i = ctx.create(OpKind::Iota, {},
                        {{"shape", std::vector<DimExpr>{1, 1, lq, 1}}, {"axis", int64_t(2)}});
  Value *j = ctx.create(OpKind::Iota, {},
                        {{"shape", std::vector<DimExpr>{1, 1, 1, lkv}}, {"axis", int64_t(3)}});
  Value *len = nullptr;
  Value *p = i;
  if (nonpad) {
    len = ctx.create(OpKind::Reshape, {ctx.castTo(nonpad, DType::I64)},
                     {{"shape", Ints{-1, 1, 1, 1}}});
    // offset = nonpad - Lq: p = i + nonpad - Lq.
    p = ctx.create(OpKind::Add, {i, ctx.create(OpKind::Sub, {len, dimValue(ctx, i, 2)})});
  } else if (past != 0) {
    p = ctx.create(OpKind::Add, {i, ctx.constant(Tensor::fromInts(DType::I64, {}, {past}))});
  }
  Value *keep = nullptr;
  auto both = [&](Value *c) { keep = keep ? ctx.create(OpKind::And, {keep, c}) : c; };
  auto shifted = [&](int64_t by) {
    return by == 0
               ? p
               : ctx.create(OpKind::Add, {p, ctx.constant(Tensor::fromInts(DType::I64, {}, {by}))});
  };
  if (len)
    both(ctx.create(OpKind::Less, {j, len}));
  if (causal)
    both(ctx.create(OpKind::Not, {ctx.create(OpKind::Greater, {j, p})}));
  if (left >= 0)
    both(ctx.create(OpKind::Not, {ctx.create(OpKind::Less, {j, shifted(-left)})}));
  if (right >= 0)
    both(ctx.create(OpKind::Not, {ctx.create(OpKind::Greater, {j, shifted(right)})}));
  const double inf = std::numeric_limits<double>::infinity();
  return ctx.create(OpKind::Where, {keep, ctx.scalarLike(like, 0.0), ctx.scalarLike(like, -inf)});
}

Values convertAttention(NodeContext &ctx) {
  Value *q = ctx.input(0, "Q"), *k = ctx.input(1, "K"), *v = ctx.input(2, "V");
  Value *mask = ctx.optionalInput(3);
  Value *pastK = ctx.optionalInput(4), *pastV = ctx.optionalInput(5);
  Value *nonpad = ctx.optionalInput(6);
  if (!q || !k || !v || ctx.failed())
    return {};
  if (nonpad && pastK) {
    ctx.emitError() << "takes nonpad_kv_seqlen (an external cache) or past_key / past_value, "
                       "not both";
    return {};
  }
  if (nonpad && (nonpad->type().rank() != 1 || !isInteger(nonpad->type().dtype))) {
    ctx.emitError() << "needs an integer vector nonpad_kv_seqlen, got " << nonpad->type().str();
    return {};
  }
  int64_t rank = q->type().rank();
  if ((rank != 3 && rank != 4) || k->type().rank() != rank || v->type().rank() != rank) {
    ctx.emitError() << "needs Q, K and V of rank 3 or 4 alike, got " << q->type().str() << ", "
                    << k->type().str() << ", " << v->type().str();
    return {};
  }
  DType dt = q->type().dtype;
  if (!isFloat(dt)) {
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
  if (pastK) {
    k = ctx.create(OpKind::Concat, {pastK, k}, {{"axis", int64_t(2)}});
    v = ctx.create(OpKind::Concat, {pastV, v}, {{"axis", int64_t(2)}});
  }
  if (!q || !k || !v)
    return {};
  Value *presentK = k, *presentV = v;
  // Half-precision inputs are computed in f32 (the reference's accuracy).
  DType ct = dt == DType::F64 ? DType::F64 : DType::F32;
  q = ctx.castTo(q, ct);
  k = ctx.castTo(k, ct);
  v = ctx.castTo(v, ct);

  auto hq = ctx.staticDim(q, 1), hkv = ctx.staticDim(k, 1), headSize = ctx.staticDim(q, 3);
  auto kHead = ctx.staticDim(k, 3), vHead = ctx.staticDim(v, 3);
  if (!hq || !hkv || !headSize || !kHead || !vHead)
    return {};
  if (*hkv != *hq) {
    if (*hkv <= 0 || *hq % *hkv != 0) {
      ctx.emitError() << "has " << *hq << " query heads, which " << *hkv
                      << " key/value heads do not divide";
      return {};
    }
    // [B, Hkv, S, D] -> [B, Hkv, rep, S, D] -> [B, Hq, S, D]: head h of q
    // reads head h / rep of k and v.
    int64_t rep = *hq / *hkv;
    auto repeat = [&](Value *x, int64_t d) {
      Value *u = ctx.create(OpKind::Unsqueeze, {x}, {{"axes", Ints{2}}});
      Value *e = ctx.create(OpKind::Expand, {u}, {{"shape", Ints{1, 1, rep, 1, 1}}});
      return ctx.create(OpKind::Reshape, {e}, {{"shape", Ints{0, *hq, -1, d}}});
    };
    k = repeat(k, *kHead);
    v = repeat(v, *vHead);
  }

  double scale = ctx.hasAttr("scale") ? ctx.attrFloat("scale", 1.0)
                                      : 1.0 / std::sqrt(static_cast<double>(*headSize));
  Value *kt = ctx.create(OpKind::Transpose, {k}, {{"perm", Ints{0, 1, 3, 2}}});
  Value *qk =
      ctx.create(OpKind::Mul, {ctx.create(OpKind::MatMul, {q, kt}), ctx.scalarLike(q, scale)});
  double softcap = ctx.attrFloat("softcap", 0.0);
  if (softcap > 0.0) {
    Value *t =
        ctx.create(OpKind::Tanh, {ctx.create(OpKind::Div, {qk, ctx.scalarLike(q, softcap)})});
    qk = ctx.create(OpKind::Mul, {t, ctx.scalarLike(q, softcap)});
  }

  // The additive bias. `maskFree` stays true while no row can be entirely
  // masked, so that the guard below is only paid for where it matters.
  const double inf = std::numeric_limits<double>::infinity();
  Value *bias = nullptr;
  bool maskFree = true;
  // The sequence lengths may be symbolic; a mask shorter than the keys
  // must be padded, which needs both sizes.
  const Dim &lq = q->type().shape[2], &lkv = k->type().shape[2];
  if (mask) {
    if (mask->type().rank() < 1) {
      ctx.emitError() << "needs an attn_mask of rank >= 1, got " << mask->type().str();
      return {};
    }
    mask = mask->type().dtype == DType::Bool
               ? ctx.create(OpKind::Where, {mask, ctx.scalarLike(q, 0.0), ctx.scalarLike(q, -inf)})
               : ctx.castTo(mask, ct);
    if (mask->type().shape.back() != lkv) {
      auto last = ctx.staticDim(mask, mask->type().rank() - 1);
      auto keys = ctx.staticDim(k, 2);
      if (!last || !keys)
        return {};
      if (*last < *keys) {
        Ints pads(static_cast<size_t>(2 * mask->type().rank()), 0);
        pads.back() = *keys - *last;
        mask = ctx.create(OpKind::Pad, {mask}, {{"pads", pads}, {"value", -inf}});
      }
    }
    bias = mask;
    maskFree = false;
  }
  const bool causal = ctx.attrInt("is_causal", 0) != 0;
  const int64_t left = ctx.attrInt("left_window_size", -1);
  const int64_t right = ctx.attrInt("right_window_size", -1);
  int64_t offset = 0;
  if (pastK && (causal || left >= 0 || right >= 0)) {
    auto past = ctx.staticDim(pastK, 2);
    if (!past)
      return {};
    offset = *past;
  }
  if (nonpad || left >= 0 || right >= 0) {
    auto rows = lq.expr(), cols = lkv.expr();
    if (!rows || !cols) {
      ctx.emitError() << "nonpad_kv_seqlen and windows need sequence lengths that are sizes or "
                         "expressions of the graph's symbols, got "
                      << q->type().str() << " and " << k->type().str();
      return {};
    }
    Value *c = positionBias(ctx, q, *rows, *cols, offset, nonpad, causal, left, right);
    bias = bias ? ctx.create(OpKind::Add, {bias, c}) : c;
    maskFree = false;
  } else if (causal) {
    Value *c = nullptr;
    if (lq.isStatic() && lkv.isStatic()) {
      Tensor causal = Tensor::zeros(ct, {lq.size(), lkv.size()});
      for (int64_t i = 0; i < lq.size(); ++i)
        for (int64_t j = 0; j < lkv.size(); ++j)
          causal.setDouble(i * lkv.size() + j, j <= i + offset ? 0.0 : -inf);
      c = ctx.constant(std::move(causal));
    } else {
      auto rows = lq.expr(), cols = lkv.expr();
      if (!rows || !cols) {
        ctx.emitError() << "is_causal needs sequence lengths that are sizes or expressions of "
                           "the graph's symbols, got "
                        << q->type().str() << " and " << k->type().str();
        return {};
      }
      Value *keep = triangleMask(ctx, {*rows, *cols}, offset, /*upper=*/false);
      if (!keep)
        return {};
      c = ctx.create(OpKind::Where, {keep, ctx.scalarLike(q, 0.0), ctx.scalarLike(q, -inf)});
    }
    bias = bias ? ctx.create(OpKind::Add, {bias, c}) : c;
  }
  Value *s = bias ? ctx.create(OpKind::Add, {qk, bias}) : qk;
  Value *p = ctx.create(OpKind::Softmax, {s}, {{"axis", int64_t(-1)}});
  if (!maskFree) {
    Value *rowMax = ctx.create(OpKind::ReduceMax, {bias}, {{"axes", Ints{-1}}, {"keepdims", true}});
    Value *masked = ctx.create(OpKind::Equal, {rowMax, ctx.scalarLike(q, -inf)});
    p = ctx.create(OpKind::Where, {masked, ctx.scalarLike(q, 0.0), p});
  }
  Value *y = ctx.create(OpKind::MatMul, {p, v});
  if (rank == 3) {
    Value *t = ctx.create(OpKind::Transpose, {y}, {{"perm", Ints{0, 2, 1, 3}}});
    y = ctx.create(OpKind::Reshape, {t}, {{"shape", Ints{0, 0, -1}}});
  }
  Values outs{ctx.castTo(y, dt), presentK, presentV};
  if (ctx.isOutputUsed(3)) {
    int64_t mode = ctx.attrInt("qk_matmul_output_mode", 0);
    if (mode < 0 || mode > 3) {
      ctx.emitError() << "qk_matmul_output_mode " << mode << " is not 0 to 3";
      return {};
    }
    outs.push_back(ctx.castTo(mode <= 1 ? qk : mode == 2 ? s : p, dt));
  }
  return outs;
}

/// RotaryEmbedding (opset 23), as ONNX's reference: x [B, H, S, D] (or
/// [B, S, H*D] with num_heads) seen as [B, S, H, D]; its first
/// rotary_embedding_dim (R, default D) channels rotate by the cos / sin
/// caches ([B, S, R/2], or [max_pos, R/2] indexed by position_ids), in halves
/// (x1 = [0, R/2), x2 = [R/2, R)) or interleaved (x1 = even, x2 = odd):
///   x1' = cos x1 - sin x2,  x2' = sin x1 + cos x2;
/// the other channels pass through.
Values convertRotaryEmbedding(NodeContext &ctx) {
  Value *x = ctx.input(0, "X");
  Value *cosCache = ctx.input(1, "cos_cache"), *sinCache = ctx.input(2, "sin_cache");
  Value *positions = ctx.optionalInput(3);
  if (!x || !cosCache || !sinCache || ctx.failed())
    return {};
  int64_t rank = x->type().rank();
  if (rank != 3 && rank != 4) {
    ctx.emitError() << "needs an input of rank 3 or 4, got " << x->type().str();
    return {};
  }
  Value *h = rank == 4 ? ctx.create(OpKind::Transpose, {x}, {{"perm", Ints{0, 2, 1, 3}}}) : nullptr;
  if (rank == 3) {
    auto heads = headsOf(ctx, x, "num_heads", "X");
    if (!heads)
      return {};
    h = ctx.create(OpKind::Reshape, {x}, {{"shape", Ints{0, 0, *heads, -1}}});
  }
  if (!h)
    return {};
  auto d = ctx.staticDim(h, 3);
  if (!d)
    return {};
  int64_t r = ctx.attrInt("rotary_embedding_dim", 0);
  r = r == 0 ? *d : r;
  if (r <= 0 || r > *d || r % 2 != 0) {
    ctx.emitError() << "rotary_embedding_dim " << r << " must be even and at most the head size "
                    << *d;
    return {};
  }
  auto slice = [&](Value *v, int64_t begin, int64_t end, int64_t step) {
    return ctx.create(
        OpKind::Slice, {v},
        {{"starts", Ints{begin}}, {"ends", Ints{end}}, {"axes", Ints{3}}, {"steps", Ints{step}}});
  };
  DType dt = x->type().dtype;
  auto table = [&](Value *cache) {
    Value *c =
        positions ? ctx.create(OpKind::Gather, {cache, positions}, {{"axis", int64_t(0)}}) : cache;
    return ctx.create(OpKind::Unsqueeze, {ctx.castTo(c, dt)}, {{"axes", Ints{2}}});
  };
  Value *cs = table(cosCache), *sn = table(sinCache);
  Value *rot = r == *d ? h : slice(h, 0, r, 1);
  bool interleaved = ctx.attrInt("interleaved", 0) != 0;
  Value *x1 = interleaved ? slice(rot, 0, r, 2) : slice(rot, 0, r / 2, 1);
  Value *x2 = interleaved ? slice(rot, 1, r, 2) : slice(rot, r / 2, r, 1);
  Value *re = ctx.create(OpKind::Sub,
                         {ctx.create(OpKind::Mul, {cs, x1}), ctx.create(OpKind::Mul, {sn, x2})});
  Value *im = ctx.create(OpKind::Add,
                         {ctx.create(OpKind::Mul, {sn, x1}), ctx.create(OpKind::Mul, {cs, x2})});
  Value *out;
  if (interleaved) {
    Value *pairs = ctx.create(OpKind::Concat,
                              {ctx.create(OpKind::Unsqueeze, {re}, {{"axes", Ints{-1}}}),
                               ctx.create(OpKind::Unsqueeze, {im}, {{"axes", Ints{-1}}})},
                              {{"axis", int64_t(-1)}});
    out = ctx.create(OpKind::Reshape, {pairs}, {{"shape", Ints{0, 0, 0, r}}});
  } else {
    out = ctx.create(OpKind::Concat, {re, im}, {{"axis", int64_t(-1)}});
  }
  if (r < *d)
    out = ctx.create(OpKind::Concat, {out, slice(h, r, *d, 1)}, {{"axis", int64_t(-1)}});
  if (rank == 4)
    return {ctx.create(OpKind::Transpose, {out}, {{"perm", Ints{0, 2, 1, 3}}})};
  return {ctx.create(OpKind::Reshape, {out}, {{"shape", Ints{0, 0, -1}}})};
}

const Converter kConverters[] = {
    {"Attention", 23, convertAttention},
    {"RotaryEmbedding", 23, convertRotaryEmbedding},
};

} // namespace

std::span<const Converter> attentionConverters() {
  return kConverters;
}

} // namespace kiln::onnximport
