//===- Trace.cpp - Capturing an eager execution as a graph ------*- C++ -*-===//
//
// While trace() runs the user's function, a thread-local TraceState maps
// every tensor the function touched to the graph Value that stands for it;
// each eager op (Eager.cpp runOp) reports itself through recordOp after its
// kernel ran, and becomes one node.
//
// Note [Tensor identity]: a Tensor is a value with shared bytes, so the
// tracer identifies one by (data pointer, dtype, shape). Two rules keep that
// sound: (1) the state holds a reference to every tensor it mapped, so no
// mapped address is freed and reused by another tensor during the trace;
// (2) a kernel result whose key is already mapped (a kernel may return its
// input unchanged, e.g. reshape to the same shape) is replaced by a copy
// before the caller sees it, so it gets its own key.
//
// Parameters are named in a process-wide registry (nameParameter), keyed
// the same way and holding a reference to the bytes for the same reason.
//
//===----------------------------------------------------------------------===//
#include "kiln/Trace.h"

#include "frontend/trace/Internal.h"
#include "ir/Interpreter.h"
#include "ir/Verifier.h"
#include "kiln/Modules.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <tuple>
#include <unordered_set>

namespace kiln {
namespace {

/// See Note [Tensor identity].
struct TensorKey {
  const void *data;
  DType dtype;
  std::vector<int64_t> shape;

  explicit TensorKey(const Tensor &t) : data(t.rawData()), dtype(t.dtype()), shape(t.shape()) {}
  bool operator<(const TensorKey &o) const {
    return std::tie(data, dtype, shape) < std::tie(o.data, o.dtype, o.shape);
  }
};

struct ParameterRegistry {
  std::mutex mutex;
  std::map<TensorKey, std::pair<Tensor, std::string>> names;
};

ParameterRegistry &registry() {
  static ParameterRegistry r;
  return r;
}

} // namespace

void nameParameter(const Tensor &t, std::string name) {
  if (t.isNull())
    return;
  ParameterRegistry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.names.insert_or_assign(TensorKey(t), std::make_pair(t, std::move(name)));
}

void forgetParameter(const Tensor &t) {
  if (t.isNull())
    return;
  ParameterRegistry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.names.erase(TensorKey(t));
}

std::string parameterName(const Tensor &t) {
  if (t.isNull())
    return "";
  ParameterRegistry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.names.find(TensorKey(t));
  return it == r.names.end() ? "" : it->second.second;
}

namespace detail {

namespace {
Diagnostic makeNote(Location loc, std::string message) {
  Diagnostic d;
  d.severity = Severity::Note;
  d.loc = std::move(loc);
  d.message = std::move(message);
  return d;
}
} // namespace

class TraceState {
public:
  TraceState(Graph &graph, const TraceOptions &options, TraceState *parent = nullptr)
      : graph_(graph), options_(options), parent_(parent) {}

  /// A value of an enclosing trace that a region read (Note [Traced
  /// regions]): `inner` is the region's input for `outer`.
  struct Capture {
    Tensor tensor;
    Value *outer;
    Value *inner;
  };
  const std::vector<Capture> &captures() const { return captures_; }

  /// A name based on `base` that no value of the graph has yet.
  std::string uniqueName(const std::string &base) {
    std::string name = base;
    for (int i = 1; !usedNames_.insert(name).second; ++i)
      name = base + "_" + std::to_string(i);
    return name;
  }

  bool isMapped(const Tensor &t) const { return values_.count(TensorKey(t)) != 0; }
  /// Mapped here or by an enclosing trace.
  bool mapsInScope(const Tensor &t) const {
    return isMapped(t) || (parent_ && parent_->mapsInScope(t));
  }
  void map(const Tensor &t, Value *v, bool dependsOnInputs) {
    values_[TensorKey(t)] = v;
    keepAlive_.push_back(t);
    if (dependsOnInputs) {
      dependent_.insert(v);
      const char *begin = static_cast<const char *>(t.rawData());
      dependentBytes_[begin] = {begin + t.byteSize(), v};
    }
  }
  bool dependsOnInputs(const Value *v) const { return dependent_.count(v) != 0; }

