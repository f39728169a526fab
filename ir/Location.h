//===- Location.h - Source locations of nodes -------------------*- C++ -*-===//
//
// Where a node came from: a file position (a .kir file, or the C++ call site
// that a tracer recorded), a name (an ONNX node name, with the model path as
// its file), several fused locations, or unknown. Text form:
//   loc("model.kir":12:8)   loc("Conv_3")   loc(fused["a", "b":1:2])   loc(unknown)
//
//===----------------------------------------------------------------------===//
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace kiln {

class Location {
public:
  enum class Kind { Unknown, FileLineCol, Name, Fused };

  Location() = default;
  static Location fileLineCol(std::string file, unsigned line, unsigned col);
  /// A whole file (a model, a tensor file): a FileLineCol with line 0,
  /// printed in diagnostics as just `file`.
  static Location file(std::string file) { return fileLineCol(std::move(file), 0, 0); }
  /// A named location (an ONNX node name); `file` optionally names the model.
  static Location name(std::string name, std::string file = "");
  static Location fused(std::vector<Location> locs);

  Kind kind() const { return kind_; }
  bool isUnknown() const { return kind_ == Kind::Unknown; }
  const std::string &file() const { return file_; }
  const std::string &nameStr() const { return name_; }
  unsigned line() const { return line_; }
  unsigned col() const { return col_; }
  const std::vector<Location> &children() const;

  /// The `loc(...)` text form.
  std::string str() const;
  /// The prefix of a diagnostic: `file:line:col`, `file: node 'name'`, ...
  std::string diagPrefix() const;
  bool operator==(const Location &o) const;
  bool operator!=(const Location &o) const { return !(*this == o); }

private:
  Kind kind_ = Kind::Unknown;
  std::string file_, name_;
  unsigned line_ = 0, col_ = 0;
  std::shared_ptr<const std::vector<Location>> children_;
};

} // namespace kiln
