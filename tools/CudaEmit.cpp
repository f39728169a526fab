//===- CudaEmit.cpp - The CLI's CUDA backend: compile, run, inspect -------===//
//
// `kiln compile --target cuda|--emit=cuda|ptx`: the CUDA backend's module
// of a graph's kernels (codegen/CudaProgram.h): fusion decisions, CUDA C
// and PTX printed, kernels.cu/.ptx/.cubin written to --cuda-dir, the CUDA
// artifact to -o (runtime/cuda/CudaArtifact.h), and a summary line;
// `kiln run --target cuda`, the model compiled for and run on the
// machine's GPU (runtime/cuda/CudaModel.h); `kiln run` and `kiln inspect`
// of a CUDA artifact. Built without NVRTC (KILN_HAS_CUDA unset), each says
// so.
//
//===----------------------------------------------------------------------===//
#include "tools/Commands.h"

#ifdef KILN_HAS_CUDA
#include "codegen/CudaProgram.h"
#include "codegen/MemoryPlan.h"
#include "runtime/cuda/CudaArtifact.h"
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

/// `spec` loaded on the machine's GPU, run on host tensors checked against
/// its inputs' types; `run` is empty after an error, reported after
/// `what` ("--target cuda").
CudaRun cudaRunOf(runtime::cuda::CudaModelSpec spec, const std::string &what,
                  DiagnosticEngine &diag) {
  using Role = runtime::cuda::CudaModelSpec::Buffer::Role;
  CudaRun r;
  std::string error;
  std::shared_ptr<runtime::cuda::CudaDevice> device = runtime::cuda::CudaDevice::open(error);
  if (!device) {
    diag.emitError(Location()) << what << ": " << error;
    return r;
  }
  size_t products = 0;
  for (const auto &step : spec.steps)
    products += step.kind == runtime::cuda::CudaModelSpec::Step::Kind::Gemm;
  const size_t kernels = spec.steps.size() - products;
  // The model holds the device until it is gone (it frees its memory
  // there): its deleter keeps a reference.
  std::unique_ptr<runtime::cuda::CudaModel> loaded =
      runtime::cuda::CudaModel::load(*device, std::move(spec), error);
  std::shared_ptr<runtime::cuda::CudaModel> model(
      loaded.release(), [device](runtime::cuda::CudaModel *m) { delete m; });
  if (!model) {
    diag.emitError(Location()) << what << ": loading the model on " << device->name() << ": "
                               << error;
    return r;
  }
  r.description = "CUDA on " + device->name() + ", " + std::to_string(kernels) + " kernels and " +
                  std::to_string(products) + " cuBLASLt products, " + model->imageUsed();
  r.run = [device, model, what](std::span<const Tensor> inputs,
                                DiagnosticEngine &d) -> FailureOr<std::vector<Tensor>> {
    const auto ins = model->spec().ports(Role::Input);
    const auto outsOf = model->spec().ports(Role::Output);
    std::vector<const void *> in;
    for (size_t i = 0; i < ins.size() && i < inputs.size(); ++i) {
      const Tensor &t = inputs[i];
      if (t.dtype() != ins[i]->dtype || t.shape() != ins[i]->shape)
        return d.emitError(Location())
               << what << ": input " << i << " (%" << ins[i]->name << ") is " << t.type().str()
               << "; the model takes " << runtime::typeString(ins[i]->dtype, ins[i]->shape);
      in.push_back(t.rawData());
    }
    std::vector<Tensor> outs;
    std::vector<void *> out;
    for (const auto *b : outsOf) {
      outs.push_back(Tensor::zeros(b->dtype, b->shape));
      out.push_back(outs.back().mutableRawData());
    }
    std::string error;
    if (!model->run(in, out, error))
      return d.emitError(Location()) << what << ": " << error;
    return outs;
  };
  return r;
}

} // namespace

