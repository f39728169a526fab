//===- CudaModelTest.cpp - Whole models compiled for CUDA -----------------===//
//
// compileCudaModel (codegen/CudaProgram.h) and runtime::cuda::CudaModel:
// models made of kernels compiled for a CUDA device, run on the host
// emulation of one (Emulation.h) against the reference interpreter, the
// arena of the memory plan included; library ops refused by name; and a
// machine without a GPU says so in one sentence.
//
//===----------------------------------------------------------------------===//
#include "codegen/CudaProgram.h"
#include "ir/Compare.h"
#include "ir/Interpreter.h"
#include "ir/Parser.h"
#include "tests/unit/cuda/Emulation.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <random>

namespace {

using namespace kiln;
namespace fs = std::filesystem;

std::unique_ptr<Module> parse(const char *text) {
  DiagnosticEngine diag;
  auto m = parseModule(text, diag);
  EXPECT_TRUE(m.succeeded());
  return m.succeeded() ? std::move(*m) : nullptr;
}

/// `g` compiled for CUDA and run on the emulated device; its outputs.
std::vector<Tensor> runEmulated(const Graph &g, const std::vector<Tensor> &inputs,
                                codegen::CudaCompiled *compiledOut,
                                const codegen::CompileOptions &options) {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collect(diag);
  auto compiled = codegen::compileCudaModel(g, options, codegen::cuda::kDefaultCudaArch, diag);
  EXPECT_TRUE(compiled.succeeded()) << collect.str();
  if (failed(compiled))
    return {};
  // A folder per call: a library loaded from a path stays loaded, and
  // dlopen of the same path would give the first call's kernels.
  static int calls = 0;
  const fs::path dir = fs::temp_directory_path() / ("kiln-cuda-model-" + std::to_string(getpid()) +
                                                    "-" + g.name() + "-" + std::to_string(++calls));
  std::vector<Tensor> outputs;
  std::string error;
  EXPECT_TRUE(kiln::testing::runEmulatedModel(*compiled, inputs, outputs, dir, error)) << error;
  if (compiledOut)
    *compiledOut = std::move(*compiled);
  return outputs;
}

/// `text`'s graph on the emulated device equals the interpreter within
/// `tol`, on random inputs drawn with `seed`.
void expectAsInterpreter(const char *text, unsigned seed, const Tolerance &tol,
                         codegen::CudaCompiled *compiled = nullptr,
                         const codegen::CompileOptions &options = {}) {
  auto m = parse(text);
  ASSERT_NE(m, nullptr);
  const Graph &g = *m->graphs().front();
  const std::vector<Tensor> inputs = kiln::testing::randomInputs(g, seed);
  DiagnosticEngine diag;
  auto want = interpret(g, inputs, diag);
  ASSERT_TRUE(want.succeeded());
  const std::vector<Tensor> got = runEmulated(g, inputs, compiled, options);
  ASSERT_EQ(got.size(), want->size());
  for (size_t o = 0; o < got.size(); ++o) {
    const Comparison c = compareTensors(got[o], (*want)[o], tol);
    EXPECT_TRUE(c.ok()) << "output " << o << ": " << describe(c, tol);
  }
}

/// Compiling `text`'s graph for CUDA fails with a message holding `why`.
void expectRefused(const char *text, const std::string &why) {
  auto m = parse(text);
  ASSERT_NE(m, nullptr);
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collect(diag);
  auto compiled = codegen::compileCudaModel(*m->graphs().front(), {}, 90, diag);
  EXPECT_TRUE(failed(compiled));
  EXPECT_NE(collect.str().find(why), std::string::npos) << collect.str();
}

const char *kBlock = R"(
graph @block(%x: f32[8,300], %y: f32[8,300], %z: f32[2,3000], %u: f32[8,4]) -> (f32[8,300], f32[2,1], f32[300,8], f32[8,600], f32[8,4]) {
  %w = constant dense<[0.5, -1.0, 2.0, 0.25]> : f32[4]
  %a = add(%x, %y) : f32[8,300]
  %t = tanh(%a) : f32[8,300]
  %s = softmax(%t) : f32[8,300]
  %r = reduce_sum(%z) {axes = [1]} : f32[2,1]
  %p = transpose(%s) {perm = [1, 0]} : f32[300,8]
  %c = concat(%s, %x) {axis = 1} : f32[8,600]
  %q = mul(%u, %w) : f32[8,4]
  return %s, %r, %p, %c, %q
}
)";

