//===- CudaEmitter.cpp - Kernel IR to CUDA C ------------------------------===//
//
// Writes one codegen::Kernel as CUDA C (CudaEmitter.h). Registers follow the
// LLVM backend (codegen/cpu/EmitLLVM.cpp): f32 and f64 as themselves; f16,
// bf16 and the mini floats as float, rounded to their dtype after every
// node; integers as C integers of their width (a sub-byte one in a byte,
// wrapped or saturated at its own width by casts), arithmetic in the
// unsigned type of that width so that it wraps; bool as bool (a byte in
// memory). Every DAG node is one `const T vN = ...;` line, written in the
// scope where it is first needed; the nodes of a stage that do not read the
// inner index are written once per row, before the stage's inner loop.
//
// Note [CUDA kernel forms]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// A kernel without Reduce stages is Pointwise: its numOuter x inner points
// are one flat range that threads take in a grid-stride loop (32-bit
// indices where the range fits), each point running the map stages (a row
// stage, `outerOnly`, at inner index 0). A kernel with Reduce stages runs a
// row's stages in order, and the row is spread by its inner length:
//   - ThreadPerRow (inner <= 8): one thread a row, folding in inner order
//     (the CPU's order);
//   - WarpPerRow (inner <= 2048): lane l takes points l, l+32, ...; a
//     butterfly of shuffles combines the lanes, so every lane holds the
//     stage value;
//   - BlockPerRow (longer rows, and every kernel whose inner length is a
//     run-time size): each warp combines as above, lane 0 of each writes
//     its value to shared memory, and every thread combines the warps' in
//     warp order.
// So a float sum or product is reassociated (kernel IR allows it: rounding
// differs, within the op table's bounds); max and min are exact in any
// order and propagate NaN at every step. Rows and points are taken in
// grid-stride loops, so the grid's size changes no value.
//
// Note [Vectorized pointwise kernels]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A static pointwise kernel of one map stage (no row stage) whose inner
// extent is a multiple of 4 and whose every store writes a 4-byte element
// (f32, i32, u32) at an offset j + 4k (unit stride in the inner index j,
// every other term and the constant multiples of 4: linearOf) takes four
// consecutive points of one row per thread. Each load of a 4-byte input at
// such an offset is one 128-bit load at the first of them (kiln_vec4: the
// arena places buffers 64-byte aligned, constants have allocations of their
// own, and runOnDevice's buffers are 16-byte aligned); the four points are
// computed in an unrolled loop, each reading its lane, and each store is
// one 128-bit store after it. Other loads (broadcast along j, gathered,
// transposed, narrower dtypes) stay one per point. Every point computes
// what the scalar form computes, so no value changes.
//
//===----------------------------------------------------------------------===//

#include "codegen/cuda/Internal.h"
#include "ir/DTypeCodec.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <optional>

