//===- CudaDriver.cpp - The CUDA driver, opened on first use --------------===//
//
// Note [The CUDA driver opened on first use]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// libcuda.so.1 comes with the NVIDIA driver, not with the toolkit: a machine
// without a GPU has none, and a binary linked against it (or against the
// toolkit's stub) would not start there. So it is opened with dlopen the
// first time a GPU is asked for; its entry points keep the types cuda.h
// declares (through decltype) and are looked up under the names the
// headers map them to (cuMemAlloc is cuMemAlloc_v2).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaDriver.h"
#include "runtime/DynamicSymbols.h"

#include <cuda.h>
#include <dlfcn.h>

namespace kiln::runtime::cuda {
namespace {

struct Driver {
  decltype(&::cuInit) init = nullptr;
  decltype(&::cuGetErrorString) errorString = nullptr;
  decltype(&::cuDeviceGetCount) deviceCount = nullptr;
  decltype(&::cuDeviceGet) deviceGet = nullptr;
  decltype(&::cuDeviceGetName) deviceName = nullptr;
  decltype(&::cuDeviceGetAttribute) deviceAttribute = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) retain = nullptr;
  decltype(&::cuDevicePrimaryCtxRelease) release = nullptr;
  decltype(&::cuCtxSetCurrent) setCurrent = nullptr;
  decltype(&::cuCtxSynchronize) synchronize = nullptr;
  decltype(&::cuMemAlloc) memAlloc = nullptr;
  decltype(&::cuMemFree) memFree = nullptr;
  decltype(&::cuMemcpyHtoD) copyHtoD = nullptr;
  decltype(&::cuMemcpyDtoH) copyDtoH = nullptr;
  decltype(&::cuModuleLoadData) moduleLoad = nullptr;
  decltype(&::cuModuleUnload) moduleUnload = nullptr;
  decltype(&::cuModuleGetFunction) moduleFunction = nullptr;
  decltype(&::cuLaunchKernel) launch = nullptr;
  decltype(&::cuMemcpyHtoDAsync) copyHtoDAsync = nullptr;
  decltype(&::cuMemcpyDtoHAsync) copyDtoHAsync = nullptr;
  decltype(&::cuStreamCreate) streamCreate = nullptr;
  decltype(&::cuStreamDestroy) streamDestroy = nullptr;
  decltype(&::cuStreamSynchronize) streamSynchronize = nullptr;
  decltype(&::cuStreamBeginCapture) beginCapture = nullptr;
  decltype(&::cuStreamEndCapture) endCapture = nullptr;
  decltype(&::cuGraphInstantiate) graphInstantiate = nullptr;
  decltype(&::cuGraphDestroy) graphDestroy = nullptr;
  decltype(&::cuGraphExecDestroy) graphExecDestroy = nullptr;
  decltype(&::cuGraphLaunch) graphLaunch = nullptr;
  std::string error; ///< why the driver cannot be used; empty when it can
};

constexpr const char *kDriver = "the CUDA driver (libcuda.so.1)";

const Driver &driver() {
  static const Driver d = [] {
    Driver d;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      d.error = std::string("no CUDA driver on this machine (libcuda.so.1, which the NVIDIA "
                            "driver installs, could not be opened: ") +
                dlerror() + ")";
      return d;
    }
    bindSymbol(lib, "cuInit", d.init, kDriver, d.error);
    bindSymbol(lib, "cuGetErrorString", d.errorString, kDriver, d.error);
    bindSymbol(lib, "cuDeviceGetCount", d.deviceCount, kDriver, d.error);
    bindSymbol(lib, "cuDeviceGet", d.deviceGet, kDriver, d.error);
    bindSymbol(lib, "cuDeviceGetName", d.deviceName, kDriver, d.error);
    bindSymbol(lib, "cuDeviceGetAttribute", d.deviceAttribute, kDriver, d.error);
    bindSymbol(lib, "cuDevicePrimaryCtxRetain", d.retain, kDriver, d.error);
    bindSymbol(lib, "cuDevicePrimaryCtxRelease_v2", d.release, kDriver, d.error);
    bindSymbol(lib, "cuCtxSetCurrent", d.setCurrent, kDriver, d.error);
    bindSymbol(lib, "cuCtxSynchronize", d.synchronize, kDriver, d.error);
    bindSymbol(lib, "cuMemAlloc_v2", d.memAlloc, kDriver, d.error);
    bindSymbol(lib, "cuMemFree_v2", d.memFree, kDriver, d.error);
    bindSymbol(lib, "cuMemcpyHtoD_v2", d.copyHtoD, kDriver, d.error);
    bindSymbol(lib, "cuMemcpyDtoH_v2", d.copyDtoH, kDriver, d.error);
    bindSymbol(lib, "cuModuleLoadData", d.moduleLoad, kDriver, d.error);
    bindSymbol(lib, "cuModuleUnload", d.moduleUnload, kDriver, d.error);
    bindSymbol(lib, "cuModuleGetFunction", d.moduleFunction, kDriver, d.error);
    bindSymbol(lib, "cuLaunchKernel", d.launch, kDriver, d.error);
    bindSymbol(lib, "cuMemcpyHtoDAsync_v2", d.copyHtoDAsync, kDriver, d.error);
    bindSymbol(lib, "cuMemcpyDtoHAsync_v2", d.copyDtoHAsync, kDriver, d.error);
    bindSymbol(lib, "cuStreamCreate", d.streamCreate, kDriver, d.error);
    bindSymbol(lib, "cuStreamDestroy_v2", d.streamDestroy, kDriver, d.error);
    bindSymbol(lib, "cuStreamSynchronize", d.streamSynchronize, kDriver, d.error);
    bindSymbol(lib, "cuStreamBeginCapture_v2", d.beginCapture, kDriver, d.error);
    bindSymbol(lib, "cuStreamEndCapture", d.endCapture, kDriver, d.error);
    bindSymbol(lib, "cuGraphInstantiateWithFlags", d.graphInstantiate, kDriver, d.error);
    bindSymbol(lib, "cuGraphDestroy", d.graphDestroy, kDriver, d.error);
    bindSymbol(lib, "cuGraphExecDestroy", d.graphExecDestroy, kDriver, d.error);
    bindSymbol(lib, "cuGraphLaunch", d.graphLaunch, kDriver, d.error);
    if (d.error.empty())
      if (CUresult r = d.init(0); r != CUDA_SUCCESS) {
        const char *msg = nullptr;
        d.errorString(r, &msg);
        d.error = std::string("the CUDA driver did not start (cuInit: ") + (msg ? msg : "?") + ")";
      }
    return d;
  }();
  return d;
}

