//===- KernelIR.cpp - Target-neutral kernels --------------------*- C++ -*-===//
//
// Kernel::verify, the text form and its hash, and interpretKernel: the slow,
// obviously correct oracle that runs a kernel with evaluateScalars.
//
//===----------------------------------------------------------------------===//
#include "codegen/KernelIR.h"

#include "ir/Tensor.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <type_traits>

namespace kiln::codegen {

const char *reduceKindName(ReduceKind k) {
  switch (k) {
  case ReduceKind::Sum:
    return "sum";
  case ReduceKind::Max:
    return "max";
  case ReduceKind::Min:
    return "min";
  case ReduceKind::Prod:
    return "prod";
  }
  kiln_unreachable("bad reduce kind");
}

namespace {

std::string dimsStr(const std::vector<DimExpr> &dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i)
    s += (i ? ", " : "") + dims[i].str();
  return s + "]";
}

std::string bufferStr(const char *prefix, size_t i, const KernelBuffer &b,
                      const std::vector<DimExpr> *dims) {
  std::ostringstream os;
  os << prefix << i << ": " << dtypeName(b.dtype) << (dims ? dimsStr(*dims) : sizesStr(b.shape));
  return os.str();
}

std::optional<int64_t> evaluateDim(const DimExpr &e, const std::vector<std::string> &symbols,
                                   const std::vector<int64_t> &sizes) {
  std::map<std::string, int64_t> values;
  for (size_t i = 0; i < symbols.size() && i < sizes.size(); ++i)
    values[symbols[i]] = sizes[i];
  return e.evaluate(values);
}

/// For each node: the highest stage whose value it reads (-1: none) and
/// whether it reads the inner index.
struct NodeDeps {
  std::vector<int32_t> stage;
  std::vector<bool> inner;
};

NodeDeps nodeDeps(const Kernel &k) {
  const auto &nodes = k.dag.nodes();
  NodeDeps d{std::vector<int32_t>(nodes.size(), -1), std::vector<bool>(nodes.size(), false)};
  for (size_t i = 0; i < nodes.size(); ++i) {
    const ScalarNode &n = nodes[i];
    if (n.op == ScalarOp::StageValue)
      d.stage[i] = n.slot;
    if (n.op == ScalarOp::Index && n.slot == k.innerSlot())
      d.inner[i] = true;
    for (unsigned a = 0; a < scalarArity(n.op); ++a) {
      size_t arg = static_cast<size_t>(n.args[a].id);
      d.stage[i] = std::max(d.stage[i], d.stage[arg]);
      d.inner[i] = d.inner[i] || d.inner[arg];
    }
  }
  return d;
}

} // namespace

