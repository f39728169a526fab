//===- Internal.h - Helpers shared by the passes ----------------*- C++ -*-===//
//
// Private to passes/: small queries and mutations that several passes use
// (constant operands, cleanup of nodes a rewrite made dead, name transfer).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Graph.h"

#include <functional>
#include <string>
#include <vector>

namespace kiln::passes {

/// A DiagnosticEngine that drops everything: for trying an inference or a
/// kernel whose failure only means "do not rewrite".
class QuietDiagnostics : public DiagnosticEngine {
public:
  QuietDiagnostics() {
    pushHandler([](const Diagnostic &) { return true; });
  }
};

/// The tensor of `v` when a constant node defines it, else nullptr.
const Tensor *constantValue(const Value *v);
/// True when `v` is a constant with at least one element, all equal to `x`.
bool isSplatConstant(const Value *v, double x);

/// Erases the defining nodes of `values` that have no uses left (and are not
/// graph outputs), then their producers in turn. Returns how many nodes it
/// erased. `onErase` (optional) sees each node just before it goes. Only nodes that a rewrite just
/// made dead should be passed: dead code the input already had is dce's job.
unsigned eraseDeadProducers(const std::vector<Value *> &values,
                            const std::function<void(Node *)> &onErase = nullptr);

/// Re-runs type inference over the nodes in order and records the
/// inferred result types; a value-dependent result keeps a recorded type
/// that refines the inferred one (Note [Value-dependent shapes] in
/// docs/IR.md). Returns how many result types changed; failure when a
/// node no longer infers (its diagnostic is in `diag`).
FailureOr<unsigned> reinferTypes(Graph &g, DiagnosticEngine &diag);

/// Moves `from`'s name hint to `to` when `to` has none, so that a value
/// replaced by a new node keeps printing under its old name.
void transferName(Value *from, Value *to);

/// A rewrite's last step: `to` takes `from`'s name and uses, and the
/// producers of `from` left dead are erased (eraseDeadProducers).
void replaceValue(Value *from, Value *to);

/// An inference batch_norm's per-channel multiplier scale[c] / sqrt(var[c]
/// + epsilon), in double, for a batch_norm whose scale and var are
/// constants (fold-batch-norm and lower-batch-norm).
double batchNormMultiplier(const Node &bn, int64_t c);

/// A name for a constant derived from the constant `v` (a folded weight):
/// v's parameter name (its constant `name`) with "." and `suffix`, so
/// dumps still say where it came from; an unnamed constant gives an empty
/// name (printed inline when small).
std::string derivedConstantName(const Value *v, const char *suffix);

} // namespace kiln::passes
