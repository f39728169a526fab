//===- Canonicalize.cpp - Simplify local patterns ---------------*- C++ -*-===//
//
// Runs a fixed table of local patterns with the greedy driver
// (PatternRewriter.h) until none applies:
//   1. remove-no-op: reshape, flatten, squeeze, unsqueeze, expand and cast
//      whose result type equals the operand type; transpose by the identity
//      permutation.
//   2. identity-operand: x+0, x-0, x*1, x/1 (and 0+x, 1*x for Commutative
//      ops) become x. See Note [Identity operands].
//   3. involution: f(f(x)) -> x for Involution ops (neg, not).
//   4. idempotent: f(f(x)) -> f(x) for Idempotent ops (relu, abs, ...).
//   5. transpose-chain: transpose(transpose(x, p), q) -> transpose(x, p∘q),
//      or x when the composition is the identity.
//   6. reshape-chain: a reshape-like op (reshape, flatten, squeeze,
//      unsqueeze) of a reshape-like op -> one reshape of the original value,
//      or the value itself when the types agree.
//   7. cast-chain: cast(cast(x, T1), T2) -> cast(x, T2), or x when T2 is
//      x's type, only when x -> T1 is exact. See Note [Cast chains].
//   8. gelu-composite: x * 0.5 * (1 + erf(x / sqrt(2))), as exporters spell
//      GELU, becomes gelu(x). See Note [GELU composites].
// Every rewrite keeps the replaced value's type exactly, and every rewrite
// removes at least one node (a chain that does not cancel out is merged
// only when the inner node has no other user), which is why the driver
// terminates. Nodes that a rewrite
// makes dead are erased; dead nodes already in the input are left to dce.
//
// Requires: a verified graph. Establishes: none of the patterns applies.
//
//   %z = constant dense<0.0> : f32[]          // before
//   %a = add(%x, %z) : f32[4]
//   %b = neg(%a) : f32[4]
//   %c = neg(%b) : f32[4]
//   return %c
//                                              // after
//   return %x
//
//===----------------------------------------------------------------------===//
#define DEBUG_TYPE "canonicalize"

#include "passes/Internal.h"
#include "passes/PassManager.h"
#include "passes/Passes.h"
#include "passes/PatternRewriter.h"

#include <cmath>
#include <cstdint>

