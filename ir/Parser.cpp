//===- Parser.cpp - Reading the text form -----------------------*- C++ -*-===//
//
// A hand-written lexer and recursive-descent parser. Grammar (docs/IR.md):
//
//   module   ::= graph* blobs?
//   graph    ::= 'graph' @name '(' (%v ':' type),* ')' '->' '(' type,* ')'
//                '{' node* 'return' %v,* '}'
//   node     ::= %v,+ '=' op-body ':' type,+ loc?
//   op-body  ::= 'constant' (@blob | dense) | mnemonic '(' %v,* ')' attrs?
//   attrs    ::= '{' (name '=' value),* '}'     (a Graph value is a nested graph)
//   type     ::= dtype '[' (int | symbol | '?'),* ']'
//   loc      ::= 'loc' '(' (string ':' int ':' int | string ('in' string)?
//                 | 'unknown' | 'fused' '[' loc-body,* ']') ')'
//   blobs    ::= 'blobs' '{' (@name '=' (string | 'elided'))* '}'
//
//===----------------------------------------------------------------------===//
#include "ir/Parser.h"

#include "ir/Builder.h"
#include "ir/Lexer.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <unordered_map>

namespace kiln {
namespace {

using namespace textir;

struct PendingBlob {
  Node *node;
  std::string key;
  Location loc;
};

class Parser {
public:
  Parser(std::string_view text, DiagnosticEngine &diag, const ParseOptions &opts)
      : diag_(diag), opts_(opts) {
    toks_ = Lexer(text, opts.firstLine).lexAll();
  }

  FailureOr<std::unique_ptr<Module>> parseModule() {
    auto module = std::make_unique<Module>();
    while (cur().kind == Tok::Ident && cur().text == "graph") {
      auto g = parseGraph();
      if (failed(g))
        return failure();
      if (module->lookup((*g)->name())) {
        emitError(graphLoc_) << "redefinition of graph '@" << (*g)->name() << "'";
        return failure();
      }
      module->addGraph(g.take());
    }
    if (cur().kind == Tok::Ident && cur().text == "blobs") {
      if (failed(parseBlobs()))
        return failure();
    }
    if (cur().kind != Tok::Eof)
      return expected("'graph' or 'blobs'");
    if (failed(resolveBlobs()))
      return failure();
    if (opts_.verify)
      for (const auto &g : module->graphs())
        if (failed(verify(*g, diag_)))
          return failure();
    return module;
  }

  // Entry points for single literals.
  FailureOr<Attribute> parseLiteralOnly(AttrKind kind) {
    auto a = parseAttrValue(kind);
    if (failed(a))
      return failure();
    if (cur().kind != Tok::Eof)
      return expected("end of attribute");
    return a;
  }
  FailureOr<TensorType> parseTypeOnly() {
    auto t = parseType();
    if (failed(t))
      return failure();
    if (cur().kind != Tok::Eof)
      return expected("end of type");
    return t;
  }

private:
  const Token &cur() const { return toks_[pos_]; }
  void consume() {
    if (pos_ + 1 < toks_.size())
      ++pos_;
  }
  Location locOf(const Token &t) const {
    return Location::fileLineCol(opts_.filename, t.line, t.col);
  }
  InFlightDiagnostic emitError(const Location &loc) { return diag_.emitError(loc); }
  InFlightDiagnostic emitError() { return diag_.emitError(locOf(cur())); }

  /// "expected X, got Y" at the current token (lexer errors reported as such).
  LogicalResult expected(const std::string &what) {
    if (cur().kind == Tok::Error)
      return emitError() << cur().text;
    return emitError() << "expected " << what << ", got " << describe(cur());
  }
  LogicalResult expect(Tok k, const std::string &what) {
    if (cur().kind != k)
      return expected(what);
    consume();
    return success();
  }
  LogicalResult expectKeyword(const char *kw) {
    if (cur().kind != Tok::Ident || cur().text != kw)
      return expected(std::string("'") + kw + "'");
    consume();
    return success();
  }

  //===--------------------------------------------------------------------===//
  // Types
  //===--------------------------------------------------------------------===//

