//===- Modules.h - Building blocks with named parameters --------*- C++ -*-===//
//
// Layers written on the eager API, in the spirit of torch.nn, for inference:
//
//   kiln::manualSeed(0);
//   kiln::nn::Sequential mlp;
//   mlp.add<kiln::nn::Linear>("fc1", 784, 128);
//   mlp.add<kiln::nn::ReLU>("relu");
//   mlp.add<kiln::nn::Linear>("fc2", 128, 10);
//   mlp.loadParameters("weights/");          // weights/fc1.weight.npy, ...
//   kiln::Tensor y = mlp(x);
//
// Parameters are named by their path in the module tree, like PyTorch's
// state_dict keys ("fc1.weight", "blocks.0.attn.in_proj_weight"), and use
// PyTorch's layouts (Linear weight [out, in], Conv2d weight [out, in/groups,
// kh, kw]), so weights exported from PyTorch with numpy.save load as they
// are. Initialization is deterministic: each parameter draws its seed from a
// process-wide generator that manualSeed resets, in construction order.
//
// A module's ops are located at the call site of the module (`fc1(x)` in
// your file), which is where a traced graph points for them.
//
// Modules are neither copyable nor movable (a parent refers to its children
// by address). Errors throw kiln::Error.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kiln/Eager.h"

#include <deque>
#include <memory>
#include <source_location>
#include <string>
#include <utility>
#include <vector>

namespace kiln {

/// Resets the generator that initializes parameters.
void manualSeed(uint64_t seed);
/// The next seed of that generator (what a new parameter uses).
uint64_t nextSeed();

/// The building blocks live in kiln::nn, as in PyTorch (kiln::Module is the
/// IR's module of graphs).
namespace nn {

/// The base of all building blocks: one tensor in, one tensor out, a list of
/// named parameters and named child modules.
class Module {
public:
  Module() = default;
  Module(const Module &) = delete;
  Module &operator=(const Module &) = delete;
  virtual ~Module();

  /// Runs the module; its ops are located at the caller. While tracing,
  /// the result is named after the module's path ("fc1", "self_attn") when
  /// the module is a registered child (the outermost such module wins).
  Tensor operator()(const Tensor &x, std::source_location loc = std::source_location::current());
  /// What the module computes; `loc` is the call site to give its ops.
  virtual Tensor forward(const Tensor &x, const std::source_location &loc) = 0;

  /// All parameters of this module and its children, depth first in
  /// registration order, with their dotted names ("fc1.weight").
  std::vector<std::pair<std::string, Tensor>> namedParameters() const;
  /// The parameter named `name` (dotted path); throws kiln::Error when absent.
  Tensor parameter(const std::string &name) const;
  /// Replaces the parameter `name` by `value`, which must have its dtype and
  /// shape. The old tensor is not modified (graphs traced before keep it).
  void setParameter(const std::string &name, const Tensor &value);
  /// Total number of parameter elements.
  int64_t numParameterElements() const;

  /// Loads every parameter from `<dir>/<name>.npy`. Throws kiln::Error
  /// naming the file for a missing file, a malformed one, or a dtype/shape
  /// that differs from the parameter's; nothing is changed on error.
  void loadParameters(const std::string &dir);
  /// Writes every parameter to `<dir>/<name>.npy`, creating `dir`.
  void saveParameters(const std::string &dir) const;

protected:
  /// Adds a parameter; the returned reference stays valid for the module's
  /// lifetime and follows setParameter.
  const Tensor &registerParameter(std::string name, Tensor init);
  /// Adds a child whose parameters are prefixed by `name` + ".". The child
  /// must outlive this module's use of it (typically a member).
  void registerModule(std::string name, Module &child);

private:
  struct Param {
    std::string name;
    Tensor value;
  };
  /// Renames every parameter of this subtree in the trace registry (see
  /// nameParameter) under `prefix`, and records each module's path.
  void publishNames(const std::string &prefix);
  void collect(const std::string &prefix, std::vector<std::pair<std::string, Tensor>> &out) const;
  Tensor *find(const std::string &name);

