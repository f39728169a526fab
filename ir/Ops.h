//===- Ops.h - Op kinds, schemas, hooks and typed views ---------*- C++ -*-===//
//
// Everything here is generated from Ops.def:
//  - `OpKind` and the mnemonic lookup;
//  - `OpInfo`: arity, traits, attribute schema (kind, name, default) and the
//    two semantic hooks every op provides, `infer<Class>` (result types, with
//    located errors) and `reference<Class>` (the interpreter kernel);
//  - a typed view per op, `<Class>Op`, with one accessor per attribute:
//      TransposeOp(node).perm()   ConvOp(ctx).strides()
//
// Ops are queried by trait (Elementwise, DataMovement, ...), not by long
// lists of kinds. See docs/OPS.md for the semantics of each op.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Attribute.h"
#include "ir/Diagnostics.h"
#include "ir/Type.h"

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace kiln {

class Node;
struct OpInfo;

enum class OpKind : uint16_t {
#define OP(Class, ...) Class,
#include "ir/Ops.def"
};

constexpr unsigned kNumOps = 0
#define OP(...) +1
#include "ir/Ops.def"
    ;

/// Arity value meaning "any number".
constexpr int kVariadic = -1;

/// Traits: facts passes query instead of switching on kinds.
enum OpTrait : uint32_t {
  None = 0,
  /// Pointwise over numpy-broadcast operands; one scalar function per element.
  Elementwise = 1u << 0,
  /// f(a, b) == f(b, a).
  Commutative = 1u << 1,
  /// f(f(x)) == f(x).
  Idempotent = 1u << 2,
  /// f(f(x)) == x.
  Involution = 1u << 3,
  /// Moves or copies elements without arithmetic (an index map).
  DataMovement = 1u << 4,
  /// Reduces along axes.
  Reduction = 1u << 5,
  /// Normalizes along an axis (softmax, layer_norm, ...).
  Normalization = 1u << 6,
  /// Sliding windows over spatial dims (conv, pools).
  Window = 1u << 7,
  /// Result dims may depend on operand values, not only their types (the
  /// branch an `if` takes, the trip count of a `loop`): inference gives `?`
  /// where it cannot know, and on concrete operands the reference kernel's
  /// results decide those dims.
  ValueDependentShape = 1u << 8,
};

/// One attribute of an op's schema.
struct AttrSpec {
  AttrKind kind;
  std::string_view name;
  /// Default in text form; nullptr when the attribute is required.
  const char *defaultText;
};

/// Two dims that type inference took to be equal without being able to
/// tell: two different symbols that broadcast against each other, a
/// matmul's contracting dims, concat's dims off the axis. The result type
/// uses `lhs`; every run checks that the inputs bind both to one size
/// (dimAssumptions in ir/Interpreter.h).
struct DimEquality {
  Dim lhs, rhs;
};

/// What a hook sees of a node: operand types, attributes, result count, and
/// where to report errors. Built from a Node (verifier, passes) or from
/// concrete tensors (interpreter).
struct OpContext {
  const OpInfo &info;
  std::span<const TensorType> operandTypes;
  /// All attributes in schema order, defaults filled in.
  std::span<const Attribute> attrs;
  unsigned numResults;
  Location loc;
  DiagnosticEngine &diag;
  /// Where inference records the dims it assumes equal; null when the
  /// caller does not collect them.
  std::vector<DimEquality> *assumed = nullptr;

  /// An error at the node's location, prefixed with `'mnemonic' op `.
  InFlightDiagnostic emitError() const;
  /// Records that `a` and `b` are taken to be equal (nothing when they are
  /// the same dim or either is `?`).
  void assumeEqual(const Dim &a, const Dim &b) const;
  const TensorType &operandType(unsigned i) const { return operandTypes[i]; }
  unsigned numOperands() const { return static_cast<unsigned>(operandTypes.size()); }
};

using InferFn = FailureOr<std::vector<TensorType>> (*)(const OpContext &);
using ReferenceFn = FailureOr<std::vector<Tensor>> (*)(const OpContext &,
                                                       std::span<const Tensor> inputs,
                                                       std::span<const TensorType> resultTypes);

struct ScalarLowering;
struct ScalarRef;
/// The scalar semantics of an Elementwise op (ir/ops/ScalarLowering.h).
using ScalarFn = ScalarRef (*)(ScalarLowering &);
/// Each op with the Elementwise trait defines its specialization next to
/// its reference kernel (ir/ops/Elementwise.cpp); the op table takes its
/// address, so a missing one does not link.
template <OpKind K> ScalarRef scalar(ScalarLowering &);

struct OpInfo {
  OpKind kind;
  std::string_view mnemonic;
  int minOperands, maxOperands, numResults;
  uint32_t traits;
  /// Accuracy bound against the reference kernel (the `ulps` column of
  /// Ops.def: its meaning is written there, and in docs/NUMERICS.md).
  int ulps;
  std::span<const AttrSpec> attrs;
  /// Parsed defaults, one per attribute (monostate-free: required ones hold
  /// a placeholder of the right kind).
  std::vector<Attribute> defaults;
  InferFn infer;
  ReferenceFn reference;
  /// Elementwise ops only: the scalar semantics; null for the others.
  ScalarFn scalar;

  bool hasTrait(uint32_t t) const { return (traits & t) == t; }
  /// Index of the attribute `name`, or -1.
  int attrIndex(std::string_view name) const;
  bool isRequired(unsigned i) const { return attrs[i].defaultText == nullptr; }
};

const OpInfo &opInfo(OpKind kind);
/// The op of a mnemonic, or nullptr.
const OpInfo *lookupOp(std::string_view mnemonic);
/// All ops in table order.
std::span<const OpInfo> allOps();

// Hook declarations: each op must define both, in ir/ops/<Family>.cpp.
#define OP(Class, ...)                                                                             \
  FailureOr<std::vector<TensorType>> infer##Class(const OpContext &ctx);                           \
  FailureOr<std::vector<Tensor>> reference##Class(const OpContext &ctx,                            \
                                                  std::span<const Tensor> inputs,                  \
                                                  std::span<const TensorType> resultTypes);
