//===- SizedByRun.h - Ops whose result sizes their run decides --*- C++ -*-===//
//
// One question, asked by the builder (which fills no `?` such a result
// records) and by codegen/Staged.cpp (which compiles around such a node).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Ops.h"

#include <cstddef>

namespace kiln {

/// Whether results of an `info` node with `numOperands` operands may be
/// sized by their run: the ValueDependentShape ops, top_k only with its k
/// operand (with the attribute k its sizes are known).
inline bool sizedByRun(const OpInfo &info, size_t numOperands) {
  return info.hasTrait(ValueDependentShape) && !(info.kind == OpKind::TopK && numOperands == 1);
}

} // namespace kiln