  /// The value of `t`; a tensor not seen yet becomes a constant (named when
  /// it is a parameter) or, with parametersAsInputs, a parameter input.
  Value *valueOf(const Tensor &t, const Location &loc) {
    auto it = values_.find(TensorKey(t));
    if (it != values_.end())
      return it->second;
    // A region reads a value an enclosing trace computed (or took as an
    // input): it becomes a region input, captured by the region op.
    // With parametersAsInputs a parameter is an input of the traced graph
    // wherever it is first read: the outermost trace makes it, the region
    // captures it.
    bool outerParameter = parent_ && options_.parametersAsInputs && !parameterName(t).empty();
    if (parent_ && (outerParameter || parent_->mapsInScope(t))) {
      Value *outer = parent_->valueOf(t, loc);
      Node *def = outer->definingNode();
      if (!def || def->kind() != OpKind::Constant) {
        Value *inner = graph_.addInput(
            t.type(), uniqueName(outer->name().empty() ? "capture" : outer->name()));
        captures_.push_back(Capture{t, outer, inner});
        map(t, inner, /*dependsOnInputs=*/true);
        return inner;
      }
    }
    std::string param = parameterName(t);
    Value *v;
    if (!param.empty() && options_.parametersAsInputs) {
      v = graph_.addInput(t.type(), uniqueName(param));
      parameterInputs_.push_back(t);
    } else {
      if (param.empty())
        warnIfAliasesTracedValue(t, loc);
      std::string name = param.empty() ? "" : uniqueName(param);
      DiagnosticEngine diag;
      ScopedDiagnosticCollector collected(diag);
      Builder b(graph_, diag);
      b.setLoc(loc);
      v = b.constant(t, name);
      if (!v)
        throwDiagnostics(collected.diagnostics(), loc, "cannot record a constant");
      v->setName(name);
    }
    map(t, v, /*dependsOnInputs=*/false);
    return v;
  }

  /// Value-name hint `name` for the op result `t` (see nameTracedValue).
  void nameResult(const Tensor &t, const std::string &name) {
    auto it = values_.find(TensorKey(t));
    if (it == values_.end())
      return;
    Value *v = it->second;
    Node *def = v->definingNode();
    if (def && def->kind() != OpKind::Constant && v->name() != name)
      v->setName(uniqueName(name));
  }

  /// A tensor the eager API did not make, over the bytes of a value computed
  /// from the inputs (Tensor::view, Tensor::borrow), would silently become a
  /// constant holding this run's values: warn.
  void warnIfAliasesTracedValue(const Tensor &t, const Location &loc) {
    const char *p = static_cast<const char *>(t.rawData());
    auto it = dependentBytes_.upper_bound(p);
    if (it == dependentBytes_.begin())
      return;
    --it;
    if (p >= it->second.first)
      return;
    Diagnostic d;
    d.severity = Severity::Warning;
    d.loc = loc;
    d.message = "a tensor sharing the bytes of a traced value, but not made by an eager op "
                "(Tensor::view or borrow?), is recorded as a constant holding this run's "
                "values; use the eager ops (kiln::reshape) so the trace follows the inputs";
    Diagnostic note;
    note.severity = Severity::Note;
    const Value *v = it->second.second;
    if (Node *def = v->definingNode()) {
      note.loc = def->loc();
      note.message = "the traced value was computed by this '" + std::string(def->mnemonic()) + "'";
    } else {
      note.message = "the traced value is graph input '%" + v->name() + "'";
    }
    d.notes.push_back(std::move(note));
    warn(std::move(d), "a view of a traced value was recorded as a constant here");
  }

  /// Reports warning `d`; `why` is the note a failed trace check shows at
  /// its location.
  void warn(Diagnostic d, std::string why) {
    warnings_.push_back(makeNote(d.loc, std::move(why)));
    if (options_.warningsAsErrors) {
      d.severity = Severity::Error;
      throw Error({d});
    }
    if (options_.diag)
      options_.diag->report(std::move(d));
    else
      std::fprintf(stderr, "%s\n", d.str().c_str());
  }