/// False, with `error` "CALL: the driver's message", unless `r` is success.
bool check(CUresult r, const char *call, std::string &error) {
  if (r == CUDA_SUCCESS)
    return true;
  const char *msg = nullptr;
  driver().errorString(r, &msg);
  error = std::string(call) + ": " + (msg ? msg : "unknown CUDA error " + std::to_string(r));
  return false;
}

} // namespace

std::unique_ptr<CudaDevice> CudaDevice::open(std::string &error) {
  const Driver &d = driver();
  if (!d.error.empty()) {
    error = d.error;
    return nullptr;
  }
  int count = 0;
  if (!check(d.deviceCount(&count), "cuDeviceGetCount", error))
    return nullptr;
  if (count == 0) {
    error = "no GPU on this machine (the CUDA driver found no device)";
    return nullptr;
  }
  std::unique_ptr<CudaDevice> dev(new CudaDevice());
  CUdevice handle = 0;
  if (!check(d.deviceGet(&handle, 0), "cuDeviceGet", error))
    return nullptr;
  dev->device_ = handle;
  char name[256] = {};
  int major = 0, minor = 0;
  CUcontext ctx = nullptr;
  if (!check(d.deviceName(name, sizeof name, handle), "cuDeviceGetName", error) ||
      !check(d.deviceAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, handle),
             "cuDeviceGetAttribute", error) ||
      !check(d.deviceAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, handle),
             "cuDeviceGetAttribute", error) ||
      !check(d.retain(&ctx, handle), "cuDevicePrimaryCtxRetain", error))
    return nullptr;
  dev->name_ = name;
  dev->arch_ = 10 * major + minor;
  dev->context_ = ctx;
  if (!dev->makeCurrent(error))
    return nullptr;
  return dev;
}

CudaDevice::~CudaDevice() {
  if (context_)
    driver().release(device_);
}

bool CudaDevice::makeCurrent(std::string &error) {
  return check(driver().setCurrent(static_cast<CUcontext>(context_)), "cuCtxSetCurrent", error);
}

bool CudaDevice::alloc(size_t bytes, DevicePtr &ptr, std::string &error) {
  CUdeviceptr p = 0;
  if (!makeCurrent(error) || !check(driver().memAlloc(&p, bytes ? bytes : 1), "cuMemAlloc", error))
    return false;
  ptr = p;
  return true;
}

void CudaDevice::free(DevicePtr ptr) {
  std::string ignored;
  if (ptr && makeCurrent(ignored))
    driver().memFree(static_cast<CUdeviceptr>(ptr));
}

// Copies are ordered with the current stream and return when done.
bool CudaDevice::copyToDevice(DevicePtr dst, const void *src, size_t bytes, std::string &error) {
  const CUstream s = static_cast<CUstream>(stream_);
  return bytes == 0 ||
         (makeCurrent(error) &&
          check(driver().copyHtoDAsync(dst, src, bytes, s), "cuMemcpyHtoDAsync", error) &&
          check(driver().streamSynchronize(s), "cuStreamSynchronize", error));
}

