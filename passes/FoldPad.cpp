//===- FoldPad.cpp - Fold a zero pad into the conv or pool reading it -*- C++ -*-===//
//
// PyTorch writes some paddings as a separate Pad before a conv or pool
// (torchvision's Inception: `avg_pool2d(x, 3, stride=1, padding=1)` exports
// as Pad + AveragePool; `F.pad` before a conv). A pad is a copy of the whole
// tensor; a conv or pool pads for free while it reads. So:
//
//   conv(pad(x, p), w, b) {pads = q}          -> conv(x, w, b) {pads = q + p}
//   avg_pool(pad(x, p)) {pads = 0}            -> avg_pool(x) {pads = p,
//                                                 count_include_pad = true}
//   avg_pool(pad(x, p)) {pads = q, count_include_pad = true}
//                                             -> avg_pool(x) {pads = q + p, ...}
//   max_pool(pad(x, p, value = -inf)) {pads = q}
//                                             -> max_pool(x) {pads = q + p}
//
// Conditions (any other pad is left as it is):
//   - the pad is mode "constant" with value +0.0 (a conv or an averaging
//     pool pads with zeros; -0.0 could change the sign of a zero result)
//     or, for max_pool, -inf;
//   - it pads only the spatial dims (not batch or channels), by amounts
//     >= 0 (a negative pad crops);
//   - a pool has ceil_mode off (with it, a last window starting in the end
//     padding is dropped, so moving the pad's end into the pool's pads
//     could drop a window the padded input had) and no dilation (a dilated
//     window could then skip every input element);
//   - an avg_pool has either no pads of its own or count_include_pad (its
//     own padded zeros counted like the pad's);
//   - a pool's new pads stay below its kernel extent in each dim (ONNX's
//     rule: no undilated window lies entirely in the padding);
//   - the pad's result is the conv's or pool's data operand (operand 0);
//   - it pads something (a pad of zeros everywhere is canonicalize's).
// The window's result shape is unchanged: the same padded extent, read
// through the attribute instead of a copy. A pad with other users stays
// for them; one that is left without users is erased.
//
// Requires: a verified graph. Establishes: no foldable pad feeds a conv or
// pool.
//
//   %p = pad(%x) {pads = [0, 0, 1, 1, 0, 0, 1, 1]} : f32[1,8,7,7]   // before
//   %y = avg_pool(%p) {kernel = [3, 3]} : f32[1,8,5,5]
//
//   %y = avg_pool(%x) {kernel = [3, 3], pads = [1, 1, 1, 1],        // after
//                      count_include_pad = true} : f32[1,8,5,5]
//
//===----------------------------------------------------------------------===//
#define DEBUG_TYPE "fold-pad"

#include "passes/Internal.h"
#include "passes/PassManager.h"
#include "passes/Passes.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kiln {
namespace {

class FoldPadPass : public Pass {
public:
  FoldPadPass() : Pass(kFoldPadSpec.name, kFoldPadSpec.description) {}

  PassResult run(Graph &g, PassContext &) override {
    bool changed = false;
    for (Node *n : g.nodeList()) {
      if (n->numOperands() == 0)
        continue;
      Node *pad = n->operand(0)->definingNode();
      if (!pad || pad->kind() != OpKind::Pad || !fold(*n, *pad))
        continue;
      passes::eraseDeadProducers({pad->result()});
      ++numFolded;
      changed = true;
    }
    return PassResult::success(changed);
  }

private:
  /// Pads `window` (a conv or pool reading `pad`'s result) itself, when
  /// the conditions above hold; false leaves both unchanged.
  static bool fold(Node &window, Node &pad) {
    const OpKind kind = window.kind();
    if (kind != OpKind::Conv && kind != OpKind::AvgPool && kind != OpKind::MaxPool)
      return false;
    PadOp p(pad);
    const double zero = kind == OpKind::MaxPool ? -std::numeric_limits<double>::infinity() : 0.0;
    if (p.mode() != "constant" || p.value() != zero ||
        std::signbit(p.value()) != std::signbit(zero))
      return false;
    const TensorType &in = pad.operand(0)->type();
    const int64_t rank = in.rank();
    const std::vector<int64_t> &padPads = p.pads();
    if (rank < 3 || static_cast<int64_t>(padPads.size()) != 2 * rank)
      return false;
    const int64_t spatial = rank - 2;
    if (std::all_of(padPads.begin(), padPads.end(), [](int64_t x) { return x == 0; }))
      return false; // a copy: canonicalize drops it
    for (int64_t d = 0; d < rank; ++d) {
      const int64_t begin = padPads[static_cast<size_t>(d)];
      const int64_t end = padPads[static_cast<size_t>(rank + d)];
      if (begin < 0 || end < 0 || (d < 2 && (begin != 0 || end != 0)))
        return false;
    }
    // The window's own pads, [begin per spatial dim..., end per spatial dim...].
    std::vector<int64_t> own;
    std::vector<int64_t> kernel;
    unsigned padsIndex = 0;
    switch (kind) {
    case OpKind::Conv:
      own = ConvOp(window).pads();
      padsIndex = ConvOp::pads_index;
      break;
    case OpKind::AvgPool: {
      AvgPoolOp op(window);
      own = op.pads();
      kernel = op.kernel();
      padsIndex = AvgPoolOp::pads_index;
      const bool ownPads = std::any_of(own.begin(), own.end(), [](int64_t x) { return x != 0; });
      if (op.ceil_mode() || !undilated(op.dilations()) || (ownPads && !op.count_include_pad()))
        return false;
      break;
    }
    default: {
      MaxPoolOp op(window);
      own = op.pads();
      kernel = op.kernel();
      padsIndex = MaxPoolOp::pads_index;
      if (op.ceil_mode() || !undilated(op.dilations()))
        return false;
      break;
    }
    }
    if (own.empty())
      own.assign(static_cast<size_t>(2 * spatial), 0);
    if (static_cast<int64_t>(own.size()) != 2 * spatial)
      return false;
    std::vector<int64_t> pads(own.size());
    for (int64_t s = 0; s < spatial; ++s)
      for (int64_t side = 0; side < 2; ++side) {
        const size_t at = static_cast<size_t>(side * spatial + s);
        pads[at] = own[at] + padPads[static_cast<size_t>(side * rank + 2 + s)];
        if (!kernel.empty() && (static_cast<int64_t>(kernel.size()) != spatial ||
                                pads[at] >= kernel[static_cast<size_t>(s)]))
          return false;
      }
    window.setOperand(0, pad.operand(0));
    window.setAttr(padsIndex, pads);
    if (kind == OpKind::AvgPool)
      window.setAttr(AvgPoolOp::count_include_pad_index, true);
    return true;
  }

  static bool undilated(const std::vector<int64_t> &dilations) {
    return std::all_of(dilations.begin(), dilations.end(), [](int64_t d) { return d == 1; });
  }

  Statistic numFolded{this, "num-folded", "Pads folded into the conv or pool reading them"};
};

} // namespace

std::unique_ptr<Pass> createFoldPadPass() {
  return std::make_unique<FoldPadPass>();
}

} // namespace kiln
