//===- CudaHost.h - CUDA's built-ins on the host, for tests -----*- C++ -*-===//
//
// The host emulation the CUDA matrix (tests/unit/compiler/CudaMatrixTest.cpp)
// compiles generated kernels against with g++: a block's threads are
// threads of the process (when the kernel synchronizes) or a loop (when it
// does not), __syncthreads a barrier of the block, a warp shuffle an
// exchange through memory between two barriers of the warp, and
// __shared__ memory static (one block runs at a time). So the kernels'
// C++, their loops, shuffle trees and shared-memory combining are run on
// machines without a GPU; CUDA's own math library and the device's f16
// conversion instructions are not (the host's libm and Kiln's conversions
// stand in).
//
// Included (with -include) before the prelude; KILN_EMULATION marks it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <type_traits>
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

struct Sync {
  std::unique_ptr<std::barrier<>> block;
  std::vector<std::unique_ptr<std::barrier<>>> warps;
  std::vector<unsigned long long> lanes; ///< one slot per thread
};
inline Sync *sync = nullptr;

} // namespace kiln_emu

inline void __syncthreads() {
  kiln_emu::sync->block->arrive_and_wait();
}
inline void __syncwarp(unsigned = 0xffffffffu) {
  kiln_emu::sync->warps[threadIdx.x / 32]->arrive_and_wait();
}
template <typename T> T __shfl_xor_sync(unsigned, T v, int mask) {
  static_assert(sizeof(T) <= 8);
  kiln_emu::Sync &s = *kiln_emu::sync;
  unsigned long long bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  s.lanes[threadIdx.x] = bits;
  __syncwarp();
  const unsigned other = (threadIdx.x & ~31u) | ((threadIdx.x & 31u) ^ static_cast<unsigned>(mask));
  bits = s.lanes[other];
  __syncwarp();
  T r;
  std::memcpy(&r, &bits, sizeof(T));
  return r;
}

namespace kiln_emu {

/// Runs `kernel` as a grid of `grid` blocks of `block` threads: in a loop
/// when `synchronizes` is false, else on `block` threads that take the
/// blocks in turn (a barrier between blocks, as their shared memory is
/// one).
inline void launch(unsigned grid, unsigned block, bool synchronizes,
                   const std::function<void()> &kernel) {
  gridDim = {grid, 1, 1};
  blockDim = {block, 1, 1};
  if (!synchronizes) {
    for (unsigned b = 0; b < grid; ++b)
      for (unsigned t = 0; t < block; ++t) {
        blockIdx = {b, 1, 1};
        threadIdx = {t, 1, 1};
        kernel();
      }
    return;
  }
  Sync s;
  s.block = std::make_unique<std::barrier<>>(static_cast<std::ptrdiff_t>(block));
  for (unsigned w = 0; w < (block + 31) / 32; ++w)
    s.warps.push_back(std::make_unique<std::barrier<>>(32));
  s.lanes.assign(block, 0);
  sync = &s;
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < block; ++t)
    threads.emplace_back([&, t] {
      threadIdx = {t, 1, 1};
      for (unsigned b = 0; b < grid; ++b) {
        blockIdx = {b, 1, 1};
        kernel();
        s.block->arrive_and_wait();
      }
    });
  for (std::thread &th : threads)
    th.join();
  sync = nullptr;
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
