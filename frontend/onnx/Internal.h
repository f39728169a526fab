//===- Internal.h - Shared parts of the ONNX importer -----------*- C++ -*-===//
//
// Private to frontend/onnx/. The importer (OnnxImporter.cpp) walks the ONNX
// nodes in topological order and calls one converter per node, found in a
// table by op type and opset. A converter reads its node through a
// NodeContext (inputs, type-checked attributes, constant inputs) and creates
// Kiln nodes through it; NodeContext::create evaluates nodes whose operands
// are all constants right away (see Note [Import-time folding]).
//
// Note [Poisoned values]
// NodeContext::create returns nullptr after reporting an error, and treats a
// nullptr operand as "already failed": it creates nothing and reports
// nothing. Converters therefore chain creates without checking each one;
// the importer checks the node's results (and NodeContext::failed()) once.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "frontend/onnx/OnnxImporter.h"
#include "ir/Builder.h"

#include <onnx/onnx_pb.h>

#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln::onnximport {

//===----------------------------------------------------------------------===//
// Tensors
//===----------------------------------------------------------------------===//

/// onnx.proto's TensorProto.DataType numbers from 17 on, which the ONNX 1.12
/// classes Kiln is built with lack (ONNX 1.14 to 1.23), in their order.
enum NewerOnnxType : int32_t {
  kOnnxFloat8E4M3FN = 17,
  kOnnxFloat8E4M3FNUZ,
  kOnnxFloat8E5M2,
  kOnnxFloat8E5M2FNUZ,
  kOnnxUInt4,
  kOnnxInt4,
  kOnnxFloat4E2M1,
  kOnnxFloat8E8M0,
  kOnnxUInt2,
  kOnnxInt2,
  kOnnxFloat6E2M3,
  kOnnxFloat6E3M2,
};

/// The Kiln dtype of an ONNX TensorProto data type, or nullopt.
std::optional<DType> dtypeFromOnnx(int32_t elemType);
/// `FLOAT`, `INT64`, ... for messages (`type 42` when unknown).
std::string onnxTypeName(int32_t elemType);

/// Decodes a TensorProto (raw_data, typed fields or external data) into a
/// Tensor. `what` names it in messages (`initializer 'w'`); external paths
/// resolve against `baseDir`.
FailureOr<Tensor> tensorFromProto(const onnx::TensorProto &proto, const std::string &baseDir,
                                  const std::string &what, const Location &loc,
                                  DiagnosticEngine &diag);

//===----------------------------------------------------------------------===//
// Attributes of a NodeProto (for checks that run before conversion)
//===----------------------------------------------------------------------===//

/// The attribute `name` of `node`, or nullptr.
const onnx::AttributeProto *findAttr(const onnx::NodeProto &node, std::string_view name);
/// Its int value, or `dflt` when absent or not an int.
int64_t attrIntOr(const onnx::NodeProto &node, std::string_view name, int64_t dflt);
/// Its string value, or `dflt` when absent or not a string.
std::string attrStringOr(const onnx::NodeProto &node, std::string_view name, std::string dflt);

//===----------------------------------------------------------------------===//
// Import state and node context
//===----------------------------------------------------------------------===//

/// One entry of a shape-like integer vector known at import time: a value,
/// or only a symbolic expression (`batch`, `2*seq+1`), or nothing. See Note
/// [Shape values].
struct SymInt {
  std::optional<int64_t> value;
  /// The entry as an expression over the graph's symbols, when not a value.
  std::optional<DimExpr> expr;
  /// Where an unknown entry came from: dim `sourceDim` of `source` (so
  /// that even an anonymous `?` dim is recognized in its own tensor).
  const Value *source = nullptr;
  int64_t sourceDim = -1;

