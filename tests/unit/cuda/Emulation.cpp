//===- Emulation.cpp - CUDA kernels run on the host, for tests ------------===//

#include "tests/unit/cuda/Emulation.h"
#include "codegen/cuda/CudaEmitter.h"
#include "runtime/cuda/CudaModel.h"

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
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

bool EmulatedDevice::record(std::function<bool(std::string &)> call) {
  if (!capturing_)
    return false;
  capturing_->push_back(std::move(call));
  return true;
}

bool EmulatedDevice::createStream(void *&stream, std::string &) {
  stream = reinterpret_cast<void *>(static_cast<uintptr_t>(++streams_));
  return true;
}

bool EmulatedDevice::beginCapture(std::string &error) {
  if (capturing_) {
    error = "already capturing";
    return false;
  }
  capturing_ = std::make_unique<std::vector<std::function<bool(std::string &)>>>();
  return true;
}

bool EmulatedDevice::endCapture(void *&graph, std::string &error) {
  if (!capturing_) {
    error = "not capturing";
    return false;
  }
  graph = capturing_.release();
  ++graphsRecorded;
  return true;
}

bool EmulatedDevice::launchGraph(void *graph, std::string &error) {
  ++graphsLaunched;
  for (const auto &call : *static_cast<std::vector<std::function<bool(std::string &)>> *>(graph))
    if (!call(error))
      return false;
  return true;
}

void EmulatedDevice::destroyGraph(void *graph) {
  delete static_cast<std::vector<std::function<bool(std::string &)>> *>(graph);
}

bool EmulatedDevice::launch(void *fn, unsigned grid, unsigned block,
                            const runtime::cuda::LaunchArgs &args, std::string &) {
  if (record([=, this](std::string &e) { return launch(fn, grid, block, args, e); }))
    return true;
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

template <typename Call> struct HostPlan final : runtime::cuda::LibraryPlan {
  explicit HostPlan(const Call &c) : call(c) {}
  Call call;
};

float *floats(runtime::cuda::DevicePtr p) {
  return reinterpret_cast<float *>(p);
}

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

std::unique_ptr<runtime::cuda::LibraryPlan>
EmulatedDevice::planGemm(const runtime::cuda::GemmCall &call, std::string &) {
  return std::make_unique<HostPlan<runtime::cuda::GemmCall>>(call);
}

bool EmulatedDevice::gemm(const runtime::cuda::LibraryPlan &plan, runtime::cuda::DevicePtr a,
                          runtime::cuda::DevicePtr b, runtime::cuda::DevicePtr c,
                          runtime::cuda::DevicePtr bias, runtime::cuda::DevicePtr d,
                          std::string &) {
  if (record([=, this, &plan](std::string &e) { return gemm(plan, a, b, c, bias, d, e); }))
    return true;
  const runtime::cuda::GemmCall &g =
      static_cast<const HostPlan<runtime::cuda::GemmCall> &>(plan).call;
  auto at = [](runtime::cuda::DevicePtr p) { return reinterpret_cast<void *>(p); };
  hostGemm(g, static_cast<const float *>(at(a)), static_cast<const float *>(at(b)),
           g.hasC ? static_cast<const float *>(at(c)) : nullptr,
           g.hasBias ? static_cast<const float *>(at(bias)) : nullptr, static_cast<float *>(at(d)));
  return true;
}

std::unique_ptr<runtime::cuda::LibraryPlan>
EmulatedDevice::planConv(const runtime::cuda::ConvCall &call, std::string &) {
  return std::make_unique<HostPlan<runtime::cuda::ConvCall>>(call);
}

bool EmulatedDevice::conv(const runtime::cuda::LibraryPlan &plan, runtime::cuda::DevicePtr x,
                          runtime::cuda::DevicePtr w, runtime::cuda::DevicePtr bias,
                          runtime::cuda::DevicePtr z, runtime::cuda::DevicePtr y, std::string &) {
  if (record([=, this, &plan](std::string &e) { return conv(plan, x, w, bias, z, y, e); }))
    return true;
  const runtime::cuda::ConvCall &c =
      static_cast<const HostPlan<runtime::cuda::ConvCall> &>(plan).call;
  const float *xs = floats(x), *ws = floats(w), *bs = c.hasBias ? floats(bias) : nullptr;
  const float *zs = c.hasResidual ? floats(z) : nullptr;
  float *ys = floats(y);
  const int64_t cg = c.c / c.group, kg = c.k / c.group;
  for (int64_t n = 0; n < c.n; ++n)
    for (int64_t k = 0; k < c.k; ++k)
      for (int64_t oh = 0; oh < c.outH; ++oh)
        for (int64_t ow = 0; ow < c.outW; ++ow) {
          float sum = 0;
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t r = 0; r < c.r; ++r)
              for (int64_t s = 0; s < c.s; ++s) {
                const int64_t ih = oh * c.strideH - c.padH + r * c.dilationH;
                const int64_t iw = ow * c.strideW - c.padW + s * c.dilationW;
                if (ih < 0 || ih >= c.h || iw < 0 || iw >= c.w)
                  continue;
                const int64_t channel = (k / kg) * cg + ci;
                sum += xs[((n * c.c + channel) * c.h + ih) * c.w + iw] *
                       ws[((k * cg + ci) * c.r + r) * c.s + s];
              }
          const int64_t at = ((n * c.k + k) * c.outH + oh) * c.outW + ow;
          const float v = sum + (bs ? bs[k] : 0.0f) + (zs ? zs[at] : 0.0f);
          ys[at] = c.relu && !std::isnan(v) ? std::max(v, 0.0f) : v;
        }
  return true;
}

