//===- RegionStep.cpp - An if or loop whose regions are compiled ----------===//
#include "runtime/reference/RegionStep.h"

#include "ir/Graph.h"
#include "runtime/reference/ReferenceStep.h"

#include <algorithm>
#include <cstring>
#include <sstream>

namespace kiln::runtime {
namespace {

/// A HostTensor over the step buffer `data` of a static type.
HostTensor borrowBuffer(DType dtype, const std::vector<int64_t> &shape, void *data) {
  return HostTensor{dtype, shape, std::shared_ptr<void>(data, [](void *) {}), data};
}

bool truth(const void *data) {
  return *static_cast<const uint8_t *>(data) != 0;
}

void putDims(std::ostringstream &os, const std::vector<int64_t> &dims) {
  os << ' ' << dims.size();
  for (int64_t d : dims)
    os << ' ' << d;
}

/// The largest dim a payload may state: sizes of buffers that exist.
constexpr int64_t kMaxDim = int64_t(1) << 40;

bool getDims(std::istringstream &is, std::vector<int64_t> &dims) {
  size_t rank = 0;
  if (!(is >> rank) || rank > 64)
    return false;
  dims.assign(rank, 0);
  for (int64_t &d : dims)
    if (!(is >> d) || d < 0 || d > kMaxDim)
      return false;
  return true;
}

/// Bytes of a buffer of `shape`; UINT64_MAX when that overflows (so it
/// matches no buffer).
uint64_t bytesOf(DType t, const std::vector<int64_t> &shape) {
  uint64_t n = dtypeSize(t);
  for (int64_t d : shape)
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n))
      return UINT64_MAX;
  return n;
}

bool isScalar(const std::vector<int64_t> &shape) {
  return std::all_of(shape.begin(), shape.end(), [](int64_t d) { return d == 1; });
}

} // namespace

RegionStep::Spec RegionStep::Spec::of(const Node &node) {
  Spec s;
  s.isLoop = node.kind() == OpKind::Loop;
  s.name = std::string(node.mnemonic()) + " %" +
           (node.numResults() ? node.result(0)->name() : std::string());
  for (const Value *v : node.operands()) {
    s.operandTypes.push_back(v->type().dtype);
    s.operandShapes.push_back(staticSizes(v->type().shape));
  }
  s.numResults = node.numResults();
  if (s.isLoop) {
    s.numCarried = static_cast<unsigned>(LoopOp(node).num_carried());
    for (unsigned r = s.numCarried; r < node.numResults(); ++r)
      s.scanRows.push_back(node.result(r)->type().shape[0].size());
    const Graph &body = *LoopOp(node).body();
    s.iterShape = staticSizes(body.input(0)->type().shape);
    s.condShape = staticSizes(body.input(1)->type().shape);
  }
  return s;
}

// One line of numbers, then the name: "loop RESULTS CARRIED OPERANDS
// (DTYPE RANK DIMS...)... SCANS ROWS... ITER-RANK DIMS... COND-RANK DIMS...".
std::string RegionStep::Spec::str() const {
  std::ostringstream os;
  os << (isLoop ? "loop" : "if") << ' ' << numResults << ' ' << numCarried << ' '
     << operandTypes.size();
  for (size_t i = 0; i < operandTypes.size(); ++i) {
    os << ' ' << dtypeName(operandTypes[i]);
    putDims(os, operandShapes[i]);
  }
  putDims(os, scanRows);
  putDims(os, iterShape);
  putDims(os, condShape);
  os << '\n' << name;
  return os.str();
}