  static SymInt of(int64_t v) { return SymInt{v, std::nullopt, nullptr, -1}; }
  /// A value for a constant expression, else the expression.
  static SymInt ofExpr(const DimExpr &e) {
    return e.isConstant() ? of(e.constant()) : SymInt{std::nullopt, e, nullptr, -1};
  }
  static SymInt unknown() { return SymInt{}; }
  /// The entry dim `i` of `v`'s shape gives.
  static SymInt ofDim(const Value *v, int64_t i) {
    const Dim &d = v->type().shape[static_cast<size_t>(i)];
    return d.isStatic() ? of(d.size()) : SymInt{std::nullopt, d.expr(), v, i};
  }
  bool isKnown() const { return value.has_value(); }
  /// The entry as an expression (a constant for a value); nullopt when unknown.
  std::optional<DimExpr> asExpr() const { return value ? DimExpr(*value) : expr; }
  /// `5`, `2*seq` or `?`.
  std::string str() const { return value ? std::to_string(*value) : expr ? expr->str() : "?"; }
  /// True when the entry is known to equal dim `i` of `v`.
  bool isDimOf(const Value *v, int64_t i) const {
    if (i < 0 || i >= v->type().rank() || isKnown())
      return false;
    return (source == v && sourceDim == i) ||
           (expr && v->type().shape[static_cast<size_t>(i)] == Dim::of(*expr));
  }
};
using SymInts = std::vector<SymInt>;

// Note [Shape values]
// Exporters compute shapes at run time: Shape -> Gather -> Unsqueeze ->
// Concat -> Reshape. When the input shape is static every step folds to a
// constant. When it has a symbolic dim (`batch`), the Shape node stays in the
// graph, and the importer also records what each entry of the small integer
// vectors derived from it is (ImportState::shapeValues): a number or a
// symbolic expression; Add, Sub, Mul, Div and integer Cast of such vectors
// compute on the expressions (`seq + 1`, `batch * heads`), Equal and Where
// pick entries (`expand(b, -1, -1)`), and a Reshape to a vector keeps them.
// Reshape then turns an entry that is its input's dim at the same position
// into `0` (copy) and keeps any other expression as an entry (the dim
// itself), so `x.view(x.size(0), -1, 32)` imports with a symbolic batch;
// Expand, ConstantOfShape and Slice take expression entries, Range a
// symbolic limit (an iota). The Shape / Gather / ... nodes become dead and
// are removed.

class GraphImport;

// Note [Sequences]
// ONNX sequences (what a Python list in scripted code exports to) are not
// a Kiln type: the importer resolves them while importing. A sequence is
//   - a list of tensor values known at import time (SequenceEmpty,
//     SequenceConstruct, SplitToSequence, and inserts, erases and reads at
//     positions known at import time), or
//   - a tensor stacking its elements on a new axis 0, whose length the run
//     decides: a sequence a Loop carries (initially a list, all elements
//     of one shape, or a stacked sequence), which the body may only append to (SequenceInsert
//     without a position: a concat), read (SequenceAt: a gather, and
//     ConcatFromSequence), measure (SequenceLength: a shape) and pass on
//     (Identity).
// ConcatFromSequence becomes a concat (or a stack) of a list, and a
// transpose and reshape of a stacked sequence. A placeholder value (an
// empty constant, removed as dead code) stands for each sequence, which
// ImportState::sequences records; any other op reading one, a graph output
// that is one, an If with a run-time condition returning one, and a
// subgraph reading a list from an enclosing scope are errors at the node.
// A subgraph reading a stacked sequence captures its tensor; a Loop body's
// outputs give the tensors.

/// One sequence. See Note [Sequences].
struct Sequence {
  DType dtype = DType::F32;
  /// The elements of a list.
  std::vector<Value *> elems;
  /// A stacked sequence's tensor (nullptr for a list).
  Value *stacked = nullptr;
  /// For a stacked one: the type of the elements appended to it since it
  /// entered its graph, where known (its tensor's type may say less: a
  /// concat onto a `?` dim keeps the `?`).
  std::optional<TensorType> appended;

  static Sequence list(DType dtype, std::vector<Value *> elems) {
    return Sequence{dtype, std::move(elems), nullptr, std::nullopt};
  }
  static Sequence stackedIn(Value *t, std::optional<TensorType> appended = std::nullopt) {
    return Sequence{t->type().dtype, {}, t, std::move(appended)};
  }
};

/// A value a region reads from an enclosing scope: `inner` (the region's
/// input) stands for `outer`, which the region op takes as an operand.
struct Capture {
  std::string name;
  Value *outer;
  Value *inner;
};

