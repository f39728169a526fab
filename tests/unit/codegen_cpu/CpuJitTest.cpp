//===- CpuJitTest.cpp - LLVM CPU backend against interpretKernel ---------===//
//
// Hand-built kernels (codegen/KernelIR.h) for every ScalarOp and dtype,
// reductions, multi-stage kernels, index maps and sub-ranges, compiled by
// the JIT and compared element by element with interpretKernel.
//
//===----------------------------------------------------------------------===//

#include "CpuTestUtil.h"
#include "ir/DTypeCodec.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>
#include <regex>

namespace kiln::codegen::cpu::test {
namespace {

const DType kFloatTypes[] = {DType::F32, DType::F64, DType::F16, DType::BF16};

/// The dtypes of DTypes.def, in its order.
std::vector<DType> allDTypes() {
  return {
#define DTYPE(E, N, B, W, F, S, K, C) DType::E,
#include "ir/DTypes.def"
  };
}
/// The integer compute dtypes of DTypes.def (the storage dtypes are only
/// moved and cast: the verifier refuses arithmetic on them).
std::vector<DType> intDTypes() {
  std::vector<DType> out;
  for (DType t : allDTypes())
    if (isInteger(t) && !isStorageDType(t))
      out.push_back(t);
  return out;
}
/// Every compute dtype but bool.
std::vector<DType> numericDTypes() {
  std::vector<DType> out;
  for (DType t : allDTypes())
    if (t != DType::Bool && !isStorageDType(t))
      out.push_back(t);
  return out;
}
/// Random integer operands stay within [lo, hi] clipped to the range of `t`.
double clipLow(DType t, double lo) {
  return std::max(lo, static_cast<double>(intLowest(t)));
}
double clipHigh(DType t, double hi) {
  return std::min(hi, static_cast<double>(intHighest(t)));
}

using Body = std::function<ScalarRef(ScalarDag &, const std::vector<ScalarRef> &loads)>;

/// An elementwise kernel over outer = [outer], inner = [inner]: each input
/// and the output are read/written at the flat offset i0 * inner + i1.
Kernel mapKernel(const std::string &name, const std::vector<DType> &inTypes, DType outType,
                 int64_t outer, int64_t inner, const Body &body) {
  Kernel k;
  k.name = name;
  for (size_t i = 0; i < inTypes.size(); ++i)
    k.inputs.push_back({inTypes[i], {outer, inner}, "x" + std::to_string(i)});
  k.outputs.push_back({outType, {outer, inner}, "y"});
  k.outer = {outer};
  k.inner = inner;
  ScalarDag &d = k.dag;
  ScalarRef off = d.add(d.mul(d.index(0), d.constInt(DType::I64, inner)), d.index(1));
  std::vector<ScalarRef> loads;
  for (size_t i = 0; i < inTypes.size(); ++i)
    loads.push_back(d.load(inTypes[i], static_cast<int32_t>(i), off));
  Stage st;
  st.kind = Stage::Kind::Map;
  st.stores.push_back({0, off, body(d, loads)});
  k.stages.push_back(st);
  return k;
}

std::string kernelName(const char *what, ScalarOp op, DType t) {
  return std::string(what) + "_" + scalarOpName(op) + "_" + std::string(dtypeName(t));
}

HostBuffer randomBuffer(DType t, int64_t n, double lo, double hi, uint32_t seed) {
  HostBuffer b(t, n);
  fillRandom(b, lo, hi, seed);
  return b;
}

//===----------------------------------------------------------------------===//
// Elementwise ops
//===----------------------------------------------------------------------===//

/// Whether the builders accept `op` on operands of `t` (ir/ScalarOps.def);
/// a storage dtype is only cast and selected (ir/DTypes.def).
bool takesDType(ScalarClass cls, DType t) {
  if (isStorageDType(t) && cls != ScalarClass::Cast && cls != ScalarClass::Select)
    return false;
  switch (cls) {
  case ScalarClass::Unary:
  case ScalarClass::Binary:
    return t != DType::Bool;
  case ScalarClass::FloatUnary:
    return isFloat(t);
  case ScalarClass::BoolUnary:
  case ScalarClass::BoolBinary:
    return t == DType::Bool;
  case ScalarClass::IntUnary:
  case ScalarClass::IntBinary:
    return isInteger(t);
  default:
    return true;
  }
}

/// Inputs of every value class for `t`: random values in [-8, 8] (what is
/// representable), then for floats NaN, +-inf, +-0, a subnormal and huge
/// values, for integers the type's extremes (ir/DType.h), -1, 0 and 1.
HostBuffer valueClasses(DType t, int64_t n, uint32_t seed) {
  const bool nonNegative = isInteger(t) ? !isSignedInt(t) : t == DType::Bool;
  HostBuffer b = randomBuffer(t, n, nonNegative ? 0 : -8, t == DType::Bool ? 1 : 8, seed);
  auto at = [&](size_t i) { return static_cast<int64_t>((i * 7) % static_cast<size_t>(n)); };
  if (isInteger(t)) {
    std::vector<int64_t> special = {intLowest(t), intHighest(t), 0, 1};
    if (isSignedInt(t))
      special.push_back(-1);
    for (size_t i = 0; i < special.size() && static_cast<int64_t>(i) < n; ++i)
      b.setInt(at(i), special[i]);
    return b;
  }
  std::vector<double> special;
  if (isFloat(t))
    special = {std::numeric_limits<double>::quiet_NaN(),
               std::numeric_limits<double>::infinity(),
               -std::numeric_limits<double>::infinity(),
               0.0,
               -0.0,
               t == DType::F64 ? 1e-310 : 1e-40,
               t == DType::F16 ? 60000.0 : 1e30,
               t == DType::F16 ? -60000.0 : -1e30};
  for (size_t i = 0; i < special.size() && static_cast<int64_t>(i) < n; ++i)
    b.set(at(i), special[i]);
  return b;
}

// Every row of ir/ScalarOps.def (no hand list) on every dtype of DTypes.def
// its builder takes, over every value class, JIT against the interpreter
// (which runs evaluateScalars): a new primitive or dtype is covered the day
// it is added.
TEST(CpuJit, EveryScalarPrimitiveOnEveryDTypeItTakes) {
  uint32_t seed = 5000;
  int kernels = 0;
  for (unsigned i = 0; i < kNumScalarOps; ++i) {
    auto op = static_cast<ScalarOp>(i);
    ScalarClass cls = scalarClass(op);
    if (cls == ScalarClass::Leaf)
      continue;
    for (DType t : allDTypes()) {
      if (!takesDType(cls, t))
        continue;
      std::vector<DType> targets = {t};
      if (cls == ScalarClass::Cast)
        targets = allDTypes();
      for (DType to : targets) {
        std::string name = kernelName("table", op, t) + "_" + std::string(dtypeName(to));
        SCOPED_TRACE(name);
        std::vector<DType> ins(cls == ScalarClass::Select ? 3 : scalarArity(op), t);
        if (cls == ScalarClass::Select)
          ins[0] = DType::Bool;
        DType out = cls == ScalarClass::Compare ? DType::Bool : cls == ScalarClass::Cast ? to : t;
        Kernel k = mapKernel(name, ins, out, 2, 37, [&](ScalarDag &d, auto &in) {
          switch (cls) {
          case ScalarClass::Cast:
            return d.cast(in[0], to);
          case ScalarClass::Compare:
            return d.compare(op, in[0], in[1]);
          case ScalarClass::Select:
            return d.select(in[0], in[1], in[2]);
          case ScalarClass::Binary:
          case ScalarClass::BoolBinary:
          case ScalarClass::IntBinary:
            return d.binary(op, in[0], in[1]);
          default:
            return d.unary(op, in[0]);
          }
        });
        std::vector<HostBuffer> bufs;
        for (DType it : ins)
          bufs.push_back(valueClasses(it, 74, seed++));
        checkAgainstInterpreter(k, bufs, defaultTolerance(out));
        ++kernels;
      }
    }
  }
  EXPECT_GT(kernels, 100);
}

TEST(CpuJit, UnaryFloatOps) {
  struct Case {
    ScalarOp op;
    double lo, hi;
  };
  const Case cases[] = {
      {ScalarOp::Neg, -5, 5},     {ScalarOp::Abs, -5, 5},       {ScalarOp::Exp, -10, 10},
      {ScalarOp::Log, 0.01, 100}, {ScalarOp::Sqrt, 0, 100},     {ScalarOp::Rsqrt, 0.01, 100},
      {ScalarOp::Recip, 0.1, 5},  {ScalarOp::Tanh, -6, 6},      {ScalarOp::Erf, -4, 4},
      {ScalarOp::Sin, -20, 20},   {ScalarOp::Cos, -20, 20},     {ScalarOp::Floor, -5, 5},
      {ScalarOp::Ceil, -5, 5},    {ScalarOp::RoundEven, -5, 5},
  };
  uint32_t seed = 1;
  for (DType t : kFloatTypes)
    for (const Case &c : cases) {
      SCOPED_TRACE(kernelName("unary", c.op, t));
      Kernel k = mapKernel(kernelName("unary", c.op, t), {t}, t, 3, 17,
                           [&](ScalarDag &d, auto &in) { return d.unary(c.op, in[0]); });
      checkAgainstInterpreter(k, {randomBuffer(t, 51, c.lo, c.hi, seed++)}, defaultTolerance(t));
    }
}

TEST(CpuJit, RoundEvenTiesAndFloorCeilOfHalves) {
  Kernel k =
      mapKernel("round_even_ties", {DType::F32}, DType::F32, 1, 12, [](ScalarDag &d, auto &in) {
        return d.add(d.unary(ScalarOp::RoundEven, in[0]),
                     d.mul(d.constFloat(DType::F32, 100),
                           d.add(d.unary(ScalarOp::Floor, in[0]), d.unary(ScalarOp::Ceil, in[0]))));
      });
  HostBuffer x(DType::F32, 12);
  const double values[] = {-2.5, -1.5, -0.5,       0.5,       1.5,  2.5,
                           3.5,  -3.5, 0.49999997, 1e9 + 0.5, -0.0, 7};
  for (int i = 0; i < 12; ++i)
    x.set(i, values[i]);
  auto out = checkAgainstInterpreter(k, {x}, {0, 0});
  EXPECT_EQ(out[0].getDouble(0), -2 + 100 * (-3 + -2));
}

TEST(CpuJit, UnaryIntAndBoolOps) {
  // The DAG builder allows only these on integers ('not' takes a bool).
  const ScalarOp ops[] = {ScalarOp::Neg, ScalarOp::Abs};
  uint32_t seed = 100;
  for (DType t : intDTypes())
    for (ScalarOp op : ops) {
      SCOPED_TRACE(kernelName("unary", op, t));
      Kernel k = mapKernel(kernelName("unary", op, t), {t}, t, 2, 33,
                           [&](ScalarDag &d, auto &in) { return d.unary(op, in[0]); });
      HostBuffer x = randomBuffer(t, 66, clipLow(t, -128), isSignedInt(t) ? 127 : 255, seed++);
      x.setInt(0, intLowest(t));
      checkAgainstInterpreter(k, {x}, {0, 0});
    }
  Kernel k = mapKernel("not_bool", {DType::Bool}, DType::Bool, 1, 19,
                       [](ScalarDag &d, auto &in) { return d.unary(ScalarOp::Not, in[0]); });
  checkAgainstInterpreter(k, {randomBuffer(DType::Bool, 19, 0, 1, 7)}, {0, 0});
}

TEST(CpuJit, BinaryOpsAllNumericTypes) {
  const ScalarOp ops[] = {ScalarOp::Add, ScalarOp::Sub, ScalarOp::Mul, ScalarOp::Div,
                          ScalarOp::Rem, ScalarOp::Max, ScalarOp::Min, ScalarOp::Pow};
  uint32_t seed = 200;
  for (DType t : numericDTypes()) {
    for (ScalarOp op : ops) {
      SCOPED_TRACE(kernelName("binary", op, t));
      Kernel k = mapKernel(kernelName("binary", op, t), {t, t}, t, 3, 41,
                           [&](ScalarDag &d, auto &in) { return d.binary(op, in[0], in[1]); });
      double lo = -10, hi = 10, lo2 = -10, hi2 = 10;
      if (op == ScalarOp::Pow) {
        lo = isFloat(t) ? 0.1 : -5;
        hi = 4;
        lo2 = isFloat(t) ? -3 : -2;
        hi2 = isFloat(t) ? 3 : 9;
      }
      if (isInteger(t) && !isSignedInt(t)) {
        lo = lo2 = 0;
        hi = hi2 = op == ScalarOp::Pow ? 9 : 255;
      }
      if (isFloat(t) && (op == ScalarOp::Div || op == ScalarOp::Rem))
        lo2 = 0.5; // keep clear of 0 (covered by the NaN/inf test)
      Tolerance tol = defaultTolerance(t);
      if (op == ScalarOp::Pow && t == DType::F32)
        tol = {8e-6, 1e-6}; // libmvec powf, see CpuMathTest
      checkAgainstInterpreter(
          k, {randomBuffer(t, 123, lo, hi, seed), randomBuffer(t, 123, lo2, hi2, seed + 1)}, tol);
      seed += 2;
    }
  }
}

TEST(CpuJit, IntegerDivisionEdgeCases) {
  // x / 0 = 0, x % 0 = 0, INT_MIN / -1 wraps: no trap.
  for (DType t : intDTypes()) {
    for (ScalarOp op : {ScalarOp::Div, ScalarOp::Rem}) {
      Kernel k = mapKernel(kernelName("div_edge", op, t), {t, t}, t, 1, 6,
                           [&](ScalarDag &d, auto &in) { return d.binary(op, in[0], in[1]); });
      HostBuffer a(t, 6), b(t, 6);
      // Unsigned: the largest value for -1, 200 for the lowest.
      const bool s = isSignedInt(t);
      const int64_t minValue = s ? intLowest(t) : 200, minusOne = s ? -1 : intHighest(t);
      const int64_t as[] = {7, minValue, s ? -7 : 9, 0, 5, minValue};
      const int64_t bs[] = {0, minusOne, 2, 0, minusOne, 1};
      for (int i = 0; i < 6; ++i) {
        a.setInt(i, as[i]);
        b.setInt(i, bs[i]);
      }
      auto out = checkAgainstInterpreter(k, {a, b}, {0, 0});
      EXPECT_EQ(out[0].getInt(0), 0);
    }
  }
}

TEST(CpuJit, BoolLogic) {
  for (ScalarOp op : {ScalarOp::And, ScalarOp::Or}) {
    Kernel k =
        mapKernel(kernelName("logic", op, DType::Bool), {DType::Bool, DType::Bool}, DType::Bool, 1,
                  37, [&](ScalarDag &d, auto &in) { return d.binary(op, in[0], in[1]); });
    checkAgainstInterpreter(
        k, {randomBuffer(DType::Bool, 37, 0, 1, 3), randomBuffer(DType::Bool, 37, 0, 1, 4)},
        {0, 0});
  }
}

TEST(CpuJit, ComparisonsAndSelectAllTypes) {
  const ScalarOp ops[] = {ScalarOp::Eq, ScalarOp::Lt, ScalarOp::Le, ScalarOp::Gt, ScalarOp::Ge};
  uint32_t seed = 300;
  for (DType t : allDTypes()) {
    // Small integer-valued ranges give many ties.
    double lo = isFloat(t) || isSignedInt(t) ? -3 : 0, hi = t == DType::Bool ? 1 : 3;
    for (ScalarOp op : isStorageDType(t) ? std::span<const ScalarOp>() : ops) {
      SCOPED_TRACE(kernelName("compare", op, t));
      Kernel k = mapKernel(kernelName("compare", op, t), {t, t}, DType::Bool, 2, 29,
                           [&](ScalarDag &d, auto &in) { return d.compare(op, in[0], in[1]); });
      HostBuffer a = randomBuffer(t, 58, lo, hi, seed), b = randomBuffer(t, 58, lo, hi, seed + 1);
      if (isFloat(t))
        for (int64_t i = 0; i < 58; ++i) {
          a.set(i, std::round(a.getDouble(i)));
          b.set(i, std::round(b.getDouble(i)));
        }
      checkAgainstInterpreter(k, {a, b}, {0, 0});
      seed += 2;
    }
    SCOPED_TRACE(std::string("select_") + std::string(dtypeName(t)));
    Kernel k =
        mapKernel(std::string("select_") + std::string(dtypeName(t)), {DType::Bool, t, t}, t, 2, 29,
                  [&](ScalarDag &d, auto &in) { return d.select(in[0], in[1], in[2]); });
    checkAgainstInterpreter(k,
                            {randomBuffer(DType::Bool, 58, 0, 1, seed),
                             randomBuffer(t, 58, lo, hi, seed + 1),
                             randomBuffer(t, 58, lo, hi, seed + 2)},
                            {0, 0});
    seed += 3;
  }
}

TEST(CpuJit, CastsBetweenAllTypes) {
  uint32_t seed = 400;
  for (DType from : allDTypes())
    for (DType to : allDTypes()) {
      std::string name = "cast_" + std::string(dtypeName(from)) + "_" + std::string(dtypeName(to));
      SCOPED_TRACE(name);
      Kernel k = mapKernel(name, {from}, to, 3, 23,
                           [&](ScalarDag &d, auto &in) { return d.cast(in[0], to); });
      // Floats beyond the range of i8/u8 check saturation; fractions check
      // truncation toward zero.
      double lo = -300, hi = 300;
      if (!isFloat(from))
        lo = clipLow(from, lo), hi = clipHigh(from, hi);
      HostBuffer x = randomBuffer(from, 69, lo, hi, seed++);
      if (isFloat(from)) {
        x.set(0, 0.0);
        x.set(1, -0.75);
        x.set(2, 1e30);
        x.set(3, -1e30);
        x.set(4, std::numeric_limits<double>::quiet_NaN());
      }
      Tolerance tol = defaultTolerance(to);
      checkAgainstInterpreter(k, {x}, tol);
    }
}

// The LLVM encoding of every mini float (EmitLLVM.cpp, encodeMiniFloat)
// against the codec's (ir/DType.cpp, floatToMiniFloat), code for code: every
// code's value, the midpoints between neighbouring codes (ties to even) and
// the floats beside them, beyond the largest, inf, NaN, signed zeros, from
// f32 and f64; and every code back to f32.
TEST(CpuJit, MiniFloatCastsAreTheCodecsBitForBit) {
  for (DType t : allDTypes()) {
    const MiniFloatFormat *f = miniFloatFormat(t);
    if (!f)
      continue;
    const unsigned codes = 1u << (1 + f->expBits + f->manBits);
    std::vector<double> xs = {0.0,
                              -0.0,
                              std::numeric_limits<double>::quiet_NaN(),
                              std::numeric_limits<double>::infinity(),
                              -std::numeric_limits<double>::infinity(),
                              1e30,
                              -1e30,
                              1e-30,
                              miniFloatMax(*f) * 1.01,
                              -miniFloatMax(*f) * 1.01};
    for (unsigned c = 0; c + 1 < codes / 2; ++c) {
      const float a = miniFloatToFloat(*f, static_cast<uint8_t>(c));
      const float b = miniFloatToFloat(*f, static_cast<uint8_t>(c + 1));
      if (std::isnan(b) || std::isinf(b))
        break;
      const float mid = (a + b) / 2;
      for (float v : {a, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)}) {
        xs.push_back(v);
        xs.push_back(-v);
      }
    }
    const auto n = static_cast<int64_t>(xs.size());
    for (DType from : {DType::F32, DType::F64}) {
      const std::string name =
          "minifloat_" + std::string(dtypeName(from)) + "_" + std::string(dtypeName(t));
      SCOPED_TRACE(name);
      HostBuffer x(from, n);
      for (int64_t i = 0; i < n; ++i)
        x.set(i, xs[static_cast<size_t>(i)]);
      Kernel k = mapKernel(name, {from}, t, 1, n,
                           [&](ScalarDag &d, auto &in) { return d.cast(in[0], t); });
      std::vector<HostBuffer> out = checkAgainstInterpreter(k, {x}, {0, 0});
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(static_cast<const uint8_t *>(out[0].data())[i],
                  floatToMiniFloat(*f, static_cast<float>(xs[static_cast<size_t>(i)])))
            << name << " of " << xs[static_cast<size_t>(i)];
    }
    const std::string name = "minifloat_decode_" + std::string(dtypeName(t));
    SCOPED_TRACE(name);
    HostBuffer all(t, codes);
    for (unsigned c = 0; c < codes; ++c)
      static_cast<uint8_t *>(all.data())[c] = static_cast<uint8_t>(c);
    Kernel k = mapKernel(name, {t}, DType::F32, 1, codes,
                         [&](ScalarDag &d, auto &in) { return d.cast(in[0], DType::F32); });
    std::vector<HostBuffer> out = checkAgainstInterpreter(k, {all}, {0, 0});
    for (unsigned c = 0; c < codes; ++c) {
      const float want = miniFloatToFloat(*f, static_cast<uint8_t>(c));
      const double got = out[0].getDouble(c);
      if (std::isnan(want))
        EXPECT_TRUE(std::isnan(got)) << name << " code " << c;
      else
        EXPECT_EQ(got, want) << name << " code " << c;
    }
  }
}

TEST(CpuJit, NaNAndInfinitySemantics) {
  const double nan = std::numeric_limits<double>::quiet_NaN(),
               inf = std::numeric_limits<double>::infinity();
  const double as[] = {nan, 1, nan, -inf, inf, 0, -1, 2, -0.0, inf};
  const double bs[] = {1, nan, nan, 3, -inf, 0, 0, inf, 0.0, inf};
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16})
    for (ScalarOp op : {ScalarOp::Max, ScalarOp::Min, ScalarOp::Add, ScalarOp::Mul, ScalarOp::Div,
                        ScalarOp::Sub, ScalarOp::Pow}) {
      SCOPED_TRACE(kernelName("nan", op, t));
      Kernel k = mapKernel(kernelName("nan", op, t), {t, t}, t, 1, 10,
                           [&](ScalarDag &d, auto &in) { return d.binary(op, in[0], in[1]); });
      HostBuffer a(t, 10), b(t, 10);
      for (int i = 0; i < 10; ++i) {
        a.set(i, as[i]);
        b.set(i, bs[i]);
      }
      auto out = checkAgainstInterpreter(k, {a, b}, defaultTolerance(t));
      if (op == ScalarOp::Max || op == ScalarOp::Min) {
        for (int i = 0; i < 3; ++i)
          EXPECT_TRUE(std::isnan(out[0].getDouble(i))) << i;
      }
    }
  for (ScalarOp op : {ScalarOp::Exp, ScalarOp::Log, ScalarOp::Sqrt, ScalarOp::Tanh, ScalarOp::Erf,
                      ScalarOp::Rsqrt, ScalarOp::Recip, ScalarOp::Sin, ScalarOp::Cos}) {
    Kernel k = mapKernel(kernelName("special", op, DType::F32), {DType::F32}, DType::F32, 1, 7,
                         [&](ScalarDag &d, auto &in) { return d.unary(op, in[0]); });
    HostBuffer x(DType::F32, 7);
    const double xs[] = {nan, inf, -inf, 0, -0.0, -1, 1e-40};
    for (int i = 0; i < 7; ++i)
      x.set(i, xs[i]);
    checkAgainstInterpreter(k, {x}, defaultTolerance(DType::F32));
  }
}

