//===- Eager.cpp - The eager op functions, generated from Ops.def -*- C++ -*-=//
//
// Every eager function (include/kiln/Eager.h) turns its attribute struct
// into named attributes and calls runOp, which does what the interpreter
// does for one node (ir/Interpreter.cpp evaluateNode): fill and check the
// attributes, infer the result types from the concrete operand types, run
// the reference kernel. Diagnostics are collected and thrown as kiln::Error
// located at the caller. When a trace is active on this thread the op is
// then recorded (Trace.cpp).
//
//===----------------------------------------------------------------------===//
#include "kiln/Eager.h"

#include "frontend/trace/Internal.h"
#include "ir/Interpreter.h"

namespace kiln {
namespace detail {

Location toLocation(const std::source_location &loc) {
  return Location::fileLineCol(loc.file_name(), loc.line(), loc.column());
}

void throwDiagnostics(std::vector<Diagnostic> diags, const Location &loc,
                      std::string_view fallback) {
  if (diags.empty()) {
    Diagnostic d;
    d.loc = loc;
    d.message = std::string(fallback);
    diags.push_back(std::move(d));
  }
  throw Error(std::move(diags));
}

namespace {
/// The number of results of a variadic-result op: `num_outputs`, else the
/// length of a non-empty `sizes` attribute.
FailureOr<unsigned> countResults(const OpInfo &info, std::span<const Attribute> attrs,
                                 std::optional<int64_t> numOutputs, const Location &loc,
                                 DiagnosticEngine &diag) {
  if (info.numResults != kVariadic)
    return static_cast<unsigned>(info.numResults);
  if (numOutputs) {
    if (*numOutputs < 1)
      return diag.emitError(loc) << "'" << info.mnemonic
                                 << "' op num_outputs must be at least 1, got " << *numOutputs;
    return static_cast<unsigned>(*numOutputs);
  }
  int sizes = info.attrIndex("sizes");
  if (sizes >= 0) {
    const auto *list = std::get_if<std::vector<int64_t>>(&attrs[static_cast<size_t>(sizes)]);
    if (list && !list->empty())
      return static_cast<unsigned>(list->size());
  }
  return diag.emitError(loc)
         << "'" << info.mnemonic
         << "' op needs num_outputs (or sizes) to know how many results to make";
}
} // namespace

std::vector<Tensor> runOp(OpKind kind, std::vector<Tensor> operands, std::vector<NamedAttr> named,
                          std::optional<int64_t> numOutputs, const std::source_location &where) {
  const OpInfo &info = opInfo(kind);
  Location loc = toLocation(where);
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collected(diag);
  auto fail = [&]() { throwDiagnostics(collected.diagnostics(), loc, "op failed"); };

  for (size_t i = 0; i < operands.size(); ++i)
    if (operands[i].isNull())
      diag.emitError(loc) << "'" << info.mnemonic << "' op operand " << i
                          << " is a null tensor (a default-constructed kiln::Tensor)";
  if (diag.hadError())
    fail();
  auto attrs = buildAttrs(info, std::move(named), loc, diag);
  if (failed(attrs))
    fail();
  auto numResults = countResults(info, *attrs, numOutputs, loc, diag);
  if (failed(numResults))
    fail();
  auto results = evaluateOp(info, *attrs, operands, *numResults, loc, diag);
  if (failed(results))
    fail();
  std::vector<Tensor> out = results.take();
  if (TraceState *trace = activeTrace())
    recordOp(*trace, info, operands, attrs.take(), out, loc);
  return out;
}

} // namespace detail

//===----------------------------------------------------------------------===//
// Generated definitions
//===----------------------------------------------------------------------===//

#define KILN_EAGER_NAMED(Kind, name, dflt)                                                         \
  if (attrs.name)                                                                                  \
    named.emplace_back(#name, Attribute(*attrs.name));
#define KILN_EAGER_NUM_OUTPUTS_1 std::optional<int64_t>()
#define KILN_EAGER_NUM_OUTPUTS_2 std::optional<int64_t>()
#define KILN_EAGER_NUM_OUTPUTS_3 std::optional<int64_t>()
#define KILN_EAGER_NUM_OUTPUTS_kVariadic                                                           \
  (attrs.num_outputs ? std::optional<int64_t>(*attrs.num_outputs) : std::optional<int64_t>())
#define KILN_EAGER_TAKE_1(results) std::move(results[0])
#define KILN_EAGER_TAKE_2(results) results
#define KILN_EAGER_TAKE_3(results) results
#define KILN_EAGER_TAKE_kVariadic(results) results

// Defines one overload; the attributes are converted by the function
// KILN_EAGER_ATTRS_<Class> generated below.
#define KILN_EAGER_DEFINE(Params, Operands, Class, Fn, NumResults)                                 \
  KILN_EAGER_RET_##NumResults Fn(KILN_EAGER_UNPAREN Params Class##Attrs attrs,                     \
                                 std::source_location loc) {                                       \
    auto results =                                                                                 \
        detail::runOp(OpKind::Class, KILN_EAGER_UNPAREN Operands, namedAttrs##Class(attrs),        \
                      KILN_EAGER_NUM_OUTPUTS_##NumResults, loc);                                   \
    return KILN_EAGER_TAKE_##NumResults(results);                                                  \
  }

namespace {
#define OP(Class, Mnemonic, MinOps, MaxOps, NumResults, Traits, Ulps, ...)                         \
  [[maybe_unused]] std::vector<NamedAttr> namedAttrs##Class(const Class##Attrs &attrs) {           \
    std::vector<NamedAttr> named;                                                                  \
    KILN_FOR_EACH(KILN_EAGER_NAMED, __VA_ARGS__)                                                   \
    (void)attrs;                                                                                   \
    return named;                                                                                  \
  }
#include "ir/Ops.def"
} // namespace

#define OP(Class, Mnemonic, MinOps, MaxOps, NumResults, Traits, Ulps, ...)                         \
  KILN_EAGER_OPERANDS_##MinOps##_##MaxOps(KILN_EAGER_DEFINE, Class, KILN_EAGER_FN_##Class,         \
                                          NumResults)
#include "ir/Ops.def"

} // namespace kiln