  FailureOr<TensorType> parseType() {
    Token start = cur();
    if (cur().kind != Tok::Ident)
      return expected("a tensor type such as f32[2,3]");
    auto dt = dtypeFromName(cur().text);
    if (!dt)
      return emitError() << "unknown dtype '" << cur().text << "'";
    consume();
    if (failed(expect(Tok::LSquare, "'[' after the dtype")))
      return failure();
    Shape shape;
    if (cur().kind != Tok::RSquare) {
      while (true) {
        if (cur().kind == Tok::Question) {
          consume();
          shape.push_back(Dim::dynamic());
        } else {
          Token first = cur();
          auto e = parseDimSum();
          if (failed(e))
            return failure();
          if (e->isConstant() && e->constant() < 0)
            return emitError(locOf(first))
                   << "bad dimension '" << e->str()
                   << "': expected a non-negative integer, a symbol, an expression or '?'";
          shape.push_back(Dim::of(*e));
        }
        if (cur().kind == Tok::Comma) {
          consume();
          continue;
        }
        break;
      }
    }
    if (failed(expect(Tok::RSquare, "',' or ']' in the shape")))
      return failure();
    std::vector<int64_t> known;
    for (const Dim &d : shape)
      if (d.isStatic())
        known.push_back(d.size());
    if (!checkedNumElements(known))
      return emitError(locOf(start))
             << "shape " << shapeStr(shape) << " has more than 2^63 elements";
    return TensorType(*dt, std::move(shape));
  }

  // Dim expressions (see ir/DimExpr.h):
  //   sum     := product (('+' | '-') product)*
  //   product := factor (('*' factor) | ('/' integer))*
  //   factor  := integer | symbol | '(' sum ')' | '-' factor
  //            | ('mod' '(' sum ',' integer ')') | ('min' | 'max') '(' sum ',' sum ')'
  // The lexer reads `N-1` as `N` and the number `-1`: a signed number after
  // an operand starts the next term.

  /// An arithmetic failure (overflow, a bad divisor) as an error at `t`.
  FailureOr<DimExpr> dimResult(std::optional<DimExpr> e, const Token &t) {
    if (!e)
      return emitError(locOf(t)) << "dim expression overflows int64 or divides by a "
                                    "non-positive number";
    return *e;
  }

  FailureOr<int64_t> parsePositiveInt(const char *what) {
    if (cur().kind != Tok::Number)
      return expected(what);
    int64_t v;
    auto res = std::from_chars(cur().text.data(), cur().text.data() + cur().text.size(), v);
    if (res.ec != std::errc() || res.ptr != cur().text.data() + cur().text.size() || v <= 0)
      return emitError() << "bad divisor '" << cur().text << "': expected a positive integer";
    consume();
    return v;
  }

  FailureOr<DimExpr> parseDimSum() {
    auto lhs = parseDimProduct();
    if (failed(lhs))
      return failure();
    DimExpr sum = *lhs;
    while (true) {
      Token t = cur();
      bool signedNumber = t.kind == Tok::Number && (t.text[0] == '-' || t.text[0] == '+');
      if (t.kind != Tok::Plus && t.kind != Tok::Minus && !signedNumber)
        return sum;
      if (!signedNumber)
        consume(); // a signed number keeps its sign as the next term's
      auto rhs = parseDimProduct();
      if (failed(rhs))
        return failure();
      auto r = dimResult(t.kind == Tok::Minus ? DimExpr::sub(sum, *rhs) : add(sum, *rhs), t);
      if (failed(r))
        return failure();
      sum = *r;
    }
  }

  FailureOr<DimExpr> parseDimProduct() {
    auto lhs = parseDimFactor();
    if (failed(lhs))
      return failure();
    DimExpr prod = *lhs;
    while (cur().kind == Tok::Star || cur().kind == Tok::Slash) {
      Token t = cur();
      consume();
      if (t.kind == Tok::Star) {
        auto rhs = parseDimFactor();
        if (failed(rhs))
          return failure();
        auto r = dimResult(mul(prod, *rhs), t);
        if (failed(r))
          return failure();
        prod = *r;
      } else {
        auto c = parsePositiveInt("a positive integer after '/'");
        if (failed(c))
          return failure();
        auto r = dimResult(DimExpr::floorDiv(prod, *c), t);
        if (failed(r))
          return failure();
        prod = *r;
      }
    }
    return prod;
  }