bool Kernel::verify(std::string *why) const {
  auto fail = [&](const std::string &msg) {
    if (why)
      *why = msg;
    return false;
  };
  const bool sym = hasRunTimeSizes();
  for (int64_t d : outer)
    if (d < 0 && !(sym && d == -1))
      return fail("negative outer extent " + std::to_string(d));
  if (inner < 0 && !(sym && inner == -1))
    return fail("negative inner extent " + std::to_string(inner));
  if (sym) {
    std::set<std::string> names(symbols.begin(), symbols.end());
    auto known = [&](const DimExpr &e) {
      std::set<std::string> used;
      e.collectSymbols(used);
      return std::includes(names.begin(), names.end(), used.begin(), used.end());
    };
    if (names.size() != symbols.size())
      return fail("a symbol is named twice");
    if (outerDims.size() != outer.size())
      return fail("outer has " + std::to_string(outer.size()) + " dims but " +
                  std::to_string(outerDims.size()) + " extents");
    for (size_t d = 0; d < outer.size(); ++d)
      if (!known(outerDims[d]) ||
          (outerDims[d].isConstant() ? outer[d] != outerDims[d].constant() : outer[d] != -1))
        return fail("outer extent " + std::to_string(d) + " (" + outerDims[d].str() +
                    ") disagrees with outer or names an unknown symbol");
    if (!known(innerDim) || (innerDim.isConstant() ? inner != innerDim.constant() : inner != -1))
      return fail("the inner extent (" + innerDim.str() +
                  ") disagrees with inner or names an unknown symbol");
    if (bufferDims.size() != inputs.size() + outputs.size())
      return fail("not one list of dims per buffer");
    for (size_t i = 0; i < bufferDims.size(); ++i) {
      const KernelBuffer &b = i < inputs.size() ? inputs[i] : outputs[i - inputs.size()];
      const std::vector<DimExpr> &dims = bufferDims[i];
      if (dims.size() != b.shape.size())
        return fail("buffer '" + b.name + "' has no expression for each dim");
      for (size_t d = 0; d < dims.size(); ++d)
        if (!known(dims[d]) ||
            (dims[d].isConstant() ? b.shape[d] != dims[d].constant() : b.shape[d] != -1))
          return fail("buffer '" + b.name + "' dim " + std::to_string(d) +
                      " disagrees with its expression or names an unknown symbol");
    }
  } else if (!outerDims.empty() || !bufferDims.empty() || !innerDim.isConstant() ||
             innerDim.constant() != 0) {
    return fail("extents as expressions in a kernel without symbols");
  }
  if (outputs.empty())
    return fail("kernel has no outputs");
  const auto &nodes = dag.nodes();
  auto valid = [&](ScalarRef r) { return r.valid() && static_cast<size_t>(r.id) < nodes.size(); };
  for (size_t i = 0; i < nodes.size(); ++i) {
    const ScalarNode &n = nodes[i];
    std::string at = "node %" + std::to_string(i) + ": ";
    for (unsigned a = 0; a < scalarArity(n.op); ++a)
      if (!valid(n.args[a]) || static_cast<size_t>(n.args[a].id) >= i)
        return fail(at + "operand does not refer to an earlier node");
    switch (n.op) {
    case ScalarOp::Index:
      if (n.slot < 0 || n.slot > innerSlot())
        return fail(at + "index slot " + std::to_string(n.slot) + " out of range");
      if (n.type != DType::I64)
        return fail(at + "index is not i64");
      break;
    case ScalarOp::Size:
      if (n.slot < 0 || static_cast<size_t>(n.slot) >= symbols.size())
        return fail(at + "size slot " + std::to_string(n.slot) + " out of range");
      if (n.type != DType::I64)
        return fail(at + "size is not i64");
      break;
    case ScalarOp::Load:
      if (n.slot < 0 || static_cast<size_t>(n.slot) >= inputs.size())
        return fail(at + "load of input " + std::to_string(n.slot) + " out of range");
      if (inputs[static_cast<size_t>(n.slot)].dtype != n.type)
        return fail(at + "load type differs from the input's dtype");
      if (dag.type(n.args[0]) != DType::I64)
        return fail(at + "load offset is not i64");
      break;
    case ScalarOp::StageValue: {
      if (n.slot < 0 || static_cast<size_t>(n.slot) >= stages.size())
        return fail(at + "stage value " + std::to_string(n.slot) + " out of range");
      const Stage &st = stages[static_cast<size_t>(n.slot)];
      if (st.kind != Stage::Kind::Reduce)
        return fail(at + "stage value of a map stage");
      if (!valid(st.value) || dag.type(st.value) != n.type)
        return fail(at + "stage value type differs from the stage's");
      break;
    }
    default:
      break;
    }
  }
  NodeDeps deps = nodeDeps(*this);
  std::vector<bool> stored(outputs.size(), false);
  for (size_t s = 0; s < stages.size(); ++s) {
    const Stage &st = stages[s];
    std::string at = "stage " + std::to_string(s) + ": ";
    auto usable = [&](ScalarRef r, const char *what) -> std::string {
      if (!valid(r))
        return at + what + " is not a node";
      if (deps.stage[static_cast<size_t>(r.id)] >= static_cast<int32_t>(s))
        return at + what + " reads the value of stage " +
               std::to_string(deps.stage[static_cast<size_t>(r.id)]);
      if (st.outerOnly && deps.inner[static_cast<size_t>(r.id)])
        return at + what + " reads the inner index in an outer-only stage";
      return "";
    };
    if (st.kind == Stage::Kind::Reduce) {
      if (st.outerOnly)
        return fail(at + "a reduce stage cannot be outer-only");
      if (std::string e = usable(st.value, "reduced value"); !e.empty())
        return fail(e);
      if (dag.type(st.value) == DType::Bool)
        return fail(at + "reduction of bools");
      if (!st.stores.empty())
        return fail(at + "a reduce stage has stores");
      continue;
    }
    for (const Store &store : st.stores) {
      if (store.output < 0 || static_cast<size_t>(store.output) >= outputs.size())
        return fail(at + "store to output " + std::to_string(store.output) + " out of range");
      if (std::string e = usable(store.offset, "store offset"); !e.empty())
        return fail(e);
      if (std::string e = usable(store.value, "stored value"); !e.empty())
        return fail(e);
      if (dag.type(store.offset) != DType::I64)
        return fail(at + "store offset is not i64");
      if (dag.type(store.value) != outputs[static_cast<size_t>(store.output)].dtype)
        return fail(at + "stored value type differs from output " + std::to_string(store.output) +
                    "'s dtype");
      stored[static_cast<size_t>(store.output)] = true;
    }
  }
  for (size_t o = 0; o < outputs.size(); ++o)
    if (!stored[o] && (sym || outputs[o].numElements() > 0))
      return fail("output " + std::to_string(o) + " is never stored");
  return true;
}