/// State shared by all nodes of one graph's import (the main graph, or a
/// subgraph being imported into a region).
struct ImportState {
  ImportState(Graph &g, DiagnosticEngine &diag, const OnnxImportOptions &opts)
      : graph(g), builder(g, diag), diag(diag), opts(opts) {}

  Graph &graph;
  Builder builder;
  DiagnosticEngine &diag;
  const OnnxImportOptions &opts;
  std::string modelName;
  std::string baseDir;
  /// ONNX value name -> Kiln value (graph inputs, converted node outputs,
  /// initializers once used).
  std::unordered_map<std::string, Value *> values;
  /// Initializers not yet turned into constants (created on first use).
  std::unordered_map<std::string, const onnx::TensorProto *> initializers;
  /// Names used by some node input or graph output.
  std::unordered_map<std::string, int> useCounts;
  /// See Note [Shape values].
  std::unordered_map<const Value *, SymInts> shapeValues;
  /// The values that stand for sequences. See Note [Sequences].
  std::unordered_map<const Value *, Sequence> sequences;
  /// The model's default-domain opset.
  int64_t opset = 0;
  /// The import of this graph (set by GraphImport).
  const GraphImport *scope = nullptr;
  /// For a subgraph: the state of the graph around it, whose values a
  /// lookup that misses here captures (Note [Regions] in docs/IR.md), and
  /// the captures made, in order. A captured constant is copied into the
  /// region instead.
  ImportState *parent = nullptr;
  std::vector<Capture> captures;
  /// False for subgraphs, which may be imported twice (a Loop body whose
  /// carried value changes shape): an initializer's protobuf bytes are
  /// released once it is a constant only when this is true.
  bool releaseInitializerBytes = true;

  /// The value of ONNX name `name`, creating an initializer's constant on
  /// first use and capturing a value of an enclosing scope; nullptr (with
  /// an error at `loc`) when the name is unknown.
  Value *lookup(const std::string &name, const Location &loc);
  /// A new value standing for `s` (Note [Sequences]).
  Value *sequencePlaceholder(Sequence s);
  /// Creates a node at the end of the graph and folds it when it can. See
  /// Note [Import-time folding]. nullptr after an error.
  FailureOr<std::vector<Value *>> create(OpKind kind, std::vector<Value *> operands,
                                         std::vector<NamedAttr> attrs, unsigned numResults);
};

/// The constant tensor a value holds, or nullptr when it is not a constant.
const Tensor *constantOf(const Value *v);

/// One ONNX node being converted.
class NodeContext {
public:
  NodeContext(ImportState &state, const onnx::NodeProto &node, int64_t opset, Location loc)
      : state_(state), node_(node), opset_(opset), loc_(std::move(loc)) {}

  const onnx::NodeProto &proto() const { return node_; }
  const std::string &opType() const { return node_.op_type(); }
  int64_t opset() const { return opset_; }
  const Location &loc() const { return loc_; }
  ImportState &state() { return state_; }
  const OnnxImportOptions &options() const { return state_.opts; }
  /// True once an error was reported for this node.
  bool failed() const { return failed_; }

  /// An error at the node (marks the node failed).
  InFlightDiagnostic emitError();

  // Inputs. An empty ONNX input name means "optional input not given".
  size_t numInputs() const { return static_cast<size_t>(node_.input_size()); }
  bool hasInput(size_t i) const;
  /// Input `i`, or an error naming `what` when it is absent.
  Value *input(size_t i, const char *what = "");
  /// Input `i` when present, else nullptr (no error).
  Value *optionalInput(size_t i);
  /// True when input `i` is a sequence (Note [Sequences]); `input` and
  /// `optionalInput` refuse one.
  bool isSequenceInput(size_t i);
  /// Input `i` as a sequence; an error (naming `what`) when it is a tensor.
  const Sequence *sequenceInput(size_t i, const char *what);
  /// The value that stands for `s` from now on.
  Value *sequence(Sequence s);
  /// The constant tensor of input `i`; an error (naming `what`) when the
  /// input is absent or not computable at import time.
  const Tensor *constantInput(size_t i, const char *what);
  /// A constant integer input as a list (any integer dtype, rank <= 1).
  std::optional<Ints> intsInput(size_t i, const char *what);
  /// A constant input holding one number.
  std::optional<double> scalarInput(size_t i, const char *what);
  /// The entries of a shape-like integer input (rank <= 1): a constant's
  /// values, or what Note [Shape values] knows about a computed one.
  /// nullopt (with an error) when the input is neither.
  std::optional<SymInts> shapeInput(size_t i, const char *what);
  /// The shape entries of a value (constant or recorded), or nullopt.
  std::optional<SymInts> shapeValueOf(const Value *v) const;
  /// Maps `axes` into [0, rank) in place; false (with an error) for an axis
  /// out of range or repeated.
  bool normalizeAxes(Ints &axes, int64_t rank);
  /// The static size of dim `i` of `v`, or an error naming the dim.
  std::optional<int64_t> staticDim(const Value *v, int64_t i);
  /// Records what the entries of `v` are (no-op for nullptr).
  void setShapeValue(const Value *v, SymInts entries);