  FailureOr<DimExpr> parseDimFactor() {
    Token t = cur();
    if (t.kind == Tok::Number) {
      int64_t v;
      const char *b = t.text.data() + (t.text[0] == '+' ? 1 : 0);
      auto res = std::from_chars(b, t.text.data() + t.text.size(), v);
      if (res.ec != std::errc() || res.ptr != t.text.data() + t.text.size())
        return emitError() << "bad dimension '" << t.text
                           << "': expected a non-negative integer, a symbol, an expression or '?'";
      consume();
      return DimExpr(v);
    }
    if (t.kind == Tok::Minus) {
      consume();
      auto f = parseDimFactor();
      if (failed(f))
        return failure();
      return dimResult(DimExpr::neg(*f), t);
    }
    if (t.kind == Tok::LParen) {
      consume();
      auto e = parseDimSum();
      if (failed(e) || failed(expect(Tok::RParen, "')' in the dim expression")))
        return failure();
      return *e;
    }
    if (t.kind != Tok::Ident)
      return expected("a dimension (integer, symbol, expression or '?')");
    consume();
    bool call = cur().kind == Tok::LParen;
    if (!call || (t.text != "mod" && t.text != "min" && t.text != "max"))
      return DimExpr::symbol(t.text);
    consume();
    auto a = parseDimSum();
    if (failed(a) || failed(expect(Tok::Comma, "',' between the operands")))
      return failure();
    std::optional<DimExpr> r;
    if (t.text == "mod") {
      auto c = parsePositiveInt("a positive integer divisor of mod");
      if (failed(c))
        return failure();
      r = DimExpr::mod(*a, *c);
    } else {
      auto b = parseDimSum();
      if (failed(b))
        return failure();
      r = t.text == "min" ? DimExpr::min(*a, *b) : DimExpr::max(*a, *b);
    }
    if (failed(expect(Tok::RParen, "')' after the operands")))
      return failure();
    return dimResult(r, t);
  }

  //===--------------------------------------------------------------------===//
  // Attribute values
  //===--------------------------------------------------------------------===//

  FailureOr<int64_t> parseInt() {
    bool neg = false;
    if (cur().kind == Tok::Minus) {
      neg = true;
      consume();
    }
    if (cur().kind != Tok::Number)
      return expected("an integer");
    std::string text = (neg ? "-" : "") + cur().text;
    if (!text.empty() && text[0] == '+')
      text.erase(0, 1);
    int64_t v;
    auto res = std::from_chars(text.data(), text.data() + text.size(), v);
    if (res.ec == std::errc::result_out_of_range)
      return emitError() << "integer " << text << " is out of range for i64";
    if (res.ec != std::errc() || res.ptr != text.data() + text.size())
      return emitError() << "expected an integer, got '" << text << "'";
    consume();
    return v;
  }

  /// The text of a float literal (with sign), consumed; nullopt on error.
  FailureOr<std::string> floatText() {
    std::string sign;
    if (cur().kind == Tok::Minus) {
      sign = "-";
      consume();
    }
    if (cur().kind == Tok::Ident && (cur().text == "inf" || cur().text == "nan")) {
      std::string t = sign + cur().text;
      consume();
      return t;
    }
    if (cur().kind != Tok::Number)
      return expected("a number");
    std::string t = sign + cur().text;
    if (t[0] == '+')
      t.erase(0, 1);
    consume();
    return t;
  }

  template <typename F> FailureOr<F> toFloat(const std::string &t, const Token &at) {
    std::optional<F> v = floatLiteral<F>(t);
    if (!v)
      return emitError(locOf(at)) << "expected a number, got '" << t << "'";
    return *v;
  }

  FailureOr<double> parseFloat() {
    Token at = cur();
    auto t = floatText();
    if (failed(t))
      return failure();
    return toFloat<double>(*t, at);
  }

  FailureOr<bool> parseBool() {
    if (cur().kind == Tok::Ident && (cur().text == "true" || cur().text == "false")) {
      bool v = cur().text == "true";
      consume();
      return v;
    }
    return expected("'true' or 'false'");
  }

