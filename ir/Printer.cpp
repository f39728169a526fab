//===- Printer.cpp - The text form of graphs --------------------*- C++ -*-===//
#include "ir/Printer.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

namespace kiln {
namespace {

bool isBareNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '$';
}

std::string symbolText(char sigil, const std::string &name) {
  bool bare = !name.empty() && std::all_of(name.begin(), name.end(), isBareNameChar);
  if (bare)
    return std::string(1, sigil) + name;
  std::string out = std::string(1, sigil) + "\"";
  for (char c : name) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "\"";
}

/// Blob contents of a module, keyed by blob name, assigned while printing.
struct BlobTable {
  std::map<std::string, Tensor> blobs;
  std::unordered_map<const Node *, std::string> keyOf;

  std::string assign(const Node *n, const std::string &wanted) {
    const Tensor &t = ConstantOp(*n).value();
    std::string key = wanted;
    for (int i = 1;; ++i) {
      auto it = blobs.find(key);
      if (it == blobs.end()) {
        blobs.emplace(key, t);
        break;
      }
      if (it->second.bitwiseEqual(t))
        break;
      key = wanted + "." + std::to_string(i);
    }
    keyOf[n] = key;
    return key;
  }
};

class GraphPrinter {
public:
  /// `indent` prefixes every line after the first (regions print nested).
  GraphPrinter(const Graph &g, const PrintOptions &opts, BlobTable &blobs, std::string indent = "")
      : g_(g), opts_(opts), blobs_(blobs), indent_(std::move(indent)) {}

  std::string print() {
    nameValues();
    std::string s = "graph " + symbolText('@', g_.name()) + "(";
    for (unsigned i = 0; i < g_.numInputs(); ++i)
      s += (i ? ", " : "") + ref(g_.input(i)) + ": " + g_.input(i)->type().str();
    s += ") -> (";
    for (size_t i = 0; i < g_.outputs().size(); ++i)
      s += (i ? ", " : "") + g_.outputs()[i]->type().str();
    s += ") {\n";
    for (Node *n : g_.nodes())
      s += indent_ + "  " + printNode(n) + "\n";
    s += indent_ + "  return";
    for (size_t i = 0; i < g_.outputs().size(); ++i)
      s += (i ? ", " : " ") + ref(g_.outputs()[i]);
    return s + "\n" + indent_ + "}";
  }

private:
  void nameValues() {
    std::set<std::string> taken;
    auto claim = [&](const Value *v) {
      if (!v->name().empty() && taken.insert(v->name()).second)
        names_[v] = v->name();
    };
    for (Value *v : g_.inputs())
      claim(v);
    for (Node *n : g_.nodes())
      for (unsigned i = 0; i < n->numResults(); ++i)
        claim(n->result(i));
    unsigned counter = 0;
    auto number = [&](const Value *v) {
      if (names_.count(v))
        return;
      std::string name;
      do
        name = std::to_string(counter++);
      while (taken.count(name));
      taken.insert(name);
      names_[v] = name;
    };
    for (Value *v : g_.inputs())
      number(v);
    for (Node *n : g_.nodes())
      for (unsigned i = 0; i < n->numResults(); ++i)
        number(n->result(i));
  }

  std::string ref(const Value *v) {
    auto it = names_.find(v);
    return it == names_.end() ? std::string("%<<unknown>>") : symbolText('%', it->second);
  }

  std::string printNode(const Node *n) {
    std::string s;
    for (unsigned i = 0; i < n->numResults(); ++i)
      s += (i ? ", " : "") + ref(n->result(i));
    s += " = " + std::string(n->mnemonic());
    if (n->kind() == OpKind::Constant) {
      ConstantOp c(*n);
      const Tensor &t = c.value();
      if (!c.name().empty() || t.numel() > opts_.inlineLimit) {
        std::string wanted = c.name().empty() ? "cst." + names_[n->result(0)] : c.name();
        s += " " + symbolText('@', blobs_.assign(n, wanted));
      } else {
        s += " " + denseStr(t);
      }
    } else {
      s += "(";
      for (unsigned i = 0; i < n->numOperands(); ++i)
        s += (i ? ", " : "") + ref(n->operand(i));
      s += ")";
      std::vector<std::pair<std::string_view, std::string>> attrs;
      const OpInfo &info = n->info();
      for (unsigned i = 0; i < info.attrs.size(); ++i) {
        if (!info.isRequired(i) && attrEqual(n->attr(i), info.defaults[i]))
          continue;
        const auto *region = std::get_if<GraphAttr>(&n->attr(i));
        attrs.emplace_back(info.attrs[i].name,
                           region && *region
                               ? GraphPrinter(**region, opts_, blobs_, indent_ + "    ").print()
                               : attrStr(n->attr(i)));
      }
      std::sort(attrs.begin(), attrs.end());
      if (!attrs.empty()) {
        s += " {";
        for (size_t i = 0; i < attrs.size(); ++i)
          s += (i ? ", " : "") + std::string(attrs[i].first) + " = " + attrs[i].second;
        s += "}";
      }
    }
    s += " : ";
    for (unsigned i = 0; i < n->numResults(); ++i)
      s += (i ? ", " : "") + n->result(i)->type().str();
    if (opts_.printLocs)
      s += " " + n->loc().str();
    return s;
  }