//===----------------------------------------------------------------------===//
// Reductions and multi-stage kernels
//===----------------------------------------------------------------------===//

/// out[i0] = reduce_{i1} f(x[i0, i1]) over outer = [outer], inner = [inner].
Kernel reduceKernel(const std::string &name, DType t, ReduceKind kind, int64_t outer,
                    int64_t inner) {
  Kernel k;
  k.name = name;
  k.inputs.push_back({t, {outer, inner}, "x"});
  k.outputs.push_back({t, {outer}, "y"});
  k.outer = {outer};
  k.inner = inner;
  ScalarDag &d = k.dag;
  ScalarRef off = d.add(d.mul(d.index(0), d.constInt(DType::I64, inner)), d.index(1));
  Stage r;
  r.kind = Stage::Kind::Reduce;
  r.reduce = kind;
  r.value = d.load(t, 0, off);
  k.stages.push_back(r);
  Stage m;
  m.kind = Stage::Kind::Map;
  m.outerOnly = true; // one store per row
  m.stores.push_back({0, d.index(0), d.stageValue(t, 0)});
  k.stages.push_back(m);
  return k;
}

TEST(CpuJit, ReductionsAllKindsTypesAndSizes) {
  const ReduceKind kinds[] = {ReduceKind::Sum, ReduceKind::Max, ReduceKind::Min, ReduceKind::Prod};
  uint32_t seed = 500;
  for (DType t : numericDTypes())
    for (ReduceKind kind : kinds)
      for (int64_t inner : {1, 3, 17, 1023}) {
        std::string name = std::string("reduce_") + reduceKindName(kind) + "_" +
                           std::string(dtypeName(t)) + "_" + std::to_string(inner);
        SCOPED_TRACE(name);
        Kernel k = reduceKernel(name, t, kind, 4, inner);
        double lo = -1, hi = 1;
        if (kind == ReduceKind::Prod && isFloat(t))
          lo = 0.9, hi = 1.1;
        if (!isFloat(t))
          lo = clipLow(t, -100), hi = 100;
        Tolerance tol = defaultTolerance(t);
        if (isFloat(t) && (kind == ReduceKind::Sum || kind == ReduceKind::Prod)) {
          // The interpreter accumulates in order, rounding to the dtype at
          // every step; the JIT reassociates (vector partial sums) and
          // accumulates f16/bf16 in f32. Allow 4 * inner roundings.
          double eps = t == DType::F32   ? 0x1p-24
                       : t == DType::F64 ? 0x1p-53
                       : t == DType::F16 ? 0x1p-11
                                         : 0x1p-8;
          double bound = 4 * static_cast<double>(inner) * eps;
          tol = {tol.rtol + bound, tol.atol + bound};
        }
        checkAgainstInterpreter(k, {randomBuffer(t, 4 * inner, lo, hi, seed++)}, tol);
      }
}

