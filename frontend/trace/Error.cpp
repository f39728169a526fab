//===- Error.cpp - The one error type of the public API ---------*- C++ -*-===//
#include "kiln/Error.h"

namespace kiln {
namespace {
std::string joined(const std::vector<Diagnostic> &diagnostics) {
  std::string s;
  for (const Diagnostic &d : diagnostics)
    s += (s.empty() ? "" : "\n") + d.str();
  return s;
}

std::vector<Diagnostic> unlocated(const std::string &message) {
  Diagnostic d;
  d.message = message;
  return {d};
}
} // namespace

Error::Error(std::vector<Diagnostic> diagnostics)
    : std::runtime_error(joined(diagnostics)), diagnostics_(std::move(diagnostics)) {}

Error::Error(const std::string &message) : Error(unlocated(message)) {}

} // namespace kiln