namespace {

std::string kernelText(const Kernel &k, bool withName) {
  std::ostringstream os;
  os << "kernel @" << (withName ? k.name : std::string("_")) << "(";
  auto dims = [&](size_t i) { return k.hasRunTimeSizes() ? &k.bufferDims[i] : nullptr; };
  for (size_t i = 0; i < k.inputs.size(); ++i)
    os << (i ? ", " : "") << bufferStr("in", i, k.inputs[i], dims(i));
  os << ") -> (";
  for (size_t i = 0; i < k.outputs.size(); ++i)
    os << (i ? ", " : "") << bufferStr("out", i, k.outputs[i], dims(k.inputs.size() + i));
  os << ") {\n";
  // Buffer names are debugging aids: printed as comments, left out of the
  // hash so that equal computations on other values hash alike.
  if (withName) {
    for (size_t i = 0; i < k.inputs.size(); ++i)
      os << "  // in" << i << " = %" << k.inputs[i].name << "\n";
    for (size_t i = 0; i < k.outputs.size(); ++i)
      os << "  // out" << i << " = %" << k.outputs[i].name << "\n";
  }
  if (k.hasRunTimeSizes()) {
    os << "  sizes";
    for (size_t i = 0; i < k.symbols.size(); ++i)
      os << " #" << i << "=" << k.symbols[i];
    os << "\n  outer " << dimsStr(k.outerDims) << " inner " << k.innerDim.str() << "\n";
  } else {
    os << "  outer " << sizesStr(k.outer) << " inner " << k.inner << "\n";
  }
  std::istringstream dag(k.dag.str());
  for (std::string line; std::getline(dag, line);)
    os << "  " << line << "\n";
  for (size_t s = 0; s < k.stages.size(); ++s) {
    const Stage &st = k.stages[s];
    if (st.kind == Stage::Kind::Reduce) {
      os << "  stage " << s << " reduce " << reduceKindName(st.reduce) << " %" << st.value.id
         << "\n";
      continue;
    }
    os << "  stage " << s << (st.outerOnly ? " map outer-only" : " map") << "\n";
    for (const Store &store : st.stores)
      os << "    store out" << store.output << "[%" << store.offset.id << "] = %" << store.value.id
         << "\n";
  }
  os << "}\n";
  return os.str();
}

} // namespace

std::string Kernel::str() const {
  return kernelText(*this, /*withName=*/true);
}

