//===- CudaHost.h - CUDA's built-ins on the host, for tests -----*- C++ -*-===//
//
// The host emulation the CUDA tests (tests/unit/cuda/Emulation.h) compile
// generated kernels against with g++: a block's threads are fibers of the
// calling thread (when the kernel synchronizes) or a loop (when it does
// not), __syncthreads a barrier of the block, a warp shuffle an exchange
// through memory between two barriers of the warp, and __shared__ memory
// static (one block runs at a time). So the kernels'
// C++, their loops, shuffle trees and shared-memory combining are run on
// machines without a GPU; CUDA's own math library and the device's f16
// conversion instructions are not (the host's libm and Kiln's conversions
// stand in).
//
// Included (with -include) before the prelude; KILN_EMULATION marks it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cmath>
#include <csetjmp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <type_traits>
#include <ucontext.h>
#include <utility>
#include <vector>

#define KILN_EMULATION 1
#define __global__
#define __device__
#define __shared__ static
#define __launch_bounds__(n)

namespace kiln {
float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
} // namespace kiln

inline float kiln_host_half_to_float(unsigned short h) {
  return kiln::halfToFloat(h);
}
inline unsigned short kiln_host_float_to_half(float x) {
  return kiln::floatToHalf(x);
}

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};
inline thread_local dim3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;

inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline double __longlong_as_double(long long u) {
  double d;
  std::memcpy(&d, &u, 8);
  return d;
}
// Not contracted: g++ keeps separate roundings at -ffp-contract=off.
inline float __fmul_rn(float a, float b) {
  return a * b;
}
inline float __fadd_rn(float a, float b) {
  return a + b;
}

namespace kiln_emu {

// A block's threads are fibers of the calling thread: a fiber runs until
// it waits at a barrier or returns, and the scheduler resumes the others
// in turn, so a barrier costs a few context switches, not a futex wake-up
// of 64 threads, and runs are deterministic. A fiber starts on its own
// stack through makecontext and swapcontext; after that, switches are
// _setjmp/_longjmp (swapcontext would also save the signal mask: a system
// call per switch). threadIdx is set for a fiber each time it is resumed.
struct Fiber {
  ucontext_t context;
  jmp_buf resume;
  std::unique_ptr<char[]> stack;
  bool started = false, done = false;
  int waitingOn = -1; ///< barrier number, or -1: runnable
};

struct Scheduler {
  ucontext_t start;
  jmp_buf back; ///< where a fiber that waits or ends returns to
  std::vector<Fiber> fibers;
  size_t current = 0;
  /// Barrier 0 is the block's, 1 + w warp w's.
  std::vector<int> arrived, expected;
  std::vector<unsigned long long> lanes; ///< shuffle slots, one per thread
  const std::function<void()> *kernel = nullptr;
};
inline Scheduler *scheduler = nullptr;

inline void wait(int barrier) {
  Scheduler &s = *scheduler;
  const size_t b = static_cast<size_t>(barrier);
  if (++s.arrived[b] == s.expected[b]) {
    s.arrived[b] = 0; // the last to arrive releases the others, goes on
    for (Fiber &f : s.fibers)
      if (f.waitingOn == barrier)
        f.waitingOn = -1;
    return;
  }
  Fiber &f = s.fibers[s.current];
  f.waitingOn = barrier;
  if (_setjmp(f.resume) == 0)
    _longjmp(s.back, 1);
}

inline void fiberEntry() {
  (*scheduler->kernel)();
  scheduler->fibers[scheduler->current].done = true;
  _longjmp(scheduler->back, 1); // never returns through uc_link
}

} // namespace kiln_emu

inline void __syncthreads() {
  kiln_emu::wait(0);
}
inline void __syncwarp(unsigned = 0xffffffffu) {
  kiln_emu::wait(1 + static_cast<int>(threadIdx.x / 32));
}
namespace kiln_emu {

/// A warp shuffle: each lane puts `v` in its slot and takes lane `from`'s
/// (a lane of its own warp), between two barriers of the warp.
template <typename T> T exchange(T v, unsigned from) {
  static_assert(sizeof(T) <= 8);
  Scheduler &s = *scheduler;
  unsigned long long bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  s.lanes[threadIdx.x] = bits;
  __syncwarp();
  bits = s.lanes[(threadIdx.x & ~31u) | (from & 31u)];
  __syncwarp();
  T r;
  std::memcpy(&r, &bits, sizeof(T));
  return r;
}

} // namespace kiln_emu

