//===- Support.h - Result types and internal assertions ---------*- C++ -*-===//
//
// LogicalResult and FailureOr<T> are how Kiln's library code reports failure
// on user input; the diagnostic itself has already gone to a
// DiagnosticEngine. KILN_ASSERT and kiln_unreachable guard Kiln's own
// invariants only: nothing a user can write may reach them.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <utility>

namespace kiln {

/// Success or failure of an operation whose error was already reported.
class [[nodiscard]] LogicalResult {
public:
  static LogicalResult success() { return LogicalResult(true); }
  static LogicalResult failure() { return LogicalResult(false); }
  bool succeeded() const { return ok_; }
  bool failed() const { return !ok_; }

private:
  explicit LogicalResult(bool ok) : ok_(ok) {}
  bool ok_;
};

inline LogicalResult success() {
  return LogicalResult::success();
}
inline LogicalResult failure() {
  return LogicalResult::failure();
}
inline bool succeeded(LogicalResult r) {
  return r.succeeded();
}
inline bool failed(LogicalResult r) {
  return r.failed();
}

/// A value, or failure whose diagnostic was already reported.
template <typename T> class [[nodiscard]] FailureOr {
public:
  FailureOr(LogicalResult r) { (void)r; } // only failure() makes sense here
  FailureOr(T value) : value_(std::move(value)) {}
  bool succeeded() const { return value_.has_value(); }
  bool failed() const { return !value_.has_value(); }
  explicit operator bool() const { return succeeded(); }
  T &operator*() { return *value_; }
  const T &operator*() const { return *value_; }
  T *operator->() { return &*value_; }
  const T *operator->() const { return &*value_; }
  T take() { return std::move(*value_); }

private:
  std::optional<T> value_;
};

template <typename T> bool failed(const FailureOr<T> &r) {
  return r.failed();
}

/// Float -> integer conversion as every path of Kiln does it: truncate
/// toward zero, saturate at the type's range, NaN -> 0 (never undefined
/// behaviour).
template <typename T> T saturatingFloatToInt(double v) {
  if (std::isnan(v))
    return 0;
  double t = std::trunc(v);
  if (t <= static_cast<double>(std::numeric_limits<T>::lowest()))
    return std::numeric_limits<T>::lowest();
  if (t >= static_cast<double>(std::numeric_limits<T>::max()))
    return std::numeric_limits<T>::max();
  return static_cast<T>(t);
}

[[noreturn]] inline void reportFatalInternal(const char *what, const char *file, int line) {
  std::fprintf(stderr, "kiln internal error: %s at %s:%d\n", what, file, line);
  std::abort();
}

} // namespace kiln

#if defined(KILN_ENABLE_ASSERTIONS) || !defined(NDEBUG)
#define KILN_ASSERT(cond)                                                                          \
  do {                                                                                             \
    if (!(cond))                                                                                   \
      ::kiln::reportFatalInternal("assertion failed: " #cond, __FILE__, __LINE__);                 \
  } while (0)
#else
#define KILN_ASSERT(cond) ((void)0)
#endif

#define kiln_unreachable(why) ::kiln::reportFatalInternal("unreachable: " why, __FILE__, __LINE__)
