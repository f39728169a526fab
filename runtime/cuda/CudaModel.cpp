//===- CudaModel.cpp - A compiled model on a CUDA device ------------------===//

#include "runtime/cuda/CudaModel.h"

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

namespace {

/// Empty when the product `step` reads and writes within its buffers; else
/// what does not fit.
std::string checkGemmStep(const CudaModelSpec::Step &step,
                          const std::vector<CudaModelSpec::Buffer> &buffers) {
  const GemmCall &g = step.gemm;
  const size_t want = 3 + (g.hasC ? 1 : 0) + (g.hasBias ? 1 : 0);
  if (step.buffers.size() != want)
    return "it names " + std::to_string(step.buffers.size()) + " buffers for " +
           std::to_string(want);
  if (g.batch < 1 || g.m < 1 || g.n < 1 || g.k < 1 || g.batch > (int64_t(1) << 31) ||
      g.m > (int64_t(1) << 40) || g.n > (int64_t(1) << 40) || g.k > (int64_t(1) << 40))
    return "its sizes are out of range";
  const uint64_t elem = 4;
  size_t at = 0;
  auto fits = [&](int64_t rows, int64_t cols, int64_t stride, const char *what) -> std::string {
    const CudaModelSpec::Buffer &b = buffers[static_cast<size_t>(step.buffers[at++])];
    if (b.dtype != DType::F32)
      return std::string(what) + " (" + b.name + ") is not f32";
    const long double need =
        ((long double)(g.batch - 1) * stride + (long double)rows * cols) * elem;
    if (stride < 0 || need > (long double)b.bytes)
      return std::string(what) + " (" + b.name + ") holds " + std::to_string(b.bytes) +
             " bytes, fewer than the product reads or writes";
    return "";
  };
  for (std::string e :
       {fits(g.m, g.k, g.strideA, "A"), fits(g.k, g.n, g.strideB, "B"),
        g.hasC ? fits(g.m, g.n, g.strideC, "C") : std::string(),
        g.hasBias ? fits(1, g.n, 0, "the bias") : std::string(), fits(g.m, g.n, g.strideD, "D")})
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
  if (!m->module_)
    return nullptr;
  for (const CudaModelSpec::Step &step : s.steps) {
    for (int32_t b : step.buffers)
      if (b < 0 || static_cast<size_t>(b) >= s.buffers.size()) {
        error = "step " + step.function + " names buffer " + std::to_string(b) + " of " +
                std::to_string(s.buffers.size());
        return nullptr;
      }
    if (step.kind == CudaModelSpec::Step::Kind::Gemm) {
      if (std::string why = checkGemmStep(step, s.buffers); !why.empty()) {
        error = "the product " + step.function + ": " + why;
        return nullptr;
      }
      m->functions_.push_back(nullptr);
      m->plans_.push_back(device.planGemm(step.gemm, error));
      if (!m->plans_.back()) {
        error = "the product " + step.function + ": " + error;
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
  for (DevicePtr p : owned_)
    device_.free(p);
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

bool CudaModel::launchAll(const std::vector<LaunchArgs> &launches, std::string &error) {
  const CudaModelSpec &s = spec_;
  for (size_t i = 0; i < s.steps.size(); ++i) {
    bool ok = true;
    if (plans_[i]) {
      const std::vector<DevicePtr> &b = launches[i].buffers;
      const GemmCall &g = s.steps[i].gemm;
      size_t at = 2;
      const DevicePtr c = g.hasC ? b[at++] : 0, bias = g.hasBias ? b[at++] : 0;
      ok = device_.gemm(*plans_[i], b[0], b[1], c, bias, b[at], error);
    } else {
      ok = device_.launch(functions_[i], s.steps[i].grid, s.steps[i].block, launches[i], error);
    }
    if (!ok) {
      error = "step " + std::to_string(i) + " (" + s.steps[i].function + "): " + error;
      return false;
    }
  }
  return device_.synchronize(error);
}

bool CudaModel::run(std::span<const void *const> inputs, std::span<void *const> outputs,
                    std::string &error) {
  const CudaModelSpec &s = spec_;
  if (!checkPorts(inputs.size(), outputs.size(), error))
    return false;
  using Role = CudaModelSpec::Buffer::Role;
  for (size_t b = 0; b < s.buffers.size(); ++b)
    if (s.buffers[b].role == Role::Input &&
        !device_.copyToDevice(address_[b], inputs[static_cast<size_t>(s.buffers[b].index)],
                              s.buffers[b].bytes, error))
      return false;
  if (!launchAll(launches_, error))
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
  // caller's: the steps' arguments are made again (a few per step).
  std::vector<DevicePtr> address = address_;
  using Role = CudaModelSpec::Buffer::Role;
  for (size_t b = 0; b < s.buffers.size(); ++b) {
    const CudaModelSpec::Buffer &buf = s.buffers[b];
    if (buf.role == Role::Input)
      address[b] = inputs[static_cast<size_t>(buf.index)];
    else if (buf.role == Role::Output)
      address[b] = outputs[static_cast<size_t>(buf.index)];
  }
  std::vector<LaunchArgs> launches = launches_;
  for (size_t i = 0; i < s.steps.size(); ++i)
    for (size_t k = 0; k < s.steps[i].buffers.size(); ++k)
      launches[i].buffers[k] = address[static_cast<size_t>(s.steps[i].buffers[k])];
  return launchAll(launches, error);
}

} // namespace kiln::runtime::cuda
