//===- DenseLiteral.cpp - Values of `dense<...>` constants ------*- C++ -*-===//
//
// The tensor a `.kir` constant's dense literal gives for its type: the
// count, range and kind of each value checked, errors at the value's token.
// Private to ir/ (declared in Lexer.h); the parser reads the tokens.
//
//===----------------------------------------------------------------------===//
#include "ir/Lexer.h"
#include "ir/Tensor.h"

#include <charconv>

namespace kiln::textir {
namespace {

Location locOf(const std::string &file, const Token &t) {
  return Location::fileLineCol(file, t.line, t.col);
}

} // namespace

FailureOr<Tensor> denseLiteralTensor(const std::vector<Token> &values, const TensorType &type,
                                     const Token &at, const std::string &file,
                                     DiagnosticEngine &diag) {
  if (!type.isStatic())
    return diag.emitError(locOf(file, at))
           << "a constant must have a static type, got " << type.str();
  std::vector<int64_t> sizes = staticSizes(type.shape);
  int64_t n = numElements(sizes); // checked by parseType
  if (!checkedByteSize(n, dtypeSize(type.dtype), kMaxTensorFileBytes))
    return diag.emitError(locOf(file, at)) << "constant " << type.str() << " is larger than the "
                                           << (kMaxTensorFileBytes >> 30) << " GiB limit";
  int64_t given = static_cast<int64_t>(values.size());
  if (given != n && !(given == 1 && n >= 0))
    return diag.emitError(locOf(file, at))
           << "dense literal has " << given << " values, type " << type.str() << " needs " << n;
  Tensor t = Tensor::zeros(type.dtype, sizes);
  for (int64_t i = 0; i < n; ++i) {
    const Token &v = values[static_cast<size_t>(given == 1 ? 0 : i)];
    bool isBoolLit = v.text == "true" || v.text == "false";
    if (type.dtype == DType::Bool) {
      if (!isBoolLit)
        return diag.emitError(locOf(file, v))
               << "expected 'true' or 'false' for a bool constant, got '" << v.text << "'";
      t.setInt(i, v.text == "true");
    } else if (isBoolLit) {
      return diag.emitError(locOf(file, v))
             << "'" << v.text << "' is not a " << dtypeName(type.dtype) << " value";
    } else if (isFloat(type.dtype) && type.dtype != DType::F64) {
      std::optional<float> f = floatLiteral<float>(v.text);
      if (!f)
        return diag.emitError(locOf(file, v)) << "expected a number, got '" << v.text << "'";
      t.setDouble(i, *f);
    } else if (type.dtype == DType::F64) {
      std::optional<double> f = floatLiteral<double>(v.text);
      if (!f)
        return diag.emitError(locOf(file, v)) << "expected a number, got '" << v.text << "'";
      t.setDouble(i, *f);
    } else {
      int64_t x;
      auto res = std::from_chars(v.text.data(), v.text.data() + v.text.size(), x);
      if (res.ec != std::errc() || res.ptr != v.text.data() + v.text.size())
        return diag.emitError(locOf(file, v))
               << "expected an integer for a " << dtypeName(type.dtype) << " constant, got '"
               << v.text << "'";
      Tensor probe = Tensor::fromInts(type.dtype, {}, {x});
      if (probe.getInt(0) != x)
        return diag.emitError(locOf(file, v))
               << "value " << x << " is out of range for " << dtypeName(type.dtype);
      t.setInt(i, x);
    }
  }
  return t;
}

} // namespace kiln::textir