namespace kiln::codegen::cuda {
namespace {

constexpr int64_t kThreadRowMax = 8;
constexpr int64_t kWarpRowMax = 2048;
constexpr uint32_t kMaxGridBlocks = 65536;

std::string num(int64_t v) {
  if (v == std::numeric_limits<int64_t>::min())
    return "(-9223372036854775807LL - 1)";
  return std::to_string(v) + "LL";
}

/// The C type of an element in memory.
std::string memType(DType t) {
  switch (t) {
  case DType::F32:
    return "float";
  case DType::F64:
    return "double";
  case DType::F16:
  case DType::BF16:
    return "unsigned short";
  case DType::Bool:
    return "unsigned char";
  default:
    return miniFloatFormat(t) ? "unsigned char" : CudaWriter::regType(t);
  }
}

/// A float as an exact C literal (hexadecimal), infinities and NaN by the
/// prelude's helpers.
std::string floatLiteral(double v, bool isDouble) {
  if (std::isnan(v))
    return isDouble ? "kiln_nan_f64()" : "kiln_nan_f32()";
  if (std::isinf(v))
    return std::string(v < 0 ? "-" : "") + (isDouble ? "kiln_inf_f64()" : "kiln_inf_f32()");
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%a", v);
  return "(" + std::string(buf) + (isDouble ? "" : "f") + ")";
}

bool hasReduce(const Kernel &k) {
  return std::any_of(k.stages.begin(), k.stages.end(),
                     [](const Stage &s) { return s.kind == Stage::Kind::Reduce; });
}

CudaForm chooseForm(const Kernel &k) {
  if (!hasReduce(k))
    return CudaForm::Pointwise;
  if (k.hasRunTimeSizes() && !k.innerDim.isConstant())
    return CudaForm::BlockPerRow;
  const int64_t inner = k.hasRunTimeSizes() ? k.innerDim.constant() : k.inner;
  if (inner <= kThreadRowMax)
    return CudaForm::ThreadPerRow;
  return inner <= kWarpRowMax ? CudaForm::WarpPerRow : CudaForm::BlockPerRow;
}

} // namespace

const char *cudaFormName(CudaForm f) {
  switch (f) {
  case CudaForm::Pointwise:
    return "pointwise";
  case CudaForm::ThreadPerRow:
    return "thread-per-row";
  case CudaForm::WarpPerRow:
    return "warp-per-row";
  case CudaForm::BlockPerRow:
    return "block-per-row";
  }
  return "?";
}

uint32_t cudaGridBlocks(CudaForm form, int64_t numOuter, int64_t inner) {
  if (numOuter <= 0)
    return 0;
  const int64_t threads = kCudaBlockThreads;
  int64_t blocks = 0;
  switch (form) {
  case CudaForm::Pointwise: {
    // At most 2^63 points: the rows times max(inner, 1) (a row stage runs
    // at inner 0 too).
    const int64_t perRow = std::max<int64_t>(inner, 1);
    const int64_t rowsCap = (std::numeric_limits<int64_t>::max() - threads) / perRow;
    const int64_t points =
        numOuter > rowsCap ? std::numeric_limits<int64_t>::max() - threads : numOuter * perRow;
    blocks = (points + threads - 1) / threads;
    break;
  }
  case CudaForm::ThreadPerRow:
    blocks = (numOuter + threads - 1) / threads;
    break;
  case CudaForm::WarpPerRow:
    blocks = (numOuter + threads / 32 - 1) / (threads / 32);
    break;
  case CudaForm::BlockPerRow:
    blocks = numOuter;
    break;
  }
  return static_cast<uint32_t>(std::min<int64_t>(blocks, kMaxGridBlocks));
}

CudaWriter::CudaWriter(const Kernel &k) : k_(k) {
  const auto &nodes = k_.dag.nodes();
  emittedAt_.assign(nodes.size(), -1);
  readsInner_.assign(nodes.size(), false);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const ScalarNode &n = nodes[i];
    bool r = n.op == ScalarOp::Index && n.slot == k_.innerSlot();
    for (unsigned a = 0; a < scalarArity(n.op); ++a)
      if (n.args[a].valid() && static_cast<size_t>(n.args[a].id) < i)
        r = r || readsInner_[static_cast<size_t>(n.args[a].id)];
    readsInner_[i] = r;
  }
}

std::string CudaWriter::fail(const std::string &msg) {
  if (error_.empty())
    error_ = msg;
  return "0";
}

std::string CudaWriter::regType(DType t) {
  switch (t) {
  case DType::Bool:
    return "bool";
  case DType::F64:
    return "double";
  case DType::I8:
  case DType::I4:
  case DType::I2:
    return "signed char";
  case DType::U8:
  case DType::U4:
  case DType::U2:
    return "unsigned char";
  case DType::I16:
    return "short";
  case DType::U16:
    return "unsigned short";
  case DType::I32:
    return "int";
  case DType::U32:
    return "unsigned";
  case DType::I64:
    return "long long";
  default:
    return "float"; // f32, f16, bf16, the mini floats
  }
}

std::string CudaWriter::wrapType(DType t) {
  return dtypeSize(t) == 8 ? "unsigned long long" : "unsigned";
}

std::string CudaWriter::roundTo(DType t, const std::string &e) {
  if (t == DType::F16)
    return "kiln_round_f16(" + e + ")";
  if (t == DType::BF16)
    return "kiln_round_bf16(" + e + ")";
  if (miniFloatFormat(t)) {
    miniFloats_.insert(t);
    const std::string n(dtypeName(t));
    return "kiln_decode_" + n + "(kiln_encode_" + n + "(" + e + "))";
  }
  return e;
}

std::string CudaWriter::constant(DType t, double f, int64_t i) {
  if (isFloat(t))
    return floatLiteral(roundThroughDType(t, f), t == DType::F64);
  if (t == DType::Bool)
    return i != 0 ? "true" : "false";
  return "((" + regType(t) + ")" + num(wrapThroughDType(t, i)) + ")";
}

// Note [Scalar casts] in ir/ScalarExpr.h, as KernelEmitter::convert does it.
std::string CudaWriter::convert(const std::string &v, DType from, DType to) {
  if (from == to)
    return v;
  const std::string dst = regType(to);
  if (to == DType::Bool)
    return "(" + v + " != 0)";
  if (from == DType::Bool) {
    if (isFloat(to))
      return "(" + v + " ? " + constant(to, 1, 1) + " : " + constant(to, 0, 0) + ")";
    return "((" + dst + ")(" + v + " ? 1 : 0))";
  }
  if (isFloat(from) && isFloat(to))
    return roundTo(to, "((" + dst + ")" + v + ")");
  const unsigned bits = dtypeBits(to);
  if (isFloat(from)) {
    const int64_t lo = bits < 64 ? intLowest(to) : std::numeric_limits<int64_t>::min();
    const int64_t hi = intHighest(to);
    return "((" + dst + ")kiln_float_to_int((double)" + v + ", " + num(lo) + ", " + num(hi) + "))";
  }
  if (isFloat(to)) {
    // i64 -> f32 through double, as the interpreter does.
    const std::string via =
        from == DType::I64 && to != DType::F64 ? "(" + dst + ")(double)" : "(" + dst + ")";
    return roundTo(to, "(" + via + v + ")");
  }
  if (bits < 8)
    return "((" + dst + ")" + (isSignedInt(to) ? "kiln_wrap_signed" : "kiln_wrap_unsigned") +
           "((long long)" + v + ", " + std::to_string(bits) + "u))";
  return "((" + dst + ")" + v + ")";
}

