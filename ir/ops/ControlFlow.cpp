//===- ControlFlow.cpp - if and loop ----------------------------*- C++ -*-===//
//
// Type inference and reference kernels of the two ops with regions (Note
// [Regions] in docs/IR.md). A region is a graph attribute that sees only
// its own inputs, so everything it reads from outside comes in as an
// operand (a capture) and everything it gives back goes out as a result:
//
//   if(cond, captures...) {then_branch, else_branch} -> results
//     cond      bool, one element
//     branches  graph(captures...) -> (results...), both the same count;
//               a result's dims are the branches' dims where they agree,
//               else `?` (the branch taken decides at run time)
//
//   loop(trip, cond, carried..., captures...) {body, num_carried} -> carried..., scans...
//     trip      i64, one element: the most iterations (ONNX Loop's M; the
//               importer gives INT64_MAX when the model has none)
//     cond      bool, one element: run while true (checked before each
//               iteration, then taken from the body)
//     body      graph(iter: i64, cond: bool, carried..., captures...)
//                 -> (cond: bool, carried..., scans...)
//     results   the carried values after the last iteration, then each
//               scan output of every iteration stacked on a new axis 0
//
// A carried value may change shape from one iteration to the next: the
// body's input type says what it may be (a `?` dim for one that changes),
// and the initial value and the body's output must fit it. A scan result's
// first dim is `?`: the trip count is known only when the loop runs.
// Both ops have the ValueDependentShape trait: on concrete operands the
// reference kernel's results decide the dims inference leaves `?`.
//
//===----------------------------------------------------------------------===//
#include "ir/Builder.h"
#include "ir/Graph.h"
#include "ir/Interpreter.h"
#include "ir/ops/Internal.h"

#include <algorithm>
#include <cstring>
#include <set>