  const Graph &g_;
  const PrintOptions &opts_;
  BlobTable &blobs_;
  std::string indent_;
  std::unordered_map<const Value *, std::string> names_;
};

std::string printBlobs(const BlobTable &blobs, const PrintOptions &opts) {
  if (opts.elideBlobs && opts.blobsOut)
    for (const auto &[key, t] : blobs.blobs)
      opts.blobsOut->emplace(key, t);
  if (blobs.blobs.empty())
    return "";
  std::string s = "\nblobs {\n";
  for (const auto &[key, t] : blobs.blobs) {
    s += "  " + symbolText('@', key) + " = ";
    s += opts.elideBlobs ? std::string("elided")
                         : "\"" + base64Encode(t.rawData(), t.byteSize()) + "\"";
    s += "\n";
  }
  return s + "}\n";
}

const char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

} // namespace

std::string valueRef(const std::string &name) {
  return symbolText('%', name);
}

std::string printModule(const Module &m, const PrintOptions &opts) {
  BlobTable blobs;
  std::string s;
  for (size_t i = 0; i < m.graphs().size(); ++i) {
    if (i)
      s += "\n";
    s += GraphPrinter(*m.graphs()[i], opts, blobs).print() + "\n";
  }
  return s + printBlobs(blobs, opts);
}

std::string printGraph(const Graph &g, const PrintOptions &opts) {
  BlobTable blobs;
  std::string s = GraphPrinter(g, opts, blobs).print() + "\n";
  return s + printBlobs(blobs, opts);
}

std::string base64Encode(const void *data, size_t size) {
  const auto *p = static_cast<const unsigned char *>(data);
  std::string out;
  out.reserve((size + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < size; i += 3) {
    uint32_t v = (uint32_t(p[i]) << 16) | (uint32_t(p[i + 1]) << 8) | p[i + 2];
    out += kB64[(v >> 18) & 63];
    out += kB64[(v >> 12) & 63];
    out += kB64[(v >> 6) & 63];
    out += kB64[v & 63];
  }
  if (i < size) {
    uint32_t v = uint32_t(p[i]) << 16;
    if (i + 1 < size)
      v |= uint32_t(p[i + 1]) << 8;
    out += kB64[(v >> 18) & 63];
    out += kB64[(v >> 12) & 63];
    out += i + 1 < size ? kB64[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

bool base64Decode(std::string_view text, std::string &out) {
  if (text.size() % 4 != 0)
    return false;
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z')
      return c - 'A';
    if (c >= 'a' && c <= 'z')
      return c - 'a' + 26;
    if (c >= '0' && c <= '9')
      return c - '0' + 52;
    if (c == '+')
      return 62;
    if (c == '/')
      return 63;
    return -1;
  };
  out.clear();
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    int a = val(text[i]), b = val(text[i + 1]);
    bool pad2 = text[i + 2] == '=', pad3 = text[i + 3] == '=';
    bool last = i + 4 == text.size();
    if (a < 0 || b < 0 || ((pad2 || pad3) && !last) || (pad2 && !pad3))
      return false;
    int c = pad2 ? 0 : val(text[i + 2]), d = pad3 ? 0 : val(text[i + 3]);
    if (c < 0 || d < 0)
      return false;
    uint32_t v = (uint32_t(a) << 18) | (uint32_t(b) << 12) | (uint32_t(c) << 6) | uint32_t(d);
    out += static_cast<char>((v >> 16) & 255);
    if (!pad2)
      out += static_cast<char>((v >> 8) & 255);
    if (!pad3)
      out += static_cast<char>(v & 255);
  }
  return true;
}

} // namespace kiln
