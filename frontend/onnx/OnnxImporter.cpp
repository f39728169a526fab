//===- OnnxImporter.cpp - The ONNX model importer ---------------*- C++ -*-===//
//
// Imports the main graph of a ModelProto:
//   1. parse the bytes; check the IR version and the default-domain opset
//      (at most kMaxOpset; see Note [Older opsets]); inline the calls of
//      model-local functions (OnnxFunctions.cpp);
//   2. index initializers and node outputs; create the graph inputs (those
//      that are not initializers), applying dim bindings;
//   3. check every node input and graph output names a defined value;
//   4. sort the nodes topologically (ONNX allows any order), reporting a
//      cycle if there is one;
//   5. look every node up in the converter table and run its static check;
//      every unsupported (op type, opset, node) goes into ONE error;
//   6. convert the nodes in order (see Internal.h), then set the outputs and
//      remove dead nodes.
// Steps 1-5 report every problem they find before failing; step 6 stops at
// the first node that fails.
//
//===----------------------------------------------------------------------===//
#include "frontend/onnx/Internal.h"
#include "ir/Verifier.h"

#include <algorithm>
#include <climits>
#include <filesystem>
#include <fstream>
#include <queue>
#include <set>
#include <sstream>

#include <google/protobuf/io/zero_copy_stream_impl.h>

// Note [Older opsets]
// Kiln reads every converter's op at opsets 11 to kMaxOpset. A model of an older
// opset imports too when each of its nodes has a converter whose first opset
// is at most the model's: a converter's first opset is where the ONNX
// definition it implements starts (the op's `since_version` in effect at
// opset 11, e.g. Relu 6, Add 7, MatMul 9), so the node means the same at
// the older opset. Any other node (Slice at opset 9: attributes, not inputs)
// is listed as unsupported, with a hint to run onnx.version_converter.

