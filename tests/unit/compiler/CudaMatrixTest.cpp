//===- CudaMatrixTest.cpp - The op matrix on the CUDA backend -------------===//
//
// Every case of the op matrix (OpMatrix.h: each Elementwise, Reduction and
// Normalization op of the op table, over every dtype it takes, sizes from
// 1 to 4099, broadcast forms, special values) lowered to kernels as the
// compiler lowers them, the same kernels merged into kernels with run-time
// sizes as kernel sharing merges them (codegen/KernelSharing.h), and each
// written as CUDA C by the CUDA backend. Per op, all of them:
//   - compile with NVRTC for sm_90 as one module (PTX and CUBIN);
//   - compile with g++ against the host emulation of CUDA's built-ins
//     (tests/unit/cuda/CudaHost.h) and run on the matrix's values, each
//     output within the op's bound of interpretKernel's on the same inputs.
// What the emulation cannot show (CUDA's math library, the device's f16
// instructions) the GPU test shows where there is a GPU: the same kernels
// loaded through the CUDA driver (runtime/cuda/CudaDriver.h) and run at
// full launches. ctest runs the emulation as `cuda-matrix` and the GPU
// test as `cuda-gpu-matrix`, which reports itself skipped (not passed)
// without a GPU.
//
//===----------------------------------------------------------------------===//
#include "../OpBounds.h"
#include "OpMatrix.h"
#include "codegen/KernelSharing.h"
#include "codegen/RunTimeSizes.h"
#include "codegen/cuda/CudaEmitter.h"
#include "codegen/cuda/Nvrtc.h"
#include "ir/Ops.h"
#include "runtime/cuda/CudaDriver.h"
#include "tests/unit/cuda/Emulation.h"

