//===- CudaEmit.cpp - kiln compile --emit=cuda|ptx, kiln run --target cuda ===//
//
// The CUDA backend's module of a graph's kernels (codegen/CudaProgram.h):
// CUDA C and PTX printed, kernels.cu/.ptx/.cubin written to --cuda-dir,
// and a summary line; and `kiln run --target cuda`, the model compiled for
// and run on the machine's GPU (runtime/cuda/CudaModel.h). Built without
// NVRTC (KILN_HAS_CUDA unset), both say so.
//
//===----------------------------------------------------------------------===//
#include "tools/Commands.h"

#ifdef KILN_HAS_CUDA
#include "codegen/CudaProgram.h"
#endif

#include <cctype>
#include <filesystem>
#include <fstream>

namespace kiln::tools {

int parseCudaArchFlag(const std::string &s) {
  const std::string digits = s.rfind("sm_", 0) == 0 ? s.substr(3) : s;
  if (digits.empty() || digits.size() > 3)
    return -1;
  for (char c : digits)
    if (!std::isdigit(static_cast<unsigned char>(c)))
      return -1;
  const int arch = std::stoi(digits);
  return arch >= 50 ? arch : -1;
}

#ifdef KILN_HAS_CUDA
namespace {

bool writeFile(const std::filesystem::path &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (out)
    return true;
  std::fprintf(stderr, "kiln compile: error: cannot write '%s'\n", path.c_str());
  return false;
}

} // namespace

int emitCuda(const Graph &g, const codegen::CompileOptions &options, const CudaEmitFlags &flags,
             DiagnosticEngine &diag) {
  auto compiled = codegen::compileCudaModel(g, options, flags.arch, diag, /*kernelsOnly=*/true);
  if (failed(compiled))
    return 1;
  const codegen::CudaProgram *prog = &compiled->program;
  if (flags.source) {
    std::printf("// cuda\n");
    for (const std::string &n : compiled->notKernels)
      std::printf("// not a kernel: %s (needs cuDNN, which the backend does not call yet)\n",
                  n.c_str());
    for (const codegen::CudaProgram::Entry &e : prog->kernels)
      std::printf("// %s: %s, %lld rows of %lld, grid %u x %d\n", e.name.c_str(),
                  codegen::cuda::cudaFormName(e.form), static_cast<long long>(e.numOuter),
                  static_cast<long long>(e.inner), e.grid, codegen::cuda::kCudaBlockThreads);
    std::printf("%s", prog->source.c_str());
  }
  if (flags.ptx)
    std::printf("// ptx\n%s", prog->binary.ptx.c_str());
  if (!prog->binary.log.empty())
    std::fprintf(stderr, "kiln compile: NVRTC: %s\n", prog->binary.log.c_str());
  if (!flags.dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(flags.dir, ec);
    if (ec) {
      std::fprintf(stderr, "kiln compile: error: cannot create '%s': %s\n", flags.dir.c_str(),
                   ec.message().c_str());
      return 1;
    }
    const std::filesystem::path dir(flags.dir);
    if (!writeFile(dir / "kernels.cu", prog->source) ||
        !writeFile(dir / "kernels.ptx", prog->binary.ptx) ||
        !writeFile(dir / "kernels.cubin", prog->binary.cubin))
      return 1;
  }
  std::printf("cuda: %zu kernels for sm_%d by NVRTC %s: CUDA C %zu bytes, PTX %zu bytes, CUBIN "
              "%zu bytes\n",
              prog->kernels.size(), prog->arch, codegen::cuda::nvrtcVersionString().c_str(),
              prog->source.size(), prog->binary.ptx.size(), prog->binary.cubin.size());
  return 0;
}

CudaRun prepareCudaRun(const Graph &g, const codegen::CompileOptions &options,
                       DiagnosticEngine &diag) {
  CudaRun r;
  std::string error;
  // The device first: without one nothing else can run.
  std::shared_ptr<runtime::cuda::CudaDevice> device = runtime::cuda::CudaDevice::open(error);
  if (!device) {
    diag.emitError(Location()) << "--target cuda: " << error;
    return r;
  }
  auto compiled = codegen::compileCudaModel(g, options, device->computeCapability(), diag);
  if (failed(compiled))
    return r;
  std::shared_ptr<runtime::cuda::CudaModel> model =
      runtime::cuda::CudaModel::load(*device, compiled->spec, error);
  if (!model) {
    diag.emitError(Location()) << "--target cuda: loading the model on " << device->name() << ": "
                               << error;
    return r;
  }
  std::vector<std::pair<DType, std::vector<int64_t>>> outputs(
      static_cast<size_t>(compiled->spec.numOutputs));
  for (const auto &b : compiled->spec.buffers)
    if (b.role == runtime::cuda::CudaModelSpec::Buffer::Role::Output)
      outputs[static_cast<size_t>(b.index)] = {b.dtype, b.shape};
  r.description =
      "CUDA on " + device->name() + ", " + std::to_string(compiled->spec.steps.size()) + " kernels";
  r.run = [device, model, outputs](std::span<const Tensor> inputs,
                                   DiagnosticEngine &d) -> FailureOr<std::vector<Tensor>> {
    std::vector<Tensor> outs;
    std::vector<const void *> in;
    std::vector<void *> out;
    for (const Tensor &t : inputs)
      in.push_back(t.rawData());
    for (const auto &[dtype, shape] : outputs) {
      outs.push_back(Tensor::zeros(dtype, shape));
      out.push_back(outs.back().mutableRawData());
    }
    std::string error;
    if (!model->run(in, out, error)) {
      d.emitError(Location()) << "--target cuda: " << error;
      return failure();
    }
    return outs;
  };
  return r;
}

#else

CudaRun prepareCudaRun(const Graph &, const codegen::CompileOptions &, DiagnosticEngine &diag) {
  diag.emitError(Location()) << "--target cuda: this Kiln was built without the CUDA backend "
                                "(CMake found no NVRTC under KILN_CUDA_ROOT, /usr/local/cuda by "
                                "default)";
  return {};
}

int emitCuda(const Graph &, const codegen::CompileOptions &, const CudaEmitFlags &,
             DiagnosticEngine &) {
  std::fprintf(stderr, "kiln compile: error: this Kiln was built without the CUDA backend (CMake "
                       "found no NVRTC under KILN_CUDA_ROOT, /usr/local/cuda by default)\n");
  return 1;
}

#endif

} // namespace kiln::tools