namespace kiln {
namespace onnximport {
namespace {

/// The converter table: op type -> its rows, by ascending `since`.
const std::unordered_map<std::string, std::vector<const Converter *>> &converterTable() {
  static const auto table = [] {
    std::unordered_map<std::string, std::vector<const Converter *>> t;
    for (auto family :
         {elementwiseConverters(), nnConverters(), shapeConverters(), maskConverters(),
          reduceConverters(), lossConverters(), quantizeConverters(), dataMovementConverters(),
          rnnConverters(), attentionConverters(), indexingConverters(), einsumConverters(),
          controlFlowConverters(), sequenceConverters()})
      for (const Converter &c : family)
        t[c.opType].push_back(&c);
    for (auto &[op, rows] : t)
      std::sort(rows.begin(), rows.end(),
                [](const Converter *a, const Converter *b) { return a->since < b->since; });
    return t;
  }();
  return table;
}

const Converter *findConverter(const std::string &opType, int64_t opset) {
  const auto &table = converterTable();
  auto it = table.find(opType);
  if (it == table.end())
    return nullptr;
  // The last row whose definition starts at or below the opset.
  const Converter *found = nullptr;
  for (const Converter *c : it->second)
    if (opset >= c->since)
      found = c;
  return found;
}

bool isDefaultDomain(const std::string &domain) {
  return domain.empty() || domain == "ai.onnx";
}

/// A symbol name the .kir grammar accepts: [A-Za-z_][A-Za-z0-9_.$]*.
std::string symbolName(const std::string &param) {
  std::string s;
  for (char c : param)
    s +=
        (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '$') ? c : '_';
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_'))
    s = "_" + s;
  return s;
}

std::vector<std::string> scopeReads(const onnx::NodeProto &n);

/// The names `g` reads from enclosing scopes: used by its nodes (or by the
/// subgraphs of its nodes, recursively) or returned, and defined by none
/// of its inputs, initializers and nodes. ONNX lets a subgraph read any
/// value of a scope around it; Kiln's regions take them as operands
/// (Note [Regions] in docs/IR.md).
void freeNames(const onnx::GraphProto &g, std::set<std::string> &out) {
  std::set<std::string> defined;
  for (const auto &in : g.input())
    defined.insert(in.name());
  for (const auto &init : g.initializer())
    defined.insert(init.name());
  for (const auto &n : g.node())
    for (const std::string &o : n.output())
      defined.insert(o);
  auto use = [&](const std::string &name) {
    if (!name.empty() && !defined.count(name))
      out.insert(name);
  };
  for (const auto &n : g.node())
    for (const std::string &name : scopeReads(n))
      use(name);
  for (const auto &o : g.output())
    use(o.name());
}

/// What node `n` reads from its graph: its inputs, then the names its
/// subgraphs read from outside them.
std::vector<std::string> scopeReads(const onnx::NodeProto &n) {
  std::vector<std::string> reads(n.input().begin(), n.input().end());
  std::set<std::string> inner;
  for (const auto &a : n.attribute()) {
    if (a.has_g())
      freeNames(a.g(), inner);
    for (const auto &sub : a.graphs())
      freeNames(sub, inner);
  }
  reads.insert(reads.end(), inner.begin(), inner.end());
  return reads;
}

/// The name of node `i` of `g` for locations: its name, or `<OpType #i>`
/// (`<OpType #i in SCOPE>` inside a subgraph).
std::string nodeName(const onnx::GraphProto &g, int i, const std::string &scope) {
  const onnx::NodeProto &n = g.node(i);
  if (!n.name().empty())
    return n.name();
  return "<" + n.op_type() + " #" + std::to_string(i) + (scope.empty() ? "" : " in " + scope) + ">";
}

/// One unsupported node, for the one error that lists them all.
struct SupportProblem {
  Location loc;
  std::string opType;
  std::string what;
};

/// The converter of `n`, or nullptr with `reason` set.
const Converter *converterFor(const onnx::NodeProto &n, int64_t opset,
                              const std::map<std::string, int64_t> &domainOpsets,
                              std::string &qualified, int64_t &nodeOpset, std::string &reason) {
  qualified = n.op_type();
  nodeOpset = opset;
  const Converter *c = nullptr;
  if (!isDefaultDomain(n.domain())) {
    qualified = n.domain() + "." + n.op_type();
    auto it = domainOpsets.find(n.domain());
    nodeOpset = it == domainOpsets.end() ? 0 : it->second;
    reason = "is not supported (domain '" + n.domain() + "')";
  } else if (!(c = findConverter(n.op_type(), opset))) {
    auto it = converterTable().find(n.op_type());
    if (it == converterTable().end()) {
      reason = "is not supported";
    } else {
      int first = INT_MAX;
      for (const Converter *cv : it->second)
        first = std::min(first, cv->since);
      reason = opset < kMinOpset ? "is supported from opset " + std::to_string(first) +
                                       ", where its current definition starts (convert the "
                                       "model with onnx.version_converter)"
                                 : "is supported at opsets " + std::to_string(first) + " to " +
                                       std::to_string(kMaxOpset) + " only";
    }
  } else if (c->check) {
    reason = c->check(n, opset);
  }
  return reason.empty() ? c : nullptr;
}

/// Collects the unsupported nodes of `g` and of its subgraphs.
void collectSupportProblems(const onnx::GraphProto &g, const std::string &scope, int64_t opset,
                            const std::map<std::string, int64_t> &domainOpsets,
                            const std::string &modelName, std::vector<SupportProblem> &out) {
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto &n = g.node(i);
    std::string qualified, reason;
    int64_t nodeOpset = 0;
    converterFor(n, opset, domainOpsets, qualified, nodeOpset, reason);
    std::string name = nodeName(g, i, scope);
    if (!reason.empty())
      out.push_back({Location::name(name, modelName), qualified,
                     "'" + qualified + "' (opset " + std::to_string(nodeOpset) + ") " + reason});
    for (const auto &a : n.attribute())
      if (a.has_g())
        collectSupportProblems(a.g(), a.name() + " of '" + name + "'", opset, domainOpsets,
                               modelName, out);
  }
}

} // namespace

/// The import of one graph: the model's main graph, or a subgraph (an If
/// branch, a Loop body) into a region, reading its enclosing scopes
/// through `parent`.
class GraphImport {
public:
  GraphImport(const onnx::GraphProto &g, ImportState &state, int64_t opset,
              const GraphImport *parent, std::string scope)
      : g_(g), state_(state), opset_(opset), parent_(parent), scope_(std::move(scope)) {
    state_.scope = this;
  }

