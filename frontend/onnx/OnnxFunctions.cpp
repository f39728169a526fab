//===- OnnxFunctions.cpp - Inlining model-local ONNX functions --*- C++ -*-===//
//
// A model may define functions (ModelProto.functions: FunctionProto, called
// by a node whose domain and op type name the function); torch.onnx's
// dynamo exporter writes them when its optimizer is off, and other
// exporters for their custom blocks. The importer inlines every call before
// it looks at the graph, so the rest of the import sees plain nodes:
//
//   - the call's inputs and outputs take the places of the function's formal
//     ones (a missing optional input stays missing);
//   - every other value of the body is renamed `CALL/NAME`, and every body
//     node `CALL/NODE`, CALL being the call node's name (`<Fn #i>` when
//     unnamed), so names stay unique and locations say where a node came
//     from;
//   - an attribute that refers to a function attribute (`ref_attr_name`)
//     takes the call's value, else the function's default, else is left out;
//   - calls inside a body are inlined in turn (a function that reaches
//     itself is an error at the outermost call).
//
// A body must use the model's opset of the default domain: the nodes are
// converted at the model's opset.
//
//===----------------------------------------------------------------------===//
#include "frontend/onnx/Internal.h"

#include <algorithm>
#include <map>

#include <google/protobuf/unknown_field_set.h>