TEST(CpuJit, BoolReductionsAreAnyAndAll) {
  // Sum and max are "any", prod and min are "all" (hand-computed: the
  // interpreter's bool max identity is INT64_MIN, i.e. true).
  const uint8_t rows[4][3] = {{0, 0, 0}, {0, 1, 0}, {1, 1, 1}, {1, 0, 1}};
  HostBuffer x(DType::Bool, 12);
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 3; ++c)
      x.set(r * 3 + c, rows[r][c]);
  for (ReduceKind kind : {ReduceKind::Sum, ReduceKind::Max, ReduceKind::Min, ReduceKind::Prod}) {
    Kernel k =
        reduceKernel(std::string("reduce_bool_") + reduceKindName(kind), DType::Bool, kind, 4, 3);
    DiagnosticEngine diag;
    auto fn = sharedJit().compile(k, Schedule{}, diag);
    ASSERT_TRUE(fn.succeeded());
    HostBuffer y(DType::Bool, 4);
    runKernel(*fn, {&x, &y}, 0, 4);
    bool any = kind == ReduceKind::Sum || kind == ReduceKind::Max;
    for (int r = 0; r < 4; ++r) {
      bool anySet = rows[r][0] || rows[r][1] || rows[r][2];
      bool allSet = rows[r][0] && rows[r][1] && rows[r][2];
      EXPECT_EQ(y.getInt(r), any ? anySet : allSet) << reduceKindName(kind) << " row " << r;
    }
  }
}

