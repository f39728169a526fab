//===- Location.cpp - Source locations of nodes -----------------*- C++ -*-===//
#include "ir/Location.h"

namespace kiln {
namespace {
std::string quote(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "\"";
}
} // namespace

Location Location::fileLineCol(std::string file, unsigned line, unsigned col) {
  Location l;
  l.kind_ = Kind::FileLineCol;
  l.file_ = std::move(file);
  l.line_ = line;
  l.col_ = col;
  return l;
}

Location Location::name(std::string name, std::string file) {
  Location l;
  l.kind_ = Kind::Name;
  l.name_ = std::move(name);
  l.file_ = std::move(file);
  return l;
}

Location Location::fused(std::vector<Location> locs) {
  if (locs.size() == 1)
    return locs[0];
  Location l;
  l.kind_ = Kind::Fused;
  l.children_ = std::make_shared<const std::vector<Location>>(std::move(locs));
  return l;
}

const std::vector<Location> &Location::children() const {
  static const std::vector<Location> kEmpty;
  return children_ ? *children_ : kEmpty;
}

std::string Location::str() const {
  std::string body;
  switch (kind_) {
  case Kind::Unknown:
    body = "unknown";
    break;
  case Kind::FileLineCol:
    body = quote(file_) + ":" + std::to_string(line_) + ":" + std::to_string(col_);
    break;
  case Kind::Name:
    body = quote(name_);
    if (!file_.empty())
      body += " in " + quote(file_);
    break;
  case Kind::Fused: {
    body = "fused[";
    bool first = true;
    for (const Location &c : children()) {
      std::string s = c.str(); // "loc(...)"
      body += (first ? "" : ", ") + s.substr(4, s.size() - 5);
      first = false;
    }
    body += "]";
    break;
  }
  }
  return "loc(" + body + ")";
}

std::string Location::diagPrefix() const {
  switch (kind_) {
  case Kind::Unknown:
    return "<unknown>";
  case Kind::FileLineCol:
    if (line_ == 0)
      return file_;
    return file_ + ":" + std::to_string(line_) + ":" + std::to_string(col_);
  case Kind::Name:
    return (file_.empty() ? std::string() : file_ + ": ") + "node '" + name_ + "'";
  case Kind::Fused:
    return children().empty() ? "<unknown>" : children().front().diagPrefix();
  }
  return "<unknown>";
}

bool Location::operator==(const Location &o) const {
  return kind_ == o.kind_ && file_ == o.file_ && name_ == o.name_ && line_ == o.line_ &&
         col_ == o.col_ && children() == o.children();
}

} // namespace kiln