uint64_t Kernel::hash() const {
  std::string text = kernelText(*this, /*withName=*/false);
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

namespace {
template <typename T> void appendBytes(std::string &key, const T &v) {
  static_assert(std::is_trivially_copyable_v<T>);
  key.append(reinterpret_cast<const char *>(&v), sizeof v);
}

void appendString(std::string &key, const std::string &s) {
  appendBytes(key, s.size());
  key += s;
}

void appendSizes(std::string &key, const std::vector<int64_t> &sizes) {
  appendBytes(key, sizes.size());
  for (int64_t d : sizes)
    appendBytes(key, d);
}
} // namespace

std::vector<bool> Kernel::reachedBy(const Stage &st) const {
  const std::vector<ScalarNode> &nodes = dag.nodes();
  std::vector<bool> reached(nodes.size(), false);
  std::vector<int32_t> work;
  for (const Store &store : st.stores)
    work.insert(work.end(), {store.offset.id, store.value.id});
  while (!work.empty()) {
    const int32_t id = work.back();
    work.pop_back();
    if (id < 0 || static_cast<size_t>(id) >= nodes.size() || reached[static_cast<size_t>(id)])
      continue;
    reached[static_cast<size_t>(id)] = true;
    const ScalarNode &n = nodes[static_cast<size_t>(id)];
    for (unsigned a = 0; a < scalarArity(n.op); ++a)
      work.push_back(n.args[a].id);
  }
  return reached;
}

std::string Kernel::codeKey() const {
  std::string key;
  for (const auto *buffers : {&inputs, &outputs}) {
    appendBytes(key, buffers->size());
    for (const KernelBuffer &b : *buffers) {
      appendBytes(key, b.dtype);
      appendSizes(key, b.shape);
    }
  }
  for (const std::vector<DimExpr> &dims : bufferDims)
    for (const DimExpr &d : dims)
      appendString(key, d.str());
  appendSizes(key, outer);
  appendBytes(key, inner);
  appendBytes(key, symbols.size());
  for (const std::string &sym : symbols)
    appendString(key, sym);
  for (const DimExpr &d : outerDims)
    appendString(key, d.str());
  appendString(key, innerDim.str());
  appendBytes(key, dag.nodes().size());
  for (const ScalarNode &n : dag.nodes()) {
    appendBytes(key, n.op);
    appendBytes(key, n.type);
    for (const ScalarRef &a : n.args)
      appendBytes(key, a.id);
    appendBytes(key, n.fvalue); // the bits: -0.0 and NaN payloads stay apart
    appendBytes(key, n.ivalue);
    appendBytes(key, n.slot);
  }
  appendBytes(key, stages.size());
  for (const Stage &st : stages) {
    appendBytes(key, st.kind);
    appendBytes(key, st.reduce);
    appendBytes(key, st.value.id);
    appendBytes(key, st.outerOnly);
    appendBytes(key, st.stores.size());
    for (const Store &store : st.stores) {
      appendBytes(key, store.output);
      appendBytes(key, store.offset.id);
      appendBytes(key, store.value.id);
    }
  }
  return key;
}

bool canWriteInPlace(const Kernel &k, int32_t output, int32_t input) {
  if (output < 0 || static_cast<size_t>(output) >= k.outputs.size() || input < 0 ||
      static_cast<size_t>(input) >= k.inputs.size() || k.outputs.size() != 1 || k.stages.empty())
    return false;
  const KernelBuffer &in = k.inputs[static_cast<size_t>(input)];
  const KernelBuffer &out = k.outputs[static_cast<size_t>(output)];
  if (dtypeSize(in.dtype) != dtypeSize(out.dtype) || in.numElements() != out.numElements())
    return false;
  // One store, in the last stage, a Map.
  const Stage &last = k.stages.back();
  if (last.kind != Stage::Kind::Map || last.stores.size() != 1)
    return false;
  for (size_t s = 0; s + 1 < k.stages.size(); ++s)
    if (!k.stages[s].stores.empty())
      return false;
  const ScalarRef target = last.stores[0].offset;
  // Every load of the input reachable from a stage reads `target`.
  const auto &nodes = k.dag.nodes();
  std::vector<bool> needed(nodes.size(), false);
  auto mark = [&](ScalarRef r) {
    if (r.valid())
      needed[static_cast<size_t>(r.id)] = true;
  };
  for (const Stage &st : k.stages) {
    mark(st.value);
    for (const Store &store : st.stores) {
      mark(store.offset);
      mark(store.value);
    }
  }
  for (size_t i = nodes.size(); i-- > 0;) {
    if (!needed[i])
      continue;
    const ScalarNode &n = nodes[i];
    for (unsigned a = 0; a < scalarArity(n.op); ++a)
      mark(n.args[a]);
    if (n.op == ScalarOp::Load && n.slot == input && !(n.args[0] == target))
      return false;
  }
  return true;
}

//===----------------------------------------------------------------------===//
// The interpreter
//===----------------------------------------------------------------------===//

namespace {

/// The nodes `roots` need, copied into a fresh DAG (ids remapped); `map`
/// gives each old id its new one (-1: not needed).
ScalarDag prune(const ScalarDag &dag, const std::vector<ScalarRef> &roots,
                std::vector<int32_t> &map) {
  const auto &nodes = dag.nodes();
  std::vector<bool> needed(nodes.size(), false);
  for (ScalarRef r : roots)
    needed[static_cast<size_t>(r.id)] = true;
  for (size_t i = nodes.size(); i-- > 0;)
    if (needed[i])
      for (unsigned a = 0; a < scalarArity(nodes[i].op); ++a)
        needed[static_cast<size_t>(nodes[i].args[a].id)] = true;
  ScalarDag out;
  map.assign(nodes.size(), -1);
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!needed[i])
      continue;
    ScalarNode n = nodes[i];
    for (unsigned a = 0; a < scalarArity(n.op); ++a)
      n.args[a].id = map[static_cast<size_t>(n.args[a].id)];
    map[i] = out.add(n).id;
  }
  return out;
}