namespace kiln::onnximport {
namespace {

using FunctionKey = std::pair<std::string, std::string>; // domain, name

/// FunctionProto.attribute_proto (field 11, ONNX 1.13+: the defaults of the
/// function's attributes). Debian's ONNX 1.12 classes lack the field, so
/// protobuf keeps it among the unknown fields; it is parsed from there.
std::vector<onnx::AttributeProto> attributeDefaults(const onnx::FunctionProto &f) {
  constexpr int kAttributeProtoField = 11;
  std::vector<onnx::AttributeProto> out;
  const google::protobuf::UnknownFieldSet &unknown = f.GetReflection()->GetUnknownFields(f);
  for (int i = 0; i < unknown.field_count(); ++i) {
    const google::protobuf::UnknownField &u = unknown.field(i);
    if (u.number() != kAttributeProtoField ||
        u.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
      continue;
    onnx::AttributeProto a;
    if (a.ParseFromString(u.length_delimited()))
      out.push_back(std::move(a));
  }
  return out;
}

std::string domainOf(const std::string &d) {
  return d == "ai.onnx" ? "" : d;
}

class Inliner {
public:
  Inliner(const onnx::ModelProto &model, int64_t opset, DiagnosticEngine &diag,
          const std::string &modelName)
      : model_(model), opset_(opset), diag_(diag), modelName_(modelName) {
    for (const onnx::FunctionProto &f : model.functions())
      functions_[{domainOf(f.domain()), f.name()}] = &f;
  }

  bool hasFunctions() const { return !functions_.empty(); }

  /// Appends `node` to `out`, inlined when it calls a function.
  /// `stack` holds the functions being inlined, outermost first; `root` is
  /// the outermost call's location (nullptr for a node of the graph).
  LogicalResult emit(const onnx::NodeProto &node,
                     google::protobuf::RepeatedPtrField<onnx::NodeProto> &out,
                     std::vector<const onnx::FunctionProto *> &stack, const Location *root) {
    auto it = functions_.find({domainOf(node.domain()), node.op_type()});
    if (it == functions_.end()) {
      *out.Add() = node;
      return success();
    }
    const onnx::FunctionProto &f = *it->second;
    std::string call = node.name().empty()
                           ? "<" + node.op_type() + " #" + std::to_string(callCount_) + ">"
                           : node.name();
    ++callCount_;
    Location loc = Location::name(call, modelName_);
    if (!root)
      root = &loc;
    if (std::find(stack.begin(), stack.end(), &f) != stack.end()) {
      auto d = diag_.emitError(*root);
      d << "function '" << stack.front()->name() << "' called here reaches itself (";
      for (const onnx::FunctionProto *g : stack)
        d << g->name() << " -> ";
      d << f.name() << ")";
      return failure();
    }
    for (const onnx::OperatorSetIdProto &op : f.opset_import())
      if (domainOf(op.domain()).empty() && op.version() != opset_)
        return diag_.emitError(loc)
               << "function '" << f.name() << "' uses opset " << op.version()
               << " of the default ONNX domain and the model " << opset_
               << "; Kiln imports a function's nodes at the model's opset only";
    if (node.input_size() > f.input_size() || node.output_size() > f.output_size())
      return diag_.emitError(loc) << "the call of function '" << f.name() << "' has "
                                  << node.input_size() << " inputs and " << node.output_size()
                                  << " outputs; the function has " << f.input_size() << " and "
                                  << f.output_size();
    std::map<std::string, std::string> names;
    for (int i = 0; i < f.input_size(); ++i)
      names[f.input(i)] = i < node.input_size() ? node.input(i) : "";
    // An output the call leaves out keeps a body-local name: other body
    // nodes may read it.
    for (int i = 0; i < f.output_size(); ++i)
      names[f.output(i)] = i < node.output_size() && !node.output(i).empty()
                               ? node.output(i)
                               : call + "/" + f.output(i);
    std::map<std::string, const onnx::AttributeProto *> actual, defaults;
    for (const onnx::AttributeProto &a : node.attribute())
      actual[a.name()] = &a;
    std::vector<onnx::AttributeProto> given = attributeDefaults(f);
    for (const onnx::AttributeProto &a : given)
      defaults[a.name()] = &a;
    auto rename = [&](const std::string &n) {
      if (n.empty())
        return n;
      auto found = names.find(n);
      return found != names.end() ? found->second : call + "/" + n;
    };
    for (const onnx::NodeProto &body : f.node()) {
      onnx::NodeProto copy = body;
      copy.set_name(call + "/" + (body.name().empty() ? body.op_type() : body.name()));
      for (std::string &in : *copy.mutable_input())
        in = rename(in);
      for (std::string &o : *copy.mutable_output())
        o = rename(o);
      copy.clear_attribute();
      for (const onnx::AttributeProto &a : body.attribute()) {
        if (a.ref_attr_name().empty()) {
          *copy.add_attribute() = a;
          continue;
        }
        const onnx::AttributeProto *v = nullptr;
        if (auto x = actual.find(a.ref_attr_name()); x != actual.end())
          v = x->second;
        else if (auto d = defaults.find(a.ref_attr_name()); d != defaults.end())
          v = d->second;
        if (!v)
          continue; // neither given nor defaulted: the body op's own default
        onnx::AttributeProto *added = copy.add_attribute();
        *added = *v;
        added->set_name(a.name());
      }
      stack.push_back(&f);
      LogicalResult r = emit(copy, out, stack, root);
      stack.pop_back();
      if (failed(r))
        return failure();
    }
    return success();
  }

private:
  const onnx::ModelProto &model_;
  int64_t opset_;
  DiagnosticEngine &diag_;
  const std::string &modelName_;
  std::map<FunctionKey, const onnx::FunctionProto *> functions_;
  int callCount_ = 0;
};

} // namespace

LogicalResult inlineLocalFunctions(onnx::ModelProto &model, int64_t opset, DiagnosticEngine &diag,
                                   const std::string &modelName) {
  Inliner inliner(model, opset, diag, modelName);
  if (!inliner.hasFunctions())
    return success();
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  std::vector<const onnx::FunctionProto *> stack;
  for (const onnx::NodeProto &n : model.graph().node())
    if (failed(inliner.emit(n, nodes, stack, nullptr)))
      return failure();
  model.mutable_graph()->mutable_node()->Swap(&nodes);
  return success();
}

} // namespace kiln::onnximport
