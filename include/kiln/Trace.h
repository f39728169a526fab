//===- Trace.h - Capturing an eager execution as a graph --------*- C++ -*-===//
//
// kiln::trace runs a function written against the eager API once, on
// example inputs, and returns the graph of the ops it executed (Kiln's
// torch.jit.trace):
//
//   kiln::nn::Linear fc(4, 2);
//   auto graph = kiln::trace([&](const kiln::Tensor &x) { return kiln::relu(fc(x)); },
//                            {kiln::randn({8, 4}, 1)},
//                            {.inputNames = {"x"}, .checkInputs = {{kiln::randn({8, 4}, 2)}}});
//
// In the graph:
//  - every op executed is one node, in execution order (SSA), located at
//    the C++ call site that ran it (Location::fileLineCol of the
//    std::source_location of the eager call);
//  - the example inputs are the graph inputs, named by `inputNames` or
//    input0, input1, ...; the shapes are the example's (static);
//  - a tensor the function used but did not compute from the inputs (a
//    parameter, a tensor it created) is a constant node; a parameter of a
//    kiln::nn::Module is a named constant (the `name` attribute and the value
//    name are the parameter's name, e.g. fc1.weight), or a graph input of
//    that name with `parametersAsInputs`;
//  - the outputs are what the function returned.
//
// A trace records one path through the program. Decisions taken on values
// (`if (kiln::item(x) > 0)`), sizes computed from values and loops over
// them are frozen. trace() warns when the program read a value that depends
// on the inputs back to the host (kiln::item, kiln::toVector, ...), and
// `checkInputs` re-runs the function eagerly on other inputs and compares
// with the traced graph run on the reference interpreter; a mismatch throws
// kiln::Error naming the output, the first differing element and the host
// reads that explain it.
//
// Tracing state is per thread: other threads run eagerly meanwhile. Errors
// (an op failing inside the function, bad options, a failed check) throw
// kiln::Error; the thread's tracing state is restored first.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Graph.h"
#include "kiln/Eager.h"

#include <concepts>
#include <functional>
#include <memory>
#include <source_location>
#include <string>
#include <type_traits>
#include <vector>