  template <typename T, typename F> FailureOr<std::vector<T>> parseList(F element) {
    if (failed(expect(Tok::LSquare, "'['")))
      return failure();
    std::vector<T> out;
    if (cur().kind != Tok::RSquare) {
      while (true) {
        auto v = element();
        if (failed(v))
          return failure();
        out.push_back(*v);
        if (cur().kind != Tok::Comma)
          break;
        consume();
      }
    }
    if (failed(expect(Tok::RSquare, "',' or ']'")))
      return failure();
    return out;
  }

  FailureOr<Attribute> parseAttrValue(AttrKind kind) {
    switch (kind) {
    case AttrKind::Int: {
      auto v = parseInt();
      if (failed(v))
        return failure();
      return Attribute(*v);
    }
    case AttrKind::Float: {
      auto v = parseFloat();
      if (failed(v))
        return failure();
      return Attribute(*v);
    }
    case AttrKind::Bool: {
      auto v = parseBool();
      if (failed(v))
        return failure();
      return Attribute(*v);
    }
    case AttrKind::String: {
      if (cur().kind != Tok::String)
        return expected("a string");
      std::string s = cur().text;
      consume();
      return Attribute(std::move(s));
    }
    case AttrKind::Ints: {
      auto v = parseList<int64_t>([&] { return parseInt(); });
      if (failed(v))
        return failure();
      return Attribute(v.take());
    }
    case AttrKind::SymInts: {
      auto v = parseList<DimExpr>([&] { return parseDimSum(); });
      if (failed(v))
        return failure();
      return Attribute(v.take());
    }
    case AttrKind::Floats: {
      auto v = parseList<double>([&] { return parseFloat(); });
      if (failed(v))
        return failure();
      return Attribute(v.take());
    }
    case AttrKind::DType: {
      if (cur().kind != Tok::Ident)
        return expected("a dtype");
      auto dt = dtypeFromName(cur().text);
      if (!dt)
        return emitError() << "unknown dtype '" << cur().text << "'";
      consume();
      return Attribute(*dt);
    }
    case AttrKind::Tensor:
      return emitError() << "tensor attributes are written as 'constant dense<...> : type'";
    case AttrKind::Graph: {
      if (cur().kind != Tok::Ident || cur().text != "graph")
        return expected("a region ('graph @name(...) -> (...) { ... }')");
      if (++regionDepth_ > kMaxRegionDepth)
        return emitError() << "regions nest deeper than " << kMaxRegionDepth;
      // A region sees only its own inputs (Note [Regions] in docs/IR.md):
      // the enclosing graph's names are out of scope inside it.
      auto outer = std::move(values_);
      Location outerLoc = graphLoc_;
      auto g = parseGraph();
      values_ = std::move(outer);
      graphLoc_ = outerLoc;
      --regionDepth_;
      if (failed(g))
        return failure();
      return Attribute(GraphAttr(g.take()));
    }
    }
    return failure();
  }

  /// `dense<...>` values as raw literal tokens (sign folded in).
  FailureOr<std::vector<Token>> parseDenseLiteral() {
    if (failed(expectKeyword("dense")) || failed(expect(Tok::Less, "'<' after 'dense'")))
      return failure();
    std::vector<Token> values;
    int depth = 0;
    while (true) {
      if (cur().kind == Tok::LSquare) {
        ++depth;
        consume();
        if (cur().kind == Tok::RSquare)
          continue; // empty list
      }
      if (cur().kind == Tok::RSquare && depth > 0) {
        --depth;
        consume();
      } else {
        Token t = cur();
        std::string sign;
        if (t.kind == Tok::Minus) {
          consume();
          sign = "-";
          t = cur();
        }
        bool ok =
            t.kind == Tok::Number ||
            (t.kind == Tok::Ident && (t.text == "inf" || t.text == "nan" ||
                                      (sign.empty() && (t.text == "true" || t.text == "false"))));
        if (!ok)
          return expected("a number, 'true' or 'false' in the dense literal");
        t.text = sign + t.text;
        values.push_back(t);
        consume();
      }
      while (cur().kind == Tok::RSquare && depth > 0) {
        --depth;
        consume();
      }
      if (depth == 0)
        break;
      if (failed(expect(Tok::Comma, "',' or ']' in the dense literal")))
        return failure();
    }
    if (failed(expect(Tok::Greater, "'>' to close the dense literal")))
      return failure();
    return values;
  }

