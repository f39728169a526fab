//===- InnerIndex.cpp - What the emitter knows about the inner index -----===//
//
// Part of the kernel emitter (KernelEmitter.h; loops and stages are in
// EmitLLVM.cpp): the rewrites that use how a value depends on the inner
// loop index j.
//   - A select chain whose conditions do not read j, between loads, loads
//     one operand from a selected address (Note [Concat as a chosen
//     address]).
//   - A costly value of j alone is computed once per kernel call into a
//     table (Note [Values of the inner index alone, in a table]).
//   - A map stage's inner loop is split where a condition or clamp on j
//     changes (Note [Inner loops split where a condition changes]).
//
//===----------------------------------------------------------------------===//

#include "codegen/cpu/CpuJit.h"
#include "codegen/cpu/KernelEmitter.h"

#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Instructions.h>

#include <algorithm>
#include <unordered_map>

namespace kiln::codegen::cpu {

// Note [Concat as a chosen address]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A concat inside a kernel is a select chain on the concat axis's index
// whose arms load each operand at a clamped index (LowerNode.cpp), so every
// element loads every operand: DenseNet's concat of 23 operands feeding a
// batch norm and a ReLU was a kernel of 23 loads per element, about 17 ms
// of LLVM work each (66 such kernels: 1.1 s of CPU time in a compile).
// When no condition of the chain reads the inner index and every arm is a
// load of one dtype whose offset is `t + x_k` with the same term `t` in
// every arm, the chain selects an address instead: p = select(c_0,
// &in_a[x_a], select(c_1, &in_b[x_b], ...)), then one load of p[t]. The
// selects do not change within the inner loop (LICM hoists them) and the
// load is contiguous when `t` is, so it vectorizes. Only the chosen
// operand is read; each arm's base offset (its clamp included) is still
// computed, once per outer index. The `where` of two loads under a mask
// that is constant along the inner axis takes the same path. Any other
// select is emitted as a select of values, and a chain is tried once (its
// inner selects are not tried again).

/// Whether `r` reads the inner loop index.
bool KernelEmitter::readsInnerIndex(ScalarRef r) {
  int8_t &known = readsInner_[static_cast<size_t>(r.id)];
  if (known != 0)
    return known > 0;
  const ScalarNode &n = k_.dag.node(r);
  bool reads = n.op == ScalarOp::Index && n.slot == k_.innerSlot();
  for (unsigned i = 0; !reads && i < scalarArity(n.op); ++i)
    reads = readsInnerIndex(n.args[i]);
  known = reads ? 1 : -1;
  return reads;
}

Value *KernelEmitter::emitSelectedLoad(ScalarRef root) {
  const ScalarNode &sel = k_.dag.node(root);
  // The arms: loads of the select's dtype, under selects whose conditions
  // do not read the inner index.
  std::vector<ScalarRef> loads;
  auto collect = [&](auto &&self, ScalarRef r) -> bool {
    const ScalarNode &n = k_.dag.node(r);
    if (n.op == ScalarOp::Load) {
      loads.push_back(r);
      return n.type == sel.type && n.slot >= 0 && static_cast<size_t>(n.slot) < k_.inputs.size() &&
             k_.inputs[static_cast<size_t>(n.slot)].dtype == n.type;
    }
    if (n.op != ScalarOp::Select)
      return false;
    triedSelect_[static_cast<size_t>(r.id)] = true;
    return n.type == sel.type && !readsInnerIndex(n.args[0]) && self(self, n.args[1]) &&
           self(self, n.args[2]);
  };
  if (!collect(collect, root))
    return nullptr;
  // Each offset as summands: those reading the inner index (the same in
  // every arm, emitted once) and the rest (the arm's own base offset).
  struct Split {
    std::vector<ScalarRef> inner, rest;
  };
  auto split = [&](ScalarRef offset) {
    Split sp;
    std::vector<ScalarRef> todo{offset};
    while (!todo.empty()) {
      ScalarRef r = todo.back();
      todo.pop_back();
      const ScalarNode &n = k_.dag.node(r);
      if (n.op == ScalarOp::Add) {
        todo.push_back(n.args[1]);
        todo.push_back(n.args[0]);
      } else {
        (readsInnerIndex(r) ? sp.inner : sp.rest).push_back(r);
      }
    }
    auto byId = [](ScalarRef x, ScalarRef y) { return x.id < y.id; };
    std::sort(sp.inner.begin(), sp.inner.end(), byId);
    return sp;
  };
  std::unordered_map<int32_t, Split> splitOf;
  for (ScalarRef l : loads) {
    Split sp = split(k_.dag.node(l).args[0]);
    if (!splitOf.empty() && sp.inner != splitOf.at(loads[0].id).inner)
      return nullptr;
    splitOf.emplace(l.id, std::move(sp));
  }
  llvm::Type *mt = memType(sel.type);
  auto sum = [&](const std::vector<ScalarRef> &terms) -> Value * {
    Value *total = nullptr;
    for (ScalarRef t : terms) {
      Value *v = get(t);
      if (!v)
        return nullptr;
      total = total ? b_.CreateAdd(total, v) : v;
    }
    return total ? total : b_.getInt64(0);
  };
  std::unordered_map<int32_t, Value *> addressOf; // shared sub-chains once
  auto address = [&](auto &&self, ScalarRef r) -> Value * {
    if (auto it = addressOf.find(r.id); it != addressOf.end())
      return it->second;
    const ScalarNode &n = k_.dag.node(r);
    if (n.op == ScalarOp::Load) {
      Value *x = sum(splitOf.at(r.id).rest);
      return addressOf[r.id] =
                 x ? b_.CreateGEP(mt, buffers_[static_cast<size_t>(n.slot)], x) : nullptr;
    }
    Value *c = get(n.args[0]);
    Value *a = c ? self(self, n.args[1]) : nullptr;
    Value *b = a ? self(self, n.args[2]) : nullptr;
    return addressOf[r.id] = b ? b_.CreateSelect(c, a, b) : nullptr;
  };
  Value *base = address(address, root);
  Value *t = base ? sum(splitOf.at(loads[0].id).inner) : nullptr;
  return t ? loadElement(sel.type, b_.CreateGEP(mt, base, t)) : nullptr;
}

// Note [Values of the inner index alone, in a table]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Some values of a kernel read the inner loop index and nothing else that
// changes: a resize's source column and its weight (a cast to f64, a
// division, a floor, two clamps and a cast back, per element), a pad's
// bounds test. They are the same in every outer iteration, but they sit
// inside the inner loop, so LLVM computes them again for every row: a
// U-Net's bilinear 2x upsampling spent ~10 cycles an element on them. So
// before the outer loop the body computes each such value that feeds
// anything else (a load's address, a product with a loaded value, a store)
// for every inner index into a table on the stack, and the inner loops
// read the table, a contiguous load, instead. A value is tabulated when the
// ops it takes cost at least kMinTableCost adds (ir/ScalarOps.def's cost),
// so plain index arithmetic (j + 1, 64 i + j) is left to the loop, and
// only while all tables fit in kMaxTableBytes; the inner extent is at most
// kMaxTableLength and there are at least two outer points (each thread's
// range has at least Schedule::grain of them, so a table is filled once
// for many rows). The table holds the value the inner loop would have
// computed by the same instructions; only a multiply-add across the
// table's edge (a tabulated product added to a loaded value) can no
// longer be contracted into one FMA, a difference within every op's bound
// (a resize's tabulated weights multiply a loaded value, so its results
// are unchanged: tests/lit/codegen/cpu/inner-tables.kir).
constexpr int kMinTableCost = 4;
constexpr int64_t kMaxTableLength = 4096;
constexpr int64_t kMaxTableBytes = 64 * 1024;

void KernelEmitter::planTables() {
  const std::vector<ScalarNode> &nodes = k_.dag.nodes();
  const size_t n = nodes.size();
  table_.assign(n, nullptr);
  tabulated_.clear();
  if (k_.hasRunTimeSizes() || k_.inner < 2 || k_.inner > kMaxTableLength || k_.numOuter() < 2)
    return;
  // Per node: constant (no index), reads the inner index and only it, or
  // reads anything else (an outer index, a load, a stage value).
  enum : uint8_t { Constant, InnerOnly, Other };
  std::vector<uint8_t> kind(n, Other);
  for (size_t i = 0; i < n; ++i) {
    const ScalarNode &nd = nodes[i];
    if (nd.op == ScalarOp::Index) {
      kind[i] = nd.slot == k_.innerSlot() ? InnerOnly : Other;
    } else if (nd.op == ScalarOp::Load || nd.op == ScalarOp::StageValue) {
      kind[i] = Other;
    } else if (scalarClass(nd.op) == ScalarClass::Leaf) {
      kind[i] = Constant;
    } else {
      uint8_t k = Constant;
      for (unsigned a = 0; a < scalarArity(nd.op); ++a) {
        const int32_t id = nd.args[a].id;
        k = std::max(k, id >= 0 && static_cast<size_t>(id) < i ? kind[static_cast<size_t>(id)]
                                                               : uint8_t(Other));
      }
      kind[i] = k;
    }
  }
  // The nodes the stages use, and which inner-only ones feed something else.
  std::vector<bool> used(n, false), frontier(n, false);
  std::vector<int32_t> todo;
  auto root = [&](ScalarRef r) {
    if (r.valid() && static_cast<size_t>(r.id) < n) {
      todo.push_back(r.id);
      frontier[static_cast<size_t>(r.id)] = true;
    }
  };
  for (const Stage &st : k_.stages) {
    root(st.value);
    for (const Store &store : st.stores) {
      root(store.offset);
      root(store.value);
    }
  }
  while (!todo.empty()) {
    const size_t i = static_cast<size_t>(todo.back());
    todo.pop_back();
    if (used[i])
      continue;
    used[i] = true;
    const ScalarNode &nd = nodes[i];
    for (unsigned a = 0; a < scalarArity(nd.op); ++a) {
      const int32_t id = nd.args[a].id;
      if (id < 0 || static_cast<size_t>(id) >= n)
        continue;
      if (kind[i] == Other)
        frontier[static_cast<size_t>(id)] = true;
      todo.push_back(id);
    }
  }
  int64_t bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!used[i] || !frontier[i] || kind[i] != InnerOnly)
      continue;
    // The cost of computing node i from the inner index.
    int cost = 0;
    std::vector<bool> seen(n, false);
    std::vector<size_t> cone{i};
    while (!cone.empty()) {
      const size_t c = cone.back();
      cone.pop_back();
      if (seen[c] || kind[c] != InnerOnly)
        continue;
      seen[c] = true;
      const ScalarNode &nd = nodes[c];
      if (scalarClass(nd.op) == ScalarClass::Leaf)
        continue;
      cost += scalarOpInfo(nd.op).cost;
      for (unsigned a = 0; a < scalarArity(nd.op); ++a)
        cone.push_back(static_cast<size_t>(nd.args[a].id));
    }
    const DType t = nodes[i].type;
    const int64_t size =
        k_.inner * (t == DType::Bool ? 1 : regType(t)->getPrimitiveSizeInBits() / 8);
    if (cost < kMinTableCost || bytes + size > kMaxTableBytes)
      continue;
    bytes += size;
    tabulated_.push_back(static_cast<int32_t>(i));
  }
}

