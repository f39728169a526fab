//===- ReferenceStep.cpp - A node run on its reference kernel -------------===//
#include "runtime/reference/ReferenceStep.h"

#include "ir/Diagnostics.h"
#include "ir/Graph.h"
#include "ir/Interpreter.h"
#include "ir/Parser.h"
#include "ir/Printer.h"

#include <cstring>

namespace kiln::runtime {
namespace {

/// A non-owning shared pointer, for borrowing runtime buffers as Tensors.
std::shared_ptr<const void> unowned(const void *p) {
  return std::shared_ptr<const void>(p, [](const void *) {});
}

/// The name of the printed one-node graph.
constexpr const char *kGraphName = "reference_step";

} // namespace

ReferenceStep::ReferenceStep(const Node *node, std::shared_ptr<const void> owner)
    : node_(node), owner_(std::move(owner)) {}

std::string ReferenceStep::describe() const {
  std::string name = node_->numResults() ? node_->result(0)->name() : std::string();
  return "reference " + std::string(node_->mnemonic()) + " %" + name;
}

Status ReferenceStep::run(std::span<void *const> buffers, const StepContext &) const {
  std::vector<Tensor> operands;
  for (unsigned i = 0; i < node_->numOperands(); ++i) {
    const TensorType &t = node_->operand(i)->type();
    operands.push_back(
        Tensor::borrow(t.dtype, staticSizes(t.shape), unowned(buffers[i]), buffers[i]));
  }
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collect(diag);
  auto results = evaluateNode(*node_, operands, diag);
  if (failed(results))
    return Status::failure(collect.str());
  for (unsigned r = 0; r < node_->numResults(); ++r) {
    const Tensor &t = (*results)[r];
    const TensorType &want = node_->result(r)->type();
    if (t.dtype() != want.dtype || t.shape() != staticSizes(want.shape))
      return Status::failure("reference kernel returned " + t.str() + ", expected " + want.str());
    std::memcpy(buffers[node_->numOperands() + r], t.rawData(), t.byteSize());
  }
  return Status::success();
}

bool ReferenceStep::save(SavedStep &out, std::string &why) const {
  // graph @reference_step(%0: T0, ...) -> (R0, ...) { node; return }
  Graph g(kGraphName);
  std::vector<Value *> operands;
  for (unsigned i = 0; i < node_->numOperands(); ++i) {
    const TensorType &t = node_->operand(i)->type();
    if (!t.isStatic()) {
      why = "step '" + describe() + "' has an operand of dynamic shape " + t.str();
      return false;
    }
    operands.push_back(g.addInput(t, "in" + std::to_string(i)));
  }
  std::vector<TensorType> resultTypes;
  for (unsigned r = 0; r < node_->numResults(); ++r)
    resultTypes.push_back(node_->result(r)->type());
  std::vector<Attribute> attrs(node_->attrs().begin(), node_->attrs().end());
  Node *copy = g.createNode(node_->info(), operands, resultTypes, attrs, Location());
  std::vector<Value *> outs;
  for (unsigned r = 0; r < copy->numResults(); ++r)
    outs.push_back(copy->result(r));
  g.setOutputs(outs);
  out.kind = kKind;
  out.payload = printGraph(g);
  return true;
}

std::shared_ptr<const ReferenceStep> ReferenceStep::load(std::string_view payload,
                                                         std::span<const size_t> bufferBytes,
                                                         std::string &why) {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collect(diag);
  ParseOptions opts;
  opts.filename = "<artifact reference step>";
  auto module = parseModule(payload, diag, opts);
  if (failed(module)) {
    why = "damaged reference step: " + collect.str();
    return nullptr;
  }
  std::shared_ptr<Module> owner(std::move(*module));
  const Graph *g = owner->graphs().size() == 1 ? owner->graphs().front().get() : nullptr;
  if (!g || g->name() != kGraphName || g->numNodes() != 1) {
    why = "damaged reference step: not one graph @" + std::string(kGraphName) + " of one node";
    return nullptr;
  }
  const Node *node = g->front();
  if (node->numOperands() + node->numResults() != bufferBytes.size()) {
    why = "damaged reference step: " + std::to_string(node->numOperands() + node->numResults()) +
          " operands and results for " + std::to_string(bufferBytes.size()) + " buffers";
    return nullptr;
  }
  for (size_t i = 0; i < bufferBytes.size(); ++i) {
    const Value *v = i < node->numOperands()
                         ? node->operand(static_cast<unsigned>(i))
                         : node->result(static_cast<unsigned>(i - node->numOperands()));
    if (!v->type().isStatic() || static_cast<size_t>(numElements(staticSizes(v->type().shape))) *
                                         dtypeSize(v->type().dtype) !=
                                     bufferBytes[i]) {
      why = "damaged reference step: " + v->type().str() + " does not fit its buffer of " +
            std::to_string(bufferBytes[i]) + " bytes";
      return nullptr;
    }
  }
  return std::make_shared<ReferenceStep>(node, std::move(owner));
}

} // namespace kiln::runtime
