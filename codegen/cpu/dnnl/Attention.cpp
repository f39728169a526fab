//===- Attention.cpp - An attention group as one oneDNN step --------------===//
//
// Note [Attention calls] in codegen/Fusion.cpp plans q k^T (scaled,
// masked), softmax and the weighted sum as one library group; this builds
// its step (runtime/dnnl/AttentionStep.h) from two ordinary oneDNN calls,
// the scores matmul with the whole epilogue as post-ops and the weighted
// sum, joined by oneDNN's softmax over the scores' last axis, in place in
// the scores' buffer: a second result of the step that no other step
// reads, so the memory planner gives it this step's lifetime in the arena.
//
//===----------------------------------------------------------------------===//
#include "codegen/cpu/dnnl/Internal.h"
#include "codegen/cpu/dnnl/OneDnnSteps.h"
#include "runtime/dnnl/AttentionStep.h"

#include <algorithm>

namespace kiln::codegen::cpu {

bool isAttentionGroup(std::span<const Node *const> nodes) {
  const size_t n = nodes.size();
  return n >= 3 && nodes[0]->kind() == OpKind::MatMul && nodes[n - 2]->kind() == OpKind::Softmax &&
         nodes[n - 1]->kind() == OpKind::MatMul &&
         nodes[n - 1]->operand(0) == nodes[n - 2]->result();
}

FailureOr<OneDnnCall> buildAttentionCall(std::span<const Node *const> nodes,
                                         const OneDnnOptions &options, std::string &why) {
  if (!isAttentionGroup(nodes)) {
    why = "not an attention group";
    return failure();
  }
  const size_t n = nodes.size();
  const Value *scores = nodes[n - 3]->result(), *probs = nodes[n - 2]->result();
  auto first = buildOneDnnCall(nodes.first(n - 2), options, why);
  if (failed(first))
    return failure();
  if (first->numNodes != n - 2) {
    why = "'" + std::string(nodes[first->numNodes]->mnemonic()) +
          "' of the scores' epilogue is not a oneDNN post-op";
    return failure();
  }
  auto second = buildOneDnnCall(nodes.last(1), options, why);
  if (failed(second))
    return failure();
  if (second->numNodes != 1 || first->results.size() != 1 || first->results[0] != scores) {
    why = "the scores or the weighted sum are not one oneDNN call each";
    return failure();
  }
  // The step's buffers: the first call's operands, the second's other than
  // the softmax, then the result and the scores (which the softmax
  // overwrites with the probabilities).
  OneDnnCall call;
  call.operands = first->operands;
  std::vector<int32_t> firstArgs, secondArgs;
  for (size_t i = 0; i < first->operands.size(); ++i)
    firstArgs.push_back(static_cast<int32_t>(i));
  std::vector<size_t> probsAt;
  for (const Value *v : second->operands) {
    if (v == probs) {
      probsAt.push_back(secondArgs.size());
      secondArgs.push_back(-1); // the scores buffer, numbered below
      continue;
    }
    secondArgs.push_back(static_cast<int32_t>(call.operands.size()));
    call.operands.push_back(v);
  }
  const Value *result = nodes[n - 1]->result();
  const auto resultAt = static_cast<int32_t>(call.operands.size());
  const int32_t scoresAt = resultAt + 1;
  secondArgs.push_back(resultAt);
  firstArgs.push_back(scoresAt);
  for (size_t at : probsAt)
    secondArgs[at] = scoresAt;
  call.results = {result, scores};
  try {
    runtime::onednn::ScopedThreads threads(options.threads);
    auto step = std::make_shared<runtime::onednn::AttentionStep>(
        "onednn attention %" + result->name(), first->step, std::move(firstArgs), second->step,
        std::move(secondArgs), onednn::sizesOf(scores), scoresAt);
    call.detail = "attention: scores " + first->detail + "; softmax " + step->softmaxImpl() +
                  "; weighted sum " + second->detail;
    call.step = std::move(step);
  } catch (const dnnl::error &e) {
    why = std::string("oneDNN refuses the attention's softmax: ") + e.what();
    return failure();
  }
  call.numNodes = n;
  call.measurement = first->measurement;
  return call;
}

} // namespace kiln::codegen::cpu
