//===- Diagnostics.h - Located errors, warnings and notes -------*- C++ -*-===//
//
// Every error a user can cause becomes a Diagnostic: a severity, a Location,
// a message (lowercase, no final period, offending values included) and
// notes. A DiagnosticEngine hands each one to its handlers: the CLI prints
// `file:line:col: error: ...` with the source line and a caret, the JIT API
// collects them, tests capture them.
//
//   emitError(node->loc()) << "'transpose' op perm " << perm << " is ...";
//
// The diagnostic is sent when the InFlightDiagnostic goes out of scope.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Location.h"
#include "ir/Support.h"

#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace kiln {

enum class Severity { Error, Warning, Note, Remark };

struct Diagnostic {
  Severity severity = Severity::Error;
  Location loc;
  std::string message;
  std::vector<Diagnostic> notes;

  /// `prefix: error: message` plus notes, one per line (no source excerpt).
  std::string str() const;
  /// `prefix: message` (just the message where the location is unknown),
  /// for quoting a diagnostic inside another line.
  std::string located() const;
};

class DiagnosticEngine;

/// A diagnostic being composed; sent to the engine on destruction.
class InFlightDiagnostic {
public:
  InFlightDiagnostic(DiagnosticEngine *engine, Diagnostic d)
      : engine_(engine), diag_(std::move(d)) {}
  InFlightDiagnostic(InFlightDiagnostic &&o) noexcept
      : engine_(o.engine_), diag_(std::move(o.diag_)) {
    o.engine_ = nullptr;
  }
  InFlightDiagnostic(const InFlightDiagnostic &) = delete;
  ~InFlightDiagnostic();

  template <typename T> InFlightDiagnostic &operator<<(const T &v) {
    std::ostringstream os;
    os << v;
    diag_.message += os.str();
    return *this;
  }
  InFlightDiagnostic &operator<<(const std::vector<int64_t> &v);
  /// Attaches a note at `loc` ("producer defined here").
  InFlightDiagnostic &attachNote(Location loc, std::string message);
  /// Lets `return emitError(...) << ...;` produce a failure.
  operator LogicalResult() const { return failure(); }
  template <typename T> operator FailureOr<T>() const { return failure(); }

private:
  DiagnosticEngine *engine_;
  Diagnostic diag_;
};

/// Receives diagnostics and passes them to its handlers (the latest first;
/// a handler returning true stops the chain).
class DiagnosticEngine {
public:
  using Handler = std::function<bool(const Diagnostic &)>;

  InFlightDiagnostic emit(Severity s, Location loc);
  InFlightDiagnostic emitError(Location loc) { return emit(Severity::Error, std::move(loc)); }
  InFlightDiagnostic emitWarning(Location loc) { return emit(Severity::Warning, std::move(loc)); }

  void report(Diagnostic d);
  void pushHandler(Handler h) { handlers_.push_back(std::move(h)); }
  void popHandler() { handlers_.pop_back(); }
  unsigned numErrors() const { return numErrors_; }
  bool hadError() const { return numErrors_ > 0; }

  /// Registers the text of a source file so that printed diagnostics can
  /// show the offending line with a caret.
  void addSourceFile(const std::string &name, std::string text) {
    sources_[name] = std::move(text);
  }
  /// Formats `d` as the CLI prints it, with source excerpts where known.
  std::string format(const Diagnostic &d) const;

private:
  std::vector<Handler> handlers_;
  std::map<std::string, std::string> sources_;
  unsigned numErrors_ = 0;
};

/// Collects every diagnostic sent to `engine` while alive (for APIs and tests).
class ScopedDiagnosticCollector {
public:
  explicit ScopedDiagnosticCollector(DiagnosticEngine &engine);
  ~ScopedDiagnosticCollector();
  const std::vector<Diagnostic> &diagnostics() const { return diags_; }
  /// All messages joined by newlines, formatted with their prefixes.
  std::string str() const;

private:
  DiagnosticEngine &engine_;
  std::vector<Diagnostic> diags_;
};

/// Installs a handler that prints to stderr as the CLI does.
void installStderrHandler(DiagnosticEngine &engine);

} // namespace kiln
