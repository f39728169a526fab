//===- CublasLt.cpp - Matrix products through cuBLASLt, opened on first use ===//
//
// Note [Row-major products in cuBLASLt]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// cuBLASLt's matrices are column-major; Kiln's are row-major. A row-major
// m x n matrix is the column-major n x m matrix of its transpose, so
//
//   D = op(A) @ op(B)     is computed as     D^T = op(B)^T @ op(A)^T
//
// with cuBLASLt's "A" our B and its "B" our A, each read as stored (its
// column-major view is the transpose) and transposed again where the
// GemmCall says so: B (k x n, row-major) is the column-major n x k matrix
// op(B)^T itself (no transpose, leading dim n); B stored n x k (transB) is
// the column-major k x n matrix B^T, which must be transposed (leading dim
// k). The same for A with m. D^T is n x m column-major (leading dim n), and
// a bias over D's columns is cuBLASLt's per-row bias of D^T (CUBLASLT_
// EPILOGUE_BIAS, n long). Computed in f32 (CUBLAS_COMPUTE_32F, no TF32),
// within matmul's bound of the op table.
//
// Note [cuBLASLt opened on first use]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// libcublasLt.so.13 is 517 MiB and comes with the toolkit (or PyTorch's
// wheels), not with the driver: like the driver (Note [The CUDA driver
// opened on first use] in CudaDriver.cpp) it is opened with dlopen, here
// on the first product a model plans, so that a model without one never
// needs it. It is looked for on the loader's path, then in
// /usr/local/cuda/lib64.
//
//===----------------------------------------------------------------------===//

#include "runtime/DynamicSymbols.h"
#include "runtime/cuda/CudaDriver.h"

#include <cublasLt.h>
#include <cuda.h>

namespace kiln::runtime::cuda {
namespace {

struct Lt {
  decltype(&::cublasLtCreate) create = nullptr;
  decltype(&::cublasLtDestroy) destroy = nullptr;
  decltype(&::cublasLtGetStatusString) statusString = nullptr;
  decltype(&::cublasLtMatmulDescCreate) descCreate = nullptr;
  decltype(&::cublasLtMatmulDescDestroy) descDestroy = nullptr;
  decltype(&::cublasLtMatmulDescSetAttribute) descSet = nullptr;
  decltype(&::cublasLtMatrixLayoutCreate) layoutCreate = nullptr;
  decltype(&::cublasLtMatrixLayoutDestroy) layoutDestroy = nullptr;
  decltype(&::cublasLtMatrixLayoutSetAttribute) layoutSet = nullptr;
  decltype(&::cublasLtMatmulPreferenceCreate) prefCreate = nullptr;
  decltype(&::cublasLtMatmulPreferenceDestroy) prefDestroy = nullptr;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) prefSet = nullptr;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&::cublasLtMatmul) matmul = nullptr;
  std::string error; ///< why cuBLASLt cannot be used; empty when it can
};

constexpr const char *kLt = "cuBLASLt (libcublasLt.so.13)";

const Lt &lt() {
  static const Lt l = [] {
    Lt l;
    std::string why;
    void *lib = openCudaLibrary("libcublasLt.so.13", why);
    if (!lib) {
      l.error = "no cuBLASLt on this machine (libcublasLt.so.13, which the CUDA toolkit or "
                "PyTorch's wheels install, could not be opened: " +
                why + ")";
      return l;
    }
    bindSymbol(lib, "cublasLtCreate", l.create, kLt, l.error);
    bindSymbol(lib, "cublasLtDestroy", l.destroy, kLt, l.error);
    bindSymbol(lib, "cublasLtGetStatusString", l.statusString, kLt, l.error);
    bindSymbol(lib, "cublasLtMatmulDescCreate", l.descCreate, kLt, l.error);
    bindSymbol(lib, "cublasLtMatmulDescDestroy", l.descDestroy, kLt, l.error);
    bindSymbol(lib, "cublasLtMatmulDescSetAttribute", l.descSet, kLt, l.error);
    bindSymbol(lib, "cublasLtMatrixLayoutCreate", l.layoutCreate, kLt, l.error);
    bindSymbol(lib, "cublasLtMatrixLayoutDestroy", l.layoutDestroy, kLt, l.error);
    bindSymbol(lib, "cublasLtMatrixLayoutSetAttribute", l.layoutSet, kLt, l.error);
    bindSymbol(lib, "cublasLtMatmulPreferenceCreate", l.prefCreate, kLt, l.error);
    bindSymbol(lib, "cublasLtMatmulPreferenceDestroy", l.prefDestroy, kLt, l.error);
    bindSymbol(lib, "cublasLtMatmulPreferenceSetAttribute", l.prefSet, kLt, l.error);
    bindSymbol(lib, "cublasLtMatmulAlgoGetHeuristic", l.heuristic, kLt, l.error);
    bindSymbol(lib, "cublasLtMatmul", l.matmul, kLt, l.error);
    return l;
  }();
  return l;
}

