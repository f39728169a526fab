//===- CudaArtifactTest.cpp - CUDA artifacts saved, loaded and run --------===//
//
// runtime/cuda/CudaArtifact.h: a compiled CUDA model saved and loaded back
// is the same model (every field, and the same bytes when saved again),
// runs on the emulated device as the interpreter, also on the caller's
// device buffers (CudaModel::runOnDevice); every damage a file can have
// (cut anywhere, any byte changed, another format, a CPU artifact, a
// metadata lie) is one error naming the file; and a GPU of another compute
// capability gets the PTX, or an error naming both.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/CudaArtifact.h"
#include "codegen/CudaProgram.h"
#include "ir/Compare.h"
#include "ir/Interpreter.h"
#include "ir/Parser.h"
#include "runtime/artifact/Artifact.h"
#include "tests/unit/cuda/Emulation.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace {

using namespace kiln;
using runtime::cuda::CudaArtifact;
using runtime::cuda::CudaModelSpec;
namespace fs = std::filesystem;

const char *kModel = R"(
graph @m(%x: f32[6,40], %i: i32[6,40], %v: f32[40,3]) -> (f32[6,40], f32[40,6], i32[6,1], f32[6,3]) {
  %w = constant dense<[0.5, -1.0, 2.0, 0.25, 1.5, -0.5]> : f32[6,1]
  %a = mul(%x, %w) : f32[6,40]
  %s = softmax(%a) : f32[6,40]
  %t = transpose(%a) {perm = [1, 0]} : f32[40,6]
  %r = reduce_max(%i) {axes = [1]} : i32[6,1]
  %p = matmul(%a, %v) : f32[6,3]
  return %s, %t, %r, %p
}
)";

struct Fixture {
  std::unique_ptr<Module> module;
  codegen::CudaCompiled compiled;
  std::vector<Tensor> inputs, want;
};

Fixture compileModel() {
  Fixture f;
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collect(diag);
  auto m = parseModule(kModel, diag);
  EXPECT_TRUE(m.succeeded()) << collect.str();
  f.module = std::move(*m);
  const Graph &g = *f.module->graphs().front();
  auto c = codegen::compileCudaModel(g, {}, codegen::cuda::kDefaultCudaArch, diag);
  EXPECT_TRUE(c.succeeded()) << collect.str();
  f.compiled = std::move(*c);
  f.inputs = kiln::testing::randomInputs(g, 7);
  auto want = interpret(g, f.inputs, diag);
  EXPECT_TRUE(want.succeeded()) << collect.str();
  f.want = *want;
  return f;
}

fs::path scratch(const std::string &name) {
  const fs::path dir =
      fs::temp_directory_path() / ("kiln-cuda-artifact-" + std::to_string(getpid()));
  fs::create_directories(dir);
  return dir / name;
}