std::string CudaWriter::mathCall(const char *fn, DType t, const std::string &a,
                                 const std::string *b) {
  if (isFloat(t)) {
    const std::string name = std::string(fn) + (t == DType::F64 ? "" : "f");
    return roundTo(t, name + "(" + a + (b ? ", " + *b : "") + ")");
  }
  const std::string da = convert(a, t, DType::F64);
  const std::string r =
      std::string(fn) + "(" + da + (b ? ", " + convert(*b, t, DType::F64) : "") + ")";
  return convert(r, DType::F64, t);
}

std::string CudaWriter::loadExpr(DType t, const std::string &ptr) {
  switch (t) {
  case DType::F16:
    return "kiln_f16_to_f32(" + ptr + ")";
  case DType::BF16:
    return "kiln_bf16_to_f32(" + ptr + ")";
  case DType::Bool:
    return "(" + ptr + " != 0)";
  default:
    if (miniFloatFormat(t)) {
      miniFloats_.insert(t);
      return "kiln_decode_" + std::string(dtypeName(t)) + "(" + ptr + ")";
    }
    return ptr;
  }
}

std::string CudaWriter::storeExpr(DType t, const std::string &v) {
  switch (t) {
  case DType::F16:
    return "kiln_f32_to_f16(" + v + ")";
  case DType::BF16:
    return "kiln_f32_to_bf16(" + v + ")";
  case DType::Bool:
    return "(unsigned char)(" + v + " ? 1 : 0)";
  default:
    if (miniFloatFormat(t)) {
      miniFloats_.insert(t);
      return "(unsigned char)kiln_encode_" + std::string(dtypeName(t)) + "(" + v + ")";
    }
    return v;
  }
}

std::string CudaWriter::leaf(const ScalarNode &n) {
  switch (n.op) {
  case ScalarOp::Index:
    if (n.slot == k_.innerSlot())
      return inner_.empty() ? fail("the inner index is used outside a stage") : inner_;
    if (n.slot < 0 || static_cast<size_t>(n.slot) >= k_.outer.size())
      return fail("index slot " + std::to_string(n.slot) + " out of range");
    return "i" + std::to_string(n.slot);
  case ScalarOp::Load: {
    if (n.slot < 0 || static_cast<size_t>(n.slot) >= k_.inputs.size())
      return fail("load of input " + std::to_string(n.slot) + " out of range");
    if (k_.inputs[static_cast<size_t>(n.slot)].dtype != n.type)
      return fail("load type differs from input " + std::to_string(n.slot) + "'s dtype");
    return loadExpr(n.type, "in" + std::to_string(n.slot) + "[" + ref(n.args[0]) + "]");
  }
  case ScalarOp::StageValue:
    if (n.slot < 0 || static_cast<size_t>(n.slot) >= k_.stages.size())
      return fail("stage value " + std::to_string(n.slot) + " out of range");
    return "s" + std::to_string(n.slot);
  case ScalarOp::Size:
    if (n.slot < 0 || static_cast<size_t>(n.slot) >= k_.symbols.size())
      return fail("size slot " + std::to_string(n.slot) + " out of range");
    return "sizes.v[" + std::to_string(n.slot) + "]";
  default:
    return fail(std::string("'") + scalarOpName(n.op) + "' is not a leaf");
  }
}

void CudaWriter::line(const std::string &text) {
  body_ << std::string(static_cast<size_t>(2 * level_ + 2), ' ') << text << "\n";
}

void CudaWriter::open(const std::string &head) {
  line(head + " {");
  ++level_;
}

void CudaWriter::close() {
  for (int &at : emittedAt_)
    if (at >= level_)
      at = -1;
  --level_;
  line("}");
}

std::string CudaWriter::ref(ScalarRef r) {
  if (!r.valid() || static_cast<size_t>(r.id) >= k_.dag.nodes().size())
    return fail("invalid scalar reference %" + std::to_string(r.id));
  const std::string name = "v" + std::to_string(r.id);
  if (emittedAt_[static_cast<size_t>(r.id)] >= 0)
    return name;
  const ScalarNode &n = k_.dag.node(r);
  std::string expr = emitNode(n, r);
  line("const " + regType(n.type) + " " + name + " = " + expr + ";");
  emittedAt_[static_cast<size_t>(r.id)] = level_;
  return name;
}

