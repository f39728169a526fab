//===- Emulation.cpp - CUDA kernels run on the host, for tests ------------===//

#include "tests/unit/cuda/Emulation.h"
#include "codegen/cuda/CudaEmitter.h"
#include "runtime/cuda/CudaModel.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

namespace kiln::testing {
namespace fs = std::filesystem;

namespace {

void writeText(const fs::path &p, const std::string &text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

class HostModule final : public runtime::cuda::Module {
public:
  explicit HostModule(std::shared_ptr<EmulatedModule> m) : m_(std::move(m)) {}
  void *function(const std::string &name, std::string &error) override {
    void *f = m_->launcher(name);
    if (!f)
      error = "the emulated module has no kernel " + name;
    return f;
  }

private:
  std::shared_ptr<EmulatedModule> m_;
};

} // namespace

std::shared_ptr<EmulatedModule>
EmulatedModule::compile(const std::vector<std::string> &sources,
                        const std::vector<std::vector<std::string>> &functions, const fs::path &dir,
                        std::string &error) {
  for (const auto &[name, text] : codegen::cuda::cudaHeaders())
    if (name != "cstdint") // the host's own
      writeText(dir / name, text);
  std::string script;
  for (size_t c = 0; c < sources.size(); ++c) {
    std::string text = sources[c];
    for (const std::string &f : functions[c])
      text += "KILN_EMU_LAUNCHER(" + f + ")\n";
    const std::string stem = (dir / ("module" + std::to_string(c))).string();
    writeText(stem + ".cpp", text);
    // -O0: the kernels are small and many; g++ takes seconds less.
    script += "g++ -std=c++20 -O0 -fPIC -shared -pthread -ffp-contract=off -w -include " +
              std::string(KILN_SOURCE_DIR) + "/tests/unit/cuda/CudaHost.h -I " + dir.string() +
              " " + stem + ".cpp -o " + stem + ".so 2> " + stem + ".log || echo " + stem + " >> " +
              (dir / "failed").string() +
              (c % 2 == 0 && c + 1 < sources.size() ? " &\n" : "\nwait\n");
  }
  fs::remove(dir / "failed");
  writeText(dir / "compile.sh", script);
  if (std::system(("sh " + (dir / "compile.sh").string()).c_str()) != 0 ||
      fs::exists(dir / "failed")) {
    std::ostringstream os;
    os << "g++ failed on " << std::ifstream(dir / "failed").rdbuf();
    error = os.str();
    return nullptr;
  }
  auto m = std::shared_ptr<EmulatedModule>(new EmulatedModule());
  for (size_t c = 0; c < sources.size(); ++c) {
    const std::string so = (dir / ("module" + std::to_string(c) + ".so")).string();
    void *lib = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      error = dlerror();
      return nullptr;
    }
    m->libs_.push_back(lib);
  }
  return m;
}

EmulatedModule::~EmulatedModule() {
  for (void *lib : libs_)
    dlclose(lib);
}

void *EmulatedModule::launcher(const std::string &name) const {
  for (void *lib : libs_)
    if (void *f = dlsym(lib, ("launch_" + name).c_str()))
      return f;
  return nullptr;
}

bool EmulatedDevice::alloc(size_t bytes, runtime::cuda::DevicePtr &ptr, std::string &error) {
  void *p = std::aligned_alloc(256, (std::max<size_t>(bytes, 1) + 255) / 256 * 256);
  if (!p) {
    error = "out of host memory";
    return false;
  }
  std::memset(p, 0xA5, bytes); // not zero: a kernel must write what it returns
  ptr = reinterpret_cast<runtime::cuda::DevicePtr>(p);
  return true;
}

void EmulatedDevice::free(runtime::cuda::DevicePtr ptr) {
  std::free(reinterpret_cast<void *>(ptr));
}

bool EmulatedDevice::copyToDevice(runtime::cuda::DevicePtr dst, const void *src, size_t bytes,
                                  std::string &) {
  std::memcpy(reinterpret_cast<void *>(dst), src, bytes);
  return true;
}

bool EmulatedDevice::copyToHost(void *dst, runtime::cuda::DevicePtr src, size_t bytes,
                                std::string &) {
  std::memcpy(dst, reinterpret_cast<const void *>(src), bytes);
  return true;
}

std::unique_ptr<runtime::cuda::Module> EmulatedDevice::loadModule(const std::string &,
                                                                  std::string &) {
  return std::make_unique<HostModule>(module_);
}

bool EmulatedDevice::launch(void *fn, unsigned grid, unsigned,
                            const runtime::cuda::LaunchArgs &args, std::string &) {
  std::vector<void *> buffers;
  for (runtime::cuda::DevicePtr p : args.buffers)
    buffers.push_back(reinterpret_cast<void *>(p));
  std::vector<long long> sizes(args.sizes.begin(), args.sizes.end());
  if (grid > 0)
    reinterpret_cast<EmulatedLaunch>(fn)(buffers.data(), sizes.data(), std::min(grid, 3u), 64,
                                         args.synchronizes);
  return true;
}

namespace {

struct HostPlan final : runtime::cuda::GemmPlan {
  explicit HostPlan(const runtime::cuda::GemmCall &c) : call(c) {}
  runtime::cuda::GemmCall call;
};

template <typename T>
void hostGemm(const runtime::cuda::GemmCall &g, const T *a, const T *b, const T *c, const T *bias,
              T *d) {
  for (int64_t p = 0; p < g.batch; ++p) {
    const T *ap = a + p * g.strideA, *bp = b + p * g.strideB;
    const T *cp = c ? c + p * g.strideC : nullptr;
    T *dp = d + p * g.strideD;
    for (int64_t i = 0; i < g.m; ++i)
      for (int64_t j = 0; j < g.n; ++j) {
        T sum = 0;
        for (int64_t x = 0; x < g.k; ++x)
          sum += (g.transA ? ap[x * g.m + i] : ap[i * g.k + x]) *
                 (g.transB ? bp[j * g.k + x] : bp[x * g.n + j]);
        T v = static_cast<T>(g.alpha) * sum;
        if (cp)
          v += static_cast<T>(g.beta) * cp[i * g.n + j];
        if (bias)
          v += bias[j];
        dp[i * g.n + j] = v;
      }
  }
}

} // namespace

std::unique_ptr<runtime::cuda::GemmPlan>
EmulatedDevice::planGemm(const runtime::cuda::GemmCall &call, std::string &) {
  return std::make_unique<HostPlan>(call);
}

bool EmulatedDevice::gemm(const runtime::cuda::GemmPlan &plan, runtime::cuda::DevicePtr a,
                          runtime::cuda::DevicePtr b, runtime::cuda::DevicePtr c,
                          runtime::cuda::DevicePtr bias, runtime::cuda::DevicePtr d,
                          std::string &) {
  const runtime::cuda::GemmCall &g = static_cast<const HostPlan &>(plan).call;
  auto at = [](runtime::cuda::DevicePtr p) { return reinterpret_cast<void *>(p); };
  hostGemm(g, static_cast<const float *>(at(a)), static_cast<const float *>(at(b)),
           g.hasC ? static_cast<const float *>(at(c)) : nullptr,
           g.hasBias ? static_cast<const float *>(at(bias)) : nullptr, static_cast<float *>(at(d)));
  return true;
}

std::vector<Tensor> randomInputs(const Graph &g, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 2.0);
  std::vector<Tensor> inputs;
  for (const Value *v : g.inputs()) {
    std::vector<int64_t> shape;
    for (const Dim &d : v->type().shape)
      shape.push_back(d.size());
    Tensor t = Tensor::zeros(v->type().dtype, shape);
    for (int64_t i = 0; i < t.numel(); ++i)
      t.setDouble(i, normal(rng));
    inputs.push_back(t);
  }
  return inputs;
}