/// False, with `error` "CALL: cuBLASLt's message", unless `s` is success.
bool check(cublasStatus_t s, const char *call, std::string &error) {
  if (s == CUBLAS_STATUS_SUCCESS)
    return true;
  const char *msg = lt().statusString ? lt().statusString(s) : nullptr;
  error = std::string(call) + ": " + (msg ? msg : "cuBLAS status " + std::to_string(s));
  return false;
}

/// The workspace cuBLASLt may use per product.
constexpr size_t kWorkspaceBytes = size_t(32) << 20;

class LtPlan final : public LibraryPlan {
public:
  ~LtPlan() override {
    const Lt &l = lt();
    for (cublasLtMatrixLayout_t layout : {x, y, c, d})
      if (layout)
        l.layoutDestroy(layout);
    if (desc)
      l.descDestroy(desc);
  }
  GemmCall call;
  cublasLtMatmulDesc_t desc = nullptr;
  // cuBLASLt's A (our B), B (our A), C and D (Note [Row-major products in
  // cuBLASLt]).
  cublasLtMatrixLayout_t x = nullptr, y = nullptr, c = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  std::shared_ptr<void> blas; ///< keeps the handle and workspace alive
};

} // namespace

struct CudaDevice::Blas {
  cublasLtHandle_t handle = nullptr;
  DevicePtr workspace = 0;
  CudaDevice *device = nullptr;
  ~Blas() {
    if (workspace)
      device->free(workspace);
    if (handle)
      lt().destroy(handle);
  }
};

