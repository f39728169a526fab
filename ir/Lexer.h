//===- Lexer.h - Tokens of the IR text form ---------------------*- C++ -*-===//
//
// Private to ir/: the lexer of the `.kir` text form, used by the parser
// (Parser.cpp). Tokens carry their line and column for diagnostics.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Diagnostics.h"
#include "ir/Tensor.h"
#include "ir/Type.h"

#include <charconv>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::textir {

enum class Tok {
  Eof,
  Error,
  Ident,  // graph, f32, true, inf, mnemonics, attribute names
  Value,  // %name
  Symbol, // @name
  Number, // 12, -3, 0.5, 1e-05
  String, // "..."
  LParen,
  RParen,
  LBrace,
  RBrace,
  LSquare,
  RSquare,
  Less,
  Greater,
  Comma,
  Colon,
  Equal,
  Question,
  Arrow,
  Minus,
  Plus,  // in dim expressions: N+1
  Star,  // 2*N
  Slash, // N/2 (floor division)
};

struct Token {
  Tok kind;
  std::string text; // identifier, name (without sigil), number or unescaped string
  unsigned line, col;
};

/// Characters of bare names and identifiers.
bool isNameChar(char c);

class Lexer {
public:
  Lexer(std::string_view text, unsigned firstLine) : s_(text), line_(firstLine) {}

  std::vector<Token> lexAll() {
    std::vector<Token> toks;
    while (true) {
      toks.push_back(next());
      if (toks.back().kind == Tok::Eof || toks.back().kind == Tok::Error)
        break;
    }
    return toks;
  }

private:
  char peek(size_t o = 0) const { return p_ + o < s_.size() ? s_[p_ + o] : '\0'; }
  void advance() {
    if (s_[p_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++p_;
  }
  Token make(Tok k, std::string text, unsigned line, unsigned col) {
    return Token{k, std::move(text), line, col};
  }

  // Reads a "..." string starting at the opening quote; Error on a bad one.
  Token lexString(unsigned line, unsigned col);
  Token next();

  std::string_view s_;
  size_t p_ = 0;
  unsigned line_, col_ = 1;
};

/// A token as diagnostics name it: 'x', '%v', '@g', string "s", end of input.
std::string describe(const Token &t);

/// The value of a float literal's text ("1.5", "-inf", "nan"; the sign
/// folded in), or nullopt when it is not one.
template <typename F> std::optional<F> floatLiteral(const std::string &t) {
  if (t == "inf" || t == "-inf")
    return t[0] == '-' ? -std::numeric_limits<F>::infinity() : std::numeric_limits<F>::infinity();
  if (t == "nan" || t == "-nan")
    return std::numeric_limits<F>::quiet_NaN();
  F v;
  auto res = std::from_chars(t.data(), t.data() + t.size(), v);
  if (res.ec != std::errc() || res.ptr != t.data() + t.size())
    return std::nullopt;
  return v;
}

/// The tensor of `type` that a `dense<...>` literal's value tokens give (one
/// value fills every element); errors at `at` or at the bad value, in `file`.
/// DenseLiteral.cpp.
FailureOr<Tensor> denseLiteralTensor(const std::vector<Token> &values, const TensorType &type,
                                     const Token &at, const std::string &file,
                                     DiagnosticEngine &diag);

} // namespace kiln::textir
