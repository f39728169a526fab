//===- Cudnn.cpp - Convolutions and pools through cuDNN, opened on first use ===//
//
// cuDNN 9's legacy API (descriptors, cudnnConvolutionForward,
// cudnnPoolingForward) over NCHW f32 tensors as Kiln stores them: no
// reorders. Convolutions compute in f32 without TF32 (CUDNN_FMA_MATH), as
// the reference does; the algorithm is cuDNN's first heuristic choice
// (cudnnGetConvolutionForwardAlgorithm_v7) whose workspace is at most
// kMaxWorkspace, chosen once per convolution at load; one workspace per
// device, grown to the largest. The bias is a second call
// (cudnnAddTensor over a 1 x K x 1 x 1 tensor) and a residual (Z, of Y's
// shape) a third, except with a relu after them: then one call,
// cudnnConvolutionBiasActivationForward, relu(conv + Z + bias) (a zero bias
// where the convolution has none; Z with alpha2 1, or Y itself with 0),
// the activation propagating NaN as Kiln's relu does. Max pooling propagates
// NaN as max does; average pooling counts the taps inside the input, or
// inside the padded input (CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING).
//
// Like cuBLASLt (Note [cuBLASLt opened on first use] in CublasLt.cpp),
// libcudnn.so.9 is opened with dlopen when the first convolution or pool
// is planned; it loads its sub-libraries (libcudnn_cnn.so.9, ...) from the
// loader's path.
//
//===----------------------------------------------------------------------===//

#include "runtime/DynamicSymbols.h"
#include "runtime/cuda/CudaDriver.h"

#include <cudnn.h>

#include <vector>