  //===--------------------------------------------------------------------===//
  // Locations
  //===--------------------------------------------------------------------===//

  FailureOr<Location> parseLocBody(int depth = 0) {
    if (depth > 64)
      return emitError() << "locations are nested more than 64 deep";
    if (cur().kind == Tok::Ident && cur().text == "unknown") {
      consume();
      return Location();
    }
    if (cur().kind == Tok::Ident && cur().text == "fused") {
      consume();
      if (failed(expect(Tok::LSquare, "'[' after 'fused'")))
        return failure();
      std::vector<Location> locs;
      while (true) {
        auto l = parseLocBody(depth + 1);
        if (failed(l))
          return failure();
        locs.push_back(*l);
        if (cur().kind != Tok::Comma)
          break;
        consume();
      }
      if (failed(expect(Tok::RSquare, "',' or ']'")))
        return failure();
      return Location::fused(std::move(locs));
    }
    if (cur().kind != Tok::String)
      return expected("a location: \"file\":line:col, \"name\", 'unknown' or 'fused'");
    std::string s = cur().text;
    consume();
    if (cur().kind == Tok::Colon) {
      consume();
      auto line = parseInt();
      if (failed(line) || failed(expect(Tok::Colon, "':' before the column")))
        return failure();
      auto col = parseInt();
      if (failed(col))
        return failure();
      if (*line < 0 || *col < 0 || *line > UINT32_MAX || *col > UINT32_MAX)
        return emitError() << "location line and column must be non-negative";
      return Location::fileLineCol(s, static_cast<unsigned>(*line), static_cast<unsigned>(*col));
    }
    if (cur().kind == Tok::Ident && cur().text == "in") {
      consume();
      if (cur().kind != Tok::String)
        return expected("a file name after 'in'");
      std::string file = cur().text;
      consume();
      return Location::name(s, file);
    }
    return Location::name(s);
  }

  FailureOr<Location> parseOptionalLoc(Location fallback) {
    if (!(cur().kind == Tok::Ident && cur().text == "loc"))
      return fallback;
    consume();
    if (failed(expect(Tok::LParen, "'(' after 'loc'")))
      return failure();
    auto l = parseLocBody();
    if (failed(l) || failed(expect(Tok::RParen, "')' to close the location")))
      return failure();
    return l;
  }

  //===--------------------------------------------------------------------===//
  // Graphs
  //===--------------------------------------------------------------------===//

  struct ValueDef {
    Value *value;
    Location loc;
  };

  FailureOr<Value *> lookupValue(const Token &t) {
    auto it = values_.find(t.text);
    if (it != values_.end())
      return it->second.value;
    // Is it defined later? Then the text is out of order or has a cycle.
    for (size_t i = pos_ + 1; i + 1 < toks_.size(); ++i) {
      if (toks_[i].kind == Tok::Value && toks_[i].text == t.text &&
          (toks_[i + 1].kind == Tok::Equal || toks_[i + 1].kind == Tok::Comma) &&
          (toks_[i - 1].kind != Tok::LParen && toks_[i - 1].kind != Tok::Comma)) {
        return emitError(locOf(t)) << "value '%" << t.text
                                   << "' is used before it is defined (the graph must be in "
                                      "topological order and free of cycles)";
      }
    }
    return emitError(locOf(t)) << "use of undefined value '%" << t.text << "'";
  }

  LogicalResult defineValue(const Token &t, Value *v) {
    auto [it, inserted] = values_.emplace(t.text, ValueDef{v, locOf(t)});
    if (!inserted) {
      emitError(locOf(t)) << "redefinition of value '%" << t.text << "'";
      diag_.emit(Severity::Note, it->second.loc) << "previous definition here";
      return failure();
    }
    v->setName(t.text);
    return success();
  }

