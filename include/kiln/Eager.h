//===- Eager.h - The eager tensor API, one function per op ------*- C++ -*-===//
//
// One free function per op of ir/Ops.def, generated from the table (no
// function is written by hand): it runs the op's reference kernel at once
// and returns the result, and while kiln::trace() runs on this thread it
// also records the op as a node of the traced graph (include/kiln/Trace.h).
//
//   kiln::Tensor y = kiln::add(a, b);
//   kiln::Tensor t = kiln::transpose(x, {.perm = {1, 0}});
//   kiln::Tensor g = kiln::gemm(a, b, c, {.alpha = 0.5, .trans_b = true});
//   kiln::Tensor s = kiln::concat({a, b}, {.axis = 0});
//   std::vector<kiln::Tensor> parts = kiln::split(x, {.axis = 1, .num_outputs = 2});
//
// The signature follows the op's row of the table:
//  - operands: one `const Tensor &` per operand; an op with optional
//    operands (gemm's C, conv's bias, layer_norm's bias) has one overload
//    without and one with them; a variadic op takes `std::vector<Tensor>`;
//  - then `<Class>Attrs attrs = {}`, a struct with one std::optional-like
//    member per attribute, named as in the table, left empty for the
//    default (see docs/OPS.md); ops with variadic results also have
//    `num_outputs` (else the count comes from a `sizes` attribute);
//  - last, `std::source_location loc = std::source_location::current()`:
//    leave it defaulted; it records the caller's file:line:col, used by
//    errors and by the traced graph's node locations;
//  - the result is a Tensor, or std::vector<Tensor> for variadic results.
//
// Names are the mnemonics (kiln::reduce_sum, kiln::layer_norm), except that
// and/or/not, C++ keywords, are logical_and/logical_or/logical_not; if is if_.
//
// Errors (shape and dtype mistakes, missing or bad attributes, a kernel
// refusing its input) throw kiln::Error whose message is located at the
// caller: `model.cpp:12:7: error: 'matmul' op contracting dims ...`.
//
// kiln::Tensor is the host tensor of ir/Tensor.h: dense, row-major, values
// shared on copy. The helpers at the end create tensors and read them back;
// reading a traced value (item, toVector) is reported by trace() because a
// trace cannot follow a decision taken on it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Ops.h"
#include "ir/Tensor.h"
#include "kiln/EagerNames.def"
#include "kiln/Error.h"

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <source_location>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln {

//===----------------------------------------------------------------------===//
// Attribute arguments
//===----------------------------------------------------------------------===//

namespace detail {
struct NoElement {};
template <typename T> struct ArgElement { using type = NoElement; };
template <typename E> struct ArgElement<std::vector<E>> { using type = E; };
} // namespace detail

/// An optional attribute value: empty means "the op's default". It is a
/// std::optional that also accepts a braced list for list attributes, so
/// that `{.perm = {1, 0}}` works in designated initializers.
template <typename T> class Arg : public std::optional<T> {
public:
  using std::optional<T>::optional;
  Arg() = default;
  Arg(std::initializer_list<typename detail::ArgElement<T>::type> list) requires(
      !std::is_same_v<typename detail::ArgElement<T>::type, detail::NoElement>)
      : std::optional<T>(T(list)) {}
};

//===----------------------------------------------------------------------===//
// Generated: one attribute struct per op
//===----------------------------------------------------------------------===//

// Members have a default initializer so that designated initializers may omit
// them without -Wmissing-field-initializers.
#define KILN_EAGER_MEMBER(Kind, name, dflt) ::kiln::Arg<::kiln::AttrCType_##Kind> name{};
// Ops with variadic results take the number of results as an extra member.
#define KILN_EAGER_EXTRA_1
#define KILN_EAGER_EXTRA_2
#define KILN_EAGER_EXTRA_3
#define KILN_EAGER_EXTRA_kVariadic ::kiln::Arg<int64_t> num_outputs{};

#define OP(Class, Mnemonic, MinOps, MaxOps, NumResults, Traits, Ulps, ...)                         \
  /** Attributes of the `Mnemonic` op; an empty member takes the default. */                       \
  struct Class##Attrs {                                                                            \
    KILN_FOR_EACH(KILN_EAGER_MEMBER, __VA_ARGS__)                                                  \
    KILN_EAGER_EXTRA_##NumResults                                                                  \
  };
#include "ir/Ops.def"