// Operands first, then the op's hook (EmitScalar.cpp).
std::string CudaWriter::emitNode(const ScalarNode &n, ScalarRef r) {
  if (lanes_ && n.op == ScalarOp::Load && vectorLoads_.count(r.id))
    return "q" + std::to_string(r.id) + ".v[l]"; // Note [Vectorized pointwise kernels]
  if (scalarClass(n.op) == ScalarClass::Leaf) {
    if (n.op == ScalarOp::ConstFloat || n.op == ScalarOp::ConstInt)
      return cudaScalarHook(n.op)(*this, n, nullptr, n.type);
    return leaf(n);
  }
  const unsigned arity = scalarArity(n.op);
  std::string args[3];
  for (unsigned i = 0; i < arity; ++i) {
    if (!n.args[i].valid() || n.args[i].id >= r.id)
      return fail("node %" + std::to_string(r.id) + " has an invalid operand");
    args[i] = ref(n.args[i]);
  }
  const DType argType = arity > 0 ? k_.dag.type(n.args[0]) : n.type;
  return cudaScalarHook(n.op)(*this, n, args, argType);
}

// The nodes the roots reach that do not read the inner index, in DAG order
// (their operands come first), at the current scope.
void CudaWriter::hoist(const std::vector<ScalarRef> &roots) {
  std::vector<bool> reached(k_.dag.nodes().size(), false);
  std::vector<int32_t> work;
  for (ScalarRef r : roots)
    if (r.valid() && static_cast<size_t>(r.id) < reached.size())
      work.push_back(r.id);
  while (!work.empty()) {
    const int32_t id = work.back();
    work.pop_back();
    if (reached[static_cast<size_t>(id)])
      continue;
    reached[static_cast<size_t>(id)] = true;
    const ScalarNode &n = k_.dag.nodes()[static_cast<size_t>(id)];
    for (unsigned a = 0; a < scalarArity(n.op); ++a)
      if (n.args[a].valid() && n.args[a].id < id)
        work.push_back(n.args[a].id);
  }
  for (size_t i = 0; i < reached.size() && error_.empty(); ++i)
    if (reached[i] && !readsInner_[i])
      ref(ScalarRef{static_cast<int32_t>(i)});
}

std::string CudaWriter::extent(const DimExpr &e) {
  // Polynomials over the kernel's sizes (codegen/RunTimeSizes.cpp builds
  // no other kind), in wrapping unsigned arithmetic.
  std::string sum = "(unsigned long long)" + num(e.constant());
  for (const DimTerm &t : e.terms()) {
    std::string prod = "(unsigned long long)" + num(t.coeff);
    for (const DimAtomPtr &a : t.factors) {
      auto it = a->kind == DimAtom::Kind::Symbol
                    ? std::find(k_.symbols.begin(), k_.symbols.end(), a->name)
                    : k_.symbols.end();
      if (it == k_.symbols.end())
        return fail("the extent " + e.str() + " is not a polynomial over the kernel's sizes");
      prod += " * (unsigned long long)sizes.v[" + std::to_string(it - k_.symbols.begin()) + "]";
    }
    sum += " + " + prod;
  }
  return "(long long)(" + sum + ")";
}

std::string CudaWriter::identity(ReduceKind kind, DType t) {
  if (isFloat(t)) {
    const double inf = std::numeric_limits<double>::infinity();
    const double v = kind == ReduceKind::Sum    ? 0.0
                     : kind == ReduceKind::Prod ? 1.0
                     : kind == ReduceKind::Max  ? -inf
                                                : inf;
    return floatLiteral(v, t == DType::F64);
  }
  switch (kind) {
  case ReduceKind::Sum:
    return constant(t, 0, 0);
  case ReduceKind::Prod:
    return constant(t, 0, 1);
  case ReduceKind::Max:
    return constant(t, 0, intLowest(t));
  case ReduceKind::Min:
    return constant(t, 0, intHighest(t));
  }
  return "0";
}

std::string CudaWriter::combine(ReduceKind kind, DType t, const std::string &acc,
                                const std::string &v) {
  if (isFloat(t)) {
    switch (kind) {
    case ReduceKind::Sum:
      return acc + " + " + v;
    case ReduceKind::Prod:
      return acc + " * " + v;
    case ReduceKind::Max:
      return "kiln_max(" + acc + ", " + v + ")";
    case ReduceKind::Min:
      return "kiln_min(" + acc + ", " + v + ")";
    }
  }
  if (t == DType::Bool)
    return kind == ReduceKind::Sum || kind == ReduceKind::Max ? acc + " || " + v : acc + " && " + v;
  const std::string T = regType(t), W = wrapType(t);
  switch (kind) {
  case ReduceKind::Sum:
    return "(" + T + ")((" + W + ")" + acc + " + (" + W + ")" + v + ")";
  case ReduceKind::Prod:
    return "(" + T + ")((" + W + ")" + acc + " * (" + W + ")" + v + ")";
  case ReduceKind::Max:
    return "(" + acc + " < " + v + " ? " + v + " : " + acc + ")";
  case ReduceKind::Min:
    return "(" + v + " < " + acc + " ? " + v + " : " + acc + ")";
  }
  return acc;
}