bool CudaDevice::copyToHost(void *dst, DevicePtr src, size_t bytes, std::string &error) {
  const CUstream s = static_cast<CUstream>(stream_);
  return bytes == 0 ||
         (makeCurrent(error) &&
          check(driver().copyDtoHAsync(dst, src, bytes, s), "cuMemcpyDtoHAsync", error) &&
          check(driver().streamSynchronize(s), "cuStreamSynchronize", error));
}

namespace {

class CudaModule final : public Module {
public:
  CudaModule(CudaDevice &device, CUmodule module) : device_(device), module_(module) {}
  ~CudaModule() override {
    std::string ignored;
    if (module_ && device_.makeCurrent(ignored))
      driver().moduleUnload(module_);
  }
  void *function(const std::string &name, std::string &error) override {
    CUfunction f = nullptr;
    if (!device_.makeCurrent(error) || !check(driver().moduleFunction(&f, module_, name.c_str()),
                                              ("cuModuleGetFunction(" + name + ")").c_str(), error))
      return nullptr;
    return f;
  }

private:
  CudaDevice &device_;
  CUmodule module_;
};

} // namespace

std::unique_ptr<Module> CudaDevice::loadModule(const std::string &image, std::string &error) {
  CUmodule m = nullptr;
  if (!makeCurrent(error) ||
      !check(driver().moduleLoad(&m, image.data()), "cuModuleLoadData", error))
    return nullptr;
  return std::make_unique<CudaModule>(*this, m);
}

bool CudaDevice::launch(void *fn, unsigned grid, unsigned block, const LaunchArgs &args,
                        std::string &error) {
  if (grid == 0)
    return true;
  // kernelParams: a pointer to each parameter's value (the driver only
  // reads them); the sizes struct is its array of 64-bit integers.
  static_assert(sizeof(int64_t) == sizeof(long long) && sizeof(DevicePtr) == sizeof(CUdeviceptr));
  std::vector<void *> params;
  params.reserve(args.buffers.size() + 1);
  for (const DevicePtr &p : args.buffers)
    params.push_back(const_cast<DevicePtr *>(&p));
  if (!args.sizes.empty())
    params.push_back(const_cast<int64_t *>(args.sizes.data()));
  return makeCurrent(error) &&
         check(driver().launch(static_cast<CUfunction>(fn), grid, 1, 1, block, 1, 1, 0,
                               static_cast<CUstream>(stream_), params.data(), nullptr),
               "cuLaunchKernel", error);
}

bool CudaDevice::synchronize(std::string &error) {
  if (stream_)
    return makeCurrent(error) && check(driver().streamSynchronize(static_cast<CUstream>(stream_)),
                                       "cuStreamSynchronize", error);
  return makeCurrent(error) && check(driver().synchronize(), "cuCtxSynchronize", error);
}

bool CudaDevice::createStream(void *&stream, std::string &error) {
  CUstream s = nullptr;
  if (!makeCurrent(error) ||
      !check(driver().streamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate", error))
    return false;
  stream = s;
  return true;
}

void CudaDevice::destroyStream(void *stream) {
  std::string ignored;
  if (stream && makeCurrent(ignored))
    driver().streamDestroy(static_cast<CUstream>(stream));
  if (stream_ == stream)
    stream_ = nullptr;
}

bool CudaDevice::beginCapture(std::string &error) {
  return makeCurrent(error) && check(driver().beginCapture(static_cast<CUstream>(stream_),
                                                           CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                                     "cuStreamBeginCapture", error);
}

bool CudaDevice::endCapture(void *&graph, std::string &error) {
  CUgraph g = nullptr;
  CUgraphExec exec = nullptr;
  const bool captured =
      makeCurrent(error) &&
      check(driver().endCapture(static_cast<CUstream>(stream_), &g), "cuStreamEndCapture", error);
  const bool ok =
      captured && check(driver().graphInstantiate(&exec, g, 0), "cuGraphInstantiate", error);
  if (g)
    driver().graphDestroy(g);
  if (!ok)
    return false;
  graph = exec;
  return true;
}

bool CudaDevice::launchGraph(void *graph, std::string &error) {
  return makeCurrent(error) && check(driver().graphLaunch(static_cast<CUgraphExec>(graph),
                                                          static_cast<CUstream>(stream_)),
                                     "cuGraphLaunch", error);
}

void CudaDevice::destroyGraph(void *graph) {
  std::string ignored;
  if (graph && makeCurrent(ignored))
    driver().graphExecDestroy(static_cast<CUgraphExec>(graph));
}

} // namespace kiln::runtime::cuda
