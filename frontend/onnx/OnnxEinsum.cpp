//===- OnnxEinsum.cpp - Einsum as transposes and a batched matmul -*- C++ -*-===//
//
// Einsum (opset 12) with one or two operands, lowered to the ops Kiln
// compiles well: a letter of an operand that neither the other operand nor
// the output has is summed first (reduce_sum); then, for two operands,
//
//   A -> transpose to [batch, free_A, contracted] -> reshape [B, M, K]
//   B -> transpose to [batch, contracted, free_B] -> reshape [B, K, N]
//   matmul -> [B, M, N] -> reshape [batch..., free_A..., free_B...]
//   -> transpose to the output's letter order
//
// (batch letters are in A, B and the output; contracted ones in A and B
// only). So `bhid,bhjd->bhij` (attention scores) is one batched matmul with
// a transposed right side, and `bi,oij,bj->bo` style bilinear layers become
// two. One operand is a transpose and sums. `...` stands for the leading
// dims the letters leave (the same count in every operand, or broadcast as
// 1s), and an equation without `->` outputs its letters that appear once,
// in alphabetical order, as numpy does. Refused, with the reason: a letter
// repeated within one operand (diagonals), more than two operands, and
// dynamic dims where a reshape needs their size.
//
//===----------------------------------------------------------------------===//
#include "frontend/onnx/Internal.h"

#include <algorithm>
#include <map>
#include <set>