#include <gtest/gtest.h>

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace {

using namespace kiln;
using namespace kiln::codegen;
using namespace kiln::testing;
namespace fs = std::filesystem;

/// Rows of one point, a few (a thread per row), under 64 (a warp of the
/// emulation's blocks of 64, some lanes idle), a stride and a remainder,
/// and past the warp's rows (a block per row).
const std::vector<int64_t> kSizes = {1, 7, 33, 65, 4099};
/// Kernels per module: the cast case alone has 441 dtype pairs.
constexpr size_t kChunk = 200;

/// One kernel to check: its CUDA C, the sizes it runs at, its case.
struct Item {
  Kernel kernel;
  cuda::CudaKernel cuda;
  std::vector<int64_t> sizes;
  size_t caseIndex = 0;
};

struct Case {
  std::string label;
  const OpInfo *op = nullptr;
  bool onePrimitive = false;
};

/// Every case of `op` at kSizes, its kernels and their merges, in CUDA C.
void collect(const OpInfo &op, std::vector<Case> &cases, std::vector<Item> &items) {
  unsigned seed = 1;
  for (const std::vector<NamedAttr> &attrs : attrVariants(op)) {
    for (unsigned ti = 0; ti < kNumDTypes; ++ti) {
      const DType t = static_cast<DType>(ti);
      auto built = buildMatrixCase(op, t, attrs, seed++, kSizes);
      if (!built)
        continue;
      Case c;
      c.op = &op;
      c.label = std::string(op.mnemonic) + " " + std::string(dtypeName(t));
      for (const NamedAttr &a : attrs)
        c.label += " " + a.first;
      const Node *first = built->graph->outputs()[0]->definingNode();
      std::vector<DType> operandTypes;
      for (const Value *v : first->operands())
        operandTypes.push_back(v->type().dtype);
      c.onePrimitive =
          op.hasTrait(Elementwise) &&
          lowersToOnePrimitive(op, first->attrs(), operandTypes, first->result()->type().dtype);
      DiagnosticEngine diag;
      ScopedDiagnosticCollector collect(diag);
      auto kernels = lowerAtSizes(*built->graph, {}, CompileOptions{}, diag);
      ASSERT_TRUE(kernels.succeeded()) << c.label << ": " << collect.str();
      const size_t caseIndex = cases.size();
      cases.push_back(c);
      auto add = [&](const Kernel &k, std::vector<int64_t> sizes) {
        std::string error;
        const std::string name =
            "c" + std::to_string(caseIndex) + "_k" + std::to_string(items.size());
        auto ck = cuda::emitCudaKernel(k, name, error);
        ASSERT_TRUE(ck.has_value()) << c.label << ": " << error << "\n" << k.str();
        items.push_back({k, *ck, std::move(sizes), caseIndex});
      };
      std::vector<const Kernel *> ptrs;
      for (const Kernel &k : *kernels) {
        add(k, {});
        ptrs.push_back(&k);
      }
      // Kernels with run-time sizes, at each member's sizes.
      const std::vector<Schedule> schedules(ptrs.size());
      for (const ShapeSharedKernel &shared : shareAcrossShapes(ptrs, schedules))
        add(shared.kernel, shared.sizes.back());
    }
  }
  ASSERT_FALSE(items.empty()) << "no kernels for '" << op.mnemonic << "'";
}

/// The inputs of `it` (drawn as the matrix draws its case's operands) and
/// interpretKernel's outputs on them, and zeroed outputs for the backend.
struct KernelRun {
  std::vector<Tensor> inputs, want, got;
};
KernelRun prepare(const Item &it, const std::vector<Case> &cases, std::mt19937 &rng) {
  const Kernel bound = it.kernel.bind(it.sizes);
  KernelRun r;
  std::vector<void *> wantBuffers;
  for (const KernelBuffer &b : bound.inputs) {
    r.inputs.push_back(
        matrixOperand(*cases[it.caseIndex].op, r.inputs.size(), b.dtype, b.shape, rng));
    wantBuffers.push_back(r.inputs.back().mutableRawData());
  }
  for (const KernelBuffer &b : bound.outputs) {
    r.got.push_back(Tensor::zeros(b.dtype, b.shape));
    r.want.push_back(Tensor::zeros(b.dtype, b.shape));
    wantBuffers.push_back(r.want.back().mutableRawData());
  }
  interpretKernel(it.kernel, wantBuffers, it.sizes);
  return r;
}

/// Adds a failure per output of `r` outside the op's bound (at most six
/// in all, counted by `failures`).
void compareRun(const Item &it, const KernelRun &r, const std::vector<Case> &cases,
                const char *backend, int &failures) {
  const Case &c = cases[it.caseIndex];
  for (size_t o = 0; o < r.got.size(); ++o) {
    const std::string bad = compareWithBound(*c.op, r.got[o], r.want[o], c.onePrimitive);
    if (!bad.empty() && failures++ < 6)
      ADD_FAILURE() << c.label << ", kernel " << it.cuda.name << " ("
                    << cuda::cudaFormName(it.cuda.form) << ", " << backend << ", output " << o
                    << "): " << bad << "\n"
                    << it.cuda.source;
  }
}

/// The items in modules of kChunk kernels: each module's source and its
/// kernels' names.
void chunk(const std::vector<Item> &items, std::vector<std::string> &modules,
           std::vector<std::vector<std::string>> &functions) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (i % kChunk == 0) {
      modules.emplace_back();
      functions.emplace_back();
    }
    modules.back() += items[i].cuda.source;
    functions.back().push_back(items[i].cuda.name);
  }
}

