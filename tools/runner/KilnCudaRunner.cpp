//===- KilnCudaRunner.cpp - kiln-cuda-runner: a CUDA artifact on the GPU ---===//
//
//   kiln-cuda-runner CUDA.kiln [--input NAME=FILE.npy ...] [--random]
//                    [--expect K=FILE.npy ...] [--rtol R] [--atol A]
//                    [--repeat N] [--warmup N] [--output-dir DIR] [--json]
//
// The GPU runner: links kiln_runtime_cuda (the driver, opened on first use;
// the artifact's framing and protobuf) and kiln_ir (.npy files,
// comparisons), nothing of the compiler, LLVM or oneDNN, so that it and
// its few libraries travel to a GPU machine with no toolchain
// (scripts/gpu-check.sh). Inputs not given are zeros (--random: normal
// values, seeded). --expect compares output K with a file (ir/Compare.h,
// |got - want| <= atol + rtol |want|). Timing, after --warmup runs: the
// median of --repeat runs on host buffers (inputs copied in, outputs out)
// and of --repeat runs on device buffers (CudaModel::runOnDevice: the
// kernels alone, as a caller that keeps its tensors on the GPU sees them).
// Then the same on device buffers with the model's steps one by one, not
// through its CUDA graph (the graph's gain), and the device buffers'
// outputs against the host run's, bit for bit.
// --json ends with one line of JSON saying all of it. Exit status: 0 ok,
// 1 model, device or check failure, 2 usage.
//
//===----------------------------------------------------------------------===//
#include "ir/Compare.h"
#include "ir/Npy.h"
#include "ir/Type.h"
#include "runtime/cuda/CudaArtifact.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace {

using kiln::Tensor;
using kiln::runtime::cuda::CudaModelSpec;
using Role = CudaModelSpec::Buffer::Role;

const char kUsage[] =
    "usage: kiln-cuda-runner CUDA.kiln [options]\n"
    "  --input NAME=FILE.npy  bind input NAME (default: zeros)\n"
    "  --random               inputs not given are normal values (seeded), not zeros\n"
    "  --expect K=FILE.npy    compare output K with FILE (with --rtol, --atol)\n"
    "  --rtol R, --atol A     the comparison's tolerances (default 1e-4 each)\n"
    "  --warmup N             untimed runs first (default 3)\n"
    "  --repeat N             timed runs, each way (default 20)\n"
    "  --output-dir DIR       write output K to DIR/output_K.npy\n"
    "  --json                 end with one line of JSON: times, checks, device\n"
    "exit status: 0 ok, 1 model, device or check failure, 2 usage\n";

int usage(const char *message) {
  if (message)
    std::fprintf(stderr, "kiln-cuda-runner: error: %s\n", message);
  std::fputs(kUsage, stderr);
  return 2;
}

/// `f32[2,3]`.
std::string typeOf(const CudaModelSpec::Buffer &b) {
  return std::string(kiln::dtypeName(b.dtype)) + kiln::sizesStr(b.shape);
}

int fail(const std::string &message) {
  std::fprintf(stderr, "kiln-cuda-runner: error: %s\n", message.c_str());
  return 1;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string jsonString(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20)
      out += c;
  }
  return out + "\"";
}

bool parseCount(const std::string &v, long lo, int &out) {
  char *end = nullptr;
  const long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end || n < lo || n > 1000000)
    return false;
  out = static_cast<int>(n);
  return true;
}

} // namespace