TEST(CudaModelTest, RunsOnTheEmulatedDeviceAsTheInterpreter) {
  codegen::CudaCompiled compiled;
  expectAsInterpreter(kBlock, 3, Tolerance{1e-5, 1e-6}, &compiled);
  if (HasFatalFailure())
    return;
  // One arena for inputs, outputs and intermediates, no larger than their
  // sum; the constant uploaded on its own.
  uint64_t sum = 0;
  int constants = 0;
  for (const auto &b : compiled.spec.buffers) {
    if (b.role == runtime::cuda::CudaModelSpec::Buffer::Role::Constant)
      ++constants;
    else
      sum += (b.bytes + 63) / 64 * 64;
  }
  EXPECT_LE(compiled.spec.arenaBytes, sum);
  EXPECT_GT(compiled.spec.arenaBytes, 0u);
  EXPECT_EQ(constants, 1);
  EXPECT_FALSE(compiled.spec.image.empty());
}

// Attention and an MLP: matrix products (decomposed into one reduction
// kernel each) between softmax, layer norm, gelu and transposes.
const char *kAttention = R"(
graph @attention(%x: f32[2,8,16], %wq: f32[16,16], %wk: f32[16,16], %wv: f32[16,16], %w1: f32[24,16], %b1: f32[24], %g: f32[16], %be: f32[16]) -> (f32[2,8,16], f32[16,24]) {
  %q = matmul(%x, %wq) : f32[2,8,16]
  %k = matmul(%x, %wk) : f32[2,8,16]
  %v = matmul(%x, %wv) : f32[2,8,16]
  %kt = transpose(%k) {perm = [0, 2, 1]} : f32[2,16,8]
  %s = matmul(%q, %kt) : f32[2,8,8]
  %p = softmax(%s) : f32[2,8,8]
  %o = matmul(%p, %v) : f32[2,8,16]
  %r = add(%o, %x) : f32[2,8,16]
  %n = layer_norm(%r, %g, %be) {axis = -1} : f32[2,8,16]
  %h = gemm(%wq, %w1, %b1) {trans_b = true} : f32[16,24]
  %a = gelu(%h) : f32[16,24]
  return %n, %a
}
)";

/// The cuBLASLt calls of `compiled`'s product steps (GemmCall::str).
std::vector<std::string> gemmCalls(const codegen::CudaCompiled &compiled) {
  std::vector<std::string> calls;
  for (const auto &step : compiled.spec.steps)
    if (step.kind == runtime::cuda::CudaModelSpec::Step::Kind::Gemm)
      calls.push_back(step.gemm.str());
  return calls;
}

TEST(CudaModelTest, MatrixProductsRunThroughCublasLt) {
  // Sums over K in another order than the reference's: the matrix
  // products' relative tolerance (docs/NUMERICS.md). The emulated device
  // runs each call as its GemmCall says (cuBLASLt's layouts are the GPU
  // check's: Note [Row-major products in cuBLASLt]).
  codegen::CudaCompiled compiled;
  expectAsInterpreter(kAttention, 5, Tolerance{1e-4, 1e-4}, &compiled);
  // x @ w: batch folded into rows; q @ k^T and p @ v: two products, the
  // second with its residual x as C.
  EXPECT_EQ(
      gemmCalls(compiled),
      (std::vector<std::string>{"f32 16x16x16", "f32 16x16x16", "f32 16x16x16", "f32 [2] 8x8x16",
                                "f32 [2] 8x16x8 + C", "f32 16x24x16 (B^T) + bias"}));
  EXPECT_TRUE(compiled.productsAsKernels.empty()) << compiled.productsAsKernels;
}

TEST(CudaModelTest, MatrixProductsRunAsKernelsWithoutLibraries) {
  codegen::CompileOptions options;
  options.useLibraries = false;
  codegen::CudaCompiled compiled;
  expectAsInterpreter(kAttention, 5, Tolerance{1e-4, 1e-4}, &compiled, options);
  EXPECT_TRUE(gemmCalls(compiled).empty());
  EXPECT_NE(compiled.productsAsKernels.find("--no-libraries"), std::string::npos);
}