std::optional<RegionStep::Spec> RegionStep::Spec::parse(const std::string &payload,
                                                        std::string &why) {
  const size_t eol = payload.find('\n');
  std::istringstream is(payload.substr(0, eol));
  Spec s;
  std::string kind;
  size_t numOperands = 0;
  bool ok = static_cast<bool>(is >> kind >> s.numResults >> s.numCarried >> numOperands) &&
            (kind == "if" || kind == "loop") && numOperands <= 4096 && s.numResults <= 4096 &&
            eol != std::string::npos;
  s.isLoop = kind == "loop";
  for (size_t i = 0; ok && i < numOperands; ++i) {
    std::string dtype;
    std::optional<DType> t = (is >> dtype) ? dtypeFromName(dtype) : std::nullopt;
    s.operandShapes.emplace_back();
    ok = t && getDims(is, s.operandShapes.back());
    s.operandTypes.push_back(t.value_or(DType::F32));
  }
  ok = ok && getDims(is, s.scanRows) && getDims(is, s.iterShape) && getDims(is, s.condShape);
  // An if reads its condition, a loop its trip count and condition.
  ok = ok && numOperands >= (s.isLoop ? 2u : 1u) &&
       (s.isLoop ? s.numCarried + s.scanRows.size() == s.numResults
                 : s.numCarried == 0 && s.scanRows.empty());
  if (!ok) {
    why = "a corrupt compiled if/loop step";
    return std::nullopt;
  }
  s.name = payload.substr(eol + 1);
  return s;
}

RegionStep::RegionStep(Spec spec, std::shared_ptr<const void> owner,
                       std::vector<std::shared_ptr<const Executable>> regions)
    : spec_(std::move(spec)), owner_(std::move(owner)), regions_(std::move(regions)) {}

std::shared_ptr<const ExternStep>
RegionStep::load(const std::string &payload, std::vector<std::shared_ptr<const Executable>> regions,
                 std::span<const size_t> bufferBytes, std::string &why) {
  std::optional<Spec> spec = Spec::parse(payload, why);
  if (!spec)
    return nullptr;
  const Spec &sp = *spec;
  const size_t numOps = sp.operandTypes.size(), first = sp.isLoop ? 1 : 0;
  // What run() reads without checking: an if's condition (one bool), a
  // loop's trip count and condition (an i64 and a bool), its iteration
  // and condition inputs (one element each), every carried value's
  // operand, result and body output of one size, each scan's rows.
  bool fits = regions.size() == (sp.isLoop ? 1u : 2u) &&
              bufferBytes.size() == numOps + sp.numResults &&
              numOps >= (sp.isLoop ? 2 + size_t(sp.numCarried) : 1) &&
              sp.operandTypes[0] == (sp.isLoop ? DType::I64 : DType::Bool) &&
              isScalar(sp.operandShapes[0]) &&
              (!sp.isLoop || (sp.operandTypes[1] == DType::Bool && isScalar(sp.operandShapes[1]) &&
                              isScalar(sp.iterShape) && isScalar(sp.condShape)));
  for (size_t i = 0; fits && i < numOps; ++i)
    fits = bufferBytes[i] == bytesOf(sp.operandTypes[i], sp.operandShapes[i]);
  for (size_t c = 0; fits && sp.isLoop && c < sp.numCarried; ++c)
    fits = bufferBytes[2 + c] == bufferBytes[numOps + c];
  // Each region takes the operands after an if's condition, or a loop's
  // iteration number, condition and the rest, and gives the step's results
  // (a loop body: its condition first, then a row of each scan).
  for (size_t r = 0; fits && r < regions.size(); ++r) {
    const Executable &e = *regions[r];
    auto outBytes = [&](size_t k) {
      return uint64_t(e.buffers()[static_cast<size_t>(e.outputs()[k])].byteSize());
    };
    const std::vector<std::vector<int64_t>> ins = e.inputShapes();
    fits =
        ins.size() == numOps - (sp.isLoop ? 0 : 1) && e.outputs().size() == first + sp.numResults;
    for (size_t i = 0; fits && i < ins.size(); ++i)
      fits = sp.isLoop && i < 2 ? ins[i] == (i == 0 ? sp.iterShape : sp.condShape)
                                : ins[i] == sp.operandShapes[i + (sp.isLoop ? 0 : 1)];
    fits = fits && (!sp.isLoop || outBytes(0) >= 1);
    for (size_t k = 0; fits && k < sp.numResults; ++k) {
      const uint64_t got = outBytes(first + k), want = bufferBytes[numOps + k];
      if (sp.isLoop && k >= sp.numCarried) { // a scan: rows of the body's output
        const auto rows = static_cast<uint64_t>(sp.scanRows[k - sp.numCarried]);
        fits = got > 0 && want % got == 0 && want / got == rows;
      } else {
        fits = got == want;
      }
    }
  }
  if (!fits) {
    why = "compiled " + spec->name + " does not fit its buffers or regions";
    return nullptr;
  }
  return std::make_shared<RegionStep>(std::move(*spec), nullptr, std::move(regions));
}

