//===- Error.h - The one error type of the public API ------------*- C++ -*-===//
//
// Inside Kiln, user errors are located diagnostics (ir/Diagnostics.h). At the
// public C++ API (the eager tensor functions, the building blocks, trace()),
// a failure is reported in exactly one way: a thrown kiln::Error whose
// what() is the located diagnostic text, one line per diagnostic and note:
//
//   model.cpp:42:13: error: 'matmul' op contracting dims 3 and 4 do not match in f32[2,3] x
//   f32[4,5]
//
// The structured diagnostics stay available through diagnostics().
// See docs/API.md.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Diagnostics.h"

#include <stdexcept>
#include <string>
#include <vector>

namespace kiln {

/// The exception thrown by the public API on bad input (wrong shapes or
/// dtypes, bad attributes, unreadable parameter files, a failed trace check).
class Error : public std::runtime_error {
public:
  /// An error made of located diagnostics; what() joins their text.
  explicit Error(std::vector<Diagnostic> diagnostics);
  /// An error without a location.
  explicit Error(const std::string &message);

  /// The diagnostics, in the order they were reported (at least one).
  const std::vector<Diagnostic> &diagnostics() const { return diagnostics_; }

private:
  std::vector<Diagnostic> diagnostics_;
};

} // namespace kiln