std::unique_ptr<runtime::cuda::LibraryPlan>
EmulatedDevice::planPool(const runtime::cuda::PoolCall &call, std::string &) {
  return std::make_unique<HostPlan<runtime::cuda::PoolCall>>(call);
}

bool EmulatedDevice::pool(const runtime::cuda::LibraryPlan &plan, runtime::cuda::DevicePtr x,
                          runtime::cuda::DevicePtr y, std::string &) {
  if (record([=, this, &plan](std::string &e) { return pool(plan, x, y, e); }))
    return true;
  const runtime::cuda::PoolCall &p =
      static_cast<const HostPlan<runtime::cuda::PoolCall> &>(plan).call;
  const bool max = p.kind == runtime::cuda::PoolCall::Kind::Max;
  const float *xs = floats(x);
  float *ys = floats(y);
  for (int64_t nc = 0; nc < p.n * p.c; ++nc)
    for (int64_t oh = 0; oh < p.outH; ++oh)
      for (int64_t ow = 0; ow < p.outW; ++ow) {
        float acc = max ? -std::numeric_limits<float>::infinity() : 0.0f;
        int64_t count = 0;
        for (int64_t r = 0; r < p.r; ++r)
          for (int64_t s = 0; s < p.s; ++s) {
            const int64_t ih = oh * p.strideH - p.padH + r, iw = ow * p.strideW - p.padW + s;
            if (ih < 0 || ih >= p.h || iw < 0 || iw >= p.w)
              continue;
            const float v = xs[(nc * p.h + ih) * p.w + iw];
            acc = max ? (std::isnan(v) || std::isnan(acc) ? std::numeric_limits<float>::quiet_NaN()
                                                          : std::max(acc, v))
                      : acc + v;
            ++count;
          }
        ys[(nc * p.outH + oh) * p.outW + ow] =
            max ? acc : acc / static_cast<float>(p.countPad ? p.r * p.s : count);
      }
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
  outputs.clear();
  for (const auto *b : spec.ports(runtime::cuda::CudaModelSpec::Buffer::Role::Output))
    outputs.push_back(Tensor::zeros(b->dtype, b->shape));
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