int main(int argc, char **argv) {
  std::string file, outDir;
  std::map<std::string, std::string> inputFiles;
  std::map<size_t, std::string> expectFiles;
  kiln::Tolerance tol{1e-4, 1e-4};
  int repeat = 20, warmup = 3;
  bool random = false, json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    std::string v;
    auto value = [&]() {
      if (i + 1 >= argc)
        return false;
      v = argv[++i];
      return true;
    };
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--input" || a == "--expect") {
      if (!value() || v.find('=') == std::string::npos || v.find('=') == 0)
        return usage((a + " expects NAME=FILE.npy").c_str());
      const std::string key = v.substr(0, v.find('=')), path = v.substr(v.find('=') + 1);
      if (a == "--input") {
        inputFiles[key] = path;
      } else {
        int k = 0;
        if (!parseCount(key, 0, k))
          return usage("--expect expects K=FILE.npy, K an output number");
        expectFiles[static_cast<size_t>(k)] = path;
      }
    } else if (a == "--rtol" || a == "--atol") {
      char *end = nullptr;
      if (!value())
        return usage("a number must follow --rtol and --atol");
      const double d = std::strtod(v.c_str(), &end);
      if (v.empty() || *end || !(d >= 0))
        return usage("--rtol and --atol expect a number >= 0");
      (a == "--rtol" ? tol.rtol : tol.atol) = d;
    } else if (a == "--repeat" || a == "--warmup") {
      if (!value() || !parseCount(v, a == "--repeat" ? 1 : 0, a == "--repeat" ? repeat : warmup))
        return usage("--repeat and --warmup expect a count (--repeat at least 1)");
    } else if (a == "--output-dir") {
      if (!value() || v.empty())
        return usage("--output-dir expects a folder");
      outDir = v;
    } else if (a == "--random") {
      random = true;
    } else if (a == "--json") {
      json = true;
    } else if (!a.empty() && a[0] == '-') {
      return usage(("unknown option '" + a + "'").c_str());
    } else if (file.empty()) {
      file = a;
    } else {
      return usage("more than one artifact");
    }
  }
  if (file.empty())
    return usage(nullptr);

  std::string error;
  kiln::runtime::cuda::CudaArtifact artifact;
  if (!kiln::runtime::cuda::loadCudaArtifact(file, artifact, error))
    return fail(error);
  const CudaModelSpec spec = artifact.spec; // the model takes its own copy
  const auto ins = spec.ports(Role::Input), outs = spec.ports(Role::Output);

  // Inputs: files by name, checked against the model's types.
  kiln::DiagnosticEngine diag;
  kiln::installStderrHandler(diag);
  std::vector<Tensor> inputs;
  std::mt19937 rng(20240601);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (const auto *b : ins) {
    auto it = inputFiles.find(b->name);
    if (it == inputFiles.end()) {
      Tensor t = Tensor::zeros(b->dtype, b->shape);
      if (random)
        for (int64_t e = 0; e < t.numel(); ++e)
          t.setDouble(e, normal(rng));
      inputs.push_back(t);
      continue;
    }
    auto t = kiln::readNpy(it->second, diag);
    if (kiln::failed(t))
      return 1;
    if (t->dtype() != b->dtype || t->shape() != b->shape)
      return fail("input '" + b->name + "' from '" + it->second + "' is " + t->type().str() +
                  "; the model takes " + typeOf(*b));
    inputs.push_back(t.take());
    inputFiles.erase(it);
  }
  for (const auto &[name, path] : inputFiles)
    return fail("the model has no input '" + name + "'");
  for (const auto &[k, path] : expectFiles)
    if (k >= outs.size())
      return fail("--expect " + std::to_string(k) + ": the model has " +
                  std::to_string(outs.size()) + " outputs");

  auto device = kiln::runtime::cuda::CudaDevice::open(error);
  if (!device)
    return fail(error);
  auto model = kiln::runtime::cuda::CudaModel::load(*device, spec, error);
  if (!model)
    return fail("loading '" + file + "' on " + device->name() + ": " + error);

  std::vector<Tensor> outputs;
  std::vector<const void *> in;
  std::vector<void *> out;
  for (const Tensor &t : inputs)
    in.push_back(t.rawData());
  for (const auto *b : outs) {
    outputs.push_back(Tensor::zeros(b->dtype, b->shape));
    out.push_back(outputs.back().mutableRawData());
  }
  using Clock = std::chrono::steady_clock;
  auto ms = [](Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  };
  const auto first = Clock::now();
  if (!model->run(in, out, error))
    return fail(error);
  const double firstMs = ms(first);
  for (int r = 0; r < warmup; ++r)
    if (!model->run(in, out, error))
      return fail(error);
  std::vector<double> hostTimes;
  for (int r = 0; r < repeat; ++r) {
    const auto t0 = Clock::now();
    if (!model->run(in, out, error))
      return fail(error);
    hostTimes.push_back(ms(t0));
  }
  // The same on device buffers: the inputs uploaded once.
  std::vector<kiln::runtime::cuda::DevicePtr> din, dout;
  auto freeAll = [&]() {
    for (auto p : din)
      device->free(p);
    for (auto p : dout)
      device->free(p);
  };
  uint64_t movedBytes = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    kiln::runtime::cuda::DevicePtr p = 0;
    if (!device->alloc(ins[i]->bytes, p, error) ||
        !device->copyToDevice(p, inputs[i].rawData(), ins[i]->bytes, error))
      return fail(error);
    din.push_back(p);
    movedBytes += ins[i]->bytes;
  }
  for (const auto *b : outs) {
    kiln::runtime::cuda::DevicePtr p = 0;
    if (!device->alloc(b->bytes, p, error))
      return fail(error);
    dout.push_back(p);
    movedBytes += b->bytes;
  }
  // On device buffers, through the model's CUDA graph (Note [CUDA graphs
  // for a model's steps]), then its steps one by one: the graph's gain.
  auto timeOnDevice = [&](std::vector<double> &times) {
    for (int r = 0; r < warmup + repeat; ++r) {
      const auto t0 = Clock::now();
      if (!model->runOnDevice(din, dout, error))
        return false;
      if (r >= warmup)
        times.push_back(ms(t0));
    }
    return true;
  };
  std::vector<double> deviceTimes, stepTimes;
  if (!timeOnDevice(deviceTimes))
    return fail(error);
  const std::string graphUsed = model->graphNote();
  model->useGraphs(false);
  if (!timeOnDevice(stepTimes))
    return fail(error);
  // What the device buffers hold is what the host run returned.
  bool ok = true;
  std::string checks;
  for (size_t k = 0; k < outs.size(); ++k) {
    std::vector<char> bytes(outs[k]->bytes);
    if (!device->copyToHost(bytes.data(), dout[k], bytes.size(), error))
      return fail(error);
    if (std::memcmp(bytes.data(), outputs[k].rawData(), bytes.size()) != 0) {
      std::printf("check output %zu: FAIL: on device buffers it differs from the host run's\n", k);
      ok = false;
      checks += std::string(checks.empty() ? "" : ", ") + "{\"output\": " + std::to_string(k) +
                ", \"ok\": false, \"detail\": \"device buffers differ from the host run\"}";
    }
  }
  freeAll();

  for (size_t k = 0; k < outputs.size(); ++k) {
    std::printf("output %zu (%%%s): %s = %s\n", k, outs[k]->name.c_str(),
                outputs[k].type().str().c_str(), kiln::previewValues(outputs[k], 8).c_str());
    auto it = expectFiles.find(k);
    if (it == expectFiles.end())
      continue;
    auto want = kiln::readNpy(it->second, diag);
    if (kiln::failed(want))
      return 1;
    const kiln::Comparison c = kiln::compareTensors(outputs[k], *want, tol);
    const std::string line = kiln::describe(c, tol);
    std::printf("check output %zu: %s\n", k, line.c_str());
    ok &= c.ok();
    checks += std::string(checks.empty() ? "" : ", ") + "{\"output\": " + std::to_string(k) +
              ", \"ok\": " + (c.ok() ? "true" : "false") + ", \"detail\": " + jsonString(line) +
              "}";
  }
  const double hostMs = median(hostTimes), deviceMs = median(deviceTimes),
               stepMs = median(stepTimes);
  size_t products = 0;
  for (const auto &step : spec.steps)
    products += step.kind == CudaModelSpec::Step::Kind::Gemm;
  size_t cudnn = 0;
  for (const auto &step : spec.steps)
    cudnn += step.kind == CudaModelSpec::Step::Kind::Conv ||
             step.kind == CudaModelSpec::Step::Kind::Pool;
  std::printf("time: %.4f ms on device buffers (%s), %.4f ms with its steps one by one, %.4f ms "
              "with the copies from and to the host (median of %d runs each, after %d; the first "
              "run %.3f ms); %s, %s, %zu kernels, %zu cuBLASLt and %zu cuDNN calls\n",
              deviceMs, graphUsed.c_str(), stepMs, hostMs, repeat, warmup, firstMs,
              device->name().c_str(), model->imageUsed().c_str(),
              spec.steps.size() - products - cudnn, products, cudnn);
  if (!outDir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(outDir, ec);
    for (size_t k = 0; k < outputs.size(); ++k)
      if (kiln::failed(
              kiln::writeNpy(outDir + "/output_" + std::to_string(k) + ".npy", outputs[k], diag)))
        return 1;
  }
  if (json)
    std::printf(
        "{\"artifact\": %s, \"device\": %s, \"image\": %s, \"kernels\": %zu, \"products\": %zu, "
        "\"cudnn\": %zu, \"graph\": %s, \"ok\": %s, \"checks\": [%s], \"device_ms\": %.6f, "
        "\"steps_ms\": %.6f, \"device_min_ms\": %.6f, \"host_ms\": %.6f, \"first_ms\": %.6f, "
        "\"runs\": %d, \"io_bytes\": %llu}\n",
        jsonString(file).c_str(), jsonString(device->name()).c_str(),
        jsonString(model->imageUsed()).c_str(), spec.steps.size() - products - cudnn, products,
        cudnn, jsonString(graphUsed).c_str(), ok ? "true" : "false", checks.c_str(), deviceMs,
        stepMs, *std::min_element(deviceTimes.begin(), deviceTimes.end()), hostMs, firstMs, repeat,
        static_cast<unsigned long long>(movedBytes));
  return ok ? 0 : 1;
}
