//===- Lexer.cpp - Tokens of the IR text form -----------------------------===//
#include "ir/Lexer.h"

#include <cctype>

namespace kiln::textir {

bool isNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '$';
}

Token Lexer::lexString(unsigned line, unsigned col) {
  advance(); // opening quote
  std::string out;
  while (p_ < s_.size() && peek() != '"') {
    if (peek() == '\n')
      return make(Tok::Error, "unterminated string", line, col);
    if (peek() == '\\') {
      advance();
      if (p_ >= s_.size())
        break;
      char c = peek();
      out += c == 'n' ? '\n' : c;
      advance();
      continue;
    }
    out += peek();
    advance();
  }
  if (p_ >= s_.size())
    return make(Tok::Error, "unterminated string", line, col);
  advance(); // closing quote
  return make(Tok::String, std::move(out), line, col);
}

Token Lexer::next() {
  // Skip whitespace and // comments.
  while (p_ < s_.size()) {
    if (std::isspace(static_cast<unsigned char>(peek()))) {
      advance();
    } else if (peek() == '/' && peek(1) == '/') {
      while (p_ < s_.size() && peek() != '\n')
        advance();
    } else {
      break;
    }
  }
  unsigned line = line_, col = col_;
  if (p_ >= s_.size())
    return make(Tok::Eof, "", line, col);
  char c = peek();
  if (c == '%' || c == '@') {
    advance();
    Tok k = c == '%' ? Tok::Value : Tok::Symbol;
    if (peek() == '"') {
      Token t = lexString(line, col);
      if (t.kind == Tok::String)
        t.kind = k;
      if (t.kind == k && t.text.empty())
        return make(Tok::Error, "empty name", line, col);
      return t;
    }
    std::string name;
    while (p_ < s_.size() && isNameChar(peek())) {
      name += peek();
      advance();
    }
    if (name.empty())
      return make(Tok::Error, std::string("expected a name after '") + c + "'", line, col);
    return make(k, std::move(name), line, col);
  }
  if (c == '"')
    return lexString(line, col);
  if (std::isdigit(static_cast<unsigned char>(c)) ||
      ((c == '-' || c == '+') && std::isdigit(static_cast<unsigned char>(peek(1))))) {
    std::string num;
    num += c;
    advance();
    while (p_ < s_.size()) {
      char d = peek();
      if (std::isalnum(static_cast<unsigned char>(d)) || d == '.' ||
          ((d == '-' || d == '+') && (num.back() == 'e' || num.back() == 'E'))) {
        num += d;
        advance();
      } else {
        break;
      }
    }
    return make(Tok::Number, std::move(num), line, col);
  }
  if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
    std::string id;
    while (p_ < s_.size() && isNameChar(peek())) {
      id += peek();
      advance();
    }
    return make(Tok::Ident, std::move(id), line, col);
  }
  advance();
  switch (c) {
  case '(':
    return make(Tok::LParen, "(", line, col);
  case ')':
    return make(Tok::RParen, ")", line, col);
  case '{':
    return make(Tok::LBrace, "{", line, col);
  case '}':
    return make(Tok::RBrace, "}", line, col);
  case '[':
    return make(Tok::LSquare, "[", line, col);
  case ']':
    return make(Tok::RSquare, "]", line, col);
  case '<':
    return make(Tok::Less, "<", line, col);
  case '>':
    return make(Tok::Greater, ">", line, col);
  case ',':
    return make(Tok::Comma, ",", line, col);
  case ':':
    return make(Tok::Colon, ":", line, col);
  case '=':
    return make(Tok::Equal, "=", line, col);
  case '?':
    return make(Tok::Question, "?", line, col);
  case '-':
    if (peek() == '>') {
      advance();
      return make(Tok::Arrow, "->", line, col);
    }
    return make(Tok::Minus, "-", line, col);
  case '+':
    return make(Tok::Plus, "+", line, col);
  case '*':
    return make(Tok::Star, "*", line, col);
  case '/':
    return make(Tok::Slash, "/", line, col);
  default:
    break;
  }
  return make(Tok::Error, std::string("unexpected character '") + c + "'", line, col);
}

std::string describe(const Token &t) {
  switch (t.kind) {
  case Tok::Eof:
    return "end of input";
  case Tok::Value:
    return "'%" + t.text + "'";
  case Tok::Symbol:
    return "'@" + t.text + "'";
  case Tok::String:
    return "string \"" + t.text + "\"";
  default:
    return "'" + t.text + "'";
  }
}

} // namespace kiln::textir
