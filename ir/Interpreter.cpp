//===- Interpreter.cpp - The reference interpreter --------------*- C++ -*-===//
#include "ir/Interpreter.h"

#include "ir/Builder.h"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace kiln {

// Note [Assumed equal dims]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// Type inference meets dims it cannot compare: add(f32[n,4], f32[m,4]), a
// matmul contracting k with k2, a concat of [b,8] and [c,8]. Rather than
// give up (`?`, which loses the batch of everything after it), it assumes
// them equal (OpContext::assumeEqual; broadcasting assumes neither is 1,
// as torch.export's guards do) and the result keeps one of them. The
// assumptions are not stored: dimAssumptions re-infers the graph and
// collects them, so they always match the nodes a pass left. Each run
// checks them once, in bindInputs, before any kernel runs; a broken one is
// one error at the node naming both symbols, their sizes and the inputs
// that bound them. `kiln inspect` lists them.

std::string DimAssumption::str() const {
  return dims.lhs.str() + " == " + dims.rhs.str();
}

std::vector<DimAssumption> dimAssumptions(const Graph &g) {
  std::vector<DimAssumption> out;
  std::set<std::pair<std::string, std::string>> seen;
  DiagnosticEngine quiet;
  ScopedDiagnosticCollector drop(quiet); // a node that does not infer is the verifier's to report
  for (const Node *n : g.nodes()) {
    std::vector<DimEquality> eq;
    (void)inferNodeTypes(*n, quiet, &eq);
    for (DimEquality &e : eq) {
      std::string a = e.lhs.str(), b = e.rhs.str();
      if (seen.insert({std::min(a, b), std::max(a, b)}).second)
        out.push_back(DimAssumption{std::move(e), n});
    }
  }
  return out;
}

FailureOr<std::map<std::string, int64_t>> bindInputs(const Graph &g, std::span<const Tensor> inputs,
                                                     DiagnosticEngine &diag) {
  return bindInputs(g, inputs, diag, dimAssumptions(g));
}

FailureOr<std::map<std::string, int64_t>> bindInputs(const Graph &g, std::span<const Tensor> inputs,
                                                     DiagnosticEngine &diag,
                                                     std::span<const DimAssumption> assumed) {
  if (inputs.size() != g.numInputs())
    return diag.emitError(Location()) << "graph '@" << g.name() << "' takes " << g.numInputs()
                                      << " input(s), got " << inputs.size();
  std::map<std::string, std::pair<int64_t, std::string>> bound; // symbol -> size, where
  // Dims that are expressions (`S+1`), checked once every lone symbol is bound.
  struct Deferred {
    Dim dim;
    int64_t got;
    std::string what;
    size_t axis;
  };
  std::vector<Deferred> deferred;
  bool ok = true;
  for (unsigned i = 0; i < g.numInputs(); ++i) {
    const Value *v = g.input(i);
    const TensorType &want = v->type();
    const Tensor &t = inputs[i];
    std::string what = "input " + std::to_string(i) + " ('%" + v->name() + "')";
    if (t.isNull()) {
      diag.emitError(Location()) << what << " is missing";
      ok = false;
      continue;
    }
    if (t.dtype() != want.dtype) {
      diag.emitError(Location()) << what << " expects dtype " << dtypeName(want.dtype) << ", got "
                                 << dtypeName(t.dtype());
      ok = false;
      continue;
    }
    bool shapeOk = t.rank() == want.rank();
    for (size_t d = 0; shapeOk && d < want.shape.size(); ++d) {
      const Dim &dim = want.shape[d];
      int64_t got = t.shape()[d];
      if (dim.isStatic()) {
        shapeOk = dim.size() == got;
      } else if (dim.symbol().empty()) {
        if (!dim.isDynamic())
          deferred.push_back(Deferred{dim, got, what, d});
      } else {
        auto [it, inserted] =
            bound.emplace(dim.symbol(), std::make_pair(got, what + " dim " + std::to_string(d)));
        if (!inserted && it->second.first != got) {
          diag.emitError(Location())
              << what << " has " << dim.symbol() << " = " << got << " but " << it->second.second
              << " bound " << dim.symbol() << " = " << it->second.first;
          ok = false;
        }
      }
    }
    if (!shapeOk) {
      diag.emitError(Location()) << what << " expects shape " << want.str() << ", got "
                                 << t.type().str();
      ok = false;
    }
  }
  std::map<std::string, int64_t> values;
  for (const auto &[name, sizeAndWhere] : bound)
    values[name] = sizeAndWhere.first;
  for (const Deferred &e : deferred) {
    auto want = evaluateDim(e.dim, values);
    if (!want) {
      diag.emitError(Location()) << e.what << " dim " << e.axis << " is " << e.dim.str()
                                 << ", whose symbols no input dim binds by itself";
      ok = false;
    } else if (*want != e.got) {
      diag.emitError(Location()) << e.what << " has dim " << e.axis << " = " << e.got << " but "
                                 << e.dim.str() << " = " << *want;
      ok = false;
    }
  }
  if (!ok)
    return failure();
  // Note [Assumed equal dims].
  auto side = [&](const Dim &d) -> std::pair<std::optional<int64_t>, std::string> {
    std::optional<int64_t> v = evaluateDim(d, values);
    std::string s = d.str();
    if (!v || d.isStatic())
      return {v, s};
    s += " = " + std::to_string(*v);
    if (auto it = bound.find(d.symbol()); !d.symbol().empty() && it != bound.end())
      s += " (from " + it->second.second + ")";
    return {v, s};
  };
  for (const DimAssumption &a : assumed) {
    auto [lhs, lhsText] = side(a.dims.lhs);
    auto [rhs, rhsText] = side(a.dims.rhs);
    if (lhs && rhs && *lhs != *rhs) {
      diag.emitError(a.node->loc()) << "'" << a.node->mnemonic() << "' op assumes " << a.str()
                                    << ", but the inputs give " << lhsText << " and " << rhsText;
      ok = false;
    }
  }
  if (!ok)
    return failure();
  return values;
}