namespace kiln {
namespace {

bool sameAttrs(const Node &a, const Node &b) {
  if (a.kind() != b.kind())
    return false;
  for (unsigned i = 0; i < a.attrs().size(); ++i)
    if (!attrEqual(a.attr(i), b.attr(i)))
      return false;
  return true;
}

/// True when `p`'s single result has exactly one user and is not returned:
/// merging `p` into that user removes `p`.
bool hasSoleUser(const Node *p) {
  return p->numResults() == 1 && p->result(0)->hasOneUse() && !p->result(0)->isGraphOutput();
}

//===----------------------------------------------------------------------===//
// 1. remove-no-op
//===----------------------------------------------------------------------===//

/// The permutation of a transpose node, with the default (empty: reverse
/// the dims) spelled out; empty when it is malformed.
std::vector<int64_t> permOf(const Node &n) {
  std::vector<int64_t> perm = TransposeOp(n).perm();
  int64_t rank = n.operand(0)->type().rank();
  if (perm.empty()) {
    for (int64_t i = rank - 1; i >= 0; --i)
      perm.push_back(i);
  }
  if (static_cast<int64_t>(perm.size()) != rank)
    return {};
  return perm;
}

bool isIdentityPerm(const std::vector<int64_t> &perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int64_t>(i))
      return false;
  return true;
}

bool isReshapeLike(OpKind k) {
  return k == OpKind::Reshape || k == OpKind::Flatten || k == OpKind::Squeeze ||
         k == OpKind::Unsqueeze;
}

bool removeNoOp(Node *n, PatternRewriter &rw) {
  OpKind k = n->kind();
  Value *x = n->numOperands() == 1 ? n->operand(0) : nullptr;
  if (!x || x->type() != n->result(0)->type())
    return false;
  // Same type means same element order for these: a row-major reshape to
  // the same shape, an expand that repeats nothing, a cast to the same dtype.
  bool noOp = isReshapeLike(k) || k == OpKind::Expand || k == OpKind::Cast;
  if (k == OpKind::Transpose) {
    std::vector<int64_t> perm = permOf(*n);
    noOp = perm.size() == static_cast<size_t>(x->type().rank()) && isIdentityPerm(perm);
  }
  if (!noOp)
    return false;
  rw.replaceNode(n, x);
  return true;
}

//===----------------------------------------------------------------------===//
// 2. identity-operand
//===----------------------------------------------------------------------===//

// Note [Identity operands]
// An operand is an identity when it is a constant splat of the identity
// element (one value repeated, any broadcast-compatible shape), and the
// other operand already has the node's result type: then broadcasting
// against the constant changed neither shape nor dtype, and the result is
// the other operand element for element.
//   x*1, x/1, x-(+0) are exact for every float, NaN and -0 included.
//   x+0 is exact except that (-0.0)+(+0.0) is +0.0: we fold it anyway,
//   treating the sign of zero as insignificant as every DL framework's
//   simplifier does; no op in the table distinguishes -0 from +0 except
//   through division by zero, whose infinity sign nobody relies on.
//   0*x is NOT folded to 0: for floats, NaN*0 and inf*0 are NaN and -1*0 is
//   -0; for integers it would be exact but needs a new constant of the
//   result shape, which canonicalize does not create.

/// Binary ops with an identity element; the identity may be on the left
/// only when the op is Commutative.
struct IdentityRule {
  OpKind kind;
  double identity;
};
constexpr IdentityRule kIdentityRules[] = {
    {OpKind::Add, 0.0},
    {OpKind::Sub, 0.0},
    {OpKind::Mul, 1.0},
    {OpKind::Div, 1.0},
};

bool removeIdentityOperand(Node *n, PatternRewriter &rw) {
  const IdentityRule *rule = nullptr;
  for (const IdentityRule &r : kIdentityRules)
    if (r.kind == n->kind())
      rule = &r;
  if (!rule || n->numOperands() != 2)
    return false;
  const TensorType &resultType = n->result(0)->type();
  for (unsigned side : {1u, 0u}) {
    if (side == 0 && !n->hasTrait(Commutative))
      break;
    Value *other = n->operand(1 - side);
    if (passes::isSplatConstant(n->operand(side), rule->identity) && other->type() == resultType) {
      rw.replaceNode(n, other);
      return true;
    }
  }
  return false;
}

//===----------------------------------------------------------------------===//
// 3, 4. involution and idempotent
//===----------------------------------------------------------------------===//

bool foldInvolution(Node *n, PatternRewriter &rw) {
  if (!n->hasTrait(Involution) || n->numOperands() != 1)
    return false;
  Node *p = n->operand(0)->definingNode();
  if (!p || !sameAttrs(*p, *n) || p->numOperands() != 1)
    return false;
  Value *x = p->operand(0);
  if (x->type() != n->result(0)->type())
    return false;
  rw.replaceNode(n, x);
  return true;
}

bool foldIdempotent(Node *n, PatternRewriter &rw) {
  if (!n->hasTrait(Idempotent) || n->numOperands() != 1)
    return false;
  Node *p = n->operand(0)->definingNode();
  if (!p || !sameAttrs(*p, *n) || p->result(0)->type() != n->result(0)->type())
    return false;
  rw.replaceNode(n, p->result(0));
  return true;
}

//===----------------------------------------------------------------------===//
// 5. transpose-chain
//===----------------------------------------------------------------------===//

bool foldTransposeChain(Node *n, PatternRewriter &rw) {
  if (n->kind() != OpKind::Transpose)
    return false;
  Node *p = n->operand(0)->definingNode();
  if (!p || p->kind() != OpKind::Transpose)
    return false;
  std::vector<int64_t> inner = permOf(*p), outer = permOf(*n);
  size_t rank = static_cast<size_t>(p->operand(0)->type().rank());
  if (inner.size() != rank || outer.size() != rank)
    return false;
  // out[i] = mid[outer[i]] = x[inner[outer[i]]].
  std::vector<int64_t> perm(outer.size());
  for (size_t i = 0; i < outer.size(); ++i)
    perm[i] = inner[static_cast<size_t>(outer[i])];
  Value *x = p->operand(0);
  const TensorType &type = n->result(0)->type();
  Value *replacement = nullptr;
  if (isIdentityPerm(perm))
    replacement = x->type() == type ? x : nullptr; // removes n whatever p's users
  else if (hasSoleUser(p))
    replacement = rw.createIfType(n, OpKind::Transpose, {x}, {{"perm", perm}}, type);
  if (!replacement)
    return false;
  rw.replaceNode(n, replacement);
  return true;
}

//===----------------------------------------------------------------------===//
// 6. reshape-chain
//===----------------------------------------------------------------------===//

bool foldReshapeChain(Node *n, PatternRewriter &rw) {
  if (!isReshapeLike(n->kind()))
    return false;
  Node *p = n->operand(0)->definingNode();
  if (!p || !isReshapeLike(p->kind()))
    return false;
  Value *x = p->operand(0);
  const TensorType &type = n->result(0)->type();
  Value *replacement = nullptr;
  if (x->type() == type) {
    replacement = x; // removes n whatever p's users
  } else if (!hasSoleUser(p)) {
    return false;
  } else if (type.isStatic()) {
    // The result's sizes as the target shape need no knowledge of what
    // 0 or -1 mean in `n`'s own attribute.
    replacement =
        rw.createIfType(n, OpKind::Reshape, {x}, {{"shape", staticSizes(type.shape)}}, type);
  } else if (n->kind() == OpKind::Reshape) {
    // Symbolic dims: reuse the outer target; createIfType refuses it unless
    // it means the same thing on x (x and the middle value have the same
    // element count, but a 0 entry copies a dim of the operand).
    replacement =
        rw.createIfType(n, OpKind::Reshape, {x}, {{"shape", ReshapeOp(*n).shape()}}, type);
  }
  if (!replacement)
    return false;
  rw.replaceNode(n, replacement);
  return true;
}

//===----------------------------------------------------------------------===//
// 7. cast-chain
//===----------------------------------------------------------------------===//

// Note [Cast chains]
// cast(cast(x: T0, T1), T2) equals cast(x, T2) whenever the first cast is
// exact, i.e. T1 represents every value of T0: then the middle value is x's
// value, and casting it to T2 is casting x to T2 (conversions depend only
// on the value). The rule is about the FIRST step only:
//   f32 -> f64 -> f32   fires (exact widening, then back: x itself)
//   i8 -> i32 -> f32    fires (becomes cast(x, f32))
//   f32 -> f16 -> f32   does not (narrowing loses precision and range)
//   f64 -> f32 -> f16   does not (double rounding can differ from one)
//   f32 -> i32 -> f32   does not (truncation)
// So it is narrowing first that is unsafe; widening and then narrowing back
// to the original type is exactly the identity.

/// True when `to` represents every value of `from` exactly.
bool isExactCast(DType from, DType to) {
  if (from == to || from == DType::Bool)
    return true;
  if (to == DType::Bool)
    return false;
  // Significand bits (with the implicit bit) of a float dtype; 0 otherwise.
  auto significandBits = [](DType t) {
    switch (t) {
    case DType::F16:
      return 11;
    case DType::BF16:
      return 8;
    case DType::F32:
      return 24;
    case DType::F64:
      return 53;
    default:
      return 0;
    }
  };
  if (isInteger(from)) {
    const int64_t flo = intLowest(from), fhi = intHighest(from);
    if (isInteger(to))
      return intLowest(to) <= flo && fhi <= intHighest(to);
    // Integers up to 2^bits are exact in a float with `bits` significand bits.
    int bits = significandBits(to);
    int64_t limit = int64_t(1) << bits;
    return bits > 0 && flo >= -limit && fhi <= limit;
  }
  if (isFloat(from) && isFloat(to)) {
    // A mini float's codes are exact in every compute float (the largest,
    // f8e5m2's 57344, and the smallest, f8e5m2fnuz's 2^-17, fit f16); a
    // storage float holds no other dtype exactly.
    if (isStorageDType(from) || isStorageDType(to))
      return isStorageDType(from) && !isStorageDType(to);
    // f16 and bf16 have different exponent ranges: neither holds the other.
    if (from == DType::F16 && to == DType::BF16)
      return false;
    if (from == DType::BF16 && to == DType::F16)
      return false;
    return significandBits(from) <= significandBits(to);
  }
  return false; // float -> integer truncates
}

bool foldCastChain(Node *n, PatternRewriter &rw) {
  if (n->kind() != OpKind::Cast)
    return false;
  Node *p = n->operand(0)->definingNode();
  if (!p || p->kind() != OpKind::Cast)
    return false;
  Value *x = p->operand(0);
  if (!isExactCast(x->type().dtype, p->result(0)->type().dtype))
    return false;
  const TensorType &type = n->result(0)->type();
  Value *replacement = nullptr;
  if (x->type() == type)
    replacement = x; // removes n whatever p's other users are
  else if (hasSoleUser(p))
    replacement = rw.createIfType(n, OpKind::Cast, {x}, {{"to", type.dtype}}, type);
  if (!replacement)
    return false;
  rw.replaceNode(n, replacement);
  return true;
}

//===----------------------------------------------------------------------===//
// 8. gelu-composite
//===----------------------------------------------------------------------===//

// Note [GELU composites]
// ONNX before opset 20 has no Gelu, so PyTorch exports F.gelu as
//   %d = div(%x, 1.4142135)   (or mul(%x, 0.70710677))
//   %e = erf(%d)
//   %a = add(%e, 1.0)
//   %m = mul(%x, %a)          (or mul(mul(%x, 0.5), %a), operands in any order)
//   %y = mul(%m, 0.5)
// which is gelu(x) with approximate = "none" by definition. As one op it
// runs as a oneDNN post-op after a matmul or conv, or as one scalar
// expression in a kernel, instead of five nodes that tie x to two users
// (which keeps the chain out of library epilogues). Constants must be
// scalar splats within 1e-6 of 0.5, 1, sqrt(2) or 1/sqrt(2), and the inner
// nodes must have no other user.

/// True when `v` is a constant whose elements all lie within `tol` of `x`.
bool isSplatNear(const Value *v, double x, double tol = 1e-6) {
  const Tensor *t = passes::constantValue(v);
  if (!t || t->numel() == 0 || !isFloat(t->dtype()))
    return false;
  for (int64_t i = 0; i < t->numel(); ++i)
    if (!(std::fabs(t->getDouble(i) - x) <= tol)) // NaN is no splat
      return false;
  return true;
}

/// The single-use binary `kind` node defining `v`, or nullptr.
Node *soleBinary(Value *v, OpKind kind) {
  Node *d = v->definingNode();
  return d && d->kind() == kind && d->numOperands() == 2 && hasSoleUser(d) ? d : nullptr;
}

/// x when `a` is 1 + erf(x / sqrt(2)) (single-use inner nodes), else nullptr.
Value *geluErfArgument(Value *a) {
  Node *add = soleBinary(a, OpKind::Add);
  if (!add)
    return nullptr;
  for (unsigned i = 0; i < 2; ++i) {
    Node *erf = add->operand(i)->definingNode();
    if (!erf || erf->kind() != OpKind::Erf || !hasSoleUser(erf) ||
        !isSplatNear(add->operand(1 - i), 1.0))
      continue;
    Value *d = erf->operand(0);
    if (Node *div = soleBinary(d, OpKind::Div); div && isSplatNear(div->operand(1), M_SQRT2))
      return div->operand(0);
    if (Node *mul = soleBinary(d, OpKind::Mul))
      for (unsigned j = 0; j < 2; ++j)
        if (isSplatNear(mul->operand(1 - j), M_SQRT1_2))
          return mul->operand(j);
  }
  return nullptr;
}

bool foldGeluComposite(Node *n, PatternRewriter &rw) {
  if (n->kind() != OpKind::Mul || !isFloat(n->result(0)->type().dtype))
    return false;
  const TensorType &type = n->result(0)->type();
  Value *x = nullptr;
  for (unsigned i = 0; i < 2 && !x; ++i) {
    Value *l = n->operand(i), *r = n->operand(1 - i);
    Node *inner = soleBinary(l, OpKind::Mul);
    if (!inner)
      continue;
    for (unsigned j = 0; j < 2 && !x; ++j) {
      Value *s = inner->operand(j), *t = inner->operand(1 - j);
      // mul(mul(x, 1 + erf(...)), 0.5)
      if (isSplatNear(r, 0.5) && geluErfArgument(t) == s)
        x = s;
      // mul(mul(x, 0.5), 1 + erf(...))
      else if (isSplatNear(t, 0.5) && geluErfArgument(r) == s)
        x = s;
    }
  }
  if (!x || x->type() != type)
    return false;
  Value *g = rw.createIfType(n, OpKind::Gelu, {x}, {{"approximate", std::string("none")}}, type);
  if (!g)
    return false;
  rw.replaceNode(n, g);
  return true;
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

constexpr RewritePattern kPatterns[] = {
    {"remove-no-op", removeNoOp},
    {"identity-operand", removeIdentityOperand},
    {"involution", foldInvolution},
    {"idempotent", foldIdempotent},
    {"transpose-chain", foldTransposeChain},
    {"reshape-chain", foldReshapeChain},
    {"cast-chain", foldCastChain},
    {"gelu-composite", foldGeluComposite},
};

class CanonicalizePass : public Pass {
public:
  CanonicalizePass() : Pass(kCanonicalizeSpec.name, kCanonicalizeSpec.description) {}

  PassResult run(Graph &g, PassContext &ctx) override {
    unsigned rewrites = 0, erased = 0;
    // Each rewrite removes a node, so numNodes bounds the rewrites; the
    // slack only matters if a pattern breaks that rule.
    unsigned limit = static_cast<unsigned>(g.numNodes()) * 2 + 16;
    bool converged = applyPatternsGreedily(g, kPatterns, rewrites, erased, limit);
    numRewrites += rewrites;
    numErased += erased;
    if (!converged) {
      ctx.diag().emitError(Location()) << "canonicalize did not converge on graph '@" << g.name()
                                       << "' after " << limit << " rewrites";
      return PassResult::failure();
    }
    return PassResult::success(rewrites > 0);
  }

private:
  Statistic numRewrites{this, "num-rewrites", "Patterns applied"};
  Statistic numErased{this, "num-erased", "Nodes erased"};
};

} // namespace

std::unique_ptr<Pass> createCanonicalizePass() {
  return std::make_unique<CanonicalizePass>();
}

} // namespace kiln
