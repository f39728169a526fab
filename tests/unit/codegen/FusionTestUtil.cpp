//===- FusionTestUtil.cpp - Helpers of the fusion differential tests ------===//
#include "FusionTestUtil.h"

namespace kiln::codegen::fusiontest {

/// The fusion options of the CPU compiler: oneDNN's table of anchors and
/// epilogue ops.
FusionOptions cpuFusion() {
  FusionOptions fo;
  fo.library = &cpu::oneDnnCapabilities();
  return fo;
}

/// Mnemonics of every op that appeared in a differential case.
std::set<std::string> &covered() {
  static std::set<std::string> s;
  return s;
}

Tensor randomTensor(const TensorType &t, std::mt19937 &rng, const InputOptions &o) {
  std::vector<int64_t> shape = staticSizes(t.shape);
  int64_t n = numElements(shape);
  if (isFloat(t.dtype)) {
    std::normal_distribution<double> d(0.0, o.scale);
    std::vector<double> v(static_cast<size_t>(n));
    for (double &x : v)
      x = d(rng);
    return Tensor::fromDoubles(t.dtype, {n}, v).view(shape);
  }
  std::uniform_int_distribution<int64_t> d(t.dtype == DType::Bool ? 0 : o.intLo,
                                           t.dtype == DType::Bool ? 1 : o.intHi);
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t &x : v)
    x = d(rng);
  return Tensor::fromInts(t.dtype, {n}, v).view(shape);
}

/// Runs a plan: kernels through lowerGroup + interpretKernel, library and
/// fallback groups node by node with their reference kernels.
std::vector<Tensor> runPlan(const Graph &g, const FusionPlan &plan,
                            const std::vector<Tensor> &inputs, int &numKernels) {
  std::unordered_map<const Value *, Tensor> env;
  for (unsigned i = 0; i < g.numInputs(); ++i)
    env[g.input(i)] = inputs[i];
  auto get = [&](const Value *v) -> Tensor {
    if (auto it = env.find(v); it != env.end())
      return it->second;
    const Node *def = v->definingNode();
    if (def && def->kind() == OpKind::Constant)
      return ConstantOp(*def).value();
    ADD_FAILURE() << "value read before any group computed it";
    return Tensor::zeros(v->type().dtype, staticSizes(v->type().shape));
  };
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collect(diag);
  for (const FusionGroup &grp : plan.groups) {
    if (grp.kind == FusionGroup::Kind::Kernel) {
      auto k = lowerGroup(grp, diag);
      if (k.failed()) {
        ADD_FAILURE() << "lowering failed: " << collect.str();
        return {};
      }
      std::string why;
      EXPECT_TRUE(k->verify(&why)) << why << "\n" << k->str();
      EXPECT_EQ(k->inputs.size(), grp.inputs.size());
      EXPECT_EQ(k->outputs.size(), grp.outputs.size());
      ++numKernels;
      std::vector<void *> buffers;
      std::vector<Tensor> keep;
      for (const Value *v : grp.inputs) {
        keep.push_back(get(v));
        buffers.push_back(keep.back().mutableRawData());
      }
      for (const Value *v : grp.outputs) {
        Tensor t = Tensor::zeros(v->type().dtype, staticSizes(v->type().shape));
        buffers.push_back(t.mutableRawData());
        env[v] = t;
      }
      interpretKernel(*k, buffers);
      continue;
    }
    for (const Node *n : grp.nodes) {
      std::vector<Tensor> ops;
      for (const Value *v : n->operands())
        ops.push_back(get(v));
      auto r = evaluateNode(*n, ops, diag);
      if (r.failed()) {
        ADD_FAILURE() << "reference failed: " << collect.str();
        return {};
      }
      for (unsigned i = 0; i < n->numResults(); ++i)
        env[n->result(i)] = (*r)[i];
    }
  }
  std::vector<Tensor> outs;
  for (const Value *v : g.outputs())
    outs.push_back(get(v));
  return outs;
}