  // Outputs.
  size_t numOutputs() const { return static_cast<size_t>(node_.output_size()); }
  /// True when output `i` exists and a node or the graph uses it.
  bool isOutputUsed(size_t i) const;

  // Attributes; a wrong attribute type is an error (and the default is used).
  bool hasAttr(std::string_view name) const { return findAttr(node_, name) != nullptr; }
  int64_t attrInt(std::string_view name, int64_t dflt);
  double attrFloat(std::string_view name, double dflt);
  std::string attrString(std::string_view name, std::string dflt);
  Ints attrInts(std::string_view name, Ints dflt = {});
  Floats attrFloats(std::string_view name, Floats dflt = {});
  std::vector<std::string> attrStrings(std::string_view name);
  /// The tensor attribute `name` decoded, or a null tensor when absent.
  Tensor attrTensor(std::string_view name);

  // Building. See Note [Poisoned values].
  Value *create(OpKind kind, std::vector<Value *> operands, std::vector<NamedAttr> attrs = {});
  std::vector<Value *> createMulti(OpKind kind, std::vector<Value *> operands,
                                   std::vector<NamedAttr> attrs, unsigned numResults);
  Value *constant(Tensor t);
  /// A scalar constant with the dtype of `like`.
  Value *scalarLike(const Value *like, double v);
  /// `x` cast to `dtype` (x itself when it already has it).
  Value *castTo(Value *x, DType dtype);

private:
  ImportState &state_;
  const onnx::NodeProto &node_;
  int64_t opset_;
  Location loc_;
  bool failed_ = false;
};

/// A subgraph imported as a region.
struct ImportedRegion {
  std::unique_ptr<Graph> graph;
  /// The values it reads from enclosing scopes, one region input each,
  /// after its own inputs.
  std::vector<Capture> captures;
  /// Per output: the sequence it is, stacked (a list the subgraph returns
  /// is stacked), or nullopt for a tensor. See Note [Sequences].
  std::vector<std::optional<Sequence>> sequenceOutputs;
};

/// Imports `body`, the subgraph attribute `what` of ctx's node, as a
/// region: its inputs typed `inputTypes` (one per input `body` declares),
/// then an input per value it reads from an enclosing scope, `seed`'s
/// names first and in that order (so that two branches can take the same
/// captures). The inputs numbered in `stackedInputs` are stacked sequences
/// (Note [Sequences]). Errors are located at the subgraph's nodes.
FailureOr<ImportedRegion> importRegion(NodeContext &ctx, const onnx::GraphProto &body,
                                       const std::string &what,
                                       std::span<const TensorType> inputTypes,
                                       std::span<const std::string> seed,
                                       std::span<const unsigned> stackedInputs = {});

/// `v` with its axis 0 moved to `axis` (the others keep their order); `v`
/// itself for axis 0.
Value *moveAxis0(NodeContext &ctx, Value *v, int64_t axis);
/// Dim `axis` of `v` as an i64 scalar computed when the graph runs.
Value *dimValue(NodeContext &ctx, Value *v, int64_t axis);

/// The elements of list `s` stacked on a new axis 0 (one shape), with
/// `state`'s builder; nullptr (with an error naming `what`) when they are
/// none or differ in shape.
Value *stackList(ImportState &state, const Sequence &s, const std::string &what);