TEST(CpuJit, EmptyInnerRangeGivesIdentities) {
  for (ReduceKind kind : {ReduceKind::Sum, ReduceKind::Max, ReduceKind::Min, ReduceKind::Prod})
    for (DType t : numericDTypes()) {
      Kernel k = reduceKernel(std::string("reduce_empty_") + reduceKindName(kind) + "_" +
                                  std::string(dtypeName(t)),
                              t, kind, 3, 0);
      checkAgainstInterpreter(k, {HostBuffer(t, 0)}, {0, 0});
    }
}

TEST(CpuJit, FloatReductionsPropagateNaNAndInfinity) {
  const double nan = std::numeric_limits<double>::quiet_NaN(),
               inf = std::numeric_limits<double>::infinity();
  for (ReduceKind kind : {ReduceKind::Sum, ReduceKind::Max, ReduceKind::Min, ReduceKind::Prod}) {
    Kernel k = reduceKernel(std::string("reduce_special_") + reduceKindName(kind), DType::F32, kind,
                            4, 37);
    HostBuffer x = randomBuffer(DType::F32, 4 * 37, 0.5, 1.5, 9);
    x.set(5, nan);           // row 0: NaN in the middle
    x.set(37 + 36, nan);     // row 1: NaN in the scalar remainder
    x.set(2 * 37 + 3, inf);  // row 2: +inf
    x.set(3 * 37 + 1, -inf); // row 3: -inf
    auto out = checkAgainstInterpreter(k, {x}, {1e-5, 1e-5});
    EXPECT_TRUE(std::isnan(out[0].getDouble(0)));
    EXPECT_TRUE(std::isnan(out[0].getDouble(1)));
  }
}