std::unique_ptr<LibraryPlan> CudaDevice::planGemm(const GemmCall &call, std::string &error) {
  const Lt &l = lt();
  if (!l.error.empty()) {
    error = l.error;
    return nullptr;
  }
  if (!makeCurrent(error))
    return nullptr;
  if (!blas_) {
    auto b = std::make_shared<Blas>();
    b->device = this;
    if (!check(l.create(&b->handle), "cublasLtCreate", error) ||
        !alloc(kWorkspaceBytes, b->workspace, error))
      return nullptr;
    blas_ = std::move(b);
  }
  auto p = std::make_unique<LtPlan>();
  p->call = call;
  p->blas = blas_;
  const cudaDataType_t type = CUDA_R_32F;
  const cublasOperation_t opX = call.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opY = call.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  const std::string what = " (" + call.str() + ")";
  auto layout = [&](cublasLtMatrixLayout_t &out, uint64_t rows, uint64_t cols, int64_t stride) {
    const int32_t batch = static_cast<int32_t>(call.batch);
    return check(l.layoutCreate(&out, type, rows, cols, static_cast<int64_t>(rows)),
                 "cublasLtMatrixLayoutCreate", error) &&
           check(l.layoutSet(out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch),
                 "cublasLtMatrixLayoutSetAttribute", error) &&
           check(l.layoutSet(out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                             sizeof stride),
                 "cublasLtMatrixLayoutSetAttribute", error);
  };
  const uint64_t m = static_cast<uint64_t>(call.m), n = static_cast<uint64_t>(call.n),
                 k = static_cast<uint64_t>(call.k);
  const cublasLtEpilogue_t epilogue =
      call.hasBias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  if (!check(l.descCreate(&p->desc, CUBLAS_COMPUTE_32F, type), "cublasLtMatmulDescCreate", error) ||
      !check(l.descSet(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opX, sizeof opX),
             "cublasLtMatmulDescSetAttribute", error) ||
      !check(l.descSet(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opY, sizeof opY),
             "cublasLtMatmulDescSetAttribute", error) ||
      !check(l.descSet(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue),
             "cublasLtMatmulDescSetAttribute", error) ||
      !layout(p->x, call.transB ? k : n, call.transB ? n : k, call.strideB) ||
      !layout(p->y, call.transA ? m : k, call.transA ? k : m, call.strideA) ||
      !layout(p->c, n, m, call.strideC) || !layout(p->d, n, m, call.strideD)) {
    error += what;
    return nullptr;
  }
  // The pointers' alignment: 16 bytes at batch 0 (the arena's are 64,
  // cudaMalloc's 256; CudaModel::runOnDevice asks for 16), then each batch
  // stride's.
  uint32_t align = 16;
  for (int64_t stride : {call.strideA, call.strideB, call.strideC, call.strideD})
    if (call.batch > 1 && stride != 0)
      while (align > 4 && (static_cast<uint64_t>(stride) * 4) % align != 0)
        align /= 2;
  cublasLtMatmulPreference_t pref = nullptr;
  auto setAlign = [&](cublasLtMatmulPreferenceAttributes_t attr) {
    return check(l.prefSet(pref, attr, &align, sizeof align),
                 "cublasLtMatmulPreferenceSetAttribute", error);
  };
  const uint64_t workspace = kWorkspaceBytes;
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const bool ok =
      check(l.prefCreate(&pref), "cublasLtMatmulPreferenceCreate", error) &&
      check(l.prefSet(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace),
            "cublasLtMatmulPreferenceSetAttribute", error) &&
      setAlign(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES) &&
      setAlign(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES) &&
      setAlign(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES) &&
      setAlign(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES) &&
      check(l.heuristic(blas_->handle, p->desc, p->x, p->y, call.hasC ? p->c : p->d, p->d, pref, 1,
                        &result, &found),
            "cublasLtMatmulAlgoGetHeuristic", error);
  if (pref)
    l.prefDestroy(pref);
  if (ok && found == 0)
    error = "cublasLtMatmulAlgoGetHeuristic: no algorithm";
  if (!ok || found == 0) {
    error += what;
    return nullptr;
  }
  p->algo = result.algo;
  return p;
}

bool CudaDevice::gemm(const LibraryPlan &plan, DevicePtr a, DevicePtr b, DevicePtr c,
                      DevicePtr bias, DevicePtr d, std::string &error) {
  const Lt &l = lt();
  const auto &p = static_cast<const LtPlan &>(plan);
  const GemmCall &call = p.call;
  auto ptr = [](DevicePtr v) { return reinterpret_cast<void *>(static_cast<uintptr_t>(v)); };
  if (call.hasBias) {
    const void *biasPtr = ptr(bias);
    if (!check(l.descSet(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &biasPtr, sizeof biasPtr),
               "cublasLtMatmulDescSetAttribute", error))
      return false;
  }
  const float alpha = static_cast<float>(call.alpha), beta = static_cast<float>(call.beta);
  // Without C, beta is 0 and C is D, with D's layout (cuBLASLt's in-place
  // form: the same address and the same layout).
  const DevicePtr cIn = call.hasC ? c : d;
  if (!makeCurrent(error) ||
      !check(l.matmul(blas_->handle, p.desc, &alpha, ptr(b), p.x, ptr(a), p.y, &beta, ptr(cIn),
                      call.hasC ? p.c : p.d, ptr(d), p.d, &p.algo, ptr(blas_->workspace),
                      kWorkspaceBytes, static_cast<cudaStream_t>(stream_)),
             "cublasLtMatmul", error)) {
    error += " (" + call.str() + ")";
    return false;
  }
  return true;
}

} // namespace kiln::runtime::cuda
