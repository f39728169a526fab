//===- InlineRegions.cpp - Regions whose control is known -------*- C++ -*-===//
//
// Replaces a region op by its body where the control is known once the
// graph's sizes are (after constant-fold has folded the shape computations
// a compile with bound dims leaves):
//   1. an `if` whose condition is a constant: the taken branch is inlined
//      on the captures (inlineRegion, ir/Builder.h) and the op goes;
//   2. a `loop` whose trip count and initial condition are constants and
//      whose body passes its condition through unchanged (or returns a
//      constant true), so that it runs exactly N = max(trip, 0) times
//      (0 when the initial condition is false), is unrolled when
//      N <= kMaxTrips and N x (body nodes) <= kMaxNodes (and at most
//      kMaxNodesPerRun nodes added by all the loops of one run): the body inlined
//      N times with its iteration number a constant, each carried value
//      feeding the next copy, each scan the concat of its N values on a new
//      axis 0. Unrolled, nothing separates the copies: fusion and the
//      memory plan see one straight graph, and every `?` the loop's results
//      had (a growing value, a scan's length) is a size again.
// A loop with more iterations, or a data-dependent exit, stays a region op.
// Where such a loop runs a known number of times N (at most kMaxTypeTrips)
// and a result of it is not static (a value it grows, a scan), the body's
// type inference runs N times on types alone, each carried type feeding
// the next, and the results take the static types found: the loop runs
// interpreted (its body's input changes shape) but what follows compiles.
// The inlined nodes keep their body's locations.
//
// Requires: a verified graph. Establishes: no `if` with a constant
// condition; no loop of a known, small trip count; static results for a
// loop of a known trip count whose body's types reach static ones.
//
//   %c = constant dense<true> : bool[]            // before
//   %y = if(%c, %x) {then_branch = graph @t(%a: f32[4]) -> (f32[4]) {
//       %b = neg(%a) : f32[4]
//       return %b
//     }, else_branch = ...} : f32[4]
//
//   %y = neg(%x) : f32[4]                         // after
//
//===----------------------------------------------------------------------===//
#define DEBUG_TYPE "inline-regions"

#include "ir/Builder.h"
#include "passes/Internal.h"
#include "passes/PassManager.h"
#include "passes/Passes.h"

#include <unordered_set>

namespace kiln {
namespace {

/// The most iterations a loop is unrolled for, and the most body nodes all
/// its copies may add; and the most nodes one run of the pass may add in
/// all (a loop inside an unrolled loop unrolls once per copy).
constexpr int64_t kMaxTrips = 64;
constexpr int64_t kMaxNodes = 4096;
constexpr int64_t kMaxNodesPerRun = 4 * kMaxNodes;
/// The most iterations, and body nodes in all, whose types are followed to
/// size a loop's results.
constexpr int64_t kMaxTypeTrips = int64_t(1) << 16;
constexpr int64_t kMaxTypeNodes = int64_t(1) << 20;

/// The one element of a constant bool or integer value, else nullopt.
std::optional<int64_t> constantScalar(const Value *v) {
  const Tensor *t = passes::constantValue(v);
  if (!t || t->numel() != 1)
    return std::nullopt;
  return t->dtype() == DType::Bool ? int64_t(t->getDouble(0) != 0) : t->getInt(0);
}

class InlineRegionsPass : public Pass {
public:
  InlineRegionsPass() : Pass(kInlineRegionsSpec.name, kInlineRegionsSpec.description) {}