//===----------------------------------------------------------------------===//
// Generated: one function (or two, for optional operands) per op
//===----------------------------------------------------------------------===//

namespace detail {
/// True when `name` is a valid eager function name for `mnemonic` (see
/// EagerNames.def).
constexpr bool isEagerName(std::string_view name, std::string_view mnemonic) {
  return name == mnemonic ||
         (name.size() == mnemonic.size() + 8 && name.substr(0, 8) == "logical_" &&
          name.substr(8) == mnemonic &&
          (mnemonic == "and" || mnemonic == "or" || mnemonic == "not")) ||
         (mnemonic == "if" && name == "if_");
}
} // namespace detail

#define KILN_EAGER_STR(x) KILN_EAGER_STR2(x)
#define KILN_EAGER_STR2(x) #x
#define KILN_EAGER_UNPAREN(...) __VA_ARGS__
#define KILN_EAGER_RET_1 ::kiln::Tensor
#define KILN_EAGER_RET_2 std::vector<::kiln::Tensor>
#define KILN_EAGER_RET_3 std::vector<::kiln::Tensor>
#define KILN_EAGER_RET_kVariadic std::vector<::kiln::Tensor>

// Operand lists, by (minOperands, maxOperands): each expands X once per
// overload with (parameters followed by a comma, operand vector). A new
// combination in Ops.def needs one line here (the build fails until then).
// The operand vector expression is parenthesized to protect its commas.
#define KILN_EAGER_OPERANDS_0_0(X, ...) X((), (std::vector<::kiln::Tensor>{}), __VA_ARGS__)
#define KILN_EAGER_OPERANDS_1_1(X, ...)                                                            \
  X((const ::kiln::Tensor &x0, ), (std::vector<::kiln::Tensor>{x0}), __VA_ARGS__)
#define KILN_EAGER_OPERANDS_2_2(X, ...)                                                            \
  X((const ::kiln::Tensor &x0, const ::kiln::Tensor &x1, ), (std::vector<::kiln::Tensor>{x0, x1}), \
    __VA_ARGS__)
#define KILN_EAGER_OPERANDS_3_3(X, ...)                                                            \
  X((const ::kiln::Tensor &x0, const ::kiln::Tensor &x1, const ::kiln::Tensor &x2, ),              \
    (std::vector<::kiln::Tensor>{x0, x1, x2}), __VA_ARGS__)
#define KILN_EAGER_OPERANDS_5_5(X, ...)                                                            \
  X((const ::kiln::Tensor &x0, const ::kiln::Tensor &x1, const ::kiln::Tensor &x2,                 \
     const ::kiln::Tensor &x3, const ::kiln::Tensor &x4, ),                                        \
    (std::vector<::kiln::Tensor>{x0, x1, x2, x3, x4}), __VA_ARGS__)
#define KILN_EAGER_OPERANDS_4_4(X, ...)                                                            \
  X((const ::kiln::Tensor &x0, const ::kiln::Tensor &x1, const ::kiln::Tensor &x2,                 \
     const ::kiln::Tensor &x3, ),                                                                  \
    (std::vector<::kiln::Tensor>{x0, x1, x2, x3}), __VA_ARGS__)
#define KILN_EAGER_OPERANDS_6_6(X, ...)                                                            \
  X((const ::kiln::Tensor &x0, const ::kiln::Tensor &x1, const ::kiln::Tensor &x2,                 \
     const ::kiln::Tensor &x3, const ::kiln::Tensor &x4, const ::kiln::Tensor &x5, ),              \
    (std::vector<::kiln::Tensor>{x0, x1, x2, x3, x4, x5}), __VA_ARGS__)
#define KILN_EAGER_OPERANDS_3_5(X, ...)                                                            \
  KILN_EAGER_OPERANDS_3_3(X, __VA_ARGS__)                                                          \
  KILN_EAGER_OPERANDS_4_4(X, __VA_ARGS__)                                                          \
  KILN_EAGER_OPERANDS_5_5(X, __VA_ARGS__)
#define KILN_EAGER_OPERANDS_3_6(X, ...)                                                            \
  KILN_EAGER_OPERANDS_3_5(X, __VA_ARGS__)                                                          \
  KILN_EAGER_OPERANDS_6_6(X, __VA_ARGS__)
#define KILN_EAGER_OPERANDS_1_2(X, ...)                                                            \
  KILN_EAGER_OPERANDS_1_1(X, __VA_ARGS__)                                                          \
  KILN_EAGER_OPERANDS_2_2(X, __VA_ARGS__)