  FailureOr<std::unique_ptr<Graph>> parseGraph() {
    values_.clear();
    graphLoc_ = locOf(cur());
    consume(); // 'graph'
    if (cur().kind != Tok::Symbol)
      return expected("a graph name such as @main");
    auto g = std::make_unique<Graph>(cur().text);
    consume();
    if (failed(expect(Tok::LParen, "'(' to start the graph inputs")))
      return failure();
    if (cur().kind != Tok::RParen) {
      while (true) {
        if (cur().kind != Tok::Value)
          return expected("an input name such as %x");
        Token nameTok = cur();
        consume();
        if (failed(expect(Tok::Colon, "':' and the input's type")))
          return failure();
        auto type = parseType();
        if (failed(type))
          return failure();
        Value *v = g->addInput(type.take());
        if (failed(defineValue(nameTok, v)))
          return failure();
        if (cur().kind != Tok::Comma)
          break;
        consume();
      }
    }
    if (failed(expect(Tok::RParen, "',' or ')' after the graph inputs")) ||
        failed(expect(Tok::Arrow, "'->' and the result types")) ||
        failed(expect(Tok::LParen, "'(' to start the result types")))
      return failure();
    std::vector<std::pair<TensorType, Token>> resultTypes;
    if (cur().kind != Tok::RParen) {
      while (true) {
        Token at = cur();
        auto type = parseType();
        if (failed(type))
          return failure();
        resultTypes.emplace_back(type.take(), at);
        if (cur().kind != Tok::Comma)
          break;
        consume();
      }
    }
    if (failed(expect(Tok::RParen, "',' or ')' after the result types")) ||
        failed(expect(Tok::LBrace, "'{' to start the graph body")))
      return failure();

    while (!(cur().kind == Tok::Ident && cur().text == "return")) {
      if (cur().kind != Tok::Value)
        return expected("a node ('%name = ...') or 'return'");
      if (failed(parseNode(*g)))
        return failure();
    }
    Token retTok = cur();
    consume(); // return
    std::vector<Value *> outs;
    std::vector<Token> outToks;
    if (cur().kind == Tok::Value) {
      while (true) {
        if (cur().kind != Tok::Value)
          return expected("a value to return");
        auto v = lookupValue(cur());
        if (failed(v))
          return failure();
        outs.push_back(*v);
        outToks.push_back(cur());
        consume();
        if (cur().kind != Tok::Comma)
          break;
        consume();
      }
    }
    if (failed(expect(Tok::RBrace, "'}' to close the graph")))
      return failure();
    if (outs.size() != resultTypes.size())
      return emitError(locOf(retTok))
             << "graph '@" << g->name() << "' returns " << outs.size()
             << " value(s) but its signature declares " << resultTypes.size();
    for (size_t i = 0; i < outs.size(); ++i)
      if (!refines(outs[i]->type(), resultTypes[i].first))
        return emitError(locOf(outToks[i]))
               << "returned value '%" << outToks[i].text << "' has type " << outs[i]->type().str()
               << " but result " << i << " is declared " << resultTypes[i].first.str();
    g->setOutputs(outs);
    return g;
  }