namespace kiln::onnximport {
namespace {

using Values = std::vector<Value *>;

struct Equation {
  std::vector<std::string> inputs; ///< one letter per dim
  std::string output;
};

/// Parses `eq` for operands of `ranks`; `...` becomes upper-case letters
/// (never used by the letters themselves, which are lower case here after a
/// check), right-aligned across the operands.
std::optional<Equation> parseEquation(NodeContext &ctx, std::string eq,
                                      const std::vector<int64_t> &ranks) {
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  Equation e;
  std::string lhs = eq, rhs;
  bool explicitOut = false;
  if (auto arrow = eq.find("->"); arrow != std::string::npos) {
    lhs = eq.substr(0, arrow);
    rhs = eq.substr(arrow + 2);
    explicitOut = true;
  }
  std::vector<std::string> terms;
  size_t start = 0;
  for (size_t i = 0; i <= lhs.size(); ++i)
    if (i == lhs.size() || lhs[i] == ',') {
      terms.push_back(lhs.substr(start, i - start));
      start = i + 1;
    }
  if (terms.size() != ranks.size()) {
    ctx.emitError() << "equation '" << eq << "' has " << terms.size() << " operands, the node "
                    << ranks.size();
    return std::nullopt;
  }
  auto valid = [](const std::string &t) {
    for (size_t i = 0; i < t.size();) {
      if (t.compare(i, 3, "...") == 0) {
        i += 3;
        continue;
      }
      if (!std::islower(static_cast<unsigned char>(t[i])))
        return false;
      ++i;
    }
    return true;
  };
  int64_t ellipsisDims = 0;
  for (size_t k = 0; k < terms.size(); ++k) {
    if (!valid(terms[k])) {
      ctx.emitError() << "equation '" << eq << "': operand " << k
                      << " has letters other than a-z and '...'";
      return std::nullopt;
    }
    size_t dots = terms[k].find("...");
    int64_t letters = static_cast<int64_t>(terms[k].size()) - (dots == std::string::npos ? 0 : 3);
    if (dots == std::string::npos ? letters != ranks[k] : letters > ranks[k]) {
      ctx.emitError() << "equation '" << eq << "': operand " << k << " '" << terms[k]
                      << "' does not match its rank " << ranks[k];
      return std::nullopt;
    }
    if (dots != std::string::npos)
      ellipsisDims = std::max(ellipsisDims, ranks[k] - letters);
  }
  auto expand = [&](const std::string &t, int64_t rank) {
    size_t dots = t.find("...");
    if (dots == std::string::npos)
      return t;
    int64_t n = rank < 0 ? ellipsisDims : rank - static_cast<int64_t>(t.size() - 3);
    std::string e;
    for (int64_t i = ellipsisDims - n; i < ellipsisDims; ++i)
      e += static_cast<char>('A' + i);
    return t.substr(0, dots) + e + t.substr(dots + 3);
  };
  for (size_t k = 0; k < terms.size(); ++k)
    e.inputs.push_back(expand(terms[k], ranks[k]));
  if (explicitOut) {
    if (!valid(rhs)) {
      ctx.emitError() << "equation '" << eq << "': the output has letters other than a-z and '...'";
      return std::nullopt;
    }
    e.output = expand(rhs, -1);
  } else {
    std::map<char, int> count;
    for (const std::string &t : e.inputs)
      for (char c : t)
        ++count[c];
    for (int64_t i = 0; i < ellipsisDims; ++i)
      e.output += static_cast<char>('A' + i);
    for (auto [c, n] : count)
      if (n == 1 && std::islower(static_cast<unsigned char>(c)))
        e.output += c;
  }
  for (const std::string &t : e.inputs)
    for (size_t i = 0; i < t.size(); ++i)
      if (t.find(t[i], i + 1) != std::string::npos) {
        ctx.emitError() << "equation '" << eq << "' repeats '" << t[i]
                        << "' within an operand (a diagonal), which is not supported";
        return std::nullopt;
      }
  for (char c : e.output) {
    bool found = false;
    for (const std::string &t : e.inputs)
      found = found || t.find(c) != std::string::npos;
    if (!found || std::count(e.output.begin(), e.output.end(), c) > 1) {
      ctx.emitError() << "equation '" << eq << "': output letter '" << c
                      << "' is repeated or in no operand";
      return std::nullopt;
    }
  }
  return e;
}

/// `x` with the dims of `letters` summed away when `keep` lacks them.
Value *sumAway(NodeContext &ctx, Value *x, std::string &letters, const std::string &keep) {
  Ints axes;
  std::string rest;
  for (size_t i = 0; i < letters.size(); ++i) {
    if (keep.find(letters[i]) == std::string::npos)
      axes.push_back(static_cast<int64_t>(i));
    else
      rest += letters[i];
  }
  if (axes.empty())
    return x;
  letters = rest;
  return ctx.create(OpKind::ReduceSum, {x}, {{"axes", axes}, {"keepdims", false}});
}

/// `x` (dims named by `from`) transposed to the order of `to`.
Value *permute(NodeContext &ctx, Value *x, const std::string &from, const std::string &to) {
  if (from == to)
    return x;
  Ints perm;
  for (char c : to)
    perm.push_back(static_cast<int64_t>(from.find(c)));
  return ctx.create(OpKind::Transpose, {x}, {{"perm", perm}});
}

Values convertEinsum(NodeContext &ctx) {
  std::vector<Value *> xs;
  for (size_t i = 0; i < ctx.numInputs(); ++i)
    xs.push_back(ctx.input(i, "Inputs"));
  if (ctx.failed())
    return {};
  if (xs.empty() || xs.size() > 2) {
    ctx.emitError() << "has " << xs.size() << " operands; Kiln lowers Einsum of one or two";
    return {};
  }
  std::vector<int64_t> ranks;
  for (Value *x : xs)
    ranks.push_back(x->type().rank());
  auto eq = parseEquation(ctx, ctx.attrString("equation", ""), ranks);
  if (!eq)
    return {};
  if (xs.size() == 1) {
    std::string letters = eq->inputs[0];
    Value *y = sumAway(ctx, xs[0], letters, eq->output);
    return {permute(ctx, y, letters, eq->output)};
  }
  std::string a = eq->inputs[0], b = eq->inputs[1];
  // Letters only one operand has and the output lacks are summed first.
  Value *x = sumAway(ctx, xs[0], a, b + eq->output);
  Value *y = sumAway(ctx, xs[1], b, a + eq->output);
  std::string batch, contracted, freeA, freeB;
  for (char c : a) {
    bool inB = b.find(c) != std::string::npos, inOut = eq->output.find(c) != std::string::npos;
    (inB ? (inOut ? batch : contracted) : freeA) += c;
  }
  for (char c : b)
    if (a.find(c) == std::string::npos)
      freeB += c;
  // The sizes of every letter (static; broadcast 1s take the other's size).
  std::map<char, int64_t> size;
  for (auto [v, letters] : {std::pair{x, a}, std::pair{y, b}})
    for (size_t i = 0; i < letters.size(); ++i) {
      auto n = ctx.staticDim(v, static_cast<int64_t>(i));
      if (!n)
        return {};
      int64_t &s = size.try_emplace(letters[i], *n).first->second;
      if (s != *n && s != 1 && *n != 1) {
        ctx.emitError() << "letter '" << letters[i] << "' has sizes " << s << " and " << *n;
        return {};
      }
      s = s == 1 ? *n : s; // a 1 broadcasts (to 0 as well)
    }
  auto prod = [&](const std::string &ls) {
    int64_t p = 1;
    for (char c : ls)
      p *= size[c];
    return p;
  };
  // Broadcast the letters both operands share (batch and contracted) from
  // size 1 to the common size before flattening.
  auto fit = [&](Value *v, const std::string &from, const std::string &to) {
    Value *t = permute(ctx, v, from, to);
    Ints shape;
    bool broadcast = false;
    for (size_t i = 0; i < to.size(); ++i) {
      bool shared = a.find(to[i]) != std::string::npos && b.find(to[i]) != std::string::npos;
      shape.push_back(shared ? size[to[i]] : 1);
      broadcast = broadcast || (shared && t->type().shape[i] != Dim(size[to[i]]));
    }
    return broadcast ? ctx.create(OpKind::Expand, {t}, {{"shape", shape}}) : t;
  };
  std::string orderA = batch + freeA + contracted, orderB = batch + contracted + freeB;
  Value *lhs = ctx.create(OpKind::Reshape, {fit(x, a, orderA)},
                          {{"shape", Ints{prod(batch), prod(freeA), prod(contracted)}}});
  Value *rhs = ctx.create(OpKind::Reshape, {fit(y, b, orderB)},
                          {{"shape", Ints{prod(batch), prod(contracted), prod(freeB)}}});
  Value *mm = ctx.create(OpKind::MatMul, {lhs, rhs});
  Ints full;
  std::string order = batch + freeA + freeB;
  for (char c : order)
    full.push_back(size[c]);
  Value *r = ctx.create(OpKind::Reshape, {mm}, {{"shape", full}});
  return {permute(ctx, r, order, eq->output)};
}

const Converter kConverters[] = {
    {"Einsum", 12, convertEinsum},
};

} // namespace

std::span<const Converter> einsumConverters() {
  return kConverters;
}

} // namespace kiln::onnximport