/// Imports `body`, a subgraph without inputs (an If branch), into ctx's
/// graph itself: its nodes become nodes of the graph around the If, with
/// every converter's folding and shape values; returns its outputs. For a
/// branch an import-time condition selects.
FailureOr<std::vector<Value *>> importInline(NodeContext &ctx, const onnx::GraphProto &body,
                                             const std::string &what);

/// `x` cast to `to` as ONNX's Cast does with `saturate` (opset 19): for an
/// 8-bit float `to`, saturate=0 makes a value that rounds beyond the
/// largest finite one inf (f8e5m2) or NaN (the others) instead of the
/// largest; other casts saturate as Kiln's cast does.
Value *castSaturating(NodeContext &ctx, Value *x, DType to, bool saturate);

/// The bool [rows, cols] mask of a triangle, j - i >= k (`upper`) or
/// j - i <= k, computed in the graph from two iotas, so that the sizes may
/// be symbolic (a causal mask of a sequence length). Trilu and Attention's
/// is_causal use it. nullptr after an error.
Value *triangleMask(NodeContext &ctx, const std::vector<DimExpr> &shape, int64_t k, bool upper);

//===----------------------------------------------------------------------===//
// Converters
//===----------------------------------------------------------------------===//

/// Converts one node; returns one value per ONNX output (nullptr for an
/// output that is not produced, which is an error if something uses it).
using ConvertFn = std::vector<Value *> (*)(NodeContext &);
/// Static support check run on every node before conversion: the reason
/// the node is unsupported (`attribute 'clip' is not supported`) or "".
using CheckFn = std::string (*)(const onnx::NodeProto &, int64_t opset);

/// One row of a family's converter table. See Note [Converter opsets].
struct Converter {
  const char *opType;
  /// The opset from which the ONNX definition this converter implements
  /// holds; it holds up to the next row of the same op type, or kMaxOpset.
  int since;
  ConvertFn convert;
  CheckFn check = nullptr;
};

// Note [Converter opsets]
// A row says from which opset its converter applies; no row repeats the
// last opset. `since` is the op's `since_version` in effect at the lowest
// opset the converter reads (Relu 6, Add 7, Split 11), so a model of an
// older opset whose node has the same definition imports too (Note [Older
// opsets] in OnnxImporter.cpp). A later ONNX version of an op that only
// widens its type list needs no row: a type Kiln lacks is refused at the
// graph input or initializer that carries it. A later version that changes
// meaning (ReduceMax 18: axes become an input) is read by the same
// converter through NodeContext::opset(), or refused by its check with the
// reason. docs/ONNX.md lists, per opset from 18 to kMaxOpset, what changed
// and how Kiln reads it.

/// The converters of each family file.
std::span<const Converter> elementwiseConverters();
std::span<const Converter> nnConverters();
std::span<const Converter> shapeConverters();
std::span<const Converter> maskConverters();
std::span<const Converter> reduceConverters();
std::span<const Converter> lossConverters();
std::span<const Converter> quantizeConverters();
std::span<const Converter> dataMovementConverters();
std::span<const Converter> rnnConverters();
std::span<const Converter> attentionConverters();
std::span<const Converter> indexingConverters();
std::span<const Converter> einsumConverters();
std::span<const Converter> controlFlowConverters();
std::span<const Converter> sequenceConverters();

/// The lowest opset of the default domain Kiln reads as it is (most
/// converters start at or below it; those of ops added later start where
/// the op does: GroupNormalization 18, Gelu 20, Attention 23), and the
/// highest the importer reads. Older models import when each node's
/// converter starts at or below their opset (OnnxImporter.cpp, Note [Older
/// opsets]).
constexpr int kMinOpset = 11;
constexpr int kMaxOpset = 28;

/// Replaces every node of the main graph that calls a model-local function
/// by the function's body (OnnxFunctions.cpp); `opset` is the model's.
LogicalResult inlineLocalFunctions(onnx::ModelProto &model, int64_t opset, DiagnosticEngine &diag,
                                   const std::string &modelName);

/// Helper for converters of one-to-one ops: `kind` applied to input 0.
Value *unary(NodeContext &ctx, OpKind kind, std::vector<NamedAttr> attrs = {});

} // namespace kiln::onnximport
