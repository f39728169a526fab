//===- RegionStep.cpp - An if or loop whose regions are compiled ----------===//
#include "runtime/reference/RegionStep.h"

#include "ir/Graph.h"
#include "runtime/reference/ReferenceStep.h"

#include <cstring>

namespace kiln::runtime {
namespace {

/// A HostTensor over the step buffer `data` of `v`'s static type.
HostTensor borrowBuffer(const Value *v, void *data) {
  const TensorType &t = v->type();
  return HostTensor{t.dtype, staticSizes(t.shape), std::shared_ptr<void>(data, [](void *) {}),
                    data};
}

bool truth(const void *data) {
  return *static_cast<const uint8_t *>(data) != 0;
}

} // namespace

RegionStep::RegionStep(const Node *node, std::shared_ptr<const void> owner,
                       std::vector<std::shared_ptr<const Executable>> regions)
    : node_(node), owner_(std::move(owner)), regions_(std::move(regions)) {}

std::string RegionStep::describe() const {
  std::string name = node_->numResults() ? node_->result(0)->name() : std::string();
  return "compiled " + std::string(node_->mnemonic()) + " %" + name;
}

uint64_t RegionStep::constantBytes() const {
  uint64_t bytes = 0;
  for (const auto &r : regions_)
    bytes += r->constantBytes();
  return bytes;
}

bool RegionStep::save(SavedStep &out, std::string &why) const {
  return ReferenceStep(node_, owner_).save(out, why);
}

Status RegionStep::run(std::span<void *const> buffers, const StepContext &ctx) const {
  RunOptions opts;
  opts.threads = ctx.threads;
  return node_->kind() == OpKind::If ? runIf(buffers, opts) : runLoop(buffers, opts);
}

Status RegionStep::runIf(std::span<void *const> buffers, const RunOptions &opts) const {
  const unsigned numOps = node_->numOperands();
  const Executable &branch = *regions_[truth(buffers[0]) ? 0 : 1];
  std::vector<HostTensor> inputs;
  for (unsigned i = 1; i < numOps; ++i)
    inputs.push_back(borrowBuffer(node_->operand(i), buffers[i]));
  std::vector<HostTensor> outs;
  if (Status st = branch.run(inputs, outs, opts); !st.ok())
    return Status::failure(describe() + ": " + st.error);
  for (unsigned r = 0; r < node_->numResults(); ++r)
    std::memcpy(buffers[numOps + r], outs[r].data, outs[r].byteSize());
  return Status::success();
}

Status RegionStep::runLoop(std::span<void *const> buffers, const RunOptions &opts) const {
  const unsigned numOps = node_->numOperands();
  const unsigned numCarried = static_cast<unsigned>(LoopOp(*node_).num_carried());
  const unsigned numScans = node_->numResults() - numCarried;
  const Executable &body = *regions_[0];
  const int64_t trip = *static_cast<const int64_t *>(buffers[0]);
  bool cond = truth(buffers[1]);
  const Graph &region = *LoopOp(*node_).body();
  std::vector<HostTensor> inputs;
  inputs.push_back(HostTensor::allocate(DType::I64, staticSizes(region.input(0)->type().shape)));
  inputs.push_back(HostTensor::allocate(DType::Bool, staticSizes(region.input(1)->type().shape)));
  *static_cast<uint8_t *>(inputs[1].data) = 1;
  for (unsigned i = 2; i < numOps; ++i)
    inputs.push_back(borrowBuffer(node_->operand(i), buffers[i]));
  // A scan result's type is static here (the compiler makes a region step
  // of no other scanning loop): the loop must run exactly its rows.
  std::vector<int64_t> rows(numScans);
  for (unsigned s = 0; s < numScans; ++s)
    rows[s] = node_->result(numCarried + s)->type().shape[0].size();
  // One output vector: run() keeps the previous outputs (this iteration's
  // inputs) alive while it runs, then recycles their block.
  std::vector<HostTensor> outs;
  int64_t i = 0;
  for (; i < trip && cond; ++i) {
    *static_cast<int64_t *>(inputs[0].data) = i;
    if (Status st = body.run(inputs, outs, opts); !st.ok())
      return Status::failure(describe() + ": iteration " + std::to_string(i) + ": " + st.error);
    cond = truth(outs[0].data);
    for (unsigned c = 0; c < numCarried; ++c)
      inputs[2 + c] = outs[1 + c];
    for (unsigned s = 0; s < numScans; ++s) {
      const HostTensor &row = outs[1 + numCarried + s];
      if (i >= rows[s])
        return Status::failure(describe() + ": iteration " + std::to_string(i) + " is past the " +
                               std::to_string(rows[s]) + " rows of scan result " +
                               std::to_string(s));
      std::memcpy(static_cast<char *>(buffers[numOps + numCarried + s]) + i * row.byteSize(),
                  row.data, row.byteSize());
    }
  }
  for (unsigned s = 0; s < numScans; ++s)
    if (i < rows[s])
      return Status::failure(describe() + ": ran " + std::to_string(i) +
                             " iteration(s) but scan result " + std::to_string(s) + " has " +
                             std::to_string(rows[s]) + " rows");
  for (unsigned c = 0; c < numCarried; ++c)
    std::memmove(buffers[numOps + c], inputs[2 + c].data, inputs[2 + c].byteSize());
  return Status::success();
}

} // namespace kiln::runtime