int emitCuda(const Graph &g, const std::string &model, const codegen::CompileOptions &options,
             const CudaEmitFlags &flags, DiagnosticEngine &diag) {
  auto compiled = codegen::compileCudaModel(g, options, flags.arch, diag,
                                            /*kernelsOnly=*/!flags.target);
  if (failed(compiled))
    return 1;
  const codegen::CudaProgram *prog = &compiled->program;
  if (options.explain)
    std::printf("// fusion decisions\n%s", compiled->fusion.c_str());
  if (flags.source) {
    std::printf("// cuda\n");
    for (const std::string &n : compiled->notKernels)
      std::printf("// not a kernel: %s\n", n.c_str());
    if (!compiled->productsAsKernels.empty())
      std::printf("// matrix products as kernels: %s\n", compiled->productsAsKernels.c_str());
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
  if (flags.output.empty())
    return 0;
  runtime::cuda::CudaArtifact a = codegen::cudaArtifactOf(std::move(*compiled), model);
  std::string error;
  if (!runtime::cuda::saveCudaArtifact(a, flags.output, error)) {
    std::fprintf(stderr, "kiln compile: error: writing '%s': %s\n", flags.output.c_str(),
                 error.c_str());
    return 1;
  }
  std::error_code ec;
  std::printf("wrote %s: a CUDA artifact for sm_%d, %s (kiln run runs it on a GPU)\n",
              flags.output.c_str(), a.spec.arch,
              formatBytes(std::filesystem::file_size(flags.output, ec)).c_str());
  return 0;
}

CudaRun prepareCudaRun(const Graph &g, const codegen::CompileOptions &options,
                       DiagnosticEngine &diag) {
  // The device first: without one nothing else can run.
  std::string error;
  std::shared_ptr<runtime::cuda::CudaDevice> device = runtime::cuda::CudaDevice::open(error);
  if (!device) {
    diag.emitError(Location()) << "--target cuda: " << error;
    return {};
  }
  auto compiled = codegen::compileCudaModel(g, options, device->computeCapability(), diag);
  if (failed(compiled))
    return {};
  return cudaRunOf(std::move(compiled->spec), "--target cuda", diag);
}

CudaRun prepareCudaArtifactRun(const std::string &path,
                               std::vector<std::pair<std::string, std::string>> &inputs,
                               std::vector<std::string> &outputs, DiagnosticEngine &diag) {
  using Role = runtime::cuda::CudaModelSpec::Buffer::Role;
  runtime::cuda::CudaArtifact a;
  std::string error;
  if (!runtime::cuda::loadCudaArtifact(path, a, error)) {
    diag.emitError(Location()) << error;
    return {};
  }
  for (const auto *b : a.spec.ports(Role::Input))
    inputs.emplace_back(b->name, runtime::typeString(b->dtype, b->shape));
  for (const auto *b : a.spec.ports(Role::Output))
    outputs.push_back(b->name);
  return cudaRunOf(std::move(a.spec), "CUDA artifact '" + path + "'", diag);
}

int inspectCudaArtifact(const std::string &path) {
  using Role = runtime::cuda::CudaModelSpec::Buffer::Role;
  runtime::cuda::CudaArtifact a;
  std::string error;
  if (!runtime::cuda::loadCudaArtifact(path, a, error)) {
    std::fprintf(stderr, "kiln inspect: error: %s\n", error.c_str());
    return 1;
  }
  const runtime::cuda::CudaModelSpec &s = a.spec;
  std::printf("artifact: %s, a CUDA artifact compiled from %s by Kiln %s (NVRTC %s)\n",
              path.c_str(), a.model.empty() ? "?" : a.model.c_str(), a.kilnVersion.c_str(),
              a.nvrtcVersion.c_str());
  for (const auto *b : s.ports(Role::Input))
    std::printf("  input  %%%s : %s\n", b->name.c_str(),
                runtime::typeString(b->dtype, b->shape).c_str());
  for (const auto *b : s.ports(Role::Output))
    std::printf("  output %%%s : %s\n", b->name.c_str(),
                runtime::typeString(b->dtype, b->shape).c_str());
  uint64_t constants = 0;
  for (const auto &b : s.buffers)
    constants += b.role == Role::Constant ? b.bytes : 0;
  std::printf("target: sm_%d (CUBIN %s, PTX %s for a later GPU)\n", s.arch,
              formatBytes(s.image.size()).c_str(), formatBytes(s.ptx.size()).c_str());
  std::printf("file: %s: constants %s, %zu kernel step%s, arena %s\n",
              formatBytes(a.fileBytes).c_str(), formatBytes(constants).c_str(), s.steps.size(),
              s.steps.size() == 1 ? "" : "s", formatBytes(s.arenaBytes).c_str());
  return 0;
}

#else

constexpr const char *kNoCudaBackend =
    "this Kiln was built without the CUDA backend (CMake found no NVRTC under KILN_CUDA_ROOT, "
    "/usr/local/cuda by default)";

CudaRun prepareCudaRun(const Graph &, const codegen::CompileOptions &, DiagnosticEngine &diag) {
  diag.emitError(Location()) << "--target cuda: " << kNoCudaBackend;
  return {};
}

int emitCuda(const Graph &, const std::string &, const codegen::CompileOptions &,
             const CudaEmitFlags &, DiagnosticEngine &) {
  std::fprintf(stderr, "kiln compile: error: %s\n", kNoCudaBackend);
  return 1;
}

CudaRun prepareCudaArtifactRun(const std::string &path,
                               std::vector<std::pair<std::string, std::string>> &,
                               std::vector<std::string> &, DiagnosticEngine &diag) {
  diag.emitError(Location::file(path)) << "a CUDA artifact: " << kNoCudaBackend;
  return {};
}

int inspectCudaArtifact(const std::string &path) {
  std::fprintf(stderr, "kiln inspect: error: '%s' is a CUDA artifact: %s\n", path.c_str(),
               kNoCudaBackend);
  return 1;
}

#endif

} // namespace kiln::tools