  Graph &graph() { return graph_; }
  const TraceOptions &options() const { return options_; }
  const std::vector<Tensor> &parameterInputs() const { return parameterInputs_; }
  /// One note per warning, for a failed trace check to explain itself.
  const std::vector<Diagnostic> &warnings() const { return warnings_; }

private:
  Graph &graph_;
  const TraceOptions &options_;
  TraceState *parent_;
  std::vector<Capture> captures_;
  std::map<TensorKey, Value *> values_;
  std::vector<Tensor> keepAlive_;
  std::unordered_set<const Value *> dependent_;
  /// Byte ranges [begin, end) of the tensors computed from the inputs.
  std::map<const char *, std::pair<const char *, const Value *>> dependentBytes_;
  std::set<std::string> usedNames_;
  std::vector<Tensor> parameterInputs_;
  std::vector<Diagnostic> warnings_;
};

namespace {
thread_local TraceState *tlsTrace = nullptr;

/// Makes `state` the thread's trace for its lifetime, also on exceptions.
class ActiveTraceScope {
public:
  explicit ActiveTraceScope(TraceState *state) : previous_(tlsTrace) { tlsTrace = state; }
  ~ActiveTraceScope() { tlsTrace = previous_; }
  ActiveTraceScope(const ActiveTraceScope &) = delete;
  ActiveTraceScope &operator=(const ActiveTraceScope &) = delete;

private:
  TraceState *previous_;
};
} // namespace

TraceState *activeTrace() {
  return tlsTrace;
}

void recordOp(TraceState &trace, const OpInfo &info, std::span<const Tensor> operands,
              std::vector<Attribute> attrs, std::vector<Tensor> &results, const Location &loc) {
  std::vector<Value *> values;
  bool dependent = false;
  for (const Tensor &t : operands) {
    Value *v = trace.valueOf(t, loc);
    dependent = dependent || trace.dependsOnInputs(v);
    values.push_back(v);
  }
  std::vector<TensorType> types;
  for (const Tensor &t : results)
    types.push_back(t.type());
  Node *n =
      trace.graph().createNode(info, std::move(values), std::move(types), std::move(attrs), loc);
  for (unsigned i = 0; i < results.size(); ++i) {
    if (trace.isMapped(results[i])) // See Note [Tensor identity], rule 2.
      results[i] = results[i].clone();
    trace.map(results[i], n->result(i), dependent);
  }
}

void nameTracedValue(TraceState &trace, const Tensor &t, const std::string &name) {
  trace.nameResult(t, name);
}

void recordHostRead(TraceState &trace, const Tensor &t, const Location &loc,
                    std::string_view what) {
  if (!trace.isMapped(t))
    return;
  Value *v = trace.valueOf(t, loc);
  if (!trace.dependsOnInputs(v))
    return;
  Diagnostic d;
  d.severity = Severity::Warning;
  d.loc = loc;
  d.message = "'" + std::string(what) +
              "' reads a traced value back to the host; the trace records only what the "
              "program did with the value it had for the example inputs (a branch, loop count "
              "or size decided by it is frozen in the graph; kiln::cond, kiln::whileLoop and "
              "kiln::forLoop keep such a decision in the graph)";
  Diagnostic note;
  note.severity = Severity::Note;
  if (Node *def = v->definingNode()) {
    note.loc = def->loc();
    note.message = "the value was computed by this '" + std::string(def->mnemonic()) + "'";
  } else {
    note.message = "the value is graph input '%" + v->name() + "'";
  }
  d.notes.push_back(std::move(note));
  trace.warn(std::move(d), "a traced value was read back to the host here ('" + std::string(what) +
                               "'); the trace cannot follow a decision taken on it");
}

namespace {

Diagnostic makeDiag(Severity s, Location loc, std::string message) {
  Diagnostic d;
  d.severity = s;
  d.loc = std::move(loc);
  d.message = std::move(message);
  return d;
}

std::string indexStr(const std::vector<int64_t> &shape, int64_t flat) {
  std::vector<int64_t> idx(shape.size());
  for (size_t i = shape.size(); i-- > 0;) {
    idx[i] = shape[i] ? flat % shape[i] : 0;
    flat = shape[i] ? flat / shape[i] : 0;
  }
  return sizesStr(idx);
}

/// Why `traced` differs from `eager`, or "" when they agree.
std::string difference(const Tensor &eager, const Tensor &traced, double rtol, double atol) {
  if (eager.type() != traced.type())
    return "has type " + eager.str() + " when run eagerly but " + traced.str() + " in the trace";
  int64_t first = -1;
  double worst = 0.0;
  for (int64_t i = 0; i < eager.numel(); ++i) {
    double e = eager.getDouble(i), t = traced.getDouble(i);
    bool same = (std::isnan(e) && std::isnan(t)) || e == t ||
                std::fabs(e - t) <= atol + rtol * std::fabs(e);
    if (same)
      continue;
    if (first < 0)
      first = i;
    worst = std::isnan(e - t) ? worst : std::max(worst, std::fabs(e - t));
  }
  if (first < 0)
    return "";
  return "differs at " + indexStr(eager.shape(), first) + ": eager " +
         formatDouble(eager.getDouble(first)) + ", traced " +
         formatDouble(traced.getDouble(first)) + " (max abs diff " + formatDouble(worst) + ")";
}

void checkTrace(const TracedFunction &fn, const Graph &graph, TraceState &state,
                const TraceOptions &options) {
  for (size_t k = 0; k < options.checkInputs.size(); ++k) {
    std::string which = "trace check failed on check input set " + std::to_string(k) + ": ";
    std::vector<Tensor> eager = fn(options.checkInputs[k]);
    std::vector<Tensor> graphInputs = options.checkInputs[k];
    for (const Tensor &p : state.parameterInputs())
      graphInputs.push_back(p);
    DiagnosticEngine diag;
    ScopedDiagnosticCollector collected(diag);
    auto traced = interpret(graph, graphInputs, diag);
    if (failed(traced)) {
      std::vector<Diagnostic> diags{
          makeDiag(Severity::Error, Location(),
                   which + "the traced graph does not accept these inputs (a trace has the static "
                           "shapes and dtypes of the example inputs; trace once per shape)")};
      for (const Diagnostic &d : collected.diagnostics())
        diags.push_back(d);
      throw Error(std::move(diags));
    }
    if (traced->size() != eager.size())
      throw Error({makeDiag(Severity::Error, Location(),
                            which + "the function returned " + std::to_string(eager.size()) +
                                " output(s) but the trace has " + std::to_string(traced->size()))});
    for (size_t j = 0; j < eager.size(); ++j) {
      std::string why = eager[j].isNull()
                            ? std::string("is a null tensor when run eagerly")
                            : difference(eager[j], (*traced)[j], options.rtol, options.atol);
      if (why.empty())
        continue;
      const Value *out = graph.outputs()[j];
      Location loc = out->definingNode() ? out->definingNode()->loc() : Location();
      Diagnostic d =
          makeDiag(Severity::Error, loc, which + "output " + std::to_string(j) + " " + why);
      for (const Diagnostic &note : state.warnings())
        d.notes.push_back(note);
      if (state.warnings().empty())
        d.notes.push_back(makeDiag(Severity::Note, Location(),
                                   "nothing suspicious was seen while tracing: the function may "
                                   "depend on state outside its inputs (globals, counters, "
                                   "randomness) or read values through Tensor's own accessors"));
      throw Error({d});
    }
  }
}

} // namespace

std::unique_ptr<Graph> traceImpl(const TracedFunction &fn, std::vector<Tensor> inputs,
                                 const TraceOptions &options) {
  if (activeTrace())
    throw Error("trace() cannot be nested: a trace is already recording on this thread");
  if (!options.inputNames.empty() && options.inputNames.size() != inputs.size())
    throw Error("trace: " + std::to_string(options.inputNames.size()) + " input name(s) for " +
                std::to_string(inputs.size()) + " example input(s)");
  auto graph = std::make_unique<Graph>(options.graphName);
  TraceState state(*graph, options);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].isNull())
      throw Error("trace: example input " + std::to_string(i) + " is a null tensor");
    std::string name =
        options.inputNames.empty() ? "input" + std::to_string(i) : options.inputNames[i];
    std::string unique = state.uniqueName(name);
    if (unique != name)
      throw Error("trace: input name '" + name + "' is given twice");
    if (state.isMapped(inputs[i])) // the same tensor passed twice
      inputs[i] = inputs[i].clone();
    state.map(inputs[i], graph->addInput(inputs[i].type(), name), /*dependsOnInputs=*/true);
  }

  std::vector<Tensor> outputs;
  {
    ActiveTraceScope scope(&state);
    outputs = fn(inputs);
  }
  if (outputs.empty())
    throw Error("trace: the traced function returned no tensors");
  std::vector<Value *> outs;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].isNull())
      throw Error("trace: output " + std::to_string(i) +
                  " of the traced function is a null tensor");
    outs.push_back(state.valueOf(outputs[i], Location()));
  }
  graph->setOutputs(outs);
  // Requested output names replace the names modules gave; graph inputs
  // and constants keep theirs.
  for (size_t i = 0; i < options.outputNames.size() && i < outs.size(); ++i) {
    Node *def = outs[i]->definingNode();
    if (def && def->kind() != OpKind::Constant)
      outs[i]->setName(state.uniqueName(options.outputNames[i]));
  }

  DiagnosticEngine diag;
  ScopedDiagnosticCollector collected(diag);
  if (failed(verify(*graph, diag)))
    throwDiagnostics(collected.diagnostics(), Location(), "the traced graph does not verify");
  checkTrace(fn, *graph, state, options);
  return graph;
}

} // namespace detail