bool runEmulatedModel(const codegen::CudaCompiled &compiled, std::span<const Tensor> inputs,
                      std::vector<Tensor> &outputs, const fs::path &dir, std::string &error) {
  return runEmulatedSpec(compiled.program.source, compiled.spec, inputs, outputs, dir, error);
}

bool runEmulatedSpec(const std::string &source, const runtime::cuda::CudaModelSpec &spec,
                     std::span<const Tensor> inputs, std::vector<Tensor> &outputs,
                     const fs::path &dir, std::string &error) {
  std::vector<std::string> names;
  for (const auto &step : spec.steps)
    if (step.kind == runtime::cuda::CudaModelSpec::Step::Kind::Kernel &&
        std::find(names.begin(), names.end(), step.function) == names.end())
      names.push_back(step.function);
  auto module = EmulatedModule::compile({source}, {names}, dir, error);
  if (!module)
    return false;
  EmulatedDevice device(module);
  auto model = runtime::cuda::CudaModel::load(device, spec, error);
  if (!model)
    return false;
  outputs.assign(static_cast<size_t>(spec.numOutputs), Tensor());
  for (const auto &b : spec.buffers)
    if (b.role == runtime::cuda::CudaModelSpec::Buffer::Role::Output)
      outputs[static_cast<size_t>(b.index)] = Tensor::zeros(b.dtype, b.shape);
  std::vector<const void *> in;
  std::vector<void *> out;
  for (const Tensor &t : inputs)
    in.push_back(t.rawData());
  for (Tensor &t : outputs)
    out.push_back(t.mutableRawData());
  const bool ok = model->run(in, out, error);
  fs::remove_all(dir);
  return ok;
}

} // namespace kiln::testing