// Every form of a product's call: batch dims on one side (a stride of 0),
// transposes, alpha and beta, C the result's shape, a bias row [1, N], C
// unread (beta 0).
TEST(CudaModelTest, EveryFormOfAProductsCallRunsAsTheInterpreter) {
  codegen::CudaCompiled compiled;
  expectAsInterpreter(R"(
graph @forms(%a: f32[5,7], %b: f32[3,7,4], %c: f32[7,5], %d: f32[4,7], %e: f32[5,4], %r: f32[1,4], %x: f32[2,3,6], %y: f32[2,6,2]) -> (f32[3,5,4], f32[5,4], f32[5,4], f32[5,4], f32[2,3,2]) {
  %p = matmul(%a, %b) : f32[3,5,4]
  %g1 = gemm(%c, %d, %e) {alpha = 0.5, beta = -2.0, trans_a = true, trans_b = true} : f32[5,4]
  %g2 = gemm(%a, %d, %r) {trans_b = true} : f32[5,4]
  %g3 = gemm(%a, %d, %e) {beta = 0.0, trans_b = true} : f32[5,4]
  %q = matmul(%x, %y) : f32[2,3,2]
  return %p, %g1, %g2, %g3, %q
}
)",
                      11, Tolerance{1e-5, 1e-5}, &compiled);
  EXPECT_EQ(
      gemmCalls(compiled),
      (std::vector<std::string>{"f32 [3] 5x4x7", "f32 5x4x7 (A^T, B^T) + C",
                                "f32 5x4x7 (B^T) + bias", "f32 5x4x7 (B^T)", "f32 [2] 3x2x6"}));
}

// Note [Vectorized pointwise kernels]: a pointwise kernel over rows of a
// multiple of 4 whose stores are unit-stride takes four points a thread,
// its unit-stride 4-byte loads one 128-bit load each (broadcast rows too),
// the others (a column broadcast, a transpose's gather, f16, i64) one per
// point; an odd row length or an f16 store keeps the scalar form. Every
// value is the scalar form's.
TEST(CudaModelTest, PointwiseKernelsTakeFourPointsAThread) {
  const char *text = R"(
graph @quads(%x: f32[6,8,12], %y: f32[6,8,12], %b: f32[12], %c: f32[6,8,1], %n: i32[6,8,12], %h: f16[6,8,12], %k: i64[6,8,12], %u: f32[5,7]) -> (f32[6,8,12], i32[6,8,12], f32[6,12,8], f16[6,8,12], f32[5,7]) {
  %a = add(%x, %y) : f32[6,8,12]
  %m = mul(%a, %b) : f32[6,8,12]
  %s = sub(%m, %c) : f32[6,8,12]
  %hc = cast(%h) {to = f32} : f32[6,8,12]
  %kc = cast(%k) {to = f32} : f32[6,8,12]
  %e = add(%s, %hc) : f32[6,8,12]
  %r = add(%e, %kc) : f32[6,8,12]
  %i = mul(%n, %n) : i32[6,8,12]
  %t = transpose(%r) {perm = [0, 2, 1]} : f32[6,12,8]
  %hh = add(%h, %h) : f16[6,8,12]
  %v = exp(%u) : f32[5,7]
  return %r, %i, %t, %hh, %v
}
)";
  codegen::CudaCompiled compiled;
  expectAsInterpreter(text, 31, Tolerance{1e-6, 1e-6}, &compiled);
  const std::string &src = compiled.program.source;
  size_t quads = 0;
  for (size_t at = 0; (at = src.find("4 points a thread", at)) != std::string::npos; ++at)
    ++quads;
  // r (with x, y, b as 128-bit loads; c, h, k per point), i, and t (its
  // stores unit-stride, its loads gathered); not the f16 hh or the odd u.
  EXPECT_EQ(quads, 3u) << src;
  EXPECT_NE(src.find("*reinterpret_cast<const kiln_vec4<int> *>(in"), std::string::npos) << src;
  size_t floatLoads = 0;
  for (size_t at = 0;
       (at = src.find("*reinterpret_cast<const kiln_vec4<float> *>(in", at)) != std::string::npos;
       ++at)
    ++floatLoads;
  EXPECT_EQ(floatLoads, 3u) << src;
}

