//===- ArtifactTest.cpp - .kiln artifacts: round trip and bad files -------===//
//
// A model with every kind of step (a oneDNN conv with a post-op, JIT
// kernels calling libmvec and the runtime's integer power) saved, loaded
// and run; the same executable saved twice gives the same bytes; and every
// way a file can be wrong (truncated anywhere, a flipped bit anywhere, a
// newer format, code for a CPU this one is not) is one error naming the
// file, never a crash or a run. The op matrix (OpMatrixTest.cpp) round-trips
// every op of the table that compiles (all but nonzero) at three CPU levels.
//
//===----------------------------------------------------------------------===//
#include "runtime/artifact/Artifact.h"
#include "codegen/Compiler.h"
#include "codegen/cpu/CpuTarget.h"
#include "ir/Parser.h"
#include "runtime/artifact/HostCpu.h"
#include "runtime/reference/ReferenceStep.h"
#include "tests/unit/compiler/ArtifactRoundTrip.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <random>
#include <sys/wait.h>

using namespace kiln;

namespace {

const char kModel[] = R"(
graph @g(%x: f32[1,4,9,9], %n: i64[37]) -> (f32[1,4,9,9], f32[1,4,9,9], i64[37]) {
  %w = constant dense<0.125> : f32[4,4,3,3]
  %b = constant dense<-0.25> : f32[4]
  %c = conv(%x, %w, %b) {pads = [1, 1, 1, 1]} : f32[1,4,9,9]
  %r = relu(%c) : f32[1,4,9,9]
  %e = exp(%x) : f32[1,4,9,9]
  %s = sigmoid(%e) : f32[1,4,9,9]
  %three = constant dense<3> : i64[]
  %p = pow(%n, %three) : i64[37]
  return %r, %s, %p
}
)";

struct Compiled {
  std::unique_ptr<Module> module;
  std::unique_ptr<runtime::Executable> exe;
  std::vector<Tensor> inputs, outputs;
};

Compiled compileModel(codegen::LibraryLayout layout = codegen::LibraryLayout::Plain,
                      bool useKernels = true) {
  Compiled c;
  DiagnosticEngine diag;
  auto m = parseModule(kModel, diag);
  EXPECT_TRUE(m.succeeded());
  c.module = m.take();
  codegen::CompileOptions opts;
  opts.threads = 1;
  opts.dnnlLayout = layout;
  opts.useKernels = useKernels;
  auto exe = codegen::compile(*c.module->graphs().front(), opts, diag);
  EXPECT_TRUE(exe.succeeded());
  c.exe = exe.take();
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-3.f, 3.f);
  Tensor x = Tensor::zeros(DType::F32, {1, 4, 9, 9});
  for (int64_t i = 0; i < x.numel(); ++i)
    x.mutableData<float>()[i] = u(rng);
  Tensor n = Tensor::zeros(DType::I64, {37});
  for (int64_t i = 0; i < n.numel(); ++i)
    n.mutableData<int64_t>()[i] = i - 18;
  c.inputs = {x, n};
  auto outs = codegen::runCompiled(*c.exe, c.inputs, diag);
  EXPECT_TRUE(outs.succeeded());
  c.outputs = outs.take();
  return c;
}

std::string tempPath(const std::string &stem) {
  const char *tmp = std::getenv("TMPDIR");
  return std::string(tmp && *tmp ? tmp : "/tmp") + "/kiln-artifact-test-" + stem + "-" +
         std::to_string(::getpid()) + ".kiln";
}