// Row-major digits i0..i{n-1} of outer point `o`.
void CudaWriter::writeDigits(const std::string &o, const std::string &idxType) {
  const size_t n = k_.outer.size();
  if (n == 0)
    return;
  std::string rest = o;
  for (size_t d = n; d-- > 0;) {
    const std::string e = "e" + std::to_string(d);
    if (d == 0) {
      line("[[maybe_unused]] const long long i0 = (long long)" + rest + ";");
    } else {
      line("[[maybe_unused]] const long long i" + std::to_string(d) + " = (long long)(" + rest +
           " % (" + idxType + ")" + e + ");");
      line("const " + idxType + " r" + std::to_string(d) + " = " + rest + " / (" + idxType + ")" +
           e + ";");
      rest = "r" + std::to_string(d);
    }
  }
}

std::optional<DType> CudaWriter::storeType(const Store &s) {
  if (s.output < 0 || static_cast<size_t>(s.output) >= k_.outputs.size()) {
    fail("store to output " + std::to_string(s.output) + " out of range");
    return std::nullopt;
  }
  const DType t = k_.outputs[static_cast<size_t>(s.output)].dtype;
  if (k_.dag.type(s.value) != t) {
    fail("store of " + std::string(dtypeName(k_.dag.type(s.value))) + " to " +
         std::string(dtypeName(t)) + " output " + std::to_string(s.output));
    return std::nullopt;
  }
  return t;
}

void CudaWriter::writeStores(const Stage &st) {
  for (const Store &s : st.stores) {
    const std::optional<DType> t = storeType(s);
    if (!t)
      return;
    const std::string off = ref(s.offset), value = ref(s.value);
    line("out" + std::to_string(s.output) + "[" + off + "] = " + storeExpr(*t, value) + ";");
  }
}

namespace {

/// An i64 node as c + sum of coef * Index(slot), when it is one.
struct Linear {
  int64_t c = 0;
  std::map<int32_t, int64_t> coef;
};

std::optional<Linear> linearOf(const ScalarDag &dag, ScalarRef r) {
  const ScalarNode &n = dag.node(r);
  if (n.type != DType::I64)
    return std::nullopt;
  Linear out;
  switch (n.op) {
  case ScalarOp::ConstInt:
    out.c = n.ivalue;
    return out;
  case ScalarOp::Index:
    out.coef[n.slot] = 1;
    return out;
  case ScalarOp::Add:
  case ScalarOp::Sub:
  case ScalarOp::Mul: {
    auto a = linearOf(dag, n.args[0]), b = linearOf(dag, n.args[1]);
    if (!a || !b)
      return std::nullopt;
    if (n.op == ScalarOp::Mul) {
      if (!a->coef.empty() && !b->coef.empty())
        return std::nullopt; // not linear
      const Linear &k = a->coef.empty() ? *a : *b, &x = a->coef.empty() ? *b : *a;
      out.c = x.c * k.c;
      for (const auto &[slot, c] : x.coef)
        out.coef[slot] = c * k.c;
      return out;
    }
    const int64_t sign = n.op == ScalarOp::Add ? 1 : -1;
    out = *a;
    out.c += sign * b->c;
    for (const auto &[slot, c] : b->coef)
      out.coef[slot] += sign * c;
    return out;
  }
  default:
    return std::nullopt;
  }
}

/// Whether offset `r` is j + 4k at every point whose j is a multiple of 4.
bool unitStrideAligned(const Kernel &k, ScalarRef r) {
  auto lin = linearOf(k.dag, r);
  if (!lin || lin->c % 4 != 0)
    return false;
  bool unit = false;
  for (const auto &[slot, c] : lin->coef) {
    if (slot == k.innerSlot())
      unit = c == 1;
    else if (c % 4 != 0)
      return false;
  }
  return unit;
}

bool fourBytes(DType t) {
  return t == DType::F32 || t == DType::I32 || t == DType::U32;
}

} // namespace

