//===- RunTimeSizes.cpp - Kernels compiled once for every size ------------===//
//
// samplePlan, generalizeKernel and the driver lowerForAllSizes (see
// RunTimeSizes.h and the Note below).
//
//===----------------------------------------------------------------------===//
#include "codegen/RunTimeSizes.h"

#include "codegen/ExecutableBuilder.h"
#include "codegen/Fusion.h"
#include "codegen/Internal.h"
#include "codegen/KernelSharing.h"
#include "codegen/cpu/CpuJit.h"
#include "codegen/cpu/dnnl/OneDnnSteps.h"
#include "ir/Interpreter.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <set>

namespace kiln::codegen {

// Note [Kernels with run-time sizes]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A kernel with run-time sizes (Kernel::symbols) reads the values of its
// symbols from a size array the caller passes after its buffers; its
// extents are polynomials over them and its DAG reads them as Size leaves.
// The backend loops to run-time bounds: the inner loop still vectorizes,
// with a remainder loop, and outer indices are digits of run-time extents.
// What a static kernel gets from knowing its sizes is not done for these:
// no tables of inner-index values and no inner loops split where a
// condition changes (codegen/cpu/InnerIndex.cpp), and a division by an
// extent is a division instruction rather than a multiply-shift.
//
// Such a kernel is not lowered from symbolic shapes directly. The lowering
// (Lower.cpp, LowerNode.cpp, AffineIndex.h) simplifies index arithmetic
// with facts about sizes (a range below a divisor, an extent that a stride
// divides), and each fact would need a proof over every size. Instead the
// graph is prepared, fused and lowered at sampled sizes (samplePlan) and
// the kernels of each group are compared: equal apart from constants, and
// every constant that differs a polynomial of degree <= 2 per symbol with
// integer coefficients, fitted exactly on a 3 x ... x 3 grid of
// consecutive sizes and confirmed at every corner of the ranges and at one
// point inside. That is how `kiln.from_torch` recovers symbolic attributes
// from fx captures too (python/kiln/_dynamic.py).
//
// Why the checks make the kernel right at every size of the ranges:
//   - a decision of the lowering that compares a size with a threshold
//     (an index range against a divisor) flips at most once along a
//     range, so one taken alike at both ends of every range is taken
//     alike in between; one that would flip shows as a kernel that
//     differs between the corners, and then there is no merged kernel;
//   - a decision on divisibility (an extent that a stride divides) cannot
//     be taken alike at three consecutive sizes unless it holds for all;
//   - size 1 is never sampled: the lowering folds its indices (an extent
//     of 1 has index 0), which only simplifies, so a kernel lowered for
//     larger sizes computes the same at 1. The tests run every merged
//     kernel at 1 and at sizes off the grid against the static lowering
//     at that size.
// Where the kernels differ otherwise (fusion chose differently, a float
// constant that is not an integer, a constant no polynomial fits), the
// group gets no merged kernel and SizedKernel::why says what differed.

// Note [Shared kernels in channels-last]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A compile stores some buffers channels-last (Note [Channels-last
// buffers] in ExecutableBuilder.cpp), and a kernel reading or writing one
// is lowered with those strides, iterating channels-last where it reads
// one contiguously; a pool between two runs as a kernel (Note [Pools as
// kernels]). Those kernels are most of a CNN's (EfficientNet-B0's SiLU and
// squeeze-excite kernels: 65 of the 66 of the zoo's torch 1.13 export), so
// a shared kernel lowered row-major would leave them all to each size's
// compile. So lowerAtSizes predicts the layouts as the builder chooses
// them, in schedule order: the results of a library call whose anchor
// oneDNN runs channels-last are channels-last where every use can read
// them so (detail::ChannelsLastPlan), and a kernel's buffers are laid out
// as detail::kernelLayouts says (both asked by the builder too). Each
// kernel is lowered and merged in its predicted layouts, recorded as its
// layout key, and a compile uses it only where it lays the buffers out the
// same (findSharedKernel): a wrong prediction costs that kernel's compile
// per size, never a wrong answer.

namespace {

constexpr size_t kMaxSymbols = 3;
/// The largest size sampled: index arithmetic of larger sizes may leave
/// int64 in the lowering's products.
constexpr int64_t kMaxSampledSize = int64_t(1) << 16;
/// The first fit size of a wide range: small enough to lower fast, large
/// enough that polynomials of the sizes do not meet the small constants of
/// a kernel (two equal constants are one DAG node).
constexpr int64_t kFitBase = 37;

/// A polynomial: coefficient per exponent vector (one exponent per symbol).
using Poly = std::map<std::vector<int>, int64_t>;

std::optional<int64_t> evalPoly(const Poly &p, const std::vector<int64_t> &x) {
  __int128 sum = 0;
  for (const auto &[e, c] : p) {
    __int128 term = c;
    for (size_t i = 0; i < e.size(); ++i)
      for (int k = 0; k < e[i]; ++k)
        if (__builtin_mul_overflow(term, static_cast<__int128>(x[i]), &term))
          return std::nullopt;
    if (__builtin_add_overflow(sum, term, &sum) || sum > INT64_MAX || sum < INT64_MIN)
      return std::nullopt;
  }
  return static_cast<int64_t>(sum);
}

/// Fits `values` (one per fit point, the fit points a full grid of three
/// consecutive sizes per symbol) exactly; nullopt when the coefficients
/// are not integers.
std::optional<Poly> fitPoly(const std::vector<std::vector<int64_t>> &points,
                            const std::vector<int64_t> &values) {
  const size_t k = points.front().size();
  std::vector<int64_t> base(k, INT64_MAX);
  for (const auto &p : points)
    for (size_t i = 0; i < k; ++i)
      base[i] = std::min(base[i], p[i]);
  size_t n = 1;
  for (size_t i = 0; i < k; ++i)
    n *= 3;
  // Grid position of a point: digits e_i = size_i - base_i, symbol 0 most
  // significant.
  std::vector<__int128> t(n, 0);
  std::vector<bool> seen(n, false);
  for (size_t p = 0; p < points.size(); ++p) {
    size_t at = 0;
    for (size_t i = 0; i < k; ++i) {
      int64_t e = points[p][i] - base[i];
      if (e < 0 || e > 2)
        return std::nullopt;
      at = at * 3 + static_cast<size_t>(e);
    }
    seen[at] = true;
    t[at] = values[p];
  }
  if (std::count(seen.begin(), seen.end(), false))
    return std::nullopt;
  // Along each axis, values at a, a+1, a+2 -> coefficients of 1, x, x^2.
  size_t stride = n;
  for (size_t i = 0; i < k; ++i) {
    stride /= 3;
    const __int128 a = base[i];
    for (size_t start = 0; start < n; ++start) {
      if ((start / stride) % 3 != 0)
        continue;
      __int128 v0 = t[start], v1 = t[start + stride], v2 = t[start + 2 * stride];
      __int128 d1 = v1 - v0, d2 = v2 - 2 * v1 + v0;
      if (d2 % 2 != 0)
        return std::nullopt;
      __int128 c2 = d2 / 2;
      __int128 c1 = d1 - c2 * (2 * a + 1);
      __int128 c0 = v0 - c1 * a - c2 * a * a;
      t[start] = c0;
      t[start + stride] = c1;
      t[start + 2 * stride] = c2;
    }
  }
  Poly poly;
  for (size_t at = 0; at < n; ++at) {
    if (t[at] == 0)
      continue;
    if (t[at] > INT64_MAX || t[at] < INT64_MIN)
      return std::nullopt;
    std::vector<int> e(k);
    for (size_t i = k, rest = at; i-- > 0; rest /= 3)
      e[i] = static_cast<int>(rest % 3);
    poly[e] = static_cast<int64_t>(t[at]);
  }
  return poly;
}

/// What one varying quantity of the kernels became.
struct Fitted {
  bool varies = false;
  Poly poly;
};

class Generalizer {
public:
  Generalizer(const std::vector<std::string> &symbols, const std::vector<SampledKernel> &samples,
              size_t numFit, std::string &why)
      : symbols_(symbols), samples_(samples), numFit_(numFit), why_(why) {
    for (size_t s = 0; s < numFit; ++s)
      fitPoints_.push_back(samples[s].sizes);
  }

