//===- Verifier.h - Checking graph invariants -------------------*- C++ -*-===//
#pragma once

#include "ir/Graph.h"

namespace kiln {

/// Checks the invariants listed in Verifier.cpp; reports every violation
/// found (with its rule number) as a located error.
LogicalResult verify(const Graph &g, DiagnosticEngine &diag);
LogicalResult verify(const Module &m, DiagnosticEngine &diag);

} // namespace kiln