// Note [Vectorized pointwise kernels]; false (nothing written) where the
// kernel does not qualify.
bool CudaWriter::writeVectorPointwise() {
  if (k_.hasRunTimeSizes() || k_.inner <= 0 || k_.inner % 4 != 0 || k_.stages.size() != 1)
    return false;
  const Stage &st = k_.stages.front();
  if (st.kind != Stage::Kind::Map || st.outerOnly || st.stores.empty())
    return false;
  for (const Store &s : st.stores)
    if (s.output < 0 || static_cast<size_t>(s.output) >= k_.outputs.size() ||
        !fourBytes(k_.outputs[static_cast<size_t>(s.output)].dtype) ||
        !unitStrideAligned(k_, s.offset))
      return false;
  const int64_t points = k_.numOuter() * k_.inner;
  if (points > std::numeric_limits<int32_t>::max())
    return false;
  // The loads the stores reach that qualify.
  const std::vector<bool> reached = k_.reachedBy(st);
  vectorLoads_.clear();
  for (size_t i = 0; i < reached.size(); ++i) {
    const ScalarNode &n = k_.dag.nodes()[i];
    if (reached[i] && n.op == ScalarOp::Load && n.slot >= 0 &&
        static_cast<size_t>(n.slot) < k_.inputs.size() &&
        k_.inputs[static_cast<size_t>(n.slot)].dtype == n.type && fourBytes(n.type) &&
        unitStrideAligned(k_, n.args[0]))
      vectorLoads_.insert(static_cast<int32_t>(i));
  }
  auto vecType = [](DType t) { return "kiln_vec4<" + memType(t) + ">"; };
  line("const unsigned kPerRow = (unsigned)L;");
  line("const unsigned kQuads = (unsigned)R * kPerRow / 4u;");
  open("for (unsigned q = blockIdx.x * blockDim.x + threadIdx.x; q < kQuads; q += gridDim.x * "
       "blockDim.x)");
  line("const unsigned t = q * 4u;");
  line("const unsigned o = t / kPerRow;");
  line("const long long j0 = (long long)(t - o * kPerRow);");
  writeDigits("o", "unsigned");
  // At the first point: the vector loads, and where the stores go.
  inner_ = "j0";
  for (int32_t id : vectorLoads_) {
    const ScalarNode &n = k_.dag.node(ScalarRef{id});
    const std::string off = ref(n.args[0]), type = vecType(n.type);
    line("const " + type + " q" + std::to_string(id) + " = *reinterpret_cast<const " + type +
         " *>(in" + std::to_string(n.slot) + " + " + off + ");");
  }
  std::vector<std::string> storeAt;
  for (size_t i = 0; i < st.stores.size(); ++i) {
    const Store &s = st.stores[i];
    storeAt.push_back(ref(s.offset));
    line(vecType(k_.outputs[static_cast<size_t>(s.output)].dtype) + " w" + std::to_string(i) + ";");
  }
  // Then the four points: what reads j again, at each.
  for (size_t i = 0; i < emittedAt_.size(); ++i)
    if (readsInner_[i])
      emittedAt_[i] = -1;
  line("#pragma unroll");
  open("for (int l = 0; l < 4; ++l)");
  line("[[maybe_unused]] const long long j = j0 + l;");
  inner_ = "j";
  lanes_ = true;
  for (size_t i = 0; i < st.stores.size() && error_.empty(); ++i) {
    const std::optional<DType> t = storeType(st.stores[i]);
    if (t)
      line("w" + std::to_string(i) + ".v[l] = " + storeExpr(*t, ref(st.stores[i].value)) + ";");
  }
  lanes_ = false;
  close();
  inner_.clear();
  for (size_t i = 0; i < st.stores.size(); ++i) {
    const Store &s = st.stores[i];
    line("*reinterpret_cast<" + vecType(k_.outputs[static_cast<size_t>(s.output)].dtype) +
         " *>(out" + std::to_string(s.output) + " + " + storeAt[i] + ") = w" + std::to_string(i) +
         ";");
  }
  close();
  return true;
}

void CudaWriter::writePointwise() {
  bool rowStage = false;
  for (const Stage &st : k_.stages)
    rowStage = rowStage || st.outerOnly;
  // 32-bit indices where every point fits (static kernels): unsigned
  // division by constants is a multiply and a shift.
  int64_t points = -1;
  if (!k_.hasRunTimeSizes()) {
    const int64_t perRow = std::max<int64_t>(k_.inner, 1);
    if (k_.numOuter() <= std::numeric_limits<int32_t>::max() / perRow)
      points = k_.numOuter() * perRow;
  }
  const std::string idx = points >= 0 ? "unsigned" : "unsigned long long";
  // A row stage runs at inner index 0 even when the inner range is empty;
  // without one, an empty inner range has no points.
  line("const " + idx + " kPerRow = (" + idx + ")(L > 0 ? L : 1);");
  line("const " + idx + " kPoints = (" + idx + ")R * " + (rowStage ? "kPerRow" : "(" + idx + ")L") +
       ";");
  open("for (" + idx + " t = (" + idx +
       ")blockIdx.x * blockDim.x + threadIdx.x; t < kPoints; t += (" + idx +
       ")gridDim.x * blockDim.x)");
  line("const " + idx + " o = t / kPerRow;");
  line("[[maybe_unused]] const long long j = (long long)(t - o * kPerRow);");
  writeDigits("o", idx);
  for (const Stage &st : k_.stages) {
    if (!error_.empty())
      return;
    if (st.outerOnly) {
      open("if (j == 0)");
      writeStores(st);
      close();
      continue;
    }
    open(rowStage ? "if (L > 0)" : "");
    inner_ = "j";
    writeStores(st);
    inner_.clear();
    close();
  }
  close();
}