// Note [Traced regions]
// cond, whileLoop and forLoop run eagerly when no trace records. Under a
// trace, each function is traced once more into a region: a TraceState of
// its own over a fresh graph whose inputs are the function's arguments,
// with the recording trace as its parent. A tensor the function reads that
// an enclosing trace computed (or took as an input) becomes a region input
// and an operand of the region op (a capture, Note [Regions] in
// docs/IR.md); a parameter or a tensor nobody traced becomes a constant
// inside. cond traces both branches, the else-branch taking the
// then-branch's captures first, and its results are what the taken branch
// gave while traced. A loop's results come from running it eagerly with the
// recording suspended (the eager ops of that run are not the graph's: the
// region op is). The recorded op is checked by its type
// inference, so branches that disagree, or a loop body that changes a
// carried dtype or shape, are one error located at the combinator's call.

namespace detail {
namespace {

/// kiln::Error with one error diagnostic at `loc`.
Error locatedError(const Location &loc, std::string message) {
  Diagnostic d;
  d.severity = Severity::Error;
  d.loc = loc;
  d.message = std::move(message);
  return Error({d});
}

/// A function traced into a region.
struct TracedRegion {
  std::unique_ptr<Graph> graph;
  std::vector<TraceState::Capture> captures;
  /// What the function returned on its arguments (eager values).
  std::vector<Tensor> outputs;
};

TracedRegion traceRegion(TraceState &parent, const TraceOptions &options, const std::string &name,
                         const TracedFunction &fn, std::vector<Tensor> args,
                         const std::vector<TraceState::Capture> &seed, const Location &loc) {
  TracedRegion r{std::make_unique<Graph>(name), {}, {}};
  TraceState state(*r.graph, options, &parent);
  // The arguments are copies: a function may also read the same tensor
  // from its closure (a loop's initial value, say), which is a capture of
  // the value outside, not the region input that changes per iteration.
  for (size_t i = 0; i < args.size(); ++i) {
    args[i] = args[i].clone();
    state.map(args[i],
              r.graph->addInput(args[i].type(), state.uniqueName("arg" + std::to_string(i))),
              /*dependsOnInputs=*/true);
  }
  for (const TraceState::Capture &c : seed)
    state.valueOf(c.tensor, loc);
  std::vector<Tensor> outs;
  {
    ActiveTraceScope scope(&state);
    outs = fn(args);
  }
  std::vector<Value *> values;
  for (const Tensor &t : outs) {
    if (t.isNull())
      throw locatedError(loc, name + " returned a null tensor");
    values.push_back(state.valueOf(t, loc));
  }
  r.graph->setOutputs(values);
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collected(diag);
  if (failed(verify(*r.graph, diag)))
    throwDiagnostics(collected.diagnostics(), loc, "the traced " + name + " does not verify");
  r.captures = state.captures();
  r.outputs = std::move(outs);
  return r;
}

/// Runs `fn` with the recording trace suspended.
std::vector<Tensor> runUntraced(const std::function<std::vector<Tensor>()> &fn) {
  ActiveTraceScope none(nullptr);
  return fn();
}

/// Records `kind` over `operands` (values of the trace) with `results` as
/// what it gave; the op's inference checks the regions against them.
std::vector<Tensor> recordRegionOp(TraceState &trace, OpKind kind, std::vector<Value *> operands,
                                   std::vector<NamedAttr> named, std::vector<Tensor> results,
                                   const Location &loc) {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collected(diag);
  const OpInfo &info = opInfo(kind);
  auto attrs = buildAttrs(info, std::move(named), loc, diag);
  std::vector<TensorType> operandTypes;
  for (Value *v : operands)
    operandTypes.push_back(v->type());
  FailureOr<std::vector<TensorType>> inferred = failure();
  if (!attrs.failed())
    inferred =
        inferTypes(info, operandTypes, *attrs, static_cast<unsigned>(results.size()), loc, diag);
  if (failed(inferred))
    throwDiagnostics(collected.diagnostics(), loc, "cannot record the region op");
  std::vector<TensorType> types;
  for (size_t r = 0; r < results.size(); ++r) {
    // A dim the graph cannot know (branches of two shapes) would freeze
    // this run's size in everything after it.
    if (!(*inferred)[r].isStatic())
      throw locatedError(loc, "'" + std::string(info.mnemonic) + "' result " + std::to_string(r) +
                                  " is " + (*inferred)[r].str() + ": a traced " +
                                  std::string(info.mnemonic) + " needs results of one shape");
    types.push_back(results[r].type());
  }
  Node *n =
      trace.graph().createNode(info, std::move(operands), std::move(types), attrs.take(), loc);
  for (unsigned i = 0; i < results.size(); ++i) {
    if (trace.isMapped(results[i]))
      results[i] = results[i].clone();
    trace.map(results[i], n->result(i), /*dependsOnInputs=*/true);
  }
  return results;
}

bool truth(const Tensor &t, const Location &loc, const char *what) {
  if (t.isNull() || t.dtype() != DType::Bool || t.numel() != 1)
    throw locatedError(loc, std::string(what) + " must be one bool element, got " +
                                (t.isNull() ? std::string("a null tensor") : t.str()));
  return t.getDouble(0) != 0;
}

} // namespace

} // namespace detail

