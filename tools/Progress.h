//===- Progress.h - A progress line for long compiles -----------*- C++ -*-===//
//
// While alive, prints `kiln: compiling MODEL ...` on stderr once a second has
// passed, and `kiln: compiled MODEL in 2.4 s` when it ends, but only when
// stderr is a terminal: logs and pipes see nothing.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

namespace kiln::tools {

class CompileProgress {
public:
  explicit CompileProgress(std::string what)
      : what_(std::move(what)), start_(std::chrono::steady_clock::now()) {
    if (!isatty(STDERR_FILENO))
      return;
    thread_ = std::thread([this] {
      std::unique_lock<std::mutex> lock(mutex_);
      if (!cv_.wait_for(lock, std::chrono::seconds(1), [this] { return done_; })) {
        std::fprintf(stderr, "kiln: compiling %s ...\n", what_.c_str());
        shown_ = true;
      }
    });
  }
  ~CompileProgress() {
    if (!thread_.joinable())
      return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    cv_.notify_one();
    thread_.join();
    if (shown_)
      std::fprintf(
          stderr, "kiln: compiled %s in %.1f s\n", what_.c_str(),
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
  }
  CompileProgress(const CompileProgress &) = delete;
  CompileProgress &operator=(const CompileProgress &) = delete;

private:
  std::string what_;
  std::chrono::steady_clock::time_point start_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false, shown_ = false;
  std::thread thread_;
};

} // namespace kiln::tools