  /// Initializers, producers and use counts.
  LogicalResult indexValues();
  /// Every name a node reads is defined here or in an enclosing scope.
  LogicalResult checkReferences();
  LogicalResult sortNodes();
  /// Finds each node's converter; the problems were reported before the
  /// main graph converted anything (collectSupportProblems).
  LogicalResult findConverters();
  LogicalResult convertNodes();
  /// What outputs() does with a sequence (Note [Sequences]).
  enum class SequenceOutputs {
    Refuse, ///< the main graph: an error
    Stack,  ///< a region: a list is stacked; `stacked` marks them
    Keep,   ///< a branch imported in place: the sequence as it is
  };
  /// The graph outputs, in order; with Stack, `sequences` gets each one's
  /// sequence (nullopt for a tensor).
  FailureOr<std::vector<Value *>>
  outputs(SequenceOutputs mode, std::vector<std::optional<Sequence>> *sequences = nullptr);
  /// True when `name` is a value of this graph (before conversion: an
  /// input, an initializer or a node output) or of an enclosing one.
  /// True when a node of this graph produces `name`.
  bool produces(const std::string &name) const { return producers_.count(name) != 0; }
  bool defines(const std::string &name) const {
    return state_.values.count(name) || state_.initializers.count(name) || producers_.count(name) ||
           (parent_ && parent_->defines(name));
  }

  Location nodeLoc(int i) const {
    return Location::name(nodeName(g_, i, scope_), state_.modelName);
  }

private:
  const onnx::GraphProto &g_;
  ImportState &state_;
  int64_t opset_;
  const GraphImport *parent_;
  std::string scope_;
  /// Output name -> index of the producing node.
  std::unordered_map<std::string, int> producers_;
  std::vector<int> order_;
  std::vector<const Converter *> converters_;
};

class Importer {
public:
  Importer(DiagnosticEngine &diag, const OnnxImportOptions &opts)
      : diag_(diag), opts_(opts), graph_(std::make_unique<Graph>("main")),
        state_(*graph_, diag, opts) {
    state_.modelName = opts.modelName.empty() ? "<memory>" : opts.modelName;
    state_.baseDir = opts.externalDataDir;
  }

  FailureOr<std::unique_ptr<Module>> run(std::string_view bytes);
  /// run() on a model read straight from `in` (`size` bytes): the file is
  /// never in memory as a whole next to its parsed protobuf.
  FailureOr<std::unique_ptr<Module>> run(std::istream &in, int64_t size);
  /// The rest of run() once model_ is parsed.
  FailureOr<std::unique_ptr<Module>> runParsed();

private:
  InFlightDiagnostic modelError() {
    InFlightDiagnostic d = diag_.emitError(Location());
    d << state_.modelName << ": ";
    return d;
  }

  LogicalResult parse(std::string_view bytes);
  /// The checks after parsing (ir_version, graph, its name).
  LogicalResult checkParsed();
  LogicalResult checkOpsets();
  LogicalResult createInputs(const GraphImport &main);
  /// Every unsupported (op type, opset, node), subgraphs included, in ONE
  /// error.
  LogicalResult checkSupport();
  void removeDeadNodes();