std::vector<Tensor> cond(const Tensor &pred, const BranchFn &thenFn, const BranchFn &elseFn,
                         std::vector<Tensor> operands, std::source_location where) {
  using namespace detail;
  Location loc = toLocation(where);
  bool taken = truth(pred, loc, "cond: the predicate");
  TraceState *trace = activeTrace();
  if (!trace)
    return taken ? thenFn(operands) : elseFn(operands);
  const TraceOptions &options = trace->options();
  TracedRegion thenR = traceRegion(*trace, options, "then_branch", thenFn, operands, {}, loc);
  TracedRegion elseR =
      traceRegion(*trace, options, "else_branch", elseFn, operands, thenR.captures, loc);
  for (size_t k = thenR.captures.size(); k < elseR.captures.size(); ++k)
    thenR.graph->addInput(elseR.captures[k].outer->type(), "unused" + std::to_string(k));
  std::vector<Value *> values{trace->valueOf(pred, loc)};
  for (const Tensor &t : operands)
    values.push_back(trace->valueOf(t, loc));
  for (const TraceState::Capture &c : elseR.captures)
    values.push_back(c.outer);
  // The taken branch's trace ran it on these operands: its outputs are
  // the results (no third run).
  std::vector<Tensor> results = std::move(taken ? thenR.outputs : elseR.outputs);
  return recordRegionOp(*trace, OpKind::If, values,
                        {{"then_branch", GraphAttr(std::move(thenR.graph))},
                         {"else_branch", GraphAttr(std::move(elseR.graph))}},
                        std::move(results), loc);
}