  PassResult run(Graph &g, PassContext &ctx) override {
    bool changed = false;
    added_ = 0;
    sized_.clear();
    // An inlined body may hold region ops of its own: sweep until none
    // changes (each sweep removes at least one region op).
    for (bool again = true; again;) {
      again = false;
      for (Node *n : g.nodeList()) {
        FailureOr<bool> done = n->kind() == OpKind::If     ? inlineIf(g, n, ctx.diag())
                               : n->kind() == OpKind::Loop ? unrollLoop(g, n, ctx.diag())
                                                           : FailureOr<bool>(false);
        if (failed(done))
          return PassResult::failure();
        again |= *done;
      }
      changed |= again;
    }
    // A result that was `?` may be a size now: the nodes after it learn it.
    if (changed && failed(passes::reinferTypes(g, ctx.diag())))
      return PassResult::failure();
    return PassResult::success(changed);
  }

private:
  /// Replaces `n`'s results by `values` and erases it.
  void replace(Graph &g, Node *n, const std::vector<Value *> &values) {
    for (unsigned r = 0; r < n->numResults(); ++r) {
      passes::transferName(n->result(r), values[r]);
      n->result(r)->replaceAllUsesWith(values[r]);
    }
    g.erase(n);
  }

  FailureOr<bool> inlineIf(Graph &g, Node *n, DiagnosticEngine &diag) {
    std::optional<int64_t> cond = constantScalar(n->operand(0));
    if (!cond)
      return false;
    IfOp op(*n);
    const Graph &branch = *cond ? *op.then_branch() : *op.else_branch();
    Builder b(g, diag);
    b.setInsertionPoint(n);
    std::vector<Value *> args(n->operands().begin() + 1, n->operands().end());
    auto outs = inlineRegion(b, branch, args);
    if (failed(outs))
      return failure();
    replace(g, n, *outs);
    ++numIfs;
    return true;
  }

  FailureOr<bool> unrollLoop(Graph &g, Node *n, DiagnosticEngine &diag) {
    LoopOp op(*n);
    const Graph &body = *op.body();
    std::optional<int64_t> trip = constantScalar(n->operand(0));
    std::optional<int64_t> cond = constantScalar(n->operand(1));
    const Value *bodyCond = body.outputs()[0];
    bool passesCondition = bodyCond == body.input(1) || constantScalar(bodyCond) == int64_t(1);
    if (!trip || !cond || !passesCondition)
      return false;
    int64_t trips = *cond ? std::max<int64_t>(*trip, 0) : 0;
    if (trips > kMaxTrips)
      return sizeResults(n, trips);
    const int64_t adds = trips * static_cast<int64_t>(body.numNodes());
    if (adds > kMaxNodes || added_ + adds > kMaxNodesPerRun)
      return sizeResults(n, trips);
    added_ += adds;
    const unsigned numCarried = static_cast<unsigned>(op.num_carried());
    const unsigned numScans = n->numResults() - numCarried;
    // With no iteration a scan is empty: its element type must be known.
    if (trips == 0)
      for (unsigned s = 0; s < numScans; ++s)
        if (!isStatic(body.outputs()[1 + numCarried + s]->type().shape))
          return false;
    Builder b(g, diag);
    b.setInsertionPoint(n);
    b.setLoc(n->loc());
    std::vector<Value *> args(n->operands().begin(), n->operands().end());
    args[1] =
        b.constant(Tensor::fromInts(DType::Bool, staticSizes(body.input(1)->type().shape), {1}));
    std::vector<std::vector<Value *>> scans(numScans);
    for (int64_t i = 0; i < trips; ++i) {
      args[0] =
          b.constant(Tensor::fromInts(DType::I64, staticSizes(body.input(0)->type().shape), {i}));
      auto outs = inlineRegion(b, body, args);
      if (failed(outs))
        return failure();
      for (unsigned c = 0; c < numCarried; ++c)
        args[2 + c] = (*outs)[1 + c];
      for (unsigned s = 0; s < numScans; ++s)
        scans[s].push_back(
            b.createValue(OpKind::Unsqueeze, {(*outs)[1 + numCarried + s]}, {{"axes", Ints{0}}}));
    }
    std::vector<Value *> results(args.begin() + 2, args.begin() + 2 + numCarried);
    for (unsigned s = 0; s < numScans; ++s) {
      Value *stacked = nullptr;
      if (trips == 0) {
        TensorType t = body.outputs()[1 + numCarried + s]->type();
        std::vector<int64_t> sizes = staticSizes(t.shape);
        sizes.insert(sizes.begin(), 0);
        stacked = b.constant(Tensor::zeros(t.dtype, sizes));
      } else {
        stacked = scans[s].size() == 1
                      ? scans[s][0]
                      : b.createValue(OpKind::Concat, scans[s], {{"axis", int64_t(0)}});
      }
      if (!stacked)
        return failure();
      results.push_back(stacked);
    }
    replace(g, n, results);
    ++numLoops;
    return true;
  }