ScalarValue identity(ReduceKind kind, DType t) {
  ScalarValue v;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (isFloat(t)) {
    v.f = kind == ReduceKind::Sum    ? 0.0
          : kind == ReduceKind::Prod ? 1.0
          : kind == ReduceKind::Max  ? -kInf
                                     : kInf;
    return v;
  }
  const int64_t lowest = intLowest(t), highest = intHighest(t);
  v.i = kind == ReduceKind::Sum    ? 0
        : kind == ReduceKind::Prod ? 1
        : kind == ReduceKind::Max  ? lowest
                                   : highest;
  return v;
}

ScalarOp combineOp(ReduceKind kind) {
  switch (kind) {
  case ReduceKind::Sum:
    return ScalarOp::Add;
  case ReduceKind::Prod:
    return ScalarOp::Mul;
  case ReduceKind::Max:
    return ScalarOp::Max;
  case ReduceKind::Min:
    return ScalarOp::Min;
  }
  kiln_unreachable("bad reduce kind");
}

} // namespace

void copyDagAndStages(
    const Kernel &from, Kernel &to,
    const std::function<ScalarRef(ScalarDag &, size_t, const ScalarNode &)> &replace) {
  std::vector<ScalarRef> map;
  const auto &nodes = from.dag.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    ScalarRef r = replace(to.dag, i, nodes[i]);
    if (!r.valid()) {
      ScalarNode c = nodes[i];
      for (unsigned a = 0; a < scalarArity(c.op); ++a)
        c.args[a] = map[static_cast<size_t>(c.args[a].id)];
      r = to.dag.add(c);
    }
    map.push_back(r);
  }
  auto remap = [&](ScalarRef r) { return r.valid() ? map[static_cast<size_t>(r.id)] : r; };
  for (const Stage &st : from.stages) {
    Stage ns = st;
    ns.value = remap(st.value);
    for (Store &store : ns.stores) {
      store.offset = remap(store.offset);
      store.value = remap(store.value);
    }
    to.stages.push_back(std::move(ns));
  }
}

Kernel Kernel::bind(const std::vector<int64_t> &sizes) const {
  if (!hasRunTimeSizes())
    return *this;
  KILN_ASSERT(sizes.size() == symbols.size() && "one size per symbol");
  auto value = [&](const DimExpr &e) {
    std::optional<int64_t> v = evaluateDim(e, symbols, sizes);
    KILN_ASSERT(v && "a kernel extent does not evaluate");
    return *v;
  };
  Kernel out;
  out.name = name;
  out.inputs = inputs;
  out.outputs = outputs;
  for (size_t i = 0; i < bufferDims.size(); ++i) {
    KernelBuffer &b = i < inputs.size() ? out.inputs[i] : out.outputs[i - inputs.size()];
    for (size_t d = 0; d < b.shape.size(); ++d)
      b.shape[d] = value(bufferDims[i][d]);
  }
  for (const DimExpr &d : outerDims)
    out.outer.push_back(value(d));
  out.inner = value(innerDim);
  copyDagAndStages(*this, out, [&](ScalarDag &d, size_t, const ScalarNode &n) {
    return n.op == ScalarOp::Size ? d.constInt(DType::I64, sizes[static_cast<size_t>(n.slot)])
                                  : ScalarRef{};
  });
  return out;
}