std::string readBytes(const fs::path &p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void writeBytes(const fs::path &p, const std::string &bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

/// `f`'s kernels built for the emulated device in scratch(`dir`).
std::shared_ptr<kiln::testing::EmulatedModule> emulatedModuleOf(const Fixture &f, const char *dir,
                                                                std::string &error) {
  std::vector<std::string> names;
  for (const auto &k : f.compiled.program.kernels)
    names.push_back(k.name);
  return kiln::testing::EmulatedModule::compile({f.compiled.program.source}, {names}, scratch(dir),
                                                error);
}

CudaArtifact artifactOf(const Fixture &f) {
  CudaArtifact a;
  a.spec = f.compiled.spec;
  a.source = f.compiled.program.source;
  a.model = "m.kir";
  a.nvrtcVersion = codegen::cuda::nvrtcVersionString();
  return a;
}

TEST(CudaArtifactTest, SavedAndLoadedIsTheSameModel) {
  Fixture f = compileModel();
  ASSERT_FALSE(HasFailure());
  const fs::path path = scratch("m.kiln");
  std::string error;
  ASSERT_TRUE(runtime::cuda::saveCudaArtifact(artifactOf(f), path, error)) << error;
  EXPECT_TRUE(runtime::isCudaArtifactFile(path));
  EXPECT_FALSE(runtime::isArtifactFile(path));
  CudaArtifact a;
  ASSERT_TRUE(runtime::cuda::loadCudaArtifact(path, a, error)) << error;
  const CudaModelSpec &s = f.compiled.spec, &t = a.spec;
  EXPECT_EQ(a.model, "m.kir");
  EXPECT_EQ(a.source, f.compiled.program.source);
  EXPECT_EQ(t.image, s.image);
  EXPECT_EQ(t.ptx, s.ptx);
  EXPECT_FALSE(t.image.empty());
  EXPECT_FALSE(t.ptx.empty());
  EXPECT_EQ(t.arch, s.arch);
  EXPECT_EQ(t.arenaBytes, s.arenaBytes);
  EXPECT_EQ(t.numInputs, 3);
  EXPECT_EQ(t.numOutputs, 4);
  ASSERT_EQ(t.buffers.size(), s.buffers.size());
  for (size_t b = 0; b < s.buffers.size(); ++b) {
    EXPECT_EQ(t.buffers[b].role, s.buffers[b].role);
    EXPECT_EQ(t.buffers[b].name, s.buffers[b].name);
    EXPECT_EQ(t.buffers[b].dtype, s.buffers[b].dtype);
    EXPECT_EQ(t.buffers[b].shape, s.buffers[b].shape);
    EXPECT_EQ(t.buffers[b].index, s.buffers[b].index);
    EXPECT_EQ(t.buffers[b].offset, s.buffers[b].offset);
    EXPECT_EQ(t.buffers[b].bytes, s.buffers[b].bytes);
    EXPECT_EQ(t.buffers[b].data, s.buffers[b].data);
  }
  ASSERT_EQ(t.steps.size(), s.steps.size());
  for (size_t i = 0; i < s.steps.size(); ++i) {
    EXPECT_EQ(t.steps[i].function, s.steps[i].function);
    EXPECT_EQ(t.steps[i].buffers, s.steps[i].buffers);
    EXPECT_EQ(t.steps[i].grid, s.steps[i].grid);
    EXPECT_EQ(t.steps[i].block, s.steps[i].block);
    EXPECT_EQ(t.steps[i].synchronizes, s.steps[i].synchronizes);
    EXPECT_EQ(t.steps[i].sizes, s.steps[i].sizes);
    EXPECT_EQ(t.steps[i].kind, s.steps[i].kind);
    EXPECT_EQ(t.steps[i].gemm.str(), s.steps[i].gemm.str());
  }
  EXPECT_EQ(std::count_if(t.steps.begin(), t.steps.end(),
                          [](const CudaModelSpec::Step &st) {
                            return st.kind == CudaModelSpec::Step::Kind::Gemm;
                          }),
            1);
  // Saved again (and compiled again): the same bytes.
  Fixture again = compileModel();
  const fs::path second = scratch("m2.kiln");
  ASSERT_TRUE(runtime::cuda::saveCudaArtifact(artifactOf(again), second, error)) << error;
  EXPECT_EQ(readBytes(path), readBytes(second));
}

TEST(CudaArtifactTest, ALoadedArtifactRunsAsTheInterpreter) {
  Fixture f = compileModel();
  ASSERT_FALSE(HasFailure());
  const fs::path path = scratch("run.kiln");
  std::string error;
  ASSERT_TRUE(runtime::cuda::saveCudaArtifact(artifactOf(f), path, error)) << error;
  CudaArtifact a;
  ASSERT_TRUE(runtime::cuda::loadCudaArtifact(path, a, error)) << error;
  std::vector<Tensor> got;
  ASSERT_TRUE(kiln::testing::runEmulatedSpec(a.source, a.spec, f.inputs, got,
                                             scratch("run-emulated"), error))
      << error;
  ASSERT_EQ(got.size(), f.want.size());
  const Tolerance tol{1e-5, 1e-6};
  for (size_t o = 0; o < got.size(); ++o) {
    const Comparison c = compareTensors(got[o], f.want[o], tol);
    EXPECT_TRUE(c.ok()) << "output " << o << ": " << describe(c, tol);
  }
}

TEST(CudaArtifactTest, RunOnDeviceBuffersReadsAndWritesThemWithoutCopies) {
  Fixture f = compileModel();
  ASSERT_FALSE(HasFailure());
  const CudaModelSpec &spec = f.compiled.spec;
  std::string error;
  auto module = emulatedModuleOf(f, "on-device", error);
  ASSERT_NE(module, nullptr) << error;
  kiln::testing::EmulatedDevice device(module);
  auto model = runtime::cuda::CudaModel::load(device, spec, error);
  ASSERT_NE(model, nullptr) << error;
  // The caller's device buffers, filled and read by the caller.
  std::vector<runtime::cuda::DevicePtr> in, out;
  for (const Tensor &t : f.inputs) {
    runtime::cuda::DevicePtr p = 0;
    ASSERT_TRUE(device.alloc(t.byteSize(), p, error)) << error;
    ASSERT_TRUE(device.copyToDevice(p, t.rawData(), t.byteSize(), error)) << error;
    in.push_back(p);
  }
  for (const Tensor &t : f.want) {
    runtime::cuda::DevicePtr p = 0;
    ASSERT_TRUE(device.alloc(t.byteSize(), p, error)) << error;
    out.push_back(p);
  }
  ASSERT_TRUE(model->runOnDevice(in, out, error)) << error;
  ASSERT_TRUE(model->runOnDevice(in, out, error)) << error;
  EXPECT_EQ(device.graphsRecorded, 1); // the same buffers: one graph, replayed
  EXPECT_EQ(device.graphsLaunched, 2);
  const Tolerance tol{1e-5, 1e-6};
  for (size_t o = 0; o < f.want.size(); ++o) {
    Tensor got = Tensor::zeros(f.want[o].dtype(), f.want[o].shape());
    ASSERT_TRUE(device.copyToHost(got.mutableRawData(), out[o], got.byteSize(), error)) << error;
    const Comparison c = compareTensors(got, f.want[o], tol);
    EXPECT_TRUE(c.ok()) << "output " << o << ": " << describe(c, tol);
  }
  EXPECT_FALSE(model->runOnDevice({in.data(), 1}, out, error));
  EXPECT_NE(error.find("the model takes 3 inputs and 4 outputs, given 1 and 4"), std::string::npos)
      << error;
  std::vector<runtime::cuda::DevicePtr> shifted = out;
  shifted[1] += 4;
  EXPECT_FALSE(model->runOnDevice(in, shifted, error));
  EXPECT_NE(error.find("output 1 (%"), std::string::npos) << error;
  EXPECT_NE(error.find(") is not 16-byte aligned"), std::string::npos) << error;
  for (auto p : in)
    device.free(p);
  for (auto p : out)
    device.free(p);
}

/// The emulated device, whose graphs cannot be recorded.
class NoGraphs final : public kiln::testing::EmulatedDevice {
public:
  using EmulatedDevice::EmulatedDevice;
  bool beginCapture(std::string &error) override {
    error = "cuStreamBeginCapture: operation not permitted when stream is capturing";
    return false;
  }
};

// Note [CUDA graphs for a model's steps]: a model's steps recorded once and
// replayed by every run; recorded again for other device buffers; the same
// outputs one by one (useGraphs(false)) and where recording fails.
TEST(CudaArtifactTest, StepsRunAsOneRecordedGraph) {
  Fixture f = compileModel();
  ASSERT_FALSE(HasFailure());
  const CudaModelSpec &spec = f.compiled.spec;
  std::string error;
  auto module = emulatedModuleOf(f, "graphs", error);
  ASSERT_NE(module, nullptr) << error;
  auto runAll = [&](runtime::cuda::CudaModel &model, int times) {
    std::vector<std::vector<Tensor>> results;
    for (int r = 0; r < times; ++r) {
      std::vector<Tensor> outs;
      std::vector<const void *> in;
      std::vector<void *> out;
      for (const Tensor &t : f.inputs)
        in.push_back(t.rawData());
      for (const Tensor &w : f.want) {
        outs.push_back(Tensor::zeros(w.dtype(), w.shape()));
        out.push_back(outs.back().mutableRawData());
      }
      EXPECT_TRUE(model.run(in, out, error)) << error;
      results.push_back(outs);
    }
    return results;
  };
  const Tolerance tol{1e-5, 1e-6};
  auto expectWanted = [&](const std::vector<Tensor> &got) {
    for (size_t o = 0; o < f.want.size(); ++o) {
      const Comparison c = compareTensors(got[o], f.want[o], tol);
      EXPECT_TRUE(c.ok()) << "output " << o << ": " << describe(c, tol);
    }
  };
  {
    kiln::testing::EmulatedDevice device(module);
    auto model = runtime::cuda::CudaModel::load(device, spec, error);
    ASSERT_NE(model, nullptr) << error;
    for (const auto &got : runAll(*model, 3))
      expectWanted(got);
    EXPECT_EQ(device.graphsRecorded, 1);
    EXPECT_EQ(device.graphsLaunched, 3);
    EXPECT_EQ(model->graphNote(),
              "a CUDA graph of " + std::to_string(spec.steps.size()) + " steps");
    model->useGraphs(false);
    expectWanted(runAll(*model, 1).front());
    EXPECT_EQ(device.graphsLaunched, 3);
    EXPECT_EQ(model->graphNote(), "steps one by one (no CUDA graph)");
  }
  {
    NoGraphs device(module);
    auto model = runtime::cuda::CudaModel::load(device, spec, error);
    ASSERT_NE(model, nullptr) << error;
    for (const auto &got : runAll(*model, 2))
      expectWanted(got);
    EXPECT_EQ(model->graphNote(),
              "steps one by one: recording a CUDA graph failed (cuStreamBeginCapture: operation "
              "not permitted when stream is capturing)");
  }
}

/// Loading `path` fails with an error naming it and holding `why`.
void expectLoadError(const fs::path &path, const std::string &why) {
  SCOPED_TRACE(why);
  CudaArtifact a;
  std::string error;
  EXPECT_FALSE(runtime::cuda::loadCudaArtifact(path, a, error)) << path;
  EXPECT_NE(error.find("CUDA artifact '" + path.string() + "'"), std::string::npos) << error;
  EXPECT_NE(error.find(why), std::string::npos) << error;
}

TEST(CudaArtifactTest, EveryDamageIsOneErrorNamingTheFile) {
  Fixture f = compileModel();
  ASSERT_FALSE(HasFailure());
  const fs::path path = scratch("good.kiln");
  std::string error;
  ASSERT_TRUE(runtime::cuda::saveCudaArtifact(artifactOf(f), path, error)) << error;
  const std::string bytes = readBytes(path);
  const fs::path bad = scratch("bad.kiln");
  // Cut at every 97th byte, and just short of the end.
  for (size_t n = 0; n < bytes.size(); n += n < 256 ? 7 : 997) {
    writeBytes(bad, bytes.substr(0, n));
    CudaArtifact a;
    EXPECT_FALSE(runtime::cuda::loadCudaArtifact(bad, a, error)) << "cut at " << n;
  }
  writeBytes(bad, bytes.substr(0, bytes.size() - 1));
  expectLoadError(bad, "truncated");
  // Any one byte changed, past the magic and the format.
  for (size_t at = 16; at < bytes.size(); at += at < 4096 ? 13 : 1531) {
    std::string b = bytes;
    b[at] = static_cast<char>(b[at] ^ 0x20);
    writeBytes(bad, b);
    CudaArtifact a;
    EXPECT_FALSE(runtime::cuda::loadCudaArtifact(bad, a, error)) << "byte " << at;
  }
  {
    std::string b = bytes;
    b[8] = static_cast<char>(b[8] + 1); // the format version
    writeBytes(bad, b);
    expectLoadError(bad, "format version 2; this Kiln (");
  }
  {
    std::string b = bytes;
    b[0] = 'X';
    writeBytes(bad, b);
    expectLoadError(bad, "not a Kiln CUDA artifact (no KILNGPU magic)");
  }
  expectLoadError(scratch("missing.kiln"), "cannot open");
  // Metadata that lies, written with a valid frame.
  auto lie = [&](const std::function<void(CudaArtifact &)> &edit, const std::string &why) {
    CudaArtifact a = artifactOf(f);
    edit(a);
    ASSERT_TRUE(runtime::cuda::saveCudaArtifact(a, bad, error)) << error;
    expectLoadError(bad, why);
  };
  using Role = CudaModelSpec::Buffer::Role;
  auto firstOf = [](CudaArtifact &a, Role r) -> CudaModelSpec::Buffer & {
    for (auto &b : a.spec.buffers)
      if (b.role == r)
        return b;
    return a.spec.buffers.front();
  };
  lie([&](CudaArtifact &a) { firstOf(a, Role::Temp).offset = a.spec.arenaBytes; },
      "ends past the arena");
  lie(
      [&](CudaArtifact &a) { // inside the arena, 4 bytes past a multiple of 16
        CudaModelSpec::Buffer &b = firstOf(a, Role::Temp);
        b.offset = (a.spec.arenaBytes - b.bytes) / 16 * 16 - 12;
      },
      "not a multiple of 16");
  lie([&](CudaArtifact &a) { firstOf(a, Role::Input).bytes += 4; }, "bytes for its type's");
  lie([&](CudaArtifact &a) { firstOf(a, Role::Output).index = 7; }, "is port 7 of 4");
  lie([&](CudaArtifact &a) { a.spec.steps.front().buffers.push_back(99); }, "names buffer 99");
  lie(
      [&](CudaArtifact &a) {
        for (auto &st : a.spec.steps)
          if (st.kind == CudaModelSpec::Step::Kind::Kernel) {
            st.block = 4096;
            break;
          }
      },
      "blocks of 4096 threads");
  lie([&](CudaArtifact &a) { a.spec.numInputs = 4; }, "an input or output has no buffer");
  lie(
      [&](CudaArtifact &a) {
        a.spec.image.clear();
        a.spec.ptx.clear();
      },
      "it holds no module");
  fs::remove_all(path.parent_path());
}

/// The emulated device, claiming another compute capability.
class OtherGpu final : public kiln::testing::EmulatedDevice {
public:
  OtherGpu(std::shared_ptr<kiln::testing::EmulatedModule> module, int cc)
      : EmulatedDevice(std::move(module)), cc_(cc) {}
  const std::string &name() const override { return name_; }
  int computeCapability() const override { return cc_; }
  std::unique_ptr<runtime::cuda::Module> loadModule(const std::string &image,
                                                    std::string &e) override {
    loaded = image;
    return EmulatedDevice::loadModule(image, e);
  }
  std::string loaded;

private:
  int cc_;
  std::string name_ = "a GPU";
};

TEST(CudaArtifactTest, AnotherComputeCapabilityGetsThePtxOrAnError) {
  Fixture f = compileModel();
  ASSERT_FALSE(HasFailure());
  std::string error;
  auto module = emulatedModuleOf(f, "cc", error);
  ASSERT_NE(module, nullptr) << error;
  OtherGpu same(module, 90), later(module, 100), earlier(module, 80);
  auto m = runtime::cuda::CudaModel::load(same, f.compiled.spec, error);
  ASSERT_NE(m, nullptr) << error;
  EXPECT_EQ(m->imageUsed(), "CUBIN for sm_90");
  EXPECT_EQ(same.loaded, f.compiled.spec.image);
  m = runtime::cuda::CudaModel::load(later, f.compiled.spec, error);
  ASSERT_NE(m, nullptr) << error;
  EXPECT_EQ(m->imageUsed(), "PTX for sm_90");
  EXPECT_EQ(later.loaded, f.compiled.spec.ptx);
  m = runtime::cuda::CudaModel::load(earlier, f.compiled.spec, error);
  EXPECT_EQ(m, nullptr);
  EXPECT_EQ(error, "the model was compiled for sm_90 and a GPU is sm_80: compile it with "
                   "--cuda-arch sm_80");
  fs::remove_all(scratch("cc").parent_path());
}

} // namespace