/// Softmax over the last axis of f32[rows, cols]: max, sum of exp, divide.
Kernel softmaxKernel(int64_t rows, int64_t cols) {
  Kernel k;
  k.name = "softmax_" + std::to_string(rows) + "x" + std::to_string(cols);
  k.inputs.push_back({DType::F32, {rows, cols}, "x"});
  k.outputs.push_back({DType::F32, {rows, cols}, "y"});
  k.outer = {rows};
  k.inner = cols;
  ScalarDag &d = k.dag;
  ScalarRef off = d.add(d.mul(d.index(0), d.constInt(DType::I64, cols)), d.index(1));
  ScalarRef x = d.load(DType::F32, 0, off);
  Stage s0{Stage::Kind::Reduce, ReduceKind::Max, x, {}};
  ScalarRef e = d.unary(ScalarOp::Exp, d.sub(x, d.stageValue(DType::F32, 0)));
  Stage s1{Stage::Kind::Reduce, ReduceKind::Sum, e, {}};
  Stage s2;
  s2.stores.push_back({0, off, d.div(e, d.stageValue(DType::F32, 1))});
  k.stages = {s0, s1, s2};
  return k;
}

TEST(CpuJit, SoftmaxThreeStages) {
  uint32_t seed = 600;
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{7, 1023}, {5, 1}, {3, 17}, {64, 128}}) {
    SCOPED_TRACE(rows * 10000 + cols);
    checkAgainstInterpreter(softmaxKernel(rows, cols),
                            {randomBuffer(DType::F32, rows * cols, -8, 8, seed++)}, {1e-5, 1e-7});
  }
}

TEST(CpuJit, LayerNormTwoReductionsWithBroadcastScaleAndBias) {
  // y[i, j] = (x[i, j] - mean_i) * rsqrt(var_i + 1e-5) * g[j] + b[j]
  const int64_t rows = 6, cols = 257;
  Kernel k;
  k.name = "layer_norm";
  k.inputs = {
      {DType::F32, {rows, cols}, "x"}, {DType::F32, {cols}, "g"}, {DType::F32, {cols}, "b"}};
  k.outputs = {{DType::F32, {rows, cols}, "y"}};
  k.outer = {rows};
  k.inner = cols;
  ScalarDag &d = k.dag;
  ScalarRef j = d.index(1);
  ScalarRef off = d.add(d.mul(d.index(0), d.constInt(DType::I64, cols)), j);
  ScalarRef x = d.load(DType::F32, 0, off);
  ScalarRef invN = d.constFloat(DType::F32, 1.0 / cols);
  Stage s0{Stage::Kind::Reduce, ReduceKind::Sum, x, {}};
  ScalarRef mean = d.mul(d.stageValue(DType::F32, 0), invN);
  ScalarRef centered = d.sub(x, mean);
  Stage s1{Stage::Kind::Reduce, ReduceKind::Sum, d.mul(centered, centered), {}};
  ScalarRef var = d.mul(d.stageValue(DType::F32, 1), invN);
  ScalarRef inv = d.unary(ScalarOp::Rsqrt, d.add(var, d.constFloat(DType::F32, 1e-5)));
  ScalarRef y =
      d.add(d.mul(d.mul(centered, inv), d.load(DType::F32, 1, j)), d.load(DType::F32, 2, j));
  Stage s2;
  s2.stores.push_back({0, off, y});
  k.stages = {s0, s1, s2};
  checkAgainstInterpreter(k,
                          {randomBuffer(DType::F32, rows * cols, -3, 5, 1),
                           randomBuffer(DType::F32, cols, 0.5, 2, 2),
                           randomBuffer(DType::F32, cols, -1, 1, 3)},
                          {2e-5, 2e-5});
}

