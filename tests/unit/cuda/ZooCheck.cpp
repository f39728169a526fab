//===- ZooCheck.cpp - A zoo export on the emulated CUDA device -----------===//
//
//   kiln_cuda_zoo_check MODEL_DIR RTOL ATOL
//
// Imports MODEL_DIR/model.onnx (scripts/make_models.py's layout), binds its
// symbolic dims to the sizes of test_data_set_0's inputs, compiles it with
// the CUDA backend (codegen/CudaProgram.h, compileCudaModel), runs it on
// the host emulation of a GPU (Emulation.h) and compares every output with
// PyTorch's (output_K.pb) within RTOL and ATOL (ir/Compare.h), the model's
// tolerances of tests/models/tolerances. A model the backend refuses (a
// convolution, a pool, a recurrent layer, a region: what needs cuDNN or is
// not a kernel yet) prints "SKIP: the CUDA backend cannot run this model
// yet" with the node, which ctest reports as a skip. Exit 1 on a wrong
// output or any other error.
//
//===----------------------------------------------------------------------===//
#include "codegen/CudaProgram.h"
#include "frontend/onnx/OnnxImporter.h"
#include "ir/Compare.h"
#include "tests/unit/cuda/Emulation.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

using namespace kiln;
namespace fs = std::filesystem;

int main(int argc, char **argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: kiln_cuda_zoo_check MODEL_DIR RTOL ATOL\n");
    return 2;
  }
  const fs::path dir = argv[1];
  const Tolerance tol{std::atof(argv[2]), std::atof(argv[3])};
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collect(diag);
  auto module = importOnnx((dir / "model.onnx").string(), diag);
  if (failed(module)) {
    std::printf("FAIL: import: %s\n", collect.str().c_str());
    return 1;
  }
  const Graph &g = *(*module)->graphs().front();
  std::vector<Tensor> inputs, want;
  for (size_t k = 0;; ++k) {
    const fs::path in = dir / "test_data_set_0" / ("input_" + std::to_string(k) + ".pb");
    if (!fs::exists(in))
      break;
    auto t = readOnnxTensorFile(in.string(), diag);
    if (failed(t)) {
      std::printf("FAIL: %s: %s\n", in.c_str(), collect.str().c_str());
      return 1;
    }
    inputs.push_back(*t);
  }
  for (size_t k = 0; k < g.outputs().size(); ++k) {
    auto t = readOnnxTensorFile(
        (dir / "test_data_set_0" / ("output_" + std::to_string(k) + ".pb")).string(), diag);
    if (failed(t)) {
      std::printf("FAIL: output_%zu.pb: %s\n", k, collect.str().c_str());
      return 1;
    }
    want.push_back(*t);
  }
  if (inputs.size() != g.inputs().size()) {
    std::printf("FAIL: %zu inputs in test_data_set_0 for %zu graph inputs\n", inputs.size(),
                g.inputs().size());
    return 1;
  }
  codegen::CompileOptions options;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Shape &shape = g.inputs()[i]->type().shape;
    for (size_t d = 0; d < shape.size() && d < inputs[i].shape().size(); ++d)
      if (!shape[d].symbol().empty())
        options.dims[shape[d].symbol()] = inputs[i].shape()[d];
  }
  auto compiled = codegen::compileCudaModel(g, options, codegen::cuda::kDefaultCudaArch, diag);
  if (failed(compiled)) {
    const std::string why = collect.str();
    if (why.find("the CUDA backend cannot run") != std::string::npos) {
      std::printf("SKIP: the CUDA backend cannot run this model yet: %s\n", why.c_str());
      return 0;
    }
    std::printf("FAIL: compile: %s\n", why.c_str());
    return 1;
  }
  const fs::path work = fs::temp_directory_path() / ("kiln-cuda-zoo-" + std::to_string(getpid()));
  std::vector<Tensor> got;
  std::string error;
  if (!testing::runEmulatedModel(*compiled, inputs, got, work, error)) {
    std::printf("FAIL: %s\n", error.c_str());
    return 1;
  }
  if (got.size() != want.size()) {
    std::printf("FAIL: %zu outputs for %zu expected\n", got.size(), want.size());
    return 1;
  }
  bool ok = true;
  for (size_t k = 0; k < got.size(); ++k) {
    const Comparison c = compareTensors(got[k], want[k], tol);
    std::printf("output %zu: %s\n", k, describe(c, tol).c_str());
    ok = ok && c.ok();
  }
  std::printf("%s: %zu kernels on the emulated device\n", ok ? "PASS" : "FAIL",
              compiled->spec.steps.size());
  return ok ? 0 : 1;
}