namespace kiln::runtime::cuda {
namespace {

struct DnnLib {
  decltype(&::cudnnCreate) create = nullptr;
  decltype(&::cudnnDestroy) destroy = nullptr;
  decltype(&::cudnnGetErrorString) errorString = nullptr;
  decltype(&::cudnnSetStream) setStream = nullptr;
  decltype(&::cudnnCreateTensorDescriptor) tensorCreate = nullptr;
  decltype(&::cudnnSetTensor4dDescriptor) tensorSet = nullptr;
  decltype(&::cudnnDestroyTensorDescriptor) tensorDestroy = nullptr;
  decltype(&::cudnnCreateFilterDescriptor) filterCreate = nullptr;
  decltype(&::cudnnSetFilter4dDescriptor) filterSet = nullptr;
  decltype(&::cudnnDestroyFilterDescriptor) filterDestroy = nullptr;
  decltype(&::cudnnCreateConvolutionDescriptor) convCreate = nullptr;
  decltype(&::cudnnSetConvolution2dDescriptor) convSet = nullptr;
  decltype(&::cudnnSetConvolutionGroupCount) convGroups = nullptr;
  decltype(&::cudnnSetConvolutionMathType) convMath = nullptr;
  decltype(&::cudnnDestroyConvolutionDescriptor) convDestroy = nullptr;
  decltype(&::cudnnGetConvolution2dForwardOutputDim) convOutput = nullptr;
  decltype(&::cudnnGetConvolutionForwardAlgorithm_v7) convAlgos = nullptr;
  decltype(&::cudnnGetConvolutionForwardWorkspaceSize) convWorkspace = nullptr;
  decltype(&::cudnnConvolutionForward) convForward = nullptr;
  decltype(&::cudnnAddTensor) addTensor = nullptr;
  decltype(&::cudnnConvolutionBiasActivationForward) convBiasActivation = nullptr;
  decltype(&::cudnnCreateActivationDescriptor) activationCreate = nullptr;
  decltype(&::cudnnSetActivationDescriptor) activationSet = nullptr;
  decltype(&::cudnnDestroyActivationDescriptor) activationDestroy = nullptr;
  decltype(&::cudnnCreatePoolingDescriptor) poolCreate = nullptr;
  decltype(&::cudnnSetPooling2dDescriptor) poolSet = nullptr;
  decltype(&::cudnnDestroyPoolingDescriptor) poolDestroy = nullptr;
  decltype(&::cudnnGetPooling2dForwardOutputDim) poolOutput = nullptr;
  decltype(&::cudnnPoolingForward) poolForward = nullptr;
  std::string error; ///< why cuDNN cannot be used; empty when it can
};

constexpr const char *kDnn = "cuDNN (libcudnn.so.9)";
/// The most workspace one convolution's algorithm may take.
constexpr size_t kMaxWorkspace = size_t(256) << 20;

const DnnLib &dnn() {
  static const DnnLib d = [] {
    DnnLib d;
    std::string why;
    void *lib = openCudaLibrary("libcudnn.so.9", why);
    if (!lib) {
      d.error = "no cuDNN on this machine (libcudnn.so.9, which the CUDA toolkit's cuDNN or "
                "PyTorch's wheels install, could not be opened: " +
                why + ")";
      return d;
    }
    bindSymbol(lib, "cudnnCreate", d.create, kDnn, d.error);
    bindSymbol(lib, "cudnnDestroy", d.destroy, kDnn, d.error);
    bindSymbol(lib, "cudnnGetErrorString", d.errorString, kDnn, d.error);
    bindSymbol(lib, "cudnnSetStream", d.setStream, kDnn, d.error);
    bindSymbol(lib, "cudnnCreateTensorDescriptor", d.tensorCreate, kDnn, d.error);
    bindSymbol(lib, "cudnnSetTensor4dDescriptor", d.tensorSet, kDnn, d.error);
    bindSymbol(lib, "cudnnDestroyTensorDescriptor", d.tensorDestroy, kDnn, d.error);
    bindSymbol(lib, "cudnnCreateFilterDescriptor", d.filterCreate, kDnn, d.error);
    bindSymbol(lib, "cudnnSetFilter4dDescriptor", d.filterSet, kDnn, d.error);
    bindSymbol(lib, "cudnnDestroyFilterDescriptor", d.filterDestroy, kDnn, d.error);
    bindSymbol(lib, "cudnnCreateConvolutionDescriptor", d.convCreate, kDnn, d.error);
    bindSymbol(lib, "cudnnSetConvolution2dDescriptor", d.convSet, kDnn, d.error);
    bindSymbol(lib, "cudnnSetConvolutionGroupCount", d.convGroups, kDnn, d.error);
    bindSymbol(lib, "cudnnSetConvolutionMathType", d.convMath, kDnn, d.error);
    bindSymbol(lib, "cudnnDestroyConvolutionDescriptor", d.convDestroy, kDnn, d.error);
    bindSymbol(lib, "cudnnGetConvolution2dForwardOutputDim", d.convOutput, kDnn, d.error);
    bindSymbol(lib, "cudnnGetConvolutionForwardAlgorithm_v7", d.convAlgos, kDnn, d.error);
    bindSymbol(lib, "cudnnGetConvolutionForwardWorkspaceSize", d.convWorkspace, kDnn, d.error);
    bindSymbol(lib, "cudnnConvolutionForward", d.convForward, kDnn, d.error);
    bindSymbol(lib, "cudnnAddTensor", d.addTensor, kDnn, d.error);
    bindSymbol(lib, "cudnnConvolutionBiasActivationForward", d.convBiasActivation, kDnn, d.error);
    bindSymbol(lib, "cudnnCreateActivationDescriptor", d.activationCreate, kDnn, d.error);
    bindSymbol(lib, "cudnnSetActivationDescriptor", d.activationSet, kDnn, d.error);
    bindSymbol(lib, "cudnnDestroyActivationDescriptor", d.activationDestroy, kDnn, d.error);
    bindSymbol(lib, "cudnnCreatePoolingDescriptor", d.poolCreate, kDnn, d.error);
    bindSymbol(lib, "cudnnSetPooling2dDescriptor", d.poolSet, kDnn, d.error);
    bindSymbol(lib, "cudnnDestroyPoolingDescriptor", d.poolDestroy, kDnn, d.error);
    bindSymbol(lib, "cudnnGetPooling2dForwardOutputDim", d.poolOutput, kDnn, d.error);
    bindSymbol(lib, "cudnnPoolingForward", d.poolForward, kDnn, d.error);
    return d;
  }();
  return d;
}

/// False, with `error` "CALL: cuDNN's message", unless `s` is success.
bool check(cudnnStatus_t s, const char *call, std::string &error) {
  if (s == CUDNN_STATUS_SUCCESS)
    return true;
  const char *msg = dnn().errorString ? dnn().errorString(s) : nullptr;
  error = std::string(call) + ": " + (msg ? msg : "cuDNN status " + std::to_string(s));
  return false;
}

/// An NCHW f32 tensor descriptor, or false with `error`.
bool tensor(cudnnTensorDescriptor_t &t, int64_t n, int64_t c, int64_t h, int64_t w,
            std::string &error) {
  const DnnLib &d = dnn();
  return check(d.tensorCreate(&t), "cudnnCreateTensorDescriptor", error) &&
         check(d.tensorSet(t, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, static_cast<int>(n),
                           static_cast<int>(c), static_cast<int>(h), static_cast<int>(w)),
               "cudnnSetTensor4dDescriptor", error);
}

void *ptr(DevicePtr v) {
  return reinterpret_cast<void *>(static_cast<uintptr_t>(v));
}

class ConvPlan final : public LibraryPlan {
public:
  ~ConvPlan() override {
    const DnnLib &d = dnn();
    for (cudnnTensorDescriptor_t t : {x, y, bias})
      if (t)
        d.tensorDestroy(t);
    if (w)
      d.filterDestroy(w);
    if (conv)
      d.convDestroy(conv);
    if (activation)
      d.activationDestroy(activation);
    if (zeroBias)
      device->free(zeroBias);
  }
  ConvCall call;
  cudnnActivationDescriptor_t activation = nullptr;
  /// With relu and no bias of its own: K zeros for the fused call.
  DevicePtr zeroBias = 0;
  CudaDevice *device = nullptr;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnConvolutionFwdAlgo_t algo{};
  size_t workspace = 0;
  std::shared_ptr<void> keep; ///< the device's handle and workspace
};

class PoolPlan final : public LibraryPlan {
public:
  ~PoolPlan() override {
    const DnnLib &d = dnn();
    for (cudnnTensorDescriptor_t t : {x, y})
      if (t)
        d.tensorDestroy(t);
    if (pool)
      d.poolDestroy(pool);
  }
  PoolCall call;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnPoolingDescriptor_t pool = nullptr;
  std::shared_ptr<void> keep;
};

bool fitsInt(std::initializer_list<int64_t> values) {
  for (int64_t v : values)
    if (v < 0 || v > (int64_t(1) << 30))
      return false;
  return true;
}

} // namespace

struct CudaDevice::Dnn {
  cudnnHandle_t handle = nullptr;
  DevicePtr workspace = 0;
  size_t workspaceBytes = 0;
  CudaDevice *device = nullptr;
  ~Dnn() {
    if (workspace)
      device->free(workspace);
    if (handle)
      dnn().destroy(handle);
  }
};

namespace {

/// The device's cuDNN handle, made on first use; false with `error`.
template <typename D>
bool ensureHandle(CudaDevice &device, std::shared_ptr<D> &state, std::string &error) {
  if (state)
    return true;
  const auto &d = dnn();
  if (!d.error.empty()) {
    error = d.error;
    return false;
  }
  auto s = std::make_shared<D>();
  s->device = &device;
  if (!device.makeCurrent(error) || !check(d.create(&s->handle), "cudnnCreate", error))
    return false;
  state = std::move(s);
  return true;
}

} // namespace

std::unique_ptr<LibraryPlan> CudaDevice::planConv(const ConvCall &call, std::string &error) {
  if (!ensureHandle(*this, dnn_, error))
    return nullptr;
  const auto &d = dnn();
  const std::string what = " (" + call.str() + ")";
  if (!fitsInt({call.n, call.c, call.h, call.w, call.k, call.r, call.s, call.padH, call.padW,
                call.strideH, call.strideW, call.dilationH, call.dilationW, call.group})) {
    error = "sizes past cuDNN's int" + what;
    return nullptr;
  }
  auto p = std::make_unique<ConvPlan>();
  p->call = call;
  p->keep = dnn_;
  int on = 0, oc = 0, oh = 0, ow = 0;
  const bool ok =
      tensor(p->x, call.n, call.c, call.h, call.w, error) &&
      tensor(p->y, call.n, call.k, call.outH, call.outW, error) &&
      ((!call.hasBias && !call.relu) || tensor(p->bias, 1, call.k, 1, 1, error)) &&
      (!call.relu ||
       (check(d.activationCreate(&p->activation), "cudnnCreateActivationDescriptor", error) &&
        check(d.activationSet(p->activation, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0),
              "cudnnSetActivationDescriptor", error))) &&
      check(d.filterCreate(&p->w), "cudnnCreateFilterDescriptor", error) &&
      check(d.filterSet(p->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, static_cast<int>(call.k),
                        static_cast<int>(call.c / call.group), static_cast<int>(call.r),
                        static_cast<int>(call.s)),
            "cudnnSetFilter4dDescriptor", error) &&
      check(d.convCreate(&p->conv), "cudnnCreateConvolutionDescriptor", error) &&
      check(d.convSet(p->conv, static_cast<int>(call.padH), static_cast<int>(call.padW),
                      static_cast<int>(call.strideH), static_cast<int>(call.strideW),
                      static_cast<int>(call.dilationH), static_cast<int>(call.dilationW),
                      CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
            "cudnnSetConvolution2dDescriptor", error) &&
      check(d.convGroups(p->conv, static_cast<int>(call.group)), "cudnnSetConvolutionGroupCount",
            error) &&
      check(d.convMath(p->conv, CUDNN_FMA_MATH), "cudnnSetConvolutionMathType", error) &&
      check(d.convOutput(p->conv, p->x, p->w, &on, &oc, &oh, &ow),
            "cudnnGetConvolution2dForwardOutputDim", error);
  if (!ok) {
    error += what;
    return nullptr;
  }
  if (on != call.n || oc != call.k || oh != call.outH || ow != call.outW) {
    error = "cuDNN makes its output " + std::to_string(on) + "x" + std::to_string(oc) + "x" +
            std::to_string(oh) + "x" + std::to_string(ow) + what;
    return nullptr;
  }
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int found = 0;
  if (!makeCurrent(error) || !check(d.convAlgos(dnn_->handle, p->x, p->w, p->conv, p->y,
                                                CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &found, perf),
                                    "cudnnGetConvolutionForwardAlgorithm_v7", error)) {
    error += what;
    return nullptr;
  }
  bool chosen = false;
  for (int i = 0; i < found && !chosen; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= kMaxWorkspace &&
        perf[i].mathType != CUDNN_TENSOR_OP_MATH &&
        perf[i].mathType != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) {
      p->algo = perf[i].algo;
      p->workspace = perf[i].memory;
      chosen = true;
    }
  if (!chosen) {
    error = "cuDNN has no f32 algorithm for it within " + std::to_string(kMaxWorkspace >> 20) +
            " MiB of workspace" + what;
    return nullptr;
  }
  p->device = this;
  if (call.relu && !call.hasBias) {
    const std::vector<float> zeros(static_cast<size_t>(call.k), 0.0f);
    if (!alloc(zeros.size() * sizeof(float), p->zeroBias, error) ||
        !copyToDevice(p->zeroBias, zeros.data(), zeros.size() * sizeof(float), error))
      return nullptr;
  }
  if (p->workspace > dnn_->workspaceBytes) {
    DevicePtr grown = 0;
    if (!alloc(p->workspace, grown, error))
      return nullptr;
    if (dnn_->workspace)
      free(dnn_->workspace);
    dnn_->workspace = grown;
    dnn_->workspaceBytes = p->workspace;
  }
  return p;
}

bool CudaDevice::conv(const LibraryPlan &plan, DevicePtr x, DevicePtr w, DevicePtr bias,
                      DevicePtr z, DevicePtr y, std::string &error) {
  const auto &d = dnn();
  const auto &p = static_cast<const ConvPlan &>(plan);
  const float one = 1.0f, zero = 0.0f;
  if (p.call.relu) { // one call: act(conv + 1 * z + bias), or 0 * y without a residual
    if (!makeCurrent(error) ||
        !check(d.setStream(dnn_->handle, static_cast<cudaStream_t>(stream_)), "cudnnSetStream",
               error) ||
        !check(d.convBiasActivation(
                   dnn_->handle, &one, p.x, ptr(x), p.w, ptr(w), p.conv, p.algo,
                   ptr(dnn_->workspace), p.workspace, p.call.hasResidual ? &one : &zero, p.y,
                   ptr(p.call.hasResidual ? z : y), p.bias, ptr(p.call.hasBias ? bias : p.zeroBias),
                   p.activation, p.y, ptr(y)),
               "cudnnConvolutionBiasActivationForward", error)) {
      error += " (" + p.call.str() + ")";
      return false;
    }
    return true;
  }
  if (!makeCurrent(error) ||
      !check(d.setStream(dnn_->handle, static_cast<cudaStream_t>(stream_)), "cudnnSetStream",
             error) ||
      !check(d.convForward(dnn_->handle, &one, p.x, ptr(x), p.w, ptr(w), p.conv, p.algo,
                           ptr(dnn_->workspace), p.workspace, &zero, p.y, ptr(y)),
             "cudnnConvolutionForward", error) ||
      (p.call.hasBias &&
       !check(d.addTensor(dnn_->handle, &one, p.bias, ptr(bias), &one, p.y, ptr(y)),
              "cudnnAddTensor", error)) ||
      (p.call.hasResidual && // after the bias, as the graph adds them
       !check(d.addTensor(dnn_->handle, &one, p.y, ptr(z), &one, p.y, ptr(y)), "cudnnAddTensor",
              error))) {
    error += " (" + p.call.str() + ")";
    return false;
  }
  return true;
}

std::unique_ptr<LibraryPlan> CudaDevice::planPool(const PoolCall &call, std::string &error) {
  if (!ensureHandle(*this, dnn_, error))
    return nullptr;
  const auto &d = dnn();
  const std::string what = " (" + call.str() + ")";
  if (!fitsInt({call.n, call.c, call.h, call.w, call.r, call.s, call.padH, call.padW, call.strideH,
                call.strideW})) {
    error = "sizes past cuDNN's int" + what;
    return nullptr;
  }
  auto p = std::make_unique<PoolPlan>();
  p->call = call;
  p->keep = dnn_;
  const cudnnPoolingMode_t mode = call.kind == PoolCall::Kind::Max ? CUDNN_POOLING_MAX_DETERMINISTIC
                                  : call.countPad ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                                  : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
  int on = 0, oc = 0, oh = 0, ow = 0;
  const bool ok = tensor(p->x, call.n, call.c, call.h, call.w, error) &&
                  tensor(p->y, call.n, call.c, call.outH, call.outW, error) &&
                  check(d.poolCreate(&p->pool), "cudnnCreatePoolingDescriptor", error) &&
                  check(d.poolSet(p->pool, mode, CUDNN_PROPAGATE_NAN, static_cast<int>(call.r),
                                  static_cast<int>(call.s), static_cast<int>(call.padH),
                                  static_cast<int>(call.padW), static_cast<int>(call.strideH),
                                  static_cast<int>(call.strideW)),
                        "cudnnSetPooling2dDescriptor", error) &&
                  check(d.poolOutput(p->pool, p->x, &on, &oc, &oh, &ow),
                        "cudnnGetPooling2dForwardOutputDim", error);
  if (!ok) {
    error += what;
    return nullptr;
  }
  if (on != call.n || oc != call.c || oh != call.outH || ow != call.outW) {
    error = "cuDNN makes its output " + std::to_string(on) + "x" + std::to_string(oc) + "x" +
            std::to_string(oh) + "x" + std::to_string(ow) + what;
    return nullptr;
  }
  return p;
}

bool CudaDevice::pool(const LibraryPlan &plan, DevicePtr x, DevicePtr y, std::string &error) {
  const auto &p = static_cast<const PoolPlan &>(plan);
  const float one = 1.0f, zero = 0.0f;
  if (!makeCurrent(error) ||
      !check(dnn().setStream(dnn_->handle, static_cast<cudaStream_t>(stream_)), "cudnnSetStream",
             error) ||
      !check(dnn().poolForward(dnn_->handle, p.pool, &one, p.x, ptr(x), &zero, p.y, ptr(y)),
             "cudnnPoolingForward", error)) {
    error += " (" + p.call.str() + ")";
    return false;
  }
  return true;
}

} // namespace kiln::runtime::cuda
