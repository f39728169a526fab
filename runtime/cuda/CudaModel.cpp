//===- CudaModel.cpp - A compiled model on a CUDA device ------------------===//

#include "runtime/cuda/CudaModel.h"

#include <algorithm>

namespace kiln::runtime::cuda {

std::string GemmCall::str() const {
  std::string s = std::string("f32") + (batch > 1 ? " [" + std::to_string(batch) + "]" : "") + " " +
                  std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
  if (transA || transB)
    s += std::string(" (") + (transA ? "A^T" : "") + (transA && transB ? ", " : "") +
         (transB ? "B^T" : "") + ")";
  if (hasC)
    s += " + C";
  if (hasBias)
    s += " + bias";
  return s;
}

std::vector<const CudaModelSpec::Buffer *> CudaModelSpec::ports(Buffer::Role role) const {
  std::vector<const Buffer *> out(
      static_cast<size_t>(role == Buffer::Role::Input ? numInputs : numOutputs));
  for (const Buffer &b : buffers)
    if (b.role == role && b.index >= 0 && static_cast<size_t>(b.index) < out.size())
      out[static_cast<size_t>(b.index)] = &b;
  return out;
}

std::string ConvCall::str() const {
  std::string s = std::to_string(n) + "x" + std::to_string(c) + "x" + std::to_string(h) + "x" +
                  std::to_string(w) + " * " + std::to_string(k) + "x" + std::to_string(c / group) +
                  "x" + std::to_string(r) + "x" + std::to_string(this->s);
  if (strideH != 1 || strideW != 1)
    s += ", stride " + std::to_string(strideH) + "x" + std::to_string(strideW);
  if (padH || padW)
    s += ", pad " + std::to_string(padH) + "x" + std::to_string(padW);
  if (dilationH != 1 || dilationW != 1)
    s += ", dilation " + std::to_string(dilationH) + "x" + std::to_string(dilationW);
  if (group != 1)
    s += ", " + std::to_string(group) + " groups";
  if (hasBias)
    s += " + bias";
  if (hasResidual)
    s += " + residual";
  return relu ? s + ", relu" : s;
}

std::string PoolCall::str() const {
  std::string s = std::string(kind == Kind::Max ? "max "
                              : countPad        ? "average (pads counted) "
                                                : "average ") +
                  std::to_string(r) + "x" + std::to_string(this->s) + " of " + std::to_string(n) +
                  "x" + std::to_string(c) + "x" + std::to_string(h) + "x" + std::to_string(w);
  if (strideH != 1 || strideW != 1)
    s += ", stride " + std::to_string(strideH) + "x" + std::to_string(strideW);
  if (padH || padW)
    s += ", pad " + std::to_string(padH) + "x" + std::to_string(padW);
  return s;
}

namespace {

/// Empty when the library call `step` reads and writes within its
/// buffers (each f32, dense); else what does not fit.
std::string checkLibraryStep(const CudaModelSpec::Step &step,
                             const std::vector<CudaModelSpec::Buffer> &buffers) {
  using Kind = CudaModelSpec::Step::Kind;
  const GemmCall &g = step.gemm;
  const ConvCall &cv = step.conv;
  const PoolCall &pl = step.pool;
  const size_t want = step.kind == Kind::Gemm ? 3 + (g.hasC ? 1 : 0) + (g.hasBias ? 1 : 0)
                      : step.kind == Kind::Conv
                          ? 3 + (cv.hasBias ? 1 : 0) + (cv.hasResidual ? 1 : 0)
                          : 2;
  if (step.buffers.size() != want)
    return "it names " + std::to_string(step.buffers.size()) + " buffers for " +
           std::to_string(want);
  auto positive = [](std::initializer_list<int64_t> v) {
    return std::all_of(v.begin(), v.end(),
                       [](int64_t x) { return x >= 1 && x < (int64_t(1) << 40); });
  };
  const bool sized =
      step.kind == Kind::Gemm ? positive({g.batch, g.m, g.n, g.k}) && g.batch < (int64_t(1) << 31)
      : step.kind == Kind::Conv
          ? positive({cv.n, cv.c, cv.h, cv.w, cv.k, cv.r, cv.s, cv.outH, cv.outW, cv.strideH,
                      cv.strideW, cv.dilationH, cv.dilationW, cv.group}) &&
                cv.c % cv.group == 0 && cv.k % cv.group == 0 && cv.padH >= 0 && cv.padW >= 0
          : positive(
                {pl.n, pl.c, pl.h, pl.w, pl.r, pl.s, pl.outH, pl.outW, pl.strideH, pl.strideW}) &&
                pl.padH >= 0 && pl.padW >= 0;
  if (!sized)
    return "its sizes are out of range";
  size_t at = 0;
  auto fits = [&](long double elements, const char *what) -> std::string {
    const CudaModelSpec::Buffer &b = buffers[static_cast<size_t>(step.buffers[at++])];
    if (b.dtype != DType::F32)
      return std::string(what) + " (" + b.name + ") is not f32";
    if (elements * 4 > (long double)b.bytes)
      return std::string(what) + " (" + b.name + ") holds " + std::to_string(b.bytes) +
             " bytes, fewer than the call reads or writes";
    return "";
  };
  auto batched = [&](int64_t rows, int64_t cols, int64_t stride) {
    return stride < 0 ? (long double)1e30
                      : (long double)(g.batch - 1) * stride + (long double)rows * cols;
  };
  std::vector<std::string> errors;
  if (step.kind == Kind::Gemm) {
    errors = {fits(batched(g.m, g.k, g.strideA), "A"), fits(batched(g.k, g.n, g.strideB), "B")};
    if (g.hasC)
      errors.push_back(fits(batched(g.m, g.n, g.strideC), "C"));
    if (g.hasBias)
      errors.push_back(fits(g.n, "the bias"));
    errors.push_back(fits(batched(g.m, g.n, g.strideD), "D"));
  } else if (step.kind == Kind::Conv) {
    errors = {fits((long double)cv.n * cv.c * cv.h * cv.w, "X"),
              fits((long double)cv.k * (cv.c / cv.group) * cv.r * cv.s, "W")};
    if (cv.hasBias)
      errors.push_back(fits(cv.k, "the bias"));
    if (cv.hasResidual)
      errors.push_back(fits((long double)cv.n * cv.k * cv.outH * cv.outW, "Z"));
    errors.push_back(fits((long double)cv.n * cv.k * cv.outH * cv.outW, "Y"));
  } else {
    errors = {fits((long double)pl.n * pl.c * pl.h * pl.w, "X"),
              fits((long double)pl.n * pl.c * pl.outH * pl.outW, "Y")};
  }
  for (const std::string &e : errors)
    if (!e.empty())
      return e;
  return "";
}

} // namespace

std::unique_ptr<CudaModel> CudaModel::load(Device &device, CudaModelSpec spec, std::string &error) {
  std::unique_ptr<CudaModel> m(new CudaModel(device, std::move(spec)));
  const CudaModelSpec &s = m->spec_;
  // The CUBIN runs on its compute capability only; the driver compiles the
  // PTX for a later one.
  const int cc = device.computeCapability();
  const bool cubin = !s.image.empty() && (cc == s.arch || s.ptx.empty());
  if (!cubin && (s.ptx.empty() || cc < s.arch)) {
    error = "the model was compiled for sm_" + std::to_string(s.arch) + " and " + device.name() +
            " is sm_" + std::to_string(cc) + ": compile it with --cuda-arch sm_" +
            std::to_string(cc);
    return nullptr;
  }
  m->imageUsed_ = std::string(cubin ? "CUBIN" : "PTX") + " for sm_" + std::to_string(s.arch);
  m->module_ = device.loadModule(cubin ? s.image : s.ptx, error);
  if (!m->module_ || !device.createStream(m->stream_, error))
    return nullptr;
  device.setStream(m->stream_); // the constants' copies too
  for (const CudaModelSpec::Step &step : s.steps) {
    for (int32_t b : step.buffers)
      if (b < 0 || static_cast<size_t>(b) >= s.buffers.size()) {
        error = "step " + step.function + " names buffer " + std::to_string(b) + " of " +
                std::to_string(s.buffers.size());
        return nullptr;
      }
    using Kind = CudaModelSpec::Step::Kind;
    if (step.kind != Kind::Kernel) {
      const std::string what = std::string(step.kind == Kind::Gemm   ? "the product "
                                           : step.kind == Kind::Conv ? "the convolution "
                                                                     : "the pool ") +
                               step.function + ": ";
      if (std::string why = checkLibraryStep(step, s.buffers); !why.empty()) {
        error = what + why;
        return nullptr;
      }
      m->functions_.push_back(nullptr);
      m->plans_.push_back(step.kind == Kind::Gemm   ? device.planGemm(step.gemm, error)
                          : step.kind == Kind::Conv ? device.planConv(step.conv, error)
                                                    : device.planPool(step.pool, error));
      if (!m->plans_.back()) {
        error = what + error;
        return nullptr;
      }
      continue;
    }
    m->plans_.push_back(nullptr);
    m->functions_.push_back(m->module_->function(step.function, error));
    if (!m->functions_.back())
      return nullptr;
  }
  DevicePtr arena = 0;
  if (!device.alloc(s.arenaBytes, arena, error))
    return nullptr;
  m->owned_.push_back(arena);
  for (const CudaModelSpec::Buffer &b : s.buffers) {
    if (b.role != CudaModelSpec::Buffer::Role::Constant) {
      if (b.offset + b.bytes > s.arenaBytes) {
        error = "buffer " + b.name + " ends past the arena";
        return nullptr;
      }
      if (b.offset % 16 != 0) { // what 128-bit loads and stores need
        error = "buffer " + b.name + " is at arena offset " + std::to_string(b.offset) +
                ", not a multiple of 16";
        return nullptr;
      }
      m->address_.push_back(arena + b.offset);
      continue;
    }
    DevicePtr p = 0;
    if (b.data.size() != b.bytes) {
      error = "constant " + b.name + " holds " + std::to_string(b.data.size()) + " bytes, not " +
              std::to_string(b.bytes);
      return nullptr;
    }
    if (!device.alloc(b.bytes, p, error))
      return nullptr;
    m->owned_.push_back(p);
    if (!device.copyToDevice(p, b.data.data(), b.bytes, error))
      return nullptr;
    m->address_.push_back(p);
  }
  // Every step's arguments, fixed by the arena's and constants' addresses.
  for (const CudaModelSpec::Step &step : s.steps) {
    LaunchArgs args;
    for (int32_t b : step.buffers)
      args.buffers.push_back(m->address_[static_cast<size_t>(b)]);
    args.sizes = step.sizes;
    args.synchronizes = step.synchronizes;
    m->launches_.push_back(std::move(args));
  }
  return m;
}

CudaModel::~CudaModel() {
  if (graph_)
    device_.destroyGraph(graph_);
  if (stream_)
    device_.destroyStream(stream_);
  for (DevicePtr p : owned_)
    device_.free(p);
}

void CudaModel::useGraphs(bool on) {
  graphs_ = on;
}

std::string CudaModel::graphNote() const {
  if (!graphFailure_.empty())
    return "steps one by one: recording a CUDA graph failed (" + graphFailure_ + ")";
  if (!graphs_)
    return "steps one by one (no CUDA graph)";
  return "a CUDA graph of " + std::to_string(spec_.steps.size()) + " steps";
}

bool CudaModel::checkPorts(size_t inputs, size_t outputs, std::string &error) const {
  if (inputs == static_cast<size_t>(spec_.numInputs) &&
      outputs == static_cast<size_t>(spec_.numOutputs))
    return true;
  error = "the model takes " + std::to_string(spec_.numInputs) + " inputs and " +
          std::to_string(spec_.numOutputs) + " outputs, given " + std::to_string(inputs) + " and " +
          std::to_string(outputs);
  return false;
}

bool CudaModel::issueAll(const std::vector<LaunchArgs> &launches, std::string &error) {
  const CudaModelSpec &s = spec_;
  for (size_t i = 0; i < s.steps.size(); ++i) {
    bool ok = true;
    const std::vector<DevicePtr> &b = launches[i].buffers;
    using Kind = CudaModelSpec::Step::Kind;
    if (s.steps[i].kind == Kind::Gemm) {
      const GemmCall &g = s.steps[i].gemm;
      size_t at = 2;
      const DevicePtr c = g.hasC ? b[at++] : 0, bias = g.hasBias ? b[at++] : 0;
      ok = device_.gemm(*plans_[i], b[0], b[1], c, bias, b[at], error);
    } else if (s.steps[i].kind == Kind::Conv) {
      const ConvCall &cv = s.steps[i].conv;
      size_t at = 2;
      const DevicePtr bias = cv.hasBias ? b[at++] : 0, z = cv.hasResidual ? b[at++] : 0;
      ok = device_.conv(*plans_[i], b[0], b[1], bias, z, b[at], error);
    } else if (s.steps[i].kind == Kind::Pool) {
      ok = device_.pool(*plans_[i], b[0], b[1], error);
    } else {
      ok = device_.launch(functions_[i], s.steps[i].grid, s.steps[i].block, launches[i], error);
    }
    if (!ok) {
      error = "step " + std::to_string(i) + " (" + s.steps[i].function + "): " + error;
      return false;
    }
  }
  return true;
}

std::vector<LaunchArgs> CudaModel::launchesFor(const std::vector<DevicePtr> &addresses) const {
  std::vector<LaunchArgs> launches = launches_;
  for (size_t i = 0; i < spec_.steps.size(); ++i)
    for (size_t k = 0; k < spec_.steps[i].buffers.size(); ++k)
      launches[i].buffers[k] = addresses[static_cast<size_t>(spec_.steps[i].buffers[k])];
  return launches;
}

bool CudaModel::execute(const std::vector<DevicePtr> &addresses, std::string &error) {
  device_.setStream(stream_);
  if (graphs_ && graph_ && addresses == graphAddresses_) // the common case: one replay
    return device_.launchGraph(graph_, error) && device_.synchronize(error);
  // The steps' arguments: made at load for the arena's addresses, else
  // made again (runOnDevice with other buffers).
  std::vector<LaunchArgs> made;
  const std::vector<LaunchArgs> *launches = &launches_;
  if (addresses != address_) {
    made = launchesFor(addresses);
    launches = &made;
  }
  if (graphs_) {
    if (graph_)
      device_.destroyGraph(graph_);
    graph_ = nullptr;
    void *graph = nullptr;
    std::string why;
    const bool begun = device_.beginCapture(why);
    const bool issued = begun && issueAll(*launches, why);
    std::string ended;
    if (begun && device_.endCapture(graph, ended) && issued) {
      graph_ = graph;
      graphAddresses_ = addresses;
    } else { // from here on, the steps one by one
      if (graph)
        device_.destroyGraph(graph);
      graphFailure_ = why.empty() ? ended : why;
      graphs_ = false;
    }
  }
  if (graph_ && graphs_) {
    if (!device_.launchGraph(graph_, error))
      return false;
  } else if (!issueAll(*launches, error)) {
    return false;
  }
  return device_.synchronize(error);
}

bool CudaModel::run(std::span<const void *const> inputs, std::span<void *const> outputs,
                    std::string &error) {
  const CudaModelSpec &s = spec_;
  if (!checkPorts(inputs.size(), outputs.size(), error))
    return false;
  using Role = CudaModelSpec::Buffer::Role;
  device_.setStream(stream_);
  for (size_t b = 0; b < s.buffers.size(); ++b)
    if (s.buffers[b].role == Role::Input &&
        !device_.copyToDevice(address_[b], inputs[static_cast<size_t>(s.buffers[b].index)],
                              s.buffers[b].bytes, error))
      return false;
  device_.setStream(stream_);
  if (!execute(address_, error))
    return false;
  for (size_t b = 0; b < s.buffers.size(); ++b)
    if (s.buffers[b].role == Role::Output &&
        !device_.copyToHost(outputs[static_cast<size_t>(s.buffers[b].index)], address_[b],
                            s.buffers[b].bytes, error))
      return false;
  return true;
}

bool CudaModel::runOnDevice(std::span<const DevicePtr> inputs, std::span<const DevicePtr> outputs,
                            std::string &error) {
  const CudaModelSpec &s = spec_;
  if (!checkPorts(inputs.size(), outputs.size(), error))
    return false;
  // The arena's addresses of the inputs and outputs replaced by the
  // caller's.
  std::vector<DevicePtr> address = address_;
  using Role = CudaModelSpec::Buffer::Role;
  for (size_t b = 0; b < s.buffers.size(); ++b) {
    const CudaModelSpec::Buffer &buf = s.buffers[b];
    if (buf.role != Role::Input && buf.role != Role::Output)
      continue;
    const bool in = buf.role == Role::Input;
    address[b] = (in ? inputs : outputs)[static_cast<size_t>(buf.index)];
    // Kernels read and write 16 bytes at a time (Note [Vectorized pointwise
    // kernels] in codegen/cuda/CudaEmitter.cpp).
    if (buf.bytes > 0 && address[b] % 16 != 0) {
      error = std::string(in ? "input " : "output ") + std::to_string(buf.index) + " (%" +
              buf.name + ") is not 16-byte aligned";
      return false;
    }
  }
  return execute(address, error);
}

} // namespace kiln::runtime::cuda