  DiagnosticEngine &diag_;
  const OnnxImportOptions &opts_;
  onnx::ModelProto model_;
  std::unique_ptr<Graph> graph_;
  ImportState state_;
  int64_t opset_ = 0;
  std::map<std::string, int64_t> domainOpsets_;
};

FailureOr<std::unique_ptr<Module>> Importer::run(std::istream &in, int64_t size) {
  if (size > static_cast<int64_t>(INT_MAX))
    return modelError() << "the model is " << size
                        << " bytes; protobuf reads at most 2 GiB (store the weights as external "
                           "data)";
  if (size == 0)
    return modelError() << "the file is empty";
  google::protobuf::io::IstreamInputStream stream(&in);
  if (!model_.ParseFromZeroCopyStream(&stream))
    return modelError() << "not a valid ONNX model: the protobuf data is corrupt or truncated ("
                        << size << " bytes)";
  if (failed(checkParsed()))
    return failure();
  return runParsed();
}

FailureOr<std::unique_ptr<Module>> Importer::run(std::string_view bytes) {
  if (failed(parse(bytes)))
    return failure();
  return runParsed();
}

FailureOr<std::unique_ptr<Module>> Importer::runParsed() {
  if (failed(checkOpsets()) ||
      failed(inlineLocalFunctions(model_, opset_, diag_, state_.modelName)))
    return failure();
  state_.opset = opset_;
  GraphImport main(model_.graph(), state_, opset_, nullptr, "");
  // Structural checks report everything they find before giving up.
  bool ok = succeeded(main.indexValues());
  ok &= succeeded(createInputs(main));
  ok = ok && succeeded(main.checkReferences());
  ok = ok && succeeded(main.sortNodes());
  ok = ok && succeeded(checkSupport()) && succeeded(main.findConverters());
  if (!ok || failed(main.convertNodes()))
    return failure();
  auto outs = main.outputs(GraphImport::SequenceOutputs::Refuse);
  if (failed(outs))
    return failure();
  graph_->setOutputs(outs.take());
  if (opts_.removeDeadNodes)
    removeDeadNodes();
  if (failed(verify(*graph_, diag_)))
    return modelError() << "internal error: the imported graph does not verify";
  auto module = std::make_unique<Module>();
  module->addGraph(std::move(graph_));
  return module;
}

LogicalResult Importer::parse(std::string_view bytes) {
  if (bytes.size() > static_cast<size_t>(INT_MAX))
    return modelError() << "the model is " << bytes.size()
                        << " bytes; protobuf reads at most 2 GiB (store the weights as external "
                           "data)";
  if (bytes.empty())
    return modelError() << "the file is empty";
  if (!model_.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return modelError() << "not a valid ONNX model: the protobuf data is corrupt or truncated ("
                        << bytes.size() << " bytes)";
  return checkParsed();
}

LogicalResult Importer::checkParsed() {
  if (!model_.has_ir_version() || model_.ir_version() <= 0)
    return modelError() << "not an ONNX model: it has no ir_version";
  if (!model_.has_graph())
    return modelError() << "the model has no graph";
  if (!model_.graph().name().empty())
    graph_->setName(model_.graph().name());
  return success();
}

LogicalResult Importer::checkOpsets() {
  bool found = false;
  for (const auto &op : model_.opset_import()) {
    if (isDefaultDomain(op.domain())) {
      opset_ = op.version();
      found = true;
    } else {
      domainOpsets_[op.domain()] = op.version();
    }
  }
  if (!found)
    return modelError() << "the model imports no opset of the default ONNX domain";
  // Below kMinOpset, each node is checked against the first opset of its
  // converter (see Note [Older opsets]).
  if (opset_ < 1 || opset_ > kMaxOpset)
    return modelError() << "the model uses opset " << opset_
                        << " of the default ONNX domain; Kiln imports opsets " << kMinOpset
                        << " to " << kMaxOpset
                        << " (and older ones for ops unchanged since; re-export with another "
                           "opset_version, or convert the model with onnx.version_converter)";
  return success();
}

LogicalResult GraphImport::indexValues() {
  bool ok = true;
  for (const auto &init : g_.initializer()) {
    if (init.name().empty()) {
      state_.diag.emitError(Location()) << state_.modelName << ": an initializer has no name"
                                        << (scope_.empty() ? "" : " in ") << scope_;
      ok = false;
    } else if (!state_.initializers.emplace(init.name(), &init).second) {
      state_.diag.emitError(Location::name(init.name(), state_.modelName))
          << "initializer '" << init.name() << "' is defined twice";
      ok = false;
    }
  }
  if (g_.sparse_initializer_size() > 0) {
    state_.diag.emitError(Location())
        << state_.modelName << ": sparse initializers are not supported ('"
        << g_.sparse_initializer(0).values().name() << "')";
    ok = false;
  }
  for (int i = 0; i < g_.node_size(); ++i) {
    for (const std::string &out : g_.node(i).output()) {
      if (out.empty())
        continue;
      auto [it, inserted] = producers_.emplace(out, i);
      if (!inserted) {
        state_.diag.emitError(nodeLoc(i)) << "value '" << out << "' is also produced by node '"
                                          << nodeLoc(it->second).nameStr() << "'";
        ok = false;
      } else if (state_.initializers.count(out)) {
        state_.diag.emitError(nodeLoc(i)) << "value '" << out << "' is also an initializer";
        ok = false;
      }
    }
    // A value a subgraph reads is used by the node that holds it.
    for (const std::string &in : scopeReads(g_.node(i)))
      if (!in.empty())
        ++state_.useCounts[in];
  }
  for (const auto &out : g_.output())
    ++state_.useCounts[out.name()];
  return ok ? success() : failure();
}

LogicalResult Importer::createInputs(const GraphImport &main) {
  const onnx::GraphProto &g = model_.graph();
  bool ok = true;
  std::set<std::string> params;
  for (const auto &in : g.input()) {
    // Old exporters list initializers as inputs too; they are constants.
    if (state_.initializers.count(in.name()))
      continue;
    Location loc = Location::name(in.name(), state_.modelName);
    if (in.name().empty() || state_.values.count(in.name()) || main.produces(in.name())) {
      diag_.emitError(loc) << "graph input '" << in.name()
                           << "' has no name or is defined more than once";
      ok = false;
      continue;
    }
    if (!in.type().has_tensor_type()) {
      diag_.emitError(loc) << "graph input '" << in.name()
                           << "' is not a tensor; Kiln imports tensor inputs only";
      ok = false;
      continue;
    }
    const auto &tt = in.type().tensor_type();
    std::optional<DType> dtype = dtypeFromOnnx(tt.elem_type());
    if (!dtype) {
      diag_.emitError(loc) << "graph input '" << in.name() << "' has element type "
                           << onnxTypeName(tt.elem_type()) << ", which Kiln does not support";
      ok = false;
      continue;
    }
    if (!tt.has_shape()) {
      diag_.emitError(loc) << "graph input '" << in.name()
                           << "' has no shape; Kiln needs at least the rank of every input";
      ok = false;
      continue;
    }
    Shape shape;
    for (int d = 0; d < tt.shape().dim_size(); ++d) {
      const auto &dim = tt.shape().dim(d);
      if (dim.has_dim_value()) {
        if (dim.dim_value() < 0) {
          diag_.emitError(loc) << "graph input '" << in.name() << "' has a negative dim "
                               << dim.dim_value();
          ok = false;
        }
        shape.push_back(Dim(std::max<int64_t>(dim.dim_value(), 0)));
        continue;
      }
      std::string param = dim.has_dim_param() ? dim.dim_param() : "";
      params.insert(param);
      auto bound = opts_.dimBindings.find(param);
      if (!param.empty() && bound != opts_.dimBindings.end()) {
        shape.push_back(Dim(bound->second));
      } else if (opts_.dynamicDims == OnnxDynamicDims::Error) {
        diag_.emitError(loc) << "graph input '" << in.name() << "' has dynamic dim " << d
                             << (param.empty() ? "" : " ('" + param + "')")
                             << "; bind it to a size (--dim " << (param.empty() ? "NAME" : param)
                             << "=N)";
        ok = false;
      } else if (opts_.dynamicDims == OnnxDynamicDims::Symbolic && !param.empty()) {
        shape.push_back(Dim::symbolic(symbolName(param)));
      } else {
        shape.push_back(Dim::dynamic());
      }
    }
    state_.values[in.name()] = graph_->addInput(TensorType(*dtype, std::move(shape)), in.name());
  }
  for (const auto &[name, size] : opts_.dimBindings) {
    if (size < 0) {
      modelError() << "dim '" << name << "' is bound to a negative size " << size;
      ok = false;
    } else if (!params.count(name)) {
      auto d = modelError();
      d << "no graph input has a dim named '" << name << "' (named dims:";
      bool any = false;
      for (const std::string &p : params)
        if (!p.empty()) {
          d << " " << p;
          any = true;
        }
      d << (any ? ")" : " none)");
      ok = false;
    }
  }
  return ok ? success() : failure();
}

LogicalResult GraphImport::checkReferences() {
  bool ok = true;
  for (int i = 0; i < g_.node_size(); ++i) {
    const onnx::NodeProto &n = g_.node(i);
    std::vector<std::string> reads = scopeReads(n);
    for (size_t k = 0; k < reads.size(); ++k) {
      if (reads[k].empty() || defines(reads[k]))
        continue;
      auto d = state_.diag.emitError(nodeLoc(i));
      d << n.op_type() << ": ";
      if (static_cast<int>(k) < n.input_size())
        d << "input " << k << " '" << reads[k] << "'";
      else
        d << "a subgraph reads '" << reads[k] << "', which";
      d << " is not defined by any node, graph input or initializer (a missing initializer?)";
      ok = false;
    }
  }
  for (const auto &out : g_.output()) {
    if (!defines(out.name())) {
      state_.diag.emitError(Location())
          << state_.modelName << ": " << (scope_.empty() ? "graph" : scope_) << " output '"
          << out.name() << "' is not defined by any node";
      ok = false;
    }
  }
  if (g_.output_size() == 0) {
    state_.diag.emitError(Location())
        << state_.modelName << ": " << (scope_.empty() ? "the graph" : scope_) << " has no outputs";
    ok = false;
  }
  return ok ? success() : failure();
}

LogicalResult GraphImport::sortNodes() {
  // Kahn's algorithm; among ready nodes the lowest index goes first, so an
  // already sorted graph keeps its order.
  const onnx::GraphProto &g = g_;
  int n = g.node_size();
  std::vector<int> pending(static_cast<size_t>(n), 0);
  std::vector<std::vector<int>> consumers(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    std::set<int> deps;
    for (const std::string &in : scopeReads(g.node(i))) {
      auto it = producers_.find(in);
      if (!in.empty() && it != producers_.end())
        deps.insert(it->second);
    }
    for (int d : deps)
      consumers[static_cast<size_t>(d)].push_back(i);
    pending[static_cast<size_t>(i)] = static_cast<int>(deps.size());
  }
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int i = 0; i < n; ++i)
    if (pending[static_cast<size_t>(i)] == 0)
      ready.push(i);
  while (!ready.empty()) {
    int i = ready.top();
    ready.pop();
    order_.push_back(i);
    for (int c : consumers[static_cast<size_t>(i)])
      if (--pending[static_cast<size_t>(c)] == 0)
        ready.push(c);
  }
  if (static_cast<int>(order_.size()) == n)
    return success();

  // Walk producer edges among the unsorted nodes until one repeats.
  int start = 0;
  while (pending[static_cast<size_t>(start)] == 0)
    ++start;
  std::vector<int> path;
  std::vector<int> seenAt(static_cast<size_t>(n), -1);
  int cur = start;
  while (seenAt[static_cast<size_t>(cur)] < 0) {
    seenAt[static_cast<size_t>(cur)] = static_cast<int>(path.size());
    path.push_back(cur);
    for (const std::string &in : scopeReads(g.node(cur))) {
      auto it = producers_.find(in);
      if (!in.empty() && it != producers_.end() && pending[static_cast<size_t>(it->second)] > 0) {
        cur = it->second;
        break;
      }
    }
  }
  std::vector<int> cycle(path.begin() + seenAt[static_cast<size_t>(cur)], path.end());
  std::reverse(cycle.begin(), cycle.end()); // producer -> consumer order
  std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());
  auto d = state_.diag.emitError(nodeLoc(cycle.front()));
  d << "the graph has a cycle: ";
  for (int c : cycle)
    d << "'" << nodeLoc(c).nameStr() << "' -> ";
  d << "'" << nodeLoc(cycle.front()).nameStr() << "' (" << n - static_cast<int>(order_.size())
    << " nodes cannot be ordered)";
  return failure();
}

