//===- Cuda.cpp - Run models compiled for a GPU from C++ ------------------===//
//
// include/kiln/Cuda.h over runtime/cuda: the artifact loaded by
// CudaArtifact.h, run by CudaModel on a CudaDevice; error strings become a
// kiln::Error. Without the CUDA backend (KILN_HAS_CUDA unset) every entry
// throws saying so.
//
//===----------------------------------------------------------------------===//
#include "kiln/Cuda.h"
#include "api/ExecutableImpl.h"
#include "ir/Type.h"

#include <mutex>

#ifdef KILN_HAS_CUDA
#include "runtime/cuda/CudaArtifact.h"
#endif

namespace kiln {

#ifdef KILN_HAS_CUDA

struct CudaModel::Impl {
  std::unique_ptr<runtime::cuda::CudaDevice> device;
  std::unique_ptr<runtime::cuda::CudaModel> model;
  std::string path;
  /// Runs share the model's arena and stream: one at a time.
  std::mutex running;
  std::vector<const runtime::cuda::CudaModelSpec::Buffer *> ports(bool inputs) const {
    using Role = runtime::cuda::CudaModelSpec::Buffer::Role;
    return model->spec().ports(inputs ? Role::Input : Role::Output);
  }
};

CudaModel CudaModel::load(const std::string &path) {
  runtime::cuda::CudaArtifact artifact;
  std::string error;
  if (!runtime::cuda::loadCudaArtifact(path, artifact, error))
    throw Error(error);
  CudaModel m;
  m.impl_->path = path;
  m.impl_->device = runtime::cuda::CudaDevice::open(error);
  if (!m.impl_->device)
    throw Error("CUDA artifact '" + path + "': " + error);
  m.impl_->model =
      runtime::cuda::CudaModel::load(*m.impl_->device, std::move(artifact.spec), error);
  if (!m.impl_->model)
    throw Error("CUDA artifact '" + path + "': loading it on " + m.impl_->device->name() + ": " +
                error);
  return m;
}

std::vector<Tensor> CudaModel::run(const std::vector<Tensor> &inputs) {
  const auto ins = impl_->ports(true), outs = impl_->ports(false);
  if (inputs.size() != ins.size())
    throw Error("CUDA artifact '" + impl_->path + "' takes " + std::to_string(ins.size()) +
                " inputs, given " + std::to_string(inputs.size()));
  std::vector<const void *> in;
  for (size_t i = 0; i < ins.size(); ++i) {
    if (inputs[i].dtype() != ins[i]->dtype || inputs[i].shape() != ins[i]->shape)
      throw Error("CUDA artifact '" + impl_->path + "': input " + std::to_string(i) + " (%" +
                  ins[i]->name + ") is " + inputs[i].type().str() + "; the model takes " +
                  std::string(dtypeName(ins[i]->dtype)) + sizesStr(ins[i]->shape));
    in.push_back(inputs[i].rawData());
  }
  std::vector<Tensor> result;
  std::vector<void *> out;
  for (const auto *b : outs) {
    result.push_back(Tensor::zeros(b->dtype, b->shape));
    out.push_back(result.back().mutableRawData());
  }
  std::string error;
  std::lock_guard<std::mutex> one(impl_->running);
  if (!impl_->model->run(in, out, error))
    throw Error("CUDA artifact '" + impl_->path + "': " + error);
  return result;
}

void CudaModel::runOnDevice(const std::vector<uint64_t> &inputs,
                            const std::vector<uint64_t> &outputs) {
  std::string error;
  std::lock_guard<std::mutex> one(impl_->running);
  if (!impl_->model->runOnDevice(inputs, outputs, error))
    throw Error("CUDA artifact '" + impl_->path + "': " + error);
}

std::vector<PortInfo> CudaModel::inputs() const {
  std::vector<PortInfo> out;
  for (const auto *b : impl_->ports(true))
    out.push_back({b->name, b->dtype, b->shape});
  return out;
}

std::vector<PortInfo> CudaModel::outputs() const {
  std::vector<PortInfo> out;
  for (const auto *b : impl_->ports(false))
    out.push_back({b->name, b->dtype, b->shape});
  return out;
}

std::string CudaModel::summary() const {
  return impl_->device->name() + ", " + impl_->model->imageUsed() + ", " +
         impl_->model->graphNote();
}

#else

struct CudaModel::Impl {};

namespace {
[[noreturn]] void noCuda() {
  throw Error(kBuiltWithoutCuda);
}
} // namespace

CudaModel CudaModel::load(const std::string &) {
  noCuda();
}
std::vector<Tensor> CudaModel::run(const std::vector<Tensor> &) {
  noCuda();
}
void CudaModel::runOnDevice(const std::vector<uint64_t> &, const std::vector<uint64_t> &) {
  noCuda();
}
std::vector<PortInfo> CudaModel::inputs() const {
  noCuda();
}
std::vector<PortInfo> CudaModel::outputs() const {
  noCuda();
}
std::string CudaModel::summary() const {
  noCuda();
}

#endif

CudaModel::CudaModel() : impl_(std::make_unique<Impl>()) {}
CudaModel::CudaModel(CudaModel &&) noexcept = default;
CudaModel &CudaModel::operator=(CudaModel &&) noexcept = default;
CudaModel::~CudaModel() = default;

} // namespace kiln