void interpretKernel(const Kernel &symbolic, const std::vector<void *> &buffers,
                     const std::vector<int64_t> &sizes) {
  const Kernel k = symbolic.bind(sizes);
  KILN_ASSERT(buffers.size() == k.inputs.size() + k.outputs.size() && "one pointer per buffer");
  std::vector<Tensor> ins, outs;
  for (size_t i = 0; i < k.inputs.size(); ++i)
    ins.push_back(Tensor::borrow(k.inputs[i].dtype, k.inputs[i].shape, nullptr, buffers[i]));
  for (size_t i = 0; i < k.outputs.size(); ++i)
    outs.push_back(Tensor::borrow(k.outputs[i].dtype, k.outputs[i].shape, nullptr,
                                  buffers[k.inputs.size() + i]));

  // Per stage: the pruned DAG of what it evaluates and its roots there.
  struct StagePlan {
    ScalarDag dag;
    std::vector<int32_t> map;
    ScalarDag combine; // acc op value, for reduce stages
  };
  std::vector<StagePlan> plans(k.stages.size());
  for (size_t s = 0; s < k.stages.size(); ++s) {
    const Stage &st = k.stages[s];
    std::vector<ScalarRef> roots;
    if (st.kind == Stage::Kind::Reduce) {
      roots.push_back(st.value);
      DType t = k.dag.type(st.value);
      ScalarDag &c = plans[s].combine;
      ScalarNode n{combineOp(st.reduce), t};
      n.args = {c.stageValue(t, 0), c.stageValue(t, 1), ScalarRef{}};
      c.add(n);
    } else {
      for (const Store &store : st.stores) {
        roots.push_back(store.offset);
        roots.push_back(store.value);
      }
    }
    plans[s].dag = prune(k.dag, roots, plans[s].map);
  }

  std::vector<int64_t> outerIdx(k.outer.size(), 0);
  std::vector<ScalarValue> stageVals(k.stages.size());
  int64_t numOuter = k.numOuter();
  for (int64_t o = 0; o < numOuter; ++o) {
    int64_t rest = o;
    for (size_t d = k.outer.size(); d-- > 0;) {
      outerIdx[d] = rest % k.outer[d];
      rest /= k.outer[d];
    }
    int64_t j = 0;
    auto leaf = [&](const ScalarNode &n, const std::vector<ScalarValue> &vals) {
      ScalarValue v;
      switch (n.op) {
      case ScalarOp::Index:
        v.i = n.slot == k.innerSlot() ? j : outerIdx[static_cast<size_t>(n.slot)];
        break;
      case ScalarOp::StageValue:
        v = stageVals[static_cast<size_t>(n.slot)];
        break;
      case ScalarOp::Load: {
        const Tensor &t = ins[static_cast<size_t>(n.slot)];
        int64_t off = vals[static_cast<size_t>(n.args[0].id)].i;
        KILN_ASSERT(off >= 0 && off < t.numel() && "kernel load out of bounds");
        if (isFloat(t.dtype()))
          v.f = t.getDouble(off);
        else
          v.i = t.getInt(off);
        break;
      }
      default:
        kiln_unreachable("not a leaf");
      }
      return v;
    };
    for (size_t s = 0; s < k.stages.size(); ++s) {
      const Stage &st = k.stages[s];
      const StagePlan &plan = plans[s];
      auto at = [&](const std::vector<ScalarValue> &vals, ScalarRef r) {
        return vals[static_cast<size_t>(plan.map[static_cast<size_t>(r.id)])];
      };
      if (st.kind == Stage::Kind::Reduce) {
        DType t = k.dag.type(st.value);
        ScalarValue acc = identity(st.reduce, t);
        for (j = 0; j < k.inner; ++j) {
          ScalarValue v = at(evaluateScalars(plan.dag, leaf), st.value);
          auto combined = evaluateScalars(plan.combine, [&](const ScalarNode &n, const auto &) {
            return n.slot == 0 ? acc : v;
          });
          acc = combined.back();
        }
        stageVals[s] = acc;
        continue;
      }
      int64_t count = st.outerOnly ? 1 : k.inner;
      for (j = 0; j < count; ++j) {
        std::vector<ScalarValue> vals = evaluateScalars(plan.dag, leaf);
        for (const Store &store : st.stores) {
          const Tensor &t = outs[static_cast<size_t>(store.output)];
          int64_t off = at(vals, store.offset).i;
          KILN_ASSERT(off >= 0 && off < t.numel() && "kernel store out of bounds");
          ScalarValue v = at(vals, store.value);
          if (isFloat(t.dtype()))
            t.setDouble(off, v.f);
          else
            t.setInt(off, v.i);
        }
      }
    }
  }
}

} // namespace kiln::codegen