//===----------------------------------------------------------------------===//
// Index maps and ranges
//===----------------------------------------------------------------------===//

TEST(CpuJit, TransposeThroughOuterIndices) {
  // y[17, 13] = transpose(x[13, 17]): outer = [17], inner = 13.
  Kernel k;
  k.name = "transpose_outer";
  k.inputs = {{DType::F32, {13, 17}, "x"}};
  k.outputs = {{DType::F32, {17, 13}, "y"}};
  k.outer = {17};
  k.inner = 13;
  ScalarDag &d = k.dag;
  ScalarRef i = d.index(0), j = d.index(1);
  ScalarRef src = d.add(d.mul(j, d.constInt(DType::I64, 17)), i);
  ScalarRef dst = d.add(d.mul(i, d.constInt(DType::I64, 13)), j);
  Stage m;
  m.stores.push_back({0, dst, d.load(DType::F32, 0, src)});
  k.stages = {m};
  HostBuffer x(DType::F32, 13 * 17);
  for (int64_t e = 0; e < 13 * 17; ++e)
    x.set(e, static_cast<double>(e));
  auto out = checkAgainstInterpreter(k, {x}, {0, 0});
  EXPECT_EQ(out[0].getDouble(1 * 13 + 2), 2 * 17 + 1);
}

TEST(CpuJit, TransposeAndBroadcastWithDivRem) {
  // One flat loop: y[r, c] (r < 17, c < 13) = x[c, r] + bias[c] * 2, with
  // r = j / 13, c = j % 13; and a second output broadcasting a scalar input.
  Kernel k;
  k.name = "transpose_divrem";
  k.inputs = {{DType::F32, {13, 17}, "x"}, {DType::F32, {13}, "bias"}, {DType::I32, {}, "s"}};
  k.outputs = {{DType::F32, {17, 13}, "y"}, {DType::I32, {17, 13}, "z"}};
  k.outer = {};
  k.inner = 17 * 13;
  ScalarDag &d = k.dag;
  ScalarRef j = d.index(0);
  ScalarRef r = d.div(j, d.constInt(DType::I64, 13));
  ScalarRef c = d.binary(ScalarOp::Rem, j, d.constInt(DType::I64, 13));
  ScalarRef src = d.add(d.mul(c, d.constInt(DType::I64, 17)), r);
  ScalarRef v = d.add(d.load(DType::F32, 0, src),
                      d.mul(d.load(DType::F32, 1, c), d.constFloat(DType::F32, 2)));
  ScalarRef s = d.load(DType::I32, 2, d.constInt(DType::I64, 0));
  Stage m;
  m.stores.push_back({0, j, v});
  m.stores.push_back({1, j, d.add(s, d.cast(c, DType::I32))});
  k.stages = {m};
  HostBuffer sBuf(DType::I32, 1);
  sBuf.set(0, 1000);
  checkAgainstInterpreter(
      k,
      {randomBuffer(DType::F32, 13 * 17, -1, 1, 4), randomBuffer(DType::F32, 13, -1, 1, 5), sBuf},
      {0, 0});
}

TEST(CpuJit, BroadcastOverThreeDimensions) {
  // y[a, b, c] = x[a, b, c] * u[b] + w[c]: outer = [2, 3], inner = 5.
  Kernel k;
  k.name = "broadcast3";
  k.inputs = {{DType::F64, {2, 3, 5}, "x"}, {DType::F64, {3}, "u"}, {DType::F64, {5}, "w"}};
  k.outputs = {{DType::F64, {2, 3, 5}, "y"}};
  k.outer = {2, 3};
  k.inner = 5;
  ScalarDag &d = k.dag;
  ScalarRef off = d.add(d.mul(d.add(d.mul(d.index(0), d.constInt(DType::I64, 3)), d.index(1)),
                              d.constInt(DType::I64, 5)),
                        d.index(2));
  Stage m;
  m.stores.push_back({0, off,
                      d.add(d.mul(d.load(DType::F64, 0, off), d.load(DType::F64, 1, d.index(1))),
                            d.load(DType::F64, 2, d.index(2)))});
  k.stages = {m};
  checkAgainstInterpreter(k,
                          {randomBuffer(DType::F64, 30, -1, 1, 6),
                           randomBuffer(DType::F64, 3, -1, 1, 7),
                           randomBuffer(DType::F64, 5, -1, 1, 8)},
                          defaultTolerance(DType::F64));
}

TEST(CpuJit, SubRangesEqualOneCall) {
  Kernel k = softmaxKernel(37, 3);
  DiagnosticEngine diag;
  auto fn = sharedJit().compile(k, Schedule{}, diag);
  ASSERT_TRUE(fn.succeeded());
  HostBuffer x = randomBuffer(DType::F32, 37 * 3, -4, 4, 11);
  HostBuffer whole(DType::F32, 37 * 3);
  runKernel(*fn, {&x, &whole}, 0, 37);
  for (int64_t split : {0, 1, 13, 36, 37}) {
    HostBuffer parts(DType::F32, 37 * 3);
    runKernel(*fn, {&x, &parts}, 0, split);
    runKernel(*fn, {&x, &parts}, split, 37);
    EXPECT_EQ(std::memcmp(parts.data(), whole.data(), 37 * 3 * 4), 0) << split;
  }
  // Ranges are clamped to [0, numOuter); an empty range writes nothing.
  HostBuffer clamped(DType::F32, 37 * 3);
  runKernel(*fn, {&x, &clamped}, -5, 1000);
  EXPECT_EQ(std::memcmp(clamped.data(), whole.data(), 37 * 3 * 4), 0);
  HostBuffer untouched(DType::F32, 37 * 3);
  runKernel(*fn, {&x, &untouched}, 20, 10);
  for (int64_t i = 0; i < 37 * 3; ++i)
    ASSERT_EQ(untouched.getDouble(i), 0.0);
}