namespace kiln {
namespace {

using Types = std::vector<TensorType>;

/// Reports unless operand `i` is a one-element tensor of `dtype`.
LogicalResult requireScalar(const OpContext &ctx, unsigned i, DType dtype, const char *what) {
  const TensorType &t = ctx.operandType(i);
  bool one = true;
  for (const Dim &d : t.shape)
    one &= !d.isStatic() || d.size() == 1;
  if (t.dtype != dtype || !one)
    return ctx.emitError() << what << " (operand " << i << ") must be one " << dtypeName(dtype)
                           << " element, got " << t.str();
  return success();
}

/// True when a value of type `actual` may be passed to a region input of
/// type `declared`. The two live in different scopes, so a symbolic or
/// `?` declared dim takes any size (the region binds it when it runs, and
/// its interpreter checks that the bindings agree); a static one must
/// match unless the actual dim is unknown until then.
bool fitsAcrossScopes(const TensorType &actual, const TensorType &declared) {
  if (actual.dtype != declared.dtype || actual.rank() != declared.rank())
    return false;
  for (size_t d = 0; d < actual.shape.size(); ++d) {
    const Dim &a = actual.shape[d], &w = declared.shape[d];
    if (w.isStatic() && a.isStatic() && a.size() != w.size())
      return false;
  }
  return true;
}

/// True when a body output of type `actual` may be carried into the body
/// input `declared` of the next iteration: one scope, so each dim must be
/// the same unless the input's is `?` (the carried value changes shape)
/// or the output's is (checked when the next iteration binds its inputs).
bool fitsSameScope(const TensorType &actual, const TensorType &declared) {
  if (actual.dtype != declared.dtype || actual.rank() != declared.rank())
    return false;
  for (size_t d = 0; d < actual.shape.size(); ++d) {
    const Dim &a = actual.shape[d], &w = declared.shape[d];
    if (!w.isDynamic() && !a.isDynamic() && a != w)
      return false;
  }
  return true;
}

LogicalResult requireRegion(const OpContext &ctx, const GraphAttr &g, const char *name) {
  if (!g)
    return ctx.emitError() << "region '" << name << "' is missing";
  return success();
}

/// The one-element tensor's value as an integer (i64 or bool).
int64_t scalarValue(const Tensor &t) {
  if (t.dtype() == DType::Bool)
    return t.getDouble(0) != 0 ? 1 : 0;
  return t.data<int64_t>()[0];
}

/// Stacks equal-shaped tensors on a new axis 0.
Tensor stack(const std::vector<Tensor> &parts, DType dtype, const std::vector<int64_t> &shape) {
  std::vector<int64_t> sizes = shape;
  sizes.insert(sizes.begin(), static_cast<int64_t>(parts.size()));
  Tensor out = Tensor::zeros(dtype, sizes);
  char *dst = ops::bytesOf(out);
  for (const Tensor &p : parts) {
    std::memcpy(dst, p.rawData(), p.byteSize());
    dst += p.byteSize();
  }
  return out;
}

} // namespace

//===----------------------------------------------------------------------===//
// if
//===----------------------------------------------------------------------===//

FailureOr<Types> inferIf(const OpContext &ctx) {
  IfOp op(ctx);
  if (failed(requireScalar(ctx, 0, DType::Bool, "the condition")))
    return failure();
  std::span<const TensorType> captures = ctx.operandTypes.subspan(1);
  std::vector<Types> branchTypes;
  for (auto [g, name] :
       {std::pair(op.then_branch(), "then_branch"), std::pair(op.else_branch(), "else_branch")}) {
    if (failed(requireRegion(ctx, g, name)))
      return failure();
    if (g->numInputs() != captures.size())
      return ctx.emitError() << "region '" << name << "' takes " << g->numInputs()
                             << " input(s) but the op passes " << captures.size()
                             << " (its operands after the condition)";
    for (unsigned i = 0; i < captures.size(); ++i)
      if (!fitsAcrossScopes(captures[i], g->input(i)->type()))
        return ctx.emitError() << "operand " << i + 1 << " has type " << captures[i].str()
                               << " but region '" << name << "' takes "
                               << g->input(i)->type().str();
    if (g->outputs().size() != ctx.numResults)
      return ctx.emitError() << "region '" << name << "' returns " << g->outputs().size()
                             << " value(s) but the op has " << ctx.numResults << " result(s)";
    // A region's inputs are its operands minus the condition.
    auto binding = bindRegionSymbols(*g, captures);
    Types outs;
    for (const Value *v : g->outputs())
      outs.push_back(outsideType(v->type(), binding));
    branchTypes.push_back(std::move(outs));
  }
  Types results;
  for (unsigned i = 0; i < ctx.numResults; ++i) {
    const TensorType &t = branchTypes[0][i], &e = branchTypes[1][i];
    if (t.dtype != e.dtype || t.rank() != e.rank())
      return ctx.emitError() << "result " << i << " is " << t.str() << " in 'then_branch' but "
                             << e.str() << " in 'else_branch': the branches must agree on "
                             << "dtype and rank";
    TensorType r = t;
    for (size_t d = 0; d < r.shape.size(); ++d)
      if (t.shape[d] != e.shape[d])
        r.shape[d] = Dim::dynamic();
    results.push_back(std::move(r));
  }
  return results;
}

FailureOr<std::vector<Tensor>> referenceIf(const OpContext &ctx, std::span<const Tensor> inputs,
                                           std::span<const TensorType>) {
  IfOp op(ctx);
  const GraphAttr &branch = scalarValue(inputs[0]) ? op.then_branch() : op.else_branch();
  return interpret(*branch, inputs.subspan(1), ctx.diag);
}

//===----------------------------------------------------------------------===//
// loop
//===----------------------------------------------------------------------===//

FailureOr<Types> inferLoop(const OpContext &ctx) {
  LoopOp op(ctx);
  if (failed(requireScalar(ctx, 0, DType::I64, "the trip count")) ||
      failed(requireScalar(ctx, 1, DType::Bool, "the condition")) ||
      failed(requireRegion(ctx, op.body(), "body")))
    return failure();
  const Graph &body = *op.body();
  int64_t numCarried = op.num_carried();
  if (numCarried < 0 || numCarried > int64_t(ctx.numOperands()) - 2)
    return ctx.emitError() << "num_carried " << numCarried << " is not in [0, "
                           << ctx.numOperands() - 2 << "]";
  unsigned n = static_cast<unsigned>(numCarried);
  if (body.numInputs() != ctx.numOperands())
    return ctx.emitError() << "region 'body' takes " << body.numInputs()
                           << " input(s) but the op passes " << ctx.numOperands()
                           << " (iteration, condition, " << n << " carried, "
                           << ctx.numOperands() - 2 - n << " captured)";
  if (body.outputs().size() < 1 + n)
    return ctx.emitError() << "region 'body' returns " << body.outputs().size()
                           << " value(s), fewer than the condition and " << n << " carried";
  unsigned numScans = static_cast<unsigned>(body.outputs().size()) - 1 - n;
  if (ctx.numResults != n + numScans)
    return ctx.emitError() << "has " << ctx.numResults << " result(s) but the body gives " << n
                           << " carried and " << numScans << " scanned";
  auto isScalar = [](const TensorType &t, DType dt) {
    return t.dtype == dt && t.isStatic() && numElements(staticSizes(t.shape)) == 1;
  };
  if (!isScalar(body.input(0)->type(), DType::I64) || !isScalar(body.input(1)->type(), DType::Bool))
    return ctx.emitError() << "region 'body' must take the iteration (one i64) and the condition "
                           << "(one bool) first, got " << body.input(0)->type().str() << " and "
                           << body.input(1)->type().str();
  const TensorType &bodyCond = body.outputs()[0]->type();
  bool oneElement = std::all_of(bodyCond.shape.begin(), bodyCond.shape.end(),
                                [](const Dim &d) { return !d.isStatic() || d.size() == 1; });
  if (bodyCond.dtype != DType::Bool || !oneElement)
    return ctx.emitError() << "region 'body' must return the condition (one bool) first, got "
                           << body.outputs()[0]->type().str();
  for (unsigned i = 2; i < ctx.numOperands(); ++i)
    if (!fitsAcrossScopes(ctx.operandType(i), body.input(i)->type()))
      return ctx.emitError() << "operand " << i << " (" << (i < 2 + n ? "carried" : "captured")
                             << ") has type " << ctx.operandType(i).str()
                             << " but region 'body' takes " << body.input(i)->type().str();
  for (unsigned i = 0; i < n; ++i) {
    const TensorType &out = body.outputs()[1 + i]->type(), &in = body.input(2 + i)->type();
    if (!fitsSameScope(out, in))
      return ctx.emitError() << "carried value " << i << " enters the body as " << in.str()
                             << " but leaves it as " << out.str()
                             << (out.dtype != in.dtype || out.rank() != in.rank()
                                     ? " (its dtype and rank stay the same in every iteration)"
                                     : " (a dim that changes between iterations must be '?' in "
                                       "the body's input)");
  }
  auto binding = bindRegionSymbols(body, ctx.operandTypes);
  Types results;
  for (unsigned i = 0; i < n; ++i)
    results.push_back(outsideType(body.input(2 + i)->type(), binding));
  for (unsigned s = 0; s < numScans; ++s) {
    TensorType t = outsideType(body.outputs()[1 + n + s]->type(), binding);
    t.shape.insert(t.shape.begin(), Dim::dynamic());
    results.push_back(std::move(t));
  }
  return results;
}

FailureOr<std::vector<Tensor>> referenceLoop(const OpContext &ctx, std::span<const Tensor> inputs,
                                             std::span<const TensorType> resultTypes) {
  LoopOp op(ctx);
  const Graph &body = *op.body();
  unsigned n = static_cast<unsigned>(op.num_carried());
  unsigned numScans = static_cast<unsigned>(body.outputs().size()) - 1 - n;
  int64_t trip = scalarValue(inputs[0]);
  bool cond = scalarValue(inputs[1]) != 0;
  std::vector<Tensor> args(inputs.begin(), inputs.end());
  std::vector<std::vector<Tensor>> scans(numScans);
  const std::vector<int64_t> iterShape = staticSizes(body.input(0)->type().shape);
  const std::vector<int64_t> condShape = staticSizes(body.input(1)->type().shape);
  for (int64_t i = 0; i < trip && cond; ++i) {
    args[0] = Tensor::fromInts(DType::I64, iterShape, {i});
    args[1] = Tensor::fromInts(DType::Bool, condShape, {1});
    auto outs = interpret(body, args, ctx.diag);
    if (failed(outs))
      return ctx.emitError() << "failed in iteration " << i;
    if ((*outs)[0].numel() != 1)
      return ctx.emitError() << "the body's condition in iteration " << i << " is "
                             << (*outs)[0].type().str() << ", not one element";
    cond = scalarValue((*outs)[0]) != 0;
    for (unsigned c = 0; c < n; ++c)
      args[2 + c] = std::move((*outs)[1 + c]);
    for (unsigned s = 0; s < numScans; ++s) {
      Tensor &t = (*outs)[1 + n + s];
      if (!scans[s].empty() && t.shape() != scans[s].front().shape())
        return ctx.emitError() << "scan output " << s << " is " << t.type().str()
                               << " in iteration " << i << " but " << scans[s].front().type().str()
                               << " in iteration 0; the stacked result needs one shape";
      scans[s].push_back(std::move(t));
    }
  }
  std::vector<Tensor> results(args.begin() + 2, args.begin() + 2 + n);
  for (unsigned s = 0; s < numScans; ++s) {
    const TensorType &want = resultTypes[n + s];
    std::vector<int64_t> elem;
    if (!scans[s].empty()) {
      elem = scans[s].front().shape();
    } else {
      Shape rest(want.shape.begin() + 1, want.shape.end());
      if (!isStatic(rest))
        return ctx.emitError() << "ran no iteration, and scan output " << s << "'s type "
                               << want.str() << " does not say the shape of its empty result";
      elem = staticSizes(rest);
    }
    results.push_back(stack(scans[s], want.dtype, elem));
  }
  return results;
}

} // namespace kiln