// In the body's entry block: one table per tabulated node, filled for
// every inner index.
void KernelEmitter::fillTables() {
  if (tabulated_.empty())
    return;
  for (int32_t id : tabulated_) {
    const DType t = k_.dag.node(ScalarRef{id}).type;
    llvm::Type *elem = t == DType::Bool ? b_.getInt8Ty() : regType(t);
    auto *table = b_.CreateAlloca(llvm::ArrayType::get(elem, static_cast<uint64_t>(k_.inner)),
                                  nullptr, "table" + std::to_string(id));
    table->setAlignment(llvm::Align(64));
    table_[static_cast<size_t>(id)] = table;
  }
  fillingTables_ = true;
  clearMemo();
  emitLoop(
      b_.getInt64(0), b_.getInt64(k_.inner), "table", {},
      [&](Value *j, const std::vector<Value *> &) -> std::vector<Value *> {
        innerIndex_ = j;
        for (int32_t id : tabulated_) {
          Value *v = get(ScalarRef{id});
          if (!v)
            return {};
          if (k_.dag.node(ScalarRef{id}).type == DType::Bool)
            v = b_.CreateZExt(v, b_.getInt8Ty());
          llvm::AllocaInst *table = table_[static_cast<size_t>(id)];
          b_.CreateStore(
              v, b_.CreateInBoundsGEP(table->getAllocatedType(), table, {b_.getInt64(0), j}));
        }
        return {};
      },
      true);
  innerIndex_ = nullptr;
  fillingTables_ = false;
  clearMemo();
}