namespace {

/// The loop op for a body region that takes (iteration, condition,
/// carried...) and returns (condition, carried...), started with `cond0`.
std::vector<Tensor> recordLoop(detail::TraceState &trace, const Tensor &trip, const Tensor &cond0,
                               const detail::TracedFunction &region, std::vector<Tensor> init,
                               std::vector<Tensor> results, const Location &loc) {
  using namespace detail;
  std::vector<Tensor> args{tensorOfInts({0}, {}), tensor({1}, {}, DType::Bool)};
  args.insert(args.end(), init.begin(), init.end());
  TracedRegion body = traceRegion(trace, trace.options(), "body", region, args, {}, loc);
  std::vector<Value *> values{trace.valueOf(trip, loc), trace.valueOf(cond0, loc)};
  for (const Tensor &t : init)
    values.push_back(trace.valueOf(t, loc));
  for (const TraceState::Capture &c : body.captures)
    values.push_back(c.outer);
  return recordRegionOp(
      trace, OpKind::Loop, values,
      {{"body", GraphAttr(std::move(body.graph))}, {"num_carried", int64_t(init.size())}},
      std::move(results), loc);
}

} // namespace

std::vector<Tensor> whileLoop(const LoopCondFn &condFn, const BranchFn &bodyFn,
                              std::vector<Tensor> init, std::source_location where) {
  using namespace detail;
  Location loc = toLocation(where);
  auto run = [&]() {
    std::vector<Tensor> x = init;
    while (truth(condFn(x), loc, "whileLoop: the condition"))
      x = bodyFn(x);
    return x;
  };
  TraceState *trace = activeTrace();
  if (!trace)
    return run();
  Tensor cond0 = condFn(init); // recorded: the loop's first test
  std::vector<Tensor> results = runUntraced(run);
  TracedFunction region = [&](const std::vector<Tensor> &args) {
    std::vector<Tensor> next = bodyFn(std::vector<Tensor>(args.begin() + 2, args.end()));
    std::vector<Tensor> outs{condFn(next)};
    outs.insert(outs.end(), next.begin(), next.end());
    return outs;
  };
  Tensor noLimit = tensorOfInts({std::numeric_limits<int64_t>::max()}, {});
  return recordLoop(*trace, noLimit, cond0, region, init, std::move(results), loc);
}