namespace kiln {

namespace nn {
class Module;
}

/// Members have default initializers, so designated initializers may name
/// any subset (in declaration order).
struct TraceOptions {
  /// Names of the graph inputs, one per example input; empty gives input0,
  /// input1, ... Names must be distinct.
  std::vector<std::string> inputNames{};
  /// Names given to the graph outputs' values where they have none yet.
  std::vector<std::string> outputNames{};
  /// The graph's name.
  std::string graphName = "forward";
  /// Parameters become graph inputs (after the example inputs, in order of
  /// first use, named by parameter) instead of named constants. Run such a
  /// graph with kiln::withParameters.
  bool parametersAsInputs = false;
  /// Other input sets: each is run eagerly and through the traced graph on
  /// the reference interpreter; the outputs must agree within rtol/atol.
  std::vector<std::vector<Tensor>> checkInputs{};
  double rtol = 1e-5;
  double atol = 1e-6;
  /// Where warnings go (host reads of traced values); nullptr prints them to
  /// stderr.
  DiagnosticEngine *diag = nullptr;
  /// Throw kiln::Error instead of warning.
  bool warningsAsErrors = false;
};

namespace detail {
using TracedFunction = std::function<std::vector<Tensor>(const std::vector<Tensor> &)>;
std::unique_ptr<Graph> traceImpl(const TracedFunction &fn, std::vector<Tensor> inputs,
                                 const TraceOptions &options);

template <typename R> std::vector<Tensor> asOutputs(R &&r) {
  if constexpr (std::is_convertible_v<R, Tensor>)
    return {Tensor(std::forward<R>(r))};
  else
    return std::vector<Tensor>(std::forward<R>(r));
}
} // namespace detail

/// Traces `fn` on `inputs`. `fn` takes `const std::vector<Tensor> &` (all
/// inputs) or `const Tensor &` (exactly one input) and returns a Tensor or a
/// std::vector<Tensor>. Throws kiln::Error on failure (see above).
template <typename Fn>
requires std::invocable < Fn &, const std::vector<Tensor>
& > || std::invocable<Fn &, const Tensor &> std::unique_ptr<Graph>
       trace(Fn &&fn, std::vector<Tensor> inputs, TraceOptions options = {}) {
  detail::TracedFunction wrapped = [&fn](const std::vector<Tensor> &in) -> std::vector<Tensor> {
    if constexpr (std::invocable<Fn &, const std::vector<Tensor> &>) {
      return detail::asOutputs(fn(in));
    } else {
      if (in.size() != 1)
        throw Error("trace: the traced function takes one tensor but " + std::to_string(in.size()) +
                    " inputs were given");
      return detail::asOutputs(fn(in[0]));
    }
  };
  return detail::traceImpl(wrapped, std::move(inputs), options);
}

/// True while a trace records on this thread.
bool isTracing();

//===----------------------------------------------------------------------===//
// Control flow that a trace keeps
//===----------------------------------------------------------------------===//
//
// A C++ `if` or loop on a traced value is frozen by the trace (it warns at
// the host read). These combinators run eagerly when nothing traces, and
// under a trace record an `if` or `loop` node whose regions are the
// functions traced on their arguments (jax.lax.cond / while_loop style):
//
//   auto y = kiln::cond(kiln::greater(kiln::reduce_sum(x), zero),
//                       [](const auto &a) { return std::vector{kiln::relu(a[0])}; },
//                       [](const auto &a) { return std::vector{kiln::neg(a[0])}; }, {x});
//
// A function may read tensors other than its arguments (a parameter, a
// value computed before): the region captures them. Branches must agree on
// each result's dtype and rank; a loop body must keep each carried value's
// dtype and shape. A mistake throws kiln::Error located at the call.

using BranchFn = std::function<std::vector<Tensor>(const std::vector<Tensor> &)>;
using LoopCondFn = std::function<Tensor(const std::vector<Tensor> &)>;
using ForBodyFn =
    std::function<std::vector<Tensor>(const Tensor &iteration, const std::vector<Tensor> &)>;

/// thenFn(operands) when `pred` (one bool) is true, else elseFn(operands).
std::vector<Tensor> cond(const Tensor &pred, const BranchFn &thenFn, const BranchFn &elseFn,
                         std::vector<Tensor> operands,
                         std::source_location loc = std::source_location::current());
/// x = init; while (condFn(x)) x = bodyFn(x); returns x.
std::vector<Tensor> whileLoop(const LoopCondFn &condFn, const BranchFn &bodyFn,
                              std::vector<Tensor> init,
                              std::source_location loc = std::source_location::current());
/// x = init; for i in [0, n): x = bodyFn(i, x) (i a 0-d i64 tensor); returns
/// x. A compile unrolls small trip counts (inline-regions).
std::vector<Tensor> forLoop(int64_t n, const ForBodyFn &bodyFn, std::vector<Tensor> init,
                            std::source_location loc = std::source_location::current());

/// The inputs for running a graph traced with `parametersAsInputs`:
/// `inputs`, then for each further graph input the parameter of `module`
/// of that name. Throws kiln::Error for a name `module` does not have.
std::vector<Tensor> withParameters(const Graph &graph, std::vector<Tensor> inputs,
                                   const nn::Module &module);

//===----------------------------------------------------------------------===//
// Parameter names
//===----------------------------------------------------------------------===//

/// Names `t` as a parameter: a trace turns it into a constant with that
/// name (or an input, see parametersAsInputs). kiln::Module calls this for
/// its parameters; call it for tensors of your own. A later call renames.
/// The registry holds a reference to the tensor's bytes until forgotten.
void nameParameter(const Tensor &t, std::string name);
/// Removes `t` from the parameter names (no-op when absent).
void forgetParameter(const Tensor &t);
/// The parameter name of `t`, or "" when it has none.
std::string parameterName(const Tensor &t);

} // namespace kiln