TEST(CpuJit, RowBitsDoNotDependOnTheRange) {
  // Note [Rows computed by one code path]: a row run alone (the scalar
  // path) has the bits it has inside a long range (where LLVM may
  // vectorize across rows), for float sums and products over every short
  // row length, for softmax (a sum of exps) and at each dtype a reduction
  // reassociates. Threads split ranges like this.
  const int64_t rows = 41;
  for (int64_t cols = 1; cols <= 40; ++cols) {
    std::vector<Kernel> kernels = {softmaxKernel(rows, cols)};
    for (DType t : {DType::F32, DType::F64})
      for (ReduceKind kind : {ReduceKind::Sum, ReduceKind::Prod})
        kernels.push_back(reduceKernel("rows_" + std::string(reduceKindName(kind)) + "_" +
                                           std::string(dtypeName(t)) + "_" + std::to_string(cols),
                                       t, kind, rows, cols));
    for (const Kernel &k : kernels) {
      DiagnosticEngine diag;
      auto fn = sharedJit().compile(k, Schedule{}, diag);
      ASSERT_TRUE(fn.succeeded()) << k.name;
      DType t = k.inputs[0].dtype;
      HostBuffer x = randomBuffer(t, rows * cols, -2, 2, static_cast<uint32_t>(cols));
      int64_t outN = k.outputs[0].numElements();
      HostBuffer whole(t, outN), alone(t, outN);
      runKernel(*fn, {&x, &whole}, 0, rows);
      for (int64_t r = 0; r < rows; ++r)
        runKernel(*fn, {&x, &alone}, r, r + 1);
      EXPECT_EQ(std::memcmp(whole.data(), alone.data(), whole.bytes.size()), 0) << k.name;
    }
  }
}

TEST(CpuJit, OddInnerSizes) {
  uint32_t seed = 700;
  for (int64_t inner : {1, 3, 17, 1023}) {
    Kernel k = mapKernel("gelu_inner_" + std::to_string(inner), {DType::F32}, DType::F32, 5, inner,
                         [](ScalarDag &d, auto &in) {
                           ScalarRef x = in[0];
                           ScalarRef e =
                               d.unary(ScalarOp::Erf,
                                       d.mul(x, d.constFloat(DType::F32, 0.70710678118654752)));
                           return d.mul(d.mul(d.constFloat(DType::F32, 0.5), x),
                                        d.add(d.constFloat(DType::F32, 1), e));
                         });
    checkAgainstInterpreter(k, {randomBuffer(DType::F32, 5 * inner, -4, 4, seed++)}, {1e-5, 1e-6});
  }
}

TEST(CpuJit, HalfPrecisionChainsRoundPerNode) {
  for (DType t : {DType::F16, DType::BF16}) {
    Kernel k = mapKernel("half_chain_" + std::string(dtypeName(t)), {t, t}, t, 4, 67,
                         [&](ScalarDag &d, auto &in) {
                           ScalarRef s = d.add(d.mul(in[0], in[1]), d.constFloat(t, 0.1));
                           return d.unary(ScalarOp::Tanh, d.sub(s, d.unary(ScalarOp::Exp, in[1])));
                         });
    checkAgainstInterpreter(k, {randomBuffer(t, 268, -2, 2, 1), randomBuffer(t, 268, -2, 2, 2)},
                            defaultTolerance(t));
  }
}

//===----------------------------------------------------------------------===//
// JIT behaviour
//===----------------------------------------------------------------------===//

TEST(CpuJit, MalformedKernelsBecomeDiagnosticsNamingTheKernel) {
  Kernel k = mapKernel("bad_kernel", {DType::F32}, DType::F32, 2, 8,
                       [](ScalarDag &, auto &in) { return in[0]; });
  // A load of an input that does not exist.
  k.stages[0].stores[0].value = k.dag.load(DType::F32, 5, k.dag.index(1));
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collect(diag);
  EXPECT_TRUE(sharedJit().compile(k, Schedule{}, diag).failed());
  EXPECT_TRUE(sharedJit().emitLLVM(k, Schedule{}, true, diag).failed());
  ASSERT_EQ(collect.diagnostics().size(), 2u);
  EXPECT_NE(collect.diagnostics()[0].message.find("'bad_kernel'"), std::string::npos)
      << collect.str();
  EXPECT_NE(collect.diagnostics()[0].message.find("input 5"), std::string::npos) << collect.str();

  // A store to an output that does not exist.
  Kernel k2 = mapKernel("bad_store", {DType::F32}, DType::F32, 2, 8,
                        [](ScalarDag &, auto &in) { return in[0]; });
  k2.stages[0].stores[0].output = 3;
  EXPECT_TRUE(sharedJit().compile(k2, Schedule{}, diag).failed());
  EXPECT_NE(collect.str().find("'bad_store'"), std::string::npos) << collect.str();
}

TEST(CpuJit, SameKernelNameCompilesTwice) {
  Kernel k = mapKernel("twice", {DType::I32}, DType::I32, 1, 4, [](ScalarDag &d, auto &in) {
    return d.add(in[0], d.constInt(DType::I32, 1));
  });
  Kernel k2 = mapKernel("twice", {DType::I32}, DType::I32, 1, 4, [](ScalarDag &d, auto &in) {
    return d.add(in[0], d.constInt(DType::I32, 2));
  });
  DiagnosticEngine diag;
  auto f1 = sharedJit().compile(k, Schedule{}, diag);
  auto f2 = sharedJit().compile(k2, Schedule{}, diag);
  ASSERT_TRUE(f1.succeeded() && f2.succeeded());
  HostBuffer x(DType::I32, 4), y1(DType::I32, 4), y2(DType::I32, 4);
  runKernel(*f1, {&x, &y1}, 0, 1);
  runKernel(*f2, {&x, &y2}, 0, 1);
  EXPECT_EQ(y1.getInt(3), 1);
  EXPECT_EQ(y2.getInt(3), 2);
}

TEST(CpuJit, DumpDirHoldsIRBeforeAndAfterOptimization) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / "kiln_cpu_dump_test";
  std::filesystem::remove_all(dir);
  DiagnosticEngine diag;
  CpuJitOptions opts;
  opts.dumpDir = dir.string();
  auto jit = CpuJit::create(opts, diag);
  ASSERT_TRUE(jit.succeeded());
  EXPECT_NE((*jit)->targetDescription().find("x86_64"), std::string::npos);
  Kernel k = softmaxKernel(2, 8);
  ASSERT_TRUE((*jit)->compile(k, Schedule{}, diag).succeeded());
  EXPECT_TRUE(std::filesystem::exists(dir / "softmax_2x8.ll"));
  EXPECT_TRUE(std::filesystem::exists(dir / "softmax_2x8.opt.ll"));
  std::filesystem::remove_all(dir);
}

TEST(CpuJit, OptLevelZeroStillCorrect) {
  DiagnosticEngine diag;
  CpuJitOptions opts;
  opts.optLevel = 0;
  auto jit = CpuJit::create(opts, diag);
  ASSERT_TRUE(jit.succeeded());
  Kernel k = softmaxKernel(3, 5);
  auto fn = (*jit)->compile(k, Schedule{}, diag);
  ASSERT_TRUE(fn.succeeded());
  HostBuffer x = randomBuffer(DType::F32, 15, -1, 1, 3), y(DType::F32, 15), want(DType::F32, 15);
  runKernel(*fn, {&x, &y}, 0, 3);
  interpretKernel(k, {x.data(), want.data()});
  for (int64_t i = 0; i < 15; ++i)
    EXPECT_NEAR(y.getDouble(i), want.getDouble(i), 1e-6);
}

