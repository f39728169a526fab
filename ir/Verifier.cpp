//===- Verifier.cpp - Checking graph invariants -----------------*- C++ -*-===//
//
// The invariants of a well-formed graph. Each check below cites its rule.
//
//   [V1] Every node's operand count is within its op's arity, and its result
//        count matches the op (any positive count for variadic results).
//   [V2] Every operand is a value of this graph defined before its use: a
//        graph input or a result of an earlier node (SSA, topological order,
//        hence no cycles).
//   [V3] Use lists are exact: a value lists (user, index) iff that user's
//        operand at index is the value.
//   [V4] Every attribute has the kind the op table gives it.
//   [V5] The op's type inference accepts the operand types and attributes,
//        and each recorded result type equals the inferred one (or, for an
//        op whose result dims depend on operand values, refines it: a
//        known dim where inference gives `?`).
//   [V6] Graph outputs are values of this graph; there is at least one.
//   [V7] Value name hints are unique within a graph.
//   [V8] A constant's tensor is present and matches its result type.
//   [V9] Every region (a Graph attribute: the branches of `if`, the body of
//        `loop`) is present and is a well-formed graph by these rules; it
//        sees only its own inputs, so no value crosses a region boundary
//        except as an operand and a region input, or a region output and a
//        result. Whether the region fits its node (inputs, outputs, types)
//        is the op's type inference, [V5].
//
//===----------------------------------------------------------------------===//
#include "ir/Verifier.h"

#include "ir/Builder.h"

#include <algorithm>
#include <unordered_set>

namespace kiln {

LogicalResult verify(const Graph &g, DiagnosticEngine &diag) {
  bool ok = true;
  std::unordered_set<const Value *> defined;
  std::unordered_set<std::string> names;
  auto checkName = [&](const Value *v, const Location &loc) {
    if (!v->name().empty() && !names.insert(v->name()).second) {
      diag.emitError(loc) << "[V7] value name '%" << v->name() << "' is defined twice in graph '@"
                          << g.name() << "'";
      ok = false;
    }
  };
  for (Value *v : g.inputs()) {
    defined.insert(v);
    checkName(v, Location());
  }

  for (Node *n : g.nodes()) {
    const OpInfo &info = n->info();
    auto err = [&](const char *rule) {
      ok = false;
      InFlightDiagnostic d = diag.emitError(n->loc());
      d << rule << " '" << info.mnemonic << "' op ";
      return d;
    };
    bool nodeOk = true;
    int numOps = static_cast<int>(n->numOperands());
    if (numOps < info.minOperands || (info.maxOperands != kVariadic && numOps > info.maxOperands)) {
      auto d = err("[V1]");
      d << "has " << numOps << " operands, expects " << info.minOperands;
      if (info.maxOperands == kVariadic)
        d << " or more";
      else if (info.maxOperands != info.minOperands)
        d << " to " << info.maxOperands;
      nodeOk = false;
    }
    if ((info.numResults == kVariadic && n->numResults() == 0) ||
        (info.numResults != kVariadic && static_cast<int>(n->numResults()) != info.numResults)) {
      err("[V1]") << "has " << n->numResults() << " results, expects "
                  << (info.numResults == kVariadic ? std::string("1 or more")
                                                   : std::to_string(info.numResults));
      nodeOk = false;
    }
    for (unsigned i = 0; i < n->numOperands(); ++i) {
      Value *v = n->operand(i);
      if (!v || v->graph() != &g || !defined.count(v)) {
        err("[V2]") << "operand " << i << " is not defined before its use";
        nodeOk = false;
        continue;
      }
      if (std::find(v->uses().begin(), v->uses().end(), Use{n, i}) == v->uses().end()) {
        err("[V3]") << "operand " << i << " is missing from its value's use list";
        nodeOk = false;
      }
    }
    for (unsigned i = 0; i < info.attrs.size(); ++i) {
      if (attrKind(n->attr(i)) != info.attrs[i].kind) {
        err("[V4]") << "attribute '" << info.attrs[i].name << "' must be "
                    << attrKindName(info.attrs[i].kind);
        nodeOk = false;
        continue;
      }
      if (const auto *region = std::get_if<GraphAttr>(&n->attr(i))) {
        if (!*region) {
          err("[V9]") << "region '" << info.attrs[i].name << "' is missing";
          nodeOk = false;
        } else if (failed(verify(**region, diag))) {
          err("[V9]") << "region '" << info.attrs[i].name << "' (graph '@" << (*region)->name()
                      << "') is not well formed";
          nodeOk = false;
        }
      }
    }
    if (nodeOk && n->kind() == OpKind::Constant) {
      const Tensor &t = ConstantOp(*n).value();
      if (t.isNull() || t.type() != n->result(0)->type()) {
        err("[V8]") << "value " << (t.isNull() ? std::string("is missing") : t.str())
                    << " does not match its type " << n->result(0)->type().str();
        nodeOk = false;
      }
    }
    if (nodeOk) {
      auto types = inferNodeTypes(*n, diag);
      if (failed(types)) {
        ok = false;
      } else {
        for (unsigned i = 0; i < n->numResults(); ++i) {
          // A value-dependent result may be recorded more precisely than
          // inference can say (a traced loop's trip count).
          const TensorType &have = n->result(i)->type();
          bool matches =
              n->hasTrait(ValueDependentShape) ? refines(have, (*types)[i]) : have == (*types)[i];
          if (!matches) {
            err("[V5]") << "result " << i << " has type " << n->result(i)->type().str()
                        << " but the op infers " << (*types)[i].str();
          }
        }
      }
    }
    for (unsigned i = 0; i < n->numResults(); ++i) {
      Value *r = n->result(i);
      for (const Use &u : r->uses())
        if (!u.user || u.user->graph() != &g || u.operandIndex >= u.user->numOperands() ||
            u.user->operand(u.operandIndex) != r)
          err("[V3]") << "result " << i << " has a stale use";
      checkName(r, n->loc());
      defined.insert(r);
    }
  }
  if (g.outputs().empty()) {
    diag.emitError(Location()) << "[V6] graph '@" << g.name() << "' has no outputs";
    ok = false;
  }
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    if (!g.outputs()[i] || !defined.count(g.outputs()[i])) {
      diag.emitError(Location()) << "[V6] output " << i << " of graph '@" << g.name()
                                 << "' is not a value of the graph";
      ok = false;
    }
  }
  return ok ? success() : failure();
}

LogicalResult verify(const Module &m, DiagnosticEngine &diag) {
  bool ok = true;
  for (const auto &g : m.graphs())
    ok &= succeeded(verify(*g, diag));
  return ok ? success() : failure();
}

} // namespace kiln