// A product's one user adding a tensor of its type (a residual) is the
// call's C, D = A B + R, whichever side of the add it is on: batched, with
// the batch folded into rows (C folded alike), a gemm's bias row beside
// it. A gemm whose own C is read, a residual that broadcasts, and a
// product with a second user keep the add a kernel.
TEST(CudaModelTest, AResidualAddIsTheProductsC) {
  codegen::CudaCompiled compiled;
  expectAsInterpreter(R"(
graph @residual(%a: f32[3,5,7], %b: f32[3,7,4], %w: f32[7,4], %r: f32[3,5,4], %c: f32[5,7], %d: f32[4,7], %bias: f32[4], %e: f32[5,4], %row: f32[4], %b2: f32[3,7,4]) -> (f32[3,5,4], f32[3,5,4], f32[5,4], f32[5,4], f32[5,4], f32[3,5,4], f32[3,5,4]) {
  %p = matmul(%a, %b) : f32[3,5,4]
  %y1 = add(%p, %r) : f32[3,5,4]
  %q = matmul(%a, %w) : f32[3,5,4]
  %y2 = add(%r, %q) : f32[3,5,4]
  %g = gemm(%c, %d, %bias) {trans_b = true} : f32[5,4]
  %y3 = add(%g, %e) : f32[5,4]
  %h = gemm(%c, %d, %e) {beta = 0.5, trans_b = true} : f32[5,4]
  %y4 = add(%h, %e) : f32[5,4]
  %s = matmul(%c, %w) : f32[5,4]
  %y5 = add(%s, %row) : f32[5,4]
  %t = matmul(%a, %b2) : f32[3,5,4]
  %y6 = add(%t, %r) : f32[3,5,4]
  %y7 = mul(%t, %r) : f32[3,5,4]
  return %y1, %y2, %y3, %y4, %y5, %y6, %y7
}
)",
                      29, Tolerance{1e-5, 1e-5}, &compiled);
  EXPECT_EQ(
      gemmCalls(compiled),
      (std::vector<std::string>{"f32 [3] 5x4x7 + C", "f32 15x4x7 + C", "f32 5x4x7 (B^T) + C + bias",
                                "f32 5x4x7 (B^T) + C", "f32 5x4x7", "f32 [3] 5x4x7"}));
  // One step per call, and the kernels of y4, y5, y6 and y7.
  size_t kernels = 0;
  for (const auto &step : compiled.spec.steps)
    kernels += step.kind == runtime::cuda::CudaModelSpec::Step::Kind::Kernel;
  EXPECT_EQ(kernels, 4u);
}

// A product no call takes (batch dims that broadcast against each other, a
// C that is a column) makes every product of the model generated code,
// saying which and why.
TEST(CudaModelTest, ProductsNoCallTakesAreKernels) {
  codegen::CudaCompiled compiled;
  expectAsInterpreter(R"(
graph @mixed(%a: f32[2,1,3,4], %b: f32[1,3,4,5], %c: f32[3,4], %d: f32[4,2], %e: f32[3,1]) -> (f32[2,3,3,5], f32[3,2]) {
  %p = matmul(%a, %b) : f32[2,3,3,5]
  %g = gemm(%c, %d, %e) : f32[3,2]
  return %p, %g
}
)",
                      13, Tolerance{1e-4, 1e-4}, &compiled);
  EXPECT_TRUE(gemmCalls(compiled).empty());
  EXPECT_NE(compiled.productsAsKernels.find("'matmul' (p): its operands' batch dims ([2,1,3,4] @ "
                                            "[1,3,4,5]) broadcast against each other"),
            std::string::npos)
      << compiled.productsAsKernels;
  expectAsInterpreter(R"(
graph @f64(%a: f64[3,4], %b: f64[4,2]) -> (f64[3,2]) {
  %p = matmul(%a, %b) : f64[3,2]
  return %p
}
)",
                      14, Tolerance{1e-12, 1e-12}, &compiled);
  EXPECT_TRUE(gemmCalls(compiled).empty());
  EXPECT_NE(compiled.productsAsKernels.find("cuBLASLt runs f32 products here, not f64"),
            std::string::npos)
      << compiled.productsAsKernels;
}