void CudaWriter::writeRowKernel(CudaForm form) {
  std::string row, start, step, first;
  switch (form) {
  case CudaForm::ThreadPerRow:
    row = "for (long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x; o < R; o += "
          "(long long)gridDim.x * blockDim.x)";
    start = "0";
    step = "1";
    first = "";
    break;
  case CudaForm::WarpPerRow:
    line("const int lane = (int)(threadIdx.x & 31u);");
    row = "for (long long o = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5; o < R; o "
          "+= ((long long)gridDim.x * blockDim.x) >> 5)";
    start = "lane";
    step = "32";
    first = "if (lane == 0)";
    break;
  default:
    for (size_t s = 0; s < k_.stages.size(); ++s)
      if (k_.stages[s].kind == Stage::Kind::Reduce)
        line("__shared__ " + regType(k_.dag.type(k_.stages[s].value)) + " kiln_partial" +
             std::to_string(s) + "[32];");
    row = "for (long long o = blockIdx.x; o < R; o += gridDim.x)";
    start = "(long long)threadIdx.x";
    step = "(long long)blockDim.x";
    first = "if (threadIdx.x == 0)";
    break;
  }
  open(row);
  writeDigits("o", "unsigned long long");
  const std::string loop = "for (long long j = " + start + "; j < L; j += " + step + ")";
  for (size_t s = 0; s < k_.stages.size() && error_.empty(); ++s) {
    const Stage &st = k_.stages[s];
    if (st.kind == Stage::Kind::Reduce) {
      if (!st.value.valid() || static_cast<size_t>(st.value.id) >= k_.dag.nodes().size()) {
        fail("reduce stage " + std::to_string(s) + " has no value");
        return;
      }
      const DType t = k_.dag.type(st.value);
      const std::string T = regType(t), sv = "s" + std::to_string(s);
      line(T + " " + sv + ";");
      open("");
      line(T + " acc = " + identity(st.reduce, t) + ";");
      open("if (L > 0)");
      hoist({st.value});
      open(loop);
      inner_ = "j";
      const std::string v = ref(st.value);
      line("acc = " + combine(st.reduce, t, "acc", v) + ";");
      inner_.clear();
      close();
      close();
      if (form != CudaForm::ThreadPerRow)
        // Every lane shuffles, then combines (a shuffle inside the
        // combination's condition would run in some lanes only).
        line("for (int m = 16; m > 0; m >>= 1) { const " + T +
             " other = kiln_shfl_xor(acc, m); acc = " + combine(st.reduce, t, "acc", "other") +
             "; }");
      // Lanes may hold different bits after the butterfly (max of -0 and
      // +0 keeps each lane's own; NaN payloads): lane 0's is the row's.
      if (form == CudaForm::WarpPerRow)
        line("acc = kiln_shfl_first(acc);");
      if (form == CudaForm::BlockPerRow) {
        const std::string p = "kiln_partial" + std::to_string(s);
        line("if ((threadIdx.x & 31u) == 0) " + p + "[threadIdx.x >> 5] = acc;");
        line("__syncthreads();");
        line("acc = " + p + "[0];");
        line("for (unsigned w = 1; w < (blockDim.x >> 5); ++w) acc = " +
             combine(st.reduce, t, "acc", p + "[w]") + ";");
        line("__syncthreads();");
      }
      line(sv + " = " + roundTo(t, "acc") + ";");
      close();
      continue;
    }
    if (st.outerOnly) {
      open(first);
      writeStores(st);
      close();
      continue;
    }
    std::vector<ScalarRef> roots;
    for (const Store &x : st.stores)
      roots.insert(roots.end(), {x.offset, x.value});
    open("if (L > 0)");
    hoist(roots);
    open(loop);
    inner_ = "j";
    writeStores(st);
    inner_.clear();
    close();
    close();
  }
  close();
}