  std::optional<Kernel> run();

private:
  bool fail(const std::string &msg) {
    if (why_.empty())
      why_ = msg;
    return false;
  }
  /// Fits a quantity given per sample; false (with why_) when no
  /// polynomial fits or a check point disagrees.
  bool fit(const std::vector<int64_t> &values, const std::string &what, Fitted &out);
  /// Compares `a` with `b` apart from constants and sizes; `map` gets,
  /// per node of `a` the stages read, the node of `b` it stands for.
  bool sameStructure(const Kernel &a, const Kernel &b, const std::string &at,
                     std::vector<int32_t> &map);
  DimExpr toDim(const Poly &p);
  ScalarRef toDag(ScalarDag &dag, const Poly &p);

  const std::vector<std::string> &symbols_;
  const std::vector<SampledKernel> &samples_;
  size_t numFit_;
  std::string &why_;
  std::vector<std::vector<int64_t>> fitPoints_;
  /// Per sample: per node of the first sample's kernel, its node there.
  std::vector<std::vector<int32_t>> maps_;
  std::set<size_t> used_;     // symbols any polynomial reads
  std::vector<int32_t> slot_; // per symbol: its Size slot in the kernel
};

bool Generalizer::fit(const std::vector<int64_t> &values, const std::string &what, Fitted &out) {
  out = {};
  if (std::all_of(values.begin(), values.end(), [&](int64_t v) { return v == values.front(); }))
    return true;
  std::vector<int64_t> fitValues(values.begin(), values.begin() + static_cast<long>(numFit_));
  std::optional<Poly> p = fitPoly(fitPoints_, fitValues);
  if (!p)
    return fail(what + " is no polynomial of the sizes with integer coefficients");
  for (size_t s = numFit_; s < samples_.size(); ++s) {
    std::optional<int64_t> v = evalPoly(*p, samples_[s].sizes);
    if (!v || *v != values[s]) {
      std::string at;
      for (size_t i = 0; i < symbols_.size(); ++i)
        at += (i ? ", " : "") + symbols_[i] + "=" + std::to_string(samples_[s].sizes[i]);
      return fail(what + " is " + std::to_string(values[s]) + " at " + at +
                  ", not the value the polynomial fitted at other sizes gives");
    }
  }
  for (const auto &[e, c] : *p)
    for (size_t i = 0; i < e.size(); ++i)
      if (e[i] > 0)
        used_.insert(i);
  out.varies = true;
  out.poly = std::move(*p);
  return true;
}

bool Generalizer::sameStructure(const Kernel &a, const Kernel &b, const std::string &at,
                                std::vector<int32_t> &map) {
  if (a.name != b.name)
    return fail("the kernels are named " + a.name + " and " + b.name + " " + at);
  std::string why;
  return matchKernelStructure(a, b, map, why) || fail(why + " " + at);
}

DimExpr Generalizer::toDim(const Poly &p) {
  DimExpr sum;
  for (const auto &[e, c] : p) {
    DimExpr term(c);
    for (size_t i = 0; i < e.size(); ++i)
      for (int k = 0; k < e[i]; ++k)
        term = *mul(term, DimExpr::symbol(symbols_[i]));
    sum = *add(sum, term);
  }
  return sum;
}

ScalarRef Generalizer::toDag(ScalarDag &dag, const Poly &p) {
  ScalarRef sum = dag.constInt(DType::I64, 0);
  for (const auto &[e, c] : p) {
    ScalarRef term = dag.constInt(DType::I64, c);
    for (size_t i = 0; i < e.size(); ++i)
      for (int k = 0; k < e[i]; ++k)
        term = dag.mul(term, dag.size(slot_[i]));
    sum = dag.add(sum, term);
  }
  return sum;
}

std::optional<Kernel> Generalizer::run() {
  const Kernel &k0 = samples_.front().kernel;
  maps_.assign(samples_.size(), {});
  maps_[0].resize(k0.dag.nodes().size());
  std::iota(maps_[0].begin(), maps_[0].end(), 0);
  for (size_t s = 1; s < samples_.size(); ++s) {
    std::string at = "between sizes";
    for (size_t i = 0; i < symbols_.size(); ++i)
      at += (i ? ", " : " ") + symbols_[i] + "=" + std::to_string(samples_[0].sizes[i]) + "/" +
            std::to_string(samples_[s].sizes[i]);
    if (!sameStructure(k0, samples_[s].kernel, at, maps_[s]))
      return std::nullopt;
  }
  auto across = [&](auto get) {
    std::vector<int64_t> v;
    for (const SampledKernel &s : samples_)
      v.push_back(get(s.kernel));
    return v;
  };
  // Extents and buffer dims.
  std::vector<Fitted> outer(k0.outer.size());
  for (size_t d = 0; d < outer.size(); ++d)
    if (!fit(across([&](const Kernel &k) { return k.outer[d]; }),
             "outer extent " + std::to_string(d), outer[d]))
      return std::nullopt;
  Fitted inner;
  if (!fit(across([](const Kernel &k) { return k.inner; }), "the inner extent", inner))
    return std::nullopt;
  std::vector<std::vector<Fitted>> dims;
  for (const auto *buffers : {&k0.inputs, &k0.outputs})
    for (size_t b = 0; b < buffers->size(); ++b) {
      const bool isInput = buffers == &k0.inputs;
      dims.emplace_back((*buffers)[b].shape.size());
      for (size_t d = 0; d < dims.back().size(); ++d) {
        auto get = [&](const Kernel &k) { return (isInput ? k.inputs : k.outputs)[b].shape[d]; };
        if (!fit(across(get),
                 "dim " + std::to_string(d) + " of buffer '" + (*buffers)[b].name + "'",
                 dims.back()[d]))
          return std::nullopt;
      }
    }
  // Constants.
  const auto &nodes = k0.dag.nodes();
  std::vector<Fitted> constants(nodes.size());
  // Nodes no stage reads (maps_[s][i] == -1) keep the first sample's value.
  auto nodeAt = [&](size_t s, size_t i) -> const ScalarNode & {
    int32_t j = maps_[s][i];
    return samples_[s].kernel.dag.nodes()[static_cast<size_t>(j < 0 ? 0 : j)];
  };
  for (size_t i = 0; i < nodes.size(); ++i) {
    const ScalarNode &n = nodes[i];
    std::string what = "constant %" + std::to_string(i);
    bool read = true;
    for (size_t s = 1; s < samples_.size(); ++s)
      read &= maps_[s][i] >= 0;
    if (!read)
      continue;
    if (n.op == ScalarOp::ConstInt && n.type == DType::I64) {
      std::vector<int64_t> v;
      for (size_t s = 0; s < samples_.size(); ++s)
        v.push_back(nodeAt(s, i).ivalue);
      if (!fit(v, what, constants[i]))
        return std::nullopt;
    } else if (n.op == ScalarOp::ConstFloat) {
      std::vector<int64_t> v;
      bool varies = false, integral = true;
      for (size_t s = 0; s < samples_.size(); ++s) {
        double f = nodeAt(s, i).fvalue;
        varies |= std::memcmp(&f, &n.fvalue, sizeof(double)) != 0;
        integral &= sizeCanHold(f);
        v.push_back(integral ? static_cast<int64_t>(f) : 0);
      }
      if (varies && !integral) {
        fail(what + " (a " + std::string(dtypeName(n.type)) +
             " constant) differs between sizes and is not an integer");
        return std::nullopt;
      }
      if (varies && !fit(v, what, constants[i]))
        return std::nullopt;
    }
  }

  if (used_.empty())
    return k0; // no symbol reaches this kernel
  Kernel out;
  out.name = k0.name;
  slot_.assign(symbols_.size(), -1);
  for (size_t i : used_) {
    slot_[i] = static_cast<int32_t>(out.symbols.size());
    out.symbols.push_back(symbols_[i]);
  }
  auto extent = [&](const Fitted &f, int64_t value, int64_t &fixed) {
    fixed = f.varies ? -1 : value;
    return f.varies ? toDim(f.poly) : DimExpr(value);
  };
  out.inputs = k0.inputs;
  out.outputs = k0.outputs;
  for (size_t i = 0; i < dims.size(); ++i) {
    KernelBuffer &b = i < out.inputs.size() ? out.inputs[i] : out.outputs[i - out.inputs.size()];
    out.bufferDims.emplace_back();
    for (size_t d = 0; d < b.shape.size(); ++d)
      out.bufferDims.back().push_back(extent(dims[i][d], b.shape[d], b.shape[d]));
  }
  out.outer = k0.outer;
  for (size_t d = 0; d < outer.size(); ++d)
    out.outerDims.push_back(extent(outer[d], k0.outer[d], out.outer[d]));
  out.innerDim = extent(inner, k0.inner, out.inner);
  copyDagAndStages(k0, out, [&](ScalarDag &d, size_t i, const ScalarNode &n) {
    if (!constants[i].varies)
      return ScalarRef{};
    ScalarRef v = toDag(d, constants[i].poly);
    return n.op == ScalarOp::ConstFloat ? d.cast(v, n.type) : v;
  });
  if (std::string bad; !out.verify(&bad)) {
    fail("internal error: the merged kernel does not verify: " + bad);
    return std::nullopt;
  }
  return out;
}

} // namespace

std::string groupSignature(const FusionGroup &group) {
  // Each node as its op and where each operand comes from: a group input
  // (by position), a result of an earlier node of the group, or outside.
  std::map<const Node *, size_t> position;
  std::string sig;
  for (const auto *nodes : {&group.nodes, &group.recomputed})
    for (const Node *n : *nodes) {
      position[n] = position.size();
      sig += std::string(n->mnemonic()) + "(";
      for (const Value *v : n->operands()) {
        auto in = std::find(group.inputs.begin(), group.inputs.end(), v);
        auto def = position.find(v->definingNode());
        sig += in != group.inputs.end() ? "i" + std::to_string(in - group.inputs.begin())
               : def != position.end()  ? "n" + std::to_string(def->second)
                                        : "c";
        sig += ",";
      }
      sig += ");";
    }
  for (const Value *v : group.outputs) {
    auto def = position.find(v->definingNode());
    sig += "out" + (def != position.end() ? std::to_string(def->second) : std::string("?")) + ";";
  }
  return sig;
}

namespace {

/// Makes `diag` keep its first error in `first` (and print nothing).
void keepFirstError(DiagnosticEngine &diag, Diagnostic &first) {
  diag.pushHandler([&first](const Diagnostic &d) {
    if (first.message.empty() && d.severity == Severity::Error)
      first = d;
    return true;
  });
}

} // namespace

std::string rangesStr(const std::vector<SymbolRange> &ranges) {
  std::string s;
  for (const SymbolRange &r : ranges)
    s += (s.empty() ? "" : ", ") + r.name + " in " + std::to_string(r.min) + ".." +
         std::to_string(r.max);
  return s;
}

int64_t assumedMax(std::span<const DimAssumption> assumed, const std::string &sym, int64_t hi) {
  std::vector<const DimAssumption *> own; // assumptions naming `sym` only
  for (const DimAssumption &a : assumed) {
    std::set<std::string> names;
    for (const Dim *d : {&a.dims.lhs, &a.dims.rhs})
      if (auto e = d->expr())
        e->collectSymbols(names);
    if (names == std::set<std::string>{sym})
      own.push_back(&a);
  }
  // The sizes where every one holds must be 1..c: a bound. Others (`S ==
  // 2*(S/2)`, an even S) are no bound; a run checks them (bindInputs).
  auto holds = [&](int64_t n) {
    return std::all_of(own.begin(), own.end(), [&](const DimAssumption *a) {
      return evaluateDim(a->dims.lhs, {{sym, n}}) == evaluateDim(a->dims.rhs, {{sym, n}});
    });
  };
  int64_t last = 0;
  while (last < hi && !own.empty() && holds(last + 1))
    ++last;
  if (own.empty() || last == 0 || last == hi)
    return hi;
  for (int64_t n = last + 1; n <= hi; ++n)
    if (holds(n))
      return hi;
  return last;
}

std::vector<SymbolRange> sharedRanges(const Graph &g, const CompileOptions &options) {
  std::vector<SymbolRange> out;
  std::map<std::string, int64_t> ranged; // a symbol each, to find the ones tied to them
  const std::vector<DimAssumption> assumed = dimAssumptions(g);
  // The symbols with a range of their own first: a symbol the graph assumes
  // equal to one ranged already takes its size (compile() binds it so), and
  // sampling it apart would break the assumption.
  for (bool givenPass : {true, false})
    for (const std::string &sym : inputSymbols(g)) {
      auto given = std::find_if(options.ranges.begin(), options.ranges.end(),
                                [&](const SymbolRange &r) { return r.name == sym; });
      if ((given != options.ranges.end()) != givenPass || withAssumedDims(g, ranged).count(sym))
        continue;
      ranged[sym] = 1;
      if (givenPass) { // a kernel runs at sizes >= 1
        out.push_back({sym, std::max<int64_t>(1, given->min), std::max<int64_t>(1, given->max)});
        continue;
      }
      auto size = options.dims.find(sym);
      const int64_t hi = std::max(kDefaultSharedMax, size == options.dims.end() ? 1 : size->second);
      out.push_back({sym, 1, std::max<int64_t>(1, assumedMax(assumed, sym, hi))});
    }
  std::sort(out.begin(), out.end(),
            [](const SymbolRange &a, const SymbolRange &b) { return a.name < b.name; });
  return out;
}

std::optional<SamplePlan> samplePlan(const std::vector<SymbolRange> &ranges, std::string &why) {
  if (ranges.empty() || ranges.size() > kMaxSymbols) {
    why = ranges.empty() ? "no symbols" : "more than 3 symbols";
    return std::nullopt;
  }
  std::vector<int64_t> lo, hi, base;
  for (const SymbolRange &r : ranges) {
    int64_t l = std::max<int64_t>(r.min, 2);
    if (r.max > kMaxSampledSize) {
      why = "the range of " + r.name + " goes to " + std::to_string(r.max) +
            "; kernels with run-time sizes are checked up to " + std::to_string(kMaxSampledSize);
      return std::nullopt;
    }
    if (r.max - l + 1 < 4) {
      why = "the range of " + r.name + " has fewer than 4 sizes above 1";
      return std::nullopt;
    }
    lo.push_back(l);
    hi.push_back(r.max);
    base.push_back(std::clamp<int64_t>(kFitBase, l, r.max - 2));
  }
  const size_t k = ranges.size();
  SamplePlan plan;
  size_t n = 1;
  for (size_t i = 0; i < k; ++i)
    n *= 3;
  for (size_t at = 0; at < n; ++at) {
    std::vector<int64_t> p(k);
    for (size_t i = k, rest = at; i-- > 0; rest /= 3)
      p[i] = base[i] + static_cast<int64_t>(rest % 3);
    plan.fit.push_back(p);
  }
  auto inFit = [&](const std::vector<int64_t> &p) {
    return std::find(plan.fit.begin(), plan.fit.end(), p) != plan.fit.end();
  };
  for (size_t corner = 0; corner < (size_t(1) << k); ++corner) {
    std::vector<int64_t> p(k);
    for (size_t i = 0; i < k; ++i)
      p[i] = (corner >> i) & 1 ? hi[i] : lo[i];
    if (!inFit(p) && std::find(plan.check.begin(), plan.check.end(), p) == plan.check.end())
      plan.check.push_back(p);
  }
  // One point inside, off the grid where the range allows.
  std::vector<int64_t> mid(k);
  for (size_t i = 0; i < k; ++i) {
    mid[i] = lo[i] + (hi[i] - lo[i]) * 2 / 3;
    if (mid[i] >= base[i] && mid[i] <= base[i] + 2)
      mid[i] = base[i] + 3 <= hi[i] ? base[i] + 3 : lo[i];
  }
  if (!inFit(mid) && std::find(plan.check.begin(), plan.check.end(), mid) == plan.check.end())
    plan.check.push_back(mid);
  return plan;
}

std::optional<Kernel> generalizeKernel(const std::vector<std::string> &symbols,
                                       const std::vector<SampledKernel> &samples, size_t numFit,
                                       std::string &why) {
  if (samples.empty() || numFit == 0 || numFit > samples.size()) {
    why = "no samples to fit";
    return std::nullopt;
  }
  return Generalizer(symbols, samples, numFit, why).run();
}

FailureOr<std::vector<Kernel>>
lowerAtSizes(const Graph &g, const std::map<std::string, int64_t> &sizes,
             const CompileOptions &options, DiagnosticEngine &diag, std::vector<size_t> *splits,
             std::vector<std::string> *signatures, std::vector<std::string> *layouts) {
  CompileOptions bound = options;
  for (const auto &[name, size] : withAssumedDims(g, sizes)) // tied symbols follow (sharedRanges)
    bound.dims[name] = size;
  auto prepared = prepareGraph(g.clone(), bound, diag);
  if (failed(prepared))
    return failure();
  FusionOptions fusion;
  fusion.library = &cpu::oneDnnCapabilities();
  fusion.useLibraries = options.useLibraries;
  fusion.fuse = options.fuse;
  auto plan = planFusion(**prepared, fusion, diag);
  if (failed(plan))
    return failure();
  std::vector<Kernel> kernels;
  size_t index = 0;
  auto add = [&](Kernel k, const FusionGroup &group, std::string layout) {
    if (signatures)
      signatures->push_back(groupSignature(group));
    if (layouts)
      layouts->push_back(std::move(layout));
    kernels.push_back(std::move(k));
    ++index;
  };
  // Note [Shared kernels in channels-last]: the values predicted stored
  // channels-last.
  std::set<const Value *> channelsLast;
  const detail::ChannelsLastPlan predicted(**prepared, *plan, options.useLibraries);
  for (const FusionGroup &group : plan->groups) {
    if (group.kind == FusionGroup::Kind::Library) {
      const Node *anchor = group.nodes.front();
      if (!detail::isChannelsLastAnchor(anchor))
        continue;
      std::string why;
      if ((anchor->kind() == OpKind::MaxPool || anchor->kind() == OpKind::AvgPool) &&
          channelsLast.count(anchor->operand(0)) && predicted.predict(anchor->result()) &&
          options.useKernels) {
        auto pool = detail::channelsLastPoolKernel(*anchor, why);
        if (pool.succeeded()) {
          if (splits && index >= splits->size())
            splits->push_back(kChooseSplit);
          add(std::move(*pool), group, kPoolLayout);
        }
      }
      for (const Value *v : group.outputs)
        if (predicted.predict(v))
          channelsLast.insert(v);
      continue;
    }
    if (group.kind != FusionGroup::Kind::Kernel)
      continue;
    // What the builder runs without a kernel: a channel concat of
    // channels-last operands as a oneDNN concat (its result channels-last),
    // a concat of many operands as copies (row-major).
    if (options.useLibraries && detail::isChannelConcatGroup(group) &&
        std::all_of(group.nodes.front()->operands().begin(), group.nodes.front()->operands().end(),
                    [&](const Value *v) { return channelsLast.count(v) > 0; })) {
      channelsLast.insert(group.outputs.begin(), group.outputs.end());
      continue;
    }
    if (options.useKernels && detail::matchCopyConcat(group, false))
      continue;
    const KernelLayouts kl = detail::kernelLayouts(group, channelsLast);
    const bool iterate = kl.iterateChannelsLast;
    size_t split = kChooseSplit;
    if (splits && index < splits->size())
      split = (*splits)[index];
    auto k = lowerGroup(group, diag, kl, &split);
    if (failed(k))
      return failure();
    if (splits && index >= splits->size())
      splits->push_back(split);
    add(std::move(*k), group, layoutKey(group, kl));
    if (iterate)
      channelsLast.insert(group.outputs.begin(), group.outputs.end());
  }
  return kernels;
}

FailureOr<std::vector<SizedKernel>> lowerForAllSizes(const Graph &g,
                                                     const std::vector<SymbolRange> &ranges,
                                                     const CompileOptions &options,
                                                     DiagnosticEngine &diag,
                                                     std::vector<int64_t> *failedAt) {
  std::string why;
  std::optional<SamplePlan> plan = samplePlan(ranges, why);
  if (!plan)
    return diag.emitError(Location()) << "cannot compile kernels with run-time sizes: " << why;
  std::vector<std::string> symbols;
  for (const SymbolRange &r : ranges)
    symbols.push_back(r.name);
  std::vector<std::vector<int64_t>> points = plan->fit;
  points.insert(points.end(), plan->check.begin(), plan->check.end());
  std::vector<std::vector<SampledKernel>> perGroup;
  // Each group's inner loop as the first point's lowering chose it (Note
  // [Inner loop] in Lower.cpp weighs the sizes).
  std::vector<size_t> splits;
  // Each group's nodes and wiring (groupSignature) and its buffers'
  // layouts (layoutKey) at the first point.
  std::vector<std::string> groupSignatures, groupLayouts;
  std::set<size_t> refused; // groups that differ between points
  for (const std::vector<int64_t> &p : points) {
    std::map<std::string, int64_t> sizes;
    std::string at;
    for (size_t i = 0; i < symbols.size(); ++i) {
      sizes[symbols[i]] = p[i];
      at += (i ? ", " : "") + symbols[i] + "=" + std::to_string(p[i]);
    }
    DiagnosticEngine quiet;
    Diagnostic first;
    keepFirstError(quiet, first);
    std::vector<std::string> signatures, layouts;
    auto kernels = lowerAtSizes(g, sizes, options, quiet, &splits, &signatures, &layouts);
    if (failed(kernels)) {
      if (failedAt)
        *failedAt = p;
      return diag.emitError(first.loc)
             << "cannot compile kernels with run-time sizes: at " << at << ": " << first.message;
    }
    if (perGroup.empty()) {
      perGroup.resize(kernels->size());
      groupSignatures = signatures;
      groupLayouts = layouts;
    }
    if (kernels->size() != perGroup.size())
      return diag.emitError(Location())
             << "cannot compile kernels with run-time sizes: fusion makes " << perGroup.size()
             << " kernels at one size and " << kernels->size() << " at " << at;
    for (size_t i = 0; i < kernels->size(); ++i) {
      if (signatures[i] != groupSignatures[i] || layouts[i] != groupLayouts[i])
        refused.insert(i);
      perGroup[i].push_back({std::move((*kernels)[i]), p});
    }
  }
  std::vector<SizedKernel> out;
  for (size_t i = 0; i < perGroup.size(); ++i) {
    SizedKernel sk;
    sk.name = perGroup[i].front().kernel.name;
    sk.signature = groupSignatures[i];
    sk.layout = groupLayouts[i];
    if (refused.count(i)) {
      sk.why = "fusion or its buffers' layouts differ at other sizes";
    } else {
      std::string reason;
      sk.kernel = generalizeKernel(symbols, perGroup[i], plan->fit.size(), reason);
      sk.why = reason;
    }
    out.push_back(std::move(sk));
  }
  return out;
}

FailureOr<std::shared_ptr<const SharedKernels>>
compileSharedKernels(const Graph &g, const std::vector<SymbolRange> &ranges,
                     const CompileOptions &options, DiagnosticEngine &diag) {
  const auto start = std::chrono::steady_clock::now();
  // The ranges, then (for the kernels that do not merge over them) the
  // ranges halved, up to four times (not below kMinCutRange): a model may
  // be valid only up to a size (a causal LM up to its positions) or its
  // lowering may change at a large one. When the graph does not prepare at
  // a point, only the symbols at their maximum there are cut.
  constexpr int64_t kMinCutRange = 64;
  constexpr int kTries = 5;
  auto shared = std::make_shared<SharedKernels>();
  shared->ranges = ranges;
  std::vector<std::string> order; // kernel names, in the first lowering's order
  std::set<std::string> seen;
  std::map<std::string, std::string> why;
  std::vector<std::pair<Kernel, std::vector<SymbolRange>>> merged;
  std::map<std::string, std::pair<std::string, std::string>> signatures; // and layouts
  std::vector<SymbolRange> current = ranges;
  Diagnostic firstError; // of the widest failed try
  for (int a = 0; a < kTries; ++a) {
    DiagnosticEngine quiet;
    Diagnostic error;
    keepFirstError(quiet, error);
    std::vector<int64_t> failedAt;
    auto kernels = lowerForAllSizes(g, current, options, quiet, &failedAt);
    if (failed(kernels)) {
      if (shared->narrowedBecause.empty()) {
        firstError = error;
        shared->narrowedBecause = error.located();
      }
    } else {
      for (SizedKernel &k : *kernels) {
        if (seen.insert(k.name).second)
          order.push_back(k.name);
        if (std::any_of(merged.begin(), merged.end(),
                        [&](const auto &m) { return m.first.name == k.name; }))
          continue;
        if (!k.kernel) {
          why[k.name] = k.why;
        } else if (!k.kernel->hasRunTimeSizes()) {
          // A kernel no symbol reaches is compiled with each size's others.
          why[k.name] = "no run-time size reaches it";
        } else {
          why.erase(k.name);
          merged.emplace_back(std::move(*k.kernel), current);
          signatures[k.name] = {k.signature, k.layout};
        }
      }
      if (std::all_of(why.begin(), why.end(),
                      [](const auto &w) { return w.second == "no run-time size reaches it"; }))
        break;
    }
    bool narrower = false;
    for (size_t i = 0; i < current.size(); ++i) {
      SymbolRange &r = current[i];
      const bool cut = failedAt.empty() || failedAt[i] == r.max;
      if (cut && r.max / 2 >= std::max(r.min + 3, kMinCutRange)) {
        r.max /= 2;
        narrower = true;
      }
    }
    if (!narrower)
      break;
  }
  if (order.empty() && !firstError.message.empty()) // "cannot compile kernels with run-time ..."
    return diag.emitError(firstError.loc) << firstError.message;
  if (order.empty()) // no kernel group: nothing to compile, for any size
    return std::shared_ptr<const SharedKernels>(std::move(shared));
  auto target = cpu::resolveCpuTarget(options.cpu, diag);
  if (failed(target))
    return failure();
  cpu::CpuJitOptions jitOptions;
  jitOptions.target = *target;
  jitOptions.optLevel = options.optLevel;
  auto jit = cpu::CpuJit::create(jitOptions, diag);
  if (failed(jit))
    return failure();
  // Each kernel as it is, then written in place over each input it can
  // (SharedKernel::inPlace): job -> (kernel, input or -1).
  std::vector<cpu::KernelJob> jobs;
  std::vector<std::pair<size_t, int32_t>> jobOf;
  for (size_t i = 0; i < merged.size(); ++i) {
    const Kernel &k = merged[i].first;
    jobs.push_back({&k, Schedule{}});
    jobOf.emplace_back(i, -1);
    for (int32_t in : inPlaceInputs(k)) {
      Schedule s;
      s.inPlaceInput = {in};
      jobs.push_back({&k, s});
      jobOf.emplace_back(i, in);
    }
  }
  auto fns = (*jit)->compileAll(jobs, cpu::compileThreads(), diag);
  if (failed(fns))
    return failure();
  for (size_t j = 0; j < jobs.size(); ++j) {
    const auto [i, in] = jobOf[j];
    const std::string &name = merged[i].first.name;
    if (in >= 0) {
      shared->byName[name].inPlace.push_back({in, (*fns)[j], (*jit)->objectOf((*fns)[j])});
      continue;
    }
    const auto &[signature, layout] = signatures[name];
    const std::string text = merged[i].first.str();
    shared->byName[name] = {merged[i].first,  text,      (*fns)[j], (*jit)->objectOf((*fns)[j]),
                            merged[i].second, signature, layout,    {}};
  }
  for (const std::string &name : order)
    if (auto it = why.find(name); it != why.end())
      shared->perSize.emplace_back(name, it->second);
  shared->owner = *jit;
  shared->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return std::shared_ptr<const SharedKernels>(std::move(shared));
}

std::vector<int32_t> inPlaceInputs(const Kernel &k) {
  std::vector<int32_t> out;
  for (size_t in = 0; in < k.inputs.size() && k.outputs.size() == 1; ++in)
    if (k.bufferDims[in] == k.bufferDims[k.inputs.size()] &&
        canWriteInPlace(k, 0, static_cast<int32_t>(in)))
      out.push_back(static_cast<int32_t>(in));
  return out;
}

std::string sharedKernelsStr(const SharedKernels &shared) {
  const size_t n = shared.byName.size();
  if (n == 0 && shared.perSize.empty())
    return "no kernel to compile once (the model has none)";
  const std::string all = rangesStr(shared.ranges);
  std::map<std::string, size_t> byRange;
  for (const auto &[name, k] : shared.byName)
    ++byRange[rangesStr(k.ranges)];
  std::string s = std::to_string(n) + " kernel" + (n == 1 ? "" : "s") + " compiled once";
  if (byRange.empty() || (byRange.size() == 1 && byRange.begin()->first == all))
    return s + " for " + all;
  s += ":";
  for (const auto &[r, count] : byRange)
    s += (s.back() == ':' ? " " : ", ") + std::to_string(count) + " for " + r;
  if (!shared.narrowedBecause.empty())
    s += " (not over " + all + ": " + shared.narrowedBecause + ")";
  return s;
}

std::optional<SharedUse> findSharedKernel(const SharedKernels &shared, const FusionGroup &group,
                                          const Kernel &k, const std::string &layout,
                                          const std::map<std::string, int64_t> &dims) {
  auto it = shared.byName.find(k.name);
  if (it == shared.byName.end())
    return std::nullopt;
  const Kernel &m = it->second.kernel;
  std::map<std::string, int64_t> values;
  SharedUse use{&it->second, {}, 1, 0};
  // Every symbol the kernel was merged over must be inside its range, the
  // ones it does not read too: the merge was checked for those sizes only.
  for (const SymbolRange &r : it->second.ranges) {
    auto d = dims.find(r.name);
    if (d == dims.end() || d->second < std::max<int64_t>(r.min, 1) || d->second > r.max)
      return std::nullopt;
    values[r.name] = d->second;
  }
  for (const std::string &s : m.symbols) {
    if (!values.count(s))
      return std::nullopt;
    use.sizes.push_back(values[s]);
  }
  if (it->second.signature != groupSignature(group) || it->second.layout != layout)
    return std::nullopt;
  if (m.inputs.size() != k.inputs.size() || m.outputs.size() != k.outputs.size())
    return std::nullopt;
  for (size_t i = 0; i < m.bufferDims.size(); ++i) {
    const bool in = i < m.inputs.size();
    const KernelBuffer &a = in ? m.inputs[i] : m.outputs[i - m.inputs.size()];
    const KernelBuffer &b = in ? k.inputs[i] : k.outputs[i - k.inputs.size()];
    if (a.name != b.name || a.dtype != b.dtype || m.bufferDims[i].size() != b.shape.size())
      return std::nullopt;
    for (size_t d = 0; d < b.shape.size(); ++d)
      if (m.bufferDims[i][d].evaluate(values) != b.shape[d])
        return std::nullopt;
  }
  for (const DimExpr &d : m.outerDims) {
    auto n = d.evaluate(values);
    if (!n || __builtin_mul_overflow(use.numOuter, *n, &use.numOuter))
      return std::nullopt;
  }
  auto inner = m.innerDim.evaluate(values);
  if (!inner)
    return std::nullopt;
  use.inner = *inner;
  return use;
}

std::shared_ptr<const SharedKernels> tryCompileSharedKernels(const Graph &g,
                                                             const std::vector<SymbolRange> &ranges,
                                                             const CompileOptions &options,
                                                             Diagnostic &error) {
  DiagnosticEngine quiet;
  keepFirstError(quiet, error);
  auto shared = compileSharedKernels(g, ranges, options, quiet);
  return shared.succeeded() ? *shared : nullptr;
}

} // namespace kiln::codegen