std::string readFile(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void writeFile(const std::string &path, const std::string &bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// Loading `path` in a child process: "" when it loaded, else its error. A
/// crash is reported as such (the point of the test: it must not happen).
std::string loadInChild(const std::string &path) {
  int pipeFd[2];
  if (pipe(pipeFd) != 0)
    return "pipe failed";
  pid_t pid = fork();
  if (pid == 0) {
    close(pipeFd[0]);
    std::unique_ptr<runtime::Executable> exe;
    runtime::Status st = runtime::loadArtifact(path, exe);
    std::string msg = st.ok() ? "" : st.error;
    (void)!write(pipeFd[1], msg.data(), msg.size());
    _exit(st.ok() ? 0 : 1);
  }
  close(pipeFd[1]);
  std::string msg;
  char buf[512];
  for (ssize_t n; (n = read(pipeFd[0], buf, sizeof(buf))) > 0;)
    msg.append(buf, static_cast<size_t>(n));
  close(pipeFd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status))
    return "CRASHED with signal " + std::to_string(WTERMSIG(status));
  if (WEXITSTATUS(status) != 0 && msg.empty())
    return "failed without a message";
  return msg;
}

TEST(ArtifactTest, RoundTripsEveryStepKind) {
  Compiled c = compileModel();
  std::string steps = c.exe->describe();
  EXPECT_NE(steps.find("onednn conv"), std::string::npos) << steps;
  EXPECT_NE(steps.find("kernel"), std::string::npos) << steps;
  kiln::testing::expectArtifactRoundTrip(*c.exe, c.inputs, c.outputs, "conv+exp+ipow");
  // Blocked layouts: reordered weights saved as step blobs.
  Compiled blocked = compileModel(codegen::LibraryLayout::Blocked);
  kiln::testing::expectArtifactRoundTrip(*blocked.exe, blocked.inputs, blocked.outputs,
                                         "blocked conv");
}

TEST(ArtifactTest, SavesIdenticalBytesAndDescribesItself) {
  Compiled c = compileModel();
  runtime::ArtifactInfo info;
  info.model = "g.kir";
  info.summary = "test";
  info.inputs.push_back({"x", DType::F32, {1, 4, 9, 9}, {"", "", "", ""}});
  const std::string a = tempPath("a"), b = tempPath("b");
  ASSERT_TRUE(runtime::saveArtifact(*c.exe, info, a).ok());
  Compiled again = compileModel();
  ASSERT_TRUE(runtime::saveArtifact(*again.exe, info, b).ok());
  EXPECT_EQ(readFile(a), readFile(b)) << "two compiles of one model gave different artifacts";
  EXPECT_TRUE(runtime::isArtifactFile(a));
  std::unique_ptr<runtime::Executable> exe;
  runtime::ArtifactInfo got;
  ASSERT_TRUE(runtime::loadArtifact(a, exe, &got).ok());
  EXPECT_EQ(got.model, "g.kir");
  EXPECT_EQ(got.kilnVersion, runtime::kilnVersion());
  EXPECT_EQ(got.target.requested, "native");
  ASSERT_EQ(got.inputs.size(), 1u);
  EXPECT_EQ(got.inputs[0].dims, (std::vector<int64_t>{1, 4, 9, 9}));
  EXPECT_GT(got.codeBytes, 0u);
  EXPECT_EQ(got.numSteps, c.exe->steps().size());
  std::remove(a.c_str());
  std::remove(b.c_str());
}

TEST(ArtifactTest, BadFilesGetOneErrorNeverACrash) {
  Compiled c = compileModel();
  const std::string good = tempPath("good"), bad = tempPath("bad");
  ASSERT_TRUE(runtime::saveArtifact(*c.exe, {}, good).ok());
  const std::string bytes = readFile(good);
  ASSERT_GT(bytes.size(), 8192u);
  auto expectError = [&](const std::string &content, const std::string &want,
                         const std::string &what) {
    writeFile(bad, content);
    std::string err = loadInChild(bad);
    EXPECT_NE(err.find(want), std::string::npos) << what << ": got '" << err << "'";
    EXPECT_NE(err.find(bad), std::string::npos) << what << ": the error names no file: " << err;
  };
  // Truncated: in the header, the metadata, the padding, the data, the end.
  for (size_t len : {size_t(0), size_t(7), size_t(63), size_t(64), size_t(200), size_t(4096),
                     bytes.size() / 2, bytes.size() - 1})
    expectError(bytes.substr(0, len), len < 64 ? "truncated" : "corrupt",
                "truncated to " + std::to_string(len));
  // A flipped bit in the metadata, the padding and the data.
  std::mt19937 rng(3);
  for (int k = 0; k < 24; ++k) {
    std::string flipped = bytes;
    size_t at = 64 + rng() % (bytes.size() - 64);
    flipped[at] = static_cast<char>(flipped[at] ^ (1 << (rng() % 8)));
    expectError(flipped, "checksum", "bit flip at " + std::to_string(at));
  }
  // The header: magic, format version, sizes.
  {
    std::string s = bytes;
    s[0] = 'X';
    expectError(s, "not a Kiln artifact", "magic");
    s = bytes;
    s[8] = 7;
    expectError(s, "format version 7", "format version");
    s = bytes;
    s[24] ^= 1;
    expectError(s, "corrupt", "metadata size");
  }
  std::remove(good.c_str());
  std::remove(bad.c_str());
}

TEST(ArtifactTest, RefusesCodeForAnotherCpu) {
  Compiled c = compileModel();
  // No CPU has both AMD's SSE4a and Intel's AMX.
  runtime::TargetInfo t = c.exe->target();
  t.requested = "imaginary";
  t.features += ",+sse4a,+amx-tile";
  c.exe->setTarget(t);
  const std::string path = tempPath("cpu");
  ASSERT_TRUE(runtime::saveArtifact(*c.exe, {}, path).ok());
  std::string err = loadInChild(path);
  EXPECT_NE(err.find("compiled for --cpu imaginary"), std::string::npos) << err;
  EXPECT_NE(err.find("needs CPU features this machine lacks"), std::string::npos) << err;
  std::remove(path.c_str());
}

TEST(ArtifactTest, EveryInstructionSetOfThisCpuIsOneTheLoaderChecks) {
  // The loader reads CPUID itself (no LLVM); a feature LLVM reports for
  // this CPU that its table lacks would refuse every native artifact here.
  DiagnosticEngine diag;
  auto native = codegen::cpu::resolveCpuTarget("native", diag);
  ASSERT_FALSE(failed(native));
  EXPECT_EQ(runtime::missingCpuFeatures(native->features), std::vector<std::string>{})
      << "CPU " << native->cpu << ": add the features to runtime/artifact/HostCpu.cpp";
}

TEST(ArtifactTest, SavesReferenceKernelFallbacks) {
  // Without kernels every kernel group runs on reference kernels: each is
  // saved as its one-node .kir graph and parsed again at load.
  Compiled c = compileModel(codegen::LibraryLayout::Plain, /*useKernels=*/false);
  std::string steps = c.exe->describe();
  EXPECT_NE(steps.find("reference exp"), std::string::npos) << steps;
  EXPECT_NE(steps.find("reference pow"), std::string::npos) << steps;
  kiln::testing::expectArtifactRoundTrip(*c.exe, c.inputs, c.outputs, "reference fallbacks");
}

TEST(ArtifactTest, DamagedReferenceStepsAreErrors) {
  Compiled c = compileModel(codegen::LibraryLayout::Plain, /*useKernels=*/false);
  const runtime::ExternStep *exp = nullptr;
  for (const runtime::Step &st : c.exe->steps())
    if (st.externStep && st.externStep->describe().rfind("reference exp", 0) == 0)
      exp = st.externStep.get();
  ASSERT_NE(exp, nullptr);
  runtime::SavedStep saved;
  std::string why;
  ASSERT_TRUE(exp->save(saved, why)) << why;
  EXPECT_EQ(saved.kind, runtime::ReferenceStep::kKind);
  const size_t bytes = 4 * 9 * 9 * sizeof(float);
  const size_t sizes[] = {bytes, bytes};
  ASSERT_TRUE(runtime::ReferenceStep::load(saved.payload, sizes, why)) << why;
  const size_t wrong[] = {bytes, bytes - 4};
  EXPECT_FALSE(runtime::ReferenceStep::load(saved.payload, wrong, why));
  EXPECT_NE(why.find("does not fit its buffer"), std::string::npos) << why;
  const size_t three[] = {bytes, bytes, bytes};
  EXPECT_FALSE(runtime::ReferenceStep::load(saved.payload, three, why));
  std::string renamed = saved.payload;
  renamed.replace(renamed.find("@reference_step"), 15, "@other_name____");
  for (const std::string &bad :
       {std::string("graph @reference_step("), std::string("\x01\x02 not kir"), renamed,
        saved.payload.substr(0, saved.payload.size() / 2)}) {
    EXPECT_FALSE(runtime::ReferenceStep::load(bad, sizes, why)) << bad;
    EXPECT_NE(why.find("damaged reference step"), std::string::npos) << why;
  }
}

/// A step without a saved form (ExternStep's default save()).
class UnsaveableStep final : public runtime::ExternStep {
public:
  std::string describe() const override { return "unsaveable"; }
  runtime::Status run(std::span<void *const>, const runtime::StepContext &) const override {
    return runtime::Status::success();
  }
};

TEST(ArtifactTest, AFailedSaveLeavesTheFileAlone) {
  runtime::Executable exe;
  int32_t x = exe.addInput(DType::F32, {4}, "x");
  int32_t y = exe.addTemp(DType::F32, {4}, "y");
  exe.addExternStep(std::make_shared<UnsaveableStep>(), {x, y}, 1);
  exe.setOutputs({y});
  ASSERT_TRUE(exe.finalize().ok());
  const std::string path = tempPath("unsaveable");
  std::ofstream(path) << "what the user had";
  runtime::Status st = runtime::saveArtifact(exe, {}, path);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.error.find("step 'unsaveable' cannot be saved"), std::string::npos) << st.error;
  EXPECT_EQ(readFile(path), "what the user had") << "a failed save overwrote the file";
  std::remove(path.c_str());
}

} // namespace