// Per mini float the kernel uses: a decoding table of its codes (from
// miniFloatToFloat, ir/DType.h) and its encoder with the format's constants.
std::string CudaWriter::miniFloatHelpers() {
  std::ostringstream os;
  for (DType t : miniFloats_) {
    const MiniFloatFormat &f = *miniFloatFormat(t);
    const std::string n(dtypeName(t));
    const unsigned codes = 1u << (1 + f.expBits + f.manBits);
    os << "#ifndef KILN_MINI_FLOAT_" << n << "\n#define KILN_MINI_FLOAT_" << n << "\n";
    // The codes' float bits: a NaN has no constant C expression.
    os << "__device__ const unsigned kiln_codes_" << n << "[" << codes << "] = {";
    for (unsigned c = 0; c < codes; ++c) {
      const float v = miniFloatToFloat(f, static_cast<uint8_t>(c));
      uint32_t bits;
      std::memcpy(&bits, &v, sizeof bits);
      os << (c ? ", " : "") << "0x" << std::hex << bits << std::dec << "u";
    }
    os << "};\n";
    os << "__device__ inline float kiln_decode_" << n
       << "(unsigned char c) { return __uint_as_float(kiln_codes_" << n << "[c & " << codes - 1
       << "u]); }\n";
    os << "__device__ inline unsigned kiln_encode_" << n
       << "(float v) {\n  return kiln_encode_mini(v, " << f.manBits << "u, " << f.bias << ", "
       << floatLiteral(miniFloatMax(f), false) << ", "
       << floatLiteral(std::ldexp(1.0, f.bias - 1 + static_cast<int>(f.manBits)), false) << ", "
       << floatLiteral(std::ldexp(1.0, 1 - f.bias), false) << ", "
       << (f.special == MiniFloatFormat::FNUZ ? "true" : "false") << ", "
       << (f.special == MiniFloatFormat::IEEE ? "true" : "false") << ", "
       << (1u << (f.expBits + f.manBits)) << "u, " << unsigned(miniFloatNaN(f, false)) << "u, "
       << unsigned(miniFloatNaN(f, true)) << "u, "
       << (f.special == MiniFloatFormat::IEEE ? unsigned(miniFloatInf(f)) : 0u) << "u);\n}\n";
    os << "#endif\n";
  }
  return os.str();
}

bool CudaWriter::write(const std::string &symbol, CudaKernel &out) {
  std::string why;
  if (!k_.verify(&why))
    return fail("kernel '" + k_.name + "' does not verify: " + why), false;
  const bool sized = k_.hasRunTimeSizes();
  if (sized && (k_.outerDims.size() != k_.outer.size()))
    return fail("a kernel with run-time sizes needs an expression per outer extent"), false;
  out.name = symbol;
  out.form = chooseForm(k_);

  // The extents, then the form's loops.
  line("const long long R = " + [&] {
    std::string r = "1LL";
    for (size_t d = 0; d < k_.outer.size(); ++d) {
      const std::string e = sized ? extent(k_.outerDims[d]) : num(k_.outer[d]);
      line("const long long e" + std::to_string(d) + " = " + e + ";");
      r += " * e" + std::to_string(d);
    }
    return r;
  }() + ";");
  line("const long long L = " + (sized ? extent(k_.innerDim) : num(k_.inner)) + ";");
  if (out.form == CudaForm::Pointwise && writeVectorPointwise())
    out.pointsPerThread = 4;
  else if (out.form == CudaForm::Pointwise)
    writePointwise();
  else
    writeRowKernel(out.form);
  if (!error_.empty())
    return false;

  std::ostringstream src;
  src << "#include \"kiln/Prelude.cuh\"\n" << miniFloatHelpers();
  std::vector<std::string> params;
  for (size_t i = 0; i < k_.inputs.size(); ++i)
    params.push_back("const " + memType(k_.inputs[i].dtype) + " *__restrict__ in" +
                     std::to_string(i));
  for (size_t i = 0; i < k_.outputs.size(); ++i)
    params.push_back(memType(k_.outputs[i].dtype) + " *__restrict__ out" + std::to_string(i));
  if (sized) {
    src << "struct " << symbol << "_sizes { long long v[" << k_.symbols.size() << "]; };\n";
    params.push_back(symbol + "_sizes sizes");
  }
  src << "// " << cudaFormName(out.form)
      << (out.pointsPerThread == 4 ? ", 4 points a thread: 128-bit loads and stores" : "") << "\n";
  src << "extern \"C\" __global__ void __launch_bounds__(" << kCudaBlockThreads << ") " << symbol
      << "(";
  for (size_t i = 0; i < params.size(); ++i)
    src << (i ? ", " : "") << params[i];
  src << ") {\n" << body_.str() << "}\n";
  out.source = src.str();
  for (std::string &p : params)
    p = p.substr(0, p.rfind(' '));
  out.params = std::move(params);
  return true;
}

const std::vector<std::pair<std::string, std::string>> &cudaHeaders() {
  static const std::vector<std::pair<std::string, std::string>> headers = {
#include "CudaHeaders.inc"
      // NVRTC has no C++ library; ir/IntPow.h and ir/IntShift.h include
      // <cstdint> for these two.
      {"cstdint",
       "#pragma once\ntypedef long long int64_t;\ntypedef unsigned long long uint64_t;\n"},
  };
  return headers;
}

std::optional<CudaKernel> emitCudaKernel(const Kernel &k, const std::string &symbol,
                                         std::string &error) {
  CudaWriter w(k);
  CudaKernel out;
  if (!w.write(symbol, out)) {
    error = w.error();
    return std::nullopt;
  }
  return out;
}

} // namespace kiln::codegen::cuda