  LogicalResult parseNode(Graph &g) {
    std::vector<Token> resultToks;
    while (true) {
      if (cur().kind != Tok::Value)
        return expected("a result name");
      resultToks.push_back(cur());
      consume();
      if (cur().kind != Tok::Comma)
        break;
      consume();
    }
    Location nodeLoc = locOf(resultToks.front());
    if (failed(expect(Tok::Equal, "'=' after the result names")))
      return failure();
    if (cur().kind != Tok::Ident)
      return expected("an op name");
    Token opTok = cur();
    const OpInfo *info = lookupOp(opTok.text);
    if (!info)
      return emitError(locOf(opTok)) << "unknown op '" << opTok.text << "'";
    consume();

    std::vector<Value *> operands;
    std::vector<NamedAttr> named;
    std::vector<Token> dense;
    std::string blobKey;
    Token valueTok = cur();
    bool isConstant = info->kind == OpKind::Constant;
    if (isConstant) {
      if (cur().kind == Tok::Symbol) {
        blobKey = cur().text;
        consume();
      } else if (cur().kind == Tok::Ident && cur().text == "dense") {
        auto d = parseDenseLiteral();
        if (failed(d))
          return failure();
        dense = d.take();
      } else {
        return expected("'@blob' or 'dense<...>' after 'constant'");
      }
    } else {
      if (failed(expect(Tok::LParen, "'(' to start the operands")))
        return failure();
      if (cur().kind != Tok::RParen) {
        while (true) {
          if (cur().kind != Tok::Value)
            return expected("an operand such as %x");
          auto v = lookupValue(cur());
          if (failed(v))
            return failure();
          operands.push_back(*v);
          consume();
          if (cur().kind != Tok::Comma)
            break;
          consume();
        }
      }
      if (failed(expect(Tok::RParen, "',' or ')' after the operands")))
        return failure();
      if (cur().kind == Tok::LBrace) {
        consume();
        if (cur().kind != Tok::RBrace) {
          while (true) {
            if (cur().kind != Tok::Ident)
              return expected("an attribute name");
            Token nameTok = cur();
            int idx = info->attrIndex(nameTok.text);
            if (idx < 0)
              return emitError(locOf(nameTok))
                     << "'" << info->mnemonic << "' op has no attribute '" << nameTok.text << "'";
            for (const auto &[n, v] : named)
              if (n == nameTok.text)
                return emitError(locOf(nameTok))
                       << "attribute '" << nameTok.text << "' is given twice";
            consume();
            if (failed(expect(Tok::Equal, "'=' after the attribute name")))
              return failure();
            AttrKind kind = info->attrs[static_cast<size_t>(idx)].kind;
            Token at = cur();
            auto value = parseAttrValue(kind);
            if (failed(value)) {
              diag_.emit(Severity::Note, locOf(at))
                  << "attribute '" << nameTok.text << "' of '" << info->mnemonic << "' is a "
                  << attrKindName(kind);
              return failure();
            }
            named.emplace_back(nameTok.text, value.take());
            if (cur().kind != Tok::Comma)
              break;
            consume();
          }
        }
        if (failed(expect(Tok::RBrace, "',' or '}' after the attributes")))
          return failure();
      }
    }
    if (failed(expect(Tok::Colon, "':' and the result type(s)")))
      return failure();
    std::vector<TensorType> types;
    while (true) {
      auto t = parseType();
      if (failed(t))
        return failure();
      types.push_back(t.take());
      if (cur().kind != Tok::Comma)
        break;
      consume();
    }
    if (types.size() != resultToks.size())
      return emitError(nodeLoc) << "node defines " << resultToks.size() << " value(s) but gives "
                                << types.size() << " type(s)";
    auto loc = parseOptionalLoc(nodeLoc);
    if (failed(loc))
      return failure();

    if (isConstant) {
      if (!blobKey.empty()) {
        named.emplace_back("value", Tensor()); // filled in by resolveBlobs()
        named.emplace_back("name", blobKey);
      } else {
        auto t = denseLiteralTensor(dense, types[0], valueTok, opts_.filename, diag_);
        if (failed(t))
          return failure();
        named.emplace_back("value", t.take());
      }
    }
    auto attrs = buildAttrs(*info, std::move(named), *loc, diag_);
    if (failed(attrs))
      return failure();
    if (!isConstant)
      fillUnknownDims(*info, operands, *attrs, types, *loc);
    Node *n = g.createNode(*info, operands, types, attrs.take(), *loc);
    for (size_t i = 0; i < resultToks.size(); ++i)
      if (failed(defineValue(resultToks[i], n->result(static_cast<unsigned>(i)))))
        return failure();
    if (!blobKey.empty())
      pending_.push_back(PendingBlob{n, blobKey, locOf(valueTok)});
    return success();
  }

  //===--------------------------------------------------------------------===//
  // Blobs
  //===--------------------------------------------------------------------===//

  LogicalResult parseBlobs() {
    consume(); // blobs
    if (failed(expect(Tok::LBrace, "'{' after 'blobs'")))
      return failure();
    while (cur().kind == Tok::Symbol) {
      Token keyTok = cur();
      consume();
      if (failed(expect(Tok::Equal, "'=' after the blob name")))
        return failure();
      if (blobs_.count(keyTok.text))
        return emitError(locOf(keyTok)) << "blob '@" << keyTok.text << "' is defined twice";
      if (cur().kind == Tok::Ident && cur().text == "elided") {
        blobs_[keyTok.text] = {std::nullopt, locOf(keyTok)};
        consume();
        continue;
      }
      if (cur().kind != Tok::String)
        return expected("a base64 string or 'elided'");
      std::string bytes;
      if (!base64Decode(cur().text, bytes))
        return emitError() << "blob '@" << keyTok.text << "' is not valid base64";
      blobs_[keyTok.text] = {std::move(bytes), locOf(keyTok)};
      consume();
    }
    return expect(Tok::RBrace, "a blob ('@name = \"...\"') or '}'");
  }