Value *KernelEmitter::loadFromTable(ScalarRef r) {
  llvm::AllocaInst *table = table_[static_cast<size_t>(r.id)];
  llvm::Type *elem = table->getAllocatedType()->getArrayElementType();
  Value *v = b_.CreateLoad(
      elem, b_.CreateInBoundsGEP(table->getAllocatedType(), table, {b_.getInt64(0), innerIndex_}));
  return k_.dag.node(r).type == DType::Bool ? b_.CreateTrunc(v, b_.getInt1Ty()) : v;
}

// Note [Inner loops split where a condition changes]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A concat along the inner axis is a select chain on the inner index
// whose arms load each operand at a clamped index (LowerNode.cpp); a pad
// of the inner axis is a bounds test and a clamp. Inside the inner loop
// every element then evaluates every arm, and the clamped indices make
// each load a gather. But each condition (`j + a < c`, `j + a >= c`, ...)
// and each clamp (`max(j + a, c)`, `min(j + a, c)`) of the inner index j
// changes value at one j only. So a map stage's inner loop is split at
// those points into loops over the ranges where none changes, and in each
// range the emitter knows, by interval arithmetic over the kernel's i64
// nodes (the inner index in [b, e), an outer index in [0, extent)), which
// conditions hold, which arm each select takes and which side of each
// clamp wins: a concat's range loads its one operand contiguously, and a
// pad's border ranges store the pad value. At most kMaxInnerLoops loops
// (CpuJit.h); a stage needing more keeps one. Every element is computed as
// before (the same arm, the same index), so no output changes. A range of
// at most kShortInnerRange elements is one vector loop with its remainder,
// not interleaved or unrolled (loop metadata): LLVM's time on DenseNet's
// kernels of 24 ranges fell 10%, and a longer loop's run time did not
// change.