#include "ir/Ops.def"

//===----------------------------------------------------------------------===//
// Typed views
//===----------------------------------------------------------------------===//

#define KILN_PARENS ()
#define KILN_EXPAND(...) KILN_EXPAND4(KILN_EXPAND4(KILN_EXPAND4(KILN_EXPAND4(__VA_ARGS__))))
#define KILN_EXPAND4(...) KILN_EXPAND3(KILN_EXPAND3(KILN_EXPAND3(KILN_EXPAND3(__VA_ARGS__))))
#define KILN_EXPAND3(...) KILN_EXPAND2(KILN_EXPAND2(KILN_EXPAND2(KILN_EXPAND2(__VA_ARGS__))))
#define KILN_EXPAND2(...) KILN_EXPAND1(KILN_EXPAND1(KILN_EXPAND1(KILN_EXPAND1(__VA_ARGS__))))
#define KILN_EXPAND1(...) __VA_ARGS__
#define KILN_FOR_EACH(macro, ...) __VA_OPT__(KILN_EXPAND(KILN_FOR_EACH_HELPER(macro, __VA_ARGS__)))
#define KILN_FOR_EACH_HELPER(macro, a1, ...)                                                       \
  macro a1 __VA_OPT__(KILN_FOR_EACH_AGAIN KILN_PARENS(macro, __VA_ARGS__))
#define KILN_FOR_EACH_AGAIN() KILN_FOR_EACH_HELPER

#define KILN_ATTR_INDEX(Kind, name, dflt) name##_index,
#define KILN_ATTR_ACCESSOR(Kind, name, dflt)                                                       \
  const AttrCType_##Kind &name() const {                                                           \
    return std::get<AttrCType_##Kind>(attrs_[name##_index]);                                       \
  }

/// Base of the typed views: a span over a node's attributes.
class OpView {
public:
  explicit OpView(std::span<const Attribute> attrs) : attrs_(attrs) {}
  explicit OpView(const OpContext &ctx) : attrs_(ctx.attrs) {}
  explicit OpView(const Node &node);

protected:
  std::span<const Attribute> attrs_;
};

#define OP(Class, Mnemonic, MinOps, MaxOps, NumResults, Traits, Ulps, ...)                         \
  class Class##Op : public OpView {                                                                \
  public:                                                                                          \
    using OpView::OpView;                                                                          \
    static constexpr OpKind kKind = OpKind::Class;                                                 \
    enum : unsigned { KILN_FOR_EACH(KILN_ATTR_INDEX, __VA_ARGS__) kNumAttrs };                     \
    KILN_FOR_EACH(KILN_ATTR_ACCESSOR, __VA_ARGS__)                                                 \
  };
#include "ir/Ops.def"

} // namespace kiln