LogicalResult Importer::checkSupport() {
  std::vector<SupportProblem> problems;
  collectSupportProblems(model_.graph(), "", opset_, domainOpsets_, state_.modelName, problems);
  if (problems.empty())
    return success();
  std::set<std::string> opTypes;
  for (const SupportProblem &p : problems)
    opTypes.insert(p.opType);
  auto d = modelError();
  d << problems.size() << (problems.size() == 1 ? " node uses" : " nodes use")
    << " ONNX ops or attributes that Kiln does not support:";
  const char *sep = " ";
  for (const std::string &t : opTypes) {
    d << sep << t;
    sep = ", ";
  }
  for (const SupportProblem &p : problems)
    d.attachNote(p.loc, p.what);
  return failure();
}

LogicalResult GraphImport::findConverters() {
  converters_.assign(static_cast<size_t>(g_.node_size()), nullptr);
  std::map<std::string, int64_t> noDomains;
  for (int i : order_) {
    std::string qualified, reason;
    int64_t nodeOpset = 0;
    converters_[static_cast<size_t>(i)] =
        converterFor(g_.node(i), opset_, noDomains, qualified, nodeOpset, reason);
    if (!reason.empty())
      return state_.diag.emitError(nodeLoc(i)) << "'" << qualified << "' " << reason;
  }
  return success();
}

