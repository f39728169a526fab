//===- Internal.h - Shared inside frontend/trace ----------------*- C++ -*-===//
//
// The seam between the eager functions (Eager.cpp), which run every op, and
// the tracer (Trace.cpp), which records the ops while a trace is active on
// the calling thread. Never included outside frontend/trace.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Builder.h"
#include "kiln/Error.h"

#include <source_location>
#include <span>
#include <string_view>
#include <vector>

namespace kiln::detail {

class TraceState;

/// The trace recording on this thread, or nullptr.
TraceState *activeTrace();

/// Records one executed op: a node with `attrs` (schema order) and the
/// types of `results`, whose operands are the values of `operands` (tensors
/// the trace has not seen become constants). May replace a result by a copy
/// so that every recorded tensor has its own storage.
void recordOp(TraceState &trace, const OpInfo &info, std::span<const Tensor> operands,
              std::vector<Attribute> attrs, std::vector<Tensor> &results, const Location &loc);

/// Notes that the program read `t` back to the host at `loc` (`what` names
/// the accessor); a warning when `t` depends on the trace's inputs.
void recordHostRead(TraceState &trace, const Tensor &t, const Location &loc, std::string_view what);

/// Gives the value of `t` the name hint `name` when it is the result of an
/// op (not a constant or input). Modules call this as they return, so the
/// outermost module returning a value names it.
void nameTracedValue(TraceState &trace, const Tensor &t, const std::string &name);

/// The location of a C++ call site.
Location toLocation(const std::source_location &loc);

/// Throws kiln::Error carrying `diags`, or `fallback` when none was reported.
[[noreturn]] void throwDiagnostics(std::vector<Diagnostic> diags, const Location &loc,
                                   std::string_view fallback);

/// Runs op `kind` eagerly; records it when tracing. `numOutputs` is the
/// requested number of results of a variadic-result op.
std::vector<Tensor> runOp(OpKind kind, std::vector<Tensor> operands, std::vector<NamedAttr> attrs,
                          std::optional<int64_t> numOutputs, const std::source_location &loc);

/// Deterministic random numbers: the 64-bit value number `i` of stream
/// `seed` (SplitMix64 of seed and counter).
uint64_t randomBits(uint64_t seed, uint64_t i);

} // namespace kiln::detail