#define KILN_EAGER_OPERANDS_2_3(X, ...)                                                            \
  KILN_EAGER_OPERANDS_2_2(X, __VA_ARGS__)                                                          \
  KILN_EAGER_OPERANDS_3_3(X, __VA_ARGS__)
#define KILN_EAGER_OPERANDS_1_kVariadic(X, ...)                                                    \
  X((std::vector<::kiln::Tensor> xs, ), (std::move(xs)), __VA_ARGS__)
#define KILN_EAGER_OPERANDS_2_kVariadic(X, ...)                                                    \
  X((std::vector<::kiln::Tensor> xs, ), (std::move(xs)), __VA_ARGS__)

#define KILN_EAGER_DECLARE(Params, Operands, Class, Fn, NumResults)                                \
  KILN_EAGER_RET_##NumResults Fn(KILN_EAGER_UNPAREN Params Class##Attrs attrs = {},                \
                                 std::source_location loc = std::source_location::current());

#define OP(Class, Mnemonic, MinOps, MaxOps, NumResults, Traits, Ulps, ...)                         \
  static_assert(::kiln::detail::isEagerName(KILN_EAGER_STR(KILN_EAGER_FN_##Class), Mnemonic),      \
                "include/kiln/EagerNames.def lacks a valid name for op " #Class);                  \
  KILN_EAGER_OPERANDS_##MinOps##_##MaxOps(KILN_EAGER_DECLARE, Class, KILN_EAGER_FN_##Class,        \
                                          NumResults)
#include "ir/Ops.def"

//===----------------------------------------------------------------------===//
// Creating tensors
//===----------------------------------------------------------------------===//

/// A tensor of `shape` from row-major `values`, converted to `dtype`.
/// Throws kiln::Error when the count does not match the shape.
Tensor tensor(const std::vector<double> &values, std::vector<int64_t> shape,
              DType dtype = DType::F32, std::source_location loc = std::source_location::current());
/// Same, from integers (exact for i64); the default dtype is i64.
Tensor tensorOfInts(const std::vector<int64_t> &values, std::vector<int64_t> shape,
                    DType dtype = DType::I64,
                    std::source_location loc = std::source_location::current());
/// A 0-d tensor.
Tensor scalar(double value, DType dtype = DType::F32);
/// A tensor filled with `value`.
Tensor full(std::vector<int64_t> shape, double value, DType dtype = DType::F32);
Tensor zeros(std::vector<int64_t> shape, DType dtype = DType::F32);
Tensor ones(std::vector<int64_t> shape, DType dtype = DType::F32);
/// Samples of the standard normal distribution (Box-Muller over a
/// counter-based generator): the same seed gives the same values on every
/// platform.
Tensor randn(std::vector<int64_t> shape, uint64_t seed, DType dtype = DType::F32);
/// Samples uniform in [low, high), deterministic like randn.
Tensor uniform(std::vector<int64_t> shape, double low, double high, uint64_t seed,
               DType dtype = DType::F32);

//===----------------------------------------------------------------------===//
// Reading tensors back (host reads)
//===----------------------------------------------------------------------===//

/// The single element of `t` as a double. Throws kiln::Error when `t` does
/// not have exactly one element. While tracing, reading a value that depends
/// on the trace's inputs is reported as a warning at `loc`: the trace keeps
/// whatever the program decided from it.
double item(const Tensor &t, std::source_location loc = std::source_location::current());
/// All elements as doubles (row-major); a host read like item().
std::vector<double> toVector(const Tensor &t,
                             std::source_location loc = std::source_location::current());
/// All elements as int64; a host read like item().
std::vector<int64_t> toIntVector(const Tensor &t,
                                 std::source_location loc = std::source_location::current());

/// The largest |a - b| over the elements (NaN where exactly one is NaN,
/// infinity when dtypes or shapes differ); a host read of both.
double maxAbsDiff(const Tensor &a, const Tensor &b,
                  std::source_location loc = std::source_location::current());
/// Same dtype and shape, and |a - b| <= atol + rtol * |b| elementwise (NaNs
/// equal NaNs); a host read of both.
bool allClose(const Tensor &a, const Tensor &b, double rtol = 1e-5, double atol = 1e-6,
              std::source_location loc = std::source_location::current());

} // namespace kiln