std::vector<int64_t> KernelEmitter::innerBreaks(const Stage &st) {
  if (k_.hasRunTimeSizes()) // the breaks would be expressions too
    return {};
  const std::vector<ScalarNode> &nodes = k_.dag.nodes();
  const size_t n = nodes.size();
  const std::vector<bool> used = k_.reachedBy(st);
  // `x` as j + a, the inner index plus a constant.
  auto innerPlus = [&](ScalarRef x, int64_t &a) {
    const ScalarNode &nd = k_.dag.node(x);
    a = 0;
    if (nd.op == ScalarOp::Index)
      return nd.slot == k_.innerSlot();
    if (nd.op != ScalarOp::Add && nd.op != ScalarOp::Sub)
      return false;
    const ScalarNode &l = k_.dag.node(nd.args[0]), &r = k_.dag.node(nd.args[1]);
    const bool lInner = l.op == ScalarOp::Index && l.slot == k_.innerSlot();
    const bool rInner = r.op == ScalarOp::Index && r.slot == k_.innerSlot();
    if (lInner && r.op == ScalarOp::ConstInt) {
      if (nd.op == ScalarOp::Sub && r.ivalue == INT64_MIN)
        return false;
      a = nd.op == ScalarOp::Add ? r.ivalue : -r.ivalue;
      return true;
    }
    if (rInner && l.op == ScalarOp::ConstInt && nd.op == ScalarOp::Add) {
      a = l.ivalue;
      return true;
    }
    return false;
  };
  std::vector<int64_t> breaks;
  for (size_t i = 0; i < n; ++i) {
    const ScalarNode &nd = nodes[i];
    if (!used[i] || scalarArity(nd.op) != 2 || nd.op == ScalarOp::Select)
      continue;
    const bool compare = scalarClass(nd.op) == ScalarClass::Compare && nd.op != ScalarOp::Eq;
    if (!compare && nd.op != ScalarOp::Min && nd.op != ScalarOp::Max)
      continue;
    if (k_.dag.type(nd.args[0]) != DType::I64)
      continue;
    // x OP c or c OP x, x = j + a: the test flips between j = c - a - 1
    // and c - a (x <= c, x > c, c < x, c >= x and min(x, c): between
    // c - a and c - a + 1).
    for (int side = 0; side < 2; ++side) {
      int64_t a = 0;
      const ScalarNode &c = k_.dag.node(nd.args[1 - side]);
      if (c.op != ScalarOp::ConstInt || !innerPlus(nd.args[side], a))
        continue;
      // min(x, c) is x up to x = c, max(x, c) is c up to x = c.
      const bool strictUpper = nd.op == ScalarOp::Min || (nd.op == ScalarOp::Le && side == 0) ||
                               (nd.op == ScalarOp::Gt && side == 0) ||
                               (nd.op == ScalarOp::Lt && side == 1) ||
                               (nd.op == ScalarOp::Ge && side == 1);
      int64_t t = 0;
      if (__builtin_sub_overflow(c.ivalue, a, &t) ||
          __builtin_add_overflow(t, strictUpper ? 1 : 0, &t))
        continue;
      if (t > 0 && t < k_.inner)
        breaks.push_back(t);
    }
  }
  std::sort(breaks.begin(), breaks.end());
  breaks.erase(std::unique(breaks.begin(), breaks.end()), breaks.end());
  if (breaks.size() + 1 > kMaxInnerLoops)
    breaks.clear();
  return breaks;
}