std::string RegionStep::describe() const {
  return "compiled " + spec_.name;
}

uint64_t RegionStep::constantBytes() const {
  uint64_t bytes = 0;
  for (const auto &r : regions_)
    bytes += r->constantBytes();
  return bytes;
}

bool RegionStep::save(SavedStep &out, std::string &) const {
  out.kind = kKind;
  out.payload = spec_.str();
  return true;
}

Status RegionStep::run(std::span<void *const> buffers, const StepContext &ctx) const {
  RunOptions opts;
  opts.threads = ctx.threads;
  return spec_.isLoop ? runLoop(buffers, opts) : runIf(buffers, opts);
}

Status RegionStep::runIf(std::span<void *const> buffers, const RunOptions &opts) const {
  const size_t numOps = spec_.operandTypes.size();
  const Executable &branch = *regions_[truth(buffers[0]) ? 0 : 1];
  std::vector<HostTensor> inputs;
  for (size_t i = 1; i < numOps; ++i)
    inputs.push_back(borrowBuffer(spec_.operandTypes[i], spec_.operandShapes[i], buffers[i]));
  std::vector<HostTensor> outs;
  if (Status st = branch.run(inputs, outs, opts); !st.ok())
    return Status::failure(describe() + ": " + st.error);
  for (unsigned r = 0; r < spec_.numResults && r < outs.size(); ++r)
    std::memcpy(buffers[numOps + r], outs[r].data, outs[r].byteSize());
  return Status::success();
}

Status RegionStep::runLoop(std::span<void *const> buffers, const RunOptions &opts) const {
  const size_t numOps = spec_.operandTypes.size();
  const unsigned numCarried = spec_.numCarried;
  const size_t numScans = spec_.scanRows.size();
  const Executable &body = *regions_[0];
  const int64_t trip = *static_cast<const int64_t *>(buffers[0]);
  bool cond = truth(buffers[1]);
  std::vector<HostTensor> inputs;
  inputs.push_back(HostTensor::allocate(DType::I64, spec_.iterShape));
  inputs.push_back(HostTensor::allocate(DType::Bool, spec_.condShape));
  *static_cast<uint8_t *>(inputs[1].data) = 1;
  for (size_t i = 2; i < numOps; ++i)
    inputs.push_back(borrowBuffer(spec_.operandTypes[i], spec_.operandShapes[i], buffers[i]));
  // A scan result's type is static here (the compiler makes a region step
  // of no other scanning loop): the loop must run exactly its rows.
  const std::vector<int64_t> &rows = spec_.scanRows;
  // One output vector: run() keeps the previous outputs (this iteration's
  // inputs) alive while it runs, then recycles their block.
  std::vector<HostTensor> outs;
  int64_t i = 0;
  for (; i < trip && cond; ++i) {
    *static_cast<int64_t *>(inputs[0].data) = i;
    if (Status st = body.run(inputs, outs, opts); !st.ok())
      return Status::failure(describe() + ": iteration " + std::to_string(i) + ": " + st.error);
    cond = truth(outs[0].data);
    for (unsigned c = 0; c < numCarried; ++c)
      inputs[2 + c] = outs[1 + c];
    for (unsigned s = 0; s < numScans; ++s) {
      const HostTensor &row = outs[1 + numCarried + s];
      if (i >= rows[s])
        return Status::failure(describe() + ": iteration " + std::to_string(i) + " is past the " +
                               std::to_string(rows[s]) + " rows of scan result " +
                               std::to_string(s));
      std::memcpy(static_cast<char *>(buffers[numOps + numCarried + s]) + i * row.byteSize(),
                  row.data, row.byteSize());
    }
  }
  for (unsigned s = 0; s < numScans; ++s)
    if (i < rows[s])
      return Status::failure(describe() + ": ran " + std::to_string(i) +
                             " iteration(s) but scan result " + std::to_string(s) + " has " +
                             std::to_string(rows[s]) + " rows");
  for (unsigned c = 0; c < numCarried; ++c)
    std::memmove(buffers[numOps + c], inputs[2 + c].data, inputs[2 + c].byteSize());
  return Status::success();
}

} // namespace kiln::runtime