LogicalResult GraphImport::convertNodes() {
  const onnx::GraphProto &g = g_;
  for (int i : order_) {
    const onnx::NodeProto &n = g.node(i);
    Location loc = nodeLoc(i);
    state_.builder.setLoc(loc);
    NodeContext ctx(state_, n, opset_, loc);
    // An error reported by a helper the converter called (a builder, a
    // region's import) fails the node too, though the context never saw it.
    const unsigned errorsBefore = state_.diag.numErrors();
    std::vector<Value *> outs = converters_[static_cast<size_t>(i)]->convert(ctx);
    if (ctx.failed() || state_.diag.numErrors() > errorsBefore)
      return failure();
    for (int k = 0; k < n.output_size(); ++k) {
      const std::string &name = n.output(k);
      if (name.empty())
        continue;
      Value *v = static_cast<size_t>(k) < outs.size() ? outs[static_cast<size_t>(k)] : nullptr;
      if (!v) {
        if (ctx.isOutputUsed(static_cast<size_t>(k)))
          return state_.diag.emitError(loc) << n.op_type() << ": output " << k << " ('" << name
                                            << "') is used, but Kiln does not compute it";
        continue;
      }
      if (v->name().empty())
        v->setName(name);
      state_.values[name] = v;
    }
  }
  return success();
}