  LogicalResult resolveBlobs() {
    for (const PendingBlob &p : pending_) {
      auto it = blobs_.find(p.key);
      if (it == blobs_.end())
        return emitError(p.loc) << "constant refers to undefined blob '@" << p.key << "'";
      const TensorType &type = p.node->result(0)->type();
      if (!it->second.first) {
        const Tensor *given = nullptr;
        if (opts_.blobs)
          if (auto g = opts_.blobs->find(p.key); g != opts_.blobs->end())
            given = &g->second;
        if (!given)
          return emitError(p.loc) << "blob '@" << p.key
                                  << "' was elided when printed; its contents are unknown";
        if (!(given->type() == type))
          return emitError(p.loc) << "blob '@" << p.key << "' holds " << given->type().str()
                                  << " but the constant is " << type.str();
        p.node->setAttr(ConstantOp::value_index, *given);
        continue;
      }
      if (!type.isStatic())
        return emitError(p.loc) << "a constant must have a static type, got " << type.str();
      std::vector<int64_t> sizes = staticSizes(type.shape);
      auto needBytes =
          checkedByteSize(numElements(sizes), dtypeSize(type.dtype), kMaxTensorFileBytes);
      if (!needBytes)
        return emitError(p.loc) << "constant " << type.str() << " is larger than the "
                                << (kMaxTensorFileBytes >> 30) << " GiB limit";
      size_t need = *needBytes;
      const std::string &bytes = *it->second.first;
      if (bytes.size() != need) {
        emitError(p.loc) << "blob '@" << p.key << "' has " << bytes.size() << " bytes but "
                         << type.str() << " needs " << need;
        diag_.emit(Severity::Note, it->second.second) << "blob defined here";
        return failure();
      }
      p.node->setAttr(ConstantOp::value_index, Tensor::fromBytes(type.dtype, sizes, bytes.data()));
    }
    return success();
  }

  DiagnosticEngine &diag_;
  const ParseOptions &opts_;
  std::vector<Token> toks_;
  size_t pos_ = 0;
  std::unordered_map<std::string, ValueDef> values_;
  std::vector<PendingBlob> pending_;
  std::map<std::string, std::pair<std::optional<std::string>, Location>> blobs_;
  Location graphLoc_;
  /// Regions being parsed around the current position; bounded so that a
  /// crafted file cannot exhaust the stack.
  int regionDepth_ = 0;
  static constexpr int kMaxRegionDepth = 64;
};

} // namespace

FailureOr<std::unique_ptr<Module>> parseModule(std::string_view text, DiagnosticEngine &diag,
                                               const ParseOptions &opts) {
  return Parser(text, diag, opts).parseModule();
}

FailureOr<std::unique_ptr<Module>> parseFile(const std::string &path, DiagnosticEngine &diag,
                                             bool verify) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return diag.emitError(Location()) << "cannot open '" << path << "'";
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  diag.addSourceFile(path, text);
  ParseOptions opts;
  opts.filename = path;
  opts.verify = verify;
  return parseModule(text, diag, opts);
}

FailureOr<Attribute> parseAttributeLiteral(AttrKind kind, std::string_view text,
                                           DiagnosticEngine &diag) {
  ParseOptions opts;
  opts.filename = "<attribute>";
  return Parser(text, diag, opts).parseLiteralOnly(kind);
}

FailureOr<GraphAttr> parseRegion(std::string_view text, DiagnosticEngine &diag,
                                 const ParseOptions &opts) {
  auto m = parseModule(text, diag, opts);
  if (failed(m))
    return failure();
  if ((*m)->graphs().size() != 1)
    return diag.emitError(Location())
           << "a region is one graph, the text has " << (*m)->graphs().size();
  return GraphAttr(std::move((*m)->graphs().front()));
}

FailureOr<TensorType> parseTensorType(std::string_view text, DiagnosticEngine &diag) {
  ParseOptions opts;
  opts.filename = "<type>";
  return Parser(text, diag, opts).parseTypeOnly();
}

} // namespace kiln
