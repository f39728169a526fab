//===- Extract.h - Some nodes of a graph as a graph of their own -*- C++ -*-===//
//
// One helper for the passes that compile or run part of a graph alone: the
// stages of a graph whose sizes a run decides (codegen/Staged.cpp) and one
// fusion group at a time (codegen/Bisect.cpp).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Graph.h"
#include "ir/Type.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kiln {

/// `nodes` (in schedule order, from one graph) as a graph named `name`:
/// the constants they read copied in, every other outside value they read
/// an input (appended to `inputs` in first-use order, typed by `retype`
/// where it has the value), `outputs` its outputs. With `reinfer`, each
/// node's result types are inferred again from its operands' (new) types
/// where inference can say; else, and where it cannot, they stay as
/// recorded (a `?` that a run decides stays `?`).
std::unique_ptr<Graph> extractNodes(const std::string &name, const std::vector<const Node *> &nodes,
                                    const std::vector<const Value *> &outputs,
                                    std::vector<const Value *> &inputs,
                                    const std::map<const Value *, TensorType> &retype = {},
                                    bool reinfer = false);

} // namespace kiln
