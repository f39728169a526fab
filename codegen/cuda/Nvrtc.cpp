//===- Nvrtc.cpp - CUDA C to PTX and CUBIN with NVRTC ---------------------===//

#include "codegen/cuda/Nvrtc.h"
#include "codegen/cuda/CudaEmitter.h"
#include "runtime/DynamicSymbols.h"

#include <dlfcn.h>
#include <nvrtc.h>

#include <memory>
#include <vector>

namespace kiln::codegen::cuda {
namespace {

// Note [NVRTC opened on first use]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// libnvrtc.so is 104 MiB; linking it would make every start of the CLI and
// of libkiln.so relocate it, for a backend most runs never use. So it is
// opened with dlopen on the first CUDA compile: the file the build found
// (KILN_NVRTC_LIBRARY_PATH), else the soname on the loader's path. Its
// functions keep their declared types (nvrtc.h) through decltype.
struct NvrtcApi {
  decltype(&::nvrtcVersion) version = nullptr;
  decltype(&::nvrtcGetErrorString) errorString = nullptr;
  decltype(&::nvrtcCreateProgram) create = nullptr;
  decltype(&::nvrtcDestroyProgram) destroy = nullptr;
  decltype(&::nvrtcCompileProgram) compile = nullptr;
  decltype(&::nvrtcGetProgramLogSize) logSize = nullptr;
  decltype(&::nvrtcGetProgramLog) log = nullptr;
  decltype(&::nvrtcGetPTXSize) ptxSize = nullptr;
  decltype(&::nvrtcGetPTX) ptx = nullptr;
  decltype(&::nvrtcGetCUBINSize) cubinSize = nullptr;
  decltype(&::nvrtcGetCUBIN) cubin = nullptr;
  std::string error; ///< why it could not be opened; empty when it was
};

const NvrtcApi &nvrtc() {
  static const NvrtcApi api = [] {
    NvrtcApi a;
    void *lib = dlopen(KILN_NVRTC_LIBRARY_PATH, RTLD_NOW | RTLD_LOCAL);
    if (!lib)
      lib = dlopen("libnvrtc.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      a.error = std::string("the CUDA backend needs NVRTC (libnvrtc.so.13 of the CUDA 13 "
                            "toolkit), which could not be opened: ") +
                dlerror();
      return a;
    }
    runtime::bindSymbol(lib, "nvrtcVersion", a.version, "NVRTC", a.error);
    runtime::bindSymbol(lib, "nvrtcGetErrorString", a.errorString, "NVRTC", a.error);
    runtime::bindSymbol(lib, "nvrtcCreateProgram", a.create, "NVRTC", a.error);
    runtime::bindSymbol(lib, "nvrtcDestroyProgram", a.destroy, "NVRTC", a.error);
    runtime::bindSymbol(lib, "nvrtcCompileProgram", a.compile, "NVRTC", a.error);
    runtime::bindSymbol(lib, "nvrtcGetProgramLogSize", a.logSize, "NVRTC", a.error);
    runtime::bindSymbol(lib, "nvrtcGetProgramLog", a.log, "NVRTC", a.error);
    runtime::bindSymbol(lib, "nvrtcGetPTXSize", a.ptxSize, "NVRTC", a.error);
    runtime::bindSymbol(lib, "nvrtcGetPTX", a.ptx, "NVRTC", a.error);
    runtime::bindSymbol(lib, "nvrtcGetCUBINSize", a.cubinSize, "NVRTC", a.error);
    runtime::bindSymbol(lib, "nvrtcGetCUBIN", a.cubin, "NVRTC", a.error);
    return a;
  }();
  return api;
}

} // namespace

std::string nvrtcVersionString() {
  const NvrtcApi &n = nvrtc();
  int major = 0, minor = 0;
  if (!n.error.empty() || n.version(&major, &minor) != NVRTC_SUCCESS)
    return "unavailable";
  return std::to_string(major) + "." + std::to_string(minor);
}

bool compileWithNvrtc(const std::string &source, const std::string &name, int arch, CudaBinary &out,
                      std::string &error) {
  const NvrtcApi &n = nvrtc();
  if (!n.error.empty()) {
    error = n.error;
    return false;
  }
  const auto &headers = cudaHeaders();
  std::vector<const char *> texts, names;
  for (const auto &[n, text] : headers) {
    names.push_back(n.c_str());
    texts.push_back(text.c_str());
  }
  nvrtcProgram prog = nullptr;
  nvrtcResult r = n.create(&prog, source.c_str(), name.c_str(), static_cast<int>(texts.size()),
                           texts.data(), names.data());
  if (r != NVRTC_SUCCESS) {
    error = std::string("NVRTC could not create the program: ") + n.errorString(r);
    return false;
  }
  struct Destroy {
    const NvrtcApi &n;
    nvrtcProgram *p;
    ~Destroy() { n.destroy(p); }
  } guard{n, &prog};
  // sm_XX gives both PTX (compute_XX) and CUBIN. IEEE division and square
  // root and no flush to zero are NVRTC's defaults, kept: the kernels
  // must give the interpreter's values.
  const std::string archFlag = "-arch=sm_" + std::to_string(arch);
  const char *options[] = {archFlag.c_str(), "-std=c++17", "-default-device"};
  r = n.compile(prog, static_cast<int>(std::size(options)), options);
  size_t logSize = 0;
  n.logSize(prog, &logSize);
  std::string log(logSize, '\0');
  if (logSize > 0)
    n.log(prog, log.data());
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n'))
    log.pop_back();
  out.log = log;
  if (r != NVRTC_SUCCESS) {
    error = "NVRTC failed on " + name + " (" + n.errorString(r) + "):\n" + log;
    return false;
  }
  size_t size = 0;
  if (n.ptxSize(prog, &size) != NVRTC_SUCCESS) {
    error = "NVRTC gave no PTX for " + name;
    return false;
  }
  out.ptx.assign(size, '\0');
  n.ptx(prog, out.ptx.data());
  while (!out.ptx.empty() && out.ptx.back() == '\0')
    out.ptx.pop_back();
  if (n.cubinSize(prog, &size) != NVRTC_SUCCESS || size == 0) {
    error = "NVRTC gave no CUBIN for " + name + " (sm_" + std::to_string(arch) + ")";
    return false;
  }
  out.cubin.assign(size, '\0');
  n.cubin(prog, out.cubin.data());
  return true;
}

} // namespace kiln::codegen::cuda
