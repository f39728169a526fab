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
  TraceState(Graph &graph, const TraceOptions &options) : graph_(graph), options_(options) {}

  /// A name based on `base` that no value of the graph has yet.
  std::string uniqueName(const std::string &base) {
    std::string name = base;
    for (int i = 1; !usedNames_.insert(name).second; ++i)
      name = base + "_" + std::to_string(i);
    return name;
  }

  bool isMapped(const Tensor &t) const { return values_.count(TensorKey(t)) != 0; }
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
  const std::vector<Tensor> &parameterInputs() const { return parameterInputs_; }
  /// One note per warning, for a failed trace check to explain itself.
  const std::vector<Diagnostic> &warnings() const { return warnings_; }

private:
  Graph &graph_;
  const TraceOptions &options_;
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
  explicit ActiveTraceScope(TraceState *state) { tlsTrace = state; }
  ~ActiveTraceScope() { tlsTrace = nullptr; }
  ActiveTraceScope(const ActiveTraceScope &) = delete;
  ActiveTraceScope &operator=(const ActiveTraceScope &) = delete;
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
              "or size decided by it is frozen in the graph)";
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