template <typename T> T __shfl_xor_sync(unsigned, T v, int mask) {
  return kiln_emu::exchange(v, threadIdx.x ^ static_cast<unsigned>(mask));
}
template <typename T> T __shfl_sync(unsigned, T v, int srcLane) {
  return kiln_emu::exchange(v, static_cast<unsigned>(srcLane));
}

namespace kiln_emu {

/// Runs `kernel` as a grid of `grid` blocks of `block` threads, one block
/// after another: in a loop when `synchronizes` is false, else as fibers
/// (a deadlock, a barrier some threads never reach, aborts).
inline void launch(unsigned grid, unsigned block, bool synchronizes,
                   const std::function<void()> &kernel) {
  gridDim = {grid, 1, 1};
  blockDim = {block, 1, 1};
  for (unsigned b = 0; b < grid; ++b) {
    blockIdx = {b, 1, 1};
    if (!synchronizes) {
      for (unsigned t = 0; t < block; ++t) {
        threadIdx = {t, 1, 1};
        kernel();
      }
      continue;
    }
    Scheduler s;
    s.kernel = &kernel;
    s.fibers.resize(block);
    s.lanes.assign(block, 0);
    s.expected.push_back(static_cast<int>(block));
    for (unsigned w = 0; w < (block + 31) / 32; ++w)
      s.expected.push_back(32);
    s.arrived.assign(s.expected.size(), 0);
    constexpr size_t kStack = 256 * 1024;
    for (Fiber &f : s.fibers) {
      f.stack.reset(new char[kStack]);
      getcontext(&f.context);
      f.context.uc_stack.ss_sp = f.stack.get();
      f.context.uc_stack.ss_size = kStack;
      f.context.uc_link = nullptr;
      makecontext(&f.context, fiberEntry, 0);
    }
    scheduler = &s;
    for (bool progress = true; progress;) {
      progress = false;
      for (size_t i = 0; i < s.fibers.size(); ++i) {
        Fiber &f = s.fibers[i];
        if (f.done || f.waitingOn >= 0)
          continue;
        s.current = i;
        threadIdx = {static_cast<unsigned>(i), 1, 1};
        progress = true;
        if (_setjmp(s.back) != 0)
          continue; // the fiber waits or has ended
        if (!f.started) {
          f.started = true;
          swapcontext(&s.start, &f.context);
        } else {
          _longjmp(f.resume, 1);
        }
      }
    }
    for (const Fiber &f : s.fibers)
      if (!f.done) {
        std::fprintf(stderr, "kiln_emu: deadlock: thread %u of block %u waits at barrier %d\n",
                     static_cast<unsigned>(&f - s.fibers.data()), b, f.waitingOn);
        std::abort();
      }
    scheduler = nullptr;
  }
}

} // namespace kiln_emu

namespace kiln_emu {

/// Kernel parameter number `i` of type `P`: buffer `b[i]` (a pointer
/// parameter) or the launch's sizes (the struct of sizes, after them).
template <typename P> P arg(void **b, size_t i, const long long *sizes) {
  if constexpr (std::is_pointer_v<P>) {
    return static_cast<P>(b[i]);
  } else {
    P s;
    std::memcpy(s.v, sizes, sizeof s.v);
    return s;
  }
}

/// Calls kernel `fn` with buffers `b` (in parameter order) and `sizes`.
template <typename... P> void call(void (*fn)(P...), void **b, const long long *sizes) {
  [&]<size_t... I>(std::index_sequence<I...>) {
    fn(arg<P>(b, I, sizes)...);
  }
  (std::index_sequence_for<P...>{});
}

} // namespace kiln_emu

/// The launcher of kernel NAME the emulated device calls (tests/unit/cuda/
/// Emulation.h): `launch_NAME(buffers, sizes, grid, block, synchronizes)`.
#define KILN_EMU_LAUNCHER(NAME)                                                                    \
  extern "C" void launch_##NAME(void **b, const long long *sizes, unsigned grid, unsigned block,   \
                                bool synchronizes) {                                               \
    kiln_emu::launch(grid, block, synchronizes, [&] { kiln_emu::call(NAME, b, sizes); });          \
  }