/// Not bit-exact against the reference kernel when evaluated: an op with a
/// non-zero `ulps` in ir/Ops.def, unless its lowering is one primitive
/// (the evaluator computes those in double, exactly; tests/unit/OpBounds.h).
bool isInexact(const Node &n) {
  if (n.info().ulps == 0)
    return false;
  if (!n.hasTrait(Elementwise))
    return true;
  std::vector<DType> types;
  for (const Value *v : n.operands())
    types.push_back(v->type().dtype);
  return !kiln::testing::lowersToOnePrimitive(n.info(), n.attrs(), types, n.result()->type().dtype);
}

::testing::AssertionResult close(const Tensor &got, const Tensor &want, bool exact) {
  if (got.dtype() != want.dtype() || got.shape() != want.shape())
    return ::testing::AssertionFailure() << "type " << got.str() << " vs " << want.str();
  DType t = got.dtype();
  double rtol = t == DType::F64 ? 1e-10 : t == DType::F32 ? 2e-5 : 2e-2;
  double atol = t == DType::F64 ? 1e-12 : t == DType::F32 ? 1e-5 : 2e-2;
  int bad = 0;
  ::testing::AssertionResult r = ::testing::AssertionSuccess();
  for (int64_t i = 0; i < got.numel(); ++i) {
    bool ok;
    if (isFloat(t)) {
      double a = got.getDouble(i), b = want.getDouble(i);
      if (std::isnan(a) || std::isnan(b))
        ok = std::isnan(a) && std::isnan(b);
      else if (exact)
        ok = a == b && std::signbit(a) == std::signbit(b);
      else
        ok = a == b || std::fabs(a - b) <= atol + rtol * std::fabs(b);
      if (!ok && bad++ < 5)
        r = (bad == 1 ? ::testing::AssertionFailure() : r)
            << "\n  [" << i << "] got " << a << ", want " << b;
    } else {
      ok = got.getInt(i) == want.getInt(i);
      if (!ok && bad++ < 5)
        r = (bad == 1 ? ::testing::AssertionFailure() : r)
            << "\n  [" << i << "] got " << got.getInt(i) << ", want " << want.getInt(i);
    }
  }
  if (bad)
    r << "\n  (" << bad << " of " << got.numel() << " differ" << (exact ? ", exact" : "") << ")";
  return r;
}

/// Plans, runs and compares `g` with the interpreter on random inputs.
Result check(const Graph &g, const InputOptions &o, FusionOptions fo, unsigned seed) {
  Result res;
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collect(diag);
  std::mt19937 rng(seed);
  std::vector<Tensor> inputs;
  for (unsigned i = 0; i < g.numInputs(); ++i)
    inputs.push_back(o.fixed.count(i) ? o.fixed.at(i) : randomTensor(g.input(i)->type(), rng, o));
  bool exact = true;
  for (const Node *n : g.nodes()) {
    covered().insert(std::string(n->mnemonic()));
    exact = exact && !isInexact(*n);
  }
  auto want = interpret(g, inputs, diag);
  if (want.failed()) {
    ADD_FAILURE() << "the interpreter failed: " << collect.str();
    return res;
  }
  auto plan = planFusion(g, fo, diag);
  if (plan.failed()) {
    ADD_FAILURE() << "planFusion failed: " << collect.str();
    return res;
  }
  res.plan = plan.take();
  std::vector<Tensor> got = runPlan(g, res.plan, inputs, res.numKernels);
  if (got.size() != want->size())
    return res;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(close(got[i], (*want)[i], exact)) << "output " << i << "\n" << res.plan.explain();
  return res;
}

std::vector<DType> allDTypes() {
  std::vector<DType> all;
  for (unsigned i = 0; i < kNumDTypes; ++i)
    all.push_back(static_cast<DType>(i));
  return all;
}

} // namespace kiln::codegen::fusiontest