FailureOr<std::vector<Value *>>
GraphImport::outputs(SequenceOutputs mode, std::vector<std::optional<Sequence>> *sequences) {
  std::vector<Value *> outs;
  for (const auto &out : g_.output()) {
    Location loc = Location::name(out.name(), state_.modelName);
    Value *v = state_.lookup(out.name(), loc);
    if (!v)
      return failure();
    auto seq = state_.sequences.find(v);
    bool isSequence = seq != state_.sequences.end();
    if (isSequence && mode == SequenceOutputs::Refuse)
      return state_.diag.emitError(loc)
             << "graph output '" << out.name()
             << "' is a sequence; Kiln's graphs return tensors (docs/ONNX.md, Sequences)";
    std::optional<Sequence> stacked;
    if (isSequence && mode == SequenceOutputs::Stack) {
      state_.builder.setLoc(loc);
      stacked = seq->second;
      if (!stacked->stacked) {
        stacked->stacked =
            stackList(state_, *stacked, "sequence '" + out.name() + "' " + scope_ + " returns");
        if (!stacked->stacked)
          return failure();
        stacked->appended = stacked->elems[0]->type();
        stacked->elems.clear();
      }
      v = stacked->stacked;
    }
    if (sequences)
      sequences->push_back(std::move(stacked));
    outs.push_back(v);
  }
  return outs;
}

void Importer::removeDeadNodes() {
  // Reverse order: a node's users come after it, so one sweep suffices.
  std::vector<Node *> nodes = graph_->nodeList();
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it)
    if ((*it)->isUnused())
      graph_->erase(*it);
}

