//===- ByteStream.h - Little binary writer and checked reader ---*- C++ -*-===//
//
// The payload format of saved extern steps (runtime::SavedStep): values
// appended in order, little-endian as the host is (artifacts are x86-64
// only), read back in the same order. The reader never reads past its end:
// a short or corrupt payload makes ok() false and every later read return
// zeros, so a loader checks ok() once at the end.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace kiln::runtime {

class ByteWriter {
public:
  template <typename T> void pod(const T &v) {
    static_assert(std::is_trivially_copyable_v<T>);
    bytes(&v, sizeof(T));
  }
  void bytes(const void *p, size_t n) { out_.append(static_cast<const char *>(p), n); }
  void str(std::string_view s) {
    pod<uint64_t>(s.size());
    bytes(s.data(), s.size());
  }
  template <typename T> void vec(const std::vector<T> &v) {
    pod<uint64_t>(v.size());
    for (const T &x : v)
      pod(x);
  }
  std::string take() { return std::move(out_); }

private:
  std::string out_;
};

class ByteReader {
public:
  explicit ByteReader(std::string_view in) : in_(in) {}
  template <typename T> T pod() {
    static_assert(std::is_trivially_copyable_v<T>);
    T v{};
    bytes(&v, sizeof(T));
    return v;
  }
  void bytes(void *p, size_t n) {
    if (!ok_ || in_.size() - at_ < n) {
      ok_ = false;
      std::memset(p, 0, n);
      return;
    }
    std::memcpy(p, in_.data() + at_, n);
    at_ += n;
  }
  std::string str() {
    uint64_t n = pod<uint64_t>();
    if (!ok_ || n > in_.size() - at_) {
      ok_ = false;
      return {};
    }
    std::string s(in_.substr(at_, n));
    at_ += n;
    return s;
  }
  template <typename T> std::vector<T> vec() {
    uint64_t n = pod<uint64_t>();
    if (!ok_ || n > (in_.size() - at_) / sizeof(T)) {
      ok_ = false;
      return {};
    }
    std::vector<T> v(n);
    for (T &x : v)
      x = pod<T>();
    return v;
  }
  /// True when every read so far was in bounds and valid.
  bool ok() const { return ok_; }
  /// Marks the payload corrupt (a value read was out of range).
  void fail() { ok_ = false; }
  /// True when the payload was read to its end and no read failed.
  bool done() const { return ok_ && at_ == in_.size(); }

private:
  std::string_view in_;
  size_t at_ = 0;
  bool ok_ = true;
};

} // namespace kiln::runtime