std::set<std::string> inputSymbols(const Graph &g) {
  std::set<std::string> out;
  for (const Value *v : g.inputs())
    for (const Dim &d : v->type().shape)
      if (auto e = d.expr())
        e->collectSymbols(out);
  return out;
}

LogicalResult checkInputs(const Graph &g, std::span<const Tensor> inputs, DiagnosticEngine &diag) {
  return failed(bindInputs(g, inputs, diag)) ? failure() : success();
}

FailureOr<std::vector<Tensor>> evaluateNode(const Node &n, std::span<const Tensor> operands,
                                            DiagnosticEngine &diag) {
  return evaluateNode(n, n.attrs(), operands, diag);
}

FailureOr<std::vector<Tensor>> evaluateNode(const Node &n, std::span<const Attribute> attrs,
                                            std::span<const Tensor> operands,
                                            DiagnosticEngine &diag) {
  return evaluateOp(n.info(), attrs, operands, n.numResults(), n.loc(), diag);
}

FailureOr<std::vector<Tensor>> evaluateOp(const OpInfo &info, std::span<const Attribute> attrs,
                                          std::span<const Tensor> operands, unsigned numResults,
                                          const Location &loc, DiagnosticEngine &diag) {
  std::vector<TensorType> types;
  for (const Tensor &t : operands)
    types.push_back(t.type());
  auto resultTypes = inferTypes(info, types, attrs, numResults, loc, diag);
  if (failed(resultTypes))
    return failure();
  // Results whose dims depend on operand values are sized by the kernel.
  bool valueDependent = info.hasTrait(ValueDependentShape);
  for (const TensorType &t : *resultTypes)
    if (!t.isStatic() && !valueDependent)
      return diag.emitError(loc) << "'" << info.mnemonic
                                 << "' op result shape is not static on concrete inputs: "
                                 << t.str();
  OpContext ctx{info, types, attrs, numResults, loc, diag};
  auto results = info.reference(ctx, operands, *resultTypes);
  if (failed(results))
    return failure();
  KILN_ASSERT(results->size() == resultTypes->size());
  for (size_t i = 0; i < results->size(); ++i) {
    const TensorType got = (*results)[i].type(), &want = (*resultTypes)[i];
    if (!valueDependent) {
      KILN_ASSERT(got == want && "reference kernel result type");
      continue;
    }
    if (!refines(got, want))
      return diag.emitError(loc) << "'" << info.mnemonic << "' op result " << i << " is "
                                 << got.str() << " but its type is " << want.str();
  }
  return results;
}

FailureOr<std::vector<Tensor>> interpret(const Graph &g, std::span<const Tensor> inputs,
                                         DiagnosticEngine &diag) {
  auto symbols = bindInputs(g, inputs, diag);
  if (failed(symbols))
    return failure();
  std::unordered_map<const Value *, Tensor> env;
  std::unordered_map<const Value *, size_t> remaining; // uses left before the value dies
  for (unsigned i = 0; i < g.numInputs(); ++i)
    env[g.input(i)] = inputs[i];
  for (Node *n : g.nodes())
    for (Value *v : n->operands())
      ++remaining[v];
  for (Value *v : g.outputs())
    ++remaining[v]; // outputs never die

  for (Node *n : g.nodes()) {
    std::vector<Tensor> operands;
    for (Value *v : n->operands())
      operands.push_back(env.at(v));
    bool symbolic = std::any_of(n->attrs().begin(), n->attrs().end(),
                                [](const Attribute &a) { return hasSymbols(a); });
    std::vector<Attribute> bound;
    if (symbolic)
      for (const Attribute &a : n->attrs())
        bound.push_back(substituteSymbols(a, *symbols));
    auto results =
        symbolic ? evaluateNode(*n, bound, operands, diag) : evaluateNode(*n, operands, diag);
    if (failed(results))
      return failure();
    // A value-dependent result may have a recorded type more precise than
    // inference's (an ONNX Scan's length): the run must agree with it.
    if (n->hasTrait(ValueDependentShape))
      for (unsigned i = 0; i < n->numResults(); ++i) {
        TensorType want = n->result(i)->type();
        for (Dim &d : want.shape)
          d = substituteDim(d, *symbols);
        if (const TensorType got = (*results)[i].type(); !refines(got, want))
          return diag.emitError(n->loc()) << "'" << n->mnemonic() << "' op result " << i << " is "
                                          << got.str() << " but the graph records " << want.str();
      }
    for (Value *v : n->operands())
      if (--remaining[v] == 0)
        env.erase(v);
    for (unsigned i = 0; i < n->numResults(); ++i)
      if (remaining[n->result(i)] > 0)
        env[n->result(i)] = std::move((*results)[i]);
  }
  std::vector<Tensor> outs;
  for (Value *v : g.outputs())
    outs.push_back(env.at(v));
  return outs;
}

} // namespace kiln
