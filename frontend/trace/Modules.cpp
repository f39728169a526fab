//===- Modules.cpp - Building blocks with named parameters ------*- C++ -*-===//
//
// The Module base (parameter bookkeeping, names in the trace registry,
// .npy loading and saving) and the layers of include/kiln/Modules.h. Each
// layer's forward is a few eager calls located at the module's caller.
//
//===----------------------------------------------------------------------===//
#include "kiln/Modules.h"

#include "frontend/trace/Internal.h"
#include "ir/Npy.h"
#include "kiln/Trace.h"

#include <cmath>
#include <filesystem>
#include <mutex>

namespace kiln {

//===----------------------------------------------------------------------===//
// Initialization
//===----------------------------------------------------------------------===//

namespace {
struct SeedGenerator {
  std::mutex mutex;
  uint64_t base = 0;
  uint64_t counter = 0;
};

SeedGenerator &seedGenerator() {
  static SeedGenerator g;
  return g;
}

/// PyTorch's default for Linear and Conv weights and biases:
/// uniform(-1/sqrt(fanIn), 1/sqrt(fanIn)).
Tensor fanInUniform(std::vector<int64_t> shape, int64_t fanIn) {
  double bound = fanIn > 0 ? 1.0 / std::sqrt(static_cast<double>(fanIn)) : 0.0;
  return uniform(std::move(shape), -bound, bound, nextSeed());
}

[[noreturn]] void fail(const std::source_location &loc, std::string message) {
  Diagnostic d;
  d.loc = detail::toLocation(loc);
  d.message = std::move(message);
  throw Error({d});
}
} // namespace

void manualSeed(uint64_t seed) {
  SeedGenerator &g = seedGenerator();
  std::lock_guard<std::mutex> lock(g.mutex);
  g.base = seed;
  g.counter = 0;
}

uint64_t nextSeed() {
  SeedGenerator &g = seedGenerator();
  std::lock_guard<std::mutex> lock(g.mutex);
  return detail::randomBits(g.base ^ 0x6B696C6E, g.counter++);
}

namespace nn {

//===----------------------------------------------------------------------===//
// Module
//===----------------------------------------------------------------------===//

Module::~Module() {
  for (const Param &p : params_)
    forgetParameter(p.value);
}

Tensor Module::operator()(const Tensor &x, std::source_location loc) {
  Tensor y = forward(x, loc);
  if (!path_.empty())
    if (detail::TraceState *trace = detail::activeTrace())
      detail::nameTracedValue(*trace, y, path_);
  return y;
}

const Tensor &Module::registerParameter(std::string name, Tensor init) {
  nameParameter(init, name);
  params_.push_back(Param{std::move(name), std::move(init)});
  return params_.back().value;
}

void Module::registerModule(std::string name, Module &child) {
  children_.emplace_back(std::move(name), &child);
  publishNames("");
}

void Module::publishNames(const std::string &prefix) {
  path_ = prefix.empty() ? prefix : prefix.substr(0, prefix.size() - 1);
  for (const Param &p : params_)
    nameParameter(p.value, prefix + p.name);
  for (const auto &[name, child] : children_)
    child->publishNames(prefix + name + ".");
}

void Module::collect(const std::string &prefix,
                     std::vector<std::pair<std::string, Tensor>> &out) const {
  for (const Param &p : params_)
    out.emplace_back(prefix + p.name, p.value);
  for (const auto &[name, child] : children_)
    child->collect(prefix + name + ".", out);
}

std::vector<std::pair<std::string, Tensor>> Module::namedParameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", out);
  return out;
}

Tensor *Module::find(const std::string &name) {
  for (Param &p : params_)
    if (p.name == name)
      return &p.value;
  for (auto &[childName, child] : children_)
    if (name.size() > childName.size() + 1 && name.compare(0, childName.size(), childName) == 0 &&
        name[childName.size()] == '.')
      if (Tensor *t = child->find(name.substr(childName.size() + 1)))
        return t;
  return nullptr;
}

Tensor Module::parameter(const std::string &name) const {
  if (Tensor *t = const_cast<Module *>(this)->find(name))
    return *t;
  throw Error("module has no parameter '" + name + "'");
}

void Module::setParameter(const std::string &name, const Tensor &value) {
  Tensor *t = find(name);
  if (!t)
    throw Error("module has no parameter '" + name + "'");
  if (value.isNull() || value.type() != t->type())
    throw Error("parameter '" + name + "' expects " + t->str() + ", got " +
                (value.isNull() ? std::string("a null tensor") : value.str()));
  std::string registered = parameterName(*t);
  forgetParameter(*t);
  *t = value;
  nameParameter(*t, registered.empty() ? name : registered);
}

int64_t Module::numParameterElements() const {
  int64_t n = 0;
  for (const auto &[name, t] : namedParameters())
    n += t.numel();
  return n;
}

void Module::loadParameters(const std::string &dir) {
  std::vector<std::pair<std::string, Tensor>> loaded;
  std::vector<Diagnostic> errors;
  for (const auto &[name, current] : namedParameters()) {
    std::string path = (std::filesystem::path(dir) / (name + ".npy")).string();
    DiagnosticEngine diag;
    ScopedDiagnosticCollector collected(diag);
    if (!std::filesystem::exists(path)) {
      diag.emitError(Location()) << "parameter '" << name << "': no file '" << path << "'";
    } else {
      auto t = readNpy(path, diag);
      if (t.succeeded() && t->type() != current.type())
        diag.emitError(Location()) << "parameter '" << name << "' expects " << current.str()
                                   << ", got " << t->str() << " in '" << path << "'";
      else if (t.succeeded())
        loaded.emplace_back(name, t.take());
    }
    errors.insert(errors.end(), collected.diagnostics().begin(), collected.diagnostics().end());
  }
  if (!errors.empty())
    throw Error(std::move(errors));
  for (const auto &[name, t] : loaded)
    setParameter(name, t);
}

void Module::saveParameters(const std::string &dir) const {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw Error("cannot create directory '" + dir + "': " + ec.message());
  for (const auto &[name, t] : namedParameters()) {
    DiagnosticEngine diag;
    ScopedDiagnosticCollector collected(diag);
    if (failed(writeNpy((std::filesystem::path(dir) / (name + ".npy")).string(), t, diag)))
      throw Error(collected.diagnostics());
  }
}

//===----------------------------------------------------------------------===//
// Layers
//===----------------------------------------------------------------------===//

Linear::Linear(int64_t inFeatures, int64_t outFeatures, bool bias)
    : weight_(registerParameter("weight", fanInUniform({outFeatures, inFeatures}, inFeatures))) {
  if (bias)
    bias_ = &registerParameter("bias", fanInUniform({outFeatures}, inFeatures));
}

Tensor Linear::forward(const Tensor &x, const std::source_location &loc) {
  if (!x.isNull() && x.rank() == 2) {
    if (bias_)
      return gemm(x, weight_, *bias_, {.trans_b = true}, loc);
    return gemm(x, weight_, {.trans_b = true}, loc);
  }
  Tensor y = matmul(x, transpose(weight_, {.perm = {1, 0}}, loc), {}, loc);
  return bias_ ? add(y, *bias_, {}, loc) : y;
}

Conv2d::Conv2d(int64_t inChannels, int64_t outChannels, int64_t kernelSize, Conv2dOptions options)
    : options_(options),
      weight_(registerParameter(
          "weight",
          fanInUniform({outChannels, options.groups > 0 ? inChannels / options.groups : inChannels,
                        kernelSize, kernelSize},
                       (options.groups > 0 ? inChannels / options.groups : inChannels) *
                           kernelSize * kernelSize))) {
  int64_t fanIn = weight_.numel() / std::max<int64_t>(outChannels, 1);
  if (options.bias)
    bias_ = &registerParameter("bias", fanInUniform({outChannels}, fanIn));
}

Tensor Conv2d::forward(const Tensor &x, const std::source_location &loc) {
  int64_t s = options_.stride, p = options_.padding, d = options_.dilation;
  ConvAttrs attrs{
      .strides = {s, s}, .pads = {p, p, p, p}, .dilations = {d, d}, .group = options_.groups};
  if (bias_)
    return conv(x, weight_, *bias_, attrs, loc);
  return conv(x, weight_, attrs, loc);
}

BatchNorm2d::BatchNorm2d(int64_t channels, double epsilon)
    : epsilon_(epsilon), weight_(registerParameter("weight", ones({channels}))),
      bias_(registerParameter("bias", zeros({channels}))),
      mean_(registerParameter("running_mean", zeros({channels}))),
      var_(registerParameter("running_var", ones({channels}))) {}

Tensor BatchNorm2d::forward(const Tensor &x, const std::source_location &loc) {
  return batch_norm(x, weight_, bias_, mean_, var_, {.epsilon = epsilon_}, loc);
}

LayerNorm::LayerNorm(std::vector<int64_t> normalizedShape, double epsilon)
    : rank_(static_cast<int64_t>(normalizedShape.size())), epsilon_(epsilon),
      weight_(registerParameter("weight", ones(normalizedShape))),
      bias_(registerParameter("bias", zeros(normalizedShape))) {}

Tensor LayerNorm::forward(const Tensor &x, const std::source_location &loc) {
  return layer_norm(x, weight_, bias_, {.axis = -rank_, .epsilon = epsilon_}, loc);
}

Embedding::Embedding(int64_t numEmbeddings, int64_t dim)
    : weight_(registerParameter("weight", randn({numEmbeddings, dim}, nextSeed()))) {}

Tensor Embedding::forward(const Tensor &indices, const std::source_location &loc) {
  return gather(weight_, indices, {.axis = 0}, loc);
}

MultiheadAttention::MultiheadAttention(int64_t embedDim, int64_t numHeads)
    : embedDim_(embedDim), numHeads_(numHeads),
      // xavier_uniform over [3E, E], as PyTorch initializes in_proj_weight.
      inWeight_(registerParameter(
          "in_proj_weight",
          uniform({3 * embedDim, embedDim}, -std::sqrt(6.0 / static_cast<double>(4 * embedDim)),
                  std::sqrt(6.0 / static_cast<double>(4 * embedDim)), nextSeed()))),
      inBias_(registerParameter("in_proj_bias", zeros({3 * embedDim}))),
      outProj_(embedDim, embedDim) {
  if (numHeads <= 0 || embedDim % numHeads != 0)
    throw Error("MultiheadAttention: embedDim " + std::to_string(embedDim) +
                " is not divisible by numHeads " + std::to_string(numHeads));
  outProj_.setParameter("bias", zeros({embedDim}));
  registerModule("out_proj", outProj_);
}

Tensor MultiheadAttention::forward(const Tensor &x, const std::source_location &loc) {
  if (x.isNull() || x.rank() != 3 || x.dim(2) != embedDim_)
    fail(loc, "MultiheadAttention expects batch-first input [batch, seq, " +
                  std::to_string(embedDim_) + "], got " +
                  (x.isNull() ? std::string("a null tensor") : x.str()));
  int64_t b = x.dim(0), s = x.dim(1), h = numHeads_, d = embedDim_ / numHeads_;
  Tensor qkv =
      add(matmul(x, transpose(inWeight_, {.perm = {1, 0}}, loc), {}, loc), inBias_, {}, loc);
  std::vector<Tensor> parts = split(qkv, {.axis = -1, .num_outputs = 3}, loc);
  auto heads = [&](const Tensor &t) {
    return transpose(reshape(t, {.shape = {b, s, h, d}}, loc), {.perm = {0, 2, 1, 3}}, loc);
  };
  Tensor q = heads(parts[0]), k = heads(parts[1]), v = heads(parts[2]);
  Tensor scale = scalar(1.0 / std::sqrt(static_cast<double>(d)), x.dtype());
  Tensor scores =
      mul(matmul(q, transpose(k, {.perm = {0, 1, 3, 2}}, loc), {}, loc), scale, {}, loc);
  Tensor attn = matmul(softmax(scores, {.axis = -1}, loc), v, {}, loc);
  Tensor merged =
      reshape(transpose(attn, {.perm = {0, 2, 1, 3}}, loc), {.shape = {b, s, embedDim_}}, loc);
  return outProj_(merged, loc);
}

Tensor ReLU::forward(const Tensor &x, const std::source_location &loc) {
  return relu(x, {}, loc);
}

Tensor GELU::forward(const Tensor &x, const std::source_location &loc) {
  return gelu(x, {.approximate = approximate_}, loc);
}

Module &Sequential::add(std::string name, std::unique_ptr<Module> child) {
  Module &ref = *child;
  owned_.push_back(std::move(child));
  registerModule(std::move(name), ref);
  return ref;
}

Tensor Sequential::forward(const Tensor &x, const std::source_location &loc) {
  Tensor y = x;
  for (const auto &child : owned_)
    y = (*child)(y, loc);
  return y;
}

} // namespace nn
} // namespace kiln