void KernelEmitter::resolveFor(int64_t b, int64_t e) {
  const std::vector<ScalarNode> &nodes = k_.dag.nodes();
  const size_t n = nodes.size();
  resolved_.assign(n, kUnresolved);
  struct Range {
    bool known = false;
    int64_t lo = 0, hi = 0;
  };
  std::vector<Range> range(n);
  auto rangeOf = [&](ScalarRef r) {
    return r.id >= 0 && static_cast<size_t>(r.id) < n ? range[static_cast<size_t>(r.id)] : Range{};
  };
  // The node a value resolves to (itself when it does not).
  auto target = [&](ScalarRef r) {
    const int32_t same = resolved_[static_cast<size_t>(r.id)];
    return same >= 0 ? same : r.id;
  };
  for (size_t i = 0; i < n; ++i) {
    const ScalarNode &nd = nodes[i];
    const unsigned arity = scalarArity(nd.op);
    bool argsValid = true;
    for (unsigned a = 0; a < arity; ++a)
      argsValid &= nd.args[a].id >= 0 && static_cast<size_t>(nd.args[a].id) < i;
    if (!argsValid)
      continue;
    Range x = arity > 0 ? rangeOf(nd.args[0]) : Range{};
    Range y = arity > 1 ? rangeOf(nd.args[1]) : Range{};
    const bool both = x.known && y.known;
    auto set = [&](int64_t lo, int64_t hi) { range[i] = {true, lo, hi}; };
    auto alias = [&](ScalarRef r) {
      resolved_[i] = target(r);
      range[i] = rangeOf(r);
    };
    auto decide = [&](bool value) {
      resolved_[i] = value ? kTrue : kFalse;
      set(value, value);
    };
    int64_t lo = 0, hi = 0;
    switch (nd.op) {
    case ScalarOp::Index:
      if (nd.slot == k_.innerSlot())
        set(b, e - 1);
      else if (nd.slot >= 0 && static_cast<size_t>(nd.slot) < k_.outer.size())
        set(0, std::max<int64_t>(k_.outer[static_cast<size_t>(nd.slot)] - 1, 0));
      break;
    case ScalarOp::ConstInt:
      if (nd.type == DType::I64)
        set(nd.ivalue, nd.ivalue);
      break;
    case ScalarOp::Add:
      if (nd.type == DType::I64 && both && !__builtin_add_overflow(x.lo, y.lo, &lo) &&
          !__builtin_add_overflow(x.hi, y.hi, &hi))
        set(lo, hi);
      break;
    case ScalarOp::Sub:
      if (nd.type == DType::I64 && both && !__builtin_sub_overflow(x.lo, y.hi, &lo) &&
          !__builtin_sub_overflow(x.hi, y.lo, &hi))
        set(lo, hi);
      break;
    case ScalarOp::Mul:
      if (nd.type == DType::I64 && both && y.lo == y.hi && y.lo >= 0 &&
          !__builtin_mul_overflow(x.lo, y.lo, &lo) && !__builtin_mul_overflow(x.hi, y.lo, &hi))
        set(lo, hi);
      break;
    case ScalarOp::Min:
    case ScalarOp::Max:
      if (nd.type != DType::I64 || !both)
        break;
      if (x.hi <= y.lo)
        alias(nd.args[nd.op == ScalarOp::Min ? 0 : 1]);
      else if (y.hi <= x.lo)
        alias(nd.args[nd.op == ScalarOp::Min ? 1 : 0]);
      else if (nd.op == ScalarOp::Min)
        set(std::min(x.lo, y.lo), std::min(x.hi, y.hi));
      else
        set(std::max(x.lo, y.lo), std::max(x.hi, y.hi));
      break;
    case ScalarOp::Lt:
    case ScalarOp::Le:
    case ScalarOp::Gt:
    case ScalarOp::Ge:
    case ScalarOp::Eq: {
      if (k_.dag.type(nd.args[0]) != DType::I64 || !both)
        break;
      if (nd.op == ScalarOp::Gt || nd.op == ScalarOp::Ge)
        std::swap(x, y); // y < x, y <= x
      const bool strict = nd.op == ScalarOp::Lt || nd.op == ScalarOp::Gt;
      if (nd.op == ScalarOp::Eq) {
        if (x.hi < y.lo || y.hi < x.lo)
          decide(false);
        else if (x.lo == x.hi && y.lo == y.hi)
          decide(true);
      } else if (strict ? x.hi < y.lo : x.hi <= y.lo) {
        decide(true);
      } else if (strict ? x.lo >= y.hi : x.lo > y.hi) {
        decide(false);
      }
      break;
    }
    case ScalarOp::Not:
      if (nd.type == DType::Bool && x.known)
        decide(x.lo == 0);
      break;
    case ScalarOp::And:
    case ScalarOp::Or:
      if (nd.type != DType::Bool)
        break;
      if (nd.op == ScalarOp::And ? (x.known && x.lo == 0) || (y.known && y.lo == 0)
                                 : (x.known && x.lo == 1) || (y.known && y.lo == 1))
        decide(nd.op == ScalarOp::Or);
      else if (both)
        decide(nd.op == ScalarOp::And ? x.lo && y.lo : x.lo || y.lo);
      break;
    case ScalarOp::Select:
      if (x.known)
        alias(nd.args[x.lo ? 1 : 2]);
      break;
    default:
      break;
    }
  }
}

} // namespace kiln::codegen::cpu