  std::deque<Param> params_;
  std::vector<std::pair<std::string, Module *>> children_;
  /// The dotted path from the outermost module ("" for a root).
  std::string path_;
};

/// y = x W^T + b, with W [out, in] and b [out]; x has the features last.
class Linear : public Module {
public:
  Linear(int64_t inFeatures, int64_t outFeatures, bool bias = true);
  Tensor forward(const Tensor &x, const std::source_location &loc) override;
  const Tensor &weight() const { return weight_; }

private:
  const Tensor &weight_;
  const Tensor *bias_ = nullptr;
};

struct Conv2dOptions {
  int64_t stride = 1;
  int64_t padding = 0;
  int64_t dilation = 1;
  int64_t groups = 1;
  bool bias = true;
};

/// 2-D convolution over [N, C, H, W] with a square kernel.
class Conv2d : public Module {
public:
  Conv2d(int64_t inChannels, int64_t outChannels, int64_t kernelSize, Conv2dOptions options = {});
  Tensor forward(const Tensor &x, const std::source_location &loc) override;

private:
  Conv2dOptions options_;
  const Tensor &weight_;
  const Tensor *bias_ = nullptr;
};

/// Inference-mode batch normalization over the channels of [N, C, ...] with
/// the running statistics: parameters weight, bias, running_mean,
/// running_var (PyTorch's names).
class BatchNorm2d : public Module {
public:
  explicit BatchNorm2d(int64_t channels, double epsilon = 1e-5);
  Tensor forward(const Tensor &x, const std::source_location &loc) override;

private:
  double epsilon_;
  const Tensor &weight_, &bias_, &mean_, &var_;
};

/// Layer normalization over the last normalizedShape.size() dims, with
/// weight and bias of normalizedShape.
class LayerNorm : public Module {
public:
  explicit LayerNorm(std::vector<int64_t> normalizedShape, double epsilon = 1e-5);
  Tensor forward(const Tensor &x, const std::source_location &loc) override;

private:
  int64_t rank_;
  double epsilon_;
  const Tensor &weight_, &bias_;
};

/// Looks up rows of a [numEmbeddings, dim] table: i32/i64 indices of any
/// shape give [..., dim].
class Embedding : public Module {
public:
  Embedding(int64_t numEmbeddings, int64_t dim);
  Tensor forward(const Tensor &indices, const std::source_location &loc) override;

private:
  const Tensor &weight_;
};

/// Multi-head self-attention over batch-first [B, S, E] input (PyTorch's
/// nn.MultiheadAttention with batch_first=True, query = key = value, no
/// mask). Parameters: in_proj_weight [3E, E], in_proj_bias [3E],
/// out_proj.weight [E, E], out_proj.bias [E].
class MultiheadAttention : public Module {
public:
  MultiheadAttention(int64_t embedDim, int64_t numHeads);
  Tensor forward(const Tensor &x, const std::source_location &loc) override;

private:
  int64_t embedDim_, numHeads_;
  const Tensor &inWeight_, &inBias_;
  Linear outProj_;
};

/// max(x, 0).
class ReLU : public Module {
public:
  Tensor forward(const Tensor &x, const std::source_location &loc) override;
};

/// GELU, exact ("none") or with the tanh approximation ("tanh").
class GELU : public Module {
public:
  explicit GELU(std::string approximate = "none") : approximate_(std::move(approximate)) {}
  Tensor forward(const Tensor &x, const std::source_location &loc) override;

private:
  std::string approximate_;
};

/// Runs its children in order, each on the previous one's output. Owns them.
class Sequential : public Module {
public:
  Sequential() = default;
  /// Appends a child; the name prefixes its parameters.
  Module &add(std::string name, std::unique_ptr<Module> child);
  /// Constructs and appends a child of type M.
  template <typename M, typename... Args> M &add(std::string name, Args &&...args) {
    auto child = std::make_unique<M>(std::forward<Args>(args)...);
    M &ref = *child;
    add(std::move(name), std::move(child));
    return ref;
  }
  Tensor forward(const Tensor &x, const std::source_location &loc) override;
  size_t size() const { return owned_.size(); }
  Module &operator[](size_t i) const { return *owned_[i]; }

private:
  std::vector<std::unique_ptr<Module>> owned_;
};

} // namespace nn
} // namespace kiln