std::vector<Tensor> forLoop(int64_t n, const ForBodyFn &bodyFn, std::vector<Tensor> init,
                            std::source_location where) {
  using namespace detail;
  Location loc = toLocation(where);
  auto run = [&]() {
    std::vector<Tensor> x = init;
    for (int64_t i = 0; i < n; ++i)
      x = bodyFn(tensorOfInts({i}, {}), x);
    return x;
  };
  TraceState *trace = activeTrace();
  if (!trace)
    return run();
  std::vector<Tensor> results = runUntraced(run);
  TracedFunction region = [&](const std::vector<Tensor> &args) {
    std::vector<Tensor> outs{args[1]};
    std::vector<Tensor> next = bodyFn(args[0], std::vector<Tensor>(args.begin() + 2, args.end()));
    outs.insert(outs.end(), next.begin(), next.end());
    return outs;
  };
  return recordLoop(*trace, tensorOfInts({n}, {}), tensor({1}, {}, DType::Bool), region, init,
                    std::move(results), loc);
}

bool isTracing() {
  return detail::activeTrace() != nullptr;
}

std::vector<Tensor> withParameters(const Graph &graph, std::vector<Tensor> inputs,
                                   const nn::Module &module) {
  auto params = module.namedParameters();
  for (unsigned i = static_cast<unsigned>(inputs.size()); i < graph.numInputs(); ++i) {
    const std::string &name = graph.input(i)->name();
    auto it =
        std::find_if(params.begin(), params.end(), [&](const auto &p) { return p.first == name; });
    if (it == params.end())
      throw Error("withParameters: graph input " + std::to_string(i) + " ('%" + name +
                  "') is not a parameter of the module");
    inputs.push_back(it->second);
  }
  return inputs;
}

} // namespace kiln
