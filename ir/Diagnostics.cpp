//===- Diagnostics.cpp - Located errors, warnings and notes -----*- C++ -*-===//
#include "ir/Diagnostics.h"

#include <iostream>

namespace kiln {
namespace {
const char *severityName(Severity s) {
  switch (s) {
  case Severity::Error:
    return "error";
  case Severity::Warning:
    return "warning";
  case Severity::Note:
    return "note";
  case Severity::Remark:
    return "remark";
  }
  return "error";
}

std::string prefix(const Diagnostic &d) {
  return d.loc.isUnknown() ? std::string() : d.loc.diagPrefix() + ": ";
}

std::string plain(const Diagnostic &d) {
  return prefix(d) + severityName(d.severity) + ": " + d.message;
}
} // namespace

std::string Diagnostic::located() const {
  return prefix(*this) + message;
}

std::string Diagnostic::str() const {
  std::string s = plain(*this);
  for (const Diagnostic &n : notes)
    s += "\n" + plain(n);
  return s;
}

InFlightDiagnostic::~InFlightDiagnostic() {
  if (engine_)
    engine_->report(std::move(diag_));
}

InFlightDiagnostic &InFlightDiagnostic::operator<<(const std::vector<int64_t> &v) {
  diag_.message += "[";
  for (size_t i = 0; i < v.size(); ++i)
    diag_.message += (i ? ", " : "") + std::to_string(v[i]);
  diag_.message += "]";
  return *this;
}

InFlightDiagnostic &InFlightDiagnostic::attachNote(Location loc, std::string message) {
  Diagnostic n;
  n.severity = Severity::Note;
  n.loc = std::move(loc);
  n.message = std::move(message);
  diag_.notes.push_back(std::move(n));
  return *this;
}

InFlightDiagnostic DiagnosticEngine::emit(Severity s, Location loc) {
  Diagnostic d;
  d.severity = s;
  d.loc = std::move(loc);
  return InFlightDiagnostic(this, std::move(d));
}

void DiagnosticEngine::report(Diagnostic d) {
  if (d.severity == Severity::Error)
    ++numErrors_;
  for (auto it = handlers_.rbegin(); it != handlers_.rend(); ++it)
    if ((*it)(d))
      return;
  if (handlers_.empty())
    std::cerr << format(d) << "\n";
}

std::string DiagnosticEngine::format(const Diagnostic &d) const {
  auto one = [&](const Diagnostic &x) {
    std::string s = plain(x);
    if (x.loc.kind() != Location::Kind::FileLineCol)
      return s;
    auto it = sources_.find(x.loc.file());
    if (it == sources_.end() || x.loc.line() == 0)
      return s;
    const std::string &text = it->second;
    size_t pos = 0;
    for (unsigned l = 1; l < x.loc.line() && pos != std::string::npos; ++l) {
      pos = text.find('\n', pos);
      if (pos != std::string::npos)
        ++pos;
    }
    if (pos == std::string::npos || pos > text.size())
      return s;
    size_t end = text.find('\n', pos);
    std::string line = text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    s += "\n" + line + "\n" + std::string(x.loc.col() > 0 ? x.loc.col() - 1 : 0, ' ') + "^";
    return s;
  };
  std::string s = one(d);
  for (const Diagnostic &n : d.notes)
    s += "\n" + one(n);
  return s;
}

ScopedDiagnosticCollector::ScopedDiagnosticCollector(DiagnosticEngine &engine) : engine_(engine) {
  engine_.pushHandler([this](const Diagnostic &d) {
    diags_.push_back(d);
    return true;
  });
}

ScopedDiagnosticCollector::~ScopedDiagnosticCollector() {
  engine_.popHandler();
}

std::string ScopedDiagnosticCollector::str() const {
  std::string s;
  for (const Diagnostic &d : diags_)
    s += (s.empty() ? "" : "\n") + d.str();
  return s;
}

void installStderrHandler(DiagnosticEngine &engine) {
  engine.pushHandler([&engine](const Diagnostic &d) {
    std::cerr << engine.format(d) << "\n";
    return true;
  });
}

} // namespace kiln