// Zero-sized tensors: a group of empty tensors has no step; the other
// outputs are right (an empty buffer has no memory of its own in the
// arena, and nothing writes it). A non-empty result of an empty operand
// is refused by name.
TEST(CudaModelTest, EmptyTensorsWriteNothing) {
  expectAsInterpreter(R"(
graph @empty(%x: f32[4,0], %y: f32[4,5]) -> (f32[4,0], f32[4,5], f32[0,5]) {
  %a = relu(%x) : f32[4,0]
  %b = neg(%y) : f32[4,5]
  %z = slice(%y) {starts = [4], ends = [4], axes = [0]} : f32[0,5]
  %e = exp(%z) : f32[0,5]
  return %a, %b, %e
}
)",
                      9, Tolerance{0, 0});
}

TEST(CudaModelTest, SumsOverAnEmptyAxisAreRefusedByName) {
  expectRefused(R"(
graph @sum(%x: f32[4,0]) -> (f32[4,1]) {
  %s = reduce_sum(%x) {axes = [1]} : f32[4,1]
  return %s
}
)",
                "the CUDA backend cannot run 'reduce_sum' (s) yet: it reduces a tensor with no "
                "elements");
}

/// The cuDNN calls of `compiled`'s steps (ConvCall::str, PoolCall::str).
std::vector<std::string> cudnnCalls(const codegen::CudaCompiled &compiled) {
  using Kind = runtime::cuda::CudaModelSpec::Step::Kind;
  std::vector<std::string> calls;
  for (const auto &step : compiled.spec.steps)
    if (step.kind == Kind::Conv)
      calls.push_back(step.conv.str());
    else if (step.kind == Kind::Pool)
      calls.push_back(step.pool.str());
  return calls;
}

// Convolutions (bias, strides, pads, dilations, groups, 1-D) and pools
// (max, average with and without the pads counted, global) as cuDNN calls,
// the kernels between them generated; the emulated device runs each call
// as its ConvCall or PoolCall says.
TEST(CudaModelTest, ConvolutionsAndPoolsRunThroughCudnn) {
  codegen::CudaCompiled compiled;
  expectAsInterpreter(R"(
graph @cnn(%x: f32[2,4,9,9], %w: f32[6,2,3,3], %b: f32[6], %v: f32[3,4,5], %s: f32[1,4,11]) -> (f32[2,6,2,3], f32[2,6,3,4], f32[2,6,1,1], f32[1,3,4], f32[2,6,4,4]) {
  %c = conv(%x, %w, %b) {strides = [2, 2], pads = [1, 1, 1, 1], dilations = [1, 2], group = 2} : f32[2,6,5,4]
  %r = relu(%c) : f32[2,6,5,4]
  %m = max_pool(%r) {kernel = [2, 2], strides = [2, 1]} : f32[2,6,2,3]
  %a = avg_pool(%c) {kernel = [3, 2], strides = [1, 1], pads = [1, 0, 1, 0]} : f32[2,6,5,3]
  %p = avg_pool(%a) {kernel = [2, 2], pads = [1, 1, 1, 1], strides = [2, 1], count_include_pad = true} : f32[2,6,3,4]
  %g = global_avg_pool(%c) : f32[2,6,1,1]
  %d = conv(%s, %v) {strides = [2], pads = [0, 0]} : f32[1,3,4]
  %q = max_pool(%x) {kernel = [3, 3], strides = [2, 2], ceil_mode = true} : f32[2,4,4,4]
  %t = conv(%q, %w) {group = 2, pads = [1, 1, 1, 1]} : f32[2,6,4,4]
  return %m, %p, %g, %d, %t
}
)",
                      17, Tolerance{1e-5, 1e-5}, &compiled);
  EXPECT_EQ(cudnnCalls(compiled),
            (std::vector<std::string>{
                "2x4x9x9 * 6x2x3x3, stride 2x2, pad 1x1, dilation 1x2, 2 groups + bias",
                "max 2x2 of 2x6x5x4, stride 2x1", "average 3x2 of 2x6x5x4, pad 1x0",
                "average (pads counted) 2x2 of 2x6x5x3, stride 2x1, pad 1x1",
                "average 5x4 of 2x6x5x4", "1x4x1x11 * 3x4x1x5, stride 1x2",
                "max 3x3 of 2x4x9x9, stride 2x2", "2x4x4x4 * 6x2x3x3, pad 1x1, 2 groups"}));
}