TEST(CpuJit, CompileTimePerKernel) {
  // Reported, and bounded loosely so a pathological regression shows up.
  const int n = 8;
  double totalMs = 0;
  DiagnosticEngine diag;
  for (int i = 0; i < n; ++i) {
    Kernel k = i % 2 ? softmaxKernel(64, 1024 + i)
                     : mapKernel("timed_gelu_" + std::to_string(i), {DType::F32}, DType::F32, 64,
                                 1024 + i, [](ScalarDag &d, auto &in) {
                                   return d.unary(ScalarOp::Tanh, d.unary(ScalarOp::Erf, in[0]));
                                 });
    auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(sharedJit().compile(k, Schedule{}, diag).succeeded());
    totalMs +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  std::printf("[ compile  ] %.1f ms per kernel (mean of %d: IR build + O3 + codegen + link)\n",
              totalMs / n, n);
  EXPECT_LT(totalMs / n, 2000.0);
}

// Note [Shared kernel code]: kernels equal but for names get one function;
// a different constant (even +0.0 against -0.0) or schedule does not.
TEST(CpuJit, EqualKernelsShareCodeOthersDoNot) {
  DiagnosticEngine diag;
  auto jit = CpuJit::create(CpuJitOptions{}, diag);
  ASSERT_TRUE(jit.succeeded());
  auto plus = [](double c) {
    return [c](ScalarDag &d, const std::vector<ScalarRef> &x) {
      return d.add(x[0], d.constFloat(DType::F32, c));
    };
  };
  Kernel a = mapKernel("a", {DType::F32}, DType::F32, 3, 37, plus(0.0));
  Kernel b = mapKernel("b", {DType::F32}, DType::F32, 3, 37, plus(0.0));
  b.inputs[0].name = "other";
  Kernel negZero = mapKernel("c", {DType::F32}, DType::F32, 3, 37, plus(-0.0));
  Kernel half = mapKernel("d", {DType::F32}, DType::F32, 3, 37, plus(0.5));
  EXPECT_EQ(a.codeKey(), b.codeKey());
  EXPECT_NE(a.codeKey(), negZero.codeKey());

  auto fa = (*jit)->compile(a, Schedule{}, diag);
  auto fb = (*jit)->compile(b, Schedule{}, diag);
  auto fz = (*jit)->compile(negZero, Schedule{}, diag);
  auto fh = (*jit)->compile(half, Schedule{}, diag);
  Schedule inPlace;
  inPlace.inPlaceInput = {0};
  auto fi = (*jit)->compile(a, inPlace, diag);
  ASSERT_TRUE(fa.succeeded() && fb.succeeded() && fz.succeeded() && fh.succeeded() &&
              fi.succeeded());
  EXPECT_EQ(*fa, *fb);
  EXPECT_NE(*fa, *fz);
  EXPECT_NE(*fa, *fh);
  EXPECT_NE(*fa, *fi);
  EXPECT_NE((*jit)->objectOf(*fb), nullptr);

  // Each function computes its own kernel: -0 + 0 is +0, -0 + -0 is -0.
  const int64_t n = 3 * 37;
  HostBuffer x(DType::F32, n);
  for (int64_t i = 0; i < n; ++i)
    x.set(i, i % 2 ? -0.0 : static_cast<double>(i) - 40);
  for (const auto &[k, fn] : {std::pair{&a, *fa}, {&negZero, *fz}, {&half, *fh}}) {
    HostBuffer y(DType::F32, n), want(DType::F32, n);
    runKernel(fn, {&x, &y}, 0, 3);
    interpretKernel(*k, {x.data(), want.data()});
    EXPECT_EQ(std::memcmp(y.data(), want.data(), static_cast<size_t>(n) * 4), 0) << k->name;
  }
}

// Note [Parallel kernel compiles]: compileAll on three threads gives each
// job a function that computes its kernel, equal kernels one function, and
// every function its object (what artifacts store).
TEST(CpuJit, CompileAllOnThreadsEqualsTheInterpreter) {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collect(diag);
  auto jit = CpuJit::create(CpuJitOptions{}, diag);
  ASSERT_TRUE(jit.succeeded());
  std::vector<Kernel> kernels;
  for (int i = 0; i < 7; ++i)
    kernels.push_back(mapKernel("k" + std::to_string(i), {DType::F32, DType::F32}, DType::F32, 2,
                                33 + i % 3, [i](ScalarDag &d, const std::vector<ScalarRef> &x) {
                                  return d.add(d.mul(x[0], d.constFloat(DType::F32, i % 4)),
                                               d.unary(ScalarOp::Exp, x[1]));
                                }));
  std::vector<KernelJob> jobs;
  for (const Kernel &k : kernels)
    jobs.push_back({&k, Schedule{}});
  auto fns = (*jit)->compileAll(jobs, 3, diag);
  ASSERT_TRUE(fns.succeeded()) << collect.str();
  ASSERT_EQ(fns->size(), kernels.size());
  for (size_t i = 0; i < kernels.size(); ++i) {
    for (size_t j = 0; j < i; ++j)
      EXPECT_EQ((*fns)[i] == (*fns)[j], kernels[i].codeKey() == kernels[j].codeKey()) << i << j;
    EXPECT_NE((*jit)->objectOf((*fns)[i]), nullptr) << i;
    const int64_t n = kernels[i].numOuter() * kernels[i].inner;
    HostBuffer a = randomBuffer(DType::F32, n, -2, 2, 1), b = randomBuffer(DType::F32, n, -2, 2, 2);
    HostBuffer y(DType::F32, n), want(DType::F32, n), serial(DType::F32, n);
    runKernel((*fns)[i], {&a, &b, &y}, 0, kernels[i].numOuter());
    interpretKernel(kernels[i], {a.data(), b.data(), want.data()});
    // The same bits as the kernel compiled alone, on the calling thread.
    auto alone = sharedJit().compile(kernels[i], Schedule{}, diag);
    ASSERT_TRUE(alone.succeeded()) << collect.str();
    runKernel(*alone, {&a, &b, &serial}, 0, kernels[i].numOuter());
    EXPECT_EQ(std::memcmp(y.data(), serial.data(), static_cast<size_t>(n) * 4), 0) << i;
    for (int64_t e = 0; e < n; ++e)
      EXPECT_NEAR(y.getDouble(e), want.getDouble(e), 1e-5 * (1 + std::fabs(want.getDouble(e))))
          << "kernel " << i << " element " << e;
  }
}

} // namespace
} // namespace kiln::codegen::cpu::test