/// Runs every item on `device`, a module at a time (compiled by NVRTC for
/// `arch`, loaded by the device), each against interpretKernel.
void runItems(runtime::cuda::Device &device, int arch, const OpInfo &op,
              const std::vector<Case> &cases, const std::vector<Item> &items) {
  std::vector<std::string> modules;
  std::vector<std::vector<std::string>> functions;
  chunk(items, modules, functions);
  std::mt19937 rng(7);
  int failures = 0;
  std::string error;
  for (size_t c = 0; c < modules.size(); ++c) {
    cuda::CudaBinary binary;
    ASSERT_TRUE(
        cuda::compileWithNvrtc(modules[c], std::string(op.mnemonic) + ".cu", arch, binary, error))
        << error;
    EXPECT_FALSE(binary.ptx.empty());
    EXPECT_FALSE(binary.cubin.empty());
    auto loaded = device.loadModule(binary.cubin, error);
    ASSERT_NE(loaded, nullptr) << error;
    for (size_t i = c * kChunk; i < std::min(items.size(), (c + 1) * kChunk); ++i) {
      const Item &it = items[i];
      KernelRun r = prepare(it, cases, rng);
      void *fn = loaded->function(it.cuda.name, error);
      ASSERT_NE(fn, nullptr) << error;
      std::vector<Tensor *> all;
      for (Tensor &t : r.inputs)
        all.push_back(&t);
      for (Tensor &t : r.got)
        all.push_back(&t);
      runtime::cuda::LaunchArgs args;
      for (const Tensor *t : all) {
        const size_t bytes = static_cast<size_t>(t->numel()) * dtypeSize(t->dtype());
        args.buffers.push_back(0);
        ASSERT_TRUE(device.alloc(bytes, args.buffers.back(), error)) << error;
        ASSERT_TRUE(device.copyToDevice(args.buffers.back(), t->rawData(), bytes, error)) << error;
      }
      args.sizes = it.sizes;
      args.synchronizes = cuda::cudaFormSynchronizes(it.cuda.form);
      const Kernel bound = it.kernel.bind(it.sizes);
      ASSERT_TRUE(device.launch(fn,
                                cuda::cudaGridBlocks(it.cuda.form, bound.numOuter(), bound.inner),
                                cuda::kCudaBlockThreads, args, error))
          << error;
      ASSERT_TRUE(device.synchronize(error)) << it.cuda.name << ": " << error;
      for (size_t o = 0; o < r.got.size(); ++o) {
        Tensor &t = r.got[o];
        ASSERT_TRUE(device.copyToHost(t.mutableRawData(), args.buffers[r.inputs.size() + o],
                                      static_cast<size_t>(t.numel()) * dtypeSize(t.dtype()), error))
            << error;
      }
      for (runtime::cuda::DevicePtr p : args.buffers)
        device.free(p);
      compareRun(it, r, cases, device.name().c_str(), failures);
    }
  }
}

class CudaMatrixTest : public ::testing::TestWithParam<const OpInfo *> {};

TEST_P(CudaMatrixTest, EmulatedKernelsEqualTheInterpreter) {
  const OpInfo &op = *GetParam();
  std::vector<Case> cases;
  std::vector<Item> items;
  collect(op, cases, items);
  if (HasFatalFailure())
    return;
  // g++ builds every module for the emulation at once (two at a time).
  const fs::path dir = fs::temp_directory_path() / ("kiln-cuda-matrix-" + std::to_string(getpid()) +
                                                    "-" + std::string(op.mnemonic));
  fs::remove_all(dir);
  std::vector<std::string> modules;
  std::vector<std::vector<std::string>> functions;
  chunk(items, modules, functions);
  std::string error;
  auto emulated = EmulatedModule::compile(modules, functions, dir, error);
  ASSERT_NE(emulated, nullptr) << error;
  EmulatedDevice device(emulated);
  runItems(device, cuda::kDefaultCudaArch, op, cases, items);
  if (!HasFailure())
    fs::remove_all(dir);
}

/// The GPU every GPU test of the process runs on, opened once; null (and
/// `why`) where there is none.
runtime::cuda::CudaDevice *gpu(std::string &why) {
  static std::string error;
  static std::unique_ptr<runtime::cuda::CudaDevice> device = runtime::cuda::CudaDevice::open(error);
  why = error;
  return device.get();
}

TEST_P(CudaMatrixTest, GpuKernelsEqualTheInterpreter) {
  std::string why;
  runtime::cuda::CudaDevice *device = gpu(why);
  if (!device)
    GTEST_SKIP() << "no GPU to run on: " << why; // reason: the kernels need one
  const OpInfo &op = *GetParam();
  std::vector<Case> cases;
  std::vector<Item> items;
  collect(op, cases, items);
  if (HasFatalFailure())
    return;
  runItems(*device, device->computeCapability(), op, cases, items);
}

INSTANTIATE_TEST_SUITE_P(Ops, CudaMatrixTest, ::testing::ValuesIn(matrixOps()),
                         [](const ::testing::TestParamInfo<const OpInfo *> &info) {
                           return std::string(info.param->mnemonic);
                         });

} // namespace
