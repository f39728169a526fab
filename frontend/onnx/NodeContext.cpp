//===- NodeContext.cpp - What a converter sees of its ONNX node -*- C++ -*-===//
//
// Reading a node's inputs and attributes with type checks, and creating Kiln
// nodes with import-time folding.
//
// Note [Import-time folding]
// ImportState::create builds each node with the Builder (so it is typed and
// checked), then, when every operand is a `constant` and every result is
// static with at most OnnxImportOptions::foldElementLimit elements, runs the
// node's reference kernel (evaluateNode) and replaces it by constants. The
// reference kernels are the definition of each op, so folding cannot change
// results. Ops without operands (range, constant_of_shape) fold the same way.
// Folding happens as the graph is built, so a chain of shape computations
// folds step by step and the consumer (Reshape's shape, Expand's shape, ...)
// sees a constant input. A `loop` is not folded (an import should not run
// a model's loop, whose trip count may be anything).
//
//===----------------------------------------------------------------------===//
#include "frontend/onnx/Internal.h"
#include "ir/Interpreter.h"

namespace kiln::onnximport {

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

const onnx::AttributeProto *findAttr(const onnx::NodeProto &node, std::string_view name) {
  for (const auto &a : node.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

int64_t attrIntOr(const onnx::NodeProto &node, std::string_view name, int64_t dflt) {
  const onnx::AttributeProto *a = findAttr(node, name);
  return a && a->has_i() ? a->i() : dflt;
}

std::string attrStringOr(const onnx::NodeProto &node, std::string_view name, std::string dflt) {
  const onnx::AttributeProto *a = findAttr(node, name);
  return a && a->has_s() ? a->s() : dflt;
}

namespace {
const char *attrTypeName(int t) {
  switch (t) {
  case onnx::AttributeProto::FLOAT:
    return "a float";
  case onnx::AttributeProto::INT:
    return "an int";
  case onnx::AttributeProto::STRING:
    return "a string";
  case onnx::AttributeProto::TENSOR:
    return "a tensor";
  case onnx::AttributeProto::GRAPH:
    return "a graph";
  case onnx::AttributeProto::FLOATS:
    return "a list of floats";
  case onnx::AttributeProto::INTS:
    return "a list of ints";
  case onnx::AttributeProto::STRINGS:
    return "a list of strings";
  default:
    return "an unsupported kind";
  }
}

/// True when `a` has type `want` (or no type and the matching field).
bool hasType(const onnx::AttributeProto &a, onnx::AttributeProto::AttributeType want) {
  if (a.type() == want)
    return true;
  if (a.type() != onnx::AttributeProto::UNDEFINED)
    return false;
  switch (want) {
  case onnx::AttributeProto::INT:
    return a.has_i();
  case onnx::AttributeProto::FLOAT:
    return a.has_f();
  case onnx::AttributeProto::STRING:
    return a.has_s();
  case onnx::AttributeProto::TENSOR:
    return a.has_t();
  case onnx::AttributeProto::INTS:
    return a.ints_size() > 0;
  case onnx::AttributeProto::FLOATS:
    return a.floats_size() > 0;
  case onnx::AttributeProto::STRINGS:
    return a.strings_size() > 0;
  default:
    return false;
  }
}
} // namespace

InFlightDiagnostic NodeContext::emitError() {
  failed_ = true;
  InFlightDiagnostic d = state_.diag.emitError(loc_);
  d << opType() << ": ";
  return d;
}

#define KILN_ATTR_GETTER(Ret, Name, Type, Expr)                                                    \
  Ret NodeContext::Name(std::string_view name, Ret dflt) {                                         \
    const onnx::AttributeProto *a = findAttr(node_, name);                                         \
    if (!a)                                                                                        \
      return dflt;                                                                                 \
    if (!hasType(*a, onnx::AttributeProto::Type)) {                                                \
      emitError() << "attribute '" << name << "' must be "                                         \
                  << attrTypeName(onnx::AttributeProto::Type) << ", got "                          \
                  << attrTypeName(a->type());                                                      \
      return dflt;                                                                                 \
    }                                                                                              \
    return Expr;                                                                                   \
  }

KILN_ATTR_GETTER(int64_t, attrInt, INT, a->i())
KILN_ATTR_GETTER(std::string, attrString, STRING, a->s())
KILN_ATTR_GETTER(Ints, attrInts, INTS, Ints(a->ints().begin(), a->ints().end()))
#undef KILN_ATTR_GETTER

double NodeContext::attrFloat(std::string_view name, double dflt) {
  const onnx::AttributeProto *a = findAttr(node_, name);
  if (!a)
    return dflt;
  if (hasType(*a, onnx::AttributeProto::FLOAT))
    return a->f();
  if (hasType(*a, onnx::AttributeProto::INT))
    return static_cast<double>(a->i());
  emitError() << "attribute '" << name << "' must be a float, got " << attrTypeName(a->type());
  return dflt;
}

Floats NodeContext::attrFloats(std::string_view name, Floats dflt) {
  const onnx::AttributeProto *a = findAttr(node_, name);
  if (!a)
    return dflt;
  if (hasType(*a, onnx::AttributeProto::FLOATS))
    return Floats(a->floats().begin(), a->floats().end());
  if (hasType(*a, onnx::AttributeProto::INTS))
    return Floats(a->ints().begin(), a->ints().end());
  emitError() << "attribute '" << name << "' must be a list of floats, got "
              << attrTypeName(a->type());
  return dflt;
}

std::vector<std::string> NodeContext::attrStrings(std::string_view name) {
  const onnx::AttributeProto *a = findAttr(node_, name);
  if (!a)
    return {};
  if (!hasType(*a, onnx::AttributeProto::STRINGS)) {
    emitError() << "attribute '" << name << "' must be a list of strings, got "
                << attrTypeName(a->type());
    return {};
  }
  return std::vector<std::string>(a->strings().begin(), a->strings().end());
}

Tensor NodeContext::attrTensor(std::string_view name) {
  const onnx::AttributeProto *a = findAttr(node_, name);
  if (!a)
    return Tensor();
  if (!hasType(*a, onnx::AttributeProto::TENSOR)) {
    emitError() << "attribute '" << name << "' must be a tensor, got " << attrTypeName(a->type());
    return Tensor();
  }
  auto t = tensorFromProto(a->t(), state_.baseDir,
                           opType() + ": attribute '" + std::string(name) + "'", loc_, state_.diag);
  if (t.failed()) {
    failed_ = true;
    return Tensor();
  }
  return t.take();
}

//===----------------------------------------------------------------------===//
// Inputs and outputs
//===----------------------------------------------------------------------===//

const Tensor *constantOf(const Value *v) {
  if (!v || !v->definingNode() || v->definingNode()->kind() != OpKind::Constant)
    return nullptr;
  return &ConstantOp(*v->definingNode()).value();
}

bool NodeContext::hasInput(size_t i) const {
  return i < numInputs() && !node_.input(static_cast<int>(i)).empty();
}

Value *NodeContext::optionalInput(size_t i) {
  if (!hasInput(i))
    return nullptr;
  Value *v = state_.lookup(node_.input(static_cast<int>(i)), loc_);
  if (!v) {
    failed_ = true;
    return nullptr;
  }
  if (state_.sequences.count(v)) {
    emitError() << "input " << i << " ('" << node_.input(static_cast<int>(i))
                << "') is a sequence where the op takes a tensor (Kiln reads sequences with "
                   "the sequence ops, Identity and a Loop that appends to one)";
    return nullptr;
  }
  return v;
}

bool NodeContext::isSequenceInput(size_t i) {
  if (!hasInput(i))
    return false;
  Value *v = state_.lookup(node_.input(static_cast<int>(i)), loc_);
  if (!v)
    failed_ = true;
  return v && state_.sequences.count(v);
}

const Sequence *NodeContext::sequenceInput(size_t i, const char *what) {
  if (!hasInput(i)) {
    emitError() << "missing input " << i << " (" << what << ")";
    return nullptr;
  }
  Value *v = state_.lookup(node_.input(static_cast<int>(i)), loc_);
  if (!v) {
    failed_ = true;
    return nullptr;
  }
  auto it = state_.sequences.find(v);
  if (it == state_.sequences.end()) {
    emitError() << "input " << i << " (" << what << ", '" << node_.input(static_cast<int>(i))
                << "') must be a sequence, got a tensor " << v->type().str();
    return nullptr;
  }
  return &it->second;
}

Value *NodeContext::sequence(Sequence s) {
  Value *v = state_.sequencePlaceholder(std::move(s));
  if (!v)
    failed_ = true;
  return v;
}

Value *ImportState::sequencePlaceholder(Sequence s) {
  Value *v = builder.constant(Tensor::zeros(s.dtype, {0}));
  if (v)
    sequences[v] = std::move(s);
  return v;
}

Value *NodeContext::input(size_t i, const char *what) {
  if (!hasInput(i)) {
    auto d = emitError();
    d << "missing input " << i;
    if (*what)
      d << " (" << what << ")";
    return nullptr;
  }
  return optionalInput(i);
}

const Tensor *NodeContext::constantInput(size_t i, const char *what) {
  Value *v = input(i, what);
  if (!v)
    return nullptr;
  const Tensor *t = constantOf(v);
  if (!t)
    emitError() << "input " << i << " (" << what << ", '" << node_.input(static_cast<int>(i))
                << "') must be known at import time, but it is computed from the graph's inputs";
  return t;
}

std::optional<Ints> NodeContext::intsInput(size_t i, const char *what) {
  const Tensor *t = constantInput(i, what);
  if (!t)
    return std::nullopt;
  if (!isInteger(t->dtype()) || t->rank() > 1) {
    emitError() << "input " << i << " (" << what
                << ") must be an integer tensor of rank 0 or 1, got " << t->str();
    return std::nullopt;
  }
  return t->toInts();
}

std::optional<double> NodeContext::scalarInput(size_t i, const char *what) {
  const Tensor *t = constantInput(i, what);
  if (!t)
    return std::nullopt;
  if (t->numel() != 1) {
    emitError() << "input " << i << " (" << what << ") must hold one value, got " << t->str();
    return std::nullopt;
  }
  return t->getDouble(0);
}

std::optional<SymInts> NodeContext::shapeValueOf(const Value *v) const {
  if (const Tensor *t = constantOf(v)) {
    if (!isInteger(t->dtype()) || t->rank() > 1)
      return std::nullopt;
    SymInts out;
    for (int64_t x : t->toInts())
      out.push_back(SymInt::of(x));
    return out;
  }
  auto it = state_.shapeValues.find(v);
  if (it == state_.shapeValues.end())
    return std::nullopt;
  return it->second;
}

bool NodeContext::normalizeAxes(Ints &axes, int64_t rank) {
  Ints given = axes;
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t &a : axes) {
    a = a < 0 ? a + rank : a;
    if (a < 0 || a >= rank || seen[static_cast<size_t>(a)]) {
      emitError() << "axes " << given << " is out of range or repeats a dim for rank " << rank;
      return false;
    }
    seen[static_cast<size_t>(a)] = true;
  }
  return true;
}

std::optional<int64_t> NodeContext::staticDim(const Value *v, int64_t i) {
  const Dim &d = v->type().shape[static_cast<size_t>(i)];
  if (!d.isStatic()) {
    emitError() << "needs a static dim " << i << ", got " << v->type().str();
    return std::nullopt;
  }
  return d.size();
}

void NodeContext::setShapeValue(const Value *v, SymInts entries) {
  if (v && !constantOf(v))
    state_.shapeValues[v] = std::move(entries);
}

std::optional<SymInts> NodeContext::shapeInput(size_t i, const char *what) {
  Value *v = input(i, what);
  if (!v)
    return std::nullopt;
  if (auto s = shapeValueOf(v))
    return s;
  if (const Tensor *t = constantOf(v)) {
    emitError() << "input " << i << " (" << what
                << ") must be an integer tensor of rank 0 or 1, got " << t->str();
    return std::nullopt;
  }
  emitError() << "input " << i << " (" << what << ", '" << node_.input(static_cast<int>(i))
              << "') must be known at import time, but it is computed from the graph's inputs";
  return std::nullopt;
}

bool NodeContext::isOutputUsed(size_t i) const {
  if (i >= numOutputs())
    return false;
  const std::string &name = node_.output(static_cast<int>(i));
  return !name.empty() && state_.useCounts.count(name) != 0;
}

//===----------------------------------------------------------------------===//
// Building
//===----------------------------------------------------------------------===//

Value *ImportState::lookup(const std::string &name, const Location &loc) {
  auto it = values.find(name);
  if (it != values.end())
    return it->second;
  auto init = initializers.find(name);
  if (init == initializers.end() && parent) {
    Value *outer = parent->lookup(name, loc);
    if (!outer)
      return nullptr;
    Value *inner = nullptr;
    if (auto seq = parent->sequences.find(outer); seq != parent->sequences.end()) {
      // Note [Sequences]: a stacked sequence is a tensor to capture.
      if (!seq->second.stacked) {
        diag.emitError(loc) << "a subgraph reads '" << name
                            << "', a sequence of an enclosing scope, which Kiln imports only "
                               "as a value a Loop carries";
        return nullptr;
      }
      Value *stacked = graph.addInput(seq->second.stacked->type(), name);
      captures.push_back(Capture{name, seq->second.stacked, stacked});
      inner = sequencePlaceholder(Sequence::stackedIn(stacked));
      if (!inner)
        return nullptr;
    } else if (const Tensor *t = constantOf(outer)) {
      inner = builder.constant(*t, name);
      if (!inner)
        return nullptr;
    } else {
      inner = graph.addInput(outer->type(), name);
      captures.push_back(Capture{name, outer, inner});
    }
    inner->setName(name);
    if (auto sv = parent->shapeValues.find(outer); sv != parent->shapeValues.end())
      shapeValues[inner] = sv->second;
    values[name] = inner;
    return inner;
  }
  if (init == initializers.end()) {
    diag.emitError(loc) << "value '" << name << "' is not defined";
    return nullptr;
  }
  Location initLoc = Location::name(name, modelName);
  auto t = tensorFromProto(*init->second, baseDir, "initializer '" + name + "'", initLoc, diag);
  if (failed(t))
    return nullptr;
  Location saved = builder.loc();
  builder.setLoc(initLoc);
  Value *c = builder.constant(t.take(), name);
  builder.setLoc(saved);
  if (!c)
    return nullptr;
  c->setName(name);
  // The tensor holds the bytes now; the protobuf's copy goes (a model's
  // weights are then in memory once, not twice, while the import runs).
  if (releaseInitializerBytes)
    std::string().swap(*const_cast<onnx::TensorProto *>(init->second)->mutable_raw_data());
  initializers.erase(init);
  values[name] = c;
  return c;
}

FailureOr<std::vector<Value *>> ImportState::create(OpKind kind, std::vector<Value *> operands,
                                                    std::vector<NamedAttr> attrs,
                                                    unsigned numResults) {
  auto n = builder.create(kind, operands, std::move(attrs), numResults);
  if (failed(n))
    return failure();
  Node *node = *n;
  std::vector<Value *> results;
  for (unsigned i = 0; i < node->numResults(); ++i)
    results.push_back(node->result(i));
  // See Note [Import-time folding].
  // A loop is never folded here: its trip count is the model's to bound.
  if (kind == OpKind::Constant || kind == OpKind::Loop || opts.foldElementLimit <= 0)
    return results;
  std::vector<Tensor> inputs;
  for (Value *v : operands) {
    const Tensor *t = constantOf(v);
    if (!t)
      return results;
    inputs.push_back(*t);
  }
  for (Value *r : results)
    if (!r->type().isStatic() || numElements(staticSizes(r->type().shape)) > opts.foldElementLimit)
      return results;
  auto outs = evaluateNode(*node, inputs, diag);
  if (failed(outs))
    return failure();
  std::vector<Value *> folded;
  for (size_t i = 0; i < results.size(); ++i) {
    Value *c = builder.constant((*outs)[i]);
    if (!c)
      return failure();
    results[i]->replaceAllUsesWith(c);
    folded.push_back(c);
  }
  graph.erase(node);
  return folded;
}

std::vector<Value *> NodeContext::createMulti(OpKind kind, std::vector<Value *> operands,
                                              std::vector<NamedAttr> attrs, unsigned numResults) {
  std::vector<Value *> none(numResults, nullptr);
  for (Value *v : operands)
    if (!v) { // See Note [Poisoned values].
      failed_ = true;
      return none;
    }
  auto r = state_.create(kind, std::move(operands), std::move(attrs), numResults);
  if (r.failed()) {
    failed_ = true;
    return none;
  }
  return r.take();
}

Value *NodeContext::create(OpKind kind, std::vector<Value *> operands,
                           std::vector<NamedAttr> attrs) {
  return createMulti(kind, std::move(operands), std::move(attrs), 1)[0];
}

Value *NodeContext::constant(Tensor t) {
  Value *v = state_.builder.constant(std::move(t));
  if (!v)
    failed_ = true;
  return v;
}

Value *NodeContext::scalarLike(const Value *like, double v) {
  if (!like) {
    failed_ = true;
    return nullptr;
  }
  return constant(Tensor::scalar(like->type().dtype, v));
}

Value *NodeContext::castTo(Value *x, DType dtype) {
  if (x && x->type().dtype == dtype)
    return x;
  return create(OpKind::Cast, {x}, {{"to", dtype}});
}

Value *unary(NodeContext &ctx, OpKind kind, std::vector<NamedAttr> attrs) {
  return ctx.create(kind, {ctx.input(0, "X")}, std::move(attrs));
}

} // namespace kiln::onnximport