// A conv whose one user is a relu: one cuDNN call (fused convolution, bias
// and activation), with its bias or a zero one; a relu after a product, or
// after a conv with other users, is a kernel. NaN stays NaN.
TEST(CudaModelTest, AConvsReluIsPartOfItsCall) {
  codegen::CudaCompiled compiled;
  expectAsInterpreter(R"(
graph @fused(%x: f32[2,3,6,6], %w: f32[4,3,3,3], %b: f32[4], %a: f32[5,6], %m: f32[6,2]) -> (f32[2,4,4,4], f32[2,4,4,4], f32[5,2], f32[2,4,6,6]) {
  %c = conv(%x, %w, %b) : f32[2,4,4,4]
  %r = relu(%c) : f32[2,4,4,4]
  %d = conv(%x, %w) : f32[2,4,4,4]
  %s = relu(%d) : f32[2,4,4,4]
  %p = matmul(%a, %m) : f32[5,2]
  %q = relu(%p) : f32[5,2]
  %e = conv(%x, %w) {pads = [1, 1, 1, 1]} : f32[2,4,6,6]
  %t = relu(%e) : f32[2,4,6,6]
  %u = add(%t, %e) : f32[2,4,6,6]
  return %r, %s, %q, %u
}
)",
                      23, Tolerance{1e-5, 1e-5}, &compiled);
  EXPECT_EQ(cudnnCalls(compiled),
            (std::vector<std::string>{"2x3x6x6 * 4x3x3x3 + bias, relu", "2x3x6x6 * 4x3x3x3, relu",
                                      "2x3x6x6 * 4x3x3x3, pad 1x1"}));
}

// A conv's residual add, with or without a relu after it and on either
// side of the add, is cuDNN's z: relu(conv + bias + z) in one call
// (cudnnConvolutionBiasActivationForward), or a conv and two tensor adds
// without the relu. A broadcast operand, or an add after the relu, stays a
// kernel.
TEST(CudaModelTest, AConvsResidualIsPartOfItsCall) {
  codegen::CudaCompiled compiled;
  expectAsInterpreter(R"(
graph @residual(%x: f32[2,3,6,6], %w: f32[4,3,3,3], %w2: f32[4,3,3,3], %w3: f32[4,3,3,3], %w4: f32[4,4,3,3], %b: f32[4], %r: f32[2,4,4,4], %s: f32[2,4,4,4], %c: f32[4,1,1]) -> (f32[2,4,4,4], f32[2,4,4,4], f32[2,4,4,4], f32[2,4,4,4], f32[2,4,4,4]) {
  %c1 = conv(%x, %w, %b) : f32[2,4,4,4]
  %a1 = add(%c1, %r) : f32[2,4,4,4]
  %y1 = relu(%a1) : f32[2,4,4,4]
  %c2 = conv(%x, %w) : f32[2,4,4,4]
  %y2 = add(%s, %c2) : f32[2,4,4,4]
  %c3 = conv(%x, %w2, %b) : f32[2,4,4,4]
  %y3 = add(%c3, %r) : f32[2,4,4,4]
  %c4 = conv(%x, %w3) : f32[2,4,4,4]
  %a4 = add(%c4, %c) : f32[2,4,4,4]
  %y4 = relu(%a4) : f32[2,4,4,4]
  %c5 = conv(%r, %w4) {pads = [1, 1, 1, 1]} : f32[2,4,4,4]
  %t5 = relu(%c5) : f32[2,4,4,4]
  %y5 = add(%t5, %s) : f32[2,4,4,4]
  return %y1, %y2, %y3, %y4, %y5
}
)",
                      37, Tolerance{1e-5, 1e-5}, &compiled);
  EXPECT_EQ(cudnnCalls(compiled),
            (std::vector<std::string>{"2x3x6x6 * 4x3x3x3 + bias + residual, relu",
                                      "2x3x6x6 * 4x3x3x3 + residual",
                                      "2x3x6x6 * 4x3x3x3 + bias + residual", "2x3x6x6 * 4x3x3x3",
                                      "2x4x4x4 * 4x4x3x3, pad 1x1, relu"}));
  // A CUDA artifact keeps the residual.
  const std::vector<std::string> calls = cudnnCalls(compiled);
  const fs::path path =
      fs::temp_directory_path() / ("kiln-cuda-residual-" + std::to_string(getpid()) + ".kiln");
  std::string error;
  ASSERT_TRUE(runtime::cuda::saveCudaArtifact(
      codegen::cudaArtifactOf(std::move(compiled), "residual.kir"), path.string(), error))
      << error;
  runtime::cuda::CudaArtifact loaded;
  ASSERT_TRUE(runtime::cuda::loadCudaArtifact(path.string(), loaded, error)) << error;
  fs::remove(path);
  compiled.spec = std::move(loaded.spec);
  EXPECT_EQ(cudnnCalls(compiled), calls);
}