  /// Gives a loop that runs `trips` times the static result types its
  /// body's type inference reaches after that many iterations, when some
  /// result is not static. True when it changed a type.
  bool sizeResults(Node *n, int64_t trips) {
    bool allStatic = true;
    for (unsigned r = 0; r < n->numResults(); ++r)
      allStatic &= n->result(r)->type().isStatic();
    const Graph &body = *LoopOp(*n).body();
    // Each loop is followed once per run (a sweep revisits the ones left).
    if (allStatic || trips > kMaxTypeTrips ||
        trips * static_cast<int64_t>(body.numNodes()) > kMaxTypeNodes || !sized_.insert(n).second)
      return false;
    const unsigned numCarried = static_cast<unsigned>(LoopOp(*n).num_carried());
    std::vector<TensorType> types;
    for (unsigned i = 0; i < n->numOperands(); ++i)
      types.push_back(i < 2 ? body.input(i)->type() : n->operand(i)->type());
    std::vector<TensorType> scans(n->numResults() - numCarried);
    for (int64_t i = 0; i < trips; ++i) {
      // Types alone: the body inlined into a scratch graph over inputs of
      // the current types (its nodes' inference, its symbols rewritten).
      Graph scratch("types");
      passes::QuietDiagnostics quiet;
      Builder b(scratch, quiet);
      std::vector<Value *> args;
      for (const TensorType &t : types)
        args.push_back(scratch.addInput(t));
      auto outs = inlineRegion(b, body, args);
      if (failed(outs))
        return false;
      for (unsigned c = 0; c < numCarried; ++c)
        types[2 + c] = (*outs)[1 + c]->type();
      for (size_t s = 0; s < scans.size(); ++s) {
        const TensorType &t = (*outs)[1 + numCarried + s]->type();
        if (i > 0 && t != scans[s])
          return false; // the run reports a scan that changes shape
        scans[s] = t;
      }
    }
    std::vector<TensorType> results(types.begin() + 2, types.begin() + 2 + numCarried);
    for (TensorType &t : scans) {
      if (trips == 0)
        return false; // an empty scan's element type is the body's
      t.shape.insert(t.shape.begin(), Dim(trips));
      results.push_back(std::move(t));
    }
    bool changed = false;
    for (unsigned r = 0; r < n->numResults(); ++r)
      if (results[r].isStatic() && results[r] != n->result(r)->type() &&
          refines(results[r], n->result(r)->type())) {
        n->result(r)->setType(results[r]);
        changed = true;
      }
    numSized += changed;
    return changed;
  }

  /// The loops sizeResults followed in this run.
  std::unordered_set<const Node *> sized_;
  /// Nodes unrolling added in this run (see kMaxNodesPerRun).
  int64_t added_ = 0;
  Statistic numIfs{this, "num-ifs", "Ifs replaced by their taken branch"};
  Statistic numLoops{this, "num-loops", "Loops unrolled"};
  Statistic numSized{this, "num-sized", "Loops not unrolled whose results were sized"};
};

} // namespace

std::unique_ptr<Pass> createInlineRegionsPass() {
  return std::make_unique<InlineRegionsPass>();
}

} // namespace kiln
