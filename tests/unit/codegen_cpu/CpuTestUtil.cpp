//===- CpuTestUtil.cpp - Helpers for the LLVM CPU backend tests ----------===//

#include "CpuTestUtil.h"

#include "ir/DTypeCodec.h"

#include <algorithm>
#include <limits>

namespace kiln::codegen::cpu::test {

// Elements convert by the codecs of ir/DTypes.def, as the interpreter's do.
double HostBuffer::getDouble(int64_t i) const {
  return visitDType(dtype, [&]<typename C>() {
    return C::toDouble(static_cast<const typename C::Storage *>(data())[i]);
  });
}

int64_t HostBuffer::getInt(int64_t i) const {
  return visitDType(dtype, [&]<typename C>() {
    return C::toInt(static_cast<const typename C::Storage *>(data())[i]);
  });
}

void HostBuffer::set(int64_t i, double v) {
  visitDType(dtype, [&]<typename C>() {
    static_cast<typename C::Storage *>(data())[i] =
        isInteger(dtype) ? C::fromInt(static_cast<int64_t>(v)) : C::fromDouble(v);
  });
}

void HostBuffer::setInt(int64_t i, int64_t v) {
  visitDType(dtype,
             [&]<typename C>() { static_cast<typename C::Storage *>(data())[i] = C::fromInt(v); });
}

void fillRandom(HostBuffer &b, double lo, double hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int64_t i = 0; i < b.size; ++i) {
    double v = dist(rng);
    if (b.dtype == DType::Bool)
      v = v > (lo + hi) / 2;
    else if (!isFloat(b.dtype))
      v = std::round(v);
    b.set(i, v);
  }
}

CpuJit &sharedJit() {
  static std::shared_ptr<CpuJit> jit = [] {
    DiagnosticEngine diag;
    installStderrHandler(diag);
    auto j = CpuJit::create(CpuJitOptions{}, diag);
    if (!j) {
      std::fprintf(stderr, "cannot create the CPU JIT\n");
      std::abort();
    }
    return *j;
  }();
  return *jit;
}

Tolerance defaultTolerance(DType t) {
  switch (t) {
  case DType::F32:
    return {4e-6, 1e-6};
  case DType::F64:
    return {1e-13, 1e-14};
  case DType::F16:
    return {2e-3, 1e-3};
  case DType::BF16:
    return {1.6e-2, 8e-3};
  default:
    return {0, 0};
  }
}

void runKernel(runtime::KernelFn fn, std::vector<HostBuffer *> buffers, int64_t begin,
               int64_t end) {
  std::vector<void *> ptrs;
  for (HostBuffer *b : buffers)
    ptrs.push_back(b->data());
  fn(ptrs.data(), begin, end);
}

std::vector<HostBuffer>
checkAgainstInterpreter(const Kernel &k, const std::vector<HostBuffer> &inputs, Tolerance tol) {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collect(diag);
  auto fn = sharedJit().compile(k, Schedule{}, diag);
  EXPECT_TRUE(fn.succeeded()) << collect.str();
  std::vector<HostBuffer> got, want;
  for (const KernelBuffer &o : k.outputs) {
    got.emplace_back(o.dtype, o.numElements());
    want.emplace_back(o.dtype, o.numElements());
  }
  if (!fn)
    return got;
  std::vector<HostBuffer> inCopy = inputs;
  std::vector<HostBuffer *> jitBuffers;
  std::vector<void *> refBuffers;
  for (HostBuffer &b : inCopy) {
    jitBuffers.push_back(&b);
    refBuffers.push_back(b.data());
  }
  for (HostBuffer &b : got)
    jitBuffers.push_back(&b);
  for (HostBuffer &b : want)
    refBuffers.push_back(b.data());
  runKernel(*fn, jitBuffers, 0, k.numOuter());
  interpretKernel(k, refBuffers);

  for (size_t o = 0; o < got.size(); ++o) {
    int failures = 0;
    for (int64_t i = 0; i < got[o].size && failures < 5; ++i) {
      if (!isFloat(got[o].dtype)) {
        if (got[o].getInt(i) != want[o].getInt(i)) {
          ++failures;
          ADD_FAILURE() << k.name << ": output " << o << "[" << i << "] = " << got[o].getInt(i)
                        << ", interpreter " << want[o].getInt(i);
        }
        continue;
      }
      double g = got[o].getDouble(i), w = want[o].getDouble(i);
      bool ok;
      if (std::isnan(w) || std::isnan(g))
        ok = std::isnan(w) && std::isnan(g);
      else if (std::isinf(w) || std::isinf(g))
        ok = g == w;
      else
        ok = std::fabs(g - w) <= tol.atol + tol.rtol * std::fabs(w);
      if (!ok) {
        ++failures;
        ADD_FAILURE() << k.name << ": output " << o << "[" << i << "] = " << g << ", interpreter "
                      << w << " (" << dtypeName(got[o].dtype) << ")";
      }
    }
  }
  return got;
}

double ulpDistance(float got, double want) {
  if (std::isnan(got) || std::isnan(want))
    return std::isnan(got) && std::isnan(want) ? 0 : std::numeric_limits<double>::infinity();
  if (std::isinf(want)) {
    if (got == want)
      return 0;
    want = std::copysign(static_cast<double>(std::numeric_limits<float>::max()), want);
  }
  // The ulp of the exact result in float precision (subnormals: the minimum).
  double a = std::fabs(want);
  int exp = 0;
  std::frexp(a, &exp);
  double ulp = std::ldexp(1.0, std::max(exp, -125) - 24);
  return std::fabs(static_cast<double>(got) - want) / ulp;
}

} // namespace kiln::codegen::cpu::test