// Note [Pads cuDNN does not take]: a conv padded more on one side and a
// max pool whose ceil_mode window passes its end padding read an explicit
// pad kernel's result, the node keeping the pads both sides share.
TEST(CudaModelTest, PadsCudnnDoesNotTakeBecomeAnExplicitPad) {
  codegen::CudaCompiled compiled;
  expectAsInterpreter(R"(
graph @pads(%a: f32[1,2,8,8], %w: f32[3,2,3,3], %s: f32[1,4,11], %v: f32[3,4,5]) -> (f32[1,3,7,7], f32[1,2,4,4], f32[1,3,9]) {
  %c = conv(%a, %w) {pads = [1, 1, 0, 0]} : f32[1,3,7,7]
  %m = max_pool(%a) {kernel = [3, 3], strides = [2, 2], ceil_mode = true} : f32[1,2,4,4]
  %d = conv(%s, %v) {pads = [2, 0]} : f32[1,3,9]
  return %c, %m, %d
}
)",
                      19, Tolerance{1e-5, 1e-5}, &compiled);
  EXPECT_EQ(cudnnCalls(compiled),
            (std::vector<std::string>{"1x2x9x9 * 3x2x3x3", "max 3x3 of 1x2x9x9, stride 2x2",
                                      "1x4x1x13 * 3x4x1x5"}));
}

TEST(CudaModelTest, WhatCudnnCannotRunIsRefusedByName) {
  expectRefused(R"(
graph @cv3(%a: f32[1,2,4,4,4], %w: f32[3,2,3,3,3]) -> (f32[1,3,2,2,2]) {
  %c = conv(%a, %w) : f32[1,3,2,2,2]
  return %c
}
)",
                "the CUDA backend cannot run 'conv' (c): cuDNN runs 1-D and 2-D windows here, "
                "not 3-D");
  // An average pool's count of taps would count an explicit pad.
  expectRefused(R"(
graph @ceil(%a: f32[1,2,8,8]) -> (f32[1,2,4,4]) {
  %m = avg_pool(%a) {kernel = [3, 3], strides = [2, 2], ceil_mode = true} : f32[1,2,4,4]
  return %m
}
)",
                "the CUDA backend cannot run 'avg_pool' (m): its ceil_mode window past the "
                "input (cuDNN rounds the output size down)");
  expectRefused(R"(
graph @asym(%a: f32[1,2,8,8]) -> (f32[1,2,8,8]) {
  %m = avg_pool(%a) {kernel = [2, 2], pads = [1, 1, 0, 0]} : f32[1,2,8,8]
  return %m
}
)",
                "the CUDA backend cannot run 'avg_pool' (m): its pads [1,1,0,0] are not the same "
                "on both sides (cuDNN's)");
}

TEST(CudaModelTest, WithoutAGpuOpeningOneSaysWhy) {
  std::string error;
  auto device = runtime::cuda::CudaDevice::open(error);
  if (device) {
    EXPECT_GE(device->computeCapability(), 50);
    EXPECT_FALSE(device->name().empty());
    return;
  }
  EXPECT_TRUE(error.rfind("no CUDA driver on this machine", 0) == 0 ||
              error.rfind("no GPU on this machine", 0) == 0 ||
              error.rfind("the CUDA driver did not start", 0) == 0)
      << error;
}

} // namespace
