//===- DynamicSymbols.h - Functions of a library opened with dlopen -*- C++ -*-===//
//
// The libraries Kiln opens on first use rather than links (NVRTC,
// codegen/cuda/Nvrtc.cpp; the CUDA driver, runtime/cuda/CudaDriver.cpp)
// bind their functions with this, keeping the types their headers declare:
//
//   decltype(&::cuInit) init = nullptr;
//   bindSymbol(lib, "cuInit", init, "the CUDA driver (libcuda.so.1)", error);
//
//===----------------------------------------------------------------------===//
#pragma once

#include <dlfcn.h>

#include <string>

namespace kiln::runtime {

/// `library` opened with dlopen from the loader's path, else from the CUDA
/// toolkit's /usr/local/cuda/lib64; null with `error` = dlerror()'s words.
inline void *openCudaLibrary(const char *library, std::string &error) {
  if (void *lib = dlopen(library, RTLD_NOW | RTLD_LOCAL))
    return lib;
  error = dlerror();
  return dlopen((std::string("/usr/local/cuda/lib64/") + library).c_str(), RTLD_NOW | RTLD_LOCAL);
}

/// `fn` = the symbol `name` of `lib`; when it is missing and `error` is
/// still empty, `error` = "LIBRARY has no NAME".
template <typename F>
void bindSymbol(void *lib, const char *name, F &fn, const char *library, std::string &error) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (!fn && error.empty())
    error = std::string(library) + " has no " + name;
}

} // namespace kiln::runtime