FailureOr<ImportedRegion> importRegion(NodeContext &ctx, const onnx::GraphProto &body,
                                       const std::string &what,
                                       std::span<const TensorType> inputTypes,
                                       std::span<const std::string> seed,
                                       std::span<const unsigned> stackedInputs) {
  ImportState &outer = ctx.state();
  if (static_cast<size_t>(body.input_size()) != inputTypes.size())
    return ctx.emitError() << what << " declares " << body.input_size()
                           << " input(s), the op gives it " << inputTypes.size();
  auto graph = std::make_unique<Graph>(what);
  ImportState state(*graph, outer.diag, outer.opts);
  state.modelName = outer.modelName;
  state.baseDir = outer.baseDir;
  state.opset = outer.opset;
  state.parent = &outer;
  state.releaseInitializerBytes = false;
  GraphImport import(body, state, outer.opset, outer.scope,
                     what + " of '" + ctx.loc().nameStr() + "'");
  for (size_t i = 0; i < inputTypes.size(); ++i) {
    const std::string &name = body.input(static_cast<int>(i)).name();
    if (name.empty() || state.values.count(name))
      return ctx.emitError() << "input " << i << " of " << what << " has no name or repeats one";
    state.values[name] = graph->addInput(inputTypes[i], name);
  }
  for (unsigned i : stackedInputs) {
    Value *in = graph->input(i);
    Value *seq = state.sequencePlaceholder(Sequence::stackedIn(in));
    if (!seq)
      return failure();
    state.values[body.input(static_cast<int>(i)).name()] = seq;
  }
  if (failed(import.indexValues()) || failed(import.checkReferences()) ||
      failed(import.sortNodes()) || failed(import.findConverters()))
    return failure();
  for (const std::string &name : seed)
    if (!state.lookup(name, ctx.loc()))
      return failure();
  if (failed(import.convertNodes()))
    return failure();
  std::vector<std::optional<Sequence>> sequences;
  auto outs = import.outputs(GraphImport::SequenceOutputs::Stack, &sequences);
  if (failed(outs))
    return failure();
  graph->setOutputs(outs.take());
  std::vector<Node *> nodes = graph->nodeList();
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it)
    if ((*it)->isUnused())
      graph->erase(*it);
  return ImportedRegion{std::move(graph), std::move(state.captures), std::move(sequences)};
}

FailureOr<std::vector<Value *>> importInline(NodeContext &ctx, const onnx::GraphProto &body,
                                             const std::string &what) {
  ImportState &state = ctx.state();
  const GraphImport *scope = state.scope;
  if (body.input_size() != 0)
    return ctx.emitError() << what << " declares " << body.input_size()
                           << " input(s), the op gives it none";
  GraphImport import(body, state, state.opset, scope, what + " of '" + ctx.loc().nameStr() + "'");
  bool ok = succeeded(import.indexValues()) && succeeded(import.checkReferences()) &&
            succeeded(import.sortNodes()) && succeeded(import.findConverters()) &&
            succeeded(import.convertNodes());
  FailureOr<std::vector<Value *>> outs = failure();
  if (ok)
    outs = import.outputs(GraphImport::SequenceOutputs::Keep);
  state.scope = scope;
  state.builder.setLoc(ctx.loc());
  return outs;
}

} // namespace onnximport

FailureOr<std::unique_ptr<Module>> importOnnxBytes(std::string_view bytes, DiagnosticEngine &diag,
                                                   const OnnxImportOptions &opts) {
  onnximport::Importer importer(diag, opts);
  return importer.run(bytes);
}

FailureOr<std::unique_ptr<Module>> importOnnx(const std::string &path, DiagnosticEngine &diag,
                                              const OnnxImportOptions &opts) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return diag.emitError(Location()) << "'" << path << "' is a folder, not an ONNX model";
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return diag.emitError(Location()) << "cannot open '" << path << "'";
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.seekg(0, std::ios::beg);
  if (size < 0 || !in)
    return diag.emitError(Location()) << "cannot read '" << path << "'";
  OnnxImportOptions o = opts;
  if (o.modelName.empty())
    o.modelName = path;
  if (o.externalDataDir.empty()) {
    o.externalDataDir = std::filesystem::path(path).parent_path().string();
    if (o.externalDataDir.empty())
      o.externalDataDir = ".";
  }
  onnximport::Importer importer(diag, o);
  return importer.run(in, static_cast<int64_t>(size));
}

bool isOnnxPath(std::string_view path) {
  return path.size() >= 5 && path.substr(path.size() - 5) == ".onnx";
}

} // namespace kiln
